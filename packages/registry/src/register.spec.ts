import { MemoryLogger, registerCore } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import { IClientStateDB, bindStateStores, openClientState } from '@csiplug/state';
import { container as root } from 'tsyringe';
import {
  DynamicPluginRegistry,
  IPluginDispensers,
  IPluginRegistry,
  IRegistryStore,
  type PluginRegistry,
  StateRegistryStore,
  registerRegistry,
  registryModule,
} from '.';
import { FakeRegistryStore } from './testing';

function setup() {
  const c = root.createChildContainer();
  const clock = new FakeClock();
  registerCore(c, { clock, logger: new MemoryLogger(), timeouts: { registryWait: 1_000 } });
  const store = new FakeRegistryStore();
  c.register(IRegistryStore, { useValue: store });
  return { c, clock, store };
}

describe('registerRegistry', () => {
  it('binds one registry per container, built from the injected clock, policy and state', async () => {
    const { c, clock, store } = setup();
    registerRegistry(c, { types: ['gpu'], dispensers: { 'csi-node': (p) => `client for ${p.socketPath}` } });
    const registry = c.resolve<PluginRegistry>(IPluginRegistry);
    expect(registry).toBeInstanceOf(DynamicPluginRegistry);
    expect(c.resolve(IPluginRegistry)).toBe(registry);
    expect(registry.types).toEqual(['csi-controller', 'csi-node', 'gpu']);

    registry.register({ type: 'csi-node', name: 'p', allocId: 'a', socketPath: '/s' });
    expect(store.puts).toBe(1);
    expect(registry.dispense('csi-node', 'p')).toBe('client for /s');

    // The CSI manager adds its dispenser through the same table.
    c.resolve<IPluginDispensers>(IPluginDispensers).register('csi-controller', () => 'controller client');
    registry.register({ type: 'csi-controller', name: 'p', allocId: 'a', socketPath: '/s' });
    expect(registry.dispense('csi-controller', 'p')).toBe('controller client');

    // The default timeout is the injected policy's, on the injected clock.
    const wait = registry.waitForPlugin('gpu', 'g');
    await clock.advance(1_000);
    await expect(wait).rejects.toThrow('timed out after 1s waiting for plugin "g" of type gpu to register');
    registry.dispose();
  });

  it('by default keeps the registry in the client state bound to IClientStateDB', () => {
    const c = root.createChildContainer();
    registerCore(c, { clock: new FakeClock(), logger: new MemoryLogger() });
    const state = openClientState({ memory: true });
    try {
      c.register(IClientStateDB, { useValue: state });
      bindStateStores(c);
      registerRegistry(c);
      expect(c.resolve(IRegistryStore)).toBeInstanceOf(StateRegistryStore);
      const registry = c.resolve<PluginRegistry>(IPluginRegistry);
      registry.register({ type: 'csi-node', name: 'p', allocId: 'a', socketPath: '/s' });
      expect(state.getRegistryState()).toEqual({
        plugins: { 'csi-node': { p: [{ type: 'csi-node', name: 'p', version: '', allocId: 'a', socketPath: '/s', options: {} }] } },
      });
      registry.dispose();
    } finally {
      state.dispose();
    }
  });

  it('leaves a registry a deployment bound first alone', () => {
    const { c } = setup();
    const mine = { mine: true } as unknown as PluginRegistry;
    c.register(IPluginRegistry, { useValue: mine });
    registerRegistry(c);
    expect(c.resolve(IPluginRegistry)).toBe(mine);
  });

  it('builds with no options', () => {
    const { c } = setup();
    registerRegistry(c);
    const registry = c.resolve<PluginRegistry>(IPluginRegistry);
    expect(registry.types).toEqual(['csi-controller', 'csi-node']);
    expect(() => registry.dispense('csi-node', 'p')).toThrow('this agent has nothing that talks to plugins of type csi-node');
  });
});

describe('registryModule', () => {
  it('start makes the registry, restoring what the state holds; stop disposes it', async () => {
    const c = root.createChildContainer();
    registerCore(c, { clock: new FakeClock(), logger: new MemoryLogger() });
    const state = openClientState({ memory: true });
    try {
      state.putRegistryState({
        plugins: { 'csi-node': { p: [{ type: 'csi-node', name: 'p', version: '', allocId: 'a', socketPath: '/s', options: {} }] } },
      });
      c.register(IClientStateDB, { useValue: state });
      bindStateStores(c);
      registryModule.register(c, {});
      await registryModule.start!(c);
      const registry = c.resolve<PluginRegistry>(IPluginRegistry);
      expect(registry.get('csi-node', 'p')).toMatchObject({ allocId: 'a', restored: true });
      expect(registry.isDisposed).toBe(false);
      await registryModule.stop!(c);
      expect(registry.isDisposed).toBe(true);
    } finally {
      state.dispose();
    }
  });
});
