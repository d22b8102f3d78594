import { AbortError } from '@csiplug/core';
import { FakeClock, flushMicrotasks as flush } from '@csiplug/core/testing';
import { ImagePullTimeoutError, RegistryAuthError, RegistryUnreachableError } from '../errors';
import { backoffDelay, withRetries } from './retry';

const policy = { attempts: 3, baseDelayMs: 100, maxDelayMs: 150 };

describe('withRetries', () => {
  it('backs off 100, then 150 (capped), on the clock, and gives up after the attempts', async () => {
    const clock = new FakeClock();
    const delays: number[] = [];
    let calls = 0;
    const run = withRetries(
      policy,
      clock,
      undefined,
      async () => {
        calls++;
        throw new RegistryUnreachableError('r.io', 'ECONNRESET');
      },
      (_e, _a, d) => delays.push(d),
    );
    const settled = run.catch((e: unknown) => e);
    await flush();
    expect(calls).toBe(1);
    await clock.advance(100);
    await flush();
    expect(calls).toBe(2);
    await clock.advance(150);
    await flush();
    expect(calls).toBe(3);
    expect(await settled).toBeInstanceOf(RegistryUnreachableError);
    expect(delays).toEqual([100, 150]);
    expect(backoffDelay(policy, 1)).toBe(100);
  });

  it('retries a stalled connection and succeeds', async () => {
    const clock = new FakeClock();
    let calls = 0;
    const run = withRetries(policy, clock, undefined, async () => {
      if (++calls === 1) throw new ImagePullTimeoutError('r.io', 'blob', 10, 'activity');
      return 'ok';
    });
    await flush();
    await clock.advance(100);
    await expect(run).resolves.toBe('ok');
  });

  it('fails at once on errors that retrying cannot fix', async () => {
    const clock = new FakeClock();
    let calls = 0;
    await expect(
      withRetries(policy, clock, undefined, async () => {
        calls++;
        throw new RegistryAuthError('r.io', 'none', '401');
      }),
    ).rejects.toBeInstanceOf(RegistryAuthError);
    expect(calls).toBe(1);
  });

  it('stops waiting when aborted', async () => {
    const clock = new FakeClock();
    const ac = new AbortController();
    const run = withRetries(policy, clock, ac.signal, async () => {
      throw new RegistryUnreachableError('r.io', 'x');
    });
    await flush();
    ac.abort();
    await expect(run).rejects.toBeInstanceOf(AbortError);
  });
});
