// settleOnce and waitUntil on a FakeClock: each way a wait can end (value,
// error, deadline, abort, a throwing body or check), that it ends once, and
// that it leaves no timer, listener or subscription behind.
import { FakeClock } from './testing/fake-clock';
import { toDisposable } from './disposable';
import { AbortError, ShutdownError, TimeoutError } from './errors';
import { type Settler, settleOnce, waitUntil } from './wait';

/** An AbortSignal that counts its abort listeners, to prove a wait removed its own. */
function countedSignal(): { controller: AbortController; listeners: () => number } {
  const controller = new AbortController();
  let n = 0;
  const signal = controller.signal;
  const add = signal.addEventListener.bind(signal);
  const remove = signal.removeEventListener.bind(signal);
  signal.addEventListener = ((...args: Parameters<typeof add>) => {
    if (args[0] === 'abort') n++;
    add(...args);
  }) as typeof add;
  signal.removeEventListener = ((...args: Parameters<typeof remove>) => {
    if (args[0] === 'abort') n--;
    remove(...args);
  }) as typeof remove;
  return { controller, listeners: () => n };
}

/** Records how a promise settled, without awaiting it. */
function track<T>(p: Promise<T>): { state: () => 'pending' | 'resolved' | 'rejected'; value: () => T | undefined; error: () => unknown } {
  let state: 'pending' | 'resolved' | 'rejected' = 'pending';
  let value: T | undefined;
  let error: unknown;
  p.then(
    (v) => ((state = 'resolved'), (value = v)),
    (e) => ((state = 'rejected'), (error = e)),
  );
  return { state: () => state, value: () => value, error: () => error };
}

describe('settleOnce', () => {
  let clock: FakeClock;
  beforeEach(() => (clock = new FakeClock(0)));

  it('settles with the first outcome only, and releases what the body owned before it settles', async () => {
    let settler!: Settler<number>;
    const released: string[] = [];
    const p = settleOnce<number>((s) => {
      settler = s;
      s.own(toDisposable(() => released.push('watch')));
    });
    expect(settler.settled).toBe(false);
    settler.resolve(1);
    expect(released).toEqual(['watch']);
    settler.resolve(2);
    settler.reject(new Error('late'));
    expect(settler.settled).toBe(true);
    await expect(p).resolves.toBe(1);
    expect(released).toEqual(['watch']);
    // Owned after the end: released at once.
    settler.own(toDisposable(() => released.push('late')));
    expect(released).toEqual(['watch', 'late']);
  });

  it('rejects with the deadline error when the deadline passes, and not a moment before', async () => {
    const p = track(
      settleOnce<void>(() => undefined, {
        deadline: { clock, ms: 1_000, error: () => new TimeoutError(`waited ${clock.now()} ms`, 1_000) },
      }),
    );
    await clock.advance(999);
    expect(p.state()).toBe('pending');
    await clock.advance(1);
    expect(p.state()).toBe('rejected');
    expect(p.error()).toBeInstanceOf(TimeoutError);
    expect((p.error() as Error).message).toBe('waited 1000 ms');
    expect(clock.pendingTimers).toBe(0);
  });

  it('sets no timer for an infinite deadline', async () => {
    let settler!: Settler<string>;
    const p = settleOnce<string>((s) => (settler = s), { deadline: { clock, ms: Infinity, error: () => new Error('never') } });
    expect(clock.pendingTimers).toBe(0);
    settler.resolve('ok');
    await expect(p).resolves.toBe('ok');
  });

  it('clears the deadline timer and the abort listener when the body settles', async () => {
    const { controller, listeners } = countedSignal();
    let settler!: Settler<string>;
    const p = settleOnce<string>((s) => (settler = s), {
      signal: controller.signal,
      deadline: { clock, ms: 5_000, error: () => new Error('late') },
    });
    expect(clock.pendingTimers).toBe(1);
    expect(listeners()).toBe(1);
    settler.resolve('done');
    await expect(p).resolves.toBe('done');
    expect(clock.pendingTimers).toBe(0);
    expect(listeners()).toBe(0);
  });

  it('rejects with the abort reason (an AbortError when the reason is not an Error) and clears the deadline', async () => {
    const { controller, listeners } = countedSignal();
    const p = settleOnce<void>(() => undefined, {
      signal: controller.signal,
      deadline: { clock, ms: 5_000, error: () => new Error('late') },
    });
    controller.abort(new ShutdownError('agent stopping'));
    await expect(p).rejects.toBeInstanceOf(ShutdownError);
    expect(clock.pendingTimers).toBe(0);
    expect(listeners()).toBe(0);

    const plain = new AbortController();
    const q = settleOnce<void>(() => undefined, { signal: plain.signal });
    plain.abort();
    await expect(q).rejects.toBeInstanceOf(AbortError);
  });

  it('rejects at once on a signal aborted already, without running the body', async () => {
    const ac = new AbortController();
    ac.abort(new Error('gone'));
    const body = jest.fn();
    await expect(settleOnce(body, { signal: ac.signal, deadline: { clock, ms: 10, error: () => new Error('late') } })).rejects.toThrow(
      'gone',
    );
    expect(body).not.toHaveBeenCalled();
    expect(clock.pendingTimers).toBe(0);
  });

  it('lets the body settle at once, and rejects with what a throwing body threw', async () => {
    await expect(settleOnce<number>((s) => s.resolve(7), { deadline: { clock, ms: 10, error: () => new Error('late') } })).resolves.toBe(7);
    expect(clock.pendingTimers).toBe(0);
    const released: string[] = [];
    await expect(
      settleOnce<number>((s) => {
        s.own(toDisposable(() => released.push('sub')));
        throw new Error('bad setup');
      }),
    ).rejects.toThrow('bad setup');
    expect(released).toEqual(['sub']);
  });

  it('still settles when releasing a resource throws, and hands that error to whoever settled it', async () => {
    let settler!: Settler<number>;
    const p = settleOnce<number>((s) => {
      settler = s;
      s.own(
        toDisposable(() => {
          throw new Error('close failed');
        }),
      );
    });
    expect(() => settler.resolve(1)).toThrow('close failed');
    await expect(p).resolves.toBe(1);
  });
});

