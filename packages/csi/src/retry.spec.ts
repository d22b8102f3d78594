import { SeededRandom, ValidationError } from '@csiplug/core';
import { DEFAULT_RETRYABLE_CODES, GrpcStatus } from './errors';
import { DEFAULT_RETRY_OPTIONS, backoffDelay, isRetryableCode, resolveRetryOptions } from './retry';

describe('retry options', () => {
  it('retries exactly UNAVAILABLE, RESOURCE_EXHAUSTED and ABORTED by default', () => {
    expect([...DEFAULT_RETRYABLE_CODES].sort()).toEqual([GrpcStatus.UNAVAILABLE, GrpcStatus.RESOURCE_EXHAUSTED, GrpcStatus.ABORTED].sort());
    const all = Object.values(GrpcStatus).filter((v): v is number => typeof v === 'number');
    const retried = all.filter((c) => isRetryableCode(c, DEFAULT_RETRY_OPTIONS));
    expect(retried.sort()).toEqual([...DEFAULT_RETRYABLE_CODES].sort());
  });

  it('grows exponentially, caps, and jitters within bounds', () => {
    const o = resolveRetryOptions({ baseDelayMs: 100, maxDelayMs: 1_000, jitter: 0 });
    const r = new SeededRandom(3);
    expect([1, 2, 3, 4, 5, 6].map((n) => backoffDelay(n, o, r))).toEqual([100, 200, 400, 800, 1000, 1000]);
    const j = resolveRetryOptions({ baseDelayMs: 100, maxDelayMs: 1_000, jitter: 0.5 });
    for (let i = 0; i < 50; i++) {
      const d = backoffDelay(3, j, r);
      expect(d).toBeGreaterThanOrEqual(200);
      expect(d).toBeLessThanOrEqual(400);
    }
  });

  it('rejects nonsense', () => {
    expect(() => resolveRetryOptions({ maxAttempts: 0 })).toThrow(ValidationError);
    expect(() => resolveRetryOptions({ jitter: 2 })).toThrow(ValidationError);
    expect(() => resolveRetryOptions({ baseDelayMs: 10, maxDelayMs: 5 })).toThrow(ValidationError);
  });
});
