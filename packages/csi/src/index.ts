// Public face of @csiplug/csi.
// @csiplug/core first: it loads the Reflect metadata API tsyringe needs (an empty project's require of this package just works).
import '@csiplug/core';
export * from './capabilities';
export * from './client';
export * from './endpoint';
export * from './errors';
export { DEFAULT_CHANNEL_OPTIONS, GrpcInvoker } from './invoker';
export type { CsiInvoker, InvokeError } from './invoker';
export * from './proto';
export * from './register';
export * from './retry';
export * from './server';
export * from './tokens';
export * from './types';
