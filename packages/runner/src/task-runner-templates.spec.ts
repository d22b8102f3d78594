// A task runner with template blocks (FakeDriver, a real task dir): the
// files are there before the driver starts the task, an env template's
// variables reach the task over its env block, a template that does not
// render fails the start as a setup failure under the restart policy, and a
// reload (the agent's SIGHUP) applies change_mode to the running task.
import { MemoryLogger } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import type { DriverTaskConfig, TaskHandle } from '@csiplug/driver';
import { FakeDriver } from '@csiplug/driver/testing';
import type { TaskEvent } from '@csiplug/hooks';
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

  const runner = (task: TaskSpec) =>
    new TaskRunner({ id: 'a1', jobId: 'j', group: 'g', volumes: [] }, task, taskDir, [], {
      driver,
      allocStore: new StateAllocStore(state),
      taskStates: writer,
      clock,
      logger: new MemoryLogger(),
      variables: { NOMAD_ALLOC_ID: 'a1' },
      onEvent: (_t, e) => events.push(e),
      onStateChange: () => undefined,
      random: () => 0,
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

  it('a task without templates has no templates to reload', () => {
    expect(runner(spec([], { templates: undefined })).templates).toBeUndefined();
  });
});
