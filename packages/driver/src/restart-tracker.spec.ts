import { SeededRandom, ValidationError } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import type { ExitResult } from './driver';
import { type RestartPolicy, RestartReason, RestartTracker, isSuccessfulExit } from './restart-tracker';

const S = 1000;
const M = 60 * S;
const failed: ExitResult = { exitCode: 1, signal: null, finishedAt: 0 };
const succeeded: ExitResult = { exitCode: 0, signal: null, finishedAt: 0 };

function tracker(policy: Partial<RestartPolicy> = {}, clock = new FakeClock()) {
  const full: RestartPolicy = { attempts: 2, interval: 30 * M, delay: 15 * S, mode: 'fail', ...policy };
  return { clock, t: new RestartTracker(full, clock) };
}

describe('RestartTracker', () => {
  it('restarts after `delay` while attempts last, then fails in mode "fail"', () => {
    const { t } = tracker();
    expect(t.onExit(failed)).toMatchObject({ action: 'restart', delay: 15 * S, attempt: 1 });
    expect(t.onExit(failed)).toMatchObject({ action: 'restart', delay: 15 * S, attempt: 2 });
    const third = t.onExit(failed);
    expect(third.action).toBe('fail');
    expect(third.reason).toMatch(/Exceeded allowed attempts 2 in interval 30m.*mode is "fail".*exit code 1/);
  });

  it('treats a successful exit like a failure: every task is a service task', () => {
    const { t } = tracker({ attempts: 1 });
    expect(t.onExit(succeeded)).toMatchObject({ action: 'restart', delay: 15 * S });
    expect(t.onExit(succeeded).action).toBe('fail');
  });

  it('counts attempts per interval window: a new window starts afresh', async () => {
    const { t, clock } = tracker({ attempts: 2, interval: 10 * M });
    t.onExit(failed);
    await clock.advance(5 * M);
    t.onExit(failed);
    expect(t.count).toBe(2);
    await clock.advance(5 * M); // the window (from construction) ends now
    expect(t.onExit(failed)).toMatchObject({ action: 'restart', attempt: 1 });
    expect(t.count).toBe(1);
  });

  it('in mode "delay" waits out the window once attempts are used up, then counts afresh', async () => {
    const { t, clock } = tracker({ attempts: 2, interval: 10 * M, delay: 5 * S, mode: 'delay' });
    await clock.advance(1 * M);
    t.onExit(failed);
    t.onExit(failed);
    await clock.advance(1 * M);
    const wait = t.onExit(failed);
    expect(wait).toMatchObject({ action: 'restart', delay: 8 * M, attempt: 3, reason: expect.stringContaining(RestartReason.delay) });
    await clock.advance(wait.action === 'restart' ? wait.delay : 0);
    expect(t.onExit(failed)).toMatchObject({
      action: 'restart',
      delay: 5 * S,
      attempt: 1,
      reason: expect.stringContaining(RestartReason.withinPolicy),
    });
  });

  it('never restarts when the policy allows no attempts, whatever the mode', () => {
    for (const mode of ['fail', 'delay'] as const) {
      const { t } = tracker({ attempts: 0, mode });
      expect(t.onExit(succeeded)).toEqual({ action: 'fail', reason: expect.stringContaining(RestartReason.noRestarts) });
    }
  });

  it('does not restart a task that is being stopped, and does not count its exit', () => {
    const { t } = tracker();
    t.onExit(failed);
    t.setStopping();
    expect(t.stopping).toBe(true);
    expect(t.onExit(failed)).toEqual({ action: 'done', reason: RestartReason.stopped });
    expect(t.onExit({ exitCode: null, signal: 'SIGTERM', finishedAt: 0 }).action).toBe('done');
    expect(t.count).toBe(1);
    t.setStopping(false);
    expect(t.onExit(failed)).toMatchObject({ action: 'restart', attempt: 2 });
  });

  it('counts start failures as attempts', () => {
    const { t } = tracker({ attempts: 1 });
    expect(t.onStartFailure(new Error('spawn /nope ENOENT'))).toMatchObject({
      action: 'restart',
      reason: expect.stringContaining('spawn /nope ENOENT'),
    });
    expect(t.onStartFailure('again')).toMatchObject({ action: 'fail' });
  });

  it('says why in the reason: signal and unknown status', () => {
    const { t } = tracker({ attempts: 5 });
    expect(t.onExit({ exitCode: null, signal: 'SIGKILL', finishedAt: 0 }).reason).toContain('killed by SIGKILL');
    expect(t.onExit({ exitCode: null, signal: null, finishedAt: 0, error: 'executor died' }).reason).toContain(
      'status unknown: executor died',
    );
  });

  it('adds at most 25 % jitter when given a random source', () => {
    const clock = new FakeClock();
    const t = new RestartTracker({ attempts: 100, interval: 60 * M, delay: 10 * S, mode: 'fail' }, clock, new SeededRandom(7));
    const delays = Array.from({ length: 50 }, () => {
      const d = t.onExit(failed);
      return d.action === 'restart' ? d.delay : -1;
    });
    for (const d of delays) {
      expect(d).toBeGreaterThanOrEqual(10 * S);
      expect(d).toBeLessThanOrEqual(12.5 * S);
    }
    expect(new Set(delays).size).toBeGreaterThan(1);
  });

  it('takes a new policy, keeping the count', () => {
    const { t } = tracker({ attempts: 1 });
    t.onExit(failed);
    t.setPolicy({ attempts: 3, interval: 30 * M, delay: 1 * S, mode: 'fail' });
    expect(t.onExit(failed)).toMatchObject({ action: 'restart', delay: 1 * S, attempt: 2 });
  });

  it('counts a restart a health check asked for like a failed exit: the policy applies and the reason says why', async () => {
    const { t, clock } = tracker({ attempts: 1, interval: 10 * M, delay: 2 * S, mode: 'fail' });
    const why = 'plugin hostpath did not become healthy within 30s';
    expect(t.onRestartRequested(why)).toEqual({
      action: 'restart',
      delay: 2 * S,
      attempt: 1,
      reason: `${why}; ${RestartReason.withinPolicy}`,
    });
    await clock.advance(2 * S);
    expect(t.onRestartRequested(why)).toEqual({
      action: 'fail',
      reason: `${why}; restart attempts exhausted (1 in interval 10m, mode "fail")`,
    });
    // A requested restart and an exit share one count.
    const mixed = tracker({ attempts: 2, interval: 10 * M, delay: 0, mode: 'fail' }).t;
    mixed.onExit(failed);
    mixed.onRestartRequested(why);
    expect(mixed.onExit(failed)).toMatchObject({ action: 'fail' });
  });

  it('a requested restart in mode "delay" waits for the window to end once attempts are used up', () => {
    const { t } = tracker({ attempts: 1, interval: 10 * M, delay: 1 * S, mode: 'delay' });
    expect(t.onRestartRequested('unhealthy')).toMatchObject({ action: 'restart', delay: 1 * S });
    expect(t.onRestartRequested('unhealthy')).toEqual({
      action: 'restart',
      delay: 10 * M,
      attempt: 2,
      reason: `unhealthy; ${RestartReason.delay}`,
    });
  });

  it('rejects invalid policies', () => {
    const clock = new FakeClock();
    const base: RestartPolicy = { attempts: 1, interval: M, delay: S, mode: 'fail' };
    for (const bad of [{ attempts: -1 }, { attempts: 1.5 }, { interval: -1 }, { delay: Number.NaN }, { mode: 'sometimes' as 'fail' }]) {
      expect(() => new RestartTracker({ ...base, ...bad }, clock)).toThrow(ValidationError);
    }
  });
});

describe('isSuccessfulExit', () => {
  it('is exit code 0 with no signal and no error', () => {
    expect(isSuccessfulExit(succeeded)).toBe(true);
    expect(isSuccessfulExit(failed)).toBe(false);
    expect(isSuccessfulExit({ exitCode: null, signal: 'SIGTERM', finishedAt: 0 })).toBe(false);
    expect(isSuccessfulExit({ ...succeeded, error: 'unknown' })).toBe(false);
  });
});
