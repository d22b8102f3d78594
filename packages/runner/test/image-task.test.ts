// Image tasks (driver docker) end to end below the agent, on the real parts:
// Debian's docker-registry over TLS with htpasswd auth, an image built with
// umoci from the host's own programs (there is no busybox to pull) and
// pushed with skopeo, the image service's overlay roots and the exec
// driver's executor on runc. An AllocRunner runs the task as the agent does:
// it runs on the image's root with the image's Env, WorkingDir and
// Entrypoint (a task env var winning), its writes land in its own upper dir;
// a missing tag and a wrong password are Setup Failure events and nothing
// starts; an agent that goes away (runner detached, driver and image service
// dropped; the next ones made afresh over the same data dir and state, as a
// restarted agent makes them) re-attaches to the same pid, and a restart of
// the task then takes its mounted root again with no manifest request even
// for :latest; the same with the agent's parts in a child process that is
// killed -9 (test/support/image-agent-child.js, on the built packages).
// Every container and mount is gone at the end.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { MemoryLogger, RealClock } from '@csiplug/core';
import { ExecDriver, containerId, findRunc, type TaskHandle } from '@csiplug/driver';
import type { CSIHookFactory, CSIPluginSupervisorFactory } from '@csiplug/hooks';
import { TaskImages } from '@csiplug/images';
import { TestRegistry, buildTestImage, hostBinariesLayer } from '@csiplug/images/testing';
import { defaultExecConfig, type Alloc, type JobSpec, type TaskImage } from '@csiplug/jobspec';
import { openClientState, type ClientStateDB } from '@csiplug/state';
import { AllocRunner, StateAllocStore, TaskStateWriter } from '../src';

jest.setTimeout(180_000);

const RUNC = findRunc();
if (!RUNC) throw new Error('runc is not installed: `npm test` installs it (scripts/setup-engines.sh), or apt-get install runc');

const UA = 'csiplug-images';
let registry: TestRegistry;
let work: string;
let runcRoot: string;

async function until<T>(what: string, check: () => T | undefined | false | Promise<T | undefined | false>, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const mountsUnder = (dir: string): string[] =>
  fs
    .readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4] ?? '')
    .filter((p) => p === dir || p.startsWith(`${dir}/`));

const containers = (): string[] =>
  (JSON.parse(execFileSync(RUNC!, ['--root', runcRoot, 'list', '--format', 'json']).toString() || 'null') as { id: string }[] | null)?.map(
    (c) => c.id,
  ) ?? [];

const SCRIPT = [
  'echo "$IMAGE_ONLY" > /local/image-env',
  'echo "$SHARED" > /local/shared-env',
  'pwd > /local/cwd',
  'cat /etc/only-in-image > /local/only',
  // The host's Debian has /etc/debian_version; the image does not.
  'if [ -e /etc/debian_version ]; then echo host > /local/root; else echo image > /local/root; fi',
  'echo by-the-task > /srv/written',
  'exec sleep 3600',
].join('; ');

beforeAll(async () => {
  work = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'runner-image-task-')));
  runcRoot = path.join(work, 'runc');
  registry = await TestRegistry.start();
  const layout = path.join(work, 'layout');
  await buildTestImage(layout, 'app', {
    layers: [
      await hostBinariesLayer(['/bin/sh', '/bin/cat', '/bin/sleep']),
      { files: { 'etc/only-in-image': 'from the image', 'srv/.keep': '' } },
    ],
    entrypoint: ['/bin/sh', '-c'],
    env: ['IMAGE_ONLY=image-value', 'SHARED=image-value'],
    workingDir: '/srv',
  });
  await registry.push({ layoutDir: layout, tag: 'app' }, 'team/app:latest');
});

afterAll(async () => {
  await registry?.stop();
  if (work) {
    for (const id of containers()) execFileSync(RUNC!, ['--root', runcRoot, 'delete', '--force', id]);
    for (const p of mountsUnder(work).reverse()) execFileSync('/usr/bin/umount', ['-l', p]);
    expect(mountsUnder(work)).toEqual([]);
    fs.rmSync(work, { recursive: true, force: true });
  }
});

