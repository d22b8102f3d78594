// TaskRunner: one task of an alloc, from hooks to process to restarts.
//
// start  prestart hooks → the driver starts the process (through its
//        executor, so the task outlives the agent) → poststart hooks in the
//        background → wait for the exit → exited hooks → the restart policy.
// restore (after an agent restart) re-attaches to the saved handle; a task
//        still running is never restarted, its hooks run in restore mode.
// stop   the kill signal, SIGKILL after kill_timeout, then the stop hooks.
// detach agent shutdown: the process keeps running, hooks release timers.
//
// A restart a task hook asks for (requestRestart: the plugin supervisor when
// a plugin never became healthy) kills the process and counts as a failed
// exit for the restart policy, as Nomad counts a check_restart: attempts,
// interval, delay and mode apply, and with mode "fail" the task ends dead
// and failed with an event that says why. A restart of the alloc's tasks an
// alloc hook asks for (restart(): a stale mount under on_stale_mount =
// "restart") is not the task's failure: it starts again at once, uncounted;
// one asked for before the task is re-attached (a restore's prerun) is held
// and applied once the runner waits on the process again, never to a saved
// handle it has not yet re-attached to, and dropped when a new process starts.
//
// Templates (task-templates.ts) are rendered before each start, after the
// prestart hooks; a failure is the start's (a Setup Failure, then the
// restart policy). On a reload of the agent's config the alloc runner asks
// `templates.reload()`, which re-renders and applies change_mode through the
// means given here (an uncounted restart, a signal through the driver).
//
// What cannot be saved (a full disk) is logged, never thrown at the task: the
// handle and state are written again on the next change or by a retry timer
// (backoff up to 30 s; a dead task has no next change), and a handle that
// never made it is found from the executor's record on a restore (adopt).
//
// Only a real ExitResult ends a task. A driver call that fails says nothing
// about the task (the agent itself may be out of file descriptors): it is
// logged and tried again after a backoff, never read as the task's death,
// which would release its volumes under a workload that still runs.
import { type Clock, type Logger, ShutdownError, doublingBackoff, errorMessage, isTransientFsError } from '@csiplug/core';
import {
  RestartTracker,
  TaskAlreadyRunningError,
  type ExitResult,
  type IsolationConfig,
  type TaskDriver,
  type TaskHandle,
} from '@csiplug/driver';
import {
  runTaskHooks,
  type AllocInfo,
  type RunKind,
  type TaskBindMount,
  type TaskEvent,
  type TaskHook,
  type TaskHookContext,
} from '@csiplug/hooks';
import type { TaskSpec, TaskState } from '@csiplug/jobspec';
import type { AllocStore, SavedTask } from './alloc-store';
import { TaskSaves } from './task-saves';
import { TaskImageSetupError, prepareImageStart } from './task-image';
import type { TaskImagesService } from '@csiplug/images';
import type { TaskStateWriter } from './task-state-writer';
import { interpolateTask, type InterpolatedTask } from '@csiplug/jobspec';
import { TaskTemplates, TemplateRenderError, templateTarget } from './task-templates';

export const TASK_EVENT = {
  received: 'Received',
  started: 'Started',
  reattached: 'Reattached',
  configRefused: 'Config Refused',
  terminated: 'Terminated',
  restarting: 'Restarting',
  notRestarting: 'Not Restarting',
  killing: 'Killing',
  killed: 'Killed',
  setupFailure: 'Setup Failure',
  driverFailure: 'Driver Failure',
  restartRequested: 'Restart Signaled',
} as const;

/** At most this many events are kept per task (oldest dropped), like Nomad. */
const MAX_EVENTS = 50;

/** Backoff (ms) before a failed driver wait or restore check is tried again: doubling from the base up to the max. */
const DRIVER_RETRY_BASE = 1_000;
const DRIVER_RETRY_MAX = 30_000;

export interface TaskRunnerDeps {
  driver: TaskDriver;
  /** Where the task's handle and state are saved for a restore. */
  allocStore: AllocStore;
  /** Writes the task's state (its events) in a group write with other tasks'. */
  taskStates: TaskStateWriter;
  clock: Clock;
  logger: Logger;
  /** Variables for ${…} interpolation and the task's environment (alloc id, task dir, volumes…); see setVariables. */
  variables: Record<string, string>;
  /** Told of every task event (the agent's event stream). */
  onEvent(task: string, event: TaskEvent): void;
  /** Told whenever the task's state changes (the alloc recomputes its status). */
  onStateChange(): void;
  /** The agent's image service: an image task's root (driver docker/podman). Without it an image task fails to start. */
  images?: TaskImagesService;
  /** Where in its splay a template change applies, in [0, 1) (default Math.random). */
  random?: () => number;
}

