// The scenarios of Nomad's client/dynamicplugins registry tests, including
// the three it marks as failing (restore and replacement races), which this
// registry gets right.
import { type PluginEvent, type RegisteredPlugin } from '.';
import { FakeRegistryStore } from './testing';
import { makeRegistry, plugin } from '../test/harness';

const dispenseSelf = (p: RegisteredPlugin) => p;

describe('Nomad registry scenarios', () => {
  it('keeps plugin types apart', () => {
    const { registry } = makeRegistry();
    registry.register(plugin(0, { type: 'csi-controller' }));
    registry.register(plugin(0, { type: 'csi-node' }));
    expect(registry.deregister('csi-controller', 'my-plugin', 'alloc-0')).toBe(true);
    expect(registry.list('csi-node')).toHaveLength(1);
    expect(registry.list('csi-controller')).toHaveLength(0);
  });

  it('dispenses from a registry restored from the state store', () => {
    const store = new FakeRegistryStore();
    const old = makeRegistry({ store });
    old.registry.registerDispenser('csi-node', dispenseSelf);
    old.registry.register(plugin(0));
    expect(old.registry.dispense<RegisteredPlugin>('csi-node', 'my-plugin').allocId).toBe('alloc-0');

    const fresh = makeRegistry({ store });
    fresh.registry.registerDispenser('csi-node', dispenseSelf);
    expect(fresh.registry.dispense<RegisteredPlugin>('csi-node', 'my-plugin')).toMatchObject({ allocId: 'alloc-0', restored: true });
  });

  it('restore race on client restart: alloc-0 re-registering after the restart does not displace alloc-1', () => {
    const h = makeRegistry();
    h.registry.registerDispenser('csi-node', dispenseSelf);
    h.registry.register(plugin(0));
    h.registry.register(plugin(1)); // a new alloc of the same plugin, the old one still running
    expect(h.registry.dispense<RegisteredPlugin>('csi-node', 'my-plugin').allocId).toBe('alloc-1');

    const after = h.restart();
    expect(after.dispense<RegisteredPlugin>('csi-node', 'my-plugin')).toMatchObject({
      allocId: 'alloc-1',
      socketPath: '/var/data/plugins/alloc-1/csi.sock',
      restored: true,
    });

    // The allocs restore in the opposite order they were created.
    const events: PluginEvent[] = [];
    after.onDidChange((e) => events.push(e));
    after.register(plugin(0));
    expect(after.dispense<RegisteredPlugin>('csi-node', 'my-plugin')).toMatchObject({
      allocId: 'alloc-1',
      socketPath: '/var/data/plugins/alloc-1/csi.sock',
    });
    expect(after.registrations('csi-node', 'my-plugin').map((p) => [p.allocId, p.restored])).toEqual([
      ['alloc-1', true],
      ['alloc-0', false],
    ]);
    expect(events).toEqual([]);

    after.register(plugin(1));
    expect(after.get('csi-node', 'my-plugin')).toMatchObject({ allocId: 'alloc-1', restored: false });
    // the active plugin is confirmed back: news for whoever waits on it
    expect(events.map((e) => [e.kind, e.plugin.allocId, e.kind === 'registered' && e.reason])).toEqual([
      ['registered', 'alloc-1', 'confirmed'],
    ]);
  });

  it('replacement race on host restart: a replacement alloc-2 becomes active', () => {
    const h = makeRegistry();
    h.registry.registerDispenser('csi-node', dispenseSelf);
    h.registry.register(plugin(0));
    h.registry.register(plugin(1));
    const after = h.restart();
    expect(after.get('csi-node', 'my-plugin')?.allocId).toBe('alloc-1');

    // Nothing survived the host restart; the server places a replacement.
    const events: PluginEvent[] = [];
    after.onDidChange((e) => events.push(e));
    after.register(plugin(2));
    expect(after.dispense<RegisteredPlugin>('csi-node', 'my-plugin')).toMatchObject({
      allocId: 'alloc-2',
      socketPath: '/var/data/plugins/alloc-2/csi.sock',
      restored: false,
    });
    expect(events.map((e) => `${e.kind} ${e.plugin.allocId}`)).toEqual(['registered alloc-2']);

    // The dead allocs deregister as they are cleaned up; alloc-2 stays active.
    after.deregister('csi-node', 'my-plugin', 'alloc-1');
    after.deregister('csi-node', 'my-plugin', 'alloc-0');
    expect(after.registrations('csi-node', 'my-plugin').map((p) => p.allocId)).toEqual(['alloc-2']);
  });

  it('interleaved register and deregister: a replacement registered before the old alloc deregisters stays active', () => {
    const { registry } = makeRegistry();
    registry.registerDispenser('csi-node', dispenseSelf);
    registry.register(plugin(0));
    registry.register(plugin(1)); // the replacement, before the old one goes
    expect(registry.dispense<RegisteredPlugin>('csi-node', 'my-plugin').allocId).toBe('alloc-1');

    const events: PluginEvent[] = [];
    registry.onDidChange((e) => events.push(e));
    registry.deregister('csi-node', 'my-plugin', 'alloc-0');
    expect(registry.dispense<RegisteredPlugin>('csi-node', 'my-plugin').allocId).toBe('alloc-1');
    expect(events.map((e) => `${e.kind} ${e.plugin.allocId}`)).toEqual(['deregistered alloc-0']);
  });
});
