// AllocRunner: one alloc of a group. prerun (alloc hooks: the csi hook waits
// for plugins, claims and mounts volumes) → its tasks run → when every task
// is dead, or on stop, postrun (unmount, release claims).
//
// On a restore after an agent restart the same path runs in restore mode:
// live tasks are re-attached, never restarted, and live mounts are kept.
//
// A new alloc is saved before anything of it starts (saveBeforeRun), and a
// save that fails there fails the request: an alloc the agent never saved
// would vanish on its next restart while its tasks and mounts lived on.
// A stop is saved (desired stop) strictly before anything is aborted or
// killed: when that write fails the stop fails (AllocStopNotSavedError, a
// 507/500) and the alloc runs on, since a stop the next agent never reads
// would start the workload again. Later saves that fail (a full disk) are
// logged and made again on the next change or by a retry timer (backoff up to
// 30 s), whichever comes first: a terminal state has no next change.
import {
  type Clock,
  CsiplugError,
  type Logger,
  ShutdownError,
  crashPoint,
  doublingBackoff,
  errorMessage,
  requestsOfAlloc,
  type Disposable,
} from '@csiplug/core';
import {
  EVENT_VOLUME_UNMOUNTED,
  EVENT_VOLUME_UNMOUNT_PENDING,
  type ICSIHookFactory,
  type ICSIPluginSupervisorFactory,
  runAllocHooks,
  type AllocHook,
  type AllocHookContext,
  type AllocInfo,
  type MountedVolume,
  type RunKind,
  type TaskEvent,
  type TaskHook,
} from '@csiplug/hooks';
import * as fs from 'fs';
import * as path from 'path';
import type { TaskDriver } from '@csiplug/driver';
import type { Alloc, AllocClientStatus, GroupSpec, TaskState } from '@csiplug/jobspec';
import type { ExecDriverConfig, ImageDriverConfig, NodeAttributes } from '@csiplug/jobspec';
import type { TaskImagesService } from '@csiplug/images';
import { imageDirOf } from './task-image';
import type { AllocRecord, AllocStore, SavedTask } from './alloc-store';
import { TASK_EVENT, TaskRunner } from './task-runner';
import { TaskSetup } from './task-setup';
import type { TaskStateWriter } from './task-state-writer';
import type { DrainedPlugin } from './plugin-drain';
import type { VolumeReconcilerService } from '@csiplug/volumes';

export interface AllocRunnerDeps {
  dataDir: string;
  nodeId: string;
  driver: TaskDriver;
  /** Where the alloc and its tasks are saved for a restore. */
  allocStore: AllocStore;
  /** The group write of task states. */
  taskStates: TaskStateWriter;
  /** The exec driver's settings: what isolated tasks see, which capabilities they may add, whether a plugin may be privileged. */
  exec: ExecDriverConfig;
  /**
   * Whether an isolated task may share the host's network (it asks with
   * network_mode = "host"; the default is a loopback-only namespace of its
   * own): only when the agent's API asks for a token (acl { token }), since
   * a task on the host's network reaches the API on 127.0.0.1, which starts
   * processes as root. Asked at each start: a config reload changes it.
   */
  hostNetwork: () => boolean;
  /** Whether a host-process (raw_exec) task may start: the agent config's plugin "raw_exec" { config { enabled } }. */
  rawExec: () => boolean;
  clock: Clock;
  logger: Logger;
  supervisors: ICSIPluginSupervisorFactory;
  csiHooks: ICSIHookFactory;
  /** The volume reconciler: what this alloc has mounted or still holds. */
  volumes: Pick<VolumeReconcilerService, 'list'>;
  /**
   * Whether the alloc still holds its claim on the volume. An unmount
   * releases the claim as its last step, so a claim gone means an unmount
   * left pending is done. Without it, a pending unmount is never said done.
   */
  claimHeld?(volumeId: string, allocId: string): boolean;
  /** Whether node plugin `pluginId` may come back on this node: a volume's unmount waits for its away plugin only then. Absent: always. */
  nodePluginExpected?(pluginId: string): boolean;
  /**
   * Before the tasks of an alloc that serves node plugins stop: waits
   * (bounded) for the unmounts on this node that still need those plugins
   * (runner/plugin-drain.ts). Without it a plugin stops at once.
   */
  drainPlugins?(allocId: string, plugins: readonly DrainedPlugin[], say: (event: TaskEvent) => void, signal: AbortSignal): Promise<void>;
  /** The agent is going away and leaves its tasks running: a stop whose plugin wait it cut short stops nothing (the next agent finishes it). */
  leaving?(): boolean;
  /** Extra variables every task sees (e.g. CSIPLUG_HOSTPATH_CLI). */
  variables: Record<string, string>;
  /** This node for interpolation (`${attr.…}`, `${node.…}`, `${meta.…}`, NOMAD_DC/REGION): the agent's fingerprint. */
  node?: NodeAttributes;
  /** The agent's image service: the roots of image tasks (driver docker/podman). */
  images?: TaskImagesService;
  /** plugin "docker" { config { … } }: what image tasks may have (DEFAULT_IMAGE_DRIVER when absent). */
  docker?: ImageDriverConfig;
  onTaskEvent(alloc: Alloc, task: string, event: TaskEvent): void;
  onStatusChange(alloc: Alloc): void;
}