/** This agent refuses the task's configuration (a capability, or the host's network, it may not have): no restart would help. */
class TaskRefusedError extends Error {}

export class TaskRunner {
  readonly state: TaskState;
  private handle: TaskHandle | undefined;
  private readonly tracker: RestartTracker;
  private stopping = false;
  private detached = false;
  private readonly stopController = new AbortController();
  /** Aborted by detach() only: waits that must outlast a stop (the task's real exit) sleep on it. */
  private readonly detachController = new AbortController();
  private loop: Promise<void> | undefined;
  /** Why the running process is being killed for a restart; `counted`: as a failure, by the restart policy. */
  private restartRequested: { reason: string; counted: boolean; fails?: boolean } | undefined;
  /** Whether the loop waits on a process it started or re-attached to (a restart can reach it). */
  private attached = false;
  /** A restart (not counted) asked for before the task was attached: applied once it is. */
  private pendingRestart: string | undefined;
  /** The handle stop() sent the kill signal to, if it could. */
  private stopSentTo: TaskHandle | undefined;
  private variables: Record<string, string>;
  /** The node's `attr.…`, `node.…` and `meta.…` values: for interpolation only, never in the task's env. */
  private nodeValues: Record<string, string> = {};
  private isolation: IsolationConfig | undefined;
  /**
   * Why the agent will not start this isolated task as it is asked (a
   * capability it does not allow, the host's network while the API asks for
   * no token), read at each start: a config reload changes it while the task runs.
   */
  private isolationRefusal: () => string | undefined = () => undefined;
  private readonly log: Logger;
  /** Where the task's handle and state are saved, and saved again after a failure (task-saves.ts). */
  private readonly saves: TaskSaves;
  /**
   * The task's template blocks (undefined: it has none). `templates.reload()`
   * renders them again on a reload of the agent's config and applies their
   * change_mode to the task, if it runs.
   */
  readonly templates: { reload(): Promise<void> } | undefined;
  private readonly templateFiles: TaskTemplates | undefined;
  /** What the prestart hooks gave a task re-attached after an agent restart (its templates' env on a reload). */
  private restoredHookEnv: Record<string, string> = {};

  constructor(
    private readonly alloc: AllocInfo,
    private readonly task: TaskSpec,
    readonly taskDir: string,
    private readonly hooks: readonly TaskHook[],
    private readonly deps: TaskRunnerDeps,
    /** The task's saved handle and state when the caller read them already (a restore reads every alloc's in one go); else read here. */
    savedTask?: SavedTask,
  ) {
    this.log = deps.logger.child({ alloc_id: alloc.id, task: task.name });
    this.variables = { ...deps.variables };
    if (savedTask?.error) throw savedTask.error;
    const saved = savedTask ? savedTask.state : deps.allocStore.getTaskState(alloc.id, task.name);
    this.state = saved ? { ...saved, events: [...saved.events] } : { state: 'pending', failed: false, restarts: 0, events: [] };
    this.handle = savedTask ? savedTask.handle : deps.allocStore.getTaskHandle(alloc.id, task.name);
    this.tracker = new RestartTracker(task.restart, deps.clock);
    this.saves = new TaskSaves(
      alloc.id,
      task.name,
      () => this.state,
      () => this.handle,
      deps,
      this.log,
    );
    const files = task.templates?.length ? new TaskTemplates(task.templates, this.log) : undefined;
    this.templateFiles = files;
    this.templates = files && {
      reload: () => {
        const handle = this.handle; // a reload acts only on the run it was asked for (checked again when it acts)
        const live = () => this.attached && this.state.state === 'running' && !this.stopping && !this.detached && this.handle === handle;
        if (!live()) return Promise.resolve();
        return files.reload(
          {
            live,
            restart: (reason) => this.restart(reason),
            fail: (reason) => void (live() && this.restartFor(reason, true, true)),
            signal: TaskTemplates.signalThrough(this.deps.driver, () => this.handle),
            event: (e) => this.event(e),
            sleep: (ms) => this.deps.clock.sleep(ms, this.stopController.signal),
            random: deps.random ?? Math.random,
          },
          // A task re-attached after an agent restart was not started by this runner: its env is made again (its hooks' from the restore).
          () => {
            const vars = { ...this.variables, ...this.restoredHookEnv };
            const own = interpolateTask({ config: { command: '', args: [] }, env: this.task.env }, vars, this.nodeValues).env;
            return { env: { ...vars, ...own }, nodeValues: this.nodeValues, target: templateTarget(taskDir, this.isolation) };
          },
        );
      },
    };
  }

