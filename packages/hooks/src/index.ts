// Public face of @csiplug/hooks.
// @csiplug/core first: it loads the Reflect metadata API tsyringe needs (an empty project's require of this package just works).
import '@csiplug/core';
export * from './csi-hook';
// The csi_plugin block's check is core's vocabulary (the jobspec reader runs it); re-exported here, where it was.
export { CSI_PLUGIN_TYPES, parseCsiPluginConfig } from '@csiplug/core';
export * from './csi-plugin-supervisor-hook';
export * from './hook';
export * from './hook-order';
export * from './paths';
export * from './register';
export * from './tokens';
export * from './volume-claimer';
export * from './wait-for-path';
export * from './shared-mount';
