import { FakeClock, MemoryLogger, ShutdownError } from '@csiplug/core';
import type { TaskEvent, TaskHook } from '@csiplug/hooks';
import { ClientStateDB, openClientState } from '@csiplug/state';
import type { DriverTaskConfig, ExitResult, RecoverResult, TaskDriver, TaskHandle } from '../driver/driver';
import type { TaskSpec } from '../model';
import { TaskRunner } from './task-runner';

/** A driver whose processes exit when the test says so. */
class FakeDriver implements TaskDriver {
  readonly name = 'fake';
  readonly started: DriverTaskConfig[] = [];
  readonly stops: string[] = [];
  private nextPid = 100;
  private readonly exits = new Map<number, (e: ExitResult) => void>();
  private readonly done = new Map<number, ExitResult>();
  recoverAs: RecoverResult = { running: true };
  /** What adopt() finds in a task dir (the executor's own record). */
  adoptable: TaskHandle | undefined;
  private disposed = false;

  adopt(): TaskHandle | undefined {
    return this.adoptable;
  }

  async start(config: DriverTaskConfig): Promise<TaskHandle> {
    this.started.push(config);
    const pid = this.nextPid++;
    return { version: 1, driver: 'exec', allocId: config.allocId, taskName: config.taskName, taskDir: config.taskDir, executorPid: pid + 1000, executorStartTime: '1', pid, startTime: '1', startedAt: 0 };
  }
  async recover(): Promise<RecoverResult> {
    return this.recoverAs;
  }
  wait(handle: TaskHandle): Promise<ExitResult> {
    const known = this.done.get(handle.pid);
    if (known) return Promise.resolve(known);
    return new Promise((resolve, reject) => {
      this.exits.set(handle.pid, resolve);
      if (this.disposed) reject(new ShutdownError('disposed'));
    });
  }
  exit(pid: number, exitCode: number | null, signal: string | null = null): void {
    const result = { exitCode, signal, finishedAt: 0 };
    this.done.set(pid, result);
    this.exits.get(pid)?.(result);
  }
  async stop(handle: TaskHandle, signal: NodeJS.Signals): Promise<ExitResult> {
    this.stops.push(`${handle.pid} ${signal}`);
    this.exit(handle.pid, null, signal);
    return this.done.get(handle.pid)!;
  }
  isRunning(handle: TaskHandle): boolean {
    return !this.done.has(handle.pid);
  }
  dispose(): void {
    this.disposed = true;
  }
}

const spec = (over: Partial<TaskSpec> = {}): TaskSpec => ({
  name: 'web',
  driver: 'exec',
  config: { command: '/bin/${APP}', args: ['--alloc', '${CSIPLUG_ALLOC_ID}'] },
  env: { APP: 'server' },
  volumeMounts: [],
  restart: { attempts: 2, interval: 60_000, delay: 1_000, mode: 'fail' },
  killSignal: 'SIGTERM',
  killTimeout: 5_000,
  ...over,
});

