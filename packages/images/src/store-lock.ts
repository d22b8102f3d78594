// StoreLock: the lock between the image store's readers and its collector.
// A task root's prepare holds it shared from the first look at the store
// to the mount (many prepares at once: a long pull never holds back
// another task); image GC holds it alone from its checks to its last
// delete, so no prepare mounts an overlay over layer dirs GC is removing,
// and GC never decides on users a prepare is about to change. A waiting GC
// does not hold back new prepares: GC can wait, a task start should not.
export class StoreLock {
  private sharedHolders = 0;
  private exclusiveHeld = false;
  private readonly waiters: (() => void)[] = [];

  /** How many callers wait for the lock now (for tests that order a prepare against GC). */
  get waiting(): number {
    return this.waiters.length;
  }

  /** Runs `fn` with the lock held shared (with other shared holders, never with the exclusive one). */
  async withShared<T>(fn: () => Promise<T>): Promise<T> {
    while (this.exclusiveHeld) await this.wait();
    this.sharedHolders++;
    try {
      return await fn();
    } finally {
      this.sharedHolders--;
      this.wakeAll();
    }
  }

  /** Runs `fn` with the lock held alone. */
  async withExclusive<T>(fn: () => Promise<T>): Promise<T> {
    while (this.exclusiveHeld || this.sharedHolders > 0) await this.wait();
    this.exclusiveHeld = true;
    try {
      return await fn();
    } finally {
      this.exclusiveHeld = false;
      this.wakeAll();
    }
  }

  private wait(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Every waiter checks again (in the order they came); those that still cannot go wait again. */
  private wakeAll(): void {
    for (const wake of this.waiters.splice(0)) wake();
  }
}
