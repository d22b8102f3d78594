// The hook contracts of the task runner and the alloc runner. The agent's
// runners implement the calling side; hooks only see these shapes.
//
// A run is either a fresh `start` or a `restore` after an agent restart (the
// task kept running while the agent was away). Every call carries an
// AbortSignal that fires when the runner gives up on the phase (task killed,
// agent shutting down).
import type { CSIPluginConfig, TaskEvent, VolumeRequest } from '@csiplug/core';

// The shapes a jobspec gives the hooks (a task event, a group's volume
// request, a task's csi_plugin block, the stale-mount policy) are core's
// vocabulary, shared with the jobspec reader; re-exported here, where users
// of the hooks name them.
export type { CSIPluginConfig, StaleMountPolicy, TaskEvent, VolumeRequest } from '@csiplug/core';

export type RunKind = 'start' | 'restore';

export interface AllocInfo {
  id: string;
  jobId: string;
  group: string;
  volumes: VolumeRequest[];
}

export interface TaskInfo {
  name: string;
  env: Record<string, string>;
  csiPlugin?: CSIPluginConfig;
  /** The task runs isolated (driver exec, on runc): it sees only what is mounted into it. */
  isolated?: boolean;
}

interface HookContextBase {
  readonly alloc: AllocInfo;
  readonly kind: RunKind;
  readonly signal: AbortSignal;
}

export interface TaskHookContext extends HookContextBase {
  readonly task: TaskInfo;
  /** Adds an event to the task's history (and the agent's event stream). */
  emitEvent(event: Omit<TaskEvent, 'time'> & { time?: number }): void;
  /**
   * Asks the runner to restart the task (not kill the alloc) because it is
   * unhealthy: a failure of the task, counted by its restart policy like a
   * failed exit (delay, attempts, mode "fail" ending it dead and failed).
   */
  requestRestart(reason: string): void;
  /** The mount table as the task sees it (an isolated task's container; /proc/<pid>/mountinfo text), when the driver can tell. */
  taskMountInfo?(): Promise<string | undefined>;
}

export interface AllocHookContext extends HookContextBase {
  /** Adds an event to every task of the alloc. */
  emitEvent(event: Omit<TaskEvent, 'time'> & { time?: number }): void;
  /** Asks the runner to restart every running task of the alloc (e.g. a stale mount under policy `restart`), with the reason as their event; not counted by their restart policies. */
  restartTasks(reason: string): void;
  /**
   * A volume of the alloc (by its group name) was mounted anew at its host
   * path (a stale mount remounted): a task that took its bind of the old
   * mount privately (an isolated task, propagation_mode "private") does not
   * see the new one, and is restarted to; others see it at once.
   */
  volumeRemounted?(name: string): void;
  /** Whether node plugin `pluginId` may come back on this node (a task of it runs or restarts here): an unmount waits only for such a plugin. */
  nodePluginExpected?(pluginId: string): boolean;
}

/** A host dir an isolated task needs bind-mounted: Nomad's propagation modes. */
export interface TaskBindMount {
  source: string;
  /** Absolute path in the task. */
  destination: string;
  readOnly?: boolean;
  propagation?: 'private' | 'host-to-task' | 'bidirectional';
}

/** What a prestart hook adds to the task: environment variables, and bind mounts (an isolated task only). */
export interface TaskPrestartResult {
  env?: Record<string, string>;
  mounts?: TaskBindMount[];
}

/** A volume the alloc's tasks can use, by the group's volume name. */
export interface MountedVolume {
  name: string;
  volumeId: string;
  pluginId: string;
  /** Where the task sees it (a task without isolation: the host path). */
  hostPath: string;
  readOnly: boolean;
}

export interface AllocPrerunResult {
  volumes?: Record<string, MountedVolume>;
}

export interface TaskHook {
  readonly name: string;
  prestart?(ctx: TaskHookContext): Promise<TaskPrestartResult | void>;
  poststart?(ctx: TaskHookContext): Promise<void>;
  /** The task is stopping for good. Must be idempotent; may run without prestart. */
  stop?(ctx: TaskHookContext): Promise<void>;
  /** The task's process exited (it may be restarted). */
  exited?(ctx: TaskHookContext): Promise<void>;
  /**
   * The agent is going away and the task keeps running: release timers,
   * sockets and subscriptions, but keep what a restarted agent will restore
   * (registrations, directories). Not a teardown of the task (that is
   * `stop`): the hook lets go of a task that runs on.
   */
  detach?(): void;
}

export interface AllocHook {
  readonly name: string;
  prerun?(ctx: AllocHookContext): Promise<AllocPrerunResult | void>;
  postrun?(ctx: AllocHookContext): Promise<void>;
  destroy?(ctx: AllocHookContext): Promise<void>;
}

export type TaskHookPhase = 'prestart' | 'poststart' | 'stop' | 'exited';
export type AllocHookPhase = 'prerun' | 'postrun' | 'destroy';
