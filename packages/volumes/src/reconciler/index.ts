// The volume reconciler: desired vs actual mounts of this node's volumes.
export * from './errors';
export * from './mount-record';
export * from './mount-store';
export * from './reconciler-service';
export * from './register';
export * from './tokens';
export * from './volume-reconciler';
export { USAGE_ANSWER_WITHIN_MS } from './usage-reader';
