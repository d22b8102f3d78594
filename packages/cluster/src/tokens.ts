// The cluster package's contract: the token of this agent's node in its
// cluster, bound by the cluster module (module.ts).
import type { ClusterNode } from './cluster-node';

export type IClusterNode = ClusterNode;
export const IClusterNode: unique symbol = Symbol('IClusterNode');