  get name(): string {
    return this.task.name;
  }

  /** The variables of the next start, once the alloc knows them (volume paths come from its setup). */
  setVariables(variables: Record<string, string>, nodeValues: Record<string, string> = {}): void {
    this.variables = { ...variables };
    this.nodeValues = { ...nodeValues };
  }

  /** What an isolated task sees besides what its hooks mount (its root, dirs, volumes), once the alloc knows it; undefined for a host process. */
  setIsolation(isolation: IsolationConfig | undefined, refusal: () => string | undefined = () => undefined): void {
    this.isolation = isolation;
    this.isolationRefusal = refusal;
  }

  /**
   * The agent's config changed (a reload): a running task it would now
   * refuse runs on, and says so once (a "Config Refused" event and a warning).
   */
  recheckRefusal(): void {
    if (this.state.state === 'running' && !this.stopping && !this.detached) this.warnIfNowRefused();
  }

  get isDead(): boolean {
    return this.state.state === 'dead';
  }

  /** The task's events, oldest first (read only). */
  get events(): readonly TaskEvent[] {
    return this.state.events;
  }

  /** Runs the task until it is dead for good, stopped, or the runner is detached. */
  run(kind: RunKind): Promise<void> {
    this.loop ??= this.runLoop(kind).catch((err) => {
      if (this.detached || err instanceof ShutdownError) {
        // The agent is going away, not the task: the next agent restores it.
        this.log.info('task runner ended by the agent shutting down; the task is left as it is', { error: err });
        return;
      }
      this.log.error('task runner failed', { error: err });
      this.markDead(true);
    });
    return this.loop;
  }

  /** Resolves when the loop has finished (dead, stopped or detached). */
  settled(): Promise<void> {
    return this.loop ?? Promise.resolve();
  }

  /** Stops the task for good: kill signal, SIGKILL after kill_timeout, stop hooks. */
  async stop(): Promise<void> {
    if (this.stopping) return this.settled();
    this.stopping = true;
    this.tracker.setStopping();
    this.stopController.abort(new ShutdownError(`task ${this.task.name} is stopping`));
    const handle = this.handle;
    if (handle && this.state.state === 'running') {
      this.stopSentTo = handle;
      this.event({ type: TASK_EVENT.killing, message: `sent ${this.task.killSignal}, SIGKILL after ${this.task.killTimeout} ms` });
      await this.deps.driver
        .stop(handle, this.task.killSignal, this.task.killTimeout)
        .catch((err) => this.log.error('stopping the task failed', { error: err }));
    }
    if (!this.loop) {
      // Never ran in this agent (e.g. restored as dead): the stop hooks still run.
      await runTaskHooks(this.hooks, 'stop', this.context('start')).catch((err) => this.log.error('stop hooks failed', { error: err }));
      this.markDead(this.state.failed);
    }
    await this.settled();
  }

  /** Agent shutdown: leave the process running; hooks release what they hold. */
  detach(): void {
    this.detached = true;
    this.saves.detach();
    this.stopController.abort(new ShutdownError('the agent is shutting down'));
    this.detachController.abort(new ShutdownError('the agent is shutting down'));
    for (const hook of this.hooks) {
      try {
        hook.detach?.();
      } catch (err) {
        this.log.warn('hook detach failed', { hook: hook.name, error: err });
      }
    }
  }

  private context(kind: RunKind): TaskHookContext {
    return {
      alloc: this.alloc,
      task: {
        name: this.task.name,
        env: { ...this.task.env },
        ...(this.task.csiPlugin ? { csiPlugin: this.task.csiPlugin } : {}),
        ...(this.task.isolated ? { isolated: true } : {}),
      },
      kind,
      signal: this.stopController.signal,
      emitEvent: (e) => this.event(e),
      requestRestart: (reason) => void this.restartFor(reason, true),
      taskMountInfo: async () => (this.handle && this.deps.driver.taskMountInfo ? this.deps.driver.taskMountInfo(this.handle) : undefined),
    };
  }

