import { AbortError } from '@csiplug/core';
import { KeyedMutex } from './keyed-mutex';

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('KeyedMutex', () => {
  it('runs one at a time per key, in arrival order, and keys in parallel', async () => {
    const m = new KeyedMutex();
    const log: string[] = [];
    const d1 = deferred();
    const a1 = m.run('a', async () => {
      log.push('a1 start');
      await d1.promise;
      log.push('a1 end');
    });
    const a2 = m.run('a', async () => void log.push('a2'));
    const b1 = m.run('b', async () => void log.push('b1'));
    await b1;
    expect(log).toEqual(['a1 start', 'b1']);
    expect(m.waiting('a')).toBe(1);
    d1.resolve();
    await Promise.all([a1, a2]);
    expect(log).toEqual(['a1 start', 'b1', 'a1 end', 'a2']);
    expect(m.isLocked('a')).toBe(false);
  });

  it('passes the lock on after a failure', async () => {
    const m = new KeyedMutex();
    const first = m.run('k', async () => {
      throw new Error('x');
    });
    const second = m.run('k', async () => 2);
    await expect(first).rejects.toThrow('x');
    await expect(second).resolves.toBe(2);
  });

  it('a caller aborted while queued rejects with AbortError and never runs; the queue moves on', async () => {
    const m = new KeyedMutex();
    const d = deferred();
    const first = m.run('k', () => d.promise);
    const ac = new AbortController();
    let ran = false;
    const queued = m.run('k', async () => void (ran = true), ac.signal);
    const third = m.run('k', async () => 3);
    ac.abort();
    await expect(queued).rejects.toBeInstanceOf(AbortError);
    d.resolve();
    await first;
    await expect(third).resolves.toBe(3);
    expect(ran).toBe(false);
    const pre = new AbortController();
    pre.abort();
    await expect(m.run('k', async () => 1, pre.signal)).rejects.toBeInstanceOf(AbortError);
  });

  it('says what runs and waits under a key, and forgets a key once nothing runs under it', async () => {
    const m = new KeyedMutex();
    expect([m.isLocked('k'), m.waiting('k')]).toEqual([false, 0]);
    const d = deferred();
    const first = m.run('k', () => d.promise);
    expect([m.isLocked('k'), m.waiting('k')]).toEqual([true, 0]);
    const second = m.run('k', async () => 'second');
    const third = m.run('k', async () => 'third');
    expect([m.isLocked('k'), m.waiting('k'), m.isLocked('other')]).toEqual([true, 2, false]);
    d.resolve();
    await first;
    expect(await Promise.all([second, third])).toEqual(['second', 'third']);
    expect([m.isLocked('k'), m.waiting('k')]).toEqual([false, 0]);
  });

  it("a queued caller that aborts leaves the queue at once, with its signal's reason when that is an error", async () => {
    const m = new KeyedMutex();
    const d = deferred();
    const first = m.run('k', () => d.promise);
    const ac = new AbortController();
    const reason = new Error('the alloc was stopped');
    const queued = m.run('k', async () => 'never', ac.signal);
    const last = m.run('k', async () => 'last');
    expect(m.waiting('k')).toBe(2);
    ac.abort(reason);
    await expect(queued).rejects.toBe(reason);
    expect(m.waiting('k')).toBe(1);
    d.resolve();
    await first;
    await expect(last).resolves.toBe('last');
    expect(m.isLocked('k')).toBe(false);
  });

  it('a signal that aborts after its caller started no longer concerns the queue: the call runs to its own end', async () => {
    const m = new KeyedMutex();
    const d1 = deferred();
    const first = m.run('k', () => d1.promise);
    const ac = new AbortController();
    const d2 = deferred();
    let started = false;
    const second = m.run(
      'k',
      async () => {
        started = true;
        await d2.promise;
        return 'done';
      },
      ac.signal,
    );
    d1.resolve();
    await first;
    await Promise.resolve();
    expect(started).toBe(true);
    ac.abort();
    d2.resolve();
    await expect(second).resolves.toBe('done');
  });

  it('a caller whose signal aborted before it asked takes no lock', async () => {
    const m = new KeyedMutex();
    const ac = new AbortController();
    ac.abort();
    let ran = false;
    await expect(m.run('k', async () => void (ran = true), ac.signal)).rejects.toBeInstanceOf(AbortError);
    expect([ran, m.isLocked('k')]).toEqual([false, false]);
  });
});
