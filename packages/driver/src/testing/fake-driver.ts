// An in-memory TaskDriver for tests of what sits above a driver (the task and
// alloc runners): a "task" runs from start() until the test ends it with
// exit() or a stop() ends it. It keeps the contract the exec driver keeps
// (conformance.ts holds both to it) and adds what a test needs to drive a
// runner: a record of every call, failures to inject one call at a time, and
// answers to impose on recover() and adopt().
import { Emitter, ShutdownError, type Event } from '@csiplug/core';
import {
  type DriverTaskConfig,
  type ExitResult,
  type RecoverResult,
  type TaskDriver,
  type TaskHandle,
  validateTaskConfig,
} from '../driver';

/** What start() gave a test: the config it was started with and its handle. */
export interface FakeTaskStart {
  config: DriverTaskConfig;
  handle: TaskHandle;
}

interface FakeTask {
  handle: TaskHandle;
  /** Set once the task has ended. */
  exit?: ExitResult;
  /** wait() and stop() calls waiting for the end. */
  waiters: { resolve: (exit: ExitResult) => void; reject: (err: Error) => void }[];
}

/** The first pid the fake hands out; each start takes the next one. */
const FIRST_PID = 100;

/** The fake executor's pid is the task's plus this, so the two never collide. */
const EXECUTOR_PID_OFFSET = 1000;

export class FakeDriver implements TaskDriver {
  readonly name = 'fake';
  /** Every config start() was called with, in order (failed starts too). */
  readonly started: DriverTaskConfig[] = [];
  /** Every stop() call, as `<pid> <signal>`. */
  readonly stops: string[] = [];
  /** Every signalTask() call, as `<pid> <signal>`. */
  readonly signals: string[] = [];
  /** How many times wait() and adopt() were called. */
  waits = 0;
  adopts = 0;
  /** Errors the next wait() / start() / adopt() calls fail with, one per call, first in first out. */
  readonly waitFailures: unknown[] = [];
  readonly startFailures: unknown[] = [];
  readonly adoptFailures: unknown[] = [];
  /** Set: what recover() answers for every handle, instead of what the fake knows of it. */
  recoverAs: RecoverResult | undefined;
  /**
   * Set: recover() answers only when the test resolves it (a recover in
   * flight). Like the exec driver, recover() never throws for a transient
   * fault: it answers "running" once it gives up telling.
   */
  recoverGate: Promise<RecoverResult> | undefined;
  /**
   * Set: what adopt() finds in any task dir (the executor's own record), taken
   * for a running task unless the test ended it. Unset: the last task
   * started or adopted in that dir, as the exec driver's pid record says.
   */
  adoptable: TaskHandle | undefined;
  /** Whether stop() ends the task at once (with the signal); false: it ends when the test calls exit(). */
  stopExits = true;

  private readonly startEmitter = new Emitter<FakeTaskStart>();
  /** Fires when start() has started a task, before it resolves: a test scripts there what the "process" does. */
  readonly onDidStart: Event<FakeTaskStart> = this.startEmitter.event;

  private nextPid = FIRST_PID;
  /** By pid and start time, as the exec driver tells processes apart. */
  private readonly tasks = new Map<string, FakeTask>();
  private readonly lastInDir = new Map<string, TaskHandle>();
  private disposed = false;

  async start(config: DriverTaskConfig): Promise<TaskHandle> {
    this.assertOpen('start');
    this.started.push(config);
    validateTaskConfig(config);
    if (this.startFailures.length) throw this.startFailures.shift();
    const pid = this.nextPid++;
    const handle: TaskHandle = {
      version: 1,
      driver: 'exec',
      allocId: config.allocId,
      taskName: config.taskName,
      taskDir: config.taskDir,
      executorPid: pid + EXECUTOR_PID_OFFSET,
      executorStartTime: '1',
      pid,
      startTime: '1',
      startedAt: 0,
    };
    this.track(handle);
    this.startEmitter.fire({ config, handle });
    return handle;
  }

  adopt(task: { allocId: string; taskName: string; taskDir: string }): TaskHandle | undefined {
    this.assertOpen('adopt');
    this.adopts++;
    if (this.adoptFailures.length) throw this.adoptFailures.shift();
    if (this.adoptable) return this.track(this.adoptable).handle;
    return this.lastInDir.get(task.taskDir);
  }