  private async runLoop(kind: RunKind): Promise<void> {
    let runKind: RunKind = kind;
    /** Starts in a row that failed for a fault of the agent itself. */
    let localStartFaults = 0;
    for (;;) {
      if (this.stopping || this.detached) break;
      let exit: ExitResult | undefined;
      let handle: TaskHandle | undefined;
      const ctx = this.context(runKind);

      if (runKind === 'restore' && this.state.state === 'dead') {
        return; // it had finished for good before the agent restarted
      }
      if (runKind === 'restore' && !this.handle) {
        // The last agent may have died between starting the task and saving
        // its handle: the executor's own record finds it.
        // Not even a stop() ends this early: stop hooks must not release
        // the volumes of a task that may run; only finding out does.
        const adopted = await this.untilKnown('adopt', () =>
          this.deps.driver.adopt({ allocId: this.alloc.id, taskName: this.task.name, taskDir: this.taskDir }),
        );
        if (!adopted) return; // detached
        this.handle = adopted.value;
        if (this.handle) {
          this.saves.saveHandle(this.handle);
          this.log.warn('adopted a task whose handle was never saved', { pid: this.handle.pid });
        }
      }
      if (runKind === 'restore' && this.handle) {
        const saved = this.handle;
        const known = await this.untilKnown('recover', () => this.deps.driver.recover(saved));
        if (!known) return; // detached
        const recovered = known.value;
        if (recovered.running && this.stopping) {
          // stop() came while this was unknown and could signal nothing:
          // stop it now, and end as a stop once it has really exited.
          handle = saved;
          if (this.stopSentTo !== saved) this.stopInBackground(saved);
        } else if (recovered.running) {
          handle = this.handle;
          // The process runs already: prestart only re-creates what the hooks
          // keep (dirs, env for later restarts); a failure must not kill it.
          this.restoredHookEnv = await runTaskHooks(this.hooks, 'prestart', ctx).then(
            (r) => r.env ?? {},
            (err) => (this.log.warn('prestart hooks failed on restore; the task keeps running', { error: err }), {}),
          );
          this.setState({ state: 'running' }, { type: TASK_EVENT.reattached, message: `re-attached to pid ${handle.pid}` });
          this.warnIfNowRefused();
          // A stop() during the hooks may have found the state not yet running and signalled nothing.
          if (this.stopping && this.stopSentTo !== handle) this.stopInBackground(handle);
          else this.poststart(ctx);
        } else {
          // The saved handle may name an older run: the last agent can die
          // after the executor started a newer one and before saving its
          // handle. Then that run is the task, and the old exit is history.
          const found = await this.untilKnown('adopt', () =>
            this.deps.driver.adopt({ allocId: this.alloc.id, taskName: this.task.name, taskDir: this.taskDir }),
          );
          if (!found) return; // detached
          const newer = found.value;
          if (newer && (newer.pid !== saved.pid || newer.startTime !== saved.startTime) && this.deps.driver.isRunning(newer)) {
            handle = newer;
            this.handle = newer;
            this.saves.saveHandle(newer);
            this.log.warn('the saved handle was an older run; re-attached to the newer run its executor recorded', {
              old_pid: saved.pid,
              pid: newer.pid,
            });
            this.restoredHookEnv = await runTaskHooks(this.hooks, 'prestart', ctx).then(
              (r) => r.env ?? {},
              (err) => (this.log.warn('prestart hooks failed on restore; the task keeps running', { error: err }), {}),
            );
            this.setState(
              { state: 'running', startedAt: newer.startedAt, finishedAt: undefined, exitCode: undefined, signal: undefined },
              { type: TASK_EVENT.reattached, message: `re-attached to pid ${newer.pid} (a newer run than the saved pid ${saved.pid})` },
            );
            this.warnIfNowRefused();
            if (this.stopping && this.stopSentTo !== newer) this.stopInBackground(newer);
            else this.poststart(ctx);
          } else {
            exit = recovered.exit;
            this.log.info('task exited while the agent was away', { exit });
          }
        }
      }

      if (!handle && !exit) {
        if (this.stopping) break;
        try {
          handle = await this.startProcess(ctx);
          localStartFaults = 0;
        } catch (err) {
          if (this.detached) break;
          if (err instanceof TaskAlreadyRunningError) {
            // Its last start ran it after all (the handle was lost to a
            // fault): take it over rather than count a failure and release
            // the volumes it runs on.
            const adopted = await this.untilKnown('adopt', () =>
              this.deps.driver.adopt({ allocId: this.alloc.id, taskName: this.task.name, taskDir: this.taskDir }),
            );
            if (!adopted) return; // detached
            if (adopted.value) handle = this.takeOver(adopted.value, ctx);
          }
          if (!handle && this.stopping) break;
          if (!handle && isTransientFsError(err)) {
            // A fault of the agent itself (EMFILE, ENOMEM…) says nothing about
            // the task: try again, without using up a restart attempt.
            localStartFaults++;
            const delay = doublingBackoff(localStartFaults, DRIVER_RETRY_BASE, DRIVER_RETRY_MAX);
            if (localStartFaults === 1)
              this.event({
                type: TASK_EVENT.driverFailure,
                message: `start is retried: it failed for a fault of the agent itself, not of the task (${errorMessage(err)}); this does not count as a restart`,
              });
            this.log.warn('start failed for a fault of the agent itself; trying again', {
              attempt: localStartFaults,
              delay_ms: delay,
              error: err,
            });
            try {
              await this.deps.clock.sleep(delay, this.stopController.signal);
            } catch {
              break;
            }
            continue;
          }
          if (!handle) {
            localStartFaults = 0;
            // A refusal, an image or a template has its Setup Failure event already; the driver was never asked.
            if (!(err instanceof TaskRefusedError) && !(err instanceof TaskImageSetupError) && !(err instanceof TemplateRenderError))
              this.event({ type: TASK_EVENT.driverFailure, message: errorMessage(err), failed: true });
            // A refused configuration fails at once: restarts would only repeat the refusal.
            const decision =
              err instanceof TaskRefusedError
                ? { action: 'fail' as const, reason: `not restarting: this agent refuses the task's configuration` }
                : this.tracker.onStartFailure(err);
            if (!(await this.afterDecision(decision))) break;
            runKind = 'start';
            continue;
          }
        }
        if (!handle) break;
      }

      if (!exit) {
        this.attached = true;
        const pending = this.pendingRestart;
        this.pendingRestart = undefined;
        if (pending !== undefined) void this.restartFor(pending, false);
        const waited = await this.waitForExit(handle!);
        this.attached = false;
        if (waited === 'shutdown') return;
        exit = waited;
      }
      if (this.detached) return;

      const how = exit.error ? `status unknown: ${exit.error}` : exit.signal ? `signal ${exit.signal}` : `exit code ${exit.exitCode}`;
      this.setState({ finishedAt: exit.finishedAt, exitCode: exit.exitCode, signal: exit.signal });
      this.event({ type: this.stopping ? TASK_EVENT.killed : TASK_EVENT.terminated, message: `task exited: ${how}` });
      await runTaskHooks(this.hooks, 'exited', ctx).catch((err) => this.log.warn('exited hooks failed', { error: err }));
      if (this.stopping) break;

      const requested = this.restartRequested;
      this.restartRequested = undefined;
      if (requested?.fails) {
        this.setState({ failed: true }, { type: TASK_EVENT.notRestarting, message: `not restarting: ${requested.reason}`, failed: true });
        break;
      }
      if (requested && !requested.counted) {
        this.event({ type: TASK_EVENT.restarting, message: `restart requested: ${requested.reason}` });
        this.setState({ restarts: this.state.restarts + 1 });
        runKind = 'start';
        continue;
      }
      // A restart a health check asked for is a failure of the task: the policy decides, as for any exit.
      const decision = requested ? this.tracker.onRestartRequested(requested.reason) : this.tracker.onExit(exit);
      if (!(await this.afterDecision(decision))) break;
      runKind = 'start';
    }

    if (this.detached) return;
    if (this.stopping) {
      await runTaskHooks(this.hooks, 'stop', this.context('start')).catch((err) => this.log.error('stop hooks failed', { error: err }));
    }
    this.markDead(this.state.failed);
  }

