// Integration: the real hostpath plugin process, a real SQLite state file and
// real bind mounts. Two allocs share a staged volume; the agent (registry +
// CSI manager) is torn down and rebuilt over the same state file; the first
// unmount leaves the staging mount, the second removes it; nothing is left.
import { promises as fs, mkdtempSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { DependencyContainer, container as root } from 'tsyringe';
import { MemoryLogger, registerCore } from '@csiplug/core';
import { CSIClientFactory, ICSIClientFactory, mountCapability, registerCsi } from '@csiplug/csi';
import { IPluginRegistry, PluginRegistry, registerRegistry } from '@csiplug/registry';
import { ClientStateDB, IClientStateDB, openClientState } from '@csiplug/state';
import {
  CSIManager,
  ICSIManager,
  NodeEvent,
  PLUGIN_OPTION_PLUGIN_TYPE,
  PLUGIN_OPTION_STAGE_PUBLISH_BASE,
  ProcMountTable,
  UsageOptions,
  registerCsiManager,
} from '../src';
import { HostpathProcess, mountsUnder, startHostpath, unmountAllUnder } from './hostpath';

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
const describeIfRoot = isRoot ? describe : describe.skip;

interface Agent {
  c: DependencyContainer;
  db: ClientStateDB;
  registry: PluginRegistry;
  manager: CSIManager;
  events: NodeEvent[];
  stop(): Promise<void>;
}

async function startAgent(dataDir: string): Promise<Agent> {
  const c = root.createChildContainer();
  registerCore(c, { logger: new MemoryLogger(), heartbeat: { strategy: 'fixed' }, timeouts: { pluginWaitPrerun: 20_000, pluginWaitRestore: 20_000 } });
  const db = openClientState({ path: path.join(dataDir, 'state.db') });
  c.register(IClientStateDB, { useValue: db });
  registerCsi(c);
  registerRegistry(c);
  registerCsiManager(c, { dataDir });
  const registry = c.resolve<PluginRegistry>(IPluginRegistry);
  const manager = c.resolve<CSIManager>(ICSIManager);
  const events: NodeEvent[] = [];
  manager.onNodeEvent((e) => events.push(e));
  await manager.start();
  return {
    c,
    db,
    registry,
    manager,
    events,
    async stop() {
      await manager.shutdown();
      registry.shutdown();
      db.close();
    },
  };
}

describeIfRoot('CSI manager with the hostpath plugin (real mounts)', () => {
  let tmp: string;
  let dataDir: string;
  let plugin: HostpathProcess | undefined;
  let agent: Agent | undefined;

  beforeEach(() => {
    tmp = mkdtempSync(path.join(os.tmpdir(), 'csiplug-csimanager-it-'));
    dataDir = path.join(tmp, 'data');
  });

  afterEach(async () => {
    await agent?.stop().catch(() => undefined);
    agent = undefined;
    unmountAllUnder(tmp);
    await plugin?.stop();
    plugin = undefined;
    const left = mountsUnder(tmp);
    await fs.rm(tmp, { recursive: true, force: true });
    expect(left).toEqual([]);
  });

  const usage: UsageOptions = { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' };

  function registerMonolith(registry: PluginRegistry, allocId: string, socketPath: string): void {
    const options = { [PLUGIN_OPTION_PLUGIN_TYPE]: 'monolith', [PLUGIN_OPTION_STAGE_PUBLISH_BASE]: path.join(dataDir, 'csi', 'monolith', 'hostpath') };
    for (const type of ['csi-controller', 'csi-node']) registry.register({ type, name: 'hostpath', version: '0.1.0', allocId, socketPath, options });
  }

  async function createVolume(factory: CSIClientFactory, socketPath: string, name: string): Promise<string> {
    const client = factory.createClient(socketPath);
    try {
      const res = await client.createVolume({ name, volumeCapabilities: [mountCapability('SINGLE_NODE_WRITER')] });
      return res.volume!.volumeId;
    } finally {
      client.close();
    }
  }

  it('two allocs share a staged volume; after an agent restart only the last unmount unstages', async () => {
    const socketPath = path.join(dataDir, 'plugins', 'plugin-alloc', 'csi.sock');
    plugin = await startHostpath({ socketPath, stateDir: path.join(tmp, 'hostpath-state') });
    agent = await startAgent(dataDir);
    registerMonolith(agent.registry, 'plugin-alloc', socketPath);
    const info = await agent.manager.waitForPlugin('csi-node', 'hostpath', 'prerun');
    expect(info).toMatchObject({ healthy: true, deployment: 'monolith', node: { nodeId: 'node-it', requiresStaging: true, maxVolumes: Infinity } });
    expect((await agent.manager.waitForPlugin('csi-controller', 'hostpath', 'prerun')).controller?.supportsCreateDelete).toBe(true);

    const externalId = await createVolume(agent.c.resolve<CSIClientFactory>(ICSIClientFactory), socketPath, 'shared');
    const volume = { id: 'shared', externalId, pluginId: 'hostpath' };
    const vm = agent.manager.volumeManager('hostpath');
    const [a, b] = await Promise.all([vm.mountVolume(volume, { id: 'alloc-a' }, usage), vm.mountVolume(volume, { id: 'alloc-b' }, usage)]);
    expect(a.stagingPath).toBe(path.join(dataDir, 'csi', 'monolith', 'hostpath', 'staging', 'shared', 'rw-file-system-single-node-writer'));
    expect(b.stagingPath).toBe(a.stagingPath);
    const mt = new ProcMountTable();
    expect(await Promise.all([mt.isMountPoint(a.stagingPath!), mt.isMountPoint(a.targetPath), mt.isMountPoint(b.targetPath)])).toEqual([true, true, true]);
    expect((await fs.stat(path.join(dataDir, 'csi', 'monolith', 'hostpath', 'per-alloc', 'alloc-a'))).mode & 0o777).toBe(0o700);
    // One volume behind both targets.
    await fs.writeFile(path.join(a.targetPath, 'hello.txt'), 'from alloc-a');
    expect(await fs.readFile(path.join(b.targetPath, 'hello.txt'), 'utf8')).toBe('from alloc-a');

    // Agent restart: the plugin keeps running, the state file stays.
    await agent.stop();
    agent = await startAgent(dataDir);
    expect(agent.registry.get('csi-node', 'hostpath')?.restored).toBe(true);
    const restored = await agent.manager.waitForPlugin('csi-node', 'hostpath', 'restore');
    expect(restored.healthy).toBe(true);
    expect(agent.registry.get('csi-node', 'hostpath')?.restored).toBe(false);

    const vm2 = agent.manager.volumeManager('hostpath');
    expect(vm2.usersOf('shared', usage)).toEqual(['alloc-a', 'alloc-b']);
    expect(await vm2.hasMount(a.targetPath)).toBe(true);
    await vm2.unmountVolume(volume, 'alloc-a', usage);
    expect(await Promise.all([mt.isMountPoint(a.stagingPath!), mt.isMountPoint(a.targetPath), mt.isMountPoint(b.targetPath)])).toEqual([true, false, true]);
    expect(await fs.readFile(path.join(b.targetPath, 'hello.txt'), 'utf8')).toBe('from alloc-a');

    await vm2.unmountVolume(volume, 'alloc-b', usage);
    expect(await Promise.all([mt.isMountPoint(a.stagingPath!), mt.isMountPoint(b.targetPath)])).toEqual([false, false]);
    expect(mountsUnder(tmp)).toEqual([]);
    expect(agent.db.listVolumeUsage()).toEqual([]);
    expect(agent.events.map((e) => `${e.message}:${e.details.alloc_id}:${e.details.success}`)).toEqual(['Unmount volume:alloc-a:true', 'Unmount volume:alloc-b:true']);
  });

  it('survives the plugin task restarting on a new socket between mount and unmount', async () => {
    const stateDir = path.join(tmp, 'hostpath-state');
    const sock1 = path.join(dataDir, 'plugins', 'plugin-1', 'csi.sock');
    plugin = await startHostpath({ socketPath: sock1, stateDir });
    agent = await startAgent(dataDir);
    registerMonolith(agent.registry, 'plugin-1', sock1);
    await agent.manager.waitForPlugin('csi-node', 'hostpath', 'prerun');
    const externalId = await createVolume(agent.c.resolve<CSIClientFactory>(ICSIClientFactory), sock1, 'vol');
    const volume = { id: 'vol', externalId, pluginId: 'hostpath' };
    const vm = agent.manager.volumeManager('hostpath');
    await vm.mountVolume(volume, { id: 'alloc-a' }, usage);
    const b = await vm.mountVolume(volume, { id: 'alloc-b' }, usage);

    // The plugin task is replaced by a new alloc with a new socket.
    await plugin.stop();
    const sock2 = path.join(dataDir, 'plugins', 'plugin-2', 'csi.sock');
    plugin = await startHostpath({ socketPath: sock2, stateDir });
    registerMonolith(agent.registry, 'plugin-2', sock2);
    for (const type of ['csi-controller', 'csi-node']) agent.registry.deregister(type, 'hostpath', 'plugin-1');
    const info = await agent.manager.waitForPlugin('csi-node', 'hostpath', 'postrun');
    expect(info.allocId).toBe('plugin-2');

    await vm.unmountVolume(volume, 'alloc-a', usage);
    expect(await vm.hasMount(b.stagingPath!)).toBe(true);
    await vm.unmountVolume(volume, 'alloc-b', usage);
    expect(mountsUnder(tmp)).toEqual([]);
  });
});
