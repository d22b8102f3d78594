// Time comes from an injected Clock so tests drive it by hand. RealClock is
// the wall clock; FakeClock fires timers only when a test advances it.
import { abortReason } from './abort';
import { Disposable, toDisposable } from './disposable';

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Runs `fn` once after `ms`; disposing the handle cancels it. */
  setTimeout(fn: () => void, ms: number): Disposable;
  /** Runs `fn` every `ms`; disposing the handle cancels it. */
  setInterval(fn: () => void, ms: number): Disposable;
  /** Resolves after `ms`, or rejects when `signal` aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

function sleepOn(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(abortReason(signal));
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => {
      timer.dispose();
      reject(abortReason(signal!));
    };
    const timer = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

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

interface FakeTimer {
  id: number;
  at: number;
  fn: () => void;
  interval?: number;
}

/** Lets pending promise continuations run (several microtask rounds). */
export async function flushMicrotasks(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await Promise.resolve();
}

/**
 * A clock that stands still until told to move. `advance(ms)` fires every
 * timer that falls due, in due order, letting promise continuations run
 * between timers so chains of sleeps behave as they would in real time.
 */
export class FakeClock implements Clock {
  private current: number;
  private timers: FakeTimer[] = [];
  private nextId = 1;

  constructor(start = Date.UTC(2026, 0, 1)) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  setTimeout(fn: () => void, ms: number): Disposable {
    return this.add(fn, ms);
  }

  setInterval(fn: () => void, ms: number): Disposable {
    return this.add(fn, ms, Math.max(1, ms));
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepOn(this, ms, signal);
  }

  /** How many timers are waiting to fire. */
  get pendingTimers(): number {
    return this.timers.length;
  }

  /** When the next timer is due, or undefined when none is. */
  nextDue(): number | undefined {
    return this.timers.length ? Math.min(...this.timers.map((t) => t.at)) : undefined;
  }

  /** Moves time forward by `ms`, firing due timers in order. */
  async advance(ms: number): Promise<void> {
    const target = this.current + Math.max(0, ms);
    await flushMicrotasks();
    for (;;) {
      const due = this.earliest();
      if (!due || due.at > target) break;
      this.current = Math.max(this.current, due.at);
      this.fire(due);
      await flushMicrotasks();
    }
    this.current = target;
    await flushMicrotasks();
  }

  /** Fires timers until none is left (bounded, to catch runaway intervals). */
  async runAll(maxTimers = 10_000): Promise<void> {
    for (let i = 0; i < maxTimers; i++) {
      await flushMicrotasks();
      const due = this.earliest();
      if (!due) return;
      this.current = Math.max(this.current, due.at);
      this.fire(due);
    }
    throw new Error(`FakeClock.runAll: more than ${maxTimers} timers fired; is an interval running?`);
  }

  private add(fn: () => void, ms: number, interval?: number): Disposable {
    const timer: FakeTimer = { id: this.nextId++, at: this.current + Math.max(0, ms), fn, interval };
    this.timers.push(timer);
    return toDisposable(() => {
      this.timers = this.timers.filter((t) => t !== timer);
    });
  }

  private earliest(): FakeTimer | undefined {
    let best: FakeTimer | undefined;
    for (const t of this.timers) if (!best || t.at < best.at || (t.at === best.at && t.id < best.id)) best = t;
    return best;
  }

  private fire(timer: FakeTimer): void {
    if (timer.interval !== undefined) {
      timer.at += timer.interval;
      timer.id = this.nextId++;
    } else {
      this.timers = this.timers.filter((t) => t !== timer);
    }
    timer.fn();
  }
}
