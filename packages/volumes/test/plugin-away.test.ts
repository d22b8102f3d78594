// Integration: the node plugin goes away under live mounts and mounts under
// way — the real hostpath plugin process killed with SIGKILL and started
// again on its socket, real bind mounts, a real DefaultCSIManager noticing
// the crash and the return on its own fingerprint rounds, and the records in
// a real SQLite client state; claims go to a FakeClaimer.
//
//   - plugin away → the volume's backing directory replaced → plugin back:
//     the hostpath plugin's NodeGetVolumeStats reports the mounts abnormal
//     (they still show the old directory); the mounts answer every check of
//     csiplug's own, so that is reported and nothing is unmounted, under
//     `remount` and `keep` alike (a plugin's condition alone never takes a
//     live mount down);
//   - a plugin killed during NodePublishVolume and back within the prerun
//     limit: the mount waits for it and publishes;
//   - one that stays away past the limit (the fault the issue names: "the
//     staging mount behind forever, with the claim already released"): the
//     mount fails, the staging mount stays until the plugin is back, is then
//     unstaged, and the claim is released only after that.
import { promises as fs, mkdtempSync, readdirSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ProcMountTable, type UsageOptions } from '@csiplug/csimanager';
import { VolumeMountError, type VolumeMountRequest } from '../src';
import { FakeClaimer } from '../src/testing';
import { createVolume, eventually, registerMonolith, startAgent, type TestAgent } from './support/agent';
import { type HostpathProcess, mountsUnder, startHostpath, unmountAllUnder } from './support/hostpath';
import { requireRoot } from '@csiplug/core/testing';

requireRoot();

jest.setTimeout(60_000);