const image = (ref: string, extra: Partial<TaskImage> = {}): TaskImage => ({
  ref: `${registry.host}/${ref}`,
  forcePull: false,
  pullTimeout: 60_000,
  auth: { username: registry.username, password: registry.password },
  mounts: [],
  ...extra,
});

const jobOf = (id: string, taskImage: TaskImage, attempts = 0): JobSpec => ({
  id,
  name: id,
  groups: [
    {
      name: 'app',
      count: 1,
      restart: { attempts, interval: 600_000, delay: 0, mode: 'fail' },
      volumes: [],
      tasks: [
        {
          name: 'main',
          driver: 'docker',
          isolated: true,
          image: taskImage,
          // No command: the image's; args become its Cmd under its Entrypoint (/bin/sh -c).
          config: { command: '', args: [SCRIPT] },
          env: { SHARED: 'task-value' },
          volumeMounts: [],
          restart: { attempts, interval: 600_000, delay: 0, mode: 'fail' },
          killSignal: 'SIGTERM',
          killTimeout: 1_000,
        },
      ],
    },
  ],
});

const allocOf = (job: JobSpec): Alloc => ({
  id: `${job.id}-a1`,
  jobId: job.id,
  group: 'app',
  index: 0,
  name: `${job.id}.app[0]`,
  job,
  desiredStatus: 'run',
  clientStatus: 'pending',
  createdAt: Date.now(),
});

/** What one agent process holds: its driver, image service, state writer. Made again over the same data dir for a "restarted agent". */
class AgentParts {
  readonly logger = new MemoryLogger();
  readonly driver: ExecDriver;
  readonly images: TaskImages;
  readonly store: StateAllocStore;
  readonly writer: TaskStateWriter;
  readonly runners: AllocRunner[] = [];

  constructor(
    readonly dataDir: string,
    state: ClientStateDB,
  ) {
    this.driver = new ExecDriver(new RealClock(), this.logger, { runcRoot, pollInterval: 200 });
    this.images = new TaskImages({
      dataDir,
      docker: { pullActivityTimeout: 60_000, gc: { image: false, imageDelay: 0 } },
      certsDir: registry.certsDir,
    });
    this.store = new StateAllocStore(state);
    this.writer = new TaskStateWriter(this.store);
  }

  runner(alloc: Alloc): AllocRunner {
    const r = new AllocRunner(alloc, {
      dataDir: this.dataDir,
      nodeId: 'n1',
      driver: this.driver,
      allocStore: this.store,
      taskStates: this.writer,
      exec: defaultExecConfig(),
      hostNetwork: () => false,
      rawExec: () => false,
      clock: new RealClock(),
      logger: this.logger,
      supervisors: {} as CSIPluginSupervisorFactory,
      csiHooks: {} as CSIHookFactory,
      volumes: { list: () => [] },
      variables: {},
      images: this.images,
      onTaskEvent: () => undefined,
      onStatusChange: () => undefined,
    });
    this.runners.push(r);
    return r;
  }

  /** The agent goes away leaving its tasks (and their roots) as they are. */
  leave(): void {
    for (const r of this.runners) r.detach();
    this.writer.flush();
    this.writer.dispose();
    this.driver.dispose();
    this.images.dispose();
  }
}

const events = (r: AllocRunner) => r.taskStates().main!.events;

