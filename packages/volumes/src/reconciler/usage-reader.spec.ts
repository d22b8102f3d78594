// UsageReader on a fake clock: an answer within the wait, "late" after it
// while the call goes on, one call in flight per mount, failures passed on.
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
