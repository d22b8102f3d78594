// Public face of @csiplug/cluster: cluster mode on etcd.
// @csiplug/core first: it loads the Reflect metadata API tsyringe needs (an empty project's require of this package just works).
import '@csiplug/core';
export * from './claims';
export * from './cluster-claimer';
export * from './connect';
export * from './node-registry';
export * from './options';
