// Public face of @csiplug/cluster: cluster mode on etcd.
// @csiplug/core first: it loads the Reflect metadata API tsyringe needs (an empty project's require of this package just works).
import '@csiplug/core';
export * from './claims';
export * from './cluster-claimer';
export * from './cluster-volumes';
export * from './connect';
export * from './jobs';
export * from './node-identity';
export * from './node-registry';
export * from './options';
export * from './scheduler';
export * from './cluster-node';
export * from './cluster-node-errors';
export * from './membership';
export * from './module';
export * from './node-purge';
export * from './tokens';
