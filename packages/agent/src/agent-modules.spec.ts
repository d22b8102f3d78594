// The agent's module list, run by a ModuleHost the way Agent.start runs it:
// the order is the restart-survival order, registration opens nothing, start
// opens the state and has the agent relay the services' events, and stop
// (in reverse) disposes what the modules made.
import {
  bind,
  IClock,
  ILogger,
  MemoryLogger,
  MissingBindingError,
  ModuleHost,
  ModuleStartError,
  type Clock,
  type Logger,
} from '@csiplug/core';
import { ICSIManager, type CSIManager } from '@csiplug/csimanager';
import { IPluginRegistry, type PluginRegistry } from '@csiplug/registry';
import { IClientStateDB, type ClientStateDB } from '@csiplug/state';
import { IVolumeCatalog, IVolumeClaimer, type VolumeCatalogService } from '@csiplug/volumes';
import {
  CLUSTER_INSTANCE_FILE,
  ClusterNodeNotOpenError,
  ClusterVolumeClaimer,
  IClusterAgent,
  IClusterMode,
  IClusterNode,
  type ClusterAgent,
  type ClusterMode,
  type ClusterNode,
} from '@csiplug/cluster';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { container as rootContainer } from 'tsyringe';
import { IAgentEvents, type AgentEvents } from '@csiplug/api';
import { agentModules } from './agent-modules';
import type { AgentEvent } from '@csiplug/api';
import { devConfig, type AgentConfig, type VolumeSpec } from '@csiplug/jobspec';

const spec: VolumeSpec = {
  id: 'data',
  name: 'data',
  type: 'csi',
  pluginId: 'hostpath',
  externalId: 'vol-1',
  capabilities: [{ accessMode: 'single-node-writer', attachmentMode: 'file-system' }],
  parameters: {},
  secrets: {},
  context: {},
};

/** A cluster block whose etcd is never reached (nothing listens on port 1): the modules start without it. */
function clusterSettings() {
  return {
    etcd: { endpoints: ['http://127.0.0.1:1'], prefix: 'modules-spec/', dialTimeoutMs: 200 },
    nodeName: 'n1',
    nodeClass: '',
    meta: {},
    heartbeatTtlMs: 10_000,
    disconnectGraceMs: 60_000,
  };
}

