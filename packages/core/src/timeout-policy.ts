// TimeoutPolicy answers "how long may this wait". The defaults carry Nomad's
// numbers; a deployment tunes them through the agent config or binds its own.
import { ValidationError } from './errors';

/** Why a caller waits for a plugin: a first start, a restore after an agent restart, or an unmount. */
export type PluginWaitPhase = 'prerun' | 'restore' | 'postrun';
export const PLUGIN_WAIT_PHASES: readonly PluginWaitPhase[] = ['prerun', 'restore', 'postrun'];

export interface TimeoutPolicy {
  /**
   * How long a caller waits for a plugin to be registered and healthy:
   * `prerun` a mount on a fresh start; `restore` a mount that must be made
   * again after an agent restart (a live one is kept without waiting);
   * `postrun` an unmount, before its first attempt — past it the unmount is
   * pending and retried in the background.
   */
  pluginWait(phase: PluginWaitPhase): number;
  /** Catch-all limit for a registry wait whose caller gave none. */
  registryWait(): number;
  /** How long a starting plugin has to answer its first healthy probe. */
  pluginHealth(): number;
  /** Deadline of one Probe call. */
  probe(): number;
  /** Deadline of any other CSI call. */
  csiCall(): number;
  /** Delay before retry number `attempt` (1-based) of a volume claim. */
  claimBackoff(attempt: number): number;
  /** Total time a claim is retried before it fails. */
  claimRetryLimit(): number;
  /** Delay before retry number `attempt` (1-based) of a failed unmount. */
  unmountBackoff(attempt: number): number;
}

/** Every number a DefaultTimeoutPolicy uses, in milliseconds. */
export interface TimeoutSettings {
  pluginWaitPrerun: number;
  pluginWaitRestore: number;
  pluginWaitPostrun: number;
  registryWait: number;
  pluginHealth: number;
  probe: number;
  csiCall: number;
  claimBackoffBase: number;
  claimBackoffMax: number;
  claimRetryLimit: number;
  unmountBackoffBase: number;
  unmountBackoffMax: number;
}

export const DEFAULT_TIMEOUTS: Readonly<TimeoutSettings> = Object.freeze({
  pluginWaitPrerun: 60_000,
  pluginWaitRestore: 5 * 60_000,
  // An unmount (a `job stop`, an agent stopping its tasks) waits this long for a plugin restarting, not a day.
  pluginWaitPostrun: 60_000,
  registryWait: 24 * 3_600_000,
  pluginHealth: 30_000,
  probe: 5_000,
  csiCall: 2 * 60_000,
  claimBackoffBase: 1_000,
  claimBackoffMax: 60_000,
  claimRetryLimit: 24 * 3_600_000,
  unmountBackoffBase: 1_000,
  unmountBackoffMax: 60_000,
});

/** Doubling backoff from `base`, capped at `max`; attempt is 1-based. */
export function doublingBackoff(attempt: number, base: number, max: number): number {
  const n = Math.max(1, Math.floor(attempt));
  return Math.min(max, base * 2 ** Math.min(n - 1, 52));
}

export class DefaultTimeoutPolicy implements TimeoutPolicy {
  private current!: Readonly<TimeoutSettings>;

  /** The limits now; `update` replaces them (every read of a limit sees the newest). */
  get settings(): Readonly<TimeoutSettings> {
    return this.current;
  }

  constructor(overrides: Partial<TimeoutSettings> = {}) {
    this.update(overrides);
  }

  /** Replaces the limits with the defaults plus `overrides` (a config reload); a bad one throws and changes nothing. */
  update(overrides: Partial<TimeoutSettings>): void {
    const merged: TimeoutSettings = { ...DEFAULT_TIMEOUTS };
    for (const [key, value] of Object.entries(overrides)) {
      if (value === undefined) continue;
      if (!(key in DEFAULT_TIMEOUTS)) {
        throw new ValidationError(`timeouts: unknown setting "${key}"; known: ${Object.keys(DEFAULT_TIMEOUTS).join(', ')}`, key);
      }
      if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
        throw new ValidationError(`timeouts.${key}: ${String(value)} is not a non-negative number of milliseconds`, key);
      }
      merged[key as keyof TimeoutSettings] = value;
    }
    this.current = Object.freeze(merged);
  }

  pluginWait(phase: PluginWaitPhase): number {
    switch (phase) {
      case 'prerun':
        return this.settings.pluginWaitPrerun;
      case 'restore':
        return this.settings.pluginWaitRestore;
      case 'postrun':
        return this.settings.pluginWaitPostrun;
      default:
        throw new ValidationError(`unknown plugin wait phase "${String(phase)}"; known: ${PLUGIN_WAIT_PHASES.join(', ')}`);
    }
  }
  registryWait(): number {
    return this.settings.registryWait;
  }
  pluginHealth(): number {
    return this.settings.pluginHealth;
  }
  probe(): number {
    return this.settings.probe;
  }
  csiCall(): number {
    return this.settings.csiCall;
  }
  claimBackoff(attempt: number): number {
    return doublingBackoff(attempt, this.settings.claimBackoffBase, this.settings.claimBackoffMax);
  }
  claimRetryLimit(): number {
    return this.settings.claimRetryLimit;
  }
  unmountBackoff(attempt: number): number {
    return doublingBackoff(attempt, this.settings.unmountBackoffBase, this.settings.unmountBackoffMax);
  }
}
