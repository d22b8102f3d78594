import { ShutdownError, ValidationError } from '@csiplug/core';
import {
  DuplicateDispenserError,
  NoDispenserError,
  type PluginEvent,
  PluginNotFoundError,
  type PluginRegistration,
  PluginTypeCSIController,
  PluginTypeCSINode,
  type RegisteredPlugin,
  RegistryPersistError,
  UnknownPluginTypeError,
} from '.';
import { makeRegistry, plugin } from '../test/harness';

function record(events: PluginEvent[]) {
  return (e: PluginEvent) => events.push(e);
}

function brief(e: PluginEvent): string {
  return e.kind === 'registered'
    ? `registered ${e.plugin.type}/${e.plugin.name}@${e.plugin.allocId} ${e.reason}${e.active ? '' : ' (inactive)'}`
    : `deregistered ${e.plugin.type}/${e.plugin.name}@${e.plugin.allocId}${e.wasActive ? ' (was active)' : ''}`;
}

describe('DynamicPluginRegistry: types and validation', () => {
  it('knows csi-controller and csi-node, and rejects other types naming the known ones', () => {
    const { registry } = makeRegistry();
    expect(registry.types).toEqual([PluginTypeCSIController, PluginTypeCSINode]);
    expect(() => registry.register(plugin(0, { type: 'device' }))).toThrow(UnknownPluginTypeError);
    expect(() => registry.list('device')).toThrow('unknown plugin type "device"; known types: csi-controller, csi-node');
    expect(() => registry.get('csi', 'x')).toThrow(UnknownPluginTypeError);
    expect(() => registry.deregister('csi', 'x', 'a')).toThrow(UnknownPluginTypeError);
    expect(() => registry.eventsOf('csi')).toThrow(UnknownPluginTypeError);
  });

  it('accepts the types a deployment adds, each once', () => {
    const { registry } = makeRegistry({ extraTypes: ['device', 'csi-node', 'device'] });
    expect(registry.types).toEqual(['csi-controller', 'csi-node', 'device']);
    registry.register(plugin(0, { type: 'device' }));
    expect(registry.get('device', 'my-plugin')?.allocId).toBe('alloc-0');
  });

  it.each([
    ['empty', ''],
    ['with a slash', 'gpu/a'],
    ['with NUL', 'gpu\0a'],
    ['not a string', 7],
  ])('refuses to start with an extra type that is %s, naming it', (_what, bad) => {
    let err: unknown;
    try {
      makeRegistry({ extraTypes: [bad as string] });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ValidationError);
    expect(err).toMatchObject({ field: 'types', message: `plugin registry: extra type "${String(bad)}" is not a valid type name` });
  });

  it.each([
    ['type', { type: '' }, 'plugin type is required'],
    ['name', { name: '' }, 'plugin name is required'],
    ['alloc id', { allocId: '' }, 'alloc id is required'],
    ['socket path', { socketPath: '' }, 'socket path is required'],
    ['name with a slash', { name: 'a/b' }, 'plugin name "a/b" is not allowed'],
    ['alloc id with ..', { allocId: '..' }, 'alloc id ".." is not allowed'],
    ['alloc id with NUL', { allocId: 'a\0b' }, 'alloc id may not contain control characters (found U+0000 at position 1)'],
    ['non-string option', { options: { mounts: 3 as unknown as string } }, 'option "mounts" must be a string'],
    [
      'non-string version',
      { version: 2 as unknown as string },
      'plugin "my-plugin" of type csi-node (alloc alloc-0): version must be a string',
    ],
    [
      'socket path with NUL',
      { socketPath: '/run/a\0b.sock' },
      'plugin "my-plugin" of type csi-node (alloc alloc-0): socket path may not contain NUL',
    ],
    [
      'options list',
      { options: ['/m'] as unknown as Record<string, string> },
      'plugin "my-plugin" of type csi-node (alloc alloc-0): options must be an object of strings',
    ],
    ['options text', { options: 'mountPoint=/m' as unknown as Record<string, string> }, 'options must be an object of strings'],
  ])('rejects a registration without a valid %s', (_what, over, message) => {
    const { registry, store } = makeRegistry();
    let err: unknown;
    try {
      registry.register(plugin(0, over));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as Error).message).toContain(message);
    expect(store.puts).toBe(0);
    expect(registry.registrations('csi-node', 'my-plugin')).toEqual([]);
  });

  it('rejects a missing registration', () => {
    const { registry, store } = makeRegistry();
    for (const missing of [null, undefined, 'csi-node']) {
      expect(() => registry.register(missing as unknown as PluginRegistration)).toThrow(
        new ValidationError('a plugin registration is required'),
      );
    }
    expect(store.puts).toBe(0);
  });

  it('validates deregister arguments', () => {
    const { registry } = makeRegistry();
    expect(() => registry.deregister('csi-node', '', 'alloc-0')).toThrow('plugin name is required');
    expect(() => registry.deregister('csi-node', 'p', '')).toThrow('alloc id is required');
  });
});

