import { MemoryLogger } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import { TaskAlreadyRunningError, TransientProbeError, type RecoverResult, type TaskHandle } from '@csiplug/driver';
import { FakeDriver } from '@csiplug/driver/testing';
import type { TaskEvent, TaskHook } from '@csiplug/hooks';
import { type ClientStateDB, openClientState } from '@csiplug/state';
import type { TaskSpec } from '@csiplug/jobspec';
import { StateAllocStore } from './alloc-store';
import { TaskRunner } from './task-runner';
import { TaskStateWriter } from './task-state-writer';

/** The error a read gets when the agent has run out of file descriptors. */
const emfile = () => Object.assign(new Error('EMFILE: too many open files, open /proc/100/stat'), { code: 'EMFILE' });

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

  let logger: MemoryLogger;
  /** The group write of task states; a test flushes it before it reads a state back. */
  let writer: TaskStateWriter;
  // A runner reads its task's saved state: what an earlier one asked for is written first, as an agent's stop does.
  const runner = (task = spec(), hooks: TaskHook[] = []) =>
    writer.flush() ??
    new TaskRunner(alloc, task, '/tmp/none/web', hooks, {
      driver,
      allocStore: new StateAllocStore(state),
      taskStates: writer,
      clock,
      logger,
      variables: { CSIPLUG_ALLOC_ID: 'a1' },
      onEvent: (_t, e) => events.push(e),
      onStateChange: () => undefined,
    });

  beforeEach(() => {
    clock = new FakeClock(0);
    state = openClientState({ memory: true });
    driver = new FakeDriver();
    events = [];
    logger = new MemoryLogger();
    writer = new TaskStateWriter(new StateAllocStore(state));
  });
  afterEach(() => {
    writer.dispose();
    state.dispose();
  });

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
    writer.flush();
    expect(state.getTaskState<{ state: string }>('a1', 'web')?.state).toBe('dead');
  });

  it("resolves the node's values in config and env, and keeps them out of the task's environment", async () => {
    const r = runner(
      spec({
        config: { command: '/bin/${APP}', args: ['--node', '${node.unique.name}', '--arch=${attr.cpu.arch}'] },
        env: { APP: 'server', RACK: '${meta.rack}' },
      }),
    );
    r.setVariables({ CSIPLUG_ALLOC_ID: 'a1' }, { 'node.unique.name': 'n7', 'attr.cpu.arch': 'arm64', 'meta.rack': 'r2' });
    const done = r.run('start');
    await clock.advance(0);
    expect(driver.started[0]).toMatchObject({ command: '/bin/server', args: ['--node', 'n7', '--arch=arm64'] });
    expect(driver.started[0]!.env).toEqual({ CSIPLUG_ALLOC_ID: 'a1', APP: 'server', RACK: 'r2' });
    await r.stop();
    await done;
  });

  it('a name with no value on this node (a meta key its agent lacks) fails the task at start, naming it; never started, not restarted', async () => {
    const r = runner(spec({ env: { APP: 'server', RACK: '${meta.rack}' } }));
    await r.run('start');
    expect(driver.started).toHaveLength(0);
    expect(r.state).toMatchObject({ state: 'dead', failed: true });
    expect(events.find((e) => e.type === 'Setup Failure')?.message).toBe(
      "env.RACK: ${meta.rack} has no value on this node: add rack to the agent's client { meta }, or change the job",
    );
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
    expect(events.map((e) => e.type)).toEqual([
      'Started',
      'Terminated',
      'Restarting',
      'Started',
      'Terminated',
      'Restarting',
      'Started',
      'Terminated',
      'Not Restarting',
    ]);
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

  it('a hook asking for a restart gets the task killed and started again after the policy delay', async () => {
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
    // Counted as a failed exit: the policy's delay (1 s) applies.
    expect(driver.started).toHaveLength(1);
    expect(r.state).toMatchObject({ state: 'pending', restarts: 1 });
    await clock.advance(1_000);
    expect(driver.started).toHaveLength(2);
    expect(events.map((e) => e.type)).toContain('Restart Signaled');
    await r.stop();
  });

  describe('restarts a hook asks for count against the restart policy', () => {
    /** A supervisor stand-in: hands the test its requestRestart each time the task starts. */
    const asking = () => {
      const hook = {
        restart: undefined as ((why: string) => void) | undefined,
        poststart: async (ctx: { requestRestart(why: string): void }) => void (hook.restart = ctx.requestRestart),
      };
      return hook;
    };
    const why = 'plugin hostpath did not become healthy within 30s: socket did not appear';

    it('mode "fail": after the allowed attempts the task is dead and failed, and the event says why', async () => {
      const hook = asking();
      const r = runner(spec({ restart: { attempts: 1, interval: 600_000, delay: 500, mode: 'fail' } }), [
        { name: 'supervisor', poststart: hook.poststart },
      ]);
      const done = r.run('start');
      await clock.advance(0);
      hook.restart!(why);
      await clock.advance(500);
      expect(driver.started).toHaveLength(2);
      expect(r.state).toMatchObject({ state: 'running', restarts: 1, failed: false });
      hook.restart!(why);
      await clock.advance(10_000);
      await done;
      expect(driver.started).toHaveLength(2);
      expect(driver.stops).toEqual(['100 SIGTERM', '101 SIGTERM']);
      expect(r.state).toMatchObject({ state: 'dead', failed: true, restarts: 1 });
      const last = events.at(-1)!;
      expect(last).toMatchObject({ type: 'Not Restarting', failed: true });
      expect(last.message).toBe(`${why}; restart attempts exhausted (1 in interval 10m, mode "fail")`);
      expect(events.filter((e) => e.type === 'Restarting').map((e) => e.message)).toEqual([
        `${why}; Restart within policy; restarting in 500 ms`,
      ]);
    });

    it('mode "delay": once attempts are used up the next start waits for the interval to end', async () => {
      const hook = asking();
      const r = runner(spec({ restart: { attempts: 1, interval: 60_000, delay: 1_000, mode: 'delay' } }), [
        { name: 'supervisor', poststart: hook.poststart },
      ]);
      void r.run('start');
      await clock.advance(0);
      hook.restart!(why);
      await clock.advance(1_000);
      expect(driver.started).toHaveLength(2);
      hook.restart!(why);
      await clock.advance(58_000); // the window began at 0 and ends at 60 s
      expect(driver.started).toHaveLength(2);
      expect(r.state.state).toBe('pending');
      await clock.advance(1_000);
      expect(driver.started).toHaveLength(3);
      expect(r.state).toMatchObject({ state: 'running', restarts: 2, failed: false });
      await r.stop();
    });

    it('a policy of no restarts fails the task at the first request', async () => {
      const hook = asking();
      const r = runner(spec({ restart: { attempts: 0, interval: 60_000, delay: 0, mode: 'fail' } }), [
        { name: 'supervisor', poststart: hook.poststart },
      ]);
      const done = r.run('start');
      await clock.advance(0);
      hook.restart!(why);
      await clock.advance(0);
      await done;
      expect(driver.started).toHaveLength(1);
      expect(r.state).toMatchObject({ state: 'dead', failed: true, restarts: 0 });
      expect(events.at(-1)!.message).toContain(why);
    });

    it('a second request while the first is under way joins it: one kill, one attempt', async () => {
      const hook = asking();
      const r = runner(spec({ restart: { attempts: 1, interval: 600_000, delay: 0, mode: 'fail' } }), [
        { name: 'supervisor', poststart: hook.poststart },
      ]);
      void r.run('start');
      await clock.advance(0);
      driver.stopExits = false; // the process takes its time to die
      hook.restart!(why);
      hook.restart!(why);
      await clock.advance(0);
      expect(driver.stops).toEqual(['100 SIGTERM']);
      driver.exit(100, null, 'SIGTERM');
      driver.stopExits = true;
      await clock.advance(0);
      expect(driver.started).toHaveLength(2);
      expect(r.state).toMatchObject({ state: 'running', restarts: 1 });
      await r.stop();
    });

    it('a restart the alloc asks for (a stale mount) is not counted: the task starts again at once, even with no attempts allowed', async () => {
      const r = runner(spec({ restart: { attempts: 0, interval: 60_000, delay: 5_000, mode: 'fail' } }));
      void r.run('start');
      await clock.advance(0);
      r.restart('volume data is stale');
      await clock.advance(0);
      expect(driver.started).toHaveLength(2);
      expect(r.state).toMatchObject({ state: 'running', failed: false, restarts: 1 });
      expect(events.find((e) => e.type === 'Restarting')?.message).toBe('restart requested: volume data is stale');
      await r.stop();
    });

    it('a restart whose kill fails is not left pending: the next request kills and restarts the task', async () => {
      const r = runner();
      void r.run('start');
      await clock.advance(0);
      const stop = driver.stop.bind(driver);
      let refuse = true;
      driver.stop = async (handle, signal, killTimeout) => {
        if (refuse) {
          refuse = false;
          throw new Error('EPERM: operation not permitted, kill 100');
        }
        return stop(handle, signal, killTimeout);
      };
      r.restart('volume data is stale');
      await clock.advance(0);
      expect(driver.started).toHaveLength(1);
      r.restart('volume data is still stale');
      await clock.advance(0);
      expect(driver.started).toHaveLength(2);
      expect(events.find((e) => e.type === 'Restarting')?.message).toBe('restart requested: volume data is still stale');
      await r.stop();
    });

    it('a request while the task is not running is ignored', async () => {
      const hook = asking();
      const r = runner(spec(), [{ name: 'supervisor', poststart: hook.poststart }]);
      void r.run('start');
      await clock.advance(0);
      driver.exit(100, 1); // policy: restart after 1 s
      await clock.advance(0);
      expect(r.state.state).toBe('pending');
      hook.restart!(why);
      await clock.advance(1_000);
      expect(driver.stops).toEqual([]);
      expect(driver.started).toHaveLength(2);
      expect(r.state).toMatchObject({ state: 'running', restarts: 1 });
      await r.stop();
    });
  });

  it('a handle that cannot be saved (a full disk) leaves the task running and is saved on the next change', async () => {
    const store = new StateAllocStore(state);
    let full = true;
    const putTaskHandle = store.putTaskHandle.bind(store);
    store.putTaskHandle = (allocId, task, handle) => {
      if (full) throw Object.assign(new Error('cannot write state.db: its filesystem is full'), { code: 'ESTATE_NO_SPACE' });
      putTaskHandle(allocId, task, handle);
    };
    const r = new TaskRunner(alloc, spec(), '/tmp/none/web', [], {
      driver,
      allocStore: store,
      taskStates: writer,
      clock,
      logger,
      variables: { CSIPLUG_ALLOC_ID: 'a1' },
      onEvent: (_t, e) => events.push(e),
      onStateChange: () => undefined,
    });
    void r.run('start');
    await clock.advance(0);
    expect(r.state.state).toBe('running');
    expect(state.getTaskHandle('a1', 'web')).toBeUndefined();
    expect(logger.records.some((e) => e.level === 'error' && e.msg.startsWith('could not save the task handle'))).toBe(true);
    full = false;
    await r.stop(); // the stop's events are changes: the handle goes with them
    expect(state.getTaskHandle<TaskHandle>('a1', 'web')?.pid).toBe(100);
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

  it('restore with a saved handle of an older run re-attaches to the newer run its executor recorded, without replaying the old exit', async () => {
    const first = runner();
    void first.run('start');
    await clock.advance(0);
    first.detach();
    const old = state.getTaskHandle<TaskHandle>('a1', 'web')!;
    // The last agent started run 200 and died before saving its handle; run 100 is long gone.
    driver.exit(old.pid, 1);
    driver.recoverAs = { running: false, exit: { exitCode: 1, signal: null, finishedAt: 0 } };
    driver.adoptable = { ...old, pid: 200, startTime: '2' };
    const r = runner(spec({ restart: { attempts: 0, interval: 60_000, delay: 1_000, mode: 'fail' } }));
    void r.run('restore');
    await clock.advance(0);
    expect(driver.started).toHaveLength(1);
    expect(r.state).toMatchObject({ state: 'running', failed: false });
    expect(state.getTaskHandle<TaskHandle>('a1', 'web')?.pid).toBe(200);
    expect(events.map((e) => e.type)).not.toContain('Terminated');
    await r.stop();
    expect(driver.stops).toEqual(['200 SIGTERM']);
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

  describe('a driver that cannot tell (the agent itself out of file descriptors)', () => {
    it("a wait that fails with EMFILE is not the task's death: the runner waits again, and a later real exit is handled as usual", async () => {
      driver.waitFailures.push(emfile(), emfile());
      const r = runner();
      void r.run('start');
      await clock.advance(0);
      expect(driver.waits).toBe(1);
      expect(r.state.state).toBe('running');
      await clock.advance(1_000); // the first backoff: waits again, fails again
      expect(driver.waits).toBe(2);
      await clock.advance(2_000); // the second, longer backoff: waits again, and this wait holds
      expect(driver.waits).toBe(3);
      await clock.advance(60_000);
      expect(driver.waits).toBe(3);
      expect(r.state).toMatchObject({ state: 'running', failed: false });
      expect(driver.started).toHaveLength(1);
      expect(driver.stops).toEqual([]);
      expect(events.map((e) => e.type)).toEqual(['Started']);
      expect(logger.find('waiting for the task failed; it is not taken for dead', 'warn')).toHaveLength(2);

      driver.exit(100, 1);
      await clock.advance(1_000);
      expect(events.map((e) => e.type)).toEqual(['Started', 'Terminated', 'Restarting', 'Started']);
      expect(r.state.exitCode).toBeUndefined(); // the new run's state
      expect(driver.started).toHaveLength(2);
      await r.stop();
      expect(r.state.state).toBe('dead');
    });

    it('any failed wait, not only EMFILE, is waited out rather than read as an exit', async () => {
      driver.waitFailures.push(new Error('EACCES: permission denied, open /proc/100/stat'));
      const r = runner(spec({ restart: { attempts: 0, interval: 60_000, delay: 1_000, mode: 'fail' } }));
      const done = r.run('start');
      await clock.advance(1_000);
      expect(driver.waits).toBe(2);
      expect(r.state.state).toBe('running');
      driver.exit(100, 0);
      await done;
      expect(r.state).toMatchObject({ state: 'dead', exitCode: 0 });
    });

    it('stop during the backoff ends the loop as a stop: stop hooks, dead, no restart', async () => {
      driver.waitFailures.push(emfile());
      const order: string[] = [];
      const r = runner(spec(), [{ name: 'h', stop: async () => void order.push('stop') }]);
      const done = r.run('start');
      await clock.advance(0);
      await r.stop();
      await done;
      expect(driver.stops).toEqual(['100 SIGTERM']);
      expect(order).toEqual(['stop']);
      expect(r.state.state).toBe('dead');
      expect(driver.started).toHaveLength(1);
    });

    it('detach during the backoff leaves the task running, not dead', async () => {
      driver.waitFailures.push(emfile());
      const r = runner();
      const done = r.run('start');
      await clock.advance(0);
      r.detach();
      await done;
      expect(r.state.state).toBe('running');
      writer.flush();
      expect(state.getTaskState<{ state: string }>('a1', 'web')?.state).toBe('running');
    });

    it('restore of a task that cannot be checked re-attaches (recover answers running), and the wait learns the truth later', async () => {
      const first = runner();
      void first.run('start');
      await clock.advance(0);
      first.detach();
      // The real ExecDriver.recover never throws for EMFILE: it answers "running" after its grace.
      let answer!: (r: RecoverResult) => void;
      driver.recoverGate = new Promise((r) => (answer = r));
      driver.waitFailures.push(emfile());
      const r = runner();
      void r.run('restore');
      await clock.advance(5_000);
      expect(r.state.state).toBe('running'); // as saved: not dead
      expect(events.map((e) => e.type)).not.toContain('Reattached');
      answer({ running: true });
      await clock.advance(0);
      expect(events.map((e) => e.type)).toContain('Reattached');
      const waitsBefore = driver.waits;
      await clock.advance(1_000); // the wait that failed with EMFILE is waited again
      expect(driver.waits).toBe(waitsBefore + 1);
      driver.exit(100, 0);
      await clock.advance(0);
      expect(events.map((e) => e.type)).toContain('Terminated');
      expect(driver.started).toHaveLength(1);
      await r.stop();
    });

    it('restore retries an adopt that cannot read the executor record, instead of starting the task again', async () => {
      const first = runner();
      void first.run('start');
      await clock.advance(0);
      first.detach();
      driver.adoptable = state.getTaskHandle<TaskHandle>('a1', 'web');
      state.deleteTask('a1', 'web');
      driver.adoptFailures.push(new TransientProbeError('a1', 'web', 'EMFILE', emfile()), emfile());
      const r = runner();
      void r.run('restore');
      await clock.advance(0);
      await clock.advance(1_000);
      expect(driver.started).toHaveLength(1);
      expect(r.state.state).not.toBe('dead');
      await clock.advance(2_000);
      expect(r.state.state).toBe('running');
      expect(state.getTaskHandle<TaskHandle>('a1', 'web')?.pid).toBe(100);
      expect(driver.started).toHaveLength(1);
      await r.stop();
    });

    it('stop during an adopt that cannot tell waits until it can, then stops the adopted task before the stop hooks', async () => {
      const first = runner();
      void first.run('start');
      await clock.advance(0);
      first.detach();
      driver.adoptable = state.getTaskHandle<TaskHandle>('a1', 'web');
      state.deleteTask('a1', 'web');
      driver.adoptFailures.push(emfile(), emfile(), emfile());
      const order: string[] = [];
      const r = runner(spec(), [{ name: 'h', stop: async () => void order.push('stop') }]);
      void r.run('restore');
      await clock.advance(0);
      let stopped = false;
      void r.stop().then(() => (stopped = true));
      await clock.advance(1_000);
      expect(order).toEqual([]);
      expect(r.state.state).not.toBe('dead');
      expect(stopped).toBe(false);
      await clock.advance(2_000); // the third adopt fails too
      expect(driver.adopts).toBe(3);
      expect(stopped).toBe(false);
      await clock.advance(4_000); // the fourth finds the task: it is stopped first
      expect(driver.stops).toEqual(['100 SIGTERM']);
      expect(stopped).toBe(true);
      expect(order).toEqual(['stop']);
      expect(r.state.state).toBe('dead');
      expect(driver.started).toHaveLength(1);
    });

    it('stop during the backoff of a failed wait keeps waiting for the real exit before the stop hooks', async () => {
      driver.stopExits = false;
      driver.waitFailures.push(new Error('EACCES: permission denied, open /proc/100/stat'), new Error('EACCES again'));
      const order: string[] = [];
      const r = runner(spec(), [{ name: 'h', stop: async () => void order.push('stop') }]);
      void r.run('start');
      await clock.advance(0);
      let stopped = false;
      void r.stop().then(() => (stopped = true));
      await clock.advance(0); // the backoff is cut short: waits again, fails again
      expect(driver.stops).toEqual(['100 SIGTERM']);
      expect(driver.waits).toBe(2);
      await clock.advance(10_000);
      expect(driver.waits).toBe(3); // still waiting, with a backoff
      expect(order).toEqual([]);
      expect(r.state.state).toBe('running');
      expect(stopped).toBe(false);
      driver.exit(100, null, 'SIGTERM');
      await clock.advance(0);
      expect(stopped).toBe(true);
      expect(order).toEqual(['stop']);
      expect(r.state).toMatchObject({ state: 'dead', signal: 'SIGTERM' });
      expect(events.map((e) => e.type)).toContain('Killed');
    });

    it('stop while recover is in flight (no signal could be sent) stops the task once recover says it runs', async () => {
      const first = runner();
      void first.run('start');
      await clock.advance(0);
      first.detach();
      writer.flush();
      // Saved between runs: a handle, but not "running", so stop() has nothing to signal.
      state.putTaskState('a1', 'web', { ...first.state, state: 'pending' });
      let answer!: (r: RecoverResult) => void;
      driver.recoverGate = new Promise((r) => (answer = r));
      const r = runner();
      void r.run('restore');
      await clock.advance(0);
      let stopped = false;
      void r.stop().then(() => (stopped = true));
      await clock.advance(0);
      expect(driver.stops).toEqual([]);
      answer({ running: true });
      await clock.advance(0);
      expect(driver.stops).toEqual(['100 SIGTERM']);
      expect(stopped).toBe(true);
      expect(r.state.state).toBe('dead');
      expect(events.map((e) => e.type)).not.toContain('Reattached');
    });

    it('stop while a re-attached task runs its prestart hooks (state not yet running) still stops it', async () => {
      const first = runner();
      void first.run('start');
      await clock.advance(0);
      first.detach();
      writer.flush();
      state.putTaskState('a1', 'web', { ...first.state, state: 'pending' });
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const slowPrestart: TaskHook = { name: 'slow', prestart: () => gate };
      const r = runner(spec(), [slowPrestart]);
      void r.run('restore');
      await clock.advance(0);
      let stopped = false;
      void r.stop().then(() => (stopped = true));
      await clock.advance(0);
      expect(driver.stops).toEqual([]);
      release();
      await clock.advance(0);
      expect(driver.stops).toEqual(['100 SIGTERM']);
      expect(stopped).toBe(true);
      expect(r.state.state).toBe('dead');
    });

    it('a start that fails for a fault of the agent itself is retried with a backoff, without using up a restart attempt', async () => {
      const enomem = Object.assign(new Error('spawn ENOMEM'), { code: 'ENOMEM', errno: -12, syscall: 'spawn' });
      const spawnError = Object.assign(new Error('could not start task "web": the executor could not be run: spawn EAGAIN'), {
        cause: Object.assign(new Error('spawn EAGAIN'), { code: 'EAGAIN' }),
      });
      driver.startFailures.push(emfile(), enomem, spawnError);
      const r = runner(spec({ restart: { attempts: 0, interval: 60_000, delay: 1_000, mode: 'fail' } }));
      void r.run('start');
      await clock.advance(0);
      expect(driver.started).toHaveLength(1);
      expect(r.state.state).not.toBe('dead');
      await clock.advance(1_000);
      expect(driver.started).toHaveLength(2);
      await clock.advance(2_000);
      expect(driver.started).toHaveLength(3);
      await clock.advance(3_999);
      expect(driver.started).toHaveLength(3);
      await clock.advance(1);
      expect(driver.started).toHaveLength(4);
      expect(r.state).toMatchObject({ state: 'running', failed: false, restarts: 0 });
      const failures = events.filter((e) => e.type === 'Driver Failure');
      expect(failures).toHaveLength(1);
      expect(failures[0]!.message).toMatch(/retried.*fault of the agent itself/);
      expect(failures[0]!.failed).toBeFalsy();
      await r.stop();
    });

    it('a start refused because the task already runs takes the running task over instead of failing', async () => {
      const running: TaskHandle = {
        version: 1,
        driver: 'exec',
        allocId: 'a1',
        taskName: 'web',
        taskDir: '/tmp/none/web',
        executorPid: 1500,
        executorStartTime: '1',
        pid: 500,
        startTime: '1',
        startedAt: 0,
      };
      driver.startFailures.push(new TaskAlreadyRunningError('a1', 'web', 500));
      driver.adoptable = running;
      const r = runner(spec({ restart: { attempts: 0, interval: 60_000, delay: 1_000, mode: 'fail' } }));
      void r.run('start');
      await clock.advance(0);
      expect(r.state).toMatchObject({ state: 'running', failed: false, restarts: 0 });
      expect(state.getTaskHandle<TaskHandle>('a1', 'web')?.pid).toBe(500);
      expect(events.map((e) => e.type)).toEqual(['Started']);
      await r.stop();
      expect(driver.stops).toEqual(['500 SIGTERM']);
      expect(r.state.state).toBe('dead');
    });
  });
});