describe('waitUntil', () => {
  let clock: FakeClock;
  beforeEach(() => (clock = new FakeClock(0)));

  it('resolves at once when the first check passes, leaving nothing behind', async () => {
    await expect(waitUntil(() => 'here', { clock, timeoutMs: 1_000, intervalMs: 10 })).resolves.toBe('here');
    expect(clock.pendingTimers).toBe(0);
  });

  it('polls on the interval until the check passes', async () => {
    let n = 0;
    const p = track(waitUntil(() => (++n >= 3 ? n : undefined), { clock, timeoutMs: 1_000, intervalMs: 100 }));
    await clock.advance(100);
    expect(p.state()).toBe('pending');
    await clock.advance(100);
    expect(p.state()).toBe('resolved');
    expect(p.value()).toBe(3);
    expect(clock.pendingTimers).toBe(0);
  });

  it('checks on every wake-up, subscribing before the first check', async () => {
    const order: string[] = [];
    let wake!: () => void;
    let ready = false;
    let unsubscribed = false;
    const p = track(
      waitUntil(
        () => {
          order.push('check');
          return ready ? 'ready' : undefined;
        },
        {
          clock,
          timeoutMs: Infinity,
          wakeOn: (w, wait) => {
            order.push('subscribe');
            wake = w;
            wait.own(toDisposable(() => (unsubscribed = true)));
          },
        },
      ),
    );
    expect(order).toEqual(['subscribe', 'check']);
    wake();
    await clock.advance(0);
    expect(p.state()).toBe('pending');
    ready = true;
    wake();
    await clock.advance(0);
    expect(p.value()).toBe('ready');
    expect(unsubscribed).toBe(true);
    wake(); // a late wake-up is ignored
    expect(order.filter((o) => o === 'check')).toHaveLength(3);
  });

  it('times out with a TimeoutError naming what it waited for, or with the caller’s error', async () => {
    const p = track(waitUntil(() => undefined, { clock, timeoutMs: 2_000, intervalMs: 500, what: 'plugin socket' }));
    await clock.advance(2_000);
    expect(p.error()).toBeInstanceOf(TimeoutError);
    expect((p.error() as TimeoutError).message).toBe('plugin socket did not happen within 2s');
    expect((p.error() as TimeoutError).timeoutMs).toBe(2_000);
    expect(clock.pendingTimers).toBe(0);

    const q = track(waitUntil(() => undefined, { clock, timeoutMs: 10, timeoutError: () => new Error('custom') }));
    await clock.advance(10);
    expect((q.error() as Error).message).toBe('custom');
  });

  it('rejects with the error a check throws, and when a wake-up source gives up', async () => {
    let n = 0;
    const p = track(
      waitUntil(
        () => {
          if (++n === 2) throw new Error('check broke');
          return undefined;
        },
        { clock, timeoutMs: 1_000, intervalMs: 10 },
      ),
    );
    await clock.advance(10);
    expect((p.error() as Error).message).toBe('check broke');
    expect(clock.pendingTimers).toBe(0);

    await expect(
      waitUntil(() => undefined, { clock, timeoutMs: 1_000, wakeOn: (_w, wait) => wait.reject(new Error('watch failed')) }),
    ).rejects.toThrow('watch failed');
    expect(clock.pendingTimers).toBe(0);
  });

  it('rejects on abort and releases the poll, the deadline and the listener', async () => {
    const { controller, listeners } = countedSignal();
    const p = track(waitUntil(() => undefined, { clock, timeoutMs: 1_000, intervalMs: 10, signal: controller.signal }));
    expect(clock.pendingTimers).toBe(2);
    controller.abort();
    await clock.advance(0);
    expect(p.error()).toBeInstanceOf(AbortError);
    expect(clock.pendingTimers).toBe(0);
    expect(listeners()).toBe(0);
  });
});
