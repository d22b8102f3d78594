// volumesModule: @csiplug/volumes as one Module — the local volume catalog
// and the volume reconciler, registered together (registerVolumeCatalog,
// registerVolumeReconciler). Start makes both, has the catalog settle the
// volume operations and the reconciler resume the unmounts a previous agent left; stop disposes the reconciler (its
// retries end; the records stay for the next start), then the catalog.
// IVolumeSpecValidator is not the module's to bind: whoever reads volume
// specs (the agent) binds it before the module starts, which makes the
// catalog — without one, start fails with VolumeSpecValidatorMissingError.
import { declareTokenOwner, isDisposable, type Module } from '@csiplug/core';
import { IVolumeCatalog, IVolumeClaimer, VolumeCatalog, registerVolumeCatalog, type VolumeCatalogService } from './catalog';
import { IMountStore, IVolumeReconciler, registerVolumeReconciler, type VolumeReconcilerService } from './reconciler';

export const volumesModule: Module = {
  name: 'volumes',
  register: (container) => {
    registerVolumeCatalog(container);
    registerVolumeReconciler(container);
  },
  start: (container) => {
    // Made here, not on a first use during stop: stop disposes what start made.
    const catalog = container.resolve<VolumeCatalogService>(IVolumeCatalog);
    // The default catalog settles the creates, expands and deletes a previous agent cut short (a deployment's own has none).
    if (catalog instanceof VolumeCatalog) catalog.resumeInterruptedOps();
    container.resolve<VolumeReconcilerService>(IVolumeReconciler).start();
  },
  stop: (container) => {
    container.resolve<VolumeReconcilerService>(IVolumeReconciler).dispose();
    // The catalog's contract has no dispose (a deployment's own may hold nothing); the default one owns its event emitter.
    const catalog = container.resolve<VolumeCatalogService>(IVolumeCatalog);
    if (isDisposable(catalog)) catalog.dispose();
  },
};

declareTokenOwner({ name: 'volumes', exportName: 'volumesModule', packageName: '@csiplug/volumes' }, [
  IVolumeCatalog,
  IVolumeClaimer,
  IMountStore,
  IVolumeReconciler,
]);
