// A task runner with template blocks (FakeDriver, a real task dir): the
// files are there before the driver starts the task, an env template's
// variables reach the task over its env block, a template that does not
// render fails the start as a setup failure under the restart policy, and a
// reload (the agent's SIGHUP) applies change_mode to the running task, or
// kills it and fails it when a template fails or a signal cannot be sent.
import { MemoryLogger } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import type { DriverTaskConfig, TaskHandle } from '@csiplug/driver';
import { FakeDriver } from '@csiplug/driver/testing';
import type { TaskEvent, TaskHook } from '@csiplug/hooks';
import { DEFAULT_TEMPLATE, type TaskSpec, type TaskTemplate } from '@csiplug/jobspec';
import { type ClientStateDB, openClientState } from '@csiplug/state';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { StateAllocStore } from './alloc-store';
import { TaskRunner } from './task-runner';
import { TaskStateWriter } from './task-state-writer';
import { TEMPLATE_RESTART_REASON } from './task-templates';

const template = (over: Partial<TaskTemplate>): TaskTemplate => ({ ...DEFAULT_TEMPLATE, splay: 0, destination: 'local/app.conf', ...over });

const spec = (templates: TaskTemplate[], over: Partial<TaskSpec> = {}): TaskSpec => ({
  name: 'web',
  driver: 'raw_exec',
  config: { command: '/bin/app', args: ['--port', '${PORT}'] },
  env: { PORT: '80', MODE: 'from-env-block' },
  volumeMounts: [],
  restart: { attempts: 1, interval: 60_000, delay: 1_000, mode: 'fail' },
  killSignal: 'SIGTERM',
  killTimeout: 5_000,
  templates,
  ...over,
});

/** A FakeDriver that notes, at each start, what the task's app.conf held. */
class SeeingDriver extends FakeDriver {
  readonly seen: string[] = [];
  override async start(config: DriverTaskConfig): Promise<TaskHandle> {
    const file = path.join(config.taskDir, 'local', 'app.conf');
    this.seen.push(fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '<none>');
    return super.start(config);
  }
}

