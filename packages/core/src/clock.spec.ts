import { AbortError } from './errors';
import { RealClock } from './clock';
import { FakeClock } from './testing/fake-clock';

describe('FakeClock', () => {
  it('fires timers only when advanced, in due order', async () => {
    const clock = new FakeClock(0);
    const fired: string[] = [];
    clock.setTimeout(() => fired.push('b'), 20);
    clock.setTimeout(() => fired.push('a'), 10);
    clock.setTimeout(() => fired.push('a2'), 10);
    await clock.advance(9);
    expect(fired).toEqual([]);
    await clock.advance(1);
    expect(fired).toEqual(['a', 'a2']);
    await clock.advance(100);
    expect(fired).toEqual(['a', 'a2', 'b']);
    expect(clock.now()).toBe(110);
  });

  it('sleep resolves when advanced, and chains of sleeps run within one advance', async () => {
    const clock = new FakeClock(0);
    const seen: number[] = [];
    void (async () => {
      for (let i = 0; i < 3; i++) {
        await clock.sleep(10);
        seen.push(clock.now());
      }
    })();
    await clock.advance(30);
    expect(seen).toEqual([10, 20, 30]);
  });

  it('sleep rejects on abort and cancels its timer', async () => {
    const clock = new FakeClock(0);
    const ac = new AbortController();
    const p = clock.sleep(1000, ac.signal);
    ac.abort();
    await expect(p).rejects.toBeInstanceOf(AbortError);
    expect(clock.pendingTimers).toBe(0);
    await expect(clock.sleep(1, ac.signal)).rejects.toBeInstanceOf(AbortError);
  });

  it('intervals repeat and stop when disposed', async () => {
    const clock = new FakeClock(0);
    let n = 0;
    const t = clock.setInterval(() => n++, 10);
    await clock.advance(35);
    expect(n).toBe(3);
    t.dispose();
    await clock.advance(100);
    expect(n).toBe(3);
    expect(clock.nextDue()).toBeUndefined();
  });

  it('runAll fires every pending timer and refuses runaway intervals', async () => {
    const clock = new FakeClock(0);
    const fn = jest.fn();
    clock.setTimeout(fn, 5000);
    await clock.runAll();
    expect(fn).toHaveBeenCalled();
    clock.setInterval(() => undefined, 1);
    await expect(clock.runAll(50)).rejects.toThrow('more than 50 timers');
  });
});

describe('RealClock', () => {
  it('does not fire a timer longer than Node allows early', async () => {
    const clock = new RealClock();
    const fn = jest.fn();
    const t = clock.setTimeout(fn, 30 * 86_400_000);
    const i = clock.setInterval(fn, 30 * 86_400_000);
    await clock.sleep(20);
    expect(fn).not.toHaveBeenCalled();
    t.dispose();
    i.dispose();
  });

  it('sleeps and cancels', async () => {
    const clock = new RealClock();
    const before = clock.now();
    await clock.sleep(5);
    expect(clock.now()).toBeGreaterThanOrEqual(before);
    const fn = jest.fn();
    clock.setTimeout(fn, 1).dispose();
    const i = clock.setInterval(fn, 1);
    i.dispose();
    await clock.sleep(10);
    expect(fn).not.toHaveBeenCalled();
  });
});
