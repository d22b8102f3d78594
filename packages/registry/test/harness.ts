// Builds a registry over fakes: a FakeClock, a MemoryLogger, the default
// timeout policy and a FakeRegistryStore.
import { DefaultTimeoutPolicy, MemoryLogger, type TimeoutSettings } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import { DynamicPluginRegistry, PluginDispenserTable, type PluginRegistration } from '../src';
import { FakeRegistryStore } from '../src/testing';

export interface Harness {
  registry: DynamicPluginRegistry;
  clock: FakeClock;
  logger: MemoryLogger;
  store: FakeRegistryStore;
  dispensers: PluginDispenserTable;
  /** A new registry over the same store (an agent restart). */
  restart(): DynamicPluginRegistry;
}

export function makeRegistry(
  opts: { store?: FakeRegistryStore; clock?: FakeClock; extraTypes?: string[]; timeouts?: Partial<TimeoutSettings> } = {},
): Harness {
  const clock = opts.clock ?? new FakeClock();
  const logger = new MemoryLogger();
  const store = opts.store ?? new FakeRegistryStore();
  const policy = new DefaultTimeoutPolicy(opts.timeouts);
  const dispensers = new PluginDispenserTable();
  const build = () => new DynamicPluginRegistry(store, clock, logger, policy, dispensers, { extraTypes: opts.extraTypes });
  const h: Harness = {
    registry: build(),
    clock,
    logger,
    store,
    dispensers,
    restart() {
      h.registry.dispose();
      h.registry = build();
      return h.registry;
    },
  };
  return h;
}

/** A registration like Nomad's test helper: alloc-N, version vN, its own socket. */
export function plugin(idx: number | string, over: Partial<PluginRegistration> = {}): PluginRegistration {
  const allocId = `alloc-${idx}`;
  return {
    type: 'csi-node',
    name: 'my-plugin',
    version: `v${idx}`,
    allocId,
    socketPath: `/var/data/plugins/${allocId}/csi.sock`,
    ...over,
  };
}
