// Public face of @csiplug/csimanager.
export * from './csi-manager';
export * from './csi-volume-manager';
export * from './default-csi-manager';
export * from './errors';
export * from './keyed-mutex';
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