describe('DynamicPluginRegistry: register and deregister', () => {
  it('registers a plugin as active, returns a frozen snapshot and emits registered', () => {
    const { registry } = makeRegistry();
    const events: PluginEvent[] = [];
    registry.onDidChange(record(events));
    const got = registry.register(plugin(0, { options: { mountPoint: '/csi' } }));
    expect(got).toEqual({
      type: 'csi-node',
      name: 'my-plugin',
      version: 'v0',
      allocId: 'alloc-0',
      socketPath: '/var/data/plugins/alloc-0/csi.sock',
      options: { mountPoint: '/csi' },
      restored: false,
    });
    expect(Object.isFrozen(got)).toBe(true);
    expect(Object.isFrozen(got.options)).toBe(true);
    expect(registry.get('csi-node', 'my-plugin')).toBe(got);
    expect(events.map(brief)).toEqual(['registered csi-node/my-plugin@alloc-0 new']);
  });

  it('defaults version to "" and options to {}', () => {
    const { registry } = makeRegistry();
    const got = registry.register({ type: 'csi-node', name: 'p', allocId: 'a', socketPath: '/s' });
    expect(got.version).toBe('');
    expect(got.options).toEqual({});
  });

  it('makes a new alloc for the same (type, name) active, keeping the older one behind it', () => {
    const { registry } = makeRegistry();
    const events: PluginEvent[] = [];
    registry.onDidChange(record(events));
    registry.register(plugin(0));
    registry.register(plugin(1));
    expect(registry.get('csi-node', 'my-plugin')?.allocId).toBe('alloc-1');
    expect(registry.registrations('csi-node', 'my-plugin').map((p) => p.allocId)).toEqual(['alloc-1', 'alloc-0']);
    expect(events.map(brief)).toEqual(['registered csi-node/my-plugin@alloc-0 new', 'registered csi-node/my-plugin@alloc-1 new']);
  });

  it('keeps the place of an alloc that registers again, emitting nothing when nothing changed', () => {
    const { registry, store } = makeRegistry();
    registry.register(plugin(0));
    registry.register(plugin(1));
    const puts = store.puts;
    const events: PluginEvent[] = [];
    registry.onDidChange(record(events));
    const again = registry.register(plugin(0));
    expect(again.allocId).toBe('alloc-0');
    expect(registry.registrations('csi-node', 'my-plugin').map((p) => p.allocId)).toEqual(['alloc-1', 'alloc-0']);
    expect(events).toEqual([]);
    expect(store.puts).toBe(puts);
  });

  it('an alloc that registers again with only a new version is updated, stored and told', () => {
    const { registry, store } = makeRegistry();
    registry.register(plugin(0));
    const events: PluginEvent[] = [];
    registry.onDidChange(record(events));
    registry.register(plugin(0, { version: 'v9' }));
    expect(registry.get('csi-node', 'my-plugin')?.version).toBe('v9');
    expect(events.map(brief)).toEqual(['registered csi-node/my-plugin@alloc-0 updated']);
    expect(store.stored?.plugins['csi-node']?.['my-plugin']?.map((r) => r.version)).toEqual(['v9']);
  });

  it('replaces the info of an alloc that registers again with a new socket, in place, and emits registered', () => {
    const { registry, store } = makeRegistry();
    registry.register(plugin(0));
    registry.register(plugin(1));
    const events: PluginEvent[] = [];
    registry.onDidChange(record(events));

    registry.register(plugin(0, { socketPath: '/new/alloc-0.sock' }));
    expect(registry.registrations('csi-node', 'my-plugin').map((p) => [p.allocId, p.socketPath])).toEqual([
      ['alloc-1', '/var/data/plugins/alloc-1/csi.sock'],
      ['alloc-0', '/new/alloc-0.sock'],
    ]);
    registry.register(plugin(1, { options: { mountPoint: '/m' } }));
    expect(registry.get('csi-node', 'my-plugin')?.options).toEqual({ mountPoint: '/m' });
    expect(events.map(brief)).toEqual([
      'registered csi-node/my-plugin@alloc-0 updated (inactive)',
      'registered csi-node/my-plugin@alloc-1 updated',
    ]);
    expect(store.stored?.plugins['csi-node']?.['my-plugin']?.map((r) => r.socketPath)).toEqual([
      '/var/data/plugins/alloc-1/csi.sock',
      '/new/alloc-0.sock',
    ]);
  });

  it('deregisters only an alloc it has: no event and no write for an unknown alloc', () => {
    const { registry, store } = makeRegistry();
    registry.register(plugin(0));
    const puts = store.puts;
    const events: PluginEvent[] = [];
    registry.onDidChange(record(events));
    expect(registry.deregister('csi-node', 'my-plugin', 'alloc-9')).toBe(false);
    expect(registry.deregister('csi-node', 'other', 'alloc-0')).toBe(false);
    expect(registry.deregister('csi-controller', 'my-plugin', 'alloc-0')).toBe(false);
    expect(events).toEqual([]);
    expect(store.puts).toBe(puts);
  });

  it('promotes the next entry when the active one deregisters, and emits for both', () => {
    const { registry } = makeRegistry();
    registry.register(plugin(0));
    registry.register(plugin(1));
    registry.register(plugin(2));
    const events: PluginEvent[] = [];
    registry.onDidChange(record(events));

    expect(registry.deregister('csi-node', 'my-plugin', 'alloc-1')).toBe(true); // not active
    expect(registry.deregister('csi-node', 'my-plugin', 'alloc-2')).toBe(true); // active
    expect(registry.get('csi-node', 'my-plugin')?.allocId).toBe('alloc-0');
    expect(registry.deregister('csi-node', 'my-plugin', 'alloc-0')).toBe(true); // last
    expect(registry.get('csi-node', 'my-plugin')).toBeUndefined();
    expect(registry.list('csi-node')).toEqual([]);
    expect(events.map(brief)).toEqual([
      'deregistered csi-node/my-plugin@alloc-1',
      'deregistered csi-node/my-plugin@alloc-2 (was active)',
      'registered csi-node/my-plugin@alloc-0 promoted',
      'deregistered csi-node/my-plugin@alloc-0 (was active)',
    ]);
  });

  it('lists active entries by name, and all entries of an alloc', () => {
    const { registry } = makeRegistry();
    registry.register(plugin(0, { name: 'zeta' }));
    registry.register(plugin(1, { name: 'alpha' }));
    registry.register(plugin(2, { name: 'alpha' }));
    registry.register(plugin(1, { name: 'alpha', type: 'csi-controller' }));
    expect(registry.list('csi-node').map((p) => `${p.name}@${p.allocId}`)).toEqual(['alpha@alloc-2', 'zeta@alloc-0']);
    expect(registry.list('csi-controller').map((p) => `${p.name}@${p.allocId}`)).toEqual(['alpha@alloc-1']);
    expect(
      registry
        .allocPlugins('alloc-1')
        .map((p) => `${p.type}/${p.name}`)
        .sort(),
    ).toEqual(['csi-controller/alpha', 'csi-node/alpha']);
    expect(registry.allocPlugins('alloc-9')).toEqual([]);
  });

  it('removing the last alloc of one plugin leaves the other plugins of its type', () => {
    const { registry } = makeRegistry();
    registry.register(plugin(0, { name: 'a' }));
    registry.register(plugin(1, { name: 'b' }));
    registry.deregister('csi-node', 'a', 'alloc-0');
    expect(registry.list('csi-node').map((p) => `${p.name}@${p.allocId}`)).toEqual(['b@alloc-1']);
    expect(registry.get('csi-node', 'b')?.allocId).toBe('alloc-1');
    registry.register(plugin(2, { name: 'a' }));
    expect(registry.list('csi-node').map((p) => `${p.name}@${p.allocId}`)).toEqual(['a@alloc-2', 'b@alloc-1']);
  });

  it('logs each new registration as the core README shows it: "plugin registered", component plugin-registry', () => {
    const { registry, logger } = makeRegistry();
    registry.register(plugin(0));
    registry.register(plugin(1));
    expect(logger.find('plugin registered', 'info').map((r) => r.fields)).toEqual([
      {
        component: 'plugin-registry',
        type: 'csi-node',
        name: 'my-plugin',
        allocId: 'alloc-0',
        socketPath: '/var/data/plugins/alloc-0/csi.sock',
        version: 'v0',
        previous: undefined,
      },
      {
        component: 'plugin-registry',
        type: 'csi-node',
        name: 'my-plugin',
        allocId: 'alloc-1',
        socketPath: '/var/data/plugins/alloc-1/csi.sock',
        version: 'v1',
        previous: 'alloc-0',
      },
    ]);
  });
});

