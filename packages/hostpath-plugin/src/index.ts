// Public face of @csiplug/hostpath-plugin.
export * from './config';
export * from './data';
export * from './errors';
export * from './faults';
export * from './main';
export * from './mounter';
export * from './mountinfo';
export { HostPathPlugin } from './plugin';
export type { HostPathPluginDeps } from './plugin';
export * from './volume-store';
