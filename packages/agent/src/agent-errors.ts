// The errors the agent's service facade answers with; the API's
// statusForError gives each its HTTP status by its code. NotFoundError is the
// service interface's (@csiplug/api), ConflictError core's and
// ClusterUnavailableError cluster mode's (@csiplug/cluster), re-exported here.
import { ShutdownError } from '@csiplug/core';

/** The agent is shutting down and takes no new work (HTTP 503). */
export class AgentShuttingDownError extends ShutdownError {
  constructor() {
    super('the agent is shutting down; retry against the next agent');
  }
}

// A request the state of things refuses now (a volume claimed by a running alloc…): HTTP 409, core's one ECONFLICT class.
export { ConflictError } from '@csiplug/core';

// The cluster's etcd does not answer (HTTP 503): cluster mode's error.
export { ClusterUnavailableError } from '@csiplug/cluster';

// A job or alloc the agent does not know (HTTP 404) is the service interface's own error (the in-memory service throws it too).
export { NotFoundError } from '@csiplug/api';