describe('agentModules', () => {
  let dataDir: string;
  let config: AgentConfig;
  beforeEach(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-modules-'));
    config = { ...devConfig(), dataDir, state: { backend: 'sqlite' } };
  });
  afterEach(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  it('lists the modules lowest layer first, the agent below the CSI manager it listens to', () => {
    expect(agentModules(config, new MemoryLogger()).map((m) => m.name)).toEqual([
      'core',
      'state',
      'csi',
      'driver',
      'images',
      'registry',
      'agent',
      'csimanager',
      'volumes',
      'hooks',
    ]);
  });

  it('a cluster node adds the cluster module before the volumes: its claimer is the IVolumeClaimer, made once the module starts (the identity read)', async () => {
    const cluster = clusterSettings();
    const modules = agentModules({ ...config, cluster }, new MemoryLogger());
    expect(modules.map((m) => m.name)).toEqual([
      'core',
      'state',
      'csi',
      'driver',
      'images',
      'registry',
      'cluster',
      'agent',
      'csimanager',
      'volumes',
      'hooks',
    ]);
    const container = rootContainer.createChildContainer();
    const host = new ModuleHost(container, modules);
    host.register();
    // Before start: nothing read, nothing connected; the claimer says why it cannot be had yet.
    expect(() => container.resolve<ClusterNode>(IClusterNode).claimer).toThrow(ClusterNodeNotOpenError);
    expect(fs.readdirSync(dataDir)).toEqual([]);
    await host.start();
    try {
      const node = container.resolve<ClusterNode>(IClusterNode);
      expect(container.resolve(IVolumeClaimer)).toBe(node.claimer);
      expect(node.claimer).toBeInstanceOf(ClusterVolumeClaimer);
      expect(fs.readFileSync(path.join(dataDir, CLUSTER_INSTANCE_FILE), 'utf8').trim()).toBe(node.membership.identity);
    } finally {
      await host.stop();
    }
    // Stopped: the connection closed (no etcd was ever reached: nothing waited for it).
    expect(container.resolve<ClusterNode>(IClusterNode).membership.disposed).toBe(true);
  });

  it("cluster mode is the cluster module's: made on resolve over what the agent bound to IClusterAgent, and the module's stop stops its passes and routed controllers when the agent did not, once", async () => {
    const cluster = clusterSettings();
    const container = rootContainer.createChildContainer();
    const host = new ModuleHost(container, agentModules({ ...config, cluster }, new MemoryLogger()));
    host.register();
    await host.start();
    let mode: ClusterMode;
    try {
      const logger = container.resolve<Logger>(ILogger);
      const agent: ClusterAgent = {
        settings: { dataDir, bindAddr: '127.0.0.1', port: 0, tls: false, maxAllocsPerJob: 10, aclToken: () => undefined },
        logger,
        loggerFor: (component) => logger.child({ component }),
        clock: container.resolve<Clock>(IClock),
        registry: container.resolve<PluginRegistry>(IPluginRegistry),
        csiManager: container.resolve<CSIManager>(ICSIManager),
        catalog: container.resolve<VolumeCatalogService>(IVolumeCatalog),
        closed: false,
        emit: () => undefined,
        node: () => {
          throw new Error('not asked before cluster mode starts');
        },
        localJob: () => undefined,
        localJobIds: () => [],
        localJobView: () => undefined,
        runLocal: () => Promise.reject(new Error('no job runs here')),
        stopLocal: () => Promise.reject(new Error('no job runs here')),
        resumeRollouts: () => undefined,
        allocStopping: () => false,
      };
      bind(container, IClusterAgent, { useValue: agent });
      mode = container.resolve<ClusterMode>(IClusterMode);
      expect(container.resolve(IClusterMode)).toBe(mode);
      expect(mode.membership).toBe(container.resolve<ClusterNode>(IClusterNode).membership);
    } finally {
      const passes = jest.spyOn(mode!.jobs, 'dispose');
      const controllers = jest.spyOn(mode!.controllers, 'dispose');
      await host.stop();
      expect(passes).toHaveBeenCalledTimes(1);
      expect(controllers).toHaveBeenCalledTimes(1);
      // Stopped already: the agent's own calls (or a second stop) do nothing more.
      await mode!.stopPasses();
      await mode!.stopControllers();
      expect(passes).toHaveBeenCalledTimes(1);
      expect(controllers).toHaveBeenCalledTimes(1);
    }
  });

  it('opens the state only on start, relays the services’ events while started, and releases it all on stop', async () => {
    const container = rootContainer.createChildContainer();
    const host = new ModuleHost(container, agentModules({ ...config, heartbeat: { strategy: 'fixed', settings: {} } }, new MemoryLogger()));
    host.register();
    expect(fs.existsSync(path.join(dataDir, 'state.db'))).toBe(false);

    await host.start();
    expect(fs.existsSync(path.join(dataDir, 'state.db'))).toBe(true);
    const events: AgentEvent[] = [];
    container.resolve<AgentEvents>(IAgentEvents).onEvent((e) => events.push(e));
    const catalog = container.resolve<VolumeCatalogService>(IVolumeCatalog);
    await catalog.registerVolume(spec);
    expect(events.map((e) => `${e.topic}: ${e.type}`)).toEqual(['Volume: Volume registered']);

    const registry = container.resolve<PluginRegistry>(IPluginRegistry);
    const state = container.resolve<ClientStateDB>(IClientStateDB);
    await host.stop();
    expect(registry.isDisposed).toBe(true);
    expect(() => state.getVolume('data')).toThrow(expect.objectContaining({ code: 'ErrDatabaseNotOpen' }));
  });

  it("a list without the state module fails its start naming the module to add, not with tsyringe's raw message", async () => {
    const container = rootContainer.createChildContainer();
    const modules = agentModules(config, new MemoryLogger()).filter((m) => m.name !== 'state');
    const host = new ModuleHost(container, modules);
    host.register();
    const err = await host.start().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ModuleStartError);
    expect((err as ModuleStartError).module).toBe('registry');
    expect((err as ModuleStartError).cause).toBeInstanceOf(MissingBindingError);
    expect((err as Error).message).toBe(
      'module "registry" failed to start: IRegistryStateStore is bound by the state module: add stateModule (from @csiplug/state) before registryModule in the module list',
    );
    expect((err as Error).message).not.toMatch(/unregistered dependency token/);
  });
});