/**
 * The allocs of a request could not be saved, so none of them was started
 * and nothing they replace was stopped. Code EALLOC_SAVE_NO_SPACE (HTTP 507)
 * when the state's filesystem is full, EALLOC_SAVE_FAILED (500) otherwise.
 */
export class AllocsNotSavedError extends CsiplugError {
  constructor(
    readonly allocIds: readonly string[],
    readonly jobId: string,
    cause: unknown,
  ) {
    const noSpace = cause instanceof CsiplugError && cause.code === 'ESTATE_NO_SPACE';
    super(
      noSpace ? 'EALLOC_SAVE_NO_SPACE' : 'EALLOC_SAVE_FAILED',
      `could not save alloc${allocIds.length === 1 ? '' : 's'} ${allocIds.join(', ')} of job "${jobId}": ${errorMessage(cause)}; nothing of this request was started or stopped`,
      { cause },
    );
  }
}

/**
 * A stop could not be saved (desired stop), so nothing of the alloc was
 * stopped: it runs on. Code EALLOC_SAVE_NO_SPACE (HTTP 507) when the state's
 * filesystem is full, EALLOC_SAVE_FAILED (500) otherwise.
 */
export class AllocStopNotSavedError extends CsiplugError {
  constructor(
    readonly allocId: string,
    readonly jobId: string,
    cause: unknown,
  ) {
    const noSpace = cause instanceof CsiplugError && cause.code === 'ESTATE_NO_SPACE';
    super(
      noSpace ? 'EALLOC_SAVE_NO_SPACE' : 'EALLOC_SAVE_FAILED',
      `could not save the stop of alloc ${allocId} of job "${jobId}": ${errorMessage(cause)}; the alloc was not stopped and runs on`,
      { cause },
    );
  }
}

/** Backoff (ms) of the retry of a save that failed: doubling from the base up to the max. */
const SAVE_RETRY_BASE = 1_000;
const SAVE_RETRY_MAX = 30_000;

export class AllocRunner {
  private readonly tasks = new Map<string, TaskRunner>();
  private readonly group: GroupSpec;
  private volumes: Record<string, MountedVolume> = {};
  private hooks: AllocHook[] = [];
  /** Aborts setup (prerun) when the alloc is stopped or the agent detaches. */
  private readonly controller = new AbortController();
  /** Aborts teardown (postrun) only when the agent detaches: a stop must still unmount. */
  private readonly teardownController = new AbortController();
  private running: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;
  private postrunning: Promise<void> | undefined;
  /** This run's postrun has ended (its events are written). */
  private postrunFinished = false;
  private cutShort = false;
  private setupFailed = false;
  private detached = false;
  /** Whether the state holds this alloc's desired stop (a stop then needs no strict save first). */
  private stopSaved: boolean;
  /** The retry of a save that failed, while one is pending; and how many failed in a row. */
  private saveRetry: Disposable | undefined;
  private saveFailures = 0;
  /** Set by forgetSaves(): the record is gone (a purge), nothing is written again. */
  private forgotten = false;
  private readonly log: Logger;

