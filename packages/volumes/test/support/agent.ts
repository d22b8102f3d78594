// One agent incarnation for the integration tests, as the agent composes
// them: core, a real SQLite client state file, CSI clients, the plugin
// registry, the CSI manager and the volume reconciler (claims go to the
// test's FakeClaimer), started in the agent's order. `stop()` is the first
// half of an agent restart: nothing is unmounted, the records and the
// registrations stay in the state file.
import * as path from 'node:path';
import { type DependencyContainer, container as root } from 'tsyringe';
import { MemoryLogger, registerCore, type TimeoutSettings } from '@csiplug/core';
import { type CSIClientFactory, ICSIClientFactory, mountCapability, registerCsi } from '@csiplug/csi';
import {
  type CSIManager,
  ICSIManager,
  type NodeEvent,
  PLUGIN_OPTION_PLUGIN_TYPE,
  PLUGIN_OPTION_STAGE_PUBLISH_BASE,
  registerCsiManager,
} from '@csiplug/csimanager';
import { IPluginRegistry, type PluginRegistry, registerRegistry } from '@csiplug/registry';
import { type ClientStateDB, IClientStateDB, openClientState, bindStateStores } from '@csiplug/state';
import { IVolumeClaimer, IVolumeReconciler, registerVolumeReconciler, type LiveMountEvent, type VolumeReconcilerService } from '../../src';
import type { FakeClaimer } from '../../src/testing';

export interface TestAgent {
  c: DependencyContainer;
  db: ClientStateDB;
  registry: PluginRegistry;
  manager: CSIManager;
  reconciler: VolumeReconcilerService;
  logger: MemoryLogger;
  events: NodeEvent[];
  /** What the reconciler said of live mounts, in order. */
  checks: LiveMountEvent[];
  aways: LiveMountEvent[];
  stop(): Promise<void>;
}

export interface TestAgentOptions {
  timeouts?: Partial<TimeoutSettings>;
  /** How often plugin instances are fingerprinted (ms); how soon a crash or a return is seen without news from the registry. */
  fingerprintInterval?: number;
}

export async function startAgent(dataDir: string, claimer: FakeClaimer, options: TestAgentOptions = {}): Promise<TestAgent> {
  const c = root.createChildContainer();
  const logger = new MemoryLogger();
  const every = options.fingerprintInterval;
  registerCore(c, {
    logger,
    heartbeat: { strategy: 'fixed', ...(every !== undefined ? { fingerprintInterval: every, interval: every } : {}) },
    timeouts: { pluginWaitPrerun: 20_000, pluginWaitRestore: 20_000, ...options.timeouts },
  });
  const db = openClientState({ path: path.join(dataDir, 'state.db') });
  c.register(IClientStateDB, { useValue: db });
  bindStateStores(c); // the narrow store tokens, over the state bound above
  registerCsi(c);
  registerRegistry(c);
  registerCsiManager(c, { dataDir });
  c.register(IVolumeClaimer, { useValue: claimer });
  registerVolumeReconciler(c);
  const registry = c.resolve<PluginRegistry>(IPluginRegistry);
  const manager = c.resolve<CSIManager>(ICSIManager);
  const reconciler = c.resolve<VolumeReconcilerService>(IVolumeReconciler);
  const events: NodeEvent[] = [];
  const checks: LiveMountEvent[] = [];
  /** A node plugin under live mounts stopped serving ('plugin-away'): kept apart from the looks at the mounts. */
  const aways: LiveMountEvent[] = [];
  manager.onNodeEvent((e) => events.push(e));
  reconciler.onDidCheckMount((e) => (e.kind === 'plugin-away' ? aways : checks).push(e));
  await manager.start();
  reconciler.start();
  return {
    c,
    db,
    registry,
    manager,
    reconciler,
    logger,
    events,
    checks,
    aways,
    async stop() {
      reconciler.dispose();
      await manager.dispose();
      registry.dispose();
      db.dispose();
    },
  };
}

/** Registers the hostpath plugin of `allocId` as a monolith (csi-controller and csi-node), as its supervisor hook would. */
export function registerMonolith(registry: PluginRegistry, dataDir: string, allocId: string, socketPath: string): void {
  const options = {
    [PLUGIN_OPTION_PLUGIN_TYPE]: 'monolith',
    [PLUGIN_OPTION_STAGE_PUBLISH_BASE]: path.join(dataDir, 'csi', 'monolith', 'hostpath'),
  };
  for (const type of ['csi-controller', 'csi-node'])
    registry.register({ type, name: 'hostpath', version: '0.1.0', allocId, socketPath, options });
}

/** Creates volume `id` on the plugin and puts it in the claimer's catalog; resolves with the plugin's id for it. */
export async function createVolume(agent: TestAgent, claimer: FakeClaimer, socketPath: string, id: string): Promise<string> {
  const client = agent.c.resolve<CSIClientFactory>(ICSIClientFactory).createClient(socketPath);
  try {
    const res = await client.createVolume({ name: id, volumeCapabilities: [mountCapability('SINGLE_NODE_WRITER')] });
    const externalId = res.volume!.volumeId;
    claimer.volumes.set(id, { id, externalId, pluginId: 'hostpath' });
    return externalId;
  } finally {
    client.dispose();
  }
}

/** Polls `check` (a real process, real mounts: there is no event to wait on) until it holds, or fails naming `what`. */
export async function eventually(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
