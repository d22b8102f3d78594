// Public face of @csiplug/csi.
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
