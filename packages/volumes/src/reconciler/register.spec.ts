// registerVolumeReconciler (register.ts) as the agent uses it: the store it
// binds adopts what an older agent left, logging as the volume reconciler,
// and IVolumeReconciler resolves to one VolumeReconciler over what the
// container holds (here the package's fakes), the store bound first kept.
import { DefaultTimeoutPolicy, IClock, ILogger, ITimeoutPolicy, MemoryLogger } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import { ICSIManager, IMountTable } from '@csiplug/csimanager';
import { FakeCSIManager, FakeMountTable } from '@csiplug/csimanager/testing';
import { IClientStateDB, openClientState, registerState } from '@csiplug/state';
import { container as rootContainer } from 'tsyringe';
import { IVolumeClaimer } from '../catalog/tokens';
import { FakeClaimer } from '../testing/fake-claimer';
import { FakeMountStore } from '../testing/fake-mount-store';
import type { MountStore } from './mount-store';
import { registerVolumeReconciler } from './register';
import { IMountStore, IVolumeReconciler } from './tokens';
import { VolumeReconciler } from './volume-reconciler';

const NOW = Date.UTC(2026, 0, 1);
const RW = { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' } as const;

test("the store it binds adopts an older agent's mounts when first resolved, logging as the volume reconciler", () => {
  const db = openClientState({ memory: true });
  db.putAllocation('a1', { id: 'a1' });
  db.putVolumeStubs('a1', {
    data: { name: 'data', volumeId: 'vol1', pluginId: 'hostpath', targetPath: '/t/a1', usage: RW },
  });
  const log = new MemoryLogger();
  const container = rootContainer.createChildContainer();
  container.registerInstance(IClientStateDB, db);
  registerState(container, { backend: 'memory' });
  container.registerInstance(ILogger, log);
  container.registerInstance(IClock, new FakeClock(NOW));
  registerVolumeReconciler(container);

  const store = container.resolve<MountStore>(IMountStore);
  expect(store.list().records).toEqual([expect.objectContaining({ allocId: 'a1', name: 'data', volumeId: 'vol1', since: NOW })]);
  expect(log.find('adopted the volume state of an older agent', 'info').map((l) => l.fields)).toEqual([
    { component: 'volume-reconciler', records: 1 },
  ]);
});

test('IVolumeReconciler resolves to a VolumeReconciler that starts over what is bound; a store bound before is kept', async () => {
  const clock = new FakeClock(NOW);
  const mounts = new FakeMountTable();
  const csi = new FakeCSIManager({ clock, mounts });
  const store = new FakeMountStore();
  const container = rootContainer.createChildContainer();
  container.registerInstance(ILogger, new MemoryLogger());
  container.registerInstance(IClock, clock);
  container.registerInstance(ITimeoutPolicy, new DefaultTimeoutPolicy());
  container.registerInstance(ICSIManager, csi);
  container.registerInstance(IMountTable, mounts);
  container.registerInstance(IVolumeClaimer, new FakeClaimer());
  container.registerInstance(IMountStore, store);
  registerVolumeReconciler(container);

  expect(container.resolve(IMountStore)).toBe(store);
  const reconciler = container.resolve<VolumeReconciler>(IVolumeReconciler);
  expect(reconciler).toBeInstanceOf(VolumeReconciler);
  try {
    reconciler.start();
    expect(reconciler.list()).toEqual([]);
  } finally {
    reconciler.dispose();
  }
});
