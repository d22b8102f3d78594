// Work shared by every caller that asks for the same thing at once: a pull
// of one image with one set of credentials (puller.ts), a load of one
// archive (archive/archive-loader.ts). Each caller gets the work's result
// and its progress events; a caller that gives up (its signal) leaves, and
// the work is stopped only when every caller has left. Work that is
// stopping — its callers gave up, its own timeout fired, or the owner was
// disposed — is taken out of the sharing at once and never joined: a new
// caller starts new work rather than inherit a failure it never asked for.
import { type Logger, abortReason, errorMessage, raceAbort } from '@csiplug/core';

interface Entry<E, T> {
  readonly promise: Promise<T>;
  readonly controller: AbortController;
  readonly listeners: Set<(e: E) => void>;
  waiting: number;
  /** True once the work was stopped or ended: it is out of the sharing. */
  stopping: boolean;
}

/** What one caller brings: its progress listener and its signal. */
export interface SharedWorkCaller<E> {
  readonly onProgress?: (e: E) => void;
  readonly signal?: AbortSignal;
}

/**
 * The work itself: `signal` stops it, `emit` reaches every caller's
 * listener, `release` takes it out of the sharing as soon as it knows it
 * will fail (before cleaning up), so that no new caller joins it.
 */
export type SharedWorkStart<E, T> = (signal: AbortSignal, emit: (e: E) => void, release: () => void) => Promise<T>;

export class SharedWork<E, T> {
  private readonly inflight = new Map<string, Entry<E, T>>();

  constructor(
    private readonly logger: Logger,
    /** What the work is, for a listener's failure in the log ("pull", "archive load"). */
    private readonly what: string,
  ) {}

  /**
   * Joins the work running for `key` (unless it is stopping), or starts it
   * with `start`. `label` names the work in the log (the key may hold what
   * must not be logged, e.g. an identity of the credentials).
   */
  run(key: string, caller: SharedWorkCaller<E>, start: SharedWorkStart<E, T>, label: string = key): Promise<T> {
    let entry = this.inflight.get(key);
    if (!entry || entry.stopping || entry.controller.signal.aborted) entry = this.start(key, label, start);
    return this.join(entry, caller);
  }

  /** The work under way for `key` and not stopping, to wait for its end (a caller's own promise may end sooner, at its signal). */
  running(key: string): Promise<T> | undefined {
    const entry = this.inflight.get(key);
    return entry && !entry.stopping ? entry.promise : undefined;
  }

  /** Stops all running work (the owner is disposed). */
  abortAll(reason: Error): void {
    for (const entry of [...this.inflight.values()]) entry.controller.abort(reason);
  }

  private start(key: string, label: string, start: SharedWorkStart<E, T>): Entry<E, T> {
    const controller = new AbortController();
    const listeners = new Set<(e: E) => void>();
    const emit = (e: E) => {
      for (const l of listeners) {
        try {
          l(e);
        } catch (err) {
          this.logger.warn('a progress listener threw', { work: this.what, of: label, error: errorMessage(err) });
        }
      }
    };
    // Out of the sharing when stopped or ended; never removes its replacement.
    const release = () => {
      entry.stopping = true;
      if (this.inflight.get(key) === entry) this.inflight.delete(key);
    };
    controller.signal.addEventListener('abort', release, { once: true });
    // Not started at all when every caller gave up (or all work was stopped) before its turn.
    const promise = Promise.resolve().then(() => {
      controller.signal.throwIfAborted();
      return start(controller.signal, emit, release);
    });
    const entry: Entry<E, T> = { promise, controller, listeners, waiting: 0, stopping: false };
    promise.then(release, release);
    this.inflight.set(key, entry);
    return entry;
  }

  private join(entry: Entry<E, T>, caller: SharedWorkCaller<E>): Promise<T> {
    const { onProgress, signal } = caller;
    if (onProgress) entry.listeners.add(onProgress);
    entry.waiting++;
    let left = false;
    const leave = () => {
      if (left) return;
      left = true;
      if (onProgress) entry.listeners.delete(onProgress);
      // The shared work stops only when every caller waiting on it gave up.
      if (--entry.waiting === 0 && signal?.aborted) entry.controller.abort(abortReason(signal));
    };
    const onAbort = () => leave();
    signal?.addEventListener('abort', onAbort, { once: true });
    return raceAbort(entry.promise, signal).finally(() => {
      signal?.removeEventListener('abort', onAbort);
      leave();
    });
  }
}
