// The agent's module list, run by a ModuleHost the way Agent.start runs it:
// the order is the restart-survival order, registration opens nothing, start
// opens the state and has the agent relay the services' events, and stop
// (in reverse) disposes what the modules made.
import { MemoryLogger, MissingBindingError, ModuleHost, ModuleStartError } from '@csiplug/core';
import { IPluginRegistry, type PluginRegistry } from '@csiplug/registry';
import { IClientStateDB, type ClientStateDB } from '@csiplug/state';
import { IVolumeCatalog, type VolumeCatalogService } from '@csiplug/volumes';
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

describe('agentModules', () => {
  let dataDir: string;
  let config: AgentConfig;
  beforeEach(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-modules-'));
    config = { ...devConfig(), dataDir, state: { backend: 'sqlite' } };
  });
  afterEach(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  it('lists the modules lowest layer first, the agent below the CSI manager it listens to', () => {
    expect(agentModules(config, new MemoryLogger()).map((m) => m.name)).toEqual(['core', 'state', 'csi', 'driver', 'registry', 'agent', 'csimanager', 'volumes', 'hooks']);
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

  it('a list without the state module fails its start naming the module to add, not with tsyringe\'s raw message', async () => {
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
    expect((err as Error).message).toBe('module "registry" failed to start: IRegistryStateStore is bound by the state module: add stateModule (from @csiplug/state) before registryModule in the module list');
    expect((err as Error).message).not.toMatch(/unregistered dependency token/);
  });
});
