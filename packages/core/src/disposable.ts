// Ownership of resources: whatever holds a timer, a subscription, a socket,
// a process watch or a file handle is a Disposable, and its owner releases it.
//
// `dispose()` is the one teardown verb. Its sync form is Disposable; an
// owner whose release takes I/O (closing a server, waiting for plugin
// clients to settle) is an AsyncDisposable: the same verb, returning a
// promise that resolves once everything is released. Both are idempotent.
// TypeScript lets an AsyncDisposable stand where a Disposable is wanted (a
// Promise-returning method fits a void one): a holder that cannot wait — a
// DisposableStore, tsyringe's container.dispose() — starts the release and
// does not wait for it, so an AsyncDisposable's dispose logs what it cannot
// release rather than reject where nobody listens. Owners that can wait
// (a module's stop, the agent's dispose) await it.

export interface Disposable {
  dispose(): void;
}

export interface AsyncDisposable {
  /** Resolves once everything is released. Idempotent: later calls return the same promise. */
  dispose(): Promise<void>;
}

export function toDisposable(fn: () => void): Disposable {
  let done = false;
  return {
    dispose() {
      if (done) return;
      done = true;
      fn();
    },
  };
}

export function isDisposable(value: unknown): value is Disposable {
  return typeof value === 'object' && value !== null && typeof (value as Disposable).dispose === 'function';
}

/**
 * A bag of disposables released together, newest first. Adding to a store
 * that is already disposed releases the newcomer at once, so nothing leaks
 * when a late callback registers a resource during shutdown.
 */
export class DisposableStore implements Disposable {
  private readonly items = new Set<Disposable>();
  private disposed = false;

  get isDisposed(): boolean {
    return this.disposed;
  }

  add<T extends Disposable>(item: T): T {
    if (this.disposed) {
      item.dispose();
      return item;
    }
    this.items.add(item);
    return item;
  }

  /** Forget an item without disposing it. */
  delete(item: Disposable): void {
    this.items.delete(item);
  }

  /** Dispose everything held so far; the store stays usable. */
  clear(): void {
    const errors: unknown[] = [];
    const list = [...this.items].reverse();
    this.items.clear();
    for (const item of list) {
      try {
        item.dispose();
      } catch (err) {
        errors.push(err);
      }
    }
    if (errors.length === 1) throw errors[0];
    if (errors.length > 1) throw new AggregateError(errors, `${errors.length} disposables failed to dispose`);
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.clear();
  }
}
