// A task's log files and their limits: Nomad's `logs { max_files,
// max_file_size }` (nomad/structs LogConfig: 10 files of 10 MB by default).
// The executor writes the task's output itself and rotates it: the current
// file is stdout.log (stderr.log), the older ones stdout.log.1 (the newest)
// … stdout.log.<max_files - 1>, the oldest removed, so a task never holds
// more than max_files × max_file_size MB of each stream (rotating-log.ts).
// This file says where the files go; the limits and their defaults are
// core's (the jobspec reader fills them in), re-exported here where users
// of the driver name them.
import { join } from 'node:path';
import { DEFAULT_TASK_LOGS, type TaskLogLimits } from '@csiplug/core';

export { DEFAULT_TASK_LOGS, type TaskLogLimits };
export { rotatedLogPath } from './rotating-log';

/** What the executor spec says of a task's logs: where they go, and how they rotate. */
export function taskLogSpec(
  taskDir: string,
  limits: TaskLogLimits = DEFAULT_TASK_LOGS,
): { stdoutPath: string; stderrPath: string; logs: TaskLogLimits } {
  return {
    stdoutPath: join(taskDir, 'stdout.log'),
    stderrPath: join(taskDir, 'stderr.log'),
    logs: { maxFiles: limits.maxFiles, maxFileSizeMB: limits.maxFileSizeMB },
  };
}