  async recover(handle: TaskHandle): Promise<RecoverResult> {
    this.assertOpen('recover');
    if (this.recoverGate) return this.recoverGate;
    if (this.recoverAs) return this.recoverAs;
    const task = this.find(handle);
    if (!task) return { running: false, exit: unknownExit(handle) };
    return task.exit ? { running: false, exit: task.exit } : { running: true };
  }

  wait(handle: TaskHandle): Promise<ExitResult> {
    this.waits++;
    if (this.waitFailures.length) return Promise.reject(this.waitFailures.shift());
    if (this.disposed) return Promise.reject(shutdown('wait'));
    const task = this.find(handle);
    return task ? this.exitOf(task) : Promise.resolve(unknownExit(handle));
  }

  /** The kill timeout plays no part: a fake task ends on the signal at once, or when the test says (stopExits off). */
  async stop(handle: TaskHandle, signal: NodeJS.Signals, _killTimeout?: number): Promise<ExitResult> {
    this.assertOpen('stop');
    this.stops.push(`${handle.pid} ${signal}`);
    const task = this.find(handle);
    if (!task) return unknownExit(handle);
    if (!task.exit && this.stopExits) this.end(task, { exitCode: null, signal, finishedAt: 0 });
    return this.exitOf(task);
  }

  async signalTask(handle: TaskHandle, signal: NodeJS.Signals): Promise<void> {
    this.assertOpen('signalTask');
    if (!this.isRunning(handle)) throw new Error(`FakeDriver.signalTask: task pid ${handle.pid} is not running`);
    this.signals.push(`${handle.pid} ${signal}`);
  }

  isRunning(handle: TaskHandle): boolean {
    const task = this.find(handle);
    return task !== undefined && task.exit === undefined;
  }

  /** Ends the running task with `pid`, as its process exiting would; wait() and stop() calls resolve with the result. */
  exit(pid: number, exitCode: number | null, signal: string | null = null): ExitResult {
    const task = [...this.tasks.values()].find((t) => t.handle.pid === pid && t.exit === undefined);
    if (!task) {
      const running = [...this.tasks.values()].filter((t) => t.exit === undefined).map((t) => t.handle.pid);
      throw new Error(
        `FakeDriver.exit: no running task has pid ${pid} (running: ${running.join(', ') || 'none'}); start or adopt it first`,
      );
    }
    return this.end(task, { exitCode, signal, finishedAt: 0 });
  }

  /** Ends the waits in flight with a ShutdownError; the tasks themselves keep "running", as the exec driver's do. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const task of this.tasks.values()) {
      const waiters = task.waiters.splice(0);
      for (const w of waiters) w.reject(shutdown('a wait in flight'));
    }
    this.startEmitter.dispose();
  }

  private track(handle: TaskHandle): FakeTask {
    const key = taskKey(handle);
    let task = this.tasks.get(key);
    if (!task) {
      task = { handle, waiters: [] };
      this.tasks.set(key, task);
    }
    this.lastInDir.set(handle.taskDir, task.handle);
    return task;
  }

  private find(handle: TaskHandle): FakeTask | undefined {
    return this.tasks.get(taskKey(handle));
  }

  private end(task: FakeTask, exit: ExitResult): ExitResult {
    task.exit = exit;
    const waiters = task.waiters.splice(0);
    for (const w of waiters) w.resolve(exit);
    return exit;
  }

  private exitOf(task: FakeTask): Promise<ExitResult> {
    if (task.exit) return Promise.resolve(task.exit);
    return new Promise((resolve, reject) => task.waiters.push({ resolve, reject }));
  }

  private assertOpen(what: string): void {
    if (this.disposed) throw shutdown(`${what}()`);
  }
}

function taskKey(handle: TaskHandle): string {
  return `${handle.pid}\0${handle.startTime}`;
}

function shutdown(what: string): ShutdownError {
  return new ShutdownError(`fake driver: ${what} after dispose(); its tasks keep running`);
}

/** What the fake answers for a handle it never started nor adopted, worded like the exec driver's answer. */
function unknownExit(handle: TaskHandle): ExitResult {
  return {
    exitCode: null,
    signal: null,
    finishedAt: 0,
    error: `the exit status of task "${handle.taskName}" of alloc ${handle.allocId} is unknown: the fake driver runs no task with pid ${handle.pid} and start time ${handle.startTime}`,
  };
}
