// The `exec` task driver: runs a task as a plain host process through an
// executor (executor.ts) that is the task's parent, so the task outlives the
// agent and a restarted agent can find it again. Everything the driver knows
// about a task comes from the executor's files in `<taskDir>/.executor/` and
// from /proc, checked by pid and start time, never by pid alone.
//
// Waiting is event-driven (fs.watch on the executor's dir, checked after
// subscribing so no wake-up is lost), with a slow safety poll on the Clock
// for the one thing no file event reports: an executor killed with SIGKILL.
//
// A fault of the agent's own process while checking a task (out of file
// descriptors, say, under a connection flood) says nothing about the task:
// its state is "unknown" and is checked again on the next tick. Only an
// exit record or a verified /proc check ends a task.
import { type ChildProcess, spawn } from 'node:child_process';
import { readFile as readFileAsync } from 'node:fs/promises';
import { closeSync, existsSync, fchmodSync, mkdirSync, openSync, readFileSync, rmSync, watch } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { isAbsolute, join } from 'node:path';
import {
  IClock,
  ILogger,
  ShutdownError,
  TimeoutError,
  ValidationError,
  errorMessage,
  formatDuration,
  isTransientFsError,
  checkInto,
  settleOnce,
  toDisposable,
  type Disposable,
  type WaitControl,
} from '@csiplug/core';
import { inject, injectable } from 'tsyringe';
import { type DriverTaskConfig, type ExitResult, type RecoverResult, type TaskDriver, type TaskHandle, validateTaskConfig } from './driver';
import { TaskAlreadyRunningError, TaskSignalError, TaskStartError, TransientProbeError } from './errors';
import {
  type ExecutorExitRecord,
  type ExecutorPaths,
  type ExecutorPidRecord,
  type ExecutorSpec,
  type RuncContainer,
  executorPaths,
  readJsonFile,
  writeJsonAtomic,
} from './executor-protocol';
import { TASK_LOCAL_DIR } from './isolation';
import { type ProcStat, isFinishedState, readProcStat } from './proc';
import { IExecDriverOptions, type ExecDriverOptions } from './tokens';
import { taskLogSpec } from './task-logs';
import { FaultLog, taskFields } from './fault-log';
import { TaskProbe, type Probe } from './task-probe';
import { DEFAULT_RUNC_ROOT, RuncContainers, findRunc } from './runc-containers';

export type { ExecDriverOptions } from './tokens';
// Exported from here as before: the driver's runc defaults and container naming.
export { containerId, DEFAULT_RUNC_ROOT, findRunc } from './runc-containers';

interface WatchOptions {
  timeoutMs?: number;
  /** ms between checks besides file events (default: the driver's pollInterval). */
  pollMs?: number;
  onTimeout?: () => Error;
  /** Extra wake-ups beyond the dir watch and the poll; returns what to release. */
  triggers?: (kick: () => void) => Disposable;
}

const DEFAULTS = {
  startTimeout: 10_000,
  // Only a safety net: file events report exits at once; the poll catches an
  // executor killed before it could write its record. Kept slow so an agent
  // with many tasks stays idle when nothing happens.
  pollInterval: 5_000,
  exitGrace: 5_000,
};

/**
 * The executor script of this package: dist/executor.js. Resolved through
 * the package root, so it names the compiled script whether this module runs
 * from dist/ or, under ts-jest, from src/ (the executor is always run
 * compiled: a plain `node` starts it).
 */
export const DEFAULT_EXECUTOR_PATH = join(__dirname, '..', 'dist', 'executor.js');

/** ms between checks for the previous run's executor to exit, which it does right after its exit record. */
const EXITING_EXECUTOR_POLL = 25;

/** How much of executor.log a start error quotes. */
const LOG_TAIL_BYTES = 2_000;

@injectable()
export class ExecDriver implements TaskDriver {
  readonly name = 'exec';

