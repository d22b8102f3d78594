// One-at-a-time per key, in arrival order; different keys run in parallel.
// A caller whose signal aborts while it waits leaves the queue with the abort
// error and its function never runs.
import { abortReason } from '@csiplug/core';

interface Waiter {
  start(): void;
}

export class KeyedMutex {
  /** key → callers waiting behind the one running (the running one is not listed). */
  private readonly queues = new Map<string, Waiter[]>();

  /** Whether anything runs or waits under `key`. */
  isLocked(key: string): boolean {
    return this.queues.has(key);
  }

  /** How many callers wait (not counting the running one) under `key`. */
  waiting(key: string): number {
    return this.queues.get(key)?.length ?? 0;
  }

  run<T>(key: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    const queue = this.queues.get(key);
    if (!queue) {
      this.queues.set(key, []);
      return this.execute(key, fn);
    }
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        const i = queue.indexOf(waiter);
        if (i >= 0) queue.splice(i, 1);
        reject(abortReason(signal!));
      };
      const waiter: Waiter = {
        start: () => {
          signal?.removeEventListener('abort', onAbort);
          this.execute(key, fn).then(resolve, reject);
        },
      };
      queue.push(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  private async execute<T>(key: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } finally {
      const queue = this.queues.get(key)!;
      const next = queue.shift();
      if (next) next.start();
      else this.queues.delete(key);
    }
  }
}
