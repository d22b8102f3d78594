// Typed events: a private Emitter behind a public `readonly onDidX: Event<T>`.
// Subscribing returns a Disposable. A listener that throws is reported and
// does not stop the others; firing never holds a lock a listener might need.
import { type Disposable, type DisposableStore, toDisposable } from './disposable';

export type Listener<T> = (e: T) => void;

export interface Event<T> {
  (listener: Listener<T>, disposables?: DisposableStore): Disposable;
}

export interface EmitterOptions {
  /** Called with the error of a listener that threw. Defaults to stderr. */
  onListenerError?: (err: unknown) => void;
  /** Called when the first listener subscribes / the last one leaves. */
  onFirstListenerAdd?: () => void;
  onLastListenerRemove?: () => void;
}

function defaultListenerError(err: unknown): void {
  console.error('csiplug: an event listener threw:', err);
}

export class Emitter<T> implements Disposable {
  private listeners: Listener<T>[] = [];
  private disposed = false;
  private _event?: Event<T>;

  constructor(private readonly options: EmitterOptions = {}) {}

  get event(): Event<T> {
    this._event ??= (listener: Listener<T>, disposables?: DisposableStore) => {
      if (this.disposed) return toDisposable(() => undefined);
      // Copy-on-write keeps an in-progress fire() unaffected by (un)subscribes.
      this.listeners = [...this.listeners, listener];
      if (this.listeners.length === 1) this.options.onFirstListenerAdd?.();
      const sub = toDisposable(() => {
        const i = this.listeners.indexOf(listener);
        if (i < 0) return;
        this.listeners = [...this.listeners.slice(0, i), ...this.listeners.slice(i + 1)];
        if (this.listeners.length === 0) this.options.onLastListenerRemove?.();
      });
      disposables?.add(sub);
      return sub;
    };
    return this._event;
  }

  get hasListeners(): boolean {
    return this.listeners.length > 0;
  }

  fire(e: T): void {
    if (this.disposed) return;
    for (const listener of this.listeners) {
      try {
        listener(e);
      } catch (err) {
        (this.options.onListenerError ?? defaultListenerError)(err);
      }
    }
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    const had = this.listeners.length > 0;
    this.listeners = [];
    if (had) this.options.onLastListenerRemove?.();
  }
}

// eslint-disable-next-line @typescript-eslint/no-namespace
export namespace Event {
  export const None: Event<never> = () => toDisposable(() => undefined);

  export function filter<T>(event: Event<T>, predicate: (e: T) => boolean): Event<T> {
    return (listener, disposables) =>
      event((e) => {
        if (predicate(e)) listener(e);
      }, disposables);
  }

  export function map<T, U>(event: Event<T>, fn: (e: T) => U): Event<U> {
    return (listener, disposables) => event((e) => listener(fn(e)), disposables);
  }

  /** Fires once, then unsubscribes itself. */
  export function once<T>(event: Event<T>): Event<T> {
    return (listener, disposables) => {
      let fired = false;
      let sub: Disposable | undefined;
      sub = event((e) => {
        if (fired) return;
        fired = true;
        sub?.dispose();
        listener(e);
      }, disposables);
      if (fired) sub.dispose();
      return sub;
    };
  }

  /** Resolves with the next event (optionally the next matching one). */
  export function toPromise<T>(event: Event<T>, predicate: (e: T) => boolean = () => true): Promise<T> {
    return new Promise<T>((resolve) => {
      const sub = event((e) => {
        if (!predicate(e)) return;
        sub.dispose();
        resolve(e);
      });
    });
  }
}