  /**
   * The task's exit. A wait that fails says nothing about the task (the agent
   * may be out of file descriptors): it is logged and waited again after a
   * backoff, also while the task is being stopped. 'shutdown' when the
   * runner detaches or the driver is disposed.
   */
  private async waitForExit(handle: TaskHandle): Promise<ExitResult | 'shutdown'> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.deps.driver.wait(handle);
      } catch (err) {
        if (this.detached || err instanceof ShutdownError) return 'shutdown';
        const delay = doublingBackoff(attempt, DRIVER_RETRY_BASE, DRIVER_RETRY_MAX);
        this.log.warn('waiting for the task failed; it is not taken for dead, waiting again', {
          pid: handle.pid,
          attempt,
          delay_ms: delay,
          stopping: this.stopping,
          error: err,
        });
        // Stopping too waits for a real exit: the stop hooks must not release
        // what a task still holds while driver.stop is still at work. A stop()
        // during the backoff only cuts it short, to wait again at once.
        const wasStopping = this.stopping;
        try {
          await this.deps.clock.sleep(delay, wasStopping ? this.detachController.signal : this.stopController.signal);
        } catch {
          if (this.detached) return 'shutdown';
        }
      }
    }
  }

  /**
   * Runs a driver call of the restore path until it does not fail for a
   * transient fault of the agent itself: "unknown" is neither "no task" nor
   * "exited". Other failures are thrown. Undefined when the runner detaches
   * meanwhile; a stop() does not end it: the task may run, and stopping
   * needs to know.
   */
  private async untilKnown<T>(what: string, call: () => T | Promise<T>): Promise<{ value: T } | undefined> {
    for (let attempt = 1; ; attempt++) {
      try {
        return { value: await call() };
      } catch (err) {
        if (!isTransientFsError(err)) throw err;
        if (this.detached) return undefined;
        const delay = doublingBackoff(attempt, DRIVER_RETRY_BASE, DRIVER_RETRY_MAX);
        this.log.warn(`driver ${what} failed for a fault of the agent itself; trying again`, { attempt, delay_ms: delay, error: err });
        try {
          await this.deps.clock.sleep(delay, this.detachController.signal);
        } catch {
          return undefined;
        }
      }
    }
  }

  /** A task that runs although its start failed (TaskAlreadyRunningError): it becomes this run's. */
  private takeOver(handle: TaskHandle, ctx: TaskHookContext): TaskHandle {
    this.handle = handle;
    this.saves.saveHandle(handle);
    this.setState({ state: 'running', startedAt: handle.startedAt, finishedAt: undefined, exitCode: undefined, signal: undefined });
    this.event({ type: TASK_EVENT.started, message: `took over the running task (pid ${handle.pid}) whose start had failed` });
    this.log.warn('took over a running task whose start had failed', { pid: handle.pid });
    if (this.stopping) this.stopInBackground(handle);
    else this.poststart(ctx);
    return handle;
  }

  /** Sends the kill signal (SIGKILL after kill_timeout); the loop waits for the exit itself. */
  private stopInBackground(handle: TaskHandle): void {
    this.stopSentTo = handle;
    this.event({ type: TASK_EVENT.killing, message: `sent ${this.task.killSignal}, SIGKILL after ${this.task.killTimeout} ms` });
    void this.deps.driver
      .stop(handle, this.task.killSignal, this.task.killTimeout)
      .catch((err) => this.log.error('stopping the task failed', { error: err }));
  }

  /** Applies a restart decision; returns whether to go round again. */
  private async afterDecision(decision: ReturnType<RestartTracker['onExit']>): Promise<boolean> {
    if (decision.action === 'restart') {
      this.event({ type: TASK_EVENT.restarting, message: `${decision.reason}; restarting in ${decision.delay} ms` });
      this.setState({ state: 'pending', restarts: this.state.restarts + 1 });
      try {
        await this.deps.clock.sleep(decision.delay, this.stopController.signal);
      } catch {
        return false;
      }
      return !this.stopping && !this.detached;
    }
    if (decision.action === 'fail') {
      this.event({ type: TASK_EVENT.notRestarting, message: decision.reason, failed: true });
      this.setState({ failed: true });
    }
    return false;
  }

  private async startProcess(ctx: TaskHookContext): Promise<TaskHandle | undefined> {
    const refused = this.isolationRefusal();
    if (refused !== undefined) {
      this.event({ type: TASK_EVENT.setupFailure, message: refused, failed: true });
      throw new TaskRefusedError(`task "${this.task.name}": ${refused}`);
    }
    let hookEnv: Record<string, string>;
    let hookMounts: TaskBindMount[];
    try {
      const prestart = await runTaskHooks(this.hooks, 'prestart', ctx);
      hookEnv = prestart.env ?? {};
      hookMounts = prestart.mounts ?? [];
    } catch (err) {
      this.event({ type: TASK_EVENT.setupFailure, message: errorMessage(err), failed: true });
      throw err;
    }
    if (this.stopping || this.detached) return undefined;
    const vars = { ...this.variables, ...hookEnv };
    // The env block first, then the templates (an env template wins over the env block, as Nomad's), then command, args and the image's fields against both.
    const strict = (fields: Pick<TaskSpec, 'config' | 'env' | 'image'>, against: Record<string, string>): InterpolatedTask => {
      try {
        return interpolateTask(fields, against, this.nodeValues);
      } catch (err) {
        // A name with no value here (a meta key this node lacks): refused, never passed on as written.
        this.event({ type: TASK_EVENT.setupFailure, message: errorMessage(err), failed: true });
        throw new TaskRefusedError(`task "${this.task.name}": ${errorMessage(err)}`);
      }
    };
    let env = { ...vars, ...strict({ config: { command: '', args: [] }, env: this.task.env }, vars).env };
    if (this.templateFiles) {
      try {
        env = { ...env, ...this.templateFiles.renderForStart(env, templateTarget(this.taskDir, this.isolation), this.nodeValues) };
      } catch (err) {
        this.event({ type: TASK_EVENT.setupFailure, message: `Template failed: ${errorMessage(err)}`, failed: true });
        throw err;
      }
    }
    const resolved = strict({ config: this.task.config, env: {}, ...(this.task.image ? { image: this.task.image } : {}) }, env);
    let launch: { command: string; args: string[]; env: Record<string, string>; isolation: IsolationConfig | undefined } = {
      command: resolved.command,
      args: resolved.args,
      env,
      isolation: this.isolation ? { ...this.isolation, mounts: [...(this.isolation.mounts ?? []), ...hookMounts] } : undefined,
    };
    // An image task runs on its image's root, with the process the image and the task give (task-image.ts).
    if (this.task.image && launch.isolation) {
      const say = (e: Omit<TaskEvent, 'time'>) => this.event(e);
      launch = await prepareImageStart({
        ...launch,
        isolation: launch.isolation,
        // The image's entrypoint and work_dir as interpolated, like command and args.
        task: {
          ...this.task,
          image: {
            ...this.task.image,
            ...(resolved.entrypoint ? { entrypoint: resolved.entrypoint } : {}),
            ...(resolved.workDir !== undefined ? { workDir: resolved.workDir } : {}),
          },
        },
        taskDir: this.taskDir,
        images: this.deps.images,
        say,
        // A stop ends a pull under way (the pull is shared: it stops only when no other task waits on it).
        signal: this.stopController.signal,
      });
      if (this.stopping || this.detached) return undefined;
    }
    // A new process runs on what the alloc has now: a restart asked for the old one is moot.
    this.pendingRestart = undefined;
    const handle = await this.deps.driver.start({
      allocId: this.alloc.id,
      taskName: this.task.name,
      taskDir: this.taskDir,
      command: launch.command,
      args: launch.args,
      env: launch.env,
      ...(this.task.logs ? { logs: this.task.logs } : {}),
      ...(launch.isolation ? { isolation: launch.isolation } : {}),
    });
    this.handle = handle;
    this.saves.saveHandle(handle);
    this.setState(
      { state: 'running', startedAt: handle.startedAt, finishedAt: undefined, exitCode: undefined, signal: undefined },
      { type: TASK_EVENT.started, message: this.startedMessage(handle.pid) },
    );
    if (this.stopping) {
      // stop() raced the start: it saw no running handle, so kill it here.
      await this.deps.driver.stop(handle, this.task.killSignal, this.task.killTimeout).catch(() => undefined);
    }
    this.poststart(ctx);
    return handle;
  }

  /**
   * A re-attached task runs as it was started, even when this agent now
   * refuses that (the config changed while it ran: a capability no longer
   * allowed, the host's network with no API token): it is never stopped for
   * that, but it is said, as an event and a warning, since it will not be
   * started again as it is.
   */
  private warnIfNowRefused(): void {
    const refused = this.isolationRefusal();
    if (refused === undefined) return;
    const message = `runs on as it was started, but this agent now refuses its configuration and will not start it again: ${refused}`;
    this.event({ type: TASK_EVENT.configRefused, message });
    this.log.warn(message);
  }

  /** What the Started event says: the driver, and the resource limits applied (or that they are not). */
  private startedMessage(pid: number): string {
    const r = this.task.resources;
    if (!this.isolation)
      return `task started by the raw_exec driver (pid ${pid})${r ? '; resources are not enforced for a host process' : ''}`;
    const limits = [
      r?.cpu !== undefined ? `cpu shares ${r.cpu}` : undefined,
      r?.memoryMB !== undefined ? `memory limit ${r.memoryMB} MiB` : undefined,
      this.isolation.privileged ? 'privileged' : undefined,
      this.isolation.network === 'host' ? "the host's network" : 'own network (loopback only)',
    ].filter(Boolean);
    const driver = this.task.image ? `${this.task.driver} driver (image ${this.task.image.ref}, runc` : 'exec driver (runc';
    return `task started isolated by the ${driver}, pid ${pid}${limits.length ? `; ${limits.join(', ')}` : ''})`;
  }

  private poststart(ctx: TaskHookContext): void {
    runTaskHooks(this.hooks, 'poststart', ctx).catch((err) => {
      if (!this.stopping && !this.detached) this.log.warn('poststart hooks failed', { error: err });
    });
  }

  /**
   * Restarts the task if it is running (an alloc hook asked, e.g. for a stale
   * mount); the reason is its event. Not the task's failure: it starts again
   * at once and the restart policy does not count it.
   */
  restart(reason: string): void {
    if (this.stopping || this.detached) return;
    if (!this.attached) {
      // Not attached yet (a restore's prerun runs before the re-attach): the
      // saved handle is not this runner's to kill yet.
      this.pendingRestart = reason;
      this.log.info('restart requested before the task is attached; it is made once the task is re-attached', { reason });
      return;
    }
    void this.restartFor(reason, false);
  }

  /** Adds an event of the alloc (an alloc hook's) to this task's saved events and the event stream. */
  addEvent(event: TaskEvent): void {
    this.event(event);
  }

  /**
   * A hook asked for a restart: kill the process; the loop starts it again
   * (`counted`: as the restart policy decides for a failed exit; `fails`:
   * never, the task fails). Only a running task is restarted, and a request
   * while one is under way joins it (the one that fails, then the counted one, wins).
   */
  private async restartFor(reason: string, counted: boolean, fails = false): Promise<void> {
    if (this.stopping || this.detached || !this.handle || this.state.state !== 'running') return;
    const rank = (r: { counted: boolean; fails?: boolean }) => (r.fails ? 2 : r.counted ? 1 : 0);
    const request = { reason, counted, fails };
    if (this.restartRequested) {
      if (rank(request) > rank(this.restartRequested)) this.restartRequested = request; // one kill serves both
      return;
    }
    this.restartRequested = request;
    this.event({ type: fails ? TASK_EVENT.killing : TASK_EVENT.restartRequested, message: reason, ...(fails ? { failed: true } : {}) });
    await this.deps.driver.stop(this.handle, this.task.killSignal, this.task.killTimeout).catch((err) => {
      // Nothing was killed: no request is under way (the task's next exit is not this one); one that joined it is made now.
      const joined = this.restartRequested;
      this.restartRequested = undefined;
      this.log.error('restart: stopping the task failed; the restart is not made', { error: err });
      if (joined && joined !== request) void this.restartFor(joined.reason, joined.counted, joined.fails);
    });
  }

  private event(e: Omit<TaskEvent, 'time'> & { time?: number }): void {
    const event = this.record(e);
    this.saves.persist();
    this.deps.onEvent(this.task.name, event);
  }

  /** Adds the event to the task's state (the oldest dropped past MAX_EVENTS); the caller persists. */
  private record(e: Omit<TaskEvent, 'time'> & { time?: number }): TaskEvent {
    const event: TaskEvent = { ...e, time: e.time ?? this.deps.clock.now() };
    this.state.events.push(event);
    if (this.state.events.length > MAX_EVENTS) this.state.events.splice(0, this.state.events.length - MAX_EVENTS);
    return event;
  }

  /** Applies the change, and the event that says what happened if one is given, in one write. */
  private setState(patch: Partial<TaskState>, e?: Omit<TaskEvent, 'time'> & { time?: number }): void {
    Object.assign(this.state, patch);
    const event = e && this.record(e);
    this.saves.persist();
    this.deps.onStateChange();
    if (event) this.deps.onEvent(this.task.name, event);
  }

  private markDead(failed: boolean): void {
    this.setState({ state: 'dead', failed });
  }

  /** The task's record is deleted (a purge): no save that failed is made again, which would bring it back. */
  forgetSaves(): void {
    this.saves.forget();
  }
}