  constructor(
    readonly alloc: Alloc,
    private readonly deps: AllocRunnerDeps,
    /** The alloc's saved record when the caller has just read it (a restore): not read again. */
    saved: AllocRecord | undefined = deps.allocStore.getAllocation(alloc.id),
    /** Its tasks' saved handles and states, by task name, when the caller read them with the record (a restore); else each task reads its own. */
    savedTasks?: Readonly<Record<string, SavedTask>>,
  ) {
    const group = alloc.job.groups.find((g) => g.name === alloc.group);
    if (!group) throw new Error(`alloc ${alloc.id}: job ${alloc.jobId} has no group "${alloc.group}"`);
    this.group = group;
    this.log = deps.logger.child({ alloc_id: alloc.id });
    if (saved) this.volumes = saved.volumes;
    this.stopSaved = saved?.alloc.desiredStatus === 'stop';
    // Task runners exist from the start (they only load what was saved), so
    // a stop or a failed setup can always reach a task that is still alive
    // from before an agent restart.
    for (const task of group.tasks) {
      const hooks: TaskHook[] = task.csiPlugin ? [deps.supervisors.create(task.csiPlugin)] : [];
      this.tasks.set(
        task.name,
        new TaskRunner(
          this.info(),
          task,
          this.taskDir(task.name),
          hooks,
          {
            driver: deps.driver,
            allocStore: deps.allocStore,
            taskStates: deps.taskStates,
            clock: deps.clock,
            logger: deps.logger,
            variables: {},
            onEvent: (name, event) => deps.onTaskEvent(this.alloc, name, event),
            onStateChange: () => this.recompute(),
            ...(deps.images ? { images: deps.images } : {}),
          },
          savedTasks && (Object.hasOwn(savedTasks, task.name) ? savedTasks[task.name] : {}),
        ),
      );
    }
  }

  /** Whether the group asks for CSI volumes (and so gets the csi hook). */
  private get usesCsiVolumes(): boolean {
    return this.group.volumes.some((v) => v.type === 'csi');
  }

  /** Whether anything of this alloc may still be alive: a mount, a claim, or a task not known dead. */
  get needsTeardown(): boolean {
    const mounted = this.deps.volumes.list(this.alloc.id).some((r) => r.desired === 'mounted');
    return mounted || [...this.tasks.values()].some((t) => !t.isDead);
  }

  get allocDir(): string {
    return path.join(this.deps.dataDir, 'allocs', this.alloc.id);
  }

  taskDir(task: string): string {
    return path.join(this.allocDir, task);
  }

  get mountedVolumes(): Record<string, MountedVolume> {
    return { ...this.volumes };
  }

  taskStates(): Record<string, TaskState> {
    const out: Record<string, TaskState> = {};
    for (const task of this.group.tasks) {
      out[task.name] = this.tasks.get(task.name)!.state;
    }
    return out;
  }

  /**
   * Saves the records of new allocs before anything of them runs, in one
   * write together with the allocs they replace marked desired stop (an
   * agent that dies right after finds both, and finishes the change). Throws
   * AllocsNotSavedError when the write fails (a full disk): then nothing was
   * saved, and the caller must neither run `starting` nor stop `replacing`.
   */
  static saveBeforeRun(starting: readonly AllocRunner[], replacing: readonly AllocRunner[] = []): void {
    const first = starting[0];
    if (!first) return;
    const records: AllocRecord[] = [
      ...starting.map((r) => ({ alloc: r.alloc, volumes: r.volumes })),
      ...replacing.map((r) => ({ alloc: { ...r.alloc, desiredStatus: 'stop' as const }, volumes: r.volumes })),
    ];
    try {
      first.deps.allocStore.putAllocations(records);
    } catch (err) {
      throw new AllocsNotSavedError(
        starting.map((r) => r.alloc.id),
        first.alloc.jobId,
        err,
      );
    }
  }

  /** Starts (or, after an agent restart, restores) the alloc. Resolves once its tasks are under way. */
  run(kind: RunKind): Promise<void> {
    this.running ??= this.doRun(kind);
    return this.running;
  }

  private info(): AllocInfo {
    // A per_alloc volume is this alloc's own: its hooks mount "<source>[<index>]".
    const volumes = requestsOfAlloc(this.group.volumes, this.alloc.index);
    return { id: this.alloc.id, jobId: this.alloc.jobId, group: this.alloc.group, volumes };
  }

