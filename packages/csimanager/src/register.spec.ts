// registerCsiManager and csiManagerModule: the config bound (resync on unless
// turned off), defaults that give way to what a deployment bound first, and
// the module's start (starts the manager) and stop (disposes it).
import { container as rootContainer } from 'tsyringe';
import { FakeMountTable } from './testing';
import { Harness, plugin } from '../test/harness';
import { type CSIManager, ICSIManager, ICSIManagerConfig, IMountTable, csiManagerModule, registerCsiManager } from '.';

async function bindDeps(c: ReturnType<typeof rootContainer.createChildContainer>, h: Harness): Promise<void> {
  const { IClock, ILogger, ITimeoutPolicy, IHeartbeatStrategy } = await import('@csiplug/core');
  const { IPluginRegistry } = await import('@csiplug/registry');
  const { ICSIClientFactory } = await import('@csiplug/csi');
  c.register(IClock, { useValue: h.clock });
  c.register(ILogger, { useValue: h.logger });
  c.register(ITimeoutPolicy, { useValue: h.policy });
  c.register(IHeartbeatStrategy, { useValue: h.heartbeat });
  c.register(IPluginRegistry, { useValue: h.registry });
  c.register(ICSIClientFactory, { useValue: h.factory });
}

describe('registerCsiManager and csiManagerModule', () => {
  let h: Harness;
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.dispose();
  });

  it('binds a frozen config: resync on by default, off when asked', () => {
    const c = rootContainer.createChildContainer();
    registerCsiManager(c, { dataDir: '/data' });
    const config = c.resolve(ICSIManagerConfig);
    expect(config).toEqual({ dataDir: '/data', resync: true });
    expect(Object.isFrozen(config)).toBe(true);
    const off = rootContainer.createChildContainer();
    registerCsiManager(off, { dataDir: '/data', resync: false });
    expect(off.resolve(ICSIManagerConfig)).toEqual({ dataDir: '/data', resync: false });
  });

  it('keeps what a deployment bound first', () => {
    const c = rootContainer.createChildContainer();
    const mounts = new FakeMountTable();
    c.register(IMountTable, { useValue: mounts });
    c.register(ICSIManagerConfig, { useValue: { dataDir: '/mine', resync: false } });
    registerCsiManager(c, { dataDir: '/data' });
    expect(c.resolve(IMountTable)).toBe(mounts);
    expect(c.resolve(ICSIManagerConfig)).toEqual({ dataDir: '/mine', resync: false });
  });

  it('the module registers the bindings, starts the manager and stops it', async () => {
    const c = rootContainer.createChildContainer();
    await bindDeps(c, h);
    c.register(IMountTable, { useValue: h.mounts });
    expect(csiManagerModule.name).toBe('csimanager');
    csiManagerModule.register(c, { dataDir: h.dataDir, resync: false });
    expect(c.resolve(ICSIManagerConfig)).toEqual({ dataDir: h.dataDir, resync: false });
    const manager = c.resolve<CSIManager>(ICSIManager);
    h.registry.register(plugin(0));
    await csiManagerModule.start!(c);
    await h.settle();
    expect(manager.pluginInfo('csi-node', 'my-plugin')?.healthy).toBe(true);
    await csiManagerModule.stop!(c);
    expect(manager.plugins()).toEqual([]);
    await expect(manager.start()).rejects.toThrow(/shut down/);
  });
});
