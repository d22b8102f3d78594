// Coalesces concurrent db.batch() callers into groups: a group closes when
// it holds `maxSize` callers or `maxDelay` ms after its first caller joined
// (bbolt's MaxBatchSize / MaxBatchDelay), and is then handed to `run`.
import { type Clock, type Disposable } from '@csiplug/core';

export interface BatchCall<T> {
  fn: T;
  resolve(): void;
  reject(err: unknown): void;
}

export class Batcher<T> {
  private current: BatchCall<T>[] = [];
  private timer: Disposable | undefined;
  /** Groups that are closed but not yet run (size-triggered, waiting for a microtask). */
  private readonly closed = new Set<BatchCall<T>[]>();

  constructor(
    private readonly clock: Clock,
    private readonly maxSize: number,
    private readonly maxDelay: number,
    private readonly run: (calls: BatchCall<T>[]) => void,
  ) {}

  add(fn: T): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.current.push({ fn, resolve, reject });
      if (this.current.length >= this.maxSize) {
        const group = this.take();
        this.closed.add(group);
        // Run once the callers queued in this tick have all joined.
        queueMicrotask(() => this.runClosed(group));
      } else if (!this.timer) {
        this.timer = this.clock.setTimeout(() => this.runOpen(), this.maxDelay);
      }
    });
  }

  /** Runs everything waiting, now (used on close). */
  flush(): void {
    for (const group of [...this.closed]) this.runClosed(group);
    this.runOpen();
  }

  get pending(): number {
    let n = this.current.length;
    for (const g of this.closed) n += g.length;
    return n;
  }

  private take(): BatchCall<T>[] {
    this.timer?.dispose();
    this.timer = undefined;
    const group = this.current;
    this.current = [];
    return group;
  }

  private runOpen(): void {
    const group = this.take();
    if (group.length) this.run(group);
  }

  private runClosed(group: BatchCall<T>[]): void {
    // flush() may have run it already.
    if (this.closed.delete(group)) this.run(group);
  }
}
