import { MemoryLogger, DefaultTimeoutPolicy } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import { DynamicPluginRegistry, PluginDispenserTable, type PluginEvent, RegistryRestoreError } from '.';
import { FakeRegistryStore } from './testing';
import { makeRegistry, plugin } from '../test/harness';

describe('persistence and restore (fake registry store)', () => {
  it('writes every change as a plain, ordered, JSON-safe list', () => {
    const { registry, store } = makeRegistry();
    registry.register(plugin(0, { options: { mountPoint: '/csi' } }));
    registry.register(plugin(1));
    registry.register(plugin(0, { type: 'csi-controller', name: 'ctl' }));
    expect(store.puts).toBe(3);
    expect(store.stored).toEqual({
      plugins: {
        'csi-node': {
          'my-plugin': [
            {
              type: 'csi-node',
              name: 'my-plugin',
              version: 'v1',
              allocId: 'alloc-1',
              socketPath: '/var/data/plugins/alloc-1/csi.sock',
              options: {},
            },
            {
              type: 'csi-node',
              name: 'my-plugin',
              version: 'v0',
              allocId: 'alloc-0',
              socketPath: '/var/data/plugins/alloc-0/csi.sock',
              options: { mountPoint: '/csi' },
            },
          ],
        },
        'csi-controller': {
          ctl: [
            {
              type: 'csi-controller',
              name: 'ctl',
              version: 'v0',
              allocId: 'alloc-0',
              socketPath: '/var/data/plugins/alloc-0/csi.sock',
              options: {},
            },
          ],
        },
      },
    });
    // The restored flag is runtime state, never stored.
    expect(store.json).not.toContain('restored');

    registry.deregister('csi-controller', 'ctl', 'alloc-0');
    registry.deregister('csi-node', 'my-plugin', 'alloc-1');
    expect(store.stored).toEqual({ plugins: { 'csi-node': { 'my-plugin': [expect.objectContaining({ allocId: 'alloc-0' })] } } });
    registry.deregister('csi-node', 'my-plugin', 'alloc-0');
    expect(store.stored).toEqual({ plugins: {} });
  });

  it('restores every list in order, each entry flagged restored, without writing or emitting', () => {
    const first = makeRegistry();
    for (let i = 0; i < 5; i++) first.registry.register(plugin(i));
    first.registry.register(plugin(0, { type: 'csi-controller', name: 'ctl' }));
    first.registry.register(plugin(0, { name: 'other', options: { a: 'b' } }));
    const puts = first.store.puts;

    const second = first.restart();
    expect(first.store.puts).toBe(puts);
    expect(second.registrations('csi-node', 'my-plugin').map((p) => p.allocId)).toEqual([
      'alloc-4',
      'alloc-3',
      'alloc-2',
      'alloc-1',
      'alloc-0',
    ]);
    expect(second.list('csi-node').map((p) => [p.name, p.allocId, p.restored])).toEqual([
      ['my-plugin', 'alloc-4', true],
      ['other', 'alloc-0', true],
    ]);
    expect(second.get('csi-node', 'other')?.options).toEqual({ a: 'b' });
    expect(second.get('csi-controller', 'ctl')).toMatchObject({ allocId: 'alloc-0', restored: true });
    expect(first.logger.find('plugin registry restored', 'info')[0]?.fields).toMatchObject({ registrations: 7, dropped: 0 });
  });

  it('clears the restored flag when the alloc re-registers unchanged: no write, one confirmed event', () => {
    const first = makeRegistry();
    first.registry.register(plugin(0));
    const second = first.restart();
    const puts = first.store.puts;
    const events: PluginEvent[] = [];
    second.onDidChange((e) => events.push(e));
    const got = second.register(plugin(0));
    expect(got.restored).toBe(false);
    expect(second.get('csi-node', 'my-plugin')?.restored).toBe(false);
    expect(events).toEqual([{ kind: 'registered', plugin: got, active: true, reason: 'confirmed' }]);
    expect(first.store.puts).toBe(puts);
    // once confirmed, a further identical registration is no news
    second.register(plugin(0));
    expect(events).toHaveLength(1);
  });

  it('clears the restored flag and emits registered when the alloc re-registers with a new socket', () => {
    const first = makeRegistry();
    first.registry.register(plugin(0));
    const second = first.restart();
    const events: PluginEvent[] = [];
    second.onDidChange((e) => events.push(e));
    second.register(plugin(0, { socketPath: '/new.sock' }));
    expect(second.get('csi-node', 'my-plugin')).toMatchObject({ socketPath: '/new.sock', restored: false });
    expect(events).toMatchObject([
      { kind: 'registered', reason: 'updated', active: true, plugin: { socketPath: '/new.sock', restored: false } },
    ]);
    expect(first.store.stored?.plugins['csi-node']?.['my-plugin']?.[0]?.socketPath).toBe('/new.sock');
  });

  it('clears the restored flag when the CSI manager confirms the plugin alive', () => {
    const first = makeRegistry();
    first.registry.register(plugin(0));
    first.registry.register(plugin(1));
    const second = first.restart();
    const events: PluginEvent[] = [];
    second.onDidChange((e) => events.push(e));
    expect(second.confirmAlive('csi-node', 'my-plugin', 'alloc-1')).toBe(true);
    expect(second.confirmAlive('csi-node', 'my-plugin', 'alloc-1')).toBe(true);
    expect(second.confirmAlive('csi-node', 'my-plugin', 'alloc-9')).toBe(false);
    expect(second.registrations('csi-node', 'my-plugin').map((p) => [p.allocId, p.restored])).toEqual([
      ['alloc-1', false],
      ['alloc-0', true],
    ]);
    expect(events).toEqual([]);
  });

  it('keeps a restored entry restored after another alloc of the plugin comes and goes', () => {
    const first = makeRegistry();
    first.registry.register(plugin(0));
    const second = first.restart();
    second.register(plugin(1));
    const events: PluginEvent[] = [];
    second.onDidChange((e) => events.push(e));
    second.deregister('csi-node', 'my-plugin', 'alloc-1');
    expect(events.map((e) => e.kind === 'registered' && e.reason)).toEqual([false, 'promoted']);
    expect(second.get('csi-node', 'my-plugin')).toMatchObject({ allocId: 'alloc-0', restored: true });
  });

  it('survives several restarts with changes in between', () => {
    const h = makeRegistry();
    h.registry.register(plugin(0));
    h.restart().register(plugin(1));
    h.restart().deregister('csi-node', 'my-plugin', 'alloc-0');
    h.restart().register(plugin(2, { name: 'x' }));
    const last = h.restart();
    expect(last.list('csi-node').map((p) => `${p.name}@${p.allocId}`)).toEqual(['my-plugin@alloc-1', 'x@alloc-2']);
  });

  it('drops, and logs, stored entries it cannot use; keeps the rest in order', () => {
    const store = new FakeRegistryStore({
      plugins: {
        'csi-node': {
          good: [
            { type: 'csi-node', name: 'good', version: '1', allocId: 'b', socketPath: '/b', options: {} },
            { type: 'csi-node', name: 'good', version: '1', allocId: '../evil', socketPath: '/x', options: {} },
            { type: 'csi-node', name: 'good', version: '1', allocId: 'a', socketPath: '/a', options: {} },
            { type: 'csi-node', name: 'good', version: '1', allocId: 'b', socketPath: '/dup', options: {} },
            { type: 'csi-node', name: 'elsewhere', version: '1', allocId: 'c', socketPath: '/c', options: {} },
          ],
          broken: 'not a list' as never,
        },
        gpu: { g: [{ type: 'gpu', name: 'g', version: '', allocId: 'a', socketPath: '/g', options: {} }] },
      },
    });
    const { registry, logger } = makeRegistry({ store });
    expect(registry.registrations('csi-node', 'good').map((p) => p.allocId)).toEqual(['b', 'a']);
    expect(registry.list('csi-node').map((p) => p.name)).toEqual(['good']);
    expect(logger.find('dropping an invalid registration', 'error').map((r) => r.fields['error'])).toEqual([
      'alloc id "../evil" is not allowed: it may not contain "/", "..", or NUL',
      'alloc b appears twice; keeping the newer entry',
      'stored under csi-node/good but names csi-node/elsewhere',
    ]);
    expect(logger.find('malformed registration list', 'error').map((r) => r.fields)).toEqual([
      { component: 'plugin-registry', type: 'csi-node', name: 'broken' },
    ]);
    expect(logger.find('unknown plugin type', 'warn')[0]?.fields).toMatchObject({ type: 'gpu', registrations: 1 });

    // The next change writes only what was kept.
    registry.register({ type: 'csi-node', name: 'good', allocId: 'z', socketPath: '/z' });
    expect(store.stored?.plugins['csi-node']?.['good']?.map((r) => r.allocId)).toEqual(['z', 'b', 'a']);
    expect(Object.keys(store.stored?.plugins ?? {})).toEqual(['csi-node']);
  });

  it('drops, and logs, a type entry that is not an object of lists; keeps the other types', () => {
    const store = new FakeRegistryStore();
    store.json = JSON.stringify({
      plugins: {
        'csi-controller': 5,
        'csi-node': { ok: [{ type: 'csi-node', name: 'ok', version: '1', allocId: 'a', socketPath: '/a', options: {} }] },
      },
    });
    const { registry, logger } = makeRegistry({ store });
    expect(registry.get('csi-node', 'ok')).toMatchObject({ allocId: 'a', restored: true });
    expect(registry.list('csi-controller')).toEqual([]);
    expect(logger.find('malformed plugin type entry', 'error').map((r) => r.fields['type'])).toEqual(['csi-controller']);
  });

  it('drops a null type entry, a null registration, one stored under another type and a list with nothing usable; says how many', () => {
    const record = (type: string, name: string, allocId: string) => ({
      type,
      name,
      version: '1',
      allocId,
      socketPath: `/${allocId}`,
      options: {},
    });
    const store = new FakeRegistryStore();
    store.json = JSON.stringify({
      plugins: {
        'csi-controller': null,
        'csi-node': { ok: [null, record('csi-controller', 'ok', 'x')], gone: [record('csi-node', 'gone', '..')] },
        gpu: { g: [record('gpu', 'g', 'a'), record('gpu', 'g', 'b')] },
      },
    });
    const { registry, logger } = makeRegistry({ store });
    expect(registry.list('csi-node')).toEqual([]);
    expect(registry.list('csi-controller')).toEqual([]);
    expect(logger.find('malformed plugin type entry', 'error').map((r) => r.fields['type'])).toEqual(['csi-controller']);
    expect(
      logger.find('dropping an invalid registration', 'error').map((r) => [r.fields['name'], r.fields['allocId'], r.fields['error']]),
    ).toEqual([
      ['ok', undefined, 'a plugin registration is required'],
      ['ok', 'x', 'stored under csi-node/ok but names csi-controller/ok'],
      ['gone', '..', 'alloc id ".." is not allowed: it may not contain "/", "..", or NUL'],
    ]);
    // Every registration it could not keep is counted, the unknown type's two included.
    expect(logger.find('plugin registry restored', 'info').map((r) => r.fields)).toEqual([
      { component: 'plugin-registry', registrations: 0, dropped: 5 },
    ]);

    // Nothing dropped is written back, not even an empty list.
    registry.register({ type: 'csi-node', name: 'ok', allocId: 'z', socketPath: '/z' });
    expect(store.stored).toEqual({ plugins: { 'csi-node': { ok: [expect.objectContaining({ allocId: 'z' })] } } });
  });

  it('says nothing of a restore when the stored registry is empty', () => {
    const h = makeRegistry();
    h.registry.register(plugin(0));
    h.registry.deregister('csi-node', 'my-plugin', 'alloc-0');
    expect(h.store.stored).toEqual({ plugins: {} });
    h.restart();
    expect(h.logger.find('plugin registry restored')).toEqual([]);
  });

  it('restores a type a deployment added', () => {
    const store = new FakeRegistryStore({
      plugins: { gpu: { g: [{ type: 'gpu', name: 'g', version: '', allocId: 'a', socketPath: '/g', options: {} }] } },
    });
    const { registry } = makeRegistry({ store, extraTypes: ['gpu'] });
    expect(registry.get('gpu', 'g')).toMatchObject({ allocId: 'a', restored: true });
  });

  it('refuses to start over a state it cannot read', () => {
    const store = new FakeRegistryStore();
    store.failGet = new Error('database disk image is malformed');
    expect(() => makeRegistry({ store })).toThrow(RegistryRestoreError);
    expect(() => makeRegistry({ store })).toThrow(
      'could not restore the plugin registry from the client state: database disk image is malformed',
    );
    store.failGet = undefined;
    store.json = JSON.stringify({ nope: true });
    expect(
      () => new DynamicPluginRegistry(store, new FakeClock(), new MemoryLogger(), new DefaultTimeoutPolicy(), new PluginDispenserTable()),
    ).toThrow('has no "plugins" object');

    // A store that does not check what it reads (a bare client state fits the
    // store's type) gets the same refusal from the registry's own check.
    const unchecked = { getRegistryState: () => ({ nope: true }) as never, putRegistryState: () => undefined };
    expect(
      () =>
        new DynamicPluginRegistry(unchecked, new FakeClock(), new MemoryLogger(), new DefaultTimeoutPolicy(), new PluginDispenserTable()),
    ).toThrow(
      'could not restore the plugin registry from the client state: the stored registry state in the registry store has no "plugins" object',
    );
  });
});