it('runs the task on its image, re-attaches after the agent goes away, restarts on its mounted root with no request, and a missing tag or a wrong password is a Setup Failure with nothing started', async () => {
  const dataDir = path.join(work, 'data');
  const state = openClientState({ memory: true });
  const first = new AgentParts(dataDir, state);
  const alloc = allocOf(jobOf('app', image('team/app:latest'), 1));
  const r = first.runner(alloc);
  await r.run('start');
  const taskDir = r.taskDir('main');
  const local = path.join(taskDir, 'local');
  await until(
    'the task running with its files written',
    () => fs.existsSync(path.join(local, 'root')) && r.alloc.clientStatus === 'running',
  );
  const read = (f: string) => fs.readFileSync(path.join(local, f), 'utf8').trim();
  // The image's root, not the host's: a file only the image has, and none of the host's.
  expect(read('only')).toBe('from the image');
  expect(read('root')).toBe('image');
  // The image's Env and WorkingDir, its Entrypoint with the task's args as Cmd; the task's env wins over the image's.
  expect(read('image-env')).toBe('image-value');
  expect(read('shared-env')).toBe('task-value');
  expect(read('cwd')).toBe('/srv');
  // Its write is in its own upper dir, not in a shared layer.
  expect(fs.readFileSync(path.join(taskDir, 'image/upper/srv/written'), 'utf8').trim()).toBe('by-the-task');
  const layersDir = path.join(dataDir, 'images/layers');
  for (const chain of fs.readdirSync(layersDir)) expect(fs.existsSync(path.join(layersDir, chain, 'fs/srv/written'))).toBe(false);
  const types = events(r).map((e) => e.type);
  expect(types).toContain('Pulled');
  expect(events(r).find((e) => e.type === 'Pulled')!.message).toMatch(/^Pulled image .*team\/app:latest, digest sha256:[0-9a-f]{64}$/);
  expect(events(r).find((e) => e.type === 'Started')!.message).toMatch(
    /^task started isolated by the docker driver \(image .*team\/app:latest, runc, pid \d+/,
  );
  expect(containers()).toEqual([containerId(alloc.id, 'main')]);
  const handle = first.store.getTaskHandle(alloc.id, 'main') as TaskHandle;

  // The agent goes away; a new one (new driver, image service, runner) over the same data dir re-attaches to the same pid.
  first.leave();
  await registry.syncAccessLog();
  const before = registry.accessLog(UA).length;
  const second = new AgentParts(dataDir, state);
  const restored = second.runner(second.store.getAllocation(alloc.id)!.alloc);
  await restored.run('restore');
  await until('re-attached', () => events(restored).some((e) => e.type === 'Reattached'));
  expect((second.store.getTaskHandle(alloc.id, 'main') as TaskHandle).pid).toBe(handle.pid);
  expect(restored.taskStates().main!.restarts).toBe(0);

  // The task dies; its restart takes the mounted root as it is: no manifest request, even for :latest, and its writes are still there.
  fs.rmSync(path.join(local, 'root'));
  execFileSync(RUNC!, ['--root', runcRoot, 'kill', containerId(alloc.id, 'main'), 'KILL']);
  await until('restarted', () => restored.taskStates().main!.restarts === 1 && fs.existsSync(path.join(local, 'root')));
  expect(read('root')).toBe('image');
  await registry.syncAccessLog();
  expect(registry.accessLog(UA).slice(before)).toEqual([]);
  expect(
    events(restored)
      .filter((e) => e.type === 'Pulled')
      .at(-1)!.message,
  ).toMatch(/^Image .*team\/app:latest is present, digest sha256:/);

  // A missing tag, and a wrong password: a Setup Failure saying so, and nothing started.
  const missing = second.runner(allocOf(jobOf('missing', image('team/app:nope'))));
  await missing.run('start');
  await until('the missing tag failed', () => missing.alloc.clientStatus === 'failed');
  expect(events(missing).find((e) => e.type === 'Setup Failure')!.message).toMatch(/team\/app:nope/);
  expect(events(missing).map((e) => e.type)).not.toContain('Started');
  const denied = second.runner(
    allocOf(jobOf('denied', image('team/app:latest', { auth: { username: registry.username, password: 'wrong' } }))),
  );
  await denied.run('start');
  await until('the auth failure failed', () => denied.alloc.clientStatus === 'failed').catch((err) => {
    throw new Error(`${(err as Error).message}: ${JSON.stringify(events(denied))}`);
  });
  expect(events(denied).find((e) => e.type === 'Setup Failure')!.message).toMatch(
    new RegExp(`${registry.host.replace(/\./g, '\\.')}.*(auth|credentials|denied|401)`, 'i'),
  );
  expect(events(denied).map((e) => e.type)).not.toContain('Started');
  expect(containers()).toEqual([containerId(alloc.id, 'main')]);

  // A stop ends the container; the alloc's release unmounts the task's root.
  await restored.stop();
  expect(containers()).toEqual([]);
  for (const x of [restored, missing, denied]) await x.releaseTaskImages();
  expect(mountsUnder(work)).toEqual([]);
  second.leave();
  state.dispose();
});

/** The agent's parts in a child process (test/support/image-agent-child.js): its task events, one JSON line each. */
class AgentChild {
  readonly events: { task: string; type: string; message: string; pid?: number }[] = [];
  private readonly child: ChildProcess;
  private readonly exited: Promise<void>;
  private stderr = '';

  constructor(mode: 'start' | 'restore', config: unknown) {
    this.child = spawn(process.execPath, [CHILD, mode, JSON.stringify(config)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let buffered = '';
    this.child.stdout!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
        this.events.push(JSON.parse(buffered.slice(0, nl)) as AgentChild['events'][number]);
        buffered = buffered.slice(nl + 1);
      }
    });
    this.child.stderr!.on('data', (chunk: Buffer) => (this.stderr += chunk.toString()));
    this.exited = new Promise((resolve) => this.child.once('exit', () => resolve()));
  }

  /** The first event of `type` from the `from`th on. */
  waitFor(type: string, from = 0): Promise<AgentChild['events'][number]> {
    return until(`a ${type} event from the agent child (stderr: ${this.stderr})`, () =>
      this.events.slice(from).find((e) => e.type === type),
    );
  }

  async kill9(): Promise<void> {
    this.child.kill('SIGKILL');
    await this.exited;
  }
}

