// What FakeCSIManager does beyond the plugin-wait contract it shares with
// DefaultCSIManager (test/csi-manager-contract.test.ts): plugins set and
// removed by hand, types that never come up, the record of waits, and the
// volume managers of node plugins.
import { ShutdownError } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import { CSIPluginWaitTimeoutError, PluginInstanceNotFoundError } from '../src';
import { FakeCSIManager, FakeMountTable, FakeVolumeManager, fakePluginInfo } from '../src/testing';

describe('FakeCSIManager', () => {
  let clock: FakeClock;
  let csi: FakeCSIManager;
  beforeEach(() => {
    clock = new FakeClock(0);
    csi = new FakeCSIManager({ clock, timeouts: { pluginWait: (phase) => ({ prerun: 1_000, restore: 5_000, postrun: 60_000 })[phase] } });
  });
  afterEach(() => csi.dispose());

  it('records every wait, and fails waits for an unavailable type at once, as after the phase limit', async () => {
    csi.unavailable.add('csi-controller');
    const err = await csi.waitForPlugin('csi-controller', 'hp', 'prerun').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CSIPluginWaitTimeoutError);
    expect(err).toMatchObject({ pluginType: 'csi-controller', pluginName: 'hp', phase: 'prerun', waitedMs: 1_000 });
    csi.bringUp('hp');
    await csi.waitForPlugin('csi-node', 'hp', 'restore');
    expect(csi.waits).toEqual([
      { type: 'csi-controller', name: 'hp', phase: 'prerun' },
      { type: 'csi-node', name: 'hp', phase: 'restore' },
    ]);
  });

  it('takes plugin infos set by hand, firing a health change only when healthy changes', async () => {
    csi.set(fakePluginInfo('csi-controller', 'hp', { healthy: false, description: 'probe failed' }));
    csi.set(fakePluginInfo('csi-controller', 'hp', { healthy: false, description: 'still failing' }));
    csi.set(fakePluginInfo('csi-controller', 'hp'));
    expect(csi.healthChanges.map((c) => [c.healthy, c.previous])).toEqual([
      [false, undefined],
      [true, false],
    ]);
    expect(csi.pluginInfo('csi-controller', 'hp')?.controller?.supportsCreateDelete).toBe(true);
  });

  it('a node plugin’s volume manager exists while it is up; a removed healthy plugin reports itself unhealthy once', async () => {
    expect(() => csi.volumeManager('hp')).toThrow(PluginInstanceNotFoundError);
    csi.bringUp('hp');
    const vm = csi.volumeManager('hp');
    expect(vm).toBeInstanceOf(FakeVolumeManager);
    expect(vm.pluginId).toBe('hp');
    csi.bringDown('hp');
    expect(() => csi.volumeManager('hp')).toThrow(PluginInstanceNotFoundError);
    expect((vm as FakeVolumeManager).down).toBe(true);
    expect(csi.healthChanges.map((c) => [c.name, c.healthy, c.previous])).toEqual([
      ['hp', true, undefined],
      ['hp', false, true],
    ]);
    csi.bringUp('hp');
    expect(csi.volumeManager('hp')).toBe(vm);
    expect((vm as FakeVolumeManager).down).toBe(false);
  });

  it('volume managers change the manager’s mount table', async () => {
    const mounts = new FakeMountTable();
    const withMounts = new FakeCSIManager({ clock, mounts });
    withMounts.bringUp('hp');
    const info = await withMounts.volumeManager('hp').publishVolume({ id: 'v1', pluginId: 'hp' }, 'alloc-1', {
      readOnly: false,
      attachmentMode: 'file-system',
      accessMode: 'single-node-writer',
    });
    expect(mounts.has(info.targetPath)).toBe(true);
    await withMounts.dispose();
  });

  it('dispose rejects the waits still pending with ShutdownError', async () => {
    const pending = csi.waitForPlugin('csi-node', 'late', 'postrun');
    expect(csi.pendingWaits).toBe(1);
    await csi.dispose();
    await expect(pending).rejects.toBeInstanceOf(ShutdownError);
    expect(csi.pendingWaits).toBe(0);
    expect(clock.pendingTimers).toBe(0);
  });
});