  private readonly log: ILogger;
  private readonly executorPath: string;
  private readonly nodePath: string;
  private readonly startTimeout: number;
  private readonly pollInterval: number;
  private readonly exitGrace: number;
  private readonly inheritEnv: boolean;
  private readonly readStat: (pid: number) => ProcStat | undefined;
  /** What the executor's records and /proc say of a task. */
  private readonly tasks: TaskProbe;
  /** One shared wait per task run, keyed by taskDir, pid and start time, with the log of its faults (stop() shares both). */
  private readonly waits = new Map<string, { exit: Promise<ExitResult>; faults: FaultLog }>();
  /** isRunning() has no handle-long life to keep a FaultLog in: one for all its calls. */
  private readonly isRunningFaults: FaultLog;
  /** Waits in flight: dispose() ends them with a ShutdownError so nobody hangs. */
  private readonly pending = new Set<(err: Error) => void>();
  /** This driver's runc containers (isolated tasks). */
  private readonly containers: RuncContainers;
  private disposed = false;

  constructor(
    @inject(IClock) private readonly clock: IClock,
    @inject(ILogger) logger: ILogger,
    @inject(IExecDriverOptions, { isOptional: true }) options?: ExecDriverOptions,
  ) {
    this.log = logger.child({ component: 'exec-driver' });
    this.executorPath = options?.executorPath ?? DEFAULT_EXECUTOR_PATH;
    this.nodePath = options?.nodePath ?? process.execPath;
    this.startTimeout = options?.startTimeout ?? DEFAULTS.startTimeout;
    this.pollInterval = options?.pollInterval ?? DEFAULTS.pollInterval;
    this.exitGrace = options?.exitGrace ?? DEFAULTS.exitGrace;
    this.inheritEnv = options?.inheritEnv ?? true;
    this.readStat = options?.procReader ?? readProcStat;
    this.tasks = new TaskProbe(clock, this.log, this.readStat, options?.recordReader ?? readJsonFile);
    this.containers = new RuncContainers(options?.runcPath ?? findRunc(), options?.runcRoot ?? DEFAULT_RUNC_ROOT, this.log, {
      isSame: (pid, startTime) => this.tasks.isSame(pid, startTime),
      isLatestRun: (handle) => this.tasks.isLatestRun(handle),
    });
    this.isRunningFaults = new FaultLog(clock, this.log, { call: 'isRunning' });
  }

