// The task driver contract: start a task so that it outlives the agent,
// find it again after an agent restart, learn when it exits, stop it.
// Every implementation (the exec driver, the FakeDriver of the testing
// entry) is held to it by the conformance suite in testing/conformance.ts.
import { isAbsolute } from 'node:path';
import { ValidationError, type Disposable } from '@csiplug/core';
import type { IsolationConfig } from './isolation';
import type { TaskLogLimits } from './task-logs';

/** What the driver needs to start one task. */
export interface DriverTaskConfig {
  allocId: string;
  taskName: string;
  /** The task's own dir: working dir, logs (stdout.log, stderr.log and their rotated .1 … .N), driver files. */
  taskDir: string;
  command: string;
  args: string[];
  env: Record<string, string>;
  /**
   * Run the task isolated on runc (the `exec` driver of a jobspec): its own
   * root, namespaces and capabilities; `command` and `env` are as the task
   * sees them, and its working dir is /local (the task dir). Absent: a host
   * process in the task dir (`raw_exec`).
   */
  isolation?: IsolationConfig;
  /** Nomad's logs block: how many files of how many MB of each stream are kept; absent: DEFAULT_TASK_LOGS (10 × 10 MB). */
  logs?: TaskLogLimits;
}

/**
 * Enough to find a task again after the agent restarts: saved in the client
 * state (allocations/<id>/task-<name>/handle). A pid alone is never trusted:
 * the process start time must match too.
 */
export interface TaskHandle {
  version: 1;
  driver: 'exec';
  allocId: string;
  taskName: string;
  taskDir: string;
  /** The executor process: the task's parent, which records its exit status. */
  executorPid: number;
  executorStartTime: string;
  /** The task process itself. */
  pid: number;
  /** Process start time as the kernel reports it (/proc/<pid>/stat field 22). */
  startTime: string;
  startedAt: number;
  /** An isolated task: its runc container (state root and id). The pid is runc's own, which passes signals on. */
  runc?: { root: string; id: string };
}

export interface ExitResult {
  exitCode: number | null;
  signal: string | null;
  /** ms since the epoch */
  finishedAt: number;
  /** Set when the driver could not learn the real status (e.g. the executor died too). */
  error?: string;
}

export type RecoverResult = { running: true } | { running: false; exit: ExitResult };

export interface TaskDriver extends Disposable {
  readonly name: string;
  /** Starts the task through an executor; resolves once the task process runs. */
  start(config: DriverTaskConfig): Promise<TaskHandle>;
  /**
   * The handle of the task an executor runs (or ran) in `taskDir`, read from
   * what the executor recorded — for an agent killed after the task started
   * but before it saved the handle. Undefined when nothing was started there.
   */
  adopt(task: { allocId: string; taskName: string; taskDir: string }): TaskHandle | undefined;
  /** After an agent restart: is the task of this handle still running, and if not, how did it end? */
  recover(handle: TaskHandle): Promise<RecoverResult>;
  /** Resolves when the task exits (event-driven; works for started and recovered tasks alike). */
  wait(handle: TaskHandle): Promise<ExitResult>;
  /** Sends `signal`, then SIGKILL after `killTimeout` ms if it is still running; resolves when it has exited. */
  stop(handle: TaskHandle, signal: NodeJS.Signals, killTimeout: number): Promise<ExitResult>;
  /** Sends `signal` to the running task and nothing more (a template's change_signal); rejects when it is not running. */
  signalTask?(handle: TaskHandle, signal: NodeJS.Signals): Promise<void>;
  /** Whether the handle's process is alive and is the same process (pid and start time). */
  isRunning(handle: TaskHandle): boolean;
  /** Whether an isolated task's container still exists and runs (it may outlive a killed runc and executor); false for a host process. Throws when it cannot be told. */
  containerRuns?(handle: TaskHandle): Promise<boolean>;
  /** The mount table as an isolated task sees it (/proc/<pid>/mountinfo of its container's init); undefined for a host process or when it cannot be read. */
  taskMountInfo?(handle: TaskHandle): Promise<string | undefined>;
}

/**
 * Checks what every driver needs of a task config before it starts
 * anything: ids, an absolute task dir, a command, string args and env
 * entries with valid names. Throws a ValidationError naming the field.
 */
export function validateTaskConfig(config: DriverTaskConfig): void {
  if (!config.allocId) throw new ValidationError('task config needs an allocId', 'allocId');
  if (!config.taskName) throw new ValidationError(`task config of alloc ${config.allocId} needs a taskName`, 'taskName');
  if (!config.taskDir || !isAbsolute(config.taskDir))
    throw new ValidationError(`task "${config.taskName}": the task dir must be an absolute path, got "${config.taskDir}"`, 'taskDir');
  if (typeof config.command !== 'string' || !config.command)
    throw new ValidationError(`task "${config.taskName}": config.command must be a non-empty string`, 'config.command');
  if (!Array.isArray(config.args) || config.args.some((a) => typeof a !== 'string'))
    throw new ValidationError(`task "${config.taskName}": config.args must be a list of strings`, 'config.args');
  for (const [k, v] of Object.entries(config.env ?? {})) {
    if (typeof v !== 'string') throw new ValidationError(`task "${config.taskName}": env ${k} must be a string`, 'env');
    if (!k || k.includes('=') || k.includes('\0'))
      throw new ValidationError(`task "${config.taskName}": "${k}" is not a valid environment variable name`, 'env');
  }
}
