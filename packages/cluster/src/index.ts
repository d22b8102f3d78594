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
// Cluster mode over the node: the agent resolves it (IClusterMode) after binding IClusterAgent.
export { ClusterMode } from './mode/cluster-mode';
export type { ClusterAgent, ClusterAgentSettings } from './mode/cluster-agent';
export { ClusterUnavailableError } from './mode/cluster-mode-errors';
export type { ClusterVolumeOps } from './mode/cluster-volume-ops';
export { ROUTED_CONTROLLER_PREFIX, dropRoutedControllers, isRoutedController } from './routed-controllers/cluster-controllers';