  async start(config: DriverTaskConfig): Promise<TaskHandle> {
    this.assertOpen('start');
    validateTaskConfig(config);
    const { allocId, taskName, taskDir } = config;
    if (!existsSync(this.executorPath)) {
      throw new TaskStartError(
        allocId,
        taskName,
        `the executor script ${this.executorPath} does not exist; reinstall csiplug, or build the driver package (tsc -p tsconfig.lib.json in packages/driver)`,
      );
    }
    const paths = executorPaths(taskDir);
    mkdirSync(taskDir, { recursive: true });
    mkdirSync(paths.dir, { recursive: true, mode: 0o700 });

    let previous: ExecutorPidRecord | undefined;
    let previousExecutorRuns = false;
    try {
      previous = this.tasks.readRecord<ExecutorPidRecord>(paths.pid);
      if (previous && this.tasks.isSame(previous.pid, previous.startTime))
        throw new TaskAlreadyRunningError(allocId, taskName, previous.pid);
      previousExecutorRuns = previous !== undefined && this.tasks.isSame(previous.executorPid, previous.executorStartTime);
    } catch (err) {
      // Unknown is not "nothing runs there": starting now could run the task twice.
      if (isTransientFsError(err))
        throw new TaskStartError(
          allocId,
          taskName,
          `could not check for a previous run still in ${taskDir} (${errorMessage(err)}); retry later`,
          { cause: err },
        );
      throw err;
    }
    if (previous && previousExecutorRuns) {
      const last = previous;
      // The last run's executor is still recording its task's exit: let it
      // finish, or its late record would land on top of this run's.
      await this.watchUntil(paths.dir, () => (this.tasks.isSameOrUnknown(last.executorPid, last.executorStartTime) ? undefined : true), {
        timeoutMs: this.exitGrace,
        // An exiting process makes no file event, and it exits within moments of its record.
        pollMs: EXITING_EXECUTOR_POLL,
        onTimeout: () =>
          new TaskStartError(
            allocId,
            taskName,
            `the executor of the previous run (pid ${last.executorPid}) is still running (or could not be checked) although its task has exited; kill it or retry later`,
          ),
      });
    }
    // Records of an earlier run would be taken for this one's.
    rmSync(paths.pid, { force: true });
    rmSync(paths.exit, { force: true });

    const runc = config.isolation ? await this.containers.prepare(config, paths) : undefined;
    // The removal of an earlier container may have taken a while: no executor is spawned by a driver disposed meanwhile.
    this.assertOpen('start');
    const spec: ExecutorSpec = {
      version: 1,
      command: config.command,
      args: config.args,
      env: runc ? {} : this.taskEnv(config.env),
      cwd: runc ? TASK_LOCAL_DIR : taskDir,
      ...taskLogSpec(taskDir, config.logs),
      pidPath: paths.pid,
      exitPath: paths.exit,
      ...(runc ? { runc } : {}),
    };
    writeJsonAtomic(paths.spec, spec);

    const executor = this.spawnExecutor(config, paths);
    const startFaults = new FaultLog(this.clock, this.log, { allocId, taskName, executorPid: executor.pid });
    let executorEnd: { message: string; cause?: Error } | undefined;
    let record: ExecutorPidRecord | undefined;
    /** Whether the last read of the executor's records failed for a fault of the agent itself. */
    let lastReadFailed = false;
    const check = (): ExecutorPidRecord | undefined => {
      try {
        const pid = this.tasks.readRecord<ExecutorPidRecord>(paths.pid);
        lastReadFailed = false;
        if (pid) return pid;
        const exit = this.tasks.readRecord<ExecutorExitRecord>(paths.exit);
        if (exit?.startError) throw new TaskStartError(allocId, taskName, exit.startError);
        startFaults.recovered();
      } catch (err) {
        if (!isTransientFsError(err)) throw err;
        // Read again on the next event or tick.
        lastReadFailed = true;
        startFaults.fault('start', err);
      }
      if (executorEnd)
        throw new TaskStartError(allocId, taskName, `${executorEnd.message}${this.logTail(paths)}`, { cause: executorEnd.cause });
      return undefined;
    };
    try {
      record = await this.watchUntil(paths.dir, check, {
        timeoutMs: this.startTimeout,
        onTimeout: () =>
          new TimeoutError(
            `the executor did not report task "${taskName}" of alloc ${allocId} running within ${formatDuration(this.startTimeout)}`,
            this.startTimeout,
          ),
        triggers: (kick) => {
          const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
            executorEnd ??= { message: `the executor exited (${code !== null ? `code ${code}` : signal}) before the task started` };
            kick();
          };
          const onError = (err: Error) => {
            // The cause tells the caller whether this was a fault of the agent itself (EMFILE, EAGAIN…).
            executorEnd ??= {
              message: `the executor could not be run (${this.nodePath} ${this.executorPath}): ${err.message}`,
              cause: err,
            };
            kick();
          };
          executor.on('exit', onExit);
          executor.on('error', onError);
          return toDisposable(() => {
            executor.off('exit', onExit);
            executor.off('error', onError);
          });
        },
      });
    } catch (err) {
      if (err instanceof TimeoutError && lastReadFailed) {
        // The deadline passed only because the agent could not read the
        // executor's records: the task may well run. Killing the executor
        // now would orphan it, so read on until the record says what runs.
        record = await this.readPidRecordAfterFaults(
          executor,
          paths,
          () => ({ record: check(), readFailed: lastReadFailed }),
          err,
          allocId,
          taskName,
        );
      } else {
        // Nobody got a handle for what we may have started, so nobody could
        // ever recover or stop it: end it here.
        this.abandonStart(executor, paths);
        if (err instanceof TimeoutError)
          throw new TaskStartError(allocId, taskName, `${err.message}; it was killed${this.logTail(paths)}`, { cause: err });
        throw err;
      }
    }