  private hookContext(kind: RunKind, signal: AbortSignal = this.controller.signal): AllocHookContext {
    const { nodePluginExpected } = this.deps;
    return {
      alloc: this.info(),
      kind,
      signal,
      ...(nodePluginExpected ? { nodePluginExpected: (pluginId: string) => nodePluginExpected(pluginId) } : {}),
      // Into every task's saved events (alloc status shows them, a restart keeps them) and the event stream.
      emitEvent: (e) => this.taskEvent({ ...e, time: e.time ?? this.deps.clock.now() }),
      // A task not yet re-attached (a restore's prerun) takes the restart once it is (TaskRunner.restart).
      restartTasks: (reason) => {
        if (this.detached || this.stopping) return;
        for (const t of this.tasks.values()) t.restart(reason);
      },
      // An isolated task's private bind still shows the old (dead) mount: only a restart binds the new one.
      volumeRemounted: (name) => {
        if (this.detached || this.stopping) return;
        for (const task of this.group.tasks) {
          if (!task.isolated || !task.volumeMounts.some((m) => m.volume === name && (m.propagation ?? 'private') === 'private')) continue;
          this.tasks
            .get(task.name)
            ?.restart(
              `volume "${name}" was remounted; an isolated task with propagation_mode = "private" sees the new mount only after a restart`,
            );
        }
      },
    };
  }

  /**
   * The agent reloaded its config (SIGHUP): each running task's templates are
   * rendered again, and a file that changed gets its change_mode. Resolves
   * when every task's is done; never rejects.
   */
  async reloadTemplates(): Promise<void> {
    await Promise.all([...this.tasks.values()].map((t) => t.templates?.reload() ?? Promise.resolve()));
  }

  /** The agent's config changed (a reload): each running task it would now refuse says so. */
  recheckRefusals(): void {
    for (const t of this.tasks.values()) t.recheckRefusal();
  }

  /**
   * Says "Volume unmounted" for each volume whose unmount this alloc left
   * pending (its last volume event says so) and whose claim it no longer
   * holds: finished later by the reconciler's background retry, a `volume
   * detach`, or while the agent was down. Asked when a claim is released,
   * after boot, and at the end of this alloc's postrun (a retry may have
   * finished before postrun said "pending"). Not while postrun runs: it
   * says itself what it did.
   */
  closeFinishedUnmounts(): void {
    const claimHeld = this.deps.claimHeld;
    if (!claimHeld || (this.postrunning && !this.postrunFinished)) return;
    const open = new Set<string>();
    for (const t of this.tasks.values()) {
      const last = new Map<string, string>();
      for (const e of t.events) {
        const volumeId = e.details?.volume_id;
        if (volumeId && (e.type === EVENT_VOLUME_UNMOUNT_PENDING || e.type === EVENT_VOLUME_UNMOUNTED)) last.set(volumeId, e.type);
      }
      for (const [volumeId, type] of last) if (type === EVENT_VOLUME_UNMOUNT_PENDING) open.add(volumeId);
    }
    for (const volumeId of open) {
      if (claimHeld(volumeId, this.alloc.id)) continue;
      this.taskEvent({
        type: EVENT_VOLUME_UNMOUNTED,
        message: `volume ${volumeId} unmounted later (a background retry, or a volume detach) and its claim released`,
        details: { volume_id: volumeId },
        time: this.deps.clock.now(),
      });
    }
  }

  /** Adds an event to every task of the alloc (one time for all): saved with the task's events, and told to the event stream. */
  private taskEvent(event: TaskEvent): void {
    for (const t of this.tasks.values()) t.addEvent(event);
  }

  private async doRun(kind: RunKind): Promise<void> {
    // 0700: a task never walks the host path to its dirs (runc binds them in as root), and no other user may reach what a task planted there.
    fs.mkdirSync(this.allocDir, { recursive: true, mode: 0o700 });
    // A restored alloc is what the state holds: it is written again only when
    // something changed (a restore of a thousand allocs is not two thousand
    // durable writes of records as they stand).
    if (kind !== 'restore') this.save();
    this.hooks = this.usesCsiVolumes ? [this.deps.csiHooks.create()] : [];
    try {
      const result = await runAllocHooks(this.hooks, 'prerun', this.hookContext(kind));
      const before = JSON.stringify(this.volumes);
      this.volumes = result.volumes ?? {};
      if (kind !== 'restore' || JSON.stringify(this.volumes) !== before) this.save();
      if (!this.controller.signal.aborted) this.prepareTasks();
    } catch (err) {
      // Stopped or detached while setting up: stop() / detach() take it from here.
      if (this.detached || this.controller.signal.aborted) return;

      this.log.error('alloc setup failed', { error: err });
      this.taskEvent({
        type: TASK_EVENT.setupFailure,
        message: `failed to set up alloc: ${errorMessage(err)}`,
        failed: true,
        time: this.deps.clock.now(),
      });
      this.setupFailed = true;
      this.setStatus('failed');
      // A restore that failed may still have live tasks from before: stop
      // them before their volumes go.
      await Promise.all([...this.tasks.values()].map((t) => t.stop()));
      await this.postrun();
      return;
    }
    if (this.controller.signal.aborted) return;
    for (const runner of this.tasks.values()) {
      void runner.run(kind).then(() => this.onTaskSettled());
    }
    this.recompute();
  }

