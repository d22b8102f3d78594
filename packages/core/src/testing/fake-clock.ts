// FakeClock: a Clock that stands still until a test moves it, for tests of
// anything that takes time from the injected Clock (rule: tests never sleep
// to wait for a timer). Part of @csiplug/core/testing, not of the runtime.
import type { Clock } from '../tokens';
import { type Disposable, toDisposable } from '../disposable';
import { sleepOn } from '../wait';

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
