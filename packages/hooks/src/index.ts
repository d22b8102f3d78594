// Public face of @csiplug/hooks.
export * from './csi-hook';
export * from './csi-plugin-config';
export * from './csi-plugin-supervisor-hook';
export * from './hook';
export * from './hook-order';
export * from './paths';
export * from './register';
export * from './tokens';
export * from './volume-claimer';
export * from './wait-for-path';
export * from './shared-mount';
