// Ownership of resources: whatever holds a timer, a subscription, a socket,
// a process watch or a file handle is a Disposable, and its owner releases it.

export interface Disposable {
  dispose(): void;
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

/** Base for classes that own resources: `this.register(x)` ties x to this. */
export abstract class DisposableBase implements Disposable {
  protected readonly store = new DisposableStore();

  protected register<T extends Disposable>(item: T): T {
    return this.store.add(item);
  }

  dispose(): void {
    this.store.dispose();
  }
}