const CHILD = path.join(__dirname, 'support', 'image-agent-child.js');
const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

it('kill -9 of the agent: the next one re-attaches to the same pid, and a restart of the task takes its mounted root with no manifest request', async () => {
  if (!fs.existsSync(path.join(__dirname, '..', 'dist', 'index.js'))) throw new Error('build the packages first: nx run runner:build');
  const alloc = allocOf(jobOf('killed', image('team/app:latest'), 1));
  const config = {
    dataDir: path.join(work, 'killed-data'),
    runcRoot,
    certsDir: registry.certsDir,
    statePath: path.join(work, 'killed-state.db'),
    alloc,
  };
  const children: AgentChild[] = [];
  try {
    const first = new AgentChild('start', config);
    children.push(first);
    const started = await first.waitFor('Started');
    expect(first.events.find((e) => e.type === 'Pulled')!.message).toMatch(/^Pulled image .*team\/app:latest, digest sha256:/);
    await first.kill9();
    expect(isAlive(started.pid!)).toBe(true);

    await registry.syncAccessLog();
    const before = registry.accessLog(UA).length;
    const second = new AgentChild('restore', config);
    children.push(second);
    const reattached = await second.waitFor('Reattached');
    expect(reattached.pid).toBe(started.pid);
    expect(reattached.message).toBe(`re-attached to pid ${started.pid}`);
    // The task dies: its restart runs on the root it had (still mounted), without asking the registry about :latest.
    const seen = second.events.length;
    execFileSync(RUNC!, ['--root', runcRoot, 'kill', containerId(alloc.id, 'main'), 'KILL']);
    const restarted = await second.waitFor('Started', seen);
    expect(restarted.pid).not.toBe(started.pid);
    expect(second.events.slice(seen).find((e) => e.type === 'Pulled')!.message).toMatch(
      /^Image .*team\/app:latest is present, digest sha256:/,
    );
    await registry.syncAccessLog();
    expect(registry.accessLog(UA).slice(before)).toEqual([]);
    expect(fs.readFileSync(path.join(config.dataDir, 'allocs', alloc.id, 'main', 'local', 'root'), 'utf8').trim()).toBe('image');
  } finally {
    for (const c of children) await c.kill9();
    if (containers().includes(containerId(alloc.id, 'main')))
      execFileSync(RUNC!, ['--root', runcRoot, 'delete', '--force', containerId(alloc.id, 'main')]);
  }
  // The alloc goes: its task's root is released by an image service that never saw it prepared (the agent that did was killed).
  const images = new TaskImages({ dataDir: config.dataDir, docker: { pullActivityTimeout: 60_000, gc: { image: false, imageDelay: 0 } } });
  await images.release(path.join(config.dataDir, 'allocs', alloc.id, 'main', 'image'));
  images.dispose();
  expect(mountsUnder(config.dataDir)).toEqual([]);
});