describe('TaskRunner', () => {
  let clock: FakeClock;
  let state: ClientStateDB;
  let driver: FakeDriver;
  let events: TaskEvent[];
  const alloc = { id: 'a1', jobId: 'j', group: 'g', volumes: [] };

  const runner = (task = spec(), hooks: TaskHook[] = []) =>
    new TaskRunner(alloc, task, '/tmp/none/web', hooks, {
      driver,
      state,
      clock,
      logger: new MemoryLogger(),
      variables: { CSIPLUG_ALLOC_ID: 'a1' },
      onEvent: (_t, e) => events.push(e),
      onStateChange: () => undefined,
    });

  beforeEach(() => {
    clock = new FakeClock(0);
    state = openClientState({ memory: true });
    driver = new FakeDriver();
    events = [];
  });
  afterEach(() => state.close());

  it('runs hooks around the process, interpolates config and env, and saves its handle and state', async () => {
    const order: string[] = [];
    const hook: TaskHook = {
      name: 'h',
      prestart: async () => {
        order.push('prestart');
        return { env: { FROM_HOOK: 'yes' } };
      },
      poststart: async () => void order.push('poststart'),
      stop: async () => void order.push('stop'),
    };
    const r = runner(spec(), [hook]);
    const done = r.run('start');
    await clock.advance(0);
    expect(driver.started[0]).toMatchObject({ command: '/bin/server', args: ['--alloc', 'a1'] });
    expect(driver.started[0]!.env).toMatchObject({ APP: 'server', FROM_HOOK: 'yes', CSIPLUG_ALLOC_ID: 'a1' });
    expect(state.getTaskHandle<TaskHandle>('a1', 'web')?.pid).toBe(100);
    expect(r.state.state).toBe('running');
    await r.stop();
    await done;
    expect(order).toEqual(['prestart', 'poststart', 'stop']);
    expect(driver.stops).toEqual(['100 SIGTERM']);
    expect(state.getTaskState<{ state: string }>('a1', 'web')?.state).toBe('dead');
  });

  it('restarts by policy after the delay, then fails once attempts are used up', async () => {
    const r = runner();
    const done = r.run('start');
    await clock.advance(0);
    driver.exit(100, 1);
    await clock.advance(999);
    expect(driver.started).toHaveLength(1);
    await clock.advance(1);
    expect(driver.started).toHaveLength(2);
    driver.exit(101, 1);
    await clock.advance(1_000);
    driver.exit(102, 1);
    await clock.advance(1_000);
    await done;
    expect(driver.started).toHaveLength(3);
    expect(r.state).toMatchObject({ state: 'dead', failed: true, restarts: 2 });
    expect(events.map((e) => e.type)).toEqual(['Started', 'Terminated', 'Restarting', 'Started', 'Terminated', 'Restarting', 'Started', 'Terminated', 'Not Restarting']);
  });

  it('stop during the restart delay does not start it again', async () => {
    const r = runner();
    void r.run('start');
    await clock.advance(0);
    driver.exit(100, 1);
    await clock.advance(10);
    await r.stop();
    await clock.advance(10_000);
    expect(driver.started).toHaveLength(1);
    expect(r.state.state).toBe('dead');
  });

  it('a hook asking for a restart gets the task killed and started again', async () => {
    let ctxRestart: ((why: string) => void) | undefined;
    const hook: TaskHook = {
      name: 'supervisor',
      poststart: async (ctx) => {
        ctxRestart = ctx.requestRestart;
      },
    };
    const r = runner(spec(), [hook]);
    void r.run('start');
    await clock.advance(0);
    ctxRestart!('plugin unhealthy');
    await clock.advance(0);
    expect(driver.stops).toEqual(['100 SIGTERM']);
    expect(driver.started).toHaveLength(2);
    expect(events.map((e) => e.type)).toContain('Restart Signaled');
    await r.stop();
  });

  it('restore re-attaches to a running task without starting it, in restore mode', async () => {
    const first = runner();
    void first.run('start');
    await clock.advance(0);
    first.detach(); // the agent goes away; the task keeps running
    expect(driver.stops).toEqual([]);
    const kinds: string[] = [];
    const r = runner(spec(), [{ name: 'h', poststart: async (ctx) => void kinds.push(ctx.kind) }]);
    void r.run('restore');
    await clock.advance(0);
    expect(driver.started).toHaveLength(1);
    expect(kinds).toEqual(['restore']);
    expect(r.state.state).toBe('running');
    expect(events.map((e) => e.type)).toContain('Reattached');
    await r.stop();
    expect(driver.stops).toEqual(['100 SIGTERM']);
  });

  it('restore leaves a task that had finished for good before the restart alone', async () => {
    const first = runner(spec({ restart: { attempts: 0, interval: 60_000, delay: 1_000, mode: 'fail' } }));
    const done = first.run('start');
    await clock.advance(0);
    driver.exit(100, 1);
    await done;
    expect(first.state).toMatchObject({ state: 'dead', failed: true });
    driver.recoverAs = { running: false, exit: { exitCode: 1, signal: null, finishedAt: 0 } };
    const r = runner();
    await r.run('restore');
    await clock.advance(60_000);
    expect(driver.started).toHaveLength(1);
    expect(r.state).toMatchObject({ state: 'dead', failed: true });
  });

  it('restore adopts a running task whose handle the last agent never saved, instead of starting another', async () => {
    const first = runner();
    void first.run('start');
    await clock.advance(0);
    first.detach();
    driver.adoptable = state.getTaskHandle<TaskHandle>('a1', 'web');
    state.deleteTask('a1', 'web'); // killed between the start and the save
    const r = runner();
    void r.run('restore');
    await clock.advance(0);
    expect(driver.started).toHaveLength(1);
    expect(r.state.state).toBe('running');
    expect(state.getTaskHandle<TaskHandle>('a1', 'web')?.pid).toBe(100);
    await r.stop();
    expect(driver.stops).toEqual(['100 SIGTERM']);
  });

  it('restore of a task that exited while the agent was away applies the restart policy', async () => {
    const first = runner();
    void first.run('start');
    await clock.advance(0);
    first.detach();
    driver.recoverAs = { running: false, exit: { exitCode: 2, signal: null, finishedAt: 0 } };
    const r = runner();
    void r.run('restore');
    await clock.advance(1_000);
    expect(driver.started).toHaveLength(2);
    expect(r.state.restarts).toBe(1);
    await r.stop();
  });
});
