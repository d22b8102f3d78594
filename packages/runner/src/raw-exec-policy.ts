// Whether this agent runs raw_exec tasks — host processes with the agent's
// own user, root in production — as Nomad decides it: only when the agent
// config enables the driver (`plugin "raw_exec" { config { enabled = true } }`).
// One message for a job refused when it is run and a task refused when it
// starts (a record restored, a cluster placement made on an older fingerprint).
import { ValidationError } from '@csiplug/core';
import type { JobSpec } from '@csiplug/jobspec';

/** Why a raw_exec task may not start here, and how to allow it. */
export const RAW_EXEC_DISABLED =
  'driver = "raw_exec" runs the task as a host process with this agent\'s user (root) and is disabled on this agent: ' +
  'enable it in the agent config with plugin "raw_exec" { config { enabled = true } } and restart the agent, or use driver = "exec" (a task isolated on runc)';

/**
 * Refuses a job with any raw_exec task while the driver is disabled
 * (ValidationError: the API answers 400 and nothing is stored or started).
 */
export function assertRawExecAllowed(job: JobSpec, enabled: boolean): void {
  if (enabled) return;
  for (const group of job.groups) {
    const task = group.tasks.find((t) => !t.isolated);
    if (task) throw new ValidationError(`job "${job.id}" group "${group.name}" task "${task.name}": ${RAW_EXEC_DISABLED}`, 'driver');
  }
}

/** What a task's start is refused for: a host process while raw_exec is disabled, else nothing. */
export function rawExecRefusal(isolated: boolean, enabled: () => boolean): () => string | undefined {
  return () => (isolated || enabled() ? undefined : RAW_EXEC_DISABLED);
}
