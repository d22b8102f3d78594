// Time comes from an injected Clock so tests drive it by hand. RealClock is
// the wall clock; FakeClock (@csiplug/core/testing) fires timers only when a
// test advances it.
import { type Disposable, toDisposable } from './disposable';
import type { Clock } from './tokens';
import { sleepOn } from './wait';

// The interface lives beside its token (./tokens), so ./wait can name it
// without importing this file back; it is re-exported here, where a reader
// of RealClock looks for it.
export type { Clock } from './tokens';

/** Node fires a timer longer than this (about 24.8 days) after 1 ms. */
export const MAX_TIMER_DELAY = 0x7fffffff;

export class RealClock implements Clock {
  now(): number {
    return Date.now();
  }

  setTimeout(fn: () => void, ms: number): Disposable {
    // Longer delays (e.g. a "30d" limit) are armed in steps, so they fire late, never early.
    let t: NodeJS.Timeout;
    const arm = (left: number) => {
      t = setTimeout(left > MAX_TIMER_DELAY ? () => arm(left - MAX_TIMER_DELAY) : fn, Math.min(Math.max(0, left), MAX_TIMER_DELAY));
    };
    arm(ms);
    return toDisposable(() => clearTimeout(t));
  }

  setInterval(fn: () => void, ms: number): Disposable {
    if (ms <= MAX_TIMER_DELAY) {
      const t = setInterval(fn, Math.max(1, ms));
      return toDisposable(() => clearInterval(t));
    }
    let current: Disposable | undefined;
    const next = () => {
      current = this.setTimeout(() => {
        next();
        fn();
      }, ms);
    };
    next();
    return toDisposable(() => current?.dispose());
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepOn(this, ms, signal);
  }
}
