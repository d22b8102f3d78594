// A task's log files and their limits: Nomad's `logs { max_files,
// max_file_size }` (nomad/structs LogConfig: 10 files of 10 MB by default).
// The executor writes the task's output itself and rotates it: the current
// file is stdout.log (stderr.log), the older ones stdout.log.1 (the newest)
// … stdout.log.<max_files - 1>, the oldest removed, so a task never holds
// more than max_files × max_file_size MB of each stream.
//
// The executor imports this file, so it must use node built-ins only.
import { join } from 'node:path';

/** Nomad's LogConfig, as a task's jobspec gives it. */
export interface TaskLogLimits {
  /** Files kept of each stream, the current one included (≥ 1). */
  maxFiles: number;
  /** MB (2^20 bytes, as Nomad's MaxFileSizeMB) each file may reach before it is rotated (≥ 1). */
  maxFileSizeMB: number;
}

/** Nomad's defaults (structs.DefaultLogConfig): 10 files of 10 MB. */
export const DEFAULT_TASK_LOGS: Readonly<TaskLogLimits> = Object.freeze({ maxFiles: 10, maxFileSizeMB: 10 });

/** What the executor spec says of a task's logs: where they go, and how they rotate. */
export function taskLogSpec(taskDir: string, limits: TaskLogLimits = DEFAULT_TASK_LOGS): { stdoutPath: string; stderrPath: string; logs: TaskLogLimits } {
  return { stdoutPath: join(taskDir, 'stdout.log'), stderrPath: join(taskDir, 'stderr.log'), logs: { maxFiles: limits.maxFiles, maxFileSizeMB: limits.maxFileSizeMB } };
}

/** The name of a stream's file `n` steps older than the current one (0: the current one). */
export function rotatedLogPath(current: string, n: number): string {
  return n === 0 ? current : `${current}.${n}`;
}
