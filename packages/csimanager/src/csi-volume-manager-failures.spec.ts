// How each CSI node step of the volume manager fails: the step it names in
// its VolumeOperationError (a mount-table check, a dir it could not make,
// the plugin call), the errors it passes on unwrapped (aborts, bad input),
// the signal it hands to the plugin call, and what it leaves for the next
// attempt. Over the real CSI manager with a fake CSI client, mount table
// and clock (test/harness.ts); the happy paths are csi-volume-manager.spec.ts's.
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { AbortError, ValidationError } from '@csiplug/core';
import { GrpcStatus } from '@csiplug/csi';
import { csiError } from '@csiplug/csi/testing';
import { Harness, plugin } from '../test/harness';
import { type CSIVolumeRef, type UsageOptions, type VolumeManager, VolumeOperationError } from '.';

const usage: UsageOptions = { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' };
const vol: CSIVolumeRef = { id: 'vol-1', externalId: 'remote-1', pluginId: 'my-plugin' };

describe('volume manager: how node steps fail', () => {
  let h: Harness;
  let vm: VolumeManager;
  const reg = plugin(0);
  const b = () => h.behaviour(reg);
  const root = () => path.join(h.dataDir, 'csi', 'node', 'my-plugin');
  const stagingOf = () => path.join(root(), 'staging', 'vol-1', 'rw-file-system-single-node-writer');
  const targetOf = (allocId: string) => path.join(root(), 'per-alloc', allocId, 'vol-1', 'rw-file-system-single-node-writer');
  const calls = (m: string) => b().callsOf(m);
  const failure = (p: Promise<unknown>) => p.then(() => undefined).catch((e: unknown) => e as Error);

  /** The next mount check throws EMFILE (a fault of the agent); resolves once it has thrown. */
  const failMountCheckOnce = (): Promise<void> => {
    const real = h.mounts.isMountPoint.bind(h.mounts);
    let thrown!: () => void;
    const faulted = new Promise<void>((resolve) => (thrown = resolve));
    let faults = 1;
    h.mounts.isMountPoint = async (target: string) => {
      if (faults-- > 0) {
        thrown();
        throw Object.assign(new Error('EMFILE: too many open files'), { code: 'EMFILE' });
      }
      return real(target);
    };
    return faulted;
  };

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

  it('a staging mount that cannot be checked fails the stage at that step, and nothing is staged', async () => {
    h.mounts.failMountCheck(stagingOf(), 'ENOTCONN');
    const err = await failure(vm.stageVolume(vol, usage));
    expect(err).toBeInstanceOf(VolumeOperationError);
    expect(err).toMatchObject({ code: 'ECSI_MOUNT', operation: 'mount', volumeId: 'vol-1', allocId: '', pluginId: 'my-plugin' });
    expect(err!.message).toMatch(/^mount of volume "vol-1" on plugin "my-plugin" failed at checking the staging mount: ENOTCONN/);
    expect((err as Error & { cause: { code: string } }).cause.code).toBe('ENOTCONN');
    expect(calls('NodeStageVolume')).toEqual([]);
    expect(h.nodeEvents.map((e) => [e.message, e.details.alloc_id, e.details.success])).toEqual([['Mount volume', '', 'false']]);
  });

  it('a staging dir that cannot be made fails the stage at that step', async () => {
    await fs.mkdir(path.join(root(), 'staging'), { recursive: true });
    await fs.writeFile(path.join(root(), 'staging', 'vol-1'), 'a file where the volume dir goes');
    const err = await failure(vm.stageVolume(vol, usage));
    expect(err).toBeInstanceOf(VolumeOperationError);
    expect(err!.message).toMatch(/failed at creating the staging dir: .*(EEXIST|ENOTDIR)/);
    expect(calls('NodeStageVolume')).toEqual([]);
  });

  it('an alloc dir that cannot be made, or a target that cannot be checked, fails the publish at that step', async () => {
    await vm.stageVolume(vol, usage);
    await fs.mkdir(path.join(root(), 'per-alloc'), { recursive: true });
    await fs.writeFile(path.join(root(), 'per-alloc', 'alloc-a'), 'a file where the alloc dir goes');
    const dirErr = await failure(vm.publishVolume(vol, 'alloc-a', usage));
    expect(dirErr).toMatchObject({ code: 'ECSI_MOUNT', allocId: 'alloc-a' });
    expect(dirErr!.message).toMatch(/^mount of volume "vol-1" for alloc alloc-a on plugin "my-plugin" failed at creating the alloc dir: /);

    h.mounts.failMountCheck(targetOf('alloc-b'), 'EIO');
    const checkErr = await failure(vm.publishVolume(vol, 'alloc-b', usage));
    expect(checkErr!.message).toMatch(/for alloc alloc-b on plugin "my-plugin" failed at checking the target mount: EIO/);
    expect(calls('NodePublishVolume')).toEqual([]);
  });

  it('a failed NodeUnpublishVolume names that step, and the target stays as it was', async () => {
    await vm.stageVolume(vol, usage);
    await vm.publishVolume(vol, 'alloc-a', usage);
    b().failNext('NodeUnpublishVolume', csiError(GrpcStatus.INTERNAL, 'NodeUnpublishVolume', 'busy'));
    const err = await failure(vm.unpublishVolume(vol, 'alloc-a', usage));
    expect(err).toMatchObject({ code: 'ECSI_UNMOUNT', operation: 'unmount', allocId: 'alloc-a' });
    expect(err!.message).toMatch(
      /^unmount of volume "vol-1" for alloc alloc-a on plugin "my-plugin" failed at NodeUnpublishVolume: .*busy/,
    );
    expect((await fs.stat(path.join(root(), 'per-alloc', 'alloc-a'))).isDirectory()).toBe(true);
    expect(await h.mounts.isMountPoint(targetOf('alloc-a'))).toBe(true); // the live mount is left alone
    expect(h.nodeEvents.at(-1)).toMatchObject({
      message: 'Unmount volume',
      details: { alloc_id: 'alloc-a', success: 'false', error: err!.message },
    });
  });

  it('an unpublish keeps the alloc dirs that are not empty, and still succeeds', async () => {
    await vm.stageVolume(vol, usage);
    await vm.publishVolume(vol, 'alloc-a', usage);
    await fs.mkdir(targetOf('alloc-a'), { recursive: true });
    await fs.writeFile(path.join(targetOf('alloc-a'), 'left-behind'), 'x');
    await vm.unpublishVolume(vol, 'alloc-a', usage);
    expect((await fs.stat(targetOf('alloc-a'))).isDirectory()).toBe(true);
    expect(h.nodeEvents.at(-1)).toMatchObject({ message: 'Unmount volume', details: { success: 'true' } });
  });

  it('an abort from the plugin call is passed on as it is, whatever its class, and the plugin call gets the signal', async () => {
    const named = Object.assign(new Error('The operation was aborted'), { name: 'AbortError' });
    b().failNext('NodeStageVolume', named);
    expect(await failure(vm.stageVolume(vol, usage))).toBe(named);

    for (const method of ['NodeStageVolume', 'NodeUnpublishVolume', 'NodeUnstageVolume'] as const) {
      if (method === 'NodeUnpublishVolume') await vm.publishVolume(vol, 'alloc-a', usage);
      const gate = b().gate(method);
      const ac = new AbortController();
      const step =
        method === 'NodeStageVolume'
          ? vm.stageVolume(vol, usage, {}, { signal: ac.signal })
          : method === 'NodeUnpublishVolume'
            ? vm.unpublishVolume(vol, 'alloc-a', usage, { signal: ac.signal })
            : vm.unstageVolume(vol, usage, { signal: ac.signal });
      await gate.reached;
      ac.abort();
      expect(await failure(step)).toBeInstanceOf(AbortError);
      gate.release();
    }
  });

  it('bad input from the plugin client (a ValidationError) is passed on unwrapped', async () => {
    const bad = new ValidationError('NodePublishVolume: target_path is too long', 'targetPath');
    await vm.stageVolume(vol, usage);
    b().failNext('NodePublishVolume', bad);
    expect(await failure(vm.publishVolume(vol, 'alloc-a', usage))).toBe(bad);
  });

  it('requiresStaging hands its signal to NodeGetCapabilities when the instance has to ask', async () => {
    h.manager.instanceOf('csi-node', 'my-plugin')!['nodeCaps'] = undefined;
    const gate = b().gate('NodeGetCapabilities');
    const ac = new AbortController();
    const asked = vm.requiresStaging({ signal: ac.signal });
    await gate.reached;
    ac.abort();
    expect(await failure(asked)).toBeInstanceOf(AbortError);
    gate.release();
  });

  it('checks that a volume was given at all', async () => {
    for (const step of [
      () => vm.stageVolume(undefined as never, usage),
      () => vm.publishVolume(null as never, 'alloc-a', usage),
      () => vm.unstageVolume('vol-1' as never, usage),
    ]) {
      expect(await failure(step())).toMatchObject({ name: 'ValidationError', message: 'a volume is required', field: 'volume' });
    }
    expect(h.nodeEvents.map((e) => e.details.volume_id)).toEqual(['undefined', 'undefined', 'undefined']);
  });

  it('a mount table read failing for a fault of the agent is logged with the volume, alloc, path, attempt and backoff', async () => {
    await vm.stageVolume(vol, usage);
    const faulted = failMountCheckOnce();
    const warned = () => h.logger.find('cannot read the mount table for a fault of the agent itself; checking again', 'warn');
    const publishing = vm.publishVolume(vol, 'alloc-a', usage);
    // The alloc dir is made on the real filesystem first: wait for the fault
    // itself (however slow the disk), then for its warning, before moving time.
    await faulted;
    for (let i = 0; i < 100 && warned().length === 0; i++) await h.settle();
    await h.advance(1_000);
    await publishing;
    expect(warned().map((r) => r.fields)).toEqual([
      expect.objectContaining({
        volumeId: 'vol-1',
        allocId: 'alloc-a',
        target: targetOf('alloc-a'),
        attempt: 1,
        delayMs: expect.any(Number),
        error: 'EMFILE: too many open files',
      }),
    ]);
  });

  it('node events are frozen: one listener cannot change what the next one reads', async () => {
    await vm.stageVolume(vol, usage);
    await vm.publishVolume(vol, 'alloc-a', usage);
    const event = h.nodeEvents[0]!;
    expect(Object.isFrozen(event)).toBe(true);
    expect(Object.isFrozen(event.details)).toBe(true);
  });

  it('each step logs what it did, naming the plugin, the volume, the alloc and the path', async () => {
    const fields = (msg: string) => h.logger.find(msg).map((r) => r.fields);
    const who = { component: 'csi-volume-manager', pluginId: 'my-plugin', volumeId: 'vol-1' };
    await vm.stageVolume(vol, usage);
    await vm.stageVolume(vol, usage);
    await vm.publishVolume(vol, 'alloc-a', usage);
    await vm.publishVolume(vol, 'alloc-a', usage);
    await vm.unpublishVolume(vol, 'alloc-a', usage);
    b().failNext('NodeUnpublishVolume', csiError(GrpcStatus.NOT_FOUND, 'NodeUnpublishVolume'));
    await vm.unpublishVolume(vol, 'alloc-a', usage);
    await vm.unstageVolume(vol, usage);
    b().failNext('NodeUnstageVolume', csiError(GrpcStatus.NOT_FOUND, 'NodeUnstageVolume'));
    await vm.unstageVolume(vol, usage);
    expect(fields('volume staged')).toEqual([expect.objectContaining({ ...who, stagingPath: stagingOf() })]);
    expect(fields('volume already staged; reusing the staging mount')).toEqual([
      expect.objectContaining({ ...who, stagingPath: stagingOf() }),
    ]);
    expect(fields('volume published')).toEqual([expect.objectContaining({ ...who, allocId: 'alloc-a', targetPath: targetOf('alloc-a') })]);
    expect(fields('volume already published for this alloc; reusing it')).toEqual([
      expect.objectContaining({ ...who, allocId: 'alloc-a', targetPath: targetOf('alloc-a') }),
    ]);
    expect(fields('volume unpublished')).toEqual([
      expect.objectContaining({ ...who, allocId: 'alloc-a' }),
      expect.objectContaining({ ...who, allocId: 'alloc-a' }),
    ]);
    expect(fields('NodeUnpublishVolume: plugin reports NOT_FOUND; counted as unpublished')).toEqual([
      expect.objectContaining({ ...who, allocId: 'alloc-a' }),
    ]);
    expect(fields('volume unstaged')).toEqual([expect.objectContaining(who), expect.objectContaining(who)]);
    expect(fields('NodeUnstageVolume: plugin reports NOT_FOUND; counted as unstaged')).toEqual([expect.objectContaining(who)]);
  });

  it('a staging check failing for a fault of the agent is logged without an alloc (the staging is shared)', async () => {
    const faulted = failMountCheckOnce();
    const warned = () => h.logger.find('cannot read the mount table for a fault of the agent itself; checking again', 'warn');
    const staging = vm.stageVolume(vol, usage);
    await faulted;
    for (let i = 0; i < 100 && warned().length === 0; i++) await h.settle();
    await h.advance(1_000);
    await staging;
    expect(warned().map((r) => r.fields)).toEqual([expect.objectContaining({ volumeId: 'vol-1', allocId: '', target: stagingOf() })]);
  });

  it('mountInfoFor a plugin whose node info is not known yet names no staging path', async () => {
    const flat = plugin(1, 'csi-node', { name: 'blank' });
    h.behaviour(flat).nodeId = ''; // NodeGetInfo keeps failing: no node info
    h.registry.register(flat);
    await h.settle();
    expect(h.manager.pluginInfo('csi-node', 'blank')?.node).toBeUndefined();
    const info = h.manager.volumeManager('blank').mountInfoFor('v', 'alloc-a', usage);
    expect(info.stagingPath).toBeUndefined();
    expect(info.targetPath).toBe(
      path.join(h.dataDir, 'csi', 'node', 'blank', 'per-alloc', 'alloc-a', 'v', 'rw-file-system-single-node-writer'),
    );
  });

  it('a refused argument is a ValidationError naming its field', async () => {
    expect(await failure(vm.stageVolume({ ...vol, pluginId: 'other' }, usage))).toMatchObject({
      name: 'ValidationError',
      field: 'pluginId',
    });
    expect(await failure(vm.stageVolume({ ...vol, id: '' }, usage))).toMatchObject({ field: 'volume id' });
    expect(await failure(vm.publishVolume(vol, 'a/b', usage))).toMatchObject({ field: 'alloc id' });
    expect(await failure(vm.unpublishVolume(vol, '', usage))).toMatchObject({ field: 'alloc id' });
  });
});
