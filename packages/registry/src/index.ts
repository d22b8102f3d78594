// Public face of @csiplug/registry.
// @csiplug/core first: it loads the Reflect metadata API tsyringe needs (an empty project's require of this package just works).
import '@csiplug/core';
export * from './dynamic-plugin-registry';
export * from './errors';
export * from './events';
export * from './plugin-dispensers';
export * from './plugin-registry';
export * from './plugin-types';
export * from './register';
export * from './registry-store';
export * from './state-registry-store';
export * from './tokens';
