// Decides what happens after a task ends, by its restart policy, the way
// Nomad's restart tracker does for service tasks: every exit (success or
// failure) is a restart attempt; attempts are counted within `interval`
// windows; once they are used up, mode `fail` gives up and mode `delay`
// waits for the window to end, then starts counting afresh. A restart a
// health check asks for (a plugin that never became healthy) counts the same
// way, as Nomad counts a check_restart: it is a failure of the task. A task
// stopped on purpose is never restarted. Time comes from the injected Clock.
import { ValidationError, formatDuration, type Clock, type Random, type RestartPolicy } from '@csiplug/core';
import type { ExitResult } from './driver';

// The policy's shape is core's (the jobspec reader fills it in); re-exported
// here, where users of the tracker name it.
export type { RestartPolicy };

export type RestartDecision =
  /** Start the task again after `delay` ms. `attempt` counts restarts in the current window, from 1. */
  | { action: 'restart'; delay: number; attempt: number; reason: string }
  /** Do not restart: the task failed for good. */
  | { action: 'fail'; reason: string }
  /** Do not restart: the task was stopped on purpose. */
  | { action: 'done'; reason: string };

export const RestartReason = {
  withinPolicy: 'Restart within policy',
  delay: 'Exceeded allowed attempts, applying a delay',
  noRestarts: 'Policy allows no restarts',
  stopped: 'Task was stopped',
} as const;

/** The share of `delay` added as random jitter when a Random is given (Nomad adds up to 25 %). */
const JITTER = 0.25;

/** Whether an exit counts as successful: code 0, no signal, no unknown status. */
export function isSuccessfulExit(exit: ExitResult): boolean {
  return exit.exitCode === 0 && !exit.signal && !exit.error;
}

export function validateRestartPolicy(policy: RestartPolicy): void {
  const checkMs = (name: 'interval' | 'delay') => {
    const v = policy[name];
    if (!Number.isFinite(v) || v < 0)
      throw new ValidationError(`restart ${name} must be a duration of 0 or more, got ${v}`, `restart.${name}`);
  };
  if (!Number.isInteger(policy.attempts) || policy.attempts < 0)
    throw new ValidationError(`restart attempts must be a whole number of 0 or more, got ${policy.attempts}`, 'restart.attempts');
  checkMs('interval');
  checkMs('delay');
  if (policy.mode !== 'fail' && policy.mode !== 'delay')
    throw new ValidationError(`restart mode must be "fail" or "delay", got "${String(policy.mode)}"`, 'restart.mode');
}

export class RestartTracker {
  private policy: RestartPolicy;
  private windowStart: number;
  private attempts = 0;
  private stoppingFlag = false;

  /** `random`, when given, adds up to 25 % jitter to each restart delay; without it delays are exact. */
  constructor(
    policy: RestartPolicy,
    private readonly clock: Clock,
    private readonly random?: Random,
  ) {
    validateRestartPolicy(policy);
    this.policy = { ...policy };
    this.windowStart = clock.now();
  }

  /** Restarts counted in the current window. */
  get count(): number {
    return this.attempts;
  }

  get stopping(): boolean {
    return this.stoppingFlag;
  }

  /** The task is being stopped by the user or the agent: no exit of it is restarted from now on. */
  setStopping(stopping = true): void {
    this.stoppingFlag = stopping;
  }

  /** A job update may change the policy; the window and count carry over. */
  setPolicy(policy: RestartPolicy): void {
    validateRestartPolicy(policy);
    this.policy = { ...policy };
  }

  /** The task exited (with any status): what now? */
  onExit(exit: ExitResult): RestartDecision {
    const how = exit.error ? `status unknown: ${exit.error}` : exit.signal ? `killed by ${exit.signal}` : `exit code ${exit.exitCode}`;
    return this.decide(`task exited (${how})`);
  }

  /** The task could not be started: counts as an attempt like an exit does. */
  onStartFailure(error: unknown): RestartDecision {
    return this.decide(`task failed to start: ${error instanceof Error ? error.message : String(error)}`);
  }

  /**
   * A health check asked for the restart and the task was killed for it
   * (`reason` says why, e.g. "plugin hostpath did not become healthy within
   * 30s"): a failure of the task, counted like an exit. The reasons lead with
   * `reason`, and a `fail` says "restart attempts exhausted".
   */
  onRestartRequested(reason: string): RestartDecision {
    return this.decide(reason, 'requested');
  }

  private decide(what: string, cause: 'exit' | 'requested' = 'exit'): RestartDecision {
    if (this.stoppingFlag) return { action: 'done', reason: RestartReason.stopped };
    const { attempts, interval, delay, mode } = this.policy;
    if (attempts === 0)
      return {
        action: 'fail',
        reason: cause === 'requested' ? `${what}; ${RestartReason.noRestarts}` : `${RestartReason.noRestarts}; ${what}`,
      };

    const now = this.clock.now();
    // At the window's end (not only after it) a new one begins, so a `delay`
    // that waits exactly until the end always lands in a fresh window.
    if (now >= this.windowStart + interval) {
      this.windowStart = now;
      this.attempts = 0;
    }
    this.attempts++;

    if (this.attempts > attempts) {
      if (mode === 'fail') {
        const reason =
          cause === 'requested'
            ? `${what}; restart attempts exhausted (${attempts} in interval ${formatDuration(interval)}, mode "fail")`
            : `Exceeded allowed attempts ${attempts} in interval ${formatDuration(interval)} and mode is "fail"; ${what}`;
        return { action: 'fail', reason };
      }
      const untilWindowEnd = this.windowStart + interval - now;
      return {
        action: 'restart',
        delay: untilWindowEnd,
        attempt: this.attempts,
        reason: cause === 'requested' ? `${what}; ${RestartReason.delay}` : `${RestartReason.delay}; ${what}`,
      };
    }
    return {
      action: 'restart',
      delay: this.withJitter(delay),
      attempt: this.attempts,
      reason: cause === 'requested' ? `${what}; ${RestartReason.withinPolicy}` : `${RestartReason.withinPolicy}; ${what}`,
    };
  }

  private withJitter(delay: number): number {
    if (!this.random || delay <= 0) return delay;
    return delay + Math.floor(this.random.next() * delay * JITTER);
  }
}
