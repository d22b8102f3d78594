import { DisposableStore } from './disposable';
import { Emitter, Event } from './event';

describe('Emitter', () => {
  it('delivers to every listener until it unsubscribes', () => {
    const e = new Emitter<number>();
    const seen: number[] = [];
    const sub = e.event((n) => seen.push(n));
    e.fire(1);
    sub.dispose();
    e.fire(2);
    expect(seen).toEqual([1]);
    expect(e.hasListeners).toBe(false);
  });

  it('a throwing listener is reported and the others still run', () => {
    const errors: unknown[] = [];
    const e = new Emitter<string>({ onListenerError: (err) => errors.push(err) });
    const seen: string[] = [];
    e.event(() => {
      throw new Error('bad listener');
    });
    e.event((s) => seen.push(s));
    e.fire('x');
    expect(seen).toEqual(['x']);
    expect((errors[0] as Error).message).toBe('bad listener');
  });

  it('a listener added during fire waits for the next fire; one removed during fire still gets the current one', () => {
    const e = new Emitter<number>();
    const late: number[] = [];
    const second: number[] = [];
    let sub2: { dispose(): void } | undefined;
    e.event((n) => {
      if (n === 1) e.event((m) => late.push(m));
      sub2?.dispose();
    });
    sub2 = e.event((n) => second.push(n));
    e.fire(1);
    e.fire(2);
    expect(late).toEqual([2]);
    expect(second).toEqual([1]);
  });

  it('reports first and last listener', () => {
    const first = jest.fn();
    const last = jest.fn();
    const e = new Emitter<void>({ onFirstListenerAdd: first, onLastListenerRemove: last });
    const a = e.event(() => undefined);
    const b = e.event(() => undefined);
    a.dispose();
    expect(last).not.toHaveBeenCalled();
    b.dispose();
    expect(first).toHaveBeenCalledTimes(1);
    expect(last).toHaveBeenCalledTimes(1);
  });

  it('fires nothing after dispose and subscriptions are no-ops', () => {
    const e = new Emitter<number>();
    const fn = jest.fn();
    e.event(fn);
    e.dispose();
    e.fire(1);
    e.event(fn).dispose();
    expect(fn).not.toHaveBeenCalled();
  });

  it('subscriptions can be tied to a store', () => {
    const e = new Emitter<number>();
    const store = new DisposableStore();
    const fn = jest.fn();
    e.event(fn, store);
    store.dispose();
    e.fire(1);
    expect(fn).not.toHaveBeenCalled();
  });
});

describe('Event helpers', () => {
  it('filter, map and once', () => {
    const e = new Emitter<number>();
    const evens: number[] = [];
    const doubled: number[] = [];
    const first: number[] = [];
    Event.filter(e.event, (n) => n % 2 === 0)((n) => evens.push(n));
    Event.map(e.event, (n) => n * 2)((n) => doubled.push(n));
    Event.once(e.event)((n) => first.push(n));
    [1, 2, 3, 4].forEach((n) => e.fire(n));
    expect(evens).toEqual([2, 4]);
    expect(doubled).toEqual([2, 4, 6, 8]);
    expect(first).toEqual([1]);
  });

  it('toPromise resolves with the next matching event and unsubscribes', async () => {
    const e = new Emitter<number>();
    const p = Event.toPromise(e.event, (n) => n > 1);
    e.fire(1);
    e.fire(5);
    await expect(p).resolves.toBe(5);
    expect(e.hasListeners).toBe(false);
  });
});
