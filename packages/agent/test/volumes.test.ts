// Integration: the volume catalog with the real hostpath plugin process, the
// real plugin registry and CSI manager, over a real SQLite state file.
// create → the plugin makes the volume's directory; claim → mount through the
// CSI manager → write → unmount → release (the claim survives the agent
// being rebuilt over the same state file in between); delete → the
// directory is gone. Every process, mount and temp dir is cleaned up.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, promises as fs, readFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { MemoryLogger, bind, mountPointsUnder, readMountInfoSync, registerCore } from '@csiplug/core';
import { registerCsi } from '@csiplug/csi';
import {
  type CSIManager,
  ICSIManager,
  PLUGIN_OPTION_PLUGIN_TYPE,
  PLUGIN_OPTION_STAGE_PUBLISH_BASE,
  type UsageOptions,
  registerCsiManager,
} from '@csiplug/csimanager';
import { IPluginRegistry, type PluginRegistry, registerRegistry } from '@csiplug/registry';
import { type ClientStateDB, IClientStateDB, openClientState, bindStateStores } from '@csiplug/state';
import { type DependencyContainer, container as root } from 'tsyringe';
import {
  ClaimError,
  IVolumeCatalog,
  IVolumeClaimer,
  IVolumeSpecValidator,
  type VolumeClaimer,
  VolumeInUseError,
  registerVolumeCatalog,
  type VolumeCatalogEvent,
  type VolumeSpec,
} from '@csiplug/volumes';
import { checkVolumeSpec } from '@csiplug/jobspec';
import { requireRoot } from '@csiplug/core/testing';

const HOSTPATH_CLI = path.resolve(__dirname, '../../hostpath-plugin/dist/cli.js');
requireRoot();

interface Plugin {
  child: ChildProcess;
  stop(): Promise<void>;
}

