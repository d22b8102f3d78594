import { MemoryLogger } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import { FakeDriver } from '@csiplug/driver/testing';
import type { AllocHook, CSIHookFactory, CSIPluginSupervisorFactory } from '@csiplug/hooks';
import type { TaskImagesService } from '@csiplug/images';
import { defaultExecConfig, type Alloc, type NodeAttributes, type TaskSpec } from '@csiplug/jobspec';
import { type ClientStateDB, openClientState } from '@csiplug/state';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { AllocRunner } from './alloc-runner';
import { StateAllocStore } from './alloc-store';
import { TaskStateWriter } from './task-state-writer';

/** The csi hook's prerun: volume "data" published at `hostPath`. */
const csiHook = (hostPath: string): AllocHook => ({
  name: 'csi',
  prerun: async () => ({ volumes: { data: { name: 'data', volumeId: 'v1', pluginId: 'p', hostPath, readOnly: false } } }),
  postrun: async () => undefined,
});

const NODE: NodeAttributes = {
  id: 'n1',
  name: 'storage-1',
  datacenter: 'eu-west',
  region: 'eu',
  nodeClass: 'fast',
  attributes: { 'unique.hostname': 'host-a', 'cpu.arch': 'amd64', 'unique.network.ip-address': '10.0.0.7' },
  meta: { rack: 'r7' },
};

/** Every path under `dir` (not following links). */
function walk(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? [p, ...walk(p)] : [p];
  });
}

