// Integration: the volume reconciler with the real hostpath plugin process
// (gRPC over a real unix socket), real bind mounts, a real DefaultCSIManager
// and its records in a real SQLite client state (StateMountStore, bucket
// csi/mounts); claims go to a FakeClaimer. Two allocs share a staged volume;
// the agent (registry, CSI manager and reconciler) is torn down and rebuilt
// over the same state file; the first unmount leaves the staging mount, the
// last removes it; nothing is left. And the plugin task may restart on a new
// socket between mount and unmount. (Moved from @csiplug/csimanager when the
// staging-user count moved from its volume manager to the reconciler.)
import { promises as fs, mkdtempSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ProcMountTable, type UsageOptions } from '@csiplug/csimanager';
import type { VolumeMountRequest } from '../src';
import { FakeClaimer } from '../src/testing';
import { createVolume as createOn, registerMonolith as register, startAgent, type TestAgent as Agent } from './support/agent';
import { type HostpathProcess, mountsUnder, startHostpath, unmountAllUnder } from './support/hostpath';
import { requireRoot } from '@csiplug/core/testing';

requireRoot();

describe('volume reconciler with the hostpath plugin (real mounts, real state file)', () => {
  let tmp: string;
  let dataDir: string;
  let plugin: HostpathProcess | undefined;
  let agent: Agent | undefined;
  let claimer: FakeClaimer;

  beforeEach(() => {
    tmp = mkdtempSync(path.join(os.tmpdir(), 'csiplug-volumes-it-'));
    dataDir = path.join(tmp, 'data');
    claimer = new FakeClaimer();
    claimer.publishContext = undefined; // no controller publish here: the claim hands stage and publish nothing
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
  const request = (allocId: string, volumeId: string): VolumeMountRequest => ({ allocId, name: 'data', volumeId, usage });

  const registerMonolith = (registry: Agent['registry'], allocId: string, socketPath: string) =>
    register(registry, dataDir, allocId, socketPath);
  const createVolume = (a: Agent, socketPath: string, id: string) => createOn(a, claimer, socketPath, id);

  it('two allocs share a staged volume; after an agent restart only the last unmount unstages', async () => {
    const socketPath = path.join(dataDir, 'plugins', 'plugin-alloc', 'csi.sock');
    plugin = await startHostpath({ socketPath, stateDir: path.join(tmp, 'hostpath-state') });
    agent = await startAgent(dataDir, claimer);
    registerMonolith(agent.registry, 'plugin-alloc', socketPath);
    const info = await agent.manager.waitForPlugin('csi-node', 'hostpath', 'prerun');
    expect(info).toMatchObject({
      healthy: true,
      deployment: 'monolith',
      node: { nodeId: 'node-it', requiresStaging: true, maxVolumes: Infinity },
    });
    expect((await agent.manager.waitForPlugin('csi-controller', 'hostpath', 'prerun')).controller?.supportsCreateDelete).toBe(true);

    const externalId = await createVolume(agent, socketPath, 'shared');
    const [a, b] = await Promise.all([
      agent.reconciler.mount(request('alloc-a', 'shared'), { phase: 'prerun' }),
      agent.reconciler.mount(request('alloc-b', 'shared'), { phase: 'prerun' }),
    ]);
    expect(a.stagingPath).toBe(path.join(dataDir, 'csi', 'monolith', 'hostpath', 'staging', 'shared', 'rw-file-system-single-node-writer'));
    expect(b.stagingPath).toBe(a.stagingPath);
    expect(a.targetPath).toBe(
      path.join(dataDir, 'csi', 'monolith', 'hostpath', 'per-alloc', 'alloc-a', 'shared', 'rw-file-system-single-node-writer'),
    );
    expect([a.restored, b.restored]).toEqual([false, false]);
    const mt = new ProcMountTable();
    expect(await Promise.all([mt.isMountPoint(a.stagingPath!), mt.isMountPoint(a.targetPath), mt.isMountPoint(b.targetPath)])).toEqual([
      true,
      true,
      true,
    ]);
    expect((await fs.stat(path.join(dataDir, 'csi', 'monolith', 'hostpath', 'per-alloc', 'alloc-a'))).mode & 0o777).toBe(0o700);
    // One volume behind both targets.
    await fs.writeFile(path.join(a.targetPath, 'hello.txt'), 'from alloc-a');
    expect(await fs.readFile(path.join(b.targetPath, 'hello.txt'), 'utf8')).toBe('from alloc-a');
    expect(claimer.claims.map((c) => c.allocId).sort()).toEqual(['alloc-a', 'alloc-b']);

    // Agent restart: the plugin keeps running, the state file stays.
    await agent.stop();
    agent = await startAgent(dataDir, claimer);
    expect(agent.registry.get('csi-node', 'hostpath')?.restored).toBe(true);
    const restored = await agent.manager.waitForPlugin('csi-node', 'hostpath', 'restore');
    expect(restored.healthy).toBe(true);
    expect(agent.registry.get('csi-node', 'hostpath')?.restored).toBe(false);

    // Both allocs' records came back from the state file: each counts as a user of the staging mount.
    expect(
      agent.reconciler
        .list()
        .map((r) => ({
          allocId: r.allocId,
          volumeId: r.volumeId,
          externalId: r.externalId,
          desired: r.desired,
          claimed: r.claimed,
          staged: r.staged,
          published: r.published,
          stagingPath: r.stagingPath,
        }))
        .sort((x, y) => (x.allocId < y.allocId ? -1 : 1)),
    ).toEqual(
      ['alloc-a', 'alloc-b'].map((allocId) => ({
        allocId,
        volumeId: 'shared',
        externalId,
        desired: 'mounted',
        claimed: true,
        staged: true,
        published: true,
        stagingPath: a.stagingPath,
      })),
    );
    // The allocs' restore finds their mounts live: no claim, no stage, no publish.
    const [a2, b2] = await Promise.all([
      agent.reconciler.mount(request('alloc-a', 'shared'), { phase: 'restore' }),
      agent.reconciler.mount(request('alloc-b', 'shared'), { phase: 'restore' }),
    ]);
    expect([a2, b2]).toEqual([
      { ...a, restored: true, pluginAway: false },
      { ...b, restored: true, pluginAway: false },
    ]);
    expect(claimer.claims).toHaveLength(2);
    expect(await agent.manager.volumeManager('hostpath').hasMount(a.targetPath)).toBe(true);

    const outA = await agent.reconciler.unmount('alloc-a');
    expect(outA).toEqual([{ name: 'data', volumeId: 'shared', pluginId: 'hostpath' }]);
    expect(await Promise.all([mt.isMountPoint(a.stagingPath!), mt.isMountPoint(a.targetPath), mt.isMountPoint(b.targetPath)])).toEqual([
      true,
      false,
      true,
    ]);
    expect(await fs.readFile(path.join(b.targetPath, 'hello.txt'), 'utf8')).toBe('from alloc-a');
    expect(claimer.releases).toEqual(['shared alloc-a']);

    await agent.reconciler.unmount('alloc-b');
    expect(await Promise.all([mt.isMountPoint(a.stagingPath!), mt.isMountPoint(b.targetPath)])).toEqual([false, false]);
    expect(mountsUnder(tmp)).toEqual([]);
    expect(claimer.releases).toEqual(['shared alloc-a', 'shared alloc-b']);
    // Every record is done and gone, from memory and from the state file.
    expect(agent.reconciler.list()).toEqual([]);
    expect(agent.db.listVolumeMounts()).toEqual({ records: [], failures: [] });
    expect(agent.events.map((e) => `${e.message}:${e.details.alloc_id}:${e.details.success}`)).toEqual([
      'Unmount volume:alloc-a:true',
      'Unmount volume:alloc-b:true',
    ]);
  });

  it('survives the plugin task restarting on a new socket between mount and unmount', async () => {
    const stateDir = path.join(tmp, 'hostpath-state');
    const sock1 = path.join(dataDir, 'plugins', 'plugin-1', 'csi.sock');
    plugin = await startHostpath({ socketPath: sock1, stateDir });
    agent = await startAgent(dataDir, claimer);
    registerMonolith(agent.registry, 'plugin-1', sock1);
    await agent.manager.waitForPlugin('csi-node', 'hostpath', 'prerun');
    await createVolume(agent, sock1, 'vol');
    await agent.reconciler.mount(request('alloc-a', 'vol'), { phase: 'prerun' });
    const b = await agent.reconciler.mount(request('alloc-b', 'vol'), { phase: 'prerun' });

    // The plugin task is replaced by a new alloc with a new socket.
    await plugin.stop();
    const sock2 = path.join(dataDir, 'plugins', 'plugin-2', 'csi.sock');
    plugin = await startHostpath({ socketPath: sock2, stateDir });
    registerMonolith(agent.registry, 'plugin-2', sock2);
    for (const type of ['csi-controller', 'csi-node']) agent.registry.deregister(type, 'hostpath', 'plugin-1');
    const info = await agent.manager.waitForPlugin('csi-node', 'hostpath', 'postrun');
    expect(info.allocId).toBe('plugin-2');

    expect(await agent.reconciler.unmount('alloc-a')).toEqual([{ name: 'data', volumeId: 'vol', pluginId: 'hostpath' }]);
    expect(await agent.manager.volumeManager('hostpath').hasMount(b.stagingPath!)).toBe(true);
    expect(await agent.manager.volumeManager('hostpath').hasMount(b.targetPath)).toBe(true);
    expect(await agent.reconciler.unmount('alloc-b')).toEqual([{ name: 'data', volumeId: 'vol', pluginId: 'hostpath' }]);
    expect(mountsUnder(tmp)).toEqual([]);
    expect(agent.reconciler.pendingUnmounts()).toEqual([]);
    expect(claimer.releases).toEqual(['vol alloc-a', 'vol alloc-b']);
  });
});