  /** Each task's dirs, variables and what it sees, from the volumes the prerun mounted (task-setup.ts). */
  private prepareTasks(): void {
    new TaskSetup(this.alloc, this.group, this.allocDir, this.volumes, this.deps, this.log).prepare(this.tasks);
    // A restored image task may run on a root an earlier agent made: its image is in use (image GC leaves it).
    for (const task of this.group.tasks)
      if (task.image && this.deps.images)
        this.deps.images
          .adopt(imageDirOf(this.taskDir(task.name)))
          .catch((err) => this.log.warn("could not read an image task's root record", { task: task.name, error: err }));
  }

  /**
   * Unmounts and removes the roots of the alloc's image tasks (their
   * writable layers): when the alloc goes for good (purged or collected),
   * never while a task runs on one. The images stay for image GC.
   */
  async releaseTaskImages(): Promise<void> {
    if (!this.deps.images) return;
    const running = [...this.tasks.entries()].filter(([, t]) => !t.isDead).map(([name]) => name);
    if (running.length) {
      this.log.warn('the image task roots of the alloc are kept: a task of it is not dead (its root stays until the alloc is collected)', {
        tasks: running,
      });
      return;
    }
    for (const task of this.group.tasks) {
      if (!task.image) continue;
      await this.deps.images
        .release(imageDirOf(this.taskDir(task.name)))
        .catch((err) => this.log.warn("could not release an image task's root; its alloc dir is kept", { task: task.name, error: err }));
    }
  }

  private recompute(): void {
    if (this.detached || !this.running) return;
    const states = [...this.tasks.values()].map((t) => t.state);
    let status: AllocClientStatus;
    if (this.setupFailed) status = 'failed';
    else if (states.every((s) => s.state === 'dead')) status = states.some((s) => s.failed) ? 'failed' : 'complete';
    else if (states.some((s) => s.state === 'running')) status = 'running';
    else status = 'pending';
    this.setStatus(status);
  }

  private onTaskSettled(): void {
    if (this.detached || this.stopping) return;
    if ([...this.tasks.values()].every((t) => t.isDead)) {
      // Every task is done on its own: tear down what the alloc set up.
      void this.postrun();
    }
  }

  /**
   * Stops every task, then unmounts and releases the alloc's volumes. The
   * desired stop is saved first; when that write fails nothing is stopped and
   * this rejects with AllocStopNotSavedError (a later call tries again).
   */
  stop(): Promise<void> {
    if (this.stopping) return this.stopping;
    if (!this.stopSaved) {
      try {
        this.deps.allocStore.putAllocation({
          alloc: { ...this.alloc, desiredStatus: 'stop' },
          volumes: this.volumes,
        } satisfies AllocRecord);
      } catch (err) {
        this.log.error('could not save the stop of the alloc; it is not stopped and runs on', { error: err });
        return Promise.reject(new AllocStopNotSavedError(this.alloc.id, this.alloc.jobId, err));
      }
      this.stopSaved = true;
    }
    this.alloc.desiredStatus = 'stop';
    this.stopping = (async () => {
      this.controller.abort();
      await this.running?.catch(() => undefined);
      // The agent went away during a plugin's wait, its tasks left running: the saved stop is finished by the next agent,
      // whose plugin wait sees the workloads' teardowns (a plugin killed now would leave their volumes staged).
      if ((await this.drainPlugins()) && (this.detached || this.deps.leaving?.())) {
        this.cutShort = true;
        return;
      }
      await Promise.all([...this.tasks.values()].map((t) => t.stop()));
      await this.postrun();
      this.recompute();
      if (this.alloc.clientStatus === 'pending' || this.alloc.clientStatus === 'running') this.setStatus('complete');
    })();
    return this.stopping;
  }

  /** The node plugins this alloc serves wait for the unmounts that still need them before its tasks stop; says whether it serves any. */
  private async drainPlugins(): Promise<boolean> {
    const blocks = this.group.tasks.flatMap((t) => (t.csiPlugin ? [t.csiPlugin] : []));
    // A plugin whose controller this alloc serves too (a monolith, or a controller task beside the node task): a claim's release may need it.
    const plugins: DrainedPlugin[] = [...new Set(blocks.filter((b) => b.type !== 'controller').map((b) => b.id))].map((id) => ({
      id,
      monolith: blocks.some((b) => b.id === id && b.type !== 'node'),
    }));
    if (plugins.length === 0 || !this.deps.drainPlugins) return false;
    if (this.detached) return true;
    await this.deps
      .drainPlugins(this.alloc.id, plugins, (e) => this.taskEvent(e), this.teardownController.signal)
      .catch((err) => this.log.warn('waiting for the unmounts that need the plugin failed; it stops now', { error: err }));
    return true;
  }

