// The limits of a task's log files: Nomad's `logs { max_files,
// max_file_size }` (nomad/structs LogConfig: 10 files of 10 MB by default).
// Read from a jobspec by @csiplug/jobspec; the exec driver's executor
// rotates a task's output by them.

/** Nomad's LogConfig, as a task's jobspec gives it. */
export interface TaskLogLimits {
  /** Files kept of each stream, the current one included (≥ 1). */
  maxFiles: number;
  /** MB (2^20 bytes, as Nomad's MaxFileSizeMB) each file may reach before it is rotated (≥ 1). */
  maxFileSizeMB: number;
}

/** Nomad's defaults (structs.DefaultLogConfig): 10 files of 10 MB. */
export const DEFAULT_TASK_LOGS: Readonly<TaskLogLimits> = Object.freeze({ maxFiles: 10, maxFileSizeMB: 10 });
