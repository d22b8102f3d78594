// Public face of @csiplug/csimanager.
// @csiplug/core first: it loads the Reflect metadata API tsyringe needs (an empty project's require of this package just works).
import '@csiplug/core';
export * from './csi-manager';
export * from './csi-volume-manager';
export * from './default-csi-manager';
export * from './errors';
export * from './keyed-mutex';
export * from './metrics';
export * from './mount-table';
export * from './node-event';
export * from './plugin-info';
export * from './plugin-instance';
export * from './plugin-options';
export * from './register';
export * from './tokens';
export * from './usage';
export * from './volume-manager';
export * from './volume-paths';
