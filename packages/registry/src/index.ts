// Public face of @csiplug/registry.
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
