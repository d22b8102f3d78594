// Cluster mode's own error for the API (cluster-mode.ts, cluster-volume-ops.ts):
// the agent's service facade answers with it, and statusForError gives it
// HTTP 503 by its code.
import { CsiplugError } from '@csiplug/core';

/** The cluster's etcd does not answer (HTTP 503): what needs it waits; this node's tasks and mounts do not. */
export class ClusterUnavailableError extends CsiplugError {
  constructor(message: string) {
    super('ECLUSTER_UNAVAILABLE', message);
  }
}
