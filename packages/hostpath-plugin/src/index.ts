// Public face of @csiplug/hostpath-plugin.
// @csiplug/core first: it loads the Reflect metadata API tsyringe needs (an empty project's require of this package just works).
import '@csiplug/core';
export * from './config';
export * from './data';
export * from './errors';
export * from './faults';
export * from './main';
export * from './mounter';
export * from './mountinfo';
export { HostPathPlugin } from './plugin';
export * from './request-log';
export type { HostPathPluginDeps } from './plugin';
export * from './volume-store';
