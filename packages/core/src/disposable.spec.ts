import { DisposableStore, isDisposable, toDisposable } from './disposable';

describe('Disposable', () => {
  it('toDisposable runs its function once', () => {
    const fn = jest.fn();
    const d = toDisposable(fn);
    d.dispose();
    d.dispose();
    expect(fn).toHaveBeenCalledTimes(1);
    expect(isDisposable(d)).toBe(true);
    expect(isDisposable({})).toBe(false);
  });

  it('a store disposes newest first and only once', () => {
    const order: number[] = [];
    const store = new DisposableStore();
    store.add(toDisposable(() => order.push(1)));
    store.add(toDisposable(() => order.push(2)));
    store.dispose();
    store.dispose();
    expect(order).toEqual([2, 1]);
    expect(store.isDisposed).toBe(true);
  });

  it('adding to a disposed store disposes the newcomer at once', () => {
    const store = new DisposableStore();
    store.dispose();
    const fn = jest.fn();
    store.add(toDisposable(fn));
    expect(fn).toHaveBeenCalled();
  });

  it('a throwing item does not stop the others, and its error surfaces', () => {
    const store = new DisposableStore();
    const after = jest.fn();
    store.add(toDisposable(after));
    store.add(
      toDisposable(() => {
        throw new Error('boom');
      }),
    );
    expect(() => store.dispose()).toThrow('boom');
    expect(after).toHaveBeenCalled();
  });

  it('two throwing items surface as one AggregateError', () => {
    const store = new DisposableStore();
    store.add(
      toDisposable(() => {
        throw new Error('a');
      }),
    );
    store.add(
      toDisposable(() => {
        throw new Error('b');
      }),
    );
    expect(() => store.clear()).toThrow(AggregateError);
    expect(store.isDisposed).toBe(false);
  });

  it('delete forgets an item without disposing it', () => {
    const store = new DisposableStore();
    const fn = jest.fn();
    const d = store.add(toDisposable(fn));
    store.delete(d);
    store.dispose();
    expect(fn).not.toHaveBeenCalled();
  });
});