describe("TaskSetup: a task's variables, the node's values and its volume destinations, resolved before it starts", () => {
  let dataDir: string;
  let published: string;
  let state: ClientStateDB;
  let driver: FakeDriver;
  let clock: FakeClock;
  let writer: TaskStateWriter;
  let events: { task: string; type: string; message: string }[];

  const task = (over: Partial<TaskSpec>): TaskSpec => ({
    name: 'server',
    driver: 'exec',
    isolated: true,
    config: { command: '/bin/sleep', args: ['100'] },
    env: {},
    volumeMounts: [],
    restart: { attempts: 0, interval: 60_000, delay: 0, mode: 'fail' },
    killSignal: 'SIGTERM',
    killTimeout: 1_000,
    ...over,
  });
  const allocOf = (tasks: TaskSpec[]): Alloc => ({
    id: '5a1e0b4c-77d2-4b0e-9a51-0c2b8f1d3e44',
    jobId: 'web',
    group: 'app',
    index: 0,
    name: 'web.app[0]',
    job: {
      id: 'web',
      name: 'web',
      groups: [
        {
          name: 'app',
          count: 1,
          restart: { attempts: 0, interval: 60_000, delay: 0, mode: 'fail' },
          volumes: [
            { name: 'data', type: 'csi', source: 'v1', accessMode: 'single-node-writer', attachmentMode: 'file-system', readOnly: false },
          ],
          tasks,
        },
      ],
    },
    desiredStatus: 'run',
    clientStatus: 'pending',
    createdAt: 0,
  });
  const start = async (
    tasks: TaskSpec[],
    node: NodeAttributes = NODE,
    how: 'start' | 'restore' = 'start',
    images?: TaskImagesService,
  ): Promise<AllocRunner> => {
    const r = new AllocRunner(allocOf(tasks), {
      dataDir,
      nodeId: 'n1',
      driver,
      allocStore: new StateAllocStore(state),
      taskStates: writer,
      exec: defaultExecConfig(),
      hostNetwork: () => false,
      rawExec: () => true,
      claimHeld: () => true,
      clock,
      logger: new MemoryLogger(),
      supervisors: {} as CSIPluginSupervisorFactory,
      csiHooks: { create: () => csiHook(published) } as unknown as CSIHookFactory,
      volumes: { list: () => [] },
      variables: {},
      node,
      ...(images ? { images } : {}),
      onTaskEvent: (_a, name, e) => events.push({ task: name, type: e.type, message: e.message }),
      onStatusChange: () => undefined,
    });
    await r.run(how);
    for (let i = 0; i < 5; i++) await clock.advance(0);
    return r;
  };
  const allocDir = () => path.join(dataDir, 'allocs', '5a1e0b4c-77d2-4b0e-9a51-0c2b8f1d3e44');

  beforeEach(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-tasksetup-'));
    published = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-published-'));
    state = openClientState({ memory: true });
    driver = new FakeDriver();
    clock = new FakeClock(0);
    writer = new TaskStateWriter(new StateAllocStore(state));
    events = [];
  });
  afterEach(() => {
    writer.dispose();
    state.dispose();
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.rmSync(published, { recursive: true, force: true });
  });

  it("an isolated task: ${NOMAD_ALLOC_DIR}/data is bound at /alloc/data; env and args get the node's values, which stay out of its env", async () => {
    const r = await start([
      task({
        config: {
          command: '/bin/plugin',
          args: ['--node-id=${node.unique.name}', '--ip=${attr.unique.network.ip-address}', '--data=${CSIPLUG_VOLUME_DATA}'],
        },
        env: { ARCH: '${attr.cpu.arch}', RACK: '${meta.rack}', WHERE: '${NOMAD_DC}/${NOMAD_REGION}/${node.class}' },
        volumeMounts: [{ volume: 'data', destination: '${NOMAD_ALLOC_DIR}/data', readOnly: false }],
      }),
    ]);
    const started = driver.started[0]!;
    expect(started.args).toEqual(['--node-id=storage-1', '--ip=10.0.0.7', '--data=/alloc/data']);
    expect(started.env).toMatchObject({
      ARCH: 'amd64',
      RACK: 'r7',
      WHERE: 'eu-west/eu/fast',
      CSIPLUG_VOLUME_DATA: '/alloc/data',
      NOMAD_ALLOC_DIR: '/alloc',
      NOMAD_SHORT_ALLOC_ID: '5a1e0b4c',
      NOMAD_ALLOC_NAME: 'web.app[0]',
      NOMAD_NAMESPACE: 'default',
    });
    expect(Object.keys(started.env).filter((k) => k.includes('.'))).toEqual([]);
    expect(started.isolation!.mounts).toContainEqual({ source: published, destination: '/alloc/data', readOnly: false });
    expect(started.isolation!.mounts!.map((m) => m.destination).filter((d) => d.includes('$'))).toEqual([]);
    r.detach();
  });

  it('a host process: ${NOMAD_ALLOC_DIR}/data is a link in the host alloc dir; no dir is ever named "${NOMAD_ALLOC_DIR}"', async () => {
    const r = await start([
      task({
        name: 'raw',
        driver: 'raw_exec',
        isolated: false,
        env: { DATA: '${CSIPLUG_VOLUME_DATA}' },
        volumeMounts: [{ volume: 'data', destination: '${NOMAD_ALLOC_DIR}/data', readOnly: false }],
      }),
    ]);
    const link = path.join(allocDir(), 'alloc', 'data');
    expect(fs.readlinkSync(link)).toBe(published);
    expect(driver.started[0]!.env).toMatchObject({ NOMAD_ALLOC_DIR: path.join(allocDir(), 'alloc'), DATA: published });
    expect(walk(allocDir()).filter((p) => p.includes('${'))).toEqual([]);
    r.detach();
  });

  it("a host process's link under a symlink planted in the shared dir is refused at start, naming it; nothing is made outside", async () => {
    const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-outside-'));
    try {
      // What an isolated task of the alloc can do in its /alloc: plant alloc/data -> outside.
      fs.mkdirSync(path.join(allocDir(), 'alloc'), { recursive: true });
      fs.symlinkSync(outside, path.join(allocDir(), 'alloc', 'data'));
      const r = await start([
        task({
          name: 'raw',
          driver: 'raw_exec',
          isolated: false,
          volumeMounts: [{ volume: 'data', destination: '${NOMAD_ALLOC_DIR}/data/newlink', readOnly: false }],
        }),
        task({ name: 'other', driver: 'raw_exec', isolated: false }),
      ]);
      expect(fs.readdirSync(outside)).toEqual([]);
      expect(driver.started.map((c) => c.taskName)).toEqual(['other']);
      expect(events.filter((e) => e.type === 'Setup Failure')).toEqual([
        {
          task: 'raw',
          type: 'Setup Failure',
          message: `volume_mount.destination: "\${NOMAD_ALLOC_DIR}/data/newlink" (${path.join(allocDir(), 'alloc', 'data', 'newlink')}): no link to volume "data" made: ${path.join(allocDir(), 'alloc', 'data')} is a symlink or not a dir; the agent makes links only through real dirs: remove it, or name another destination`,
        },
      ]);
      r.detach();
    } finally {
      fs.rmSync(outside, { recursive: true, force: true });
    }
  });

  it("a host process's ${NOMAD_TASK_DIR} or ${NOMAD_SECRETS_DIR} itself, or a file where the link goes, fails that task only, naming the field", async () => {
    fs.mkdirSync(path.join(allocDir(), 'file'), { recursive: true });
    fs.writeFileSync(path.join(allocDir(), 'file', 'conf'), 'mine');
    const hostTask = (name: string, destination: string) =>
      task({ name, driver: 'raw_exec', isolated: false, volumeMounts: [{ volume: 'data', destination, readOnly: false }] });
    const r = await start([
      hostTask('local', '${NOMAD_TASK_DIR}'),
      hostTask('secrets', '${NOMAD_SECRETS_DIR}/'),
      hostTask('file', 'conf'),
      hostTask('fine', '${NOMAD_TASK_DIR}/data'),
    ]);
    expect(driver.started.map((c) => c.taskName)).toEqual(['fine']);
    expect(fs.readlinkSync(path.join(allocDir(), 'fine', 'local', 'data'))).toBe(published);
    expect(fs.readFileSync(path.join(allocDir(), 'file', 'conf'), 'utf8')).toBe('mine');
    const failures = Object.fromEntries(events.filter((e) => e.type === 'Setup Failure').map((e) => [e.task, e.message]));
    expect(failures).toEqual({
      local: `volume_mount.destination: "\${NOMAD_TASK_DIR}" resolves to "${path.join(allocDir(), 'local', 'local')}", the task's own dir itself: name a dir inside it`,
      secrets: `volume_mount.destination: "\${NOMAD_SECRETS_DIR}/" resolves to "${path.join(allocDir(), 'secrets', 'secrets')}", the task's own dir itself: name a dir inside it`,
      file: `volume_mount.destination: "conf" (${path.join(allocDir(), 'file', 'conf')}): no link to volume "data" made: ${path.join(allocDir(), 'file', 'conf')} is there already and is not a symlink: remove it, or name another path`,
    });
    r.detach();
  });

  it('a destination a variable takes out of the task dirs is refused at start, naming it; nothing is linked there', async () => {
    const outside = path.join(dataDir, 'outside');
    const r = await start(
      [
        task({
          name: 'raw',
          driver: 'raw_exec',
          isolated: false,
          volumeMounts: [{ volume: 'data', destination: '${meta.dir}/x', readOnly: false }],
        }),
        task({
          name: 'meta',
          volumeMounts: [{ volume: 'data', destination: '/srv/${meta.zone}', readOnly: false }],
        }),
      ],
      { ...NODE, meta: { ...NODE.meta, dir: outside } },
    );
    expect(driver.started).toHaveLength(0);
    const failures = events.filter((e) => e.type === 'Setup Failure');
    expect(failures).toEqual(
      expect.arrayContaining([
        {
          task: 'raw',
          type: 'Setup Failure',
          message: `volume_mount.destination: "\${meta.dir}/x" resolves to "${outside}/x", which leaves the task's dirs (${path.join(allocDir(), 'raw')} and ${path.join(allocDir(), 'alloc')}): start it with \${NOMAD_TASK_DIR}, \${NOMAD_ALLOC_DIR} or \${NOMAD_SECRETS_DIR}, or write a path relative to the task dir`,
        },
        {
          task: 'meta',
          type: 'Setup Failure',
          message:
            "volume_mount.destination: ${meta.zone} has no value on this node: add zone to the agent's client { meta }, or change the job",
        },
      ]),
    );
    expect(fs.existsSync(outside)).toBe(false);
    expect(walk(allocDir()).filter((p) => p.includes('${'))).toEqual([]);
    r.detach();
  });

  const imageTask = (over: Partial<TaskSpec> = {}): TaskSpec =>
    task({
      name: 'app',
      driver: 'docker',
      config: { command: '', args: [] },
      image: { ref: 'r/app:1', forcePull: false, pullTimeout: 1_000, mounts: [] },
      ...over,
    });

  it("an image task's local/ and secrets/ stay its image user's when the agent restores the alloc; the shared /alloc is open to it (1777)", async () => {
    (await start([imageTask()])).detach();
    const taskDir = path.join(allocDir(), 'app');
    // Its start gave them to the image's user (task-image.ts); the task runs on while the agent restarts.
    for (const d of ['local', 'secrets']) fs.chownSync(path.join(taskDir, d), 1234, 1235);
    (await start([imageTask()], NODE, 'restore')).detach();
    for (const d of ['local', 'secrets']) expect(fs.statSync(path.join(taskDir, d))).toMatchObject({ uid: 1234, gid: 1235 });
    expect(fs.statSync(path.join(allocDir(), 'alloc')).mode & 0o7777).toBe(0o1777);
  });

  it("refuses an image task's bind of its task dir or the agent's files in it, before anything starts", async () => {
    const r = await start([
      imageTask({
        image: {
          ref: 'r/app:1',
          forcePull: false,
          pullTimeout: 1_000,
          mounts: [{ type: 'bind', source: '.', target: '/x', readOnly: false }],
        },
      }),
    ]);
    expect(events.filter((e) => e.type === 'Setup Failure')).toEqual([
      {
        task: 'app',
        type: 'Setup Failure',
        message: expect.stringMatching(
          /^the bind mount of \. at \/x is not the task's own: .*under local\/, secrets\/ or the alloc's \.\.\/alloc\//,
        ),
      },
    ]);
    expect(driver.started).toHaveLength(0);
    r.detach();
  });

  it('binds the file a template renders into local/ on a fresh alloc: the source is looked for at start, after the render', async () => {
    const rootfs = path.join(dataDir, 'rootfs');
    fs.mkdirSync(path.join(rootfs, 'etc'), { recursive: true });
    fs.writeFileSync(path.join(rootfs, 'etc/passwd'), 'root:x:0:0::/root:/bin/sh\n');
    const images: TaskImagesService = {
      prepare: async () => ({
        rootfs,
        config: { entrypoint: ['/bin/app'], env: [], labels: {}, diffIds: [] },
        digest: 'sha256:abc',
        reference: 'r/app:1',
        reused: false,
      }),
      release: async () => undefined,
      adopt: async () => undefined,
    };
    const r = await start(
      [
        imageTask({
          image: {
            ref: 'r/app:1',
            forcePull: false,
            pullTimeout: 1_000,
            mounts: [{ type: 'bind', source: 'local/app.conf', target: '/etc/app.conf', readOnly: true }],
          },
          templates: [
            {
              data: 'level = debug',
              destination: 'local/app.conf',
              perms: '0644',
              env: false,
              changeMode: 'noop',
              leftDelimiter: '{{',
              rightDelimiter: '}}',
              splay: 0,
              errorOnMissingKey: false,
            },
          ],
        }),
      ],
      NODE,
      'start',
      images,
    );
    // The image's /etc/passwd is read from disk and the template written: let real I/O finish, not only the fake clock —
    // bounded by real time (a count of turns ran out on a loaded CI machine before the disk answered).
    const deadline = Date.now() + 30_000;
    while (driver.started.length === 0 && events.every((e) => e.type !== 'Setup Failure') && Date.now() < deadline) {
      await new Promise((done) => setTimeout(done, 2));
      await clock.advance(0);
    }
    expect(events.filter((e) => e.type === 'Setup Failure')).toEqual([]);
    const conf = path.join(allocDir(), 'app', 'local', 'app.conf');
    expect(driver.started[0]!.isolation!.mounts).toContainEqual({ source: conf, destination: '/etc/app.conf', readOnly: true });
    expect(fs.readFileSync(conf, 'utf8')).toBe('level = debug');
    r.detach();
  });
});