async function startHostpath(socketPath: string, stateDir: string): Promise<Plugin> {
  await fs.mkdir(path.dirname(socketPath), { recursive: true, mode: 0o700 });
  const child = spawn(
    process.execPath,
    [
      HOSTPATH_CLI,
      '--endpoint',
      `unix://${socketPath}`,
      '--node-id',
      'n1',
      '--state-dir',
      stateDir,
      '--mode',
      'monolith',
      '--log-level',
      'warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(t);
    }
  };
  // A real process: wait for its socket file, briefly.
  const deadline = Date.now() + 15_000;
  while (!existsSync(socketPath)) {
    if (child.exitCode !== null) throw new Error(`hostpath plugin exited (${child.exitCode}): ${stderr}`);
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`hostpath plugin did not create ${socketPath} within 15 s: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return { child, stop };
}

function mountsUnder(dir: string): string[] {
  return mountPointsUnder(readMountInfoSync(), dir).sort((a, b) => b.length - a.length);
}

function unmountAllUnder(dir: string): void {
  for (const m of mountsUnder(dir)) {
    try {
      execFileSync('umount', ['-l', m], { stdio: 'ignore' });
    } catch {
      // reported by the test's own check
    }
  }
}

interface Agent {
  c: DependencyContainer;
  db: ClientStateDB;
  registry: PluginRegistry;
  manager: CSIManager;
  catalog: IVolumeCatalog;
  events: VolumeCatalogEvent[];
  stop(): Promise<void>;
}

async function startAgent(dataDir: string): Promise<Agent> {
  const c = root.createChildContainer();
  registerCore(c, {
    logger: new MemoryLogger(),
    heartbeat: { strategy: 'fixed' },
    timeouts: { pluginWaitPrerun: 20_000, pluginWaitRestore: 20_000 },
  });
  const db = openClientState({ path: path.join(dataDir, 'state.db') });
  c.register(IClientStateDB, { useValue: db });
  bindStateStores(c); // the narrow store tokens, over the state bound above
  registerCsi(c);
  registerRegistry(c);
  registerCsiManager(c, { dataDir });
  bind(c, IVolumeSpecValidator, { useValue: checkVolumeSpec });
  registerVolumeCatalog(c);
  const registry = c.resolve<PluginRegistry>(IPluginRegistry);
  const manager = c.resolve<CSIManager>(ICSIManager);
  const catalog = c.resolve<IVolumeCatalog>(IVolumeCatalog);
  const events: VolumeCatalogEvent[] = [];
  catalog.onDidChange((e) => events.push(e));
  await manager.start();
  return {
    c,
    db,
    registry,
    manager,
    catalog,
    events,
    async stop() {
      await manager.dispose();
      registry.dispose();
      db.dispose();
    },
  };
}

describe('volume catalog with the hostpath plugin', () => {
  let tmp: string;
  let dataDir: string;
  let stateDir: string;
  let plugin: Plugin | undefined;
  let agent: Agent | undefined;

  beforeEach(() => {
    tmp = mkdtempSync(path.join(os.tmpdir(), 'csiplug-volumes-it-'));
    dataDir = path.join(tmp, 'data');
    stateDir = path.join(tmp, 'hostpath-state');
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

  function registerMonolith(registry: PluginRegistry, socketPath: string): void {
    const options = {
      [PLUGIN_OPTION_PLUGIN_TYPE]: 'monolith',
      [PLUGIN_OPTION_STAGE_PUBLISH_BASE]: path.join(dataDir, 'csi', 'monolith', 'hostpath'),
    };
    for (const type of ['csi-controller', 'csi-node'])
      registry.register({ type, name: 'hostpath', version: '0.1.0', allocId: 'plugin-alloc', socketPath, options });
  }

  const spec: VolumeSpec = {
    id: 'data',
    name: 'data',
    type: 'csi',
    pluginId: 'hostpath',
    capabilities: [{ accessMode: 'single-node-writer', attachmentMode: 'file-system' }],
    capacityMin: 1024 * 1024,
    parameters: {},
    secrets: {},
    context: {},
  };
  const usage: UsageOptions = { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' };

  it('creates, claims, mounts, survives an agent restart, releases and deletes a volume', async () => {
    const socketPath = path.join(dataDir, 'plugins', 'plugin-alloc', 'csi.sock');
    plugin = await startHostpath(socketPath, stateDir);
    agent = await startAgent(dataDir);
    registerMonolith(agent.registry, socketPath);
    // The catalog waits for the controller itself.
    const view = await agent.catalog.createVolume(spec);
    expect(view).toMatchObject({
      id: 'data',
      pluginId: 'hostpath',
      capacityBytes: 1024 * 1024,
      context: { name: 'csiplug-data' },
      schedulable: true,
      claims: [],
    });
    const volumeDir = path.join(stateDir, 'volumes', view.externalId);
    expect((await fs.stat(volumeDir)).isDirectory()).toBe(true);
    expect(agent.c.resolve<VolumeClaimer>(IVolumeClaimer)).toBe(agent.catalog);

    // Claim as the volume reconciler does, and mount through the CSI manager's node steps.
    const volume = await agent.catalog.lookup('data');
    const claimed = await agent.catalog.claim({
      volumeId: 'data',
      allocId: 'alloc-a',
      readOnly: false,
      accessMode: 'single-node-writer',
      attachmentMode: 'file-system',
    });
    expect(claimed).toEqual({ volume }); // hostpath has no ControllerPublishVolume
    const vm = agent.manager.volumeManager('hostpath');
    expect(await vm.requiresStaging()).toBe(true);
    await vm.stageVolume(claimed.volume, usage, claimed.publishContext ?? {});
    const mounted = await vm.publishVolume(claimed.volume, 'alloc-a', usage, claimed.publishContext ?? {});
    await fs.writeFile(path.join(mounted.targetPath, 'hello.txt'), 'from alloc-a');
    expect(readFileSync(path.join(volumeDir, 'hello.txt'), 'utf8')).toBe('from alloc-a');

    const second = await agent.catalog
      .claim({ volumeId: 'data', allocId: 'alloc-b', readOnly: false, accessMode: 'single-node-writer', attachmentMode: 'file-system' })
      .catch((e: unknown) => e);
    expect(second).toBeInstanceOf(ClaimError);
    expect((second as ClaimError).retryable).toBe(true);
    await expect(agent.catalog.deleteVolume('data')).rejects.toBeInstanceOf(VolumeInUseError);

    // Agent restart over the same state file: the claim is still there.
    await agent.stop();
    agent = await startAgent(dataDir);
    expect(agent.catalog.getVolume('data')?.claims.map((c) => `${c.allocId}:${c.mode}`)).toEqual(['alloc-a:write']);
    await agent.manager.waitForPlugin('csi-node', 'hostpath', 'restore');
    expect(agent.catalog.getVolume('data')?.schedulable).toBe(true);

    await agent.manager.volumeManager('hostpath').unpublishVolume(volume, 'alloc-a', usage);
    await agent.manager.volumeManager('hostpath').unstageVolume(volume, usage);
    await agent.catalog.release('data', 'alloc-a');
    expect(agent.catalog.getVolume('data')?.claims).toEqual([]);

    await agent.catalog.deleteVolume('data');
    expect(existsSync(volumeDir)).toBe(false);
    expect(agent.catalog.getVolume('data')).toBeUndefined();
    expect(agent.db.listVolumes()).toEqual([]);
    expect(agent.events.map((e) => e.kind)).toEqual(['released', 'deleted']);
  });

  it('registers an existing volume before its plugin runs; deregister leaves the plugin alone', async () => {
    const socketPath = path.join(dataDir, 'plugins', 'plugin-alloc', 'csi.sock');
    plugin = await startHostpath(socketPath, stateDir);
    agent = await startAgent(dataDir);
    registerMonolith(agent.registry, socketPath);
    const made = await agent.catalog.createVolume({ ...spec, id: 'made' });
    await agent.catalog.deregisterVolume('made');
    const volumeDir = path.join(stateDir, 'volumes', made.externalId);
    expect(existsSync(volumeDir)).toBe(true);
    await agent.stop();

    // Another agent (its own state, no plugin registered yet) takes the volume over.
    agent = await startAgent(path.join(tmp, 'data2'));
    const registered = await agent.catalog.registerVolume({ ...spec, id: 'again', externalId: made.externalId });
    expect(registered.schedulable).toBe(false);
    registerMonolith(agent.registry, socketPath);
    await agent.manager.waitForPlugin('csi-node', 'hostpath', 'prerun');
    expect(agent.catalog.getVolume('again')?.schedulable).toBe(true);
    await agent.catalog.deleteVolume('again');
    expect(existsSync(volumeDir)).toBe(false);
    expect(agent.events.map((e) => e.kind)).toEqual(['registered', 'deleted']);
  });
});
