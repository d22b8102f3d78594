// The cluster node's own errors (cluster-node.ts).
import { CsiplugError } from '@csiplug/core';

/** The cluster node was used before the cluster module started (its identity not read, etcd not connected). */
export class ClusterNodeNotOpenError extends CsiplugError {
  constructor(nodeName: string) {
    super(
      'ECLUSTER_NOT_STARTED',
      `cluster node "${nodeName}" was used before the cluster module started; list clusterModule among the agent's modules, and resolve IClusterNode or IVolumeClaimer only once the modules start`,
    );
  }
}
