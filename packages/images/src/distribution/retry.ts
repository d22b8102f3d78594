// Retries with exponential backoff for what may pass (network errors, 5xx,
// 429, a stalled connection), bounded in attempts, slept on the injected
// Clock so tests drive it; anything else (auth, 404, a digest mismatch, TLS)
// fails at once.
import { type Clock } from '@csiplug/core';
import { ImagePullTimeoutError, RegistryUnreachableError } from '../errors';

export interface RetryPolicy {
  /** Tries in all, the first included (≥ 1). */
  readonly attempts: number;
  /** The wait before the second try; doubled each time after. */
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 4, baseDelayMs: 500, maxDelayMs: 8_000 };

export function isRetryable(err: unknown): boolean {
  return err instanceof RegistryUnreachableError || (err instanceof ImagePullTimeoutError && err.kind === 'activity');
}

/** The wait before try `attempt + 1` (attempt counts from 1). */
export function backoffDelay(policy: RetryPolicy, attempt: number): number {
  return Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1));
}

export async function withRetries<T>(
  policy: RetryPolicy,
  clock: Clock,
  signal: AbortSignal | undefined,
  run: (attempt: number) => Promise<T>,
  onRetry?: (err: unknown, attempt: number, delayMs: number) => void,
): Promise<T> {
  const attempts = Math.max(1, Math.floor(policy.attempts));
  for (let attempt = 1; ; attempt++) {
    try {
      return await run(attempt);
    } catch (err) {
      if (attempt >= attempts || !isRetryable(err) || signal?.aborted) throw err;
      const delay = backoffDelay(policy, attempt);
      onRetry?.(err, attempt, delay);
      await clock.sleep(delay, signal);
    }
  }
}
