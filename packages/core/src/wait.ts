// One way to wait. A wait is a promise that settles exactly once and, as it
// settles, lets go of everything it held: its deadline timer, its abort
// listener, its watches and subscriptions. Hand-written, every wait needed a
// `settled` flag, a `timer.dispose()` and a `removeEventListener('abort', …)`
// on every path out, and each was one forgotten line away from a leaked
// timer or listener. `settleOnce` owns that bookkeeping; `waitUntil` builds
// the common "until this check passes" wait on it.
import { abortReason } from './abort';
import { type Disposable, DisposableStore, toDisposable } from './disposable';
import { TimeoutError } from './errors';
import { formatDuration } from './duration';
import type { Clock } from './tokens';

/** What the body of a `settleOnce` wait settles it with, and hands its resources to. */
export interface Settler<T> {
  /** Settles the wait with `value`; ignored once it has settled. */
  resolve(value: T): void;
  /** Settles the wait with `error`; ignored once it has settled. */
  reject(error: unknown): void;
  /** Whether the wait has settled. */
  readonly settled: boolean;
  /** Disposes `resource` when the wait settles (at once if it has). Returns it. */
  own<D extends Disposable>(resource: D): D;
}

/** A deadline for a wait, on an injected clock. */
export interface WaitDeadline {
  clock: Clock;
  /** How long (ms). A non-finite value (Infinity) sets no deadline. */
  ms: number;
  /** The error the wait rejects with when the deadline passes; built then, so it can say how long it waited. */
  error: () => Error;
}

export interface SettleOnceOptions {
  /** Aborting rejects the wait with the signal's reason (see abortReason); a signal aborted already rejects before the body runs. */
  signal?: AbortSignal;
  deadline?: WaitDeadline;
}

/**
 * A promise that settles once, from `body` (which gets a Settler), from the
 * deadline or from the signal, whichever comes first. When it settles, the
 * deadline timer, the abort listener and everything the body `own`ed are
 * disposed before the promise settles (it settles even if a disposal
 * throws; the error goes to whoever settled it). The deadline is armed
 * and the listener added before the body runs, so the body may settle at
 * once; a body that throws rejects the wait with what it threw.
 */
export function settleOnce<T>(body: (settler: Settler<T>) => void, options: SettleOnceOptions = {}): Promise<T> {
  const { signal, deadline } = options;
  if (signal?.aborted) return Promise.reject(abortReason(signal));
  return new Promise<T>((resolve, reject) => {
    const held = new DisposableStore();
    let settled = false;
    const finish = (settle: () => void): void => {
      if (settled) return;
      settled = true;
      // Settles even when releasing something throws; that error goes to
      // whoever settled the wait (a timer, a listener), not into the void.
      try {
        held.dispose();
      } finally {
        settle();
      }
    };
    const settler: Settler<T> = {
      resolve: (value) => finish(() => resolve(value)),
      reject: (error) => finish(() => reject(error)),
      get settled() {
        return settled;
      },
      own: (resource) => held.add(resource),
    };
    if (deadline && Number.isFinite(deadline.ms)) {
      held.add(deadline.clock.setTimeout(() => settler.reject(deadline.error()), deadline.ms));
    }
    if (signal) {
      const onAbort = () => settler.reject(abortReason(signal));
      signal.addEventListener('abort', onAbort, { once: true });
      held.add(toDisposable(() => signal.removeEventListener('abort', onAbort)));
    }
    try {
      body(settler);
    } catch (err) {
      settler.reject(err);
    }
  });
}

/** Resolves after `ms` on `clock`, or rejects with the abort reason when `signal` aborts: Clock.sleep for every Clock. */
export function sleepOn(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return settleOnce<void>((wait) => wait.own(clock.setTimeout(() => wait.resolve(), ms)), { signal });
}

export interface WaitUntilOptions {
  clock: Clock;
  /** Gives up after this long (ms); Infinity waits until the check passes, the signal aborts or a wake-up source fails. */
  timeoutMs: number;
  /** The error to give up with (default: a TimeoutError naming `what` and the limit). */
  timeoutError?: () => Error;
  /** What is waited for, for the default timeout message ("… did not happen within 5s"). */
  what?: string;
  signal?: AbortSignal;
  /** Checks again every `intervalMs` on the clock. Without it only wake-ups (and the first check) check. */
  intervalMs?: number;
  /**
   * Subscribes to whatever means "look again" (a file watch, an event) and
   * calls `wake` on it. Runs before the first check, so a change between
   * subscribing and checking is not missed. Hand subscriptions to
   * `wait.own` so they end with the wait; `wait.reject` gives up (a watch
   * that failed with no fallback, say).
   */
  wakeOn?: (wake: () => void, wait: WaitControl) => void;
}

/** What a `waitUntil` wake-up source may do with its wait: hand it resources, give it up, ask whether it is over. */
export type WaitControl = Pick<Settler<unknown>, 'own' | 'reject' | 'settled'>;

/**
 * Resolves with the first value `check` returns that is not undefined.
 * `check` runs once at the start (after `wakeOn` subscribed), on every
 * wake-up and on every `intervalMs` tick; a check that throws rejects the
 * wait with its error. Rejects on timeout and on abort; every timer,
 * listener and subscription is released when it settles.
 */
/**
 * A function that runs `check` once and settles `wait` with its first
 * defined result, or with what it throws; a no-op once `wait` is settled.
 * Hand it to whatever should look again (a timer, a watcher, an event).
 */
export function checkInto<T>(check: () => T | undefined, wait: Settler<T>): () => void {
  return () => {
    if (wait.settled) return;
    let value: T | undefined;
    try {
      value = check();
    } catch (err) {
      wait.reject(err);
      return;
    }
    if (value !== undefined) wait.resolve(value);
  };
}

export function waitUntil<T>(check: () => T | undefined, options: WaitUntilOptions): Promise<T> {
  const { clock, timeoutMs } = options;
  const timeoutError =
    options.timeoutError ??
    (() => new TimeoutError(`${options.what ?? 'the condition'} did not happen within ${formatDuration(timeoutMs)}`, timeoutMs));
  return settleOnce<T>(
    (wait) => {
      const run = checkInto(check, wait);
      options.wakeOn?.(run, wait);
      if (wait.settled) return;
      if (options.intervalMs !== undefined) wait.own(clock.setInterval(run, options.intervalMs));
      run();
    },
    { signal: options.signal, deadline: { clock, ms: timeoutMs, error: timeoutError } },
  );
}
