// Retries are explicit: a list of retryable codes, capped exponential
// backoff with jitter from an injected Random, a maximum attempt count, and
// the call's deadline as a hard stop (a retry that cannot start before the
// deadline is not made).
import type { Random } from '@csiplug/core';
import { ValidationError } from '@csiplug/core';
import { DEFAULT_RETRYABLE_CODES } from './errors';

export interface RetryOptions {
  /** Total attempts including the first; 1 disables retries. */
  maxAttempts: number;
  /** Delay before the first retry, before jitter (ms). */
  baseDelayMs: number;
  /** Cap of a single delay (ms). */
  maxDelayMs: number;
  /** Fraction of each delay that is randomised, 0..1 (0.5: delay is 50–100 % of the nominal value). */
  jitter: number;
  /** gRPC codes worth another attempt. */
  retryableCodes: readonly number[];
}

export const DEFAULT_RETRY_OPTIONS: Readonly<RetryOptions> = Object.freeze({
  maxAttempts: 4,
  baseDelayMs: 100,
  maxDelayMs: 5_000,
  jitter: 0.5,
  retryableCodes: DEFAULT_RETRYABLE_CODES,
});

/** Merges overrides onto the defaults and checks the numbers. */
export function resolveRetryOptions(
  overrides: Partial<RetryOptions> = {},
  base: Readonly<RetryOptions> = DEFAULT_RETRY_OPTIONS,
): RetryOptions {
  const o: RetryOptions = { ...base, ...stripUndefined(overrides) };
  if (!Number.isInteger(o.maxAttempts) || o.maxAttempts < 1)
    throw new ValidationError(`retry.maxAttempts must be an integer >= 1, got ${o.maxAttempts}`, 'maxAttempts');
  if (!(o.baseDelayMs >= 0)) throw new ValidationError(`retry.baseDelayMs must be >= 0, got ${o.baseDelayMs}`, 'baseDelayMs');
  if (!(o.maxDelayMs >= o.baseDelayMs))
    throw new ValidationError(`retry.maxDelayMs must be >= baseDelayMs, got ${o.maxDelayMs}`, 'maxDelayMs');
  if (!(o.jitter >= 0 && o.jitter <= 1)) throw new ValidationError(`retry.jitter must be within 0..1, got ${o.jitter}`, 'jitter');
  return o;
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  const out: Partial<T> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  return out;
}

/** Delay before retry number `retry` (1-based): base·2^(retry-1), capped, then jittered down by up to `jitter`. */
export function backoffDelay(retry: number, options: RetryOptions, random: Random): number {
  const nominal = Math.min(options.maxDelayMs, options.baseDelayMs * 2 ** Math.min(Math.max(0, retry - 1), 52));
  return Math.round(nominal * (1 - options.jitter * random.next()));
}

export function isRetryableCode(code: number, options: RetryOptions): boolean {
  return options.retryableCodes.includes(code);
}
