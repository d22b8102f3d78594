// A task's restart policy, Nomad's `restart` block: read from a jobspec by
// @csiplug/jobspec, applied by the restart tracker of @csiplug/driver.

/** A task's restart policy, as a jobspec's `restart` block gives it. */
export interface RestartPolicy {
  /** Restarts allowed within `interval` before `mode` applies. */
  attempts: number;
  /** ms */
  interval: number;
  /** ms to wait before each restart. */
  delay: number;
  /** `fail`: the task fails once attempts are used up; `delay`: wait out the interval, then try again. */
  mode: 'fail' | 'delay';
}
