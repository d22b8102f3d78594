// The volume manager's four CSI node steps (stage, publish, unpublish,
// unstage) over the real CSI manager and plugin registry, with a fake CSI
// client, a fake mount table and a fake clock (test/harness.ts). Who uses a
// staged volume, when the last user unstages, and what a failed mount undoes
// are the volume reconciler's (@csiplug/volumes, volume-reconciler.spec.ts);
// this file checks each step on its own: paths, requests, events, the
// mount-table checks that make every step idempotent, and the per-volume queue.
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { AbortError, ValidationError } from '@csiplug/core';
import { GrpcStatus } from '@csiplug/csi';
import { Harness, plugin } from '../test/harness';
import { csiError, notFound } from '@csiplug/csi/testing';
import { type CSIVolumeRef, PluginInstanceNotFoundError, type UsageOptions, type VolumeManager, VolumeOperationError } from '.';

const usage: UsageOptions = { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' };
const vol: CSIVolumeRef = { id: 'vol-1', externalId: 'remote-1', pluginId: 'my-plugin', context: { a: 'b' }, secrets: { s: 't' } };

describe('volume manager (CSI node steps)', () => {
  let h: Harness;
  let vm: VolumeManager;
  const reg = plugin(0);
  const b = () => h.behaviour(reg);
  const root = () => path.join(h.dataDir, 'csi', 'node', 'my-plugin');
  const stagingOf = (u = 'rw-file-system-single-node-writer') => path.join(root(), 'staging', 'vol-1', u);
  const targetOf = (allocId: string) => path.join(root(), 'per-alloc', allocId, 'vol-1', 'rw-file-system-single-node-writer');
  const calls = (m: string) => b().callsOf(m);
  const events = () => h.nodeEvents.map((e) => `${e.message}:${e.details.alloc_id}:${e.details.success}`);

  beforeEach(async () => {
    h = new Harness();
    h.registry.register(reg);
    await h.manager.start();
    await h.settle();
    vm = h.manager.volumeManager('my-plugin');
  });
  afterEach(async () => {
    await h.dispose();
  });

  it('stages and publishes at the documented paths, with 0700 dirs; publish emits a node event, stage none', async () => {
    expect(await vm.requiresStaging()).toBe(true);
    await vm.stageVolume(vol, usage, { pc: '1' });
    expect(calls('NodeStageVolume')[0]!.request).toMatchObject({
      volumeId: 'remote-1',
      stagingTargetPath: stagingOf(),
      publishContext: { pc: '1' },
      secrets: { s: 't' },
      volumeContext: { a: 'b' },
      volumeCapability: { accessMode: { mode: 'SINGLE_NODE_WRITER' }, mount: { fsType: '', mountFlags: [] } },
    });
    expect(h.nodeEvents).toEqual([]);

    const info = await vm.publishVolume(vol, 'alloc-a', usage, { pc: '1' });
    expect(info).toEqual({ source: targetOf('alloc-a'), targetPath: targetOf('alloc-a'), stagingPath: stagingOf() });
    expect(vm.mountInfoFor('vol-1', 'alloc-a', usage)).toEqual(info);
    expect(calls('NodePublishVolume')[0]!.request).toMatchObject({
      volumeId: 'remote-1',
      stagingTargetPath: stagingOf(),
      targetPath: targetOf('alloc-a'),
      readonly: false,
      publishContext: { pc: '1' },
      secrets: { s: 't' },
      volumeContext: { a: 'b' },
    });
    expect((await fs.stat(stagingOf())).mode & 0o777).toBe(0o700);
    expect((await fs.stat(path.dirname(targetOf('alloc-a')))).mode & 0o777).toBe(0o700);
    expect(await vm.hasMount(targetOf('alloc-a'))).toBe(true);
    expect(await vm.hasMount(stagingOf())).toBe(true);
    expect(h.nodeEvents).toEqual([
      {
        subsystem: 'Storage',
        message: 'Mount volume',
        details: { volume_id: 'vol-1', alloc_id: 'alloc-a', plugin_id: 'my-plugin', success: 'true' },
        time: h.clock.now(),
      },
    ]);
    expect(vm.externalNodeId).toBe('node-1');
  });

  it('unpublishes (tidying the alloc dirs, with a node event) and unstages (tidying the staging dirs)', async () => {
    await vm.stageVolume(vol, usage);
    await vm.publishVolume(vol, 'alloc-a', usage);
    await vm.publishVolume(vol, 'alloc-b', usage); // one staging mount behind two targets

    await vm.unpublishVolume(vol, 'alloc-a', { ...usage });
    expect(calls('NodeUnpublishVolume').map((c) => c.request)).toEqual([{ volumeId: 'remote-1', targetPath: targetOf('alloc-a') }]);
    expect(await vm.hasMount(targetOf('alloc-a'))).toBe(false);
    expect(await vm.hasMount(targetOf('alloc-b'))).toBe(true);
    expect(await vm.hasMount(stagingOf())).toBe(true); // unpublish never unstages
    await expect(fs.stat(path.join(root(), 'per-alloc', 'alloc-a'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(calls('NodeUnstageVolume')).toHaveLength(0);

    await vm.unpublishVolume(vol, 'alloc-b', usage);
    await vm.unstageVolume(vol, usage);
    expect(calls('NodeUnstageVolume').map((c) => c.request)).toEqual([{ volumeId: 'remote-1', stagingTargetPath: stagingOf() }]);
    expect(h.mounts.points.size).toBe(0);
    await expect(fs.stat(path.join(root(), 'staging', 'vol-1'))).rejects.toMatchObject({ code: 'ENOENT' });
    await expect(fs.stat(path.join(root(), 'per-alloc', 'alloc-b'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(events()).toEqual([
      'Mount volume:alloc-a:true',
      'Mount volume:alloc-b:true',
      'Unmount volume:alloc-a:true',
      'Unmount volume:alloc-b:true',
    ]);
  });

  it('skips NodeStageVolume and NodePublishVolume when the path is a mount point already (also after an agent restart)', async () => {
    await vm.stageVolume(vol, usage);
    await vm.stageVolume(vol, { ...usage });
    expect(calls('NodeStageVolume')).toHaveLength(1);
    const first = await vm.publishVolume(vol, 'alloc-a', usage);
    expect(await vm.publishVolume(vol, 'alloc-a', { ...usage })).toEqual(first); // a restore: already published
    expect(calls('NodePublishVolume')).toHaveLength(1);
    await vm.publishVolume(vol, 'alloc-b', usage); // another alloc publishes from the same staging
    expect(calls('NodePublishVolume')).toHaveLength(2);

    // Agent restart: a new CSI manager over the same plugin and mounts finds both in place.
    await h.restart();
    await h.manager.start();
    await h.settle();
    const vm2 = h.manager.volumeManager('my-plugin');
    await vm2.stageVolume(vol, usage);
    expect(await vm2.publishVolume(vol, 'alloc-a', usage)).toEqual(first);
    expect(calls('NodeStageVolume')).toHaveLength(1);
    expect(calls('NodePublishVolume')).toHaveLength(2);
    expect(events()).toEqual([
      'Mount volume:alloc-a:true',
      'Mount volume:alloc-a:true',
      'Mount volume:alloc-b:true',
      'Mount volume:alloc-a:true',
    ]);
  });

  it('does not stage for a plugin without STAGE_UNSTAGE_VOLUME', async () => {
    const reg2 = plugin(1, 'csi-node', { name: 'flat' });
    h.behaviour(reg2).requiresStaging = false;
    h.registry.register(reg2);
    await h.settle();
    const flat = h.manager.volumeManager('flat');
    const flatVol = { id: 'v', pluginId: 'flat' };
    expect(await flat.requiresStaging()).toBe(false);
    const info = await flat.publishVolume(flatVol, 'alloc-a', usage);
    expect(info.stagingPath).toBeUndefined();
    expect(flat.mountInfoFor('v', 'alloc-a', usage).stagingPath).toBeUndefined();
    const bb = h.behaviour(reg2);
    expect(bb.callsOf('NodePublishVolume')[0]!.request.stagingTargetPath).toBeUndefined();
    expect(bb.callsOf('NodePublishVolume')[0]!.request.volumeId).toBe('v'); // externalId defaults to id
    await flat.unpublishVolume(flatVol, 'alloc-a', usage);
    await flat.unstageVolume(flatVol, usage); // nothing to unstage for such a plugin
    expect(bb.callsOf('NodeUnpublishVolume')[0]!.request.volumeId).toBe('v');
    expect(bb.callsOf('NodeStageVolume')).toHaveLength(0);
    expect(bb.callsOf('NodeUnstageVolume')).toHaveLength(0);
  });

  it('treats different usages as different staging paths', async () => {
    const ro: UsageOptions = { ...usage, readOnly: true };
    await vm.stageVolume(vol, usage);
    await vm.stageVolume(vol, ro);
    expect(calls('NodeStageVolume').map((c) => path.basename(String(c.request.stagingTargetPath)))).toEqual([
      'rw-file-system-single-node-writer',
      'ro-file-system-single-node-writer',
    ]);
    const roInfo = await vm.publishVolume(vol, 'alloc-b', ro);
    expect(roInfo.stagingPath).toBe(stagingOf('ro-file-system-single-node-writer'));
    expect(calls('NodePublishVolume')[0]!.request).toMatchObject({
      stagingTargetPath: stagingOf('ro-file-system-single-node-writer'),
      readonly: true,
    });
    await vm.unstageVolume(vol, usage);
    expect(calls('NodeUnstageVolume').map((c) => c.request.stagingTargetPath)).toEqual([stagingOf()]);
    expect(await vm.hasMount(stagingOf('ro-file-system-single-node-writer'))).toBe(true);
  });

  it('runs steps on one volume one at a time, on different volumes in parallel', async () => {
    const gate = b().gate('NodeStageVolume');
    const first = vm.stageVolume(vol, usage);
    await gate.reached;
    const sameVolume = vm.publishVolume(vol, 'alloc-b', usage);
    const vol2 = { ...vol, id: 'vol-2', externalId: 'remote-2' };
    await vm.stageVolume(vol2, usage); // not held up by vol-1's queue
    await vm.publishVolume(vol2, 'alloc-b', usage);
    await h.settle();
    expect(calls('NodePublishVolume').map((c) => c.request.volumeId)).toEqual(['remote-2']);
    gate.release();
    await Promise.all([first, sameVolume]);
    expect(calls('NodePublishVolume').map((c) => c.request.volumeId)).toEqual(['remote-2', 'remote-1']);
    expect(calls('NodeStageVolume').map((c) => c.request.volumeId)).toEqual(['remote-1', 'remote-2']);
  });

  it('a caller whose signal aborts while queued gets an AbortError and nothing runs; one that aborts during a call abandons it', async () => {
    const gate = b().gate('NodeStageVolume');
    const first = vm.stageVolume(vol, usage);
    await gate.reached;
    const ac = new AbortController();
    const queued = vm.unpublishVolume(vol, 'alloc-a', usage, { signal: ac.signal });
    ac.abort();
    await expect(queued).rejects.toBeInstanceOf(AbortError);
    gate.release();
    await first;
    expect(calls('NodeUnpublishVolume')).toHaveLength(0);
    expect(events()).toEqual(['Unmount volume:alloc-a:false']);

    const publishGate = b().gate('NodePublishVolume');
    const ac2 = new AbortController();
    const publishing = vm.publishVolume(vol, 'alloc-a', usage, {}, { signal: ac2.signal });
    await publishGate.reached;
    ac2.abort();
    await expect(publishing).rejects.toBeInstanceOf(AbortError); // the abort itself, not a VolumeOperationError
    expect(h.nodeEvents.at(-1)).toMatchObject({ message: 'Mount volume', details: { alloc_id: 'alloc-a', success: 'false' } });
  });

  it('a failed step names the step, the volume, the alloc and the plugin; its mount or unmount event carries the error', async () => {
    b().failNext('NodeStageVolume', csiError(GrpcStatus.DEADLINE_EXCEEDED, 'NodeStageVolume', 'too slow'));
    const stageErr = await vm.stageVolume(vol, usage).catch((e: unknown) => e);
    expect(stageErr).toBeInstanceOf(VolumeOperationError);
    expect((stageErr as Error).message).toMatch(
      /mount of volume "vol-1" on plugin "my-plugin" failed at NodeStageVolume: .*DEADLINE_EXCEEDED/,
    );
    // A failed stage is a failed mount (no alloc: the staging is shared); a successful one shows in the publish event.
    expect(h.nodeEvents).toEqual([
      expect.objectContaining({
        message: 'Mount volume',
        details: expect.objectContaining({ volume_id: 'vol-1', alloc_id: '', success: 'false', error: (stageErr as Error).message }),
      }),
    ]);
    h.nodeEvents.length = 0;
    await vm.stageVolume(vol, usage); // asked again, it stages
    expect(calls('NodeStageVolume')).toHaveLength(2);

    b().failNext('NodePublishVolume', csiError(GrpcStatus.INTERNAL, 'NodePublishVolume', 'disk on fire'));
    const err = await vm.publishVolume(vol, 'alloc-a', usage).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VolumeOperationError);
    expect((err as Error).message).toMatch(
      /mount of volume "vol-1" for alloc alloc-a on plugin "my-plugin" failed at NodePublishVolume: .*disk on fire/,
    );
    expect(h.nodeEvents[0]).toMatchObject({
      message: 'Mount volume',
      details: { alloc_id: 'alloc-a', success: 'false', error: expect.stringContaining('disk on fire') },
    });
    // A step never undoes anything on its own: that is the reconciler's decision.
    expect(calls('NodeUnpublishVolume')).toHaveLength(0);
    expect(calls('NodeUnstageVolume')).toHaveLength(0);
  });

  it('a failed unstage leaves nothing behind that stops the next one: asked again, it unstages', async () => {
    await vm.stageVolume(vol, usage);
    b().failNext('NodeUnstageVolume', csiError(GrpcStatus.UNAVAILABLE, 'NodeUnstageVolume', 'gone'));
    await expect(vm.unstageVolume(vol, usage)).rejects.toThrow(
      /unmount of volume "vol-1" on plugin "my-plugin" failed at NodeUnstageVolume/,
    );
    await vm.unstageVolume(vol, usage);
    expect(calls('NodeUnstageVolume')).toHaveLength(2);
    expect(h.mounts.points.size).toBe(0);
  });

  it('an unpublish the plugin says is done, whose target is still a mount point, fails', async () => {
    await vm.stageVolume(vol, usage);
    await vm.publishVolume(vol, 'alloc-a', usage);
    h.mounts.isMountPoint = async () => true; // the plugin answered OK but left the mount
    const err = await vm.unpublishVolume(vol, 'alloc-a', usage).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VolumeOperationError);
    expect((err as Error).message).toMatch(
      /unmount of volume "vol-1" for alloc alloc-a on plugin "my-plugin" failed at checking the target mount: .* is still a mount point after NodeUnpublishVolume/,
    );
    expect(h.nodeEvents.at(-1)).toMatchObject({ message: 'Unmount volume', details: { success: 'false' } });
  });

  it('counts NOT_FOUND on unpublish and unstage as done — by code, not by message', async () => {
    await vm.stageVolume(vol, usage);
    await vm.publishVolume(vol, 'alloc-a', usage);
    b().failNext('NodeUnpublishVolume', notFound('NodeUnpublishVolume'));
    b().failNext('NodeUnstageVolume', notFound('NodeUnstageVolume'));
    h.mounts.points.clear();
    await vm.unpublishVolume(vol, 'alloc-a', usage);
    await vm.unstageVolume(vol, usage);
    expect(calls('NodeUnpublishVolume')).toHaveLength(1);
    expect(calls('NodeUnstageVolume')).toHaveLength(1);
    expect(events()).toEqual(['Mount volume:alloc-a:true', 'Unmount volume:alloc-a:true']);

    await vm.stageVolume(vol, usage);
    await vm.publishVolume(vol, 'alloc-a', usage);
    b().failNext('NodeUnpublishVolume', csiError(GrpcStatus.INTERNAL, 'NodeUnpublishVolume', 'volume NOT_FOUND'));
    await expect(vm.unpublishVolume(vol, 'alloc-a', usage)).rejects.toThrow(VolumeOperationError);
    expect(await vm.hasMount(targetOf('alloc-a'))).toBe(true);
    b().failNext('NodeUnstageVolume', csiError(GrpcStatus.INTERNAL, 'NodeUnstageVolume', 'NOT_FOUND'));
    await expect(vm.unstageVolume(vol, usage)).rejects.toThrow(VolumeOperationError);
    expect(await vm.hasMount(stagingOf())).toBe(true);
  });

  it('a mount table that cannot be read (EMFILE) is read again, not taken for "not mounted" nor failed on', async () => {
    await vm.stageVolume(vol, usage);
    const info = await vm.publishVolume(vol, 'alloc-a', usage);
    // An agent restart's restore runs the steps again while the agent is out of file descriptors.
    const real = h.mounts.isMountPoint.bind(h.mounts);
    let faults = 2;
    h.mounts.isMountPoint = async (target: string) => {
      if (faults > 0) {
        faults--;
        throw Object.assign(new Error("EMFILE: too many open files, open '/proc/self/mountinfo'"), { code: 'EMFILE' });
      }
      return real(target);
    };
    let settled = false;
    const again = (async () => {
      await vm.stageVolume(vol, usage);
      return vm.publishVolume(vol, 'alloc-a', usage);
    })().finally(() => (settled = true));
    await h.settle();
    expect(settled).toBe(false);
    await h.advance(250);
    expect(settled).toBe(false);
    await h.advance(500);
    await expect(again).resolves.toEqual(info);
    // It found both mounts in place: nothing staged or published twice, nothing undone.
    expect(calls('NodeStageVolume')).toHaveLength(1);
    expect(calls('NodePublishVolume')).toHaveLength(1);
    expect(calls('NodeUnpublishVolume')).toHaveLength(0);
    expect(calls('NodeUnstageVolume')).toHaveLength(0);
    expect(h.logger.find('cannot read the mount table for a fault of the agent itself', 'warn')).toHaveLength(2);
  });

  it('a caller that gives up while the mount table cannot be read gets its abort, and nothing is called', async () => {
    await vm.stageVolume(vol, usage);
    await vm.publishVolume(vol, 'alloc-a', usage);
    h.mounts.isMountPoint = async () => {
      throw Object.assign(new Error('ENFILE: file table overflow'), { code: 'ENFILE' });
    };
    const ac = new AbortController();
    const again = vm.publishVolume(vol, 'alloc-a', usage, {}, { signal: ac.signal });
    await h.advance(1_000);
    ac.abort();
    await expect(again).rejects.toBeInstanceOf(AbortError);
    const staging = vm.stageVolume(vol, usage, {}, { signal: ac.signal });
    await expect(staging).rejects.toBeInstanceOf(AbortError);
    expect(calls('NodeStageVolume')).toHaveLength(1);
    expect(calls('NodePublishVolume')).toHaveLength(1);
    expect(calls('NodeUnpublishVolume')).toHaveLength(0);
    expect(calls('NodeUnstageVolume')).toHaveLength(0);
  });

  it('checks ids before they become paths', async () => {
    await expect(vm.stageVolume({ ...vol, id: '../etc' }, usage)).rejects.toBeInstanceOf(ValidationError);
    await expect(vm.publishVolume({ ...vol, id: '../etc' }, 'alloc-a', usage)).rejects.toBeInstanceOf(ValidationError);
    await expect(vm.publishVolume(vol, 'a/b', usage)).rejects.toBeInstanceOf(ValidationError);
    await expect(vm.unpublishVolume(vol, '..', usage)).rejects.toBeInstanceOf(ValidationError);
    await expect(vm.unstageVolume({ ...vol, id: '..' }, usage)).rejects.toBeInstanceOf(ValidationError);
    await expect(vm.stageVolume({ ...vol, pluginId: 'other' }, usage)).rejects.toThrow(/belongs to plugin "other"/);
    await expect(vm.publishVolume(vol, 'alloc-a', { ...usage, accessMode: 'x/y' })).rejects.toThrow(/unknown volume access mode "x\/y"/);
    expect(b().calls.filter((c) => /^Node(Stage|Unstage|Publish|Unpublish)Volume$/.test(c.method))).toEqual([]);
    await expect(fs.stat(root())).rejects.toMatchObject({ code: 'ENOENT' }); // no dir was made
    expect(h.nodeEvents.length).toBeGreaterThan(0);
    expect(h.nodeEvents.every((e) => e.details.success === 'false')).toBe(true);
  });

  it('fails clearly when the plugin has no instance any more', async () => {
    h.registry.deregister('csi-node', 'my-plugin', 'alloc-0');
    await expect(vm.unpublishVolume(vol, 'alloc-a', usage)).rejects.toBeInstanceOf(PluginInstanceNotFoundError);
    expect(h.nodeEvents[0]).toMatchObject({
      message: 'Unmount volume',
      details: { success: 'false', error: expect.stringContaining('not found') },
    });
    await expect(vm.stageVolume(vol, usage)).rejects.toBeInstanceOf(PluginInstanceNotFoundError);
    await expect(vm.requiresStaging()).rejects.toBeInstanceOf(PluginInstanceNotFoundError);
    expect(() => h.manager.volumeManager('my-plugin')).toThrow(PluginInstanceNotFoundError);
    expect(vm.externalNodeId).toBeUndefined();
  });

  it('survives the plugin task restarting: the same volume manager goes to the new instance', async () => {
    await vm.stageVolume(vol, usage);
    await vm.publishVolume(vol, 'alloc-a', usage);
    const next = plugin(1); // the replacement plugin alloc, on its own socket
    h.registry.register(next);
    h.registry.deregister('csi-node', 'my-plugin', 'alloc-0');
    await h.settle();
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')?.allocId).toBe('alloc-1');
    expect(h.manager.volumeManager('my-plugin')).toBe(vm);
    await vm.unpublishVolume(vol, 'alloc-a', usage);
    await vm.unstageVolume(vol, usage);
    expect(h.behaviour(next).callsOf('NodeUnpublishVolume')).toHaveLength(1);
    expect(h.behaviour(next).callsOf('NodeUnstageVolume')).toHaveLength(1);
    expect(calls('NodeUnpublishVolume')).toHaveLength(0);
    expect(calls('NodeUnstageVolume')).toHaveLength(0);
    expect(h.mounts.points.size).toBe(0);
  });

  it('a step the plugin does not answer (UNAVAILABLE) has the instance fingerprint at once, so its health shows the crash now', async () => {
    const probes = h.factory.totalProbes;
    b().failNext('NodeStageVolume', csiError(GrpcStatus.UNAVAILABLE, 'NodeStageVolume', 'connection refused'));
    b().failures.set('Probe', csiError(GrpcStatus.UNAVAILABLE, 'Probe', 'connection refused'));
    await expect(vm.stageVolume(vol, usage)).rejects.toBeInstanceOf(VolumeOperationError);
    await h.settle();
    expect(h.factory.totalProbes).toBe(probes + 1);
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')).toMatchObject({ healthy: false });
    // Any other failure is an answer: no extra round.
    b().failures.delete('Probe');
    b().failNext('NodeStageVolume', csiError(GrpcStatus.INTERNAL, 'NodeStageVolume', 'disk full'));
    await expect(vm.stageVolume(vol, usage)).rejects.toThrow(/disk full/);
    await h.settle();
    expect(h.factory.totalProbes).toBe(probes + 1);
  });

  it('reads a volume condition with NodeGetVolumeStats at the target or the staging path', async () => {
    // The fake plugin offers no GET_VOLUME_STATS: nothing is asked.
    expect(await vm.volumeCondition(vol, 'alloc-a', usage, 'target')).toBeUndefined();
    expect(calls('NodeGetVolumeStats')).toEqual([]);

    // Now it offers GET_VOLUME_STATS and VOLUME_CONDITION (answers set on its client), seen at the next round.
    const client = h.factory.clientsOf(reg.socketPath).at(-1)!;
    const answers: (Error | { abnormal: boolean; message: string } | null)[] = [
      { abnormal: false, message: 'fine' },
      { abnormal: true, message: 'backing dir replaced' },
      notFound('NodeGetVolumeStats', 'no volume at that path'),
      csiError(GrpcStatus.UNIMPLEMENTED, 'NodeGetVolumeStats'),
    ];
    const asked: Record<string, unknown>[] = [];
    client.nodeGetCapabilities = async () =>
      ({ capabilities: ['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'VOLUME_CONDITION'].map((type) => ({ rpc: { type } })) }) as never;
    client.nodeGetVolumeStats = async (r) => {
      asked.push(r as unknown as Record<string, unknown>);
      const a = answers.shift();
      if (a instanceof Error) throw a;
      return { usage: [], volumeCondition: a ?? null };
    };
    await h.manager.fingerprintAll();
    expect(await vm.volumeCondition(vol, 'alloc-a', usage, 'target')).toEqual({ abnormal: false, message: 'fine', reported: true });
    expect(await vm.volumeCondition(vol, '', usage, 'staging')).toEqual({
      abnormal: true,
      message: 'backing dir replaced',
      reported: true,
    });
    expect(await vm.volumeCondition(vol, 'alloc-a', usage, 'target')).toEqual({
      abnormal: true,
      message: 'NodeGetVolumeStats: NOT_FOUND: no volume at that path',
      reported: true,
    });
    await expect(vm.volumeCondition(vol, 'alloc-a', usage, 'target')).rejects.toThrow(/UNIMPLEMENTED/);
    // A mount made under another mount dir (a plugin upgrade moved it): not asked about, no condition (never a NOT_FOUND read as stale).
    expect(
      await vm.volumeCondition(vol, 'alloc-a', usage, 'target', {
        hostPath: '/old/mount/dir/per-alloc/alloc-a/vol-1/rw-file-system-single-node-writer',
      }),
    ).toBeUndefined();
    expect(asked.map((r) => [r.volumeId, r.volumePath, r.stagingTargetPath])).toEqual([
      ['remote-1', targetOf('alloc-a'), stagingOf()],
      ['remote-1', stagingOf(), stagingOf()],
      ['remote-1', targetOf('alloc-a'), stagingOf()],
      ['remote-1', targetOf('alloc-a'), stagingOf()],
    ]);
    // Without VOLUME_CONDITION an answer carries no condition.
    client.nodeGetCapabilities = async () =>
      ({ capabilities: ['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS'].map((type) => ({ rpc: { type } })) }) as never;
    await h.manager.fingerprintAll();
    answers.push({ abnormal: true, message: 'ignored' });
    expect(await vm.volumeCondition(vol, 'alloc-a', usage, 'target')).toEqual({ abnormal: false, message: '', reported: false });
  });

  it('uses the registration options for the mount roots', async () => {
    const base = path.join(h.dataDir, 'elsewhere');
    h.registry.register(
      plugin(2, 'csi-node', { name: 'mono', options: { stagePublishBaseDir: base, containerMountPoint: '/csi', pluginType: 'monolith' } }),
    );
    await h.settle();
    const mvm = h.manager.volumeManager('mono');
    const monoVol = { id: 'v', pluginId: 'mono' };
    await mvm.stageVolume(monoVol, usage);
    const info = await mvm.publishVolume(monoVol, 'alloc-a', usage);
    expect(info.targetPath).toBe(path.join(base, 'per-alloc', 'alloc-a', 'v', 'rw-file-system-single-node-writer'));
    expect(info.stagingPath).toBe(path.join(base, 'staging', 'v', 'rw-file-system-single-node-writer'));
    const bb = h.behaviour(plugin(2));
    expect(bb.callsOf('NodePublishVolume')[0]!.request.targetPath).toBe('/csi/per-alloc/alloc-a/v/rw-file-system-single-node-writer');
    expect(bb.callsOf('NodeStageVolume')[0]!.request.stagingTargetPath).toBe('/csi/staging/v/rw-file-system-single-node-writer');
    expect(h.manager.pluginInfo('csi-node', 'mono')?.deployment).toBe('monolith');
  });
});
