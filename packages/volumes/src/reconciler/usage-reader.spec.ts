// UsageReader on a fake clock: an answer within the wait, "late" after it
// while the call goes on (its own answer or failure then heard quietly), one
// call in flight per mount, failures passed on.
import { FakeClock, flushMicrotasks } from '@csiplug/core/testing';
import type { VolumeUsage } from '@csiplug/csimanager';
import { UsageReader } from './usage-reader';

function deferred<T>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const USAGE: VolumeUsage = { bytes: { total: 10, used: 1, available: 9 } };

describe('UsageReader', () => {
  it('answers with the usage when the call answers within the wait, and arms no timer after', async () => {
    const clock = new FakeClock();
    const reader = new UsageReader(clock, 5_000);
    const reading = reader.read('a/data', async () => USAGE);
    await expect(reading).resolves.toEqual({ kind: 'read', usage: USAGE });
    expect(clock.pendingTimers).toBe(0);
    expect(reader.pending).toBe(0);
  });

  it('answers late when the call hangs past the wait; the call goes on and a later read joins it', async () => {
    const clock = new FakeClock();
    const reader = new UsageReader(clock, 5_000);
    const call = deferred<VolumeUsage | undefined>();
    let calls = 0;
    const make = () => {
      calls++;
      return call.promise;
    };
    const first = reader.read('a/data', make);
    await clock.advance(5_000);
    await expect(first).resolves.toEqual({ kind: 'late', waitedMs: 5_000 });
    // Asked again while the plugin still has not answered: no second call stacked on it.
    const second = reader.read('a/data', make);
    expect(calls).toBe(1);
    expect(reader.pending).toBe(1);
    call.resolve(USAGE);
    await expect(second).resolves.toEqual({ kind: 'read', usage: USAGE });
    await flushMicrotasks();
    expect(reader.pending).toBe(0);
    // Once answered, the next read makes a call of its own.
    await reader.read('a/data', async () => undefined);
    expect(calls).toBe(1);
  });

  it('passes a failed call on, and other mounts have calls of their own', async () => {
    const clock = new FakeClock();
    const reader = new UsageReader(clock, 5_000);
    const hung = deferred<VolumeUsage | undefined>();
    const one = reader.read('a/one', () => hung.promise);
    await expect(reader.read('a/two', () => Promise.reject(new Error('NOT_FOUND: no such volume')))).rejects.toThrow(/NOT_FOUND/);
    expect(reader.pending).toBe(1);
    await clock.advance(5_000);
    await expect(one).resolves.toMatchObject({ kind: 'late' });
    hung.reject(new Error('deadline exceeded'));
    await flushMicrotasks();
    expect(reader.pending).toBe(0);
  });
});

describe('UsageReader after a late answer', () => {
  it('a call that answers or fails after the read said late is heard quietly: no unhandled rejection, nothing left in flight', async () => {
    const clock = new FakeClock();
    const reader = new UsageReader(clock, 5_000);
    const answers = deferred<VolumeUsage | undefined>();
    const failure = deferred<VolumeUsage | undefined>();
    const one = reader.read('a/one', () => answers.promise);
    const two = reader.read('a/two', () => failure.promise);
    await clock.advance(5_000);
    await expect(one).resolves.toEqual({ kind: 'late', waitedMs: 5_000 });
    await expect(two).resolves.toEqual({ kind: 'late', waitedMs: 5_000 });
    // Jest fails the test on an unhandled rejection (an agent would crash on one).
    answers.resolve(USAGE);
    failure.reject(new Error('deadline exceeded'));
    await flushMicrotasks();
    expect(clock.pendingTimers).toBe(0);
    expect(reader.pending).toBe(0);
  });

  it('waits as long as it was told: late only once its own wait has passed', async () => {
    const clock = new FakeClock();
    const reader = new UsageReader(clock, 1_000);
    const hung = deferred<VolumeUsage | undefined>();
    let settled = false;
    const reading = reader
      .read('a/data', () => hung.promise)
      .then((r) => {
        settled = true;
        return r;
      });
    await clock.advance(999);
    expect(settled).toBe(false);
    await clock.advance(1);
    await expect(reading).resolves.toEqual({ kind: 'late', waitedMs: 1_000 });
    hung.resolve(undefined);
  });
});
