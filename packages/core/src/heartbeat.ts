// HeartbeatStrategy answers "when do I probe next". While a plugin starts it
// is probed fast at first and then less often, until the health timeout;
// once healthy it is probed and fingerprinted on a steady period.
import { ValidationError } from './errors';
import { MathRandom, type Random } from './random';
import { doublingBackoff } from './timeout-policy';

export interface HeartbeatStrategy {
  /** Delay before startup probe number `attempt` (0 = the first probe). */
  startupProbeDelay(attempt: number): number;
  /** Delay between steady-state health probes. */
  probeInterval(): number;
  /** Delay between fingerprint rounds (and registry resyncs). */
  fingerprintInterval(): number;
}

export interface HeartbeatSettings {
  /** Steady-state probe period (default 30 s). */
  interval: number;
  /** Fingerprint/resync period (default 30 s). */
  fingerprintInterval: number;
  /** Backoff: first startup delay (default 5 ms); fixed: unused. */
  startupInitial: number;
  /** Backoff: cap of the startup delay (default 5 s); fixed: the startup probe period. */
  startupMax: number;
  /** Fraction of each delay randomised, 0..1 (default 0.1 for backoff, 0 for fixed). */
  jitter: number;
}

export const DEFAULT_HEARTBEAT: Readonly<HeartbeatSettings> = Object.freeze({
  interval: 30_000,
  fingerprintInterval: 30_000,
  startupInitial: 5,
  startupMax: 5_000,
  jitter: 0.1,
});

function checkSettings(s: HeartbeatSettings): HeartbeatSettings {
  for (const key of ['interval', 'fingerprintInterval', 'startupInitial', 'startupMax'] as const) {
    if (!Number.isFinite(s[key]) || s[key] < 0)
      throw new ValidationError(`heartbeat.${key}: ${s[key]} is not a non-negative number of milliseconds`, key);
  }
  if (!(s.jitter >= 0 && s.jitter <= 1)) throw new ValidationError(`heartbeat.jitter: ${s.jitter} must be between 0 and 1`, 'jitter');
  return s;
}

function jittered(ms: number, jitter: number, random: Random): number {
  if (jitter === 0 || ms === 0) return ms;
  // Spread by ±jitter/2 around the nominal delay so averages stay put.
  return Math.max(0, Math.round(ms * (1 + jitter * (random.next() - 0.5))));
}

/** Probes on one period while starting (Nomad's behaviour: every 5 s). */
export class FixedHeartbeatStrategy implements HeartbeatStrategy {
  readonly settings: Readonly<HeartbeatSettings>;
  constructor(
    settings: Partial<HeartbeatSettings> = {},
    private readonly random: Random = new MathRandom(),
  ) {
    this.settings = checkSettings({ ...DEFAULT_HEARTBEAT, jitter: 0, ...settings });
  }
  startupProbeDelay(attempt: number): number {
    return attempt === 0 ? 0 : jittered(this.settings.startupMax, this.settings.jitter, this.random);
  }
  probeInterval(): number {
    return jittered(this.settings.interval, this.settings.jitter, this.random);
  }
  fingerprintInterval(): number {
    return jittered(this.settings.fingerprintInterval, this.settings.jitter, this.random);
  }
}

/** The default: probe at once, then after 5 ms, 10 ms, 20 ms… up to 5 s. */
export class BackoffHeartbeatStrategy implements HeartbeatStrategy {
  readonly settings: Readonly<HeartbeatSettings>;
  constructor(
    settings: Partial<HeartbeatSettings> = {},
    private readonly random: Random = new MathRandom(),
  ) {
    this.settings = checkSettings({ ...DEFAULT_HEARTBEAT, ...settings });
  }
  startupProbeDelay(attempt: number): number {
    if (attempt <= 0) return 0;
    const nominal = doublingBackoff(attempt, this.settings.startupInitial, this.settings.startupMax);
    return jittered(nominal, this.settings.jitter, this.random);
  }
  probeInterval(): number {
    return jittered(this.settings.interval, this.settings.jitter, this.random);
  }
  fingerprintInterval(): number {
    return jittered(this.settings.fingerprintInterval, this.settings.jitter, this.random);
  }
}
