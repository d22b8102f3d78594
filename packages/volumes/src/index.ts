// Public face of @csiplug/volumes: this node's volumes. ./catalog is the
// local volume catalog (volumes, claims by access mode, create/delete and
// controller publish through the plugin) with the VolumeClaimer contract
// and its tokens; ./reconciler the volume reconciler; ./module both as one
// Module (volumesModule).
export * from './catalog';
export * from './reconciler';
export * from './module';
