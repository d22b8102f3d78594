// The cluster package's contract: the token of this agent's node in its
// cluster and of cluster mode over it, both bound by the cluster module
// (module.ts), and the token of what cluster mode uses of the agent it runs
// in, bound by that agent (its composition root) before it resolves
// IClusterMode: the cluster package never imports the agent.
import type { ClusterNode } from './cluster-node';
import type { ClusterAgent } from './mode/cluster-agent';
import type { ClusterMode } from './mode/cluster-mode';

export type IClusterNode = ClusterNode;
export const IClusterNode: unique symbol = Symbol('IClusterNode');

/** Cluster mode (mode/cluster-mode.ts): made on first resolve, once the modules started and the agent bound IClusterAgent. */
export type IClusterMode = ClusterMode;
export const IClusterMode: unique symbol = Symbol('IClusterMode');

/** What cluster mode uses of the agent it runs in (mode/cluster-agent.ts); the agent binds it. */
export type IClusterAgent = ClusterAgent;
export const IClusterAgent: unique symbol = Symbol('IClusterAgent');
