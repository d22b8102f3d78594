// FakeVolumeManager keeps the step contract the volume reconciler's tests
// rely on: idempotent steps checked against its FakeMountTable, the plugin's
// absence as PluginInstanceNotFoundError, aborts, and injected failures and
// hangs that act once per call, in order.
import { AbortError, ValidationError } from '@csiplug/core';
import { PluginInstanceNotFoundError, VolumeOperationError } from '../errors';
import type { UsageOptions } from '../usage';
import { FakeMountTable } from './fake-mount-table';
import { FakeVolumeManager } from './fake-volume-manager';

const rw: UsageOptions = { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' };
const ro: UsageOptions = { readOnly: true, attachmentMode: 'file-system', accessMode: 'multi-node-reader-only' };
const vol = { id: 'vol1', externalId: 'ext-vol1', pluginId: 'hostpath' };
const ROOT = '/var/lib/csiplug/csi/node/hostpath';

function setup() {
  const mounts = new FakeMountTable();
  return { mounts, vm: new FakeVolumeManager('hostpath', mounts) };
}

describe('FakeVolumeManager', () => {
  test('stage, publish, unpublish, unstage mark and unmark the paths of the real layout, and are recorded in order', async () => {
    const { mounts, vm } = setup();
    await vm.stageVolume(vol, rw, { attached: 'yes' });
    const info = await vm.publishVolume(vol, 'a1', rw, { attached: 'yes' });
    expect(info).toEqual({
      source: `${ROOT}/per-alloc/a1/vol1/rw-file-system-single-node-writer`,
      targetPath: `${ROOT}/per-alloc/a1/vol1/rw-file-system-single-node-writer`,
      stagingPath: `${ROOT}/staging/vol1/rw-file-system-single-node-writer`,
    });
    expect(vm.mountInfoFor('vol1', 'a1', rw)).toEqual(info);
    expect([...mounts.points].sort()).toEqual([info.targetPath, info.stagingPath]);
    expect(await vm.hasMount(info.targetPath)).toBe(true);
    await vm.unpublishVolume(vol, 'a1', rw);
    await vm.unstageVolume(vol, rw);
    expect(mounts.points.size).toBe(0);
    expect(vm.calls).toEqual(['stage vol1', 'publish vol1 a1', 'unpublish vol1 a1', 'unstage vol1']);
    expect(vm.changes).toEqual([
      'stage vol1 rw-file-system-single-node-writer',
      'publish vol1 a1 rw-file-system-single-node-writer',
      'unpublish vol1 a1 rw-file-system-single-node-writer',
      'unstage vol1 rw-file-system-single-node-writer',
    ]);
    expect(vm.requests[1]).toEqual({ step: 'publish', volume: vol, allocId: 'a1', usage: rw, publishContext: { attached: 'yes' } });
  });

  test('a step whose work is done already changes nothing (stage and publish of a mount point, unpublish and unstage of none)', async () => {
    const { mounts, vm } = setup();
    await vm.stageVolume(vol, rw);
    await vm.stageVolume(vol, rw);
    await vm.stageVolume(vol, ro);
    await vm.publishVolume(vol, 'a1', rw);
    await vm.publishVolume(vol, 'a1', rw);
    expect(vm.changes).toEqual([
      'stage vol1 rw-file-system-single-node-writer',
      'stage vol1 ro-file-system-multi-node-reader-only',
      'publish vol1 a1 rw-file-system-single-node-writer',
    ]);
    await vm.unpublishVolume(vol, 'a2', rw);
    mounts.unmark(`${ROOT}/staging/vol1/ro-file-system-multi-node-reader-only`);
    await vm.unstageVolume(vol, ro);
    expect(vm.changes).toHaveLength(3);
    expect(vm.calls).toHaveLength(7);
  });

  test('a plugin that does not stage: no staging path in the mount info, unstage changes nothing', async () => {
    const { mounts, vm } = setup();
    vm.staging = false;
    expect(await vm.requiresStaging()).toBe(false);
    const info = await vm.publishVolume(vol, 'a1', rw);
    expect(info.stagingPath).toBeUndefined();
    mounts.mark(`${ROOT}/staging/vol1/rw-file-system-single-node-writer`);
    await vm.unstageVolume(vol, rw);
    expect(vm.changes).toEqual(['publish vol1 a1 rw-file-system-single-node-writer']);
  });

  test('while the plugin is down every step throws PluginInstanceNotFoundError and changes nothing', async () => {
    const { mounts, vm } = setup();
    await vm.publishVolume(vol, 'a1', rw);
    vm.down = true;
    await expect(vm.requiresStaging()).rejects.toBeInstanceOf(PluginInstanceNotFoundError);
    await expect(vm.stageVolume(vol, rw)).rejects.toThrow(/plugin "hostpath" of type csi-node not found/);
    await expect(vm.unpublishVolume(vol, 'a1', rw)).rejects.toBeInstanceOf(PluginInstanceNotFoundError);
    expect(() => vm.mountInfoFor('vol1', 'a1', rw)).toThrow(PluginInstanceNotFoundError);
    expect(vm.externalNodeId).toBeUndefined();
    expect(mounts.points.size).toBe(1);
    vm.down = false;
    await vm.unpublishVolume(vol, 'a1', rw);
    expect(mounts.points.size).toBe(0);
  });

  test('failNext fails the next calls of one step, before its work or (after) once it is done', async () => {
    const { mounts, vm } = setup();
    vm.failNext('publish', { times: 2 });
    vm.failNext('stage', { after: true, error: new Error('NodeStageVolume: deadline exceeded') });
    const err = await vm.publishVolume(vol, 'a1', rw).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VolumeOperationError);
    expect((err as Error).message).toBe(
      'mount of volume "vol1" for alloc a1 on plugin "hostpath" failed at NodePublishVolume: injected failure',
    );
    await expect(vm.publishVolume(vol, 'a1', rw)).rejects.toThrow(/injected failure/);
    expect(mounts.points.size).toBe(0);
    await expect(vm.stageVolume(vol, rw)).rejects.toThrow('NodeStageVolume: deadline exceeded');
    expect(mounts.has(`${ROOT}/staging/vol1/rw-file-system-single-node-writer`)).toBe(true);
    expect(vm.pendingInjections()).toEqual({ stage: 0, publish: 0, unpublish: 0, unstage: 0 });
    await vm.publishVolume(vol, 'a1', rw);
    expect(vm.calls).toEqual(['publish vol1 a1', 'publish vol1 a1', 'stage vol1', 'publish vol1 a1']);
  });

  test('hangNext holds a call until the test releases it, or rejects with the abort reason of its signal', async () => {
    const { mounts, vm } = setup();
    const hang = vm.hangNext('publish');
    let done = false;
    const p = vm.publishVolume(vol, 'a1', rw).then(() => (done = true));
    await hang.reached;
    expect(done).toBe(false);
    expect(mounts.points.size).toBe(0);
    hang.release();
    await p;
    expect(mounts.points.size).toBe(1);

    const after = vm.hangNext('stage', { after: true });
    const ac = new AbortController();
    const reason = new Error('alloc a1 stopped');
    const staging = vm.stageVolume(vol, rw, {}, { signal: ac.signal });
    await after.reached;
    // Hanging after its work: the staging path is mounted, the caller has not heard back.
    expect(mounts.has(`${ROOT}/staging/vol1/rw-file-system-single-node-writer`)).toBe(true);
    ac.abort(reason);
    await expect(staging).rejects.toBe(reason);
  });

  test('a signal aborted before the call rejects it with its reason and runs nothing; a volume of another plugin is refused', async () => {
    const { mounts, vm } = setup();
    const ac = new AbortController();
    ac.abort();
    await expect(vm.publishVolume(vol, 'a1', rw, {}, { signal: ac.signal })).rejects.toBeInstanceOf(AbortError);
    await expect(vm.stageVolume({ ...vol, pluginId: 'other' }, rw)).rejects.toBeInstanceOf(ValidationError);
    expect(mounts.points.size).toBe(0);
  });
});
