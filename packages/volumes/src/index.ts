// Public face of @csiplug/volumes: this node's volumes. ./catalog is the
// local volume catalog (volumes, claims by access mode, create/delete and
// controller publish through the plugin) with the VolumeClaimer contract
// and its tokens; ./reconciler the volume reconciler; ./module both as one
// Module (volumesModule).
// @csiplug/core first: it loads the Reflect metadata API tsyringe needs (an empty project's require of this package just works).
import '@csiplug/core';
export * from './catalog';
export * from './reconciler';
export * from './module';