    const handle: TaskHandle = {
      version: 1,
      driver: 'exec',
      allocId,
      taskName,
      taskDir,
      executorPid: record.executorPid,
      executorStartTime: record.executorStartTime,
      pid: record.pid,
      startTime: record.startTime,
      startedAt: this.clock.now(),
      ...(runc ? { runc: { root: runc.root, id: runc.id } } : {}),
    };
    this.log.info('task started', {
      allocId,
      taskName,
      taskPid: handle.pid,
      executorPid: handle.executorPid,
      ...(runc ? { container: runc.id } : {}),
    });
    return handle;
  }

  adopt(task: { allocId: string; taskName: string; taskDir: string }): TaskHandle | undefined {
    this.assertOpen('adopt');
    let record: ExecutorPidRecord | undefined;
    try {
      record = this.tasks.readRecord<ExecutorPidRecord>(executorPaths(task.taskDir).pid);
    } catch (err) {
      // "No record" would have the caller start the task again beside the one that may run.
      if (isTransientFsError(err))
        throw new TransientProbeError(
          task.allocId,
          task.taskName,
          `its executor's record in ${task.taskDir} could not be read (${errorMessage(err)})`,
          err,
        );
      throw err;
    }
    if (!record) return undefined;
    // The container of an isolated task is named in the spec its executor ran.
    let runc: RuncContainer | undefined;
    try {
      runc = this.tasks.readRecord<ExecutorSpec>(executorPaths(task.taskDir).spec)?.runc;
    } catch (err) {
      if (isTransientFsError(err))
        throw new TransientProbeError(
          task.allocId,
          task.taskName,
          `its executor's spec in ${task.taskDir} could not be read (${errorMessage(err)})`,
          err,
        );
      throw err;
    }
    return {
      version: 1,
      driver: 'exec',
      allocId: task.allocId,
      taskName: task.taskName,
      taskDir: task.taskDir,
      executorPid: record.executorPid,
      executorStartTime: record.executorStartTime,
      pid: record.pid,
      startTime: record.startTime,
      startedAt: record.startedAt,
      ...(runc ? { runc: { root: runc.root, id: runc.id } } : {}),
    };
  }

  async recover(handle: TaskHandle): Promise<RecoverResult> {
    this.assertOpen('recover');
    validateHandle(handle);
    const faults = new FaultLog(this.clock, this.log, taskFields(handle));
    let last = this.tasks.probeNeverThrows(handle);
    if (last.state === 'running') return { running: true };
    if (last.state === 'exited') {
      // Its container, if runc was killed while the agent was away and nothing removed it.
      await this.containers.remove(handle);
      return { running: false, exit: last.exit };
    }
    if (last.state === 'unknown') faults.fault('recover', last.cause);
    // Either the task is gone and its executor is about to record how it
    // ended, or it cannot be checked just now: wait a while for the truth.
    try {
      const found = await this.watchUntil(
        executorPaths(handle.taskDir).dir,
        (): RecoverResult | undefined => {
          last = this.tasks.probeNeverThrows(handle);
          if (last.state === 'unknown') {
            faults.fault('recover', last.cause);
            return undefined;
          }
          faults.recovered();
          if (last.state === 'running') return { running: true };
          if (last.state === 'exited') return { running: false, exit: last.exit };
          return undefined;
        },
        { timeoutMs: this.exitGrace, onTimeout: () => new TimeoutError('exit not recorded', this.exitGrace) },
      );
      if (!found.running) await this.containers.remove(handle);
      return found;
    } catch (err) {
      if (!(err instanceof TimeoutError)) throw err;
      // Never "exited" on a guess: the task is kept and wait() learns the end.
      if (last.state === 'unknown') {
        this.log.warn(
          'could not tell whether the task still runs (a fault of the agent itself); treating it as running until it can be checked',
          { ...taskFields(handle), err: errorMessage(last.cause) },
        );
      } else {
        this.log.warn(
          'task is gone but its executor has not recorded its exit yet; treating it as running until it does',
          taskFields(handle),
        );
      }
      return { running: true };
    }
  }

  wait(handle: TaskHandle): Promise<ExitResult> {
    this.assertOpen('wait');
    validateHandle(handle);
    return this.waitFor(handle).exit;
  }

  /** The shared wait of the handle's run and the log of its faults; starts it if none runs. */
  private waitFor(handle: TaskHandle): { exit: Promise<ExitResult>; faults: FaultLog } {
    const key = `${handle.taskDir}\0${handle.pid}\0${handle.startTime}`;
    const existing = this.waits.get(key);
    if (existing) return existing;
    const faults = new FaultLog(this.clock, this.log, taskFields(handle));
    // A check that cannot tell goes on waiting: the next event or tick checks again.
    // runc is gone once the task has exited; its container may not be (runc and its executor both killed): it goes before the task counts as exited.
    const exit = this.watchUntil(executorPaths(handle.taskDir).dir, () => this.tasks.exitOf(handle, faults)).then(async (ended) => {
      await this.containers.remove(handle);
      return ended;
    });
    const entry = { exit, faults };
    this.waits.set(key, entry);
    const forget = () => {
      if (this.waits.get(key) === entry) this.waits.delete(key);
    };
    exit.then(forget, forget);
    return entry;
  }

  async stop(handle: TaskHandle, signal: NodeJS.Signals, killTimeout: number): Promise<ExitResult> {
    this.assertOpen('stop');
    validateHandle(handle);
    if (!(signal in osConstants.signals)) throw new ValidationError(`unknown signal "${signal}"; use a name like SIGTERM`, 'kill_signal');
    if (!Number.isFinite(killTimeout) || killTimeout < 0)
      throw new ValidationError(`kill timeout must be a duration of 0 or more, got ${killTimeout}`, 'kill_timeout');

    let first: Probe;
    try {
      first = this.tasks.probe(handle);
    } catch (err) {
      // A check that keeps failing (EACCES on a record, say) still says
      // nothing about the task: stop it like one that cannot be checked.
      this.log.error('cannot check the task before stopping it; stopping it as if it runs', { ...taskFields(handle), err });
      first = { state: 'unknown', cause: err };
    }
    if (first.state === 'exited') {
      await this.containers.remove(handle);
      return first.exit;
    }
    // Running, exiting, or unknown: an unknown task is stopped like a running one.
    const { faults } = this.waitFor(handle);
    if (first.state === 'unknown') faults.fault('stop', first.cause);

    // A signal that could not be sent because its target could not be
    // verified (EMFILE, or a check that keeps failing) waits here and is
    // tried again on every poll tick.
    let pending: NodeJS.Signals | undefined;
    let escalate: Disposable | undefined;
    /** A delivery under way (runc kill is a child process): a retry tick waits for it rather than sending twice; the stop waits for it before it returns. */
    let delivering: Promise<void> | undefined;
    /** Set once the task has exited (or the stop gave up): a delivery that ends later arms nothing. */
    let over = false;
    const deliver = (sig: NodeJS.Signals): Promise<void> => {
      const run = (async () => {
        try {
          const sent = await this.signal(handle, sig);
          // Cleared only if nothing stronger was asked meanwhile (a SIGKILL queued by the escalation).
          if (pending === sig) pending = undefined;
          // The grace of kill_timeout starts when the signal reaches the task,
          // not when stop() was asked: a signal held up by a fault must not
          // turn into a SIGKILL with no grace.
          if (sent && sig !== 'SIGKILL' && !over) armEscalation();
        } catch (err) {
          // A refused kill (EPERM) is an answer; a failed check of the target
          // is not, whatever its errno: the signal waits and is tried again.
          if (err instanceof TaskSignalError) throw err;
          if (pending !== 'SIGKILL') pending = sig;
          faults.fault(`stop (${sig})`, err);
        }
      })();
      delivering = run;
      const done = () => {
        if (delivering === run) delivering = undefined;
      };
      run.then(done, done);
      return run;
    };
    // Timer callbacks must never throw: that would crash the agent.
    const deliverFromTimer = (sig: NodeJS.Signals): void => {
      if (over) return;
      if (delivering) {
        // The one under way decides; a SIGKILL asked meanwhile is sent on the next tick.
        if (sig === 'SIGKILL') pending = sig;
        return;
      }
      deliver(sig).catch((err: unknown) => {
        if (pending === sig) pending = undefined;
        this.log.error(`could not send ${sig} to task`, { ...taskFields(handle), err });
      });
    };
    const armEscalation = (): void => {
      if (escalate || over) return;
      escalate = this.clock.setTimeout(() => {
        // Unknown counts as alive: the signal itself verifies the process before it is sent.
        if (!this.tasks.isSameOrUnknown(handle.pid, handle.startTime)) return;
        this.log.warn('task outlived its kill timeout; sending SIGKILL', { ...taskFields(handle), signal, killTimeout });
        deliverFromTimer('SIGKILL');
      }, killTimeout);
    };
    // A TaskSignalError here (EPERM…) fails the stop, as it always has.
    await deliver(signal);
    const retry = this.clock.setInterval(() => {
      if (pending) deliverFromTimer(pending);
    }, this.pollInterval);
    try {
      // A wait that fails for good (a check that keeps throwing) is started
      // again on the next tick: the signal retries and the escalation stay
      // armed until the task has really exited or the driver is disposed.
      for (;;) {
        try {
          return await this.waitFor(handle).exit;
        } catch (err) {
          if (err instanceof ShutdownError || this.disposed) throw err;
          faults.fault('stop (wait)', err);
          await this.pause(this.pollInterval);
        }
      }
    } finally {
      over = true;
      retry.dispose();
      // A delivery still under way (a slow runc kill) ends before the stop does, so nothing it does outlives the stop.
      await delivering?.catch(() => undefined);
      escalate?.dispose();
    }
  }

  async signalTask(handle: TaskHandle, signal: NodeJS.Signals): Promise<void> {
    this.assertOpen('signal a task');
    validateHandle(handle);
    if (!(signal in osConstants.signals)) throw new ValidationError(`unknown signal "${signal}"; use a name like SIGHUP`, 'change_signal');
    // change_signal: the task's own process only, as Nomad's executor sends it (its children are not the task's to signal).
    if (!(await this.signal(handle, signal, true)))
      throw new TaskSignalError(handle.taskName, handle.pid, signal, new Error('it is not running'));
  }

  /** When it cannot be told just now (a fault of the agent itself), true: a task is never taken for gone on a guess. */
  isRunning(handle: TaskHandle): boolean {
    try {
      const running = this.tasks.isSame(handle.pid, handle.startTime);
      this.isRunningFaults.recovered();
      return running;
    } catch (err) {
      if (isTransientFsError(err)) this.isRunningFaults.fault('isRunning', err);
      else this.log.error('cannot check whether the task runs; taking it as running', { ...taskFields(handle), err });
      return true;
    }
  }

  async containerRuns(handle: TaskHandle): Promise<boolean> {
    const c = this.containers.ours(handle, handle);
    if (!c) return false;
    const r = await this.containers.call(['--root', c.root, 'state', c.id]);
    if (r.ok) return ['running', 'created', 'paused'].includes(String((JSON.parse(r.stdout) as { status?: unknown }).status));
    if (/does not exist/.test(r.why)) return false;
    throw new Error(`runc state ${c.id}: ${r.why}`);
  }

  async taskMountInfo(handle: TaskHandle): Promise<string | undefined> {
    const c = this.containers.ours(handle, handle);
    if (!c) return undefined;
    try {
      const r = await this.containers.call(['--root', c.root, 'state', c.id]);
      if (!r.ok) throw new Error(r.why);
      const pid = (JSON.parse(r.stdout) as { pid?: unknown }).pid;
      if (typeof pid !== 'number' || pid <= 1) return undefined;
      return await readFileAsync(`/proc/${pid}/mountinfo`, 'utf8');
    } catch (err) {
      this.log.debug('could not read the mount table of an isolated task', { ...taskFields(handle), err: errorMessage(err) });
      return undefined;
    }
  }

  /** Stops watching; never touches a task: a restarted agent recovers them. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    const cancels = [...this.pending];
    this.pending.clear();
    for (const cancel of cancels)
      cancel(new ShutdownError('the exec driver was disposed (the agent is shutting down); its tasks keep running and can be recovered'));
  }

  // --- internals ---

  private assertOpen(what: string): void {
    if (this.disposed) throw new ShutdownError(`exec driver: cannot ${what}: the agent is stopping; tasks keep running`);
  }

  private taskEnv(env: Record<string, string>): Record<string, string> {
    const base: Record<string, string> = {};
    if (this.inheritEnv) for (const [k, v] of Object.entries(process.env)) if (v !== undefined) base[k] = v;
    return { ...base, ...env };
  }

  private spawnExecutor(config: DriverTaskConfig, paths: ExecutorPaths): ChildProcess {
    const logFd = openSync(paths.log, 'a', 0o600);
    try {
      // An older executor.log may have been made with a wider mode.
      fchmodSync(logFd, 0o600);
      const executor = spawn(this.nodePath, [this.executorPath, paths.spec], {
        cwd: config.taskDir,
        // Own session: the agent's terminal and process group are not the task's.
        detached: true,
        stdio: ['ignore', 'ignore', logFd],
        // The executor needs nothing from the agent's environment, and some of it (NODE_OPTIONS) could hurt.
        env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' },
      });
      executor.unref();
      // Kept for good: an 'error' with no listener would crash the agent.
      executor.on('error', (err) =>
        this.log.warn('executor process error', { taskName: config.taskName, executorPid: executor.pid, err: errorMessage(err) }),
      );
      return executor;
    } finally {
      closeSync(logFd);
    }
  }

  /**
   * The start deadline passed while the executor's records could not be
   * read. Reads on (on every event and poll tick, with no deadline: only
   * dispose() ends it, and then the task is left to the next agent, which
   * adopts it by its pid record) until the records can be read: the record
   * of a running task gives its handle; no record still means the executor
   * is too slow, and it is abandoned as on any timeout.
   */
  private async readPidRecordAfterFaults(
    executor: ChildProcess,
    paths: ExecutorPaths,
    check: () => { record: ExecutorPidRecord | undefined; readFailed: boolean },
    timeout: TimeoutError,
    allocId: string,
    taskName: string,
  ): Promise<ExecutorPidRecord> {
    this.log.warn(
      'start timed out while the executor records could not be read (a fault of the agent itself); reading on instead of killing a task that may run',
      { allocId, taskName, executorPid: executor.pid },
    );
    try {
      return await this.watchUntil(paths.dir, () => {
        const { record, readFailed } = check();
        if (record) return record;
        if (!readFailed) throw timeout;
        return undefined;
      });
    } catch (err) {
      if (err instanceof ShutdownError) throw err;
      this.abandonStart(executor, paths);
      if (err instanceof TimeoutError)
        throw new TaskStartError(allocId, taskName, `${err.message}; it was killed${this.logTail(paths)}`, { cause: err });
      throw err;
    }
  }

  /** Resolves after `ms` on the clock; rejects with a ShutdownError when the driver is disposed first. */
  private pause(ms: number): Promise<void> {
    return settleOnce<void>((wait) => {
      this.endOnDispose(wait);
      wait.own(this.clock.setTimeout(() => wait.resolve(), ms));
    });
  }

  /** start() failed or timed out: end the executor we spawned and whatever task it may have started meanwhile. */
  private abandonStart(executor: ChildProcess, paths: ExecutorPaths): void {
    try {
      executor.kill('SIGKILL');
    } catch (err) {
      this.log.warn('could not kill an executor that did not start its task', { executorPid: executor.pid, err });
    }
    try {
      const late = this.tasks.readRecord<ExecutorPidRecord>(paths.pid);
      if (late) this.signalProcess(late.pid, late.startTime, 'SIGKILL', 'task');
    } catch (err) {
      this.log.error('could not kill a task whose start failed; it may be left running', { pidRecord: paths.pid, err: errorMessage(err) });
    }
    try {
      const runc = this.tasks.readRecord<ExecutorSpec>(paths.spec)?.runc;
      // Not awaited: start() fails now; the removal logs its own failure.
      if (runc) void this.containers.remove({ runc, taskName: 'task', allocId: '' });
    } catch (err) {
      this.log.error('could not remove the container of a task whose start failed; it may be left running', {
        spec: paths.spec,
        err: errorMessage(err),
      });
    }
  }

  /** Sends `signal` to the handle's task (and its process group, unless `processOnly`) if it still is that process. */
  private async signal(handle: TaskHandle, signal: NodeJS.Signals, processOnly = false): Promise<boolean> {
    // An isolated task's signal goes to its container through runc kill (the
    // task is pid 1 of its namespace); runc itself, which the handle names,
    // is checked first, so a container of a run that ended is never signalled.
    const sent =
      handle.runc && signal !== 'SIGKILL' && (await this.containers.kill(handle, signal))
        ? true
        : this.signalProcess(handle.pid, handle.startTime, signal, handle.taskName, processOnly);
    // SIGKILL ends runc, which cannot pass it on: the container goes with runc delete (its executor does the same, if it lives).
    if (sent && signal === 'SIGKILL') await this.containers.remove(handle);
    if (sent) this.log.info('signalled task', { allocId: handle.allocId, taskName: handle.taskName, taskPid: handle.pid, signal });
    return sent;
  }

  /**
   * Sends `signal` to `pid` if it still is the process that started at
   * `startTime`; false when it is not (or is gone). Throws the read's error
   * when that cannot be verified just now: an unverified pid is never signalled.
   */
  private signalProcess(pid: number, startTime: string, signal: NodeJS.Signals, taskName: string, processOnly = false): boolean {
    const stat = this.readStat(pid);
    if (!stat || !startTime || stat.startTime !== startTime || isFinishedState(stat.state)) {
      this.log.debug('not signalling: no live process with this pid and start time', { targetPid: pid, startTime, signal });
      return false;
    }
    // The executor makes the task lead its own group; signal the group so
    // the task's children stop with it. If the task left its group, or `processOnly`, signal it alone.
    const target = !processOnly && stat.pgrp === pid ? -pid : pid;
    try {
      process.kill(target, signal);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
      throw new TaskSignalError(taskName, pid, signal, err);
    }
  }

  private logTail(paths: ExecutorPaths): string {
    try {
      const text = readFileSync(paths.log, 'utf8').trim();
      if (!text) return '';
      return `; ${paths.log} ends with: ${text.slice(-LOG_TAIL_BYTES)}`;
    } catch {
      return '';
    }
  }

  /**
   * Resolves with the first defined result of `check`, which runs now, on
   * every change in `dir`, on every poll tick and on every trigger; rejects
   * when `check` throws, on timeout, or when the driver is disposed.
   */
  private watchUntil<T>(dir: string, check: () => T | undefined, options: WatchOptions = {}): Promise<T> {
    if (this.disposed)
      return Promise.reject(
        new ShutdownError('exec driver: a wait started after the driver was shut down (the agent is stopping); the task keeps running'),
      );
    return settleOnce<T>((wait) => {
      const run = checkInto(check, wait);
      this.endOnDispose(wait);
      try {
        const watcher = watch(dir, { persistent: false }, run);
        watcher.on('error', (err) => this.log.debug('executor dir watch failed; relying on the poll', { dir, err: errorMessage(err) }));
        wait.own(toDisposable(() => watcher.close()));
      } catch (err) {
        this.log.debug('cannot watch executor dir; relying on the poll', { dir, err: errorMessage(err) });
      }
      // The poll is armed before the deadline, so a check due at the same
      // moment as the deadline still runs first (not waitUntil, which arms
      // its deadline first).
      wait.own(this.clock.setInterval(run, options.pollMs ?? this.pollInterval));
      if (options.timeoutMs !== undefined) {
        const { timeoutMs, onTimeout } = options;
        wait.own(
          this.clock.setTimeout(
            () => wait.reject(onTimeout?.() ?? new TimeoutError(`timed out after ${formatDuration(timeoutMs)}`, timeoutMs)),
            timeoutMs,
          ),
        );
      }
      if (options.triggers) wait.own(options.triggers(run));
      // Subscribed first, checked second: nothing that happened before can be missed.
      run();
    });
  }

  /** Has dispose() end `wait` with a ShutdownError, for as long as it is pending. */
  private endOnDispose(wait: WaitControl): void {
    const cancel = (err: Error): void => wait.reject(err);
    this.pending.add(cancel);
    wait.own(toDisposable(() => this.pending.delete(cancel)));
  }
}

function validateHandle(handle: TaskHandle): void {
  if (handle?.version !== 1 || handle.driver !== 'exec')
    throw new ValidationError(`not an exec driver handle (version ${String(handle?.version)}, driver ${String(handle?.driver)})`, 'handle');
  if (!Number.isInteger(handle.pid) || handle.pid <= 1)
    throw new ValidationError(`task handle of "${handle.taskName}" has an invalid pid ${handle.pid}`, 'handle.pid');
  if (!handle.taskDir || !isAbsolute(handle.taskDir))
    throw new ValidationError(`task handle of "${handle.taskName}" has no absolute task dir`, 'handle.taskDir');
}
