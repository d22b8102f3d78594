import { AbortError, ShutdownError, TimeoutError, ValidationError } from '@csiplug/core';
import { FakeClock, flushMicrotasks } from '@csiplug/core/testing';
import { PluginWaitTimeoutError, type RegisteredPlugin, UnknownPluginTypeError } from '.';
import { FakeRegistryStore } from './testing';
import { makeRegistry, plugin } from '../test/harness';

/** Tracks how a promise settled without awaiting it. */
function track<T>(p: Promise<T>) {
  const t: { state: 'pending' | 'resolved' | 'rejected'; value?: T; error?: unknown; settles: number } = { state: 'pending', settles: 0 };
  p.then(
    (v) => {
      t.state = 'resolved';
      t.value = v;
      t.settles++;
    },
    (e) => {
      t.state = 'rejected';
      t.error = e;
      t.settles++;
    },
  );
  return t;
}

describe('waitForPlugin', () => {
  it('resolves at once with the active entry when there is one', async () => {
    const { registry, clock } = makeRegistry();
    registry.register(plugin(0));
    registry.register(plugin(1));
    await expect(registry.waitForPlugin('csi-node', 'my-plugin')).resolves.toMatchObject({ allocId: 'alloc-1' });
    expect(clock.pendingTimers).toBe(0);
  });

  it('resolves at once with a restored entry, flagged as restored', async () => {
    const store = new FakeRegistryStore();
    makeRegistry({ store }).registry.register(plugin(0));
    const { registry } = makeRegistry({ store });
    await expect(registry.waitForPlugin('csi-node', 'my-plugin')).resolves.toMatchObject({ allocId: 'alloc-0', restored: true });
  });

  it('is woken by the registration itself: no time passes and no timer but its deadline exists', async () => {
    const { registry, clock } = makeRegistry();
    const w = track(registry.waitForPlugin('csi-node', 'my-plugin', { timeout: 60_000 }));
    expect(clock.pendingTimers).toBe(1); // the deadline, nothing that polls
    await flushMicrotasks();
    expect(w.state).toBe('pending');

    const start = clock.now();
    const reg = registry.register(plugin(0));
    await flushMicrotasks();
    expect(w.state).toBe('resolved');
    expect(w.value).toBe(reg);
    expect(clock.now()).toBe(start);
    expect(clock.pendingTimers).toBe(0); // the deadline was cancelled
  });

  it('ignores other names and types', async () => {
    const { registry } = makeRegistry();
    const w = track(registry.waitForPlugin('csi-node', 'my-plugin'));
    registry.register(plugin(0, { name: 'other' }));
    registry.register(plugin(0, { type: 'csi-controller' }));
    await flushMicrotasks();
    expect(w.state).toBe('pending');
    registry.register(plugin(0));
    await flushMicrotasks();
    expect(w.state).toBe('resolved');
  });

  it('wakes every waiter of the same plugin, once each', async () => {
    const { registry } = makeRegistry();
    const ws = Array.from({ length: 50 }, () => track(registry.waitForPlugin('csi-node', 'my-plugin')));
    registry.register(plugin(0));
    registry.register(plugin(1));
    await flushMicrotasks();
    for (const w of ws) {
      expect(w.state).toBe('resolved');
      expect(w.settles).toBe(1);
      expect(w.value?.allocId).toBe('alloc-0');
    }
  });

  describe('no lost wake-up', () => {
    it('sees a registration made in the same tick, before or after the call', async () => {
      const { registry } = makeRegistry();
      registry.register(plugin(0, { name: 'before' }));
      const before = track(registry.waitForPlugin('csi-node', 'before'));
      const after = track(registry.waitForPlugin('csi-node', 'after'));
      registry.register(plugin(0, { name: 'after' }));
      await flushMicrotasks();
      expect(before.state).toBe('resolved');
      expect(after.state).toBe('resolved');
    });

    it('sees a registration made by another listener of the same event', async () => {
      const { registry } = makeRegistry();
      // Listener 1 reacts to plugin A by registering plugin B (as a monolith's
      // second registration would), so B's event is queued behind A's.
      registry.onDidRegister((e) => {
        if (e.plugin.name === 'a') registry.register(plugin(0, { name: 'b' }));
      });
      // Listener 2 starts waiting for B while A's event is delivered: B is
      // already in the registry (its event not yet delivered), so the check
      // finds it.
      let fromListener: ReturnType<typeof track<RegisteredPlugin>> | undefined;
      registry.onDidRegister((e) => {
        if (e.plugin.name === 'a') fromListener = track(registry.waitForPlugin('csi-node', 'b'));
      });
      const early = track(registry.waitForPlugin('csi-node', 'b'));
      registry.register(plugin(0, { name: 'a' }));
      await flushMicrotasks();
      expect(early.state).toBe('resolved');
      expect(fromListener?.state).toBe('resolved');
      expect(fromListener?.value?.name).toBe('b');
    });

    it('sees a plugin that a listener registers in reaction to the wait starting elsewhere', async () => {
      const { registry } = makeRegistry();
      // A waiter created inside a deregistered listener, for the plugin the
      // same listener then registers: subscribe-then-register in one tick.
      registry.onDidDeregister(() => {
        const w = track(registry.waitForPlugin('csi-node', 'late'));
        registry.register(plugin(1, { name: 'late' }));
        results.push(w);
      });
      const results: ReturnType<typeof track<RegisteredPlugin>>[] = [];
      registry.register(plugin(0));
      registry.deregister('csi-node', 'my-plugin', 'alloc-0');
      await flushMicrotasks();
      expect(results.map((r) => r.state)).toEqual(['resolved']);
    });

    it('does not resolve with an entry removed before its event was delivered, and still wakes later', async () => {
      const { registry } = makeRegistry();
      const w = track(registry.waitForPlugin('csi-node', 'flappy'));
      // While A's event is delivered, a listener registers and at once removes
      // "flappy": its registered event is delivered after the removal.
      registry.onDidRegister((e) => {
        if (e.plugin.name !== 'a') return;
        registry.register(plugin(1, { name: 'flappy' }));
        registry.deregister('csi-node', 'flappy', 'alloc-1');
      });
      registry.register(plugin(0, { name: 'a' }));
      await flushMicrotasks();
      expect(w.state).toBe('pending');
      registry.register(plugin(2, { name: 'flappy' }));
      await flushMicrotasks();
      expect(w.state).toBe('resolved');
      expect(w.value?.allocId).toBe('alloc-2');
    });

    it('resolves a waiter whose plugin registered and deregistered in the same tick', async () => {
      const { registry } = makeRegistry();
      const w = track(registry.waitForPlugin('csi-node', 'my-plugin'));
      registry.register(plugin(0));
      registry.deregister('csi-node', 'my-plugin', 'alloc-0');
      await flushMicrotasks();
      expect(w.state).toBe('resolved');
      expect(w.value?.allocId).toBe('alloc-0');
    });
  });

  describe('timeouts', () => {
    it('rejects at the deadline (not before) naming the plugin and how long it waited', async () => {
      const { registry, clock } = makeRegistry();
      const w = track(registry.waitForPlugin('csi-node', 'hostpath-plugin0', { timeout: 90_000 }));
      await clock.advance(89_999);
      expect(w.state).toBe('pending');
      await clock.advance(1);
      expect(w.state).toBe('rejected');
      expect(w.error).toBeInstanceOf(PluginWaitTimeoutError);
      expect(w.error).toBeInstanceOf(TimeoutError);
      expect(w.error).toMatchObject({
        code: 'ETIMEOUT',
        pluginType: 'csi-node',
        pluginName: 'hostpath-plugin0',
        waitedMs: 90_000,
        timeoutMs: 90_000,
      });
      expect((w.error as Error).message).toBe('timed out after 1m30s waiting for plugin "hostpath-plugin0" of type csi-node to register');
      // A late registration does not settle it again.
      registry.register(plugin(0, { name: 'hostpath-plugin0' }));
      await flushMicrotasks();
      expect(w.settles).toBe(1);
    });

    it('defaults to the TimeoutPolicy registry wait', async () => {
      const { registry, clock } = makeRegistry({ timeouts: { registryWait: 5_000 } });
      const w = track(registry.waitForPlugin('csi-node', 'my-plugin'));
      await clock.advance(4_999);
      expect(w.state).toBe('pending');
      await clock.advance(1);
      expect(w.error).toMatchObject({ waitedMs: 5_000 });
    });

    it('uses the 24h catch-all of the default policy', async () => {
      const { registry, clock } = makeRegistry();
      const w = track(registry.waitForPlugin('csi-node', 'my-plugin'));
      await clock.advance(24 * 3_600_000 - 1);
      expect(w.state).toBe('pending');
      await clock.advance(1);
      expect((w.error as Error).message).toContain('timed out after 24h');
    });

    it('times out on the next timer turn with a zero timeout, but a present plugin still resolves', async () => {
      const { registry, clock } = makeRegistry();
      const w = track(registry.waitForPlugin('csi-node', 'my-plugin', { timeout: 0 }));
      await clock.advance(0);
      expect(w.state).toBe('rejected');
      registry.register(plugin(0));
      await expect(registry.waitForPlugin('csi-node', 'my-plugin', { timeout: 0 })).resolves.toMatchObject({ allocId: 'alloc-0' });
    });

    it('waits without a deadline when told Infinity', async () => {
      const { registry, clock } = makeRegistry();
      const w = track(registry.waitForPlugin('csi-node', 'my-plugin', { timeout: Infinity }));
      expect(clock.pendingTimers).toBe(0);
      await clock.advance(365 * 24 * 3_600_000);
      expect(w.state).toBe('pending');
      registry.register(plugin(0));
      await flushMicrotasks();
      expect(w.state).toBe('resolved');
    });

    it('rejects a bad timeout, type or name', async () => {
      const { registry } = makeRegistry();
      for (const timeout of [-1, NaN, '5s' as unknown as number]) {
        const err: unknown = await registry.waitForPlugin('csi-node', 'p', { timeout }).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(ValidationError);
        expect(err).toMatchObject({
          field: 'timeout',
          message: `the wait for a plugin: its timeout ${String(timeout)} is not a non-negative number of milliseconds`,
        });
      }
      await expect(registry.waitForPlugin('csi', 'p')).rejects.toBeInstanceOf(UnknownPluginTypeError);
      await expect(registry.waitForPlugin('csi-node', '../x')).rejects.toBeInstanceOf(ValidationError);
    });
  });

  describe('abort and dispose', () => {
    it('rejects with the abort reason and drops its deadline', async () => {
      const { registry, clock } = makeRegistry();
      const ac = new AbortController();
      const w = track(registry.waitForPlugin('csi-node', 'my-plugin', { signal: ac.signal }));
      expect(clock.pendingTimers).toBe(1);
      const reason = new Error('alloc stopped');
      ac.abort(reason);
      await flushMicrotasks();
      expect(w.state).toBe('rejected');
      expect(w.error).toBe(reason);
      expect(clock.pendingTimers).toBe(0);
      registry.register(plugin(0));
      await flushMicrotasks();
      expect(w.settles).toBe(1);
    });

    it('rejects with an AbortError for a bare abort, and at once for an aborted signal', async () => {
      const { registry } = makeRegistry();
      const ac = new AbortController();
      const p = registry.waitForPlugin('csi-node', 'my-plugin', { signal: ac.signal });
      ac.abort();
      await expect(p).rejects.toBeInstanceOf(AbortError);
      await expect(registry.waitForPlugin('csi-node', 'my-plugin', { signal: ac.signal })).rejects.toBeInstanceOf(AbortError);
    });

    it('rejects for an aborted signal even when the plugin is there: the caller gave up', async () => {
      const { registry } = makeRegistry();
      registry.register(plugin(0));
      const reason = new Error('alloc stopped');
      await expect(registry.waitForPlugin('csi-node', 'my-plugin', { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    });

    it('an aborted wait leaves the other waits for the same plugin waiting, and woken by its registration', async () => {
      const { registry } = makeRegistry();
      const ac = new AbortController();
      const first = track(registry.waitForPlugin('csi-node', 'my-plugin'));
      const aborted = track(registry.waitForPlugin('csi-node', 'my-plugin', { signal: ac.signal }));
      const last = track(registry.waitForPlugin('csi-node', 'my-plugin'));
      ac.abort();
      await flushMicrotasks();
      expect([first.state, aborted.state, last.state]).toEqual(['pending', 'rejected', 'pending']);
      registry.register(plugin(0));
      await flushMicrotasks();
      expect([first.state, last.state]).toEqual(['resolved', 'resolved']);
      expect(last.value?.allocId).toBe('alloc-0');
    });

    it('removes its abort listener once it settles', async () => {
      const { registry } = makeRegistry();
      const ac = new AbortController();
      const removed = jest.spyOn(ac.signal, 'removeEventListener');
      const p = registry.waitForPlugin('csi-node', 'my-plugin', { signal: ac.signal });
      registry.register(plugin(0));
      await p;
      expect(removed).toHaveBeenCalledWith('abort', expect.any(Function));
    });

    it('rejects every pending wait with a ShutdownError naming the plugin', async () => {
      const clock = new FakeClock();
      const { registry } = makeRegistry({ clock });
      const a = track(registry.waitForPlugin('csi-node', 'a'));
      const b = track(registry.waitForPlugin('csi-controller', 'b'));
      registry.dispose();
      await flushMicrotasks();
      expect(a.error).toBeInstanceOf(ShutdownError);
      expect((a.error as Error).message).toBe('the plugin registry shut down while waiting for plugin "a" of type csi-node');
      expect(b.error).toBeInstanceOf(ShutdownError);
      expect(clock.pendingTimers).toBe(0);
    });
  });
});
