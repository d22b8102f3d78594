// Tokens of the task driver: the TaskDriver contract and the exec driver's
// options. Each token is a Symbol named like the type it stands for.
import type { TaskDriver } from './driver';
import type { ProcStat } from './proc';

export type ITaskDriver = TaskDriver;
export const ITaskDriver: unique symbol = Symbol('ITaskDriver');

/** How the exec driver runs its executor and watches tasks. */
export interface ExecDriverOptions {
  /** The compiled executor script; defaults to this package's dist/executor.js (see DEFAULT_EXECUTOR_PATH). */
  executorPath?: string;
  /** The node binary that runs the executor; defaults to the agent's own. */
  nodePath?: string;
  /** ms start() waits for the executor to report the running task (default 10 s). */
  startTimeout?: number;
  /** ms between safety checks of the task and executor pids while waiting (default 5 s). */
  pollInterval?: number;
  /** ms recover() waits for a live executor to record the exit of a task that is gone (default 5 s). */
  exitGrace?: number;
  /** Whether a task inherits the agent's environment beneath its own `env`, as Nomad's raw_exec does (default true). */
  inheritEnv?: boolean;
  /**
   * Reads /proc/<pid>/stat (default: readProcStat): undefined when there is
   * no such process, a throw when it cannot be told. A seam for tests that
   * inject faults of the agent's own process.
   */
  procReader?: (pid: number) => ProcStat | undefined;
  /** The runc binary for isolated tasks (default: runc found in /usr/sbin, /usr/bin, /sbin, /bin). */
  runcPath?: string;
  /** runc's state root for the containers of isolated tasks (default /run/csiplug/runc). */
  runcRoot?: string;
  /** Reads an executor record (default: readJsonFile): undefined when there is none. A seam like procReader. */
  recordReader?: (file: string) => unknown;
}

export type IExecDriverOptions = ExecDriverOptions;
export const IExecDriverOptions: unique symbol = Symbol('IExecDriverOptions');