describe('DynamicPluginRegistry: dispensing', () => {
  it('dispenses the active entry through the dispenser of its type', () => {
    const { registry } = makeRegistry();
    const seen: RegisteredPlugin[] = [];
    registry.registerDispenser('csi-node', (p) => {
      seen.push(p);
      return { client: p.socketPath };
    });
    registry.register(plugin(0));
    registry.register(plugin(1));
    expect(registry.dispense<{ client: string }>('csi-node', 'my-plugin')).toEqual({ client: '/var/data/plugins/alloc-1/csi.sock' });
    expect(seen.map((p) => p.allocId)).toEqual(['alloc-1']);
  });

  it('says which plugin was not found, and which type has no dispenser', () => {
    const { registry } = makeRegistry();
    expect(() => registry.dispense('csi-controller', 'x')).toThrow(NoDispenserError);
    expect(() => registry.dispense('csi-controller', 'x')).toThrow('this agent has nothing that talks to plugins of type csi-controller');
    registry.registerDispenser('csi-node', () => ({}));
    let err: unknown;
    try {
      registry.dispense('csi-node', 'hostpath-plugin0');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(PluginNotFoundError);
    expect(err).toMatchObject({ code: 'EPLUGIN_NOT_FOUND', pluginType: 'csi-node', pluginName: 'hostpath-plugin0' });
    expect((err as Error).message).toBe(
      'plugin "hostpath-plugin0" of type csi-node not found: it is not registered (yet); check that its plugin task is running (csiplug plugin status hostpath-plugin0), then try again',
    );
    expect(() => registry.dispense('nope', 'x')).toThrow(UnknownPluginTypeError);
  });

  it('refuses a second dispenser for a type until the first is disposed', () => {
    const { registry } = makeRegistry();
    const first = registry.registerDispenser('csi-node', () => 1);
    expect(() => registry.registerDispenser('csi-node', () => 2)).toThrow(DuplicateDispenserError);
    first.dispose();
    registry.registerDispenser('csi-node', () => 2);
    registry.register(plugin(0));
    expect(registry.dispense('csi-node', 'my-plugin')).toBe(2);
    expect(() => registry.registerDispenser('gpu', () => 0)).toThrow(UnknownPluginTypeError);
  });
});

describe('DynamicPluginRegistry: events', () => {
  it('delivers registered and deregistered separately and per type, and stops after dispose', () => {
    const { registry } = makeRegistry();
    const reg: string[] = [];
    const dereg: string[] = [];
    const nodeOnly: string[] = [];
    const controllerRegs: string[] = [];
    const nodeDeregs: string[] = [];
    const s1 = registry.onDidRegister((e) => reg.push(brief(e)));
    registry.onDidDeregister((e) => dereg.push(brief(e)));
    registry.eventsOf('csi-node').onDidChange((e) => nodeOnly.push(brief(e)));
    registry.eventsOf('csi-node').onDidDeregister((e) => nodeDeregs.push(brief(e)));
    registry.eventsOf('csi-controller').onDidRegister((e) => controllerRegs.push(brief(e)));
    registry.eventsOf('csi-controller').onDidDeregister((e) => controllerRegs.push(`unexpected ${brief(e)}`));

    registry.register(plugin(0));
    registry.register(plugin(0, { type: 'csi-controller' }));
    registry.deregister('csi-node', 'my-plugin', 'alloc-0');
    s1.dispose();
    registry.register(plugin(1));

    expect(reg).toEqual(['registered csi-node/my-plugin@alloc-0 new', 'registered csi-controller/my-plugin@alloc-0 new']);
    expect(dereg).toEqual(['deregistered csi-node/my-plugin@alloc-0 (was active)']);
    expect(nodeOnly).toEqual([
      'registered csi-node/my-plugin@alloc-0 new',
      'deregistered csi-node/my-plugin@alloc-0 (was active)',
      'registered csi-node/my-plugin@alloc-1 new',
    ]);
    expect(controllerRegs).toEqual(['registered csi-controller/my-plugin@alloc-0 new']);
    expect(nodeDeregs).toEqual(['deregistered csi-node/my-plugin@alloc-0 (was active)']);
  });

  it('logs a listener that throws; the other listeners and the registry carry on', () => {
    const { registry, logger } = makeRegistry();
    const after: string[] = [];
    registry.onDidRegister(() => {
      throw new Error('listener bug');
    });
    registry.onDidRegister((e) => after.push(e.plugin.allocId));
    registry.onDidChange((e) => after.push(`change ${e.plugin.allocId}`));
    expect(() => registry.register(plugin(0))).not.toThrow();
    registry.register(plugin(1));
    expect(after).toEqual(['alloc-0', 'change alloc-0', 'alloc-1', 'change alloc-1']);
    const lines = logger.find('event listener threw', 'error');
    expect(lines).toHaveLength(2);
    expect(lines[0]!.fields).toMatchObject({ event: 'registered', type: 'csi-node', name: 'my-plugin', allocId: 'alloc-0' });
    expect((lines[0]!.fields['error'] as Error).message).toBe('listener bug');
  });

  it('logs a deregistered or change listener that throws, naming the event; the registry carries on', () => {
    const { registry, logger } = makeRegistry();
    registry.onDidDeregister(() => {
      throw new Error('deregistered listener bug');
    });
    registry.onDidChange((e) => {
      if (e.kind === 'deregistered') throw new Error('change listener bug');
    });
    registry.register(plugin(0));
    expect(registry.deregister('csi-node', 'my-plugin', 'alloc-0')).toBe(true);
    expect(registry.get('csi-node', 'my-plugin')).toBeUndefined();
    const lines = logger.find('event listener threw', 'error');
    expect(lines.map((l) => [(l.fields['error'] as Error).message, l.fields['event'], l.fields['allocId']])).toEqual([
      ['deregistered listener bug', 'deregistered', 'alloc-0'],
      ['change listener bug', 'deregistered', 'alloc-0'],
    ]);
  });

  it('fires after the change is persisted and visible', () => {
    const { registry, store } = makeRegistry();
    const seen: unknown[] = [];
    registry.onDidChange((e) => {
      seen.push({
        event: brief(e),
        active: registry.get('csi-node', 'my-plugin')?.allocId,
        stored: store.stored?.plugins['csi-node']?.['my-plugin']?.map((r) => r.allocId) ?? [],
      });
    });
    registry.register(plugin(0));
    registry.register(plugin(1));
    registry.deregister('csi-node', 'my-plugin', 'alloc-1');
    expect(seen).toEqual([
      { event: 'registered csi-node/my-plugin@alloc-0 new', active: 'alloc-0', stored: ['alloc-0'] },
      { event: 'registered csi-node/my-plugin@alloc-1 new', active: 'alloc-1', stored: ['alloc-1', 'alloc-0'] },
      { event: 'deregistered csi-node/my-plugin@alloc-1 (was active)', active: 'alloc-0', stored: ['alloc-0'] },
      { event: 'registered csi-node/my-plugin@alloc-0 promoted', active: 'alloc-0', stored: ['alloc-0'] },
    ]);
  });

  it('keeps every listener in change order when a listener changes the registry', () => {
    const { registry } = makeRegistry();
    const first: string[] = [];
    const last: string[] = [];
    registry.onDidChange((e) => first.push(brief(e)));
    registry.onDidChange((e) => {
      // A listener that reacts to the promotion by registering a replacement
      // and to the replacement by dropping the promoted entry.
      if (e.kind === 'registered' && e.reason === 'promoted') registry.register(plugin(9));
      if (e.kind === 'registered' && e.plugin.allocId === 'alloc-9') registry.deregister('csi-node', 'my-plugin', 'alloc-0');
    });
    registry.onDidChange((e) => last.push(brief(e)));
    registry.register(plugin(0));
    registry.register(plugin(1));
    registry.deregister('csi-node', 'my-plugin', 'alloc-1');
    const expected = [
      'registered csi-node/my-plugin@alloc-0 new',
      'registered csi-node/my-plugin@alloc-1 new',
      'deregistered csi-node/my-plugin@alloc-1 (was active)',
      'registered csi-node/my-plugin@alloc-0 promoted',
      'registered csi-node/my-plugin@alloc-9 new',
      'deregistered csi-node/my-plugin@alloc-0',
    ];
    expect(first).toEqual(expected);
    expect(last).toEqual(expected);
    expect(registry.registrations('csi-node', 'my-plugin').map((p) => p.allocId)).toEqual(['alloc-9']);
  });
});

describe('DynamicPluginRegistry: a failed write', () => {
  it('leaves the registry unchanged, fires nothing and says what failed', () => {
    const { registry, store, logger } = makeRegistry();
    registry.register(plugin(0));
    const events: PluginEvent[] = [];
    registry.onDidChange(record(events));
    const before = store.json;

    store.failNextPut = new Error('disk full');
    let err: unknown;
    try {
      registry.register(plugin(1));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(RegistryPersistError);
    expect(err).toMatchObject({ code: 'EREGISTRY_PERSIST' });
    expect((err as Error).message).toContain('register csi-node/my-plugin for alloc alloc-1');
    expect((err as Error).message).toContain('disk full');
    expect((err as Error).cause).toBeInstanceOf(Error);
    expect(registry.registrations('csi-node', 'my-plugin').map((p) => p.allocId)).toEqual(['alloc-0']);
    expect(store.json).toBe(before);
    expect(logger.find('could not persist', 'error')).toHaveLength(1);

    store.failNextPut = new Error('disk full');
    expect(() => registry.register(plugin(0, { socketPath: '/other' }))).toThrow(
      new RegistryPersistError('update csi-node/my-plugin for alloc alloc-0', new Error('disk full')),
    );
    expect(registry.get('csi-node', 'my-plugin')?.socketPath).toBe('/var/data/plugins/alloc-0/csi.sock');
    store.failNextPut = new Error('disk full');
    expect(() => registry.deregister('csi-node', 'my-plugin', 'alloc-0')).toThrow(
      new RegistryPersistError('deregister csi-node/my-plugin for alloc alloc-0', new Error('disk full')),
    );
    expect(registry.get('csi-node', 'my-plugin')?.allocId).toBe('alloc-0');
    expect(events).toEqual([]);

    // The next write carries the whole state, so nothing is lost by the failure.
    registry.register(plugin(1));
    expect(store.stored?.plugins['csi-node']?.['my-plugin']?.map((r) => r.allocId)).toEqual(['alloc-1', 'alloc-0']);
    expect(events.map(brief)).toEqual(['registered csi-node/my-plugin@alloc-1 new']);
  });
});

describe('DynamicPluginRegistry: dispose', () => {
  it('stops events, refuses changes, writes nothing and still answers reads', async () => {
    const { registry, store } = makeRegistry();
    registry.register(plugin(0));
    const events: PluginEvent[] = [];
    registry.onDidChange(record(events));
    const puts = store.puts;
    const before = store.json;

    registry.dispose();
    registry.dispose();
    expect(registry.isDisposed).toBe(true);
    expect(() => registry.register(plugin(1))).toThrow(ShutdownError);
    expect(() => registry.register(plugin(1))).toThrow('the plugin registry is shut down; cannot register a plugin');
    expect(() => registry.deregister('csi-node', 'my-plugin', 'alloc-0')).toThrow(
      new ShutdownError('the plugin registry is shut down; cannot deregister a plugin'),
    );
    await expect(registry.waitForPlugin('csi-node', 'my-plugin')).rejects.toBeInstanceOf(ShutdownError);
    expect(registry.get('csi-node', 'my-plugin')?.allocId).toBe('alloc-0');
    expect(events).toEqual([]);
    expect(store.puts).toBe(puts);
    expect(store.json).toBe(before);
    // Subscribing after dispose is harmless.
    registry.onDidChange(() => undefined).dispose();
  });

  it('stops delivering queued events when a listener disposes the registry', () => {
    const { registry } = makeRegistry();
    const seen: string[] = [];
    registry.onDidChange((e) => {
      seen.push(brief(e));
      if (e.kind === 'deregistered') registry.dispose();
    });
    registry.register(plugin(0));
    registry.register(plugin(1));
    registry.deregister('csi-node', 'my-plugin', 'alloc-1');
    expect(seen).toEqual([
      'registered csi-node/my-plugin@alloc-0 new',
      'registered csi-node/my-plugin@alloc-1 new',
      'deregistered csi-node/my-plugin@alloc-1 (was active)',
    ]);
  });

  it('isDisposed turns true with dispose()', () => {
    const { registry } = makeRegistry();
    expect(registry.isDisposed).toBe(false);
    registry.dispose();
    expect(registry.isDisposed).toBe(true);
  });
});
