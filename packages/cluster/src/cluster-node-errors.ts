// The cluster node's own errors (cluster-node.ts).
import { CsiplugError } from '@csiplug/core';

/** The cluster node was used before the cluster module started (its identity not read, etcd not connected). */
export class ClusterNodeNotOpenError extends CsiplugError {
  constructor(nodeName: string) {
    super(
      'ECLUSTER_NOT_STARTED',
      `cluster node "${nodeName}" was used before the cluster module started; the agent must start its cluster module (the config's cluster {} block) before it claims volumes or joins the cluster: report this with the agent's log`,
    );
  }
}
