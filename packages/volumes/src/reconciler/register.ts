// registerVolumeReconciler binds the volume reconciler and its store. It
// expects core, the client state's volume and alloc stores (IVolumeStateStore,
// IAllocStateStore: registerState), the CSI manager and an
// IVolumeClaimer (the volume catalog, or a deployment's own) to be bound by
// the time IVolumeReconciler is first resolved. The default store is the
// client state's csi/mounts bucket; on first use it adopts what an agent
// from before the reconciler left (mount stubs, usage, pending unmounts).
import { bindDefault, IClock, ILogger, type Clock, type Logger } from '@csiplug/core';
import { IAllocStateStore, IVolumeStateStore, type AllocStateStore, type VolumeStateStore } from '@csiplug/state';
import type { DependencyContainer } from 'tsyringe';
import { adoptLegacyVolumeState, StateMountStore, type LegacyVolumeState } from './mount-store';
import { IMountStore, IVolumeReconciler } from './tokens';
import { VolumeReconciler } from './volume-reconciler';

/** The legacy buckets, typed with the shapes the older agent wrote. */
function legacyOf(allocs: AllocStateStore, db: VolumeStateStore): LegacyVolumeState {
  return {
    // The adoption needs the ids alone, not every alloc record (with its whole job) decoded on every start.
    listAllocations: () => ({ allocs: allocs.listAllocationIds().map((allocId) => ({ allocId })) }),
    getVolumeStubs: (allocId) => db.getVolumeStubs(allocId),
    putVolumeStubs: (allocId, stubs) => db.putVolumeStubs(allocId, stubs),
    listVolumeUsage: () => db.listVolumeUsage(),
    putVolumeUsage: (pluginId, volumeId, users) => db.putVolumeUsage(pluginId, volumeId, users),
    listPendingUnmounts: () => db.listPendingUnmounts(),
    deletePendingUnmount: (id) => db.deletePendingUnmount(id),
  };
}

export function registerVolumeReconciler(container: DependencyContainer): void {
  bindDefault(container, IMountStore, {
    useFactory: (c) => {
      const volumes = c.resolve<VolumeStateStore>(IVolumeStateStore);
      const store = new StateMountStore(volumes);
      const logger = c.resolve<Logger>(ILogger).child({ component: 'volume-reconciler' });
      adoptLegacyVolumeState(
        legacyOf(c.resolve<AllocStateStore>(IAllocStateStore), volumes),
        store,
        c.resolve<Clock>(IClock).now(),
        logger,
      );
      return store;
    },
  });
  bindDefault(container, IVolumeReconciler, { useFactory: (c) => c.resolve(VolumeReconciler) });
}
