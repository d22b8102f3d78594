import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { AbortError, ValidationError } from '@csiplug/core';
import { GrpcStatus } from '@csiplug/csi';
import { Harness, plugin } from '../test/harness';
import { csiError, notFound } from '../test/fakes/fake-csi-client';
import { CSIVolumeRef, PluginInstanceNotFoundError, UsageOptions, VolumeManager, VolumeOperationError } from '.';

const usage: UsageOptions = { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' };
const vol: CSIVolumeRef = { id: 'vol-1', externalId: 'remote-1', pluginId: 'my-plugin', context: { a: 'b' }, secrets: { s: 't' } };

describe('volume manager', () => {
  let h: Harness;
  let vm: VolumeManager;
  const reg = plugin(0);
  const b = () => h.behaviour(reg);
  const root = () => path.join(h.dataDir, 'csi', 'node', 'my-plugin');
  const calls = (m: string) => b().callsOf(m);

  beforeEach(async () => {
    h = new Harness();
    h.registry.register(reg);
    await h.manager.start();
    await h.settle();
    vm = h.manager.volumeManager('my-plugin');
  });
  afterEach(async () => {
    await h.close();
  });

  it('stages and publishes at the DESIGN.md paths, with 0700 dirs, and emits a node event', async () => {
    const info = await vm.mountVolume(vol, { id: 'alloc-a' }, usage, { pc: '1' });
    const staging = path.join(root(), 'staging', 'vol-1', 'rw-file-system-single-node-writer');
    const target = path.join(root(), 'per-alloc', 'alloc-a', 'vol-1', 'rw-file-system-single-node-writer');
    expect(info).toEqual({ source: target, targetPath: target, stagingPath: staging });
    expect(calls('NodeStageVolume')[0]!.request).toMatchObject({
      volumeId: 'remote-1',
      stagingTargetPath: staging,
      publishContext: { pc: '1' },
      secrets: { s: 't' },
      volumeContext: { a: 'b' },
      volumeCapability: { accessMode: { mode: 'SINGLE_NODE_WRITER' }, mount: { fsType: '', mountFlags: [] } },
    });
    expect(calls('NodePublishVolume')[0]!.request).toMatchObject({ volumeId: 'remote-1', stagingTargetPath: staging, targetPath: target, readonly: false });
    expect((await fs.stat(staging)).mode & 0o777).toBe(0o700);
    expect((await fs.stat(path.dirname(target))).mode & 0o777).toBe(0o700);
    expect(await vm.hasMount(target)).toBe(true);
    expect(vm.usersOf('vol-1', { ...usage })).toEqual(['alloc-a']);
    expect(h.nodeEvents).toEqual([
      { subsystem: 'Storage', message: 'Mount volume', details: { volume_id: 'vol-1', alloc_id: 'alloc-a', plugin_id: 'my-plugin', success: 'true' }, time: h.clock.now() },
    ]);
    expect(vm.externalNodeId).toBe('node-1');
  });

  it('reuses a staged volume and an existing publish', async () => {
    await vm.mountVolume(vol, { id: 'alloc-a' }, usage);
    await vm.mountVolume(vol, { id: 'alloc-b' }, usage);
    expect(calls('NodeStageVolume')).toHaveLength(1);
    expect(calls('NodePublishVolume')).toHaveLength(2);
    await vm.mountVolume(vol, { id: 'alloc-b' }, { ...usage }); // a restore: already published
    expect(calls('NodePublishVolume')).toHaveLength(2);
    expect(vm.usersOf('vol-1', usage)).toEqual(['alloc-a', 'alloc-b']);
  });

  it('does not stage for a plugin without STAGE_UNSTAGE_VOLUME', async () => {
    const reg2 = plugin(1, 'csi-node', { name: 'flat' });
    h.behaviour(reg2).requiresStaging = false;
    h.registry.register(reg2);
    await h.settle();
    const flat = h.manager.volumeManager('flat');
    const info = await flat.mountVolume({ id: 'v', pluginId: 'flat' }, { id: 'alloc-a' }, usage);
    expect(info.stagingPath).toBeUndefined();
    const bb = h.behaviour(reg2);
    expect(bb.callsOf('NodeStageVolume')).toHaveLength(0);
    expect(bb.callsOf('NodePublishVolume')[0]!.request.stagingTargetPath).toBeUndefined();
    expect(bb.callsOf('NodePublishVolume')[0]!.request.volumeId).toBe('v'); // externalId defaults to id
    await flat.unmountVolume({ id: 'v', pluginId: 'flat' }, 'alloc-a', usage);
    expect(bb.callsOf('NodeUnstageVolume')).toHaveLength(0);
  });

  it('unpublishes, releases, and unstages only for the last user', async () => {
    await vm.mountVolume(vol, { id: 'alloc-a' }, usage);
    await vm.mountVolume(vol, { id: 'alloc-b' }, usage);
    await vm.unmountVolume(vol, 'alloc-a', { ...usage });
    expect(calls('NodeUnpublishVolume')).toHaveLength(1);
    expect(calls('NodeUnstageVolume')).toHaveLength(0);
    expect(vm.usersOf('vol-1', usage)).toEqual(['alloc-b']);
    await vm.unmountVolume(vol, 'alloc-b', usage);
    expect(calls('NodeUnpublishVolume')).toHaveLength(2);
    expect(calls('NodeUnstageVolume')).toHaveLength(1);
    expect(calls('NodeUnstageVolume')[0]!.request).toEqual({ volumeId: 'remote-1', stagingTargetPath: path.join(root(), 'staging', 'vol-1', 'rw-file-system-single-node-writer') });
    expect(h.mounts.points.size).toBe(0);
    expect(h.db.listVolumeUsage()).toEqual([]);
    // The per-alloc dirs are tidied away.
    await expect(fs.stat(path.join(root(), 'per-alloc', 'alloc-a'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(h.nodeEvents.map((e) => `${e.message}:${e.details.alloc_id}:${e.details.success}`)).toEqual([
      'Mount volume:alloc-a:true',
      'Mount volume:alloc-b:true',
      'Unmount volume:alloc-a:true',
      'Unmount volume:alloc-b:true',
    ]);
  });

  it('treats different usages as different staging paths', async () => {
    const ro: UsageOptions = { ...usage, readOnly: true };
    await vm.mountVolume(vol, { id: 'alloc-a' }, usage);
    await vm.mountVolume(vol, { id: 'alloc-b' }, ro);
    expect(calls('NodeStageVolume').map((c) => path.basename(String(c.request.stagingTargetPath)))).toEqual(['rw-file-system-single-node-writer', 'ro-file-system-single-node-writer']);
    await vm.unmountVolume(vol, 'alloc-a', usage);
    expect(calls('NodeUnstageVolume')).toHaveLength(1); // its own usage had no other user
  });

  it('interleaving: alloc0 unmounts while alloc1 has staged but not published → one unpublish, no unstage', async () => {
    await vm.mountVolume(vol, { id: 'alloc0' }, usage);
    // alloc1 uses the same staged volume; hold its publish.
    const gate = b().gate('NodePublishVolume');
    const mount1 = vm.mountVolume(vol, { id: 'alloc1' }, usage);
    await gate.reached;
    expect(vm.usersOf('vol-1', usage)).toEqual(['alloc0', 'alloc1']); // recorded before publishing
    const unmount0 = vm.unmountVolume(vol, 'alloc0', usage);
    await h.settle();
    expect(calls('NodeUnpublishVolume')).toHaveLength(0); // waits for alloc1's mount: one operation per volume
    gate.release();
    await Promise.all([mount1, unmount0]);
    expect(calls('NodeUnpublishVolume').map((c) => c.request.targetPath)).toEqual([path.join(root(), 'per-alloc', 'alloc0', 'vol-1', 'rw-file-system-single-node-writer')]);
    expect(calls('NodeUnstageVolume')).toHaveLength(0);
    expect(vm.usersOf('vol-1', usage)).toEqual(['alloc1']);
    expect(await vm.hasMount(path.join(root(), 'staging', 'vol-1', 'rw-file-system-single-node-writer'))).toBe(true);
  });

  it('runs operations on one volume one at a time, on different volumes in parallel', async () => {
    const gate = b().gate('NodeStageVolume');
    const first = vm.mountVolume(vol, { id: 'alloc-a' }, usage);
    await gate.reached;
    const sameVolume = vm.mountVolume(vol, { id: 'alloc-b' }, usage);
    const otherVolume = vm.mountVolume({ ...vol, id: 'vol-2', externalId: 'remote-2' }, { id: 'alloc-b' }, usage);
    await otherVolume; // not held up by vol-1's queue
    await h.settle();
    expect(calls('NodePublishVolume').map((c) => c.request.volumeId)).toEqual(['remote-2']);
    gate.release();
    await Promise.all([first, sameVolume]);
    expect(calls('NodePublishVolume').map((c) => c.request.volumeId)).toEqual(['remote-2', 'remote-1', 'remote-1']);
    expect(calls('NodeStageVolume').map((c) => c.request.volumeId)).toEqual(['remote-1', 'remote-2']); // vol-1 staged once
  });

  it('a caller whose signal aborts while queued gets an AbortError and nothing runs', async () => {
    const gate = b().gate('NodeStageVolume');
    const first = vm.mountVolume(vol, { id: 'alloc-a' }, usage);
    await gate.reached;
    const ac = new AbortController();
    const queued = vm.unmountVolume(vol, 'alloc-a', usage, { signal: ac.signal });
    ac.abort();
    await expect(queued).rejects.toBeInstanceOf(AbortError);
    gate.release();
    await first;
    expect(calls('NodeUnpublishVolume')).toHaveLength(0);
    expect(vm.usersOf('vol-1', usage)).toEqual(['alloc-a']);
    expect(h.nodeEvents.map((e) => `${e.message}:${e.details.success}`)).toEqual(['Unmount volume:false', 'Mount volume:true']);
  });

  it('a failed mount releases what it recorded, and unstages what it staged when nobody else uses it', async () => {
    b().failNext('NodePublishVolume', csiError(GrpcStatus.INTERNAL, 'NodePublishVolume', 'disk on fire'));
    const err = await vm.mountVolume(vol, { id: 'alloc-a' }, usage).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VolumeOperationError);
    expect((err as Error).message).toMatch(/mount of volume "vol-1" for alloc alloc-a on plugin "my-plugin" failed at NodePublishVolume: .*disk on fire/);
    expect(vm.usersOf('vol-1', usage)).toEqual([]);
    expect(h.db.listVolumeUsage()).toEqual([]);
    expect(calls('NodeUnstageVolume')).toHaveLength(1);
    // the failed publish may have mounted on the plugin's side: it is unpublished first
    expect(calls('NodeUnpublishVolume')).toHaveLength(1);
    expect(h.nodeEvents[0]!.details).toMatchObject({ success: 'false', error: expect.stringContaining('disk on fire') });

    // With another user present, a failure leaves that user and the staging alone.
    await vm.mountVolume(vol, { id: 'alloc-a' }, usage);
    b().failNext('NodePublishVolume', csiError(GrpcStatus.INTERNAL, 'NodePublishVolume', 'again'));
    await expect(vm.mountVolume(vol, { id: 'alloc-b' }, usage)).rejects.toThrow(/again/);
    expect(vm.usersOf('vol-1', usage)).toEqual(['alloc-a']);
    expect(calls('NodeUnstageVolume')).toHaveLength(1);
  });

  it('a stage that fails (it may still have mounted on the plugin side) is unstaged; nothing is published', async () => {
    b().failNext('NodeStageVolume', csiError(GrpcStatus.DEADLINE_EXCEEDED, 'NodeStageVolume', 'too slow'));
    await expect(vm.mountVolume(vol, { id: 'alloc-a' }, usage)).rejects.toThrow(/failed at NodeStageVolume.*DEADLINE_EXCEEDED/);
    expect(calls('NodePublishVolume')).toHaveLength(0);
    expect(calls('NodeUnpublishVolume')).toHaveLength(0);
    expect(calls('NodeUnstageVolume')).toHaveLength(1);
    expect(h.db.listVolumeUsage()).toEqual([]);
  });

  it('a repeated mount that fails does not release the usage recorded by the earlier one', async () => {
    await vm.mountVolume(vol, { id: 'alloc-a' }, usage);
    h.mounts.delete(vm.mountInfoFor('vol-1', 'alloc-a', usage).targetPath); // the target vanished
    b().failNext('NodePublishVolume', csiError(GrpcStatus.INTERNAL, 'NodePublishVolume', 'nope'));
    await expect(vm.mountVolume(vol, { id: 'alloc-a' }, usage)).rejects.toThrow(/nope/);
    expect(vm.usersOf('vol-1', usage)).toEqual(['alloc-a']);
  });

  it('a mount table that cannot be read (EMFILE) is read again, not taken for "not mounted" nor failed on', async () => {
    await vm.mountVolume(vol, { id: 'alloc-a' }, usage);
    // An agent restart's mount again (the restore path), while the agent is out of file descriptors.
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
    const again = vm.mountVolume(vol, { id: 'alloc-a' }, usage).finally(() => (settled = true));
    await h.settle();
    expect(settled).toBe(false);
    await h.advance(250);
    expect(settled).toBe(false);
    await h.advance(500);
    await expect(again).resolves.toMatchObject({ targetPath: vm.mountInfoFor('vol-1', 'alloc-a', usage).targetPath });
    // It found both mounts in place: nothing staged or published twice, nothing undone.
    expect(calls('NodeStageVolume')).toHaveLength(1);
    expect(calls('NodePublishVolume')).toHaveLength(1);
    expect(calls('NodeUnpublishVolume')).toHaveLength(0);
    expect(vm.usersOf('vol-1', usage)).toEqual(['alloc-a']);
    expect(h.logger.find('cannot read the mount table for a fault of the agent itself', 'warn')).toHaveLength(2);
  });

  it('a caller that gives up while the mount table cannot be read gets its abort, and the usage it had stays', async () => {
    await vm.mountVolume(vol, { id: 'alloc-a' }, usage);
    h.mounts.isMountPoint = async () => {
      throw Object.assign(new Error('ENFILE: file table overflow'), { code: 'ENFILE' });
    };
    const ac = new AbortController();
    const again = vm.mountVolume(vol, { id: 'alloc-a' }, usage, {}, { signal: ac.signal });
    await h.advance(1_000);
    ac.abort();
    await expect(again).rejects.toBeInstanceOf(AbortError);
    expect(calls('NodeUnstageVolume')).toHaveLength(0);
    expect(vm.usersOf('vol-1', usage)).toEqual(['alloc-a']);
  });

  it('counts NOT_FOUND on unpublish and unstage as done — by code, not by message', async () => {
    await vm.mountVolume(vol, { id: 'alloc-a' }, usage);
    b().failNext('NodeUnpublishVolume', notFound('NodeUnpublishVolume'));
    b().failNext('NodeUnstageVolume', notFound('NodeUnstageVolume'));
    h.mounts.points.clear();
    await vm.unmountVolume(vol, 'alloc-a', usage);
    expect(vm.usersOf('vol-1', usage)).toEqual([]);

    await vm.mountVolume(vol, { id: 'alloc-a' }, usage);
    b().failNext('NodeUnpublishVolume', csiError(GrpcStatus.INTERNAL, 'NodeUnpublishVolume', 'volume NOT_FOUND'));
    await expect(vm.unmountVolume(vol, 'alloc-a', usage)).rejects.toThrow(VolumeOperationError);
    expect(vm.usersOf('vol-1', usage)).toEqual(['alloc-a']);
  });

  it('a failed unstage keeps nothing recorded, so a retry unstages again', async () => {
    await vm.mountVolume(vol, { id: 'alloc-a' }, usage);
    b().failNext('NodeUnstageVolume', csiError(GrpcStatus.UNAVAILABLE, 'NodeUnstageVolume', 'gone'));
    await expect(vm.unmountVolume(vol, 'alloc-a', usage)).rejects.toThrow(/failed at NodeUnstageVolume/);
    await vm.unmountVolume(vol, 'alloc-a', usage);
    expect(calls('NodeUnstageVolume')).toHaveLength(2);
    expect(h.mounts.points.size).toBe(0);
  });

  it('checks ids before they become paths', async () => {
    await expect(vm.mountVolume({ ...vol, id: '../etc' }, { id: 'alloc-a' }, usage)).rejects.toBeInstanceOf(ValidationError);
    await expect(vm.mountVolume(vol, { id: 'a/b' }, usage)).rejects.toBeInstanceOf(ValidationError);
    await expect(vm.unmountVolume(vol, '..', usage)).rejects.toBeInstanceOf(ValidationError);
    await expect(vm.mountVolume({ ...vol, pluginId: 'other' }, { id: 'alloc-a' }, usage)).rejects.toThrow(/belongs to plugin "other"/);
    await expect(vm.mountVolume(vol, { id: 'alloc-a' }, { ...usage, accessMode: 'x/y' })).rejects.toThrow(/unknown volume access mode "x\/y"/);
    expect(b().calls.filter((c) => c.method.startsWith('NodeStage') || c.method.startsWith('NodePub') || c.method.startsWith('NodeUnp'))).toEqual([]);
    expect(h.nodeEvents.every((e) => e.details.success === 'false')).toBe(true);
  });

  it('fails clearly when the plugin has no instance any more', async () => {
    h.registry.deregister('csi-node', 'my-plugin', 'alloc-0');
    await expect(vm.unmountVolume(vol, 'alloc-a', usage)).rejects.toBeInstanceOf(PluginInstanceNotFoundError);
    expect(h.nodeEvents[0]).toMatchObject({ message: 'Unmount volume', details: { success: 'false', error: expect.stringContaining('not found') } });
  });

  it('after an agent restart only the last user unstages (nomad#25813)', async () => {
    await vm.mountVolume(vol, { id: 'alloc-a' }, usage);
    await vm.mountVolume(vol, { id: 'alloc-b' }, usage);
    await h.restart();
    await h.manager.start();
    await h.settle();
    const vm2 = h.manager.volumeManager('my-plugin');
    expect(vm2.usersOf('vol-1', usage)).toEqual(['alloc-a', 'alloc-b']);
    await vm2.unmountVolume(vol, 'alloc-a', usage);
    expect(calls('NodeUnstageVolume')).toHaveLength(0);
    await vm2.unmountVolume(vol, 'alloc-b', usage);
    expect(calls('NodeUnstageVolume')).toHaveLength(1);
  });

  it('survives the plugin task restarting: the new instance unstages for the last user', async () => {
    await vm.mountVolume(vol, { id: 'alloc-a' }, usage);
    await vm.mountVolume(vol, { id: 'alloc-b' }, usage);
    const next = plugin(1); // the replacement plugin alloc
    h.registry.register(next);
    h.registry.deregister('csi-node', 'my-plugin', 'alloc-0');
    await h.settle();
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')?.allocId).toBe('alloc-1');
    const vm2 = h.manager.volumeManager('my-plugin');
    await vm2.unmountVolume(vol, 'alloc-a', usage);
    await vm2.unmountVolume(vol, 'alloc-b', usage);
    expect(h.behaviour(next).callsOf('NodeUnpublishVolume')).toHaveLength(2);
    expect(h.behaviour(next).callsOf('NodeUnstageVolume')).toHaveLength(1);
  });

  it('uses the registration options for the mount roots', async () => {
    const base = path.join(h.dataDir, 'elsewhere');
    h.registry.register(plugin(2, 'csi-node', { name: 'mono', options: { stagePublishBaseDir: base, containerMountPoint: '/csi', pluginType: 'monolith' } }));
    await h.settle();
    const mvm = h.manager.volumeManager('mono');
    const info = await mvm.mountVolume({ id: 'v', pluginId: 'mono' }, { id: 'alloc-a' }, usage);
    expect(info.targetPath).toBe(path.join(base, 'per-alloc', 'alloc-a', 'v', 'rw-file-system-single-node-writer'));
    const bb = h.behaviour(plugin(2));
    expect(bb.callsOf('NodePublishVolume')[0]!.request.targetPath).toBe('/csi/per-alloc/alloc-a/v/rw-file-system-single-node-writer');
    expect(bb.callsOf('NodeStageVolume')[0]!.request.stagingTargetPath).toBe('/csi/staging/v/rw-file-system-single-node-writer');
    expect(h.manager.pluginInfo('csi-node', 'mono')?.deployment).toBe('monolith');
  });
});