describe('TaskRunner with templates', () => {
  let root: string;
  let taskDir: string;
  let clock: FakeClock;
  let state: ClientStateDB;
  let driver: SeeingDriver;
  let events: TaskEvent[];
  let writer: TaskStateWriter;

  beforeEach(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-runner-templates-'));
    taskDir = path.join(root, 'allocs', 'a1', 'web');
    fs.mkdirSync(path.join(taskDir, 'local'), { recursive: true });
    clock = new FakeClock(0);
    state = openClientState({ memory: true });
    driver = new SeeingDriver();
    events = [];
    writer = new TaskStateWriter(new StateAllocStore(state));
  });
  afterEach(() => {
    writer.dispose();
    state.dispose();
    fs.rmSync(root, { recursive: true, force: true });
  });

  const runner = (task: TaskSpec, hooks: TaskHook[] = [], random = () => 0) =>
    writer.flush() ??
    new TaskRunner({ id: 'a1', jobId: 'j', group: 'g', volumes: [] }, task, taskDir, hooks, {
      driver,
      allocStore: new StateAllocStore(state),
      taskStates: writer,
      clock,
      logger: new MemoryLogger(),
      variables: { NOMAD_ALLOC_ID: 'a1' },
      onEvent: (_t, e) => events.push(e),
      onStateChange: () => undefined,
      random,
    });
  const source = (text: string) => fs.writeFileSync(path.join(taskDir, 'local', 'in.tpl'), text);
  const types = () => events.map((e) => e.type);

  it('renders before the driver starts the task; an env template wins over the env block and reaches the command', async () => {
    const r = runner(
      spec([
        template({ data: 'alloc=${NOMAD_ALLOC_ID} mode={{ env "MODE" }}\n' }),
        template({ data: 'PORT=8080\nMODE=from-template\n', destination: 'secrets/app.env', env: true }),
      ]),
    );
    void r.run('start');
    await clock.advance(0);
    expect(driver.seen).toEqual(['alloc=a1 mode=from-env-block\n']);
    expect(driver.started[0]).toMatchObject({ command: '/bin/app', args: ['--port', '8080'] });
    expect(driver.started[0]!.env).toMatchObject({ PORT: '8080', MODE: 'from-template', NOMAD_ALLOC_ID: 'a1' });
    expect(types()).toEqual(['Started']);
    await r.stop();
  });

  it('a template that does not render fails the start as a setup failure, under the restart policy, and the driver is never asked', async () => {
    source('{{ base64Decode "!!" }}');
    const r = runner(spec([template({ source: 'local/in.tpl' })]));
    void r.run('start');
    await clock.advance(0);
    expect(driver.started).toHaveLength(0);
    expect(events[0]).toMatchObject({
      type: 'Setup Failure',
      failed: true,
      message:
        'Template failed: template "local/app.conf": line 1, column 4: base64Decode: "!!" is not standard base64 (A–Z a–z 0–9 + /, padded with =)',
    });
    expect(types()).not.toContain('Driver Failure');
    expect(types()).toContain('Restarting');
    // The file fixed before the policy's next attempt: the task starts.
    source('fixed');
    await clock.advance(1_000);
    expect(driver.seen).toEqual(['fixed']);
    expect(r.state.state).toBe('running');
    await r.stop();
  });

  it('on a reload, a changed restart template restarts the task, not counted as a failure, with the new file', async () => {
    source('v1');
    const r = runner(
      spec([template({ source: 'local/in.tpl' })], { restart: { attempts: 0, interval: 60_000, delay: 5_000, mode: 'fail' } }),
    );
    void r.run('start');
    await clock.advance(0);
    await r.templates!.reload(); // nothing changed
    expect(driver.stops).toEqual([]);
    source('v2');
    await r.templates!.reload();
    await clock.advance(0);
    expect(driver.seen).toEqual(['v1', 'v2']);
    expect(events.find((e) => e.type === 'Restart Signaled')?.message).toBe(TEMPLATE_RESTART_REASON);
    expect(r.state).toMatchObject({ state: 'running', failed: false, restarts: 1 });
    await r.stop();
  });

  it('on a reload, a changed signal template signals the task through the driver, which runs on', async () => {
    source('v1');
    const r = runner(spec([template({ source: 'local/in.tpl', changeMode: 'signal', changeSignal: 'SIGUSR1' })]));
    void r.run('start');
    await clock.advance(0);
    source('v2');
    await r.templates!.reload();
    expect(driver.signals).toEqual(['100 SIGUSR1']);
    expect(driver.stops).toEqual([]);
    expect(events.at(-1)).toMatchObject({ type: 'Signaling', message: 'Template re-rendered; sent SIGUSR1' });
    expect(fs.readFileSync(path.join(taskDir, 'local', 'app.conf'), 'utf8')).toBe('v2');
    await r.stop();
  });

  it('on a reload, a template that no longer renders kills the task and fails it, with restart attempts left (as Nomad)', async () => {
    source('v1');
    const r = runner(spec([template({ source: 'local/in.tpl' })]));
    void r.run('start');
    await clock.advance(0);
    source('{{ key "db" }}');
    await r.templates!.reload();
    await clock.advance(0);
    await clock.advance(60_000);
    expect(driver.seen).toEqual(['v1']); // never started again
    expect(r.state).toMatchObject({ state: 'dead', failed: true, restarts: 0 });
    const killing = events.find((e) => e.type === 'Killing');
    expect(killing).toMatchObject({ failed: true });
    expect(killing?.message).toMatch(/^Template failed: template "local\/app.conf": line 1, column 4: function "key" reads Consul/);
    expect(events.at(-1)).toMatchObject({ type: 'Not Restarting', failed: true });
    expect(fs.readFileSync(path.join(taskDir, 'local', 'app.conf'), 'utf8')).toBe('v1');
  });

  it('on a reload, a change_signal the driver cannot send kills the task and fails it (as Nomad)', async () => {
    source('v1');
    const r = runner(spec([template({ source: 'local/in.tpl', changeMode: 'signal', changeSignal: 'SIGUSR1' })]));
    void r.run('start');
    await clock.advance(0);
    driver.signalTask = async () => Promise.reject(new Error('no such process'));
    source('v2');
    await r.templates!.reload();
    await clock.advance(0);
    await clock.advance(60_000);
    expect(driver.seen).toEqual(['v1']);
    expect(r.state).toMatchObject({ state: 'dead', failed: true });
    expect(events.find((e) => e.type === 'Killing')?.message).toBe('Template failed to send signals [SIGUSR1]: no such process');
  });

  it('a fail that joins a restart whose kill failed is made on its own: the task is killed and fails', async () => {
    source('v1');
    const r = runner(spec([template({ source: 'local/in.tpl', changeMode: 'signal', changeSignal: 'SIGUSR1' })]));
    void r.run('start');
    await clock.advance(0);
    const stop = driver.stop.bind(driver);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let failNext = true;
    driver.stop = async (...args: Parameters<FakeDriver['stop']>) => {
      if (!failNext) return stop(...args);
      failNext = false;
      await gate;
      throw new Error('the executor did not answer');
    };
    r.restart('a hook asked'); // an uncounted restart: its kill hangs, then fails
    driver.signalTask = async () => Promise.reject(new Error('no such process'));
    source('v2');
    await r.templates!.reload(); // the fail joins the restart's kill
    release(); // which fails: the fail must kill on its own
    await clock.advance(0);
    await clock.advance(60_000);
    expect(r.state).toMatchObject({ state: 'dead', failed: true });
    expect(driver.seen).toEqual(['v1']);
  });

  it('a reload before a restored task is re-attached does nothing to it', async () => {
    source('v1');
    const first = runner(spec([template({ source: 'local/in.tpl', changeMode: 'signal', changeSignal: 'SIGUSR1' })]));
    void first.run('start');
    await clock.advance(0);
    first.detach();
    const recover = driver.recover.bind(driver);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    driver.recover = async (h) => (await gate, recover(h));
    const restored = runner(spec([template({ source: 'local/in.tpl', changeMode: 'signal', changeSignal: 'SIGUSR1' })]));
    void restored.run('restore');
    await clock.advance(0);
    source('v2');
    await restored.templates!.reload(); // not re-attached yet: nothing rendered, nothing sent
    expect(driver.signals).toEqual([]);
    expect(fs.readFileSync(path.join(taskDir, 'local', 'app.conf'), 'utf8')).toBe('v1');
    release();
    await clock.advance(0);
    await restored.templates!.reload();
    expect(driver.signals).toEqual(['100 SIGUSR1']);
    await restored.stop();
  });

  it('a reload while the task is not running renders nothing: its next start does', async () => {
    source('v1');
    const r = runner(spec([template({ source: 'local/in.tpl' })]));
    void r.run('start');
    await clock.advance(0);
    driver.exit(100, 1); // the policy restarts it after 1 s
    await clock.advance(0);
    source('v2');
    await r.templates!.reload();
    expect(fs.readFileSync(path.join(taskDir, 'local', 'app.conf'), 'utf8')).toBe('v1');
    await clock.advance(1_000);
    expect(driver.seen).toEqual(['v1', 'v2']);
    await r.stop();
  });

  it('a name only an env template gives reaches command and args (the env block does not have it)', async () => {
    const r = runner(
      spec([template({ data: 'LISTEN=9090\n', destination: 'secrets/app.env', env: true })], {
        config: { command: '/bin/app', args: ['--listen', '${LISTEN}'] },
      }),
    );
    void r.run('start');
    await clock.advance(0);
    expect(driver.started[0]).toMatchObject({ command: '/bin/app', args: ['--listen', '9090'] });
    expect(driver.started[0]!.env).toMatchObject({ LISTEN: '9090' });
    await r.stop();
  });

  it("renders with the node's values, in ${…} and in env lookups, at the start and on a reload, never in the task's env", async () => {
    source('v1 {{ env "node.unique.name" }} {{ env "attr.unique.hostname" }}');
    const r = runner(
      spec([
        template({ data: 'host=${attr.unique.hostname} dc={{ env "node.datacenter" }} m=${meta.rack}' }),
        template({ source: 'local/in.tpl', destination: 'local/b.conf' }),
      ]),
    );
    const nodeValues = { 'attr.unique.hostname': 'h1', 'node.unique.name': 'n1', 'node.datacenter': 'dc1', 'meta.rack': 'r7' };
    r.setVariables({ NOMAD_ALLOC_ID: 'a1' }, nodeValues);
    void r.run('start');
    await clock.advance(0);
    expect(types()).toEqual(['Started']);
    expect(driver.seen).toEqual(['host=h1 dc=dc1 m=r7']);
    expect(fs.readFileSync(path.join(taskDir, 'local', 'b.conf'), 'utf8')).toBe('v1 n1 h1');
    for (const name of Object.keys(nodeValues)) expect(driver.started[0]!.env).not.toHaveProperty([name]);
    source('v2 {{ env "node.unique.name" }}');
    await r.templates!.reload();
    await clock.advance(0);
    expect(fs.readFileSync(path.join(taskDir, 'local', 'b.conf'), 'utf8')).toBe('v2 n1');
    expect(types()).not.toContain('Killing');
    await r.stop();
  });

  it('a reload queued behind another does nothing to a task that restarted meanwhile, nor does one whose splay outlived its run', async () => {
    source('v1');
    const r = runner(
      spec([template({ source: 'local/in.tpl', changeMode: 'signal', changeSignal: 'SIGUSR1', splay: 10_000 })]),
      [],
      () => 0.5, // each change applies 5 s after its render
    );
    void r.run('start');
    await clock.advance(0);
    source('v2');
    const first = r.templates!.reload(); // renders v2, then waits its splay
    const queued = r.templates!.reload(); // asked for the same run, waits behind the first
    await clock.advance(0);
    driver.exit(100, 1); // the run both were asked for ends; the policy starts another after 1 s
    await clock.advance(1_000);
    expect(driver.started).toHaveLength(2);
    source('v3');
    await clock.advance(4_000); // the first's splay ends
    await clock.advance(10_000);
    await Promise.all([first, queued]);
    expect(driver.signals).toEqual([]);
    expect(driver.stops).toEqual([]);
    expect(fs.readFileSync(path.join(taskDir, 'local', 'app.conf'), 'utf8')).toBe('v2');
    await r.stop();
  });

  it("a task re-attached after an agent restart re-renders with the node's values too", async () => {
    const task = spec([template({ data: 'host=${attr.unique.hostname}' })]);
    const first = runner(task);
    first.setVariables({ NOMAD_ALLOC_ID: 'a1' }, { 'attr.unique.hostname': 'h1' });
    void first.run('start');
    await clock.advance(0);
    first.detach();
    fs.writeFileSync(path.join(taskDir, 'local', 'app.conf'), 'changed by hand');
    const r = runner(task);
    r.setVariables({ NOMAD_ALLOC_ID: 'a1' }, { 'attr.unique.hostname': 'h1' });
    void r.run('restore');
    await clock.advance(0);
    await r.templates!.reload();
    await clock.advance(0);
    expect(fs.readFileSync(path.join(taskDir, 'local', 'app.conf'), 'utf8')).toBe('host=h1');
    await r.stop();
  });

  it('a task without templates has no templates to reload', () => {
    expect(runner(spec([], { templates: undefined })).templates).toBeUndefined();
  });

  it("a task re-attached after an agent restart re-renders with its hooks' env from the restore", async () => {
    const hook: TaskHook = { name: 'endpoint', prestart: async () => ({ env: { CSI_ENDPOINT: 'unix:///csi/csi.sock' } }) };
    const task = spec([template({ data: 'endpoint=${CSI_ENDPOINT} v={{ env "V" }}' })], { env: { PORT: '80', V: '1' } });
    const first = runner(task, [hook]);
    void first.run('start');
    await clock.advance(0);
    expect(fs.readFileSync(path.join(taskDir, 'local', 'app.conf'), 'utf8')).toBe('endpoint=unix:///csi/csi.sock v=1');
    first.detach(); // the agent goes away; the task runs on
    fs.writeFileSync(path.join(taskDir, 'local', 'app.conf'), 'changed by hand');
    const r = runner(task, [hook]);
    void r.run('restore');
    await clock.advance(0);
    expect(r.state.state).toBe('running');
    await r.templates!.reload();
    await clock.advance(0);
    expect(fs.readFileSync(path.join(taskDir, 'local', 'app.conf'), 'utf8')).toBe('endpoint=unix:///csi/csi.sock v=1');
    expect(events.find((e) => e.type === 'Restart Signaled')?.message).toBe(TEMPLATE_RESTART_REASON);
    await r.stop();
  });
});