describe('the node plugin away under live mounts and mounts under way (real plugin process, real mounts)', () => {
  let tmp: string;
  let dataDir: string;
  let stateDir: string;
  let socketPath: string;
  let plugin: HostpathProcess | undefined;
  let agent: TestAgent | undefined;
  let claimer: FakeClaimer;
  const mt = new ProcMountTable();
  const usage: UsageOptions = { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' };

  beforeEach(() => {
    tmp = mkdtempSync(path.join(os.tmpdir(), 'csiplug-plugin-away-'));
    dataDir = path.join(tmp, 'data');
    stateDir = path.join(tmp, 'hostpath-state');
    socketPath = path.join(dataDir, 'plugins', 'plugin-alloc', 'csi.sock');
    claimer = new FakeClaimer();
    claimer.publishContext = undefined;
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

  const request = (allocId: string, volumeId: string, over: Partial<VolumeMountRequest> = {}): VolumeMountRequest => ({
    allocId,
    name: 'data',
    volumeId,
    usage,
    ...over,
  });

  /** The plugin up, an agent whose instances fingerprint every 100 ms (so a crash and a return are seen on their own), one volume. */
  async function setUp(options: { args?: string[]; prerunMs?: number } = {}): Promise<{ a: TestAgent; externalId: string }> {
    plugin = await startHostpath({ socketPath, stateDir, args: options.args });
    agent = await startAgent(dataDir, claimer, {
      fingerprintInterval: 100,
      timeouts: options.prerunMs ? { pluginWaitPrerun: options.prerunMs } : {},
    });
    registerMonolith(agent.registry, dataDir, 'plugin-alloc', socketPath);
    await agent.manager.waitForPlugin('csi-node', 'hostpath', 'prerun');
    return { a: agent, externalId: await createVolume(agent, claimer, socketPath, 'vol') };
  }

  /** kill -9 of the plugin, seen by the CSI manager (its instance unhealthy). */
  async function crashPlugin(a: TestAgent): Promise<void> {
    await plugin!.crash();
    await eventually('the CSI manager to see the plugin crashed', () => a.manager.pluginInfo('csi-node', 'hostpath')?.healthy === false);
  }

  /** The volume's backing directory replaced (the old one kept aside, still under the mounts), with a marker file in the new one. */
  async function replaceBackingDir(externalId: string): Promise<void> {
    const dir = path.join(stateDir, 'volumes', externalId);
    await fs.rename(dir, `${dir}.old`);
    await fs.mkdir(dir, { mode: 0o777 });
    await fs.writeFile(path.join(dir, 'new.txt'), 'the new backing directory');
  }

  const kinds = (a: TestAgent) => a.checks.map((e) => e.kind);

  it.each(['remount', 'keep'] as const)(
    'plugin away, backing directory replaced, plugin back: the plugin calls the mount abnormal; under "%s" that is reported, and the live mount is left as it is',
    async (policy) => {
      const { a, externalId } = await setUp();
      const info = await a.reconciler.mount(request('alloc-a', 'vol', { onStaleMount: policy }), { phase: 'prerun' });
      await fs.writeFile(path.join(info.targetPath, 'old.txt'), 'written before the plugin went away');
      // Healthy to start with: the plugin's condition says the target shows its backing directory.
      const vm = a.manager.volumeManager('hostpath');
      expect(await vm.volumeCondition({ id: 'vol', externalId, pluginId: 'hostpath' }, 'alloc-a', usage, 'target')).toMatchObject({
        abnormal: false,
        reported: true,
      });

      await crashPlugin(a);
      await replaceBackingDir(externalId);
      plugin = await startHostpath({ socketPath, stateDir });

      await eventually('the abnormal condition to be reported', () => kinds(a).includes('abnormal'));
      expect(kinds(a)).toEqual(['plugin-back', 'abnormal']);
      expect(a.checks[1]!.message).toMatch(
        /answers, but plugin hostpath reports the volume abnormal at .*: .* no longer shows the backing directory.*; kept as it is/,
      );
      expect(a.reconciler.mountChecks('alloc-a')[0]!.state).toBe('abnormal');
      // Nothing was taken down: the workload's path still shows what it showed.
      expect(readdirSync(info.targetPath)).toEqual(['old.txt']);
      expect(await Promise.all([mt.isMountPoint(info.targetPath), mt.isMountPoint(info.stagingPath!)])).toEqual([true, true]);
      expect(a.reconciler.list('alloc-a')[0]).toMatchObject({
        desired: 'mounted',
        claimed: true,
        staged: true,
        published: true,
        targetPath: info.targetPath,
        stagingPath: info.stagingPath,
      });
      expect(a.reconciler.list('alloc-a')[0]!.remounting).toBeUndefined();
      expect(a.logger.find('a live volume mount is stale', 'warn')).toHaveLength(0);

      await a.reconciler.unmount('alloc-a');
      expect(mountsUnder(tmp)).toEqual([]);
      expect(claimer.releases).toEqual(['vol alloc-a']);
    },
  );

  it('a plugin killed during NodePublishVolume and back within the prerun limit: the mount waits for it and publishes', async () => {
    const { a } = await setUp({ args: ['--hang-rpc', 'NodePublishVolume'] });
    const mounting = a.reconciler.mount(request('alloc-a', 'vol'), { phase: 'prerun' });
    await eventually('the publish to be under way', () => a.reconciler.list('alloc-a')[0]?.published === true);
    await crashPlugin(a);
    plugin = await startHostpath({ socketPath, stateDir });
    const info = await mounting;
    expect(await Promise.all([mt.isMountPoint(info.targetPath), mt.isMountPoint(info.stagingPath!)])).toEqual([true, true]);
    expect(claimer.claims).toHaveLength(1);
    expect(
      a.logger.find('the node plugin went away during the mount; waiting for it to be healthy, then asking again', 'warn').length,
    ).toBeGreaterThan(0);
    await a.reconciler.unmount('alloc-a');
    expect(mountsUnder(tmp)).toEqual([]);
  });

  it('a plugin killed during NodePublishVolume and away past the prerun limit: the mount fails, the staging mount stays until the plugin is back and is then unstaged, and only then is the claim released', async () => {
    const { a } = await setUp({ args: ['--hang-rpc', 'NodePublishVolume'], prerunMs: 2_000 });
    const staging = path.join(dataDir, 'csi', 'monolith', 'hostpath', 'staging', 'vol', 'rw-file-system-single-node-writer');
    const stagedAtRelease: boolean[] = [];
    const release = claimer.release.bind(claimer);
    claimer.release = async (volumeId, allocId) => {
      stagedAtRelease.push(await mt.isMountPoint(staging));
      return release(volumeId, allocId);
    };

    const mounting = a.reconciler.mount(request('alloc-a', 'vol'), { phase: 'prerun' }).catch((e: unknown) => e);
    await eventually('the publish to be under way', () => a.reconciler.list('alloc-a')[0]?.published === true);
    expect(await mt.isMountPoint(staging)).toBe(true);
    await crashPlugin(a);
    const err = await mounting;
    expect(err).toBeInstanceOf(VolumeMountError);

    // The failed mount is to be undone, and waits for the plugin: its staging mount and its claim are still held.
    expect(a.reconciler.pendingUnmounts()).toEqual([
      expect.objectContaining({ allocId: 'alloc-a', desired: 'unmounted', claimed: true, staged: true }),
    ]);
    expect(await mt.isMountPoint(staging)).toBe(true);
    expect(claimer.releases).toEqual([]);

    plugin = await startHostpath({ socketPath, stateDir });
    await eventually('the undo to finish', () => a.reconciler.pendingUnmounts().length === 0);
    expect(await mt.isMountPoint(staging)).toBe(false);
    expect(mountsUnder(tmp)).toEqual([]);
    expect(claimer.releases).toEqual(['vol alloc-a']);
    expect(stagedAtRelease).toEqual([false]);
    expect(a.db.listVolumeMounts()).toEqual({ records: [], failures: [] });
  });
});