  /**
   * Its stop ended before stopping anything: the agent went away while its
   * plugin waited for unmounts (its tasks left running, the saved stop left
   * to the next agent). Whoever awaited the stop must not act as if it were
   * done (a purge, a rollout's next step).
   */
  get stopCutShort(): boolean {
    return this.cutShort;
  }

  /** Its teardown (a stop, or the postrun after its tasks ended) is under way: it unmounts its volumes. */
  get tearingDown(): boolean {
    return (this.stopping !== undefined || this.postrunning !== undefined) && !this.postrunFinished && !this.detached;
  }

  /** Agent shutdown: tasks keep running; nothing is unmounted. */
  detach(): void {
    this.detached = true;
    // A ShutdownError, not a plain abort: a mount cut short by the agent going
    // away is left for the next agent to finish, not undone under the alloc.
    const reason = new ShutdownError('the agent is shutting down; the alloc is left to the next agent');
    this.controller.abort(reason);
    this.teardownController.abort(reason);
    this.cancelSaveRetry();
    for (const t of this.tasks.values()) t.detach();
  }

  /** The alloc's record is deleted (a purge): no save that failed is made again, which would bring it back. */
  forgetSaves(): void {
    this.forgotten = true;
    this.cancelSaveRetry();
    for (const t of this.tasks.values()) t.forgetSaves();
  }

  private cancelSaveRetry(): void {
    this.saveRetry?.dispose();
    this.saveRetry = undefined;
  }

  /** Unmounts and releases the alloc's volumes, once; later callers wait for the same run. */
  private postrun(): Promise<void> {
    if (this.detached) return Promise.resolve();
    this.postrunning ??= (async () => {
      const hooks = this.hooks.length ? this.hooks : this.usesCsiVolumes ? [this.deps.csiHooks.create()] : [];
      if (hooks.length) crashPoint('alloc.postrun.before-unmount');
      try {
        await runAllocHooks(hooks, 'postrun', this.hookContext('start', this.teardownController.signal));
      } catch (err) {
        this.log.error('alloc postrun failed', { error: err });
      }
      if (hooks.length) crashPoint('alloc.postrun.after-unmount');
      this.volumes = {};
      this.save();
      this.postrunFinished = true;
      this.closeFinishedUnmounts();
    })();
    return this.postrunning;
  }

  private setStatus(status: AllocClientStatus): void {
    if (this.alloc.clientStatus === status) return;
    this.alloc.clientStatus = status;
    this.save();
    this.deps.onStatusChange(this.alloc);
  }

  /**
   * Saves the whole record. A failure is logged, and the record is saved
   * again on the next change or by a retry timer (backoff), until it lands.
   */
  private save(): void {
    if (this.forgotten) return;
    this.cancelSaveRetry();
    // An alloc saved as over (or to stop) is never ahead of its tasks' states on disk.
    if (this.alloc.desiredStatus === 'stop' || this.alloc.clientStatus === 'complete' || this.alloc.clientStatus === 'failed')
      this.deps.taskStates.flush();
    try {
      this.deps.allocStore.putAllocation({ alloc: this.alloc, volumes: this.volumes } satisfies AllocRecord);
      if (this.alloc.desiredStatus === 'stop') this.stopSaved = true;
      if (this.saveFailures) this.log.info('the alloc is saved again', { failed_saves: this.saveFailures });
      this.saveFailures = 0;
    } catch (err) {
      this.saveFailures++;
      if (this.detached) {
        this.log.error('could not save the alloc; the agent is going away, so it is not tried again', { error: err });
        return;
      }
      const delay = doublingBackoff(this.saveFailures, SAVE_RETRY_BASE, SAVE_RETRY_MAX);
      this.log.error('could not save the alloc; it is saved again on its next change or after a delay', {
        attempt: this.saveFailures,
        delay_ms: delay,
        error: err,
      });
      this.saveRetry = this.deps.clock.setTimeout(() => {
        this.saveRetry = undefined;
        if (!this.detached) this.save();
      }, delay);
    }
  }
}
