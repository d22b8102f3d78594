// The errors the agent's service facade answers with; the API's
// statusForError gives each its HTTP status by its code; NotFoundError is the
// service interface's (@csiplug/api), re-exported here.
import { CsiplugError, ShutdownError } from '@csiplug/core';

/** The agent is shutting down and takes no new work (HTTP 503). */
export class AgentShuttingDownError extends ShutdownError {
  constructor() {
    super('the agent is shutting down; retry against the next agent');
  }
}

/** A request the state of things refuses now (a volume claimed by a running alloc…): HTTP 409. */
export class ConflictError extends CsiplugError {
  constructor(message: string) {
    super('ECONFLICT', message);
  }
}

/** The cluster's etcd does not answer (HTTP 503): what needs it waits; this node's tasks and mounts do not. */
export class ClusterUnavailableError extends CsiplugError {
  constructor(message: string) {
    super('ECLUSTER_UNAVAILABLE', message);
  }
}

// A job or alloc the agent does not know (HTTP 404) is the service interface's own error (the in-memory service throws it too).
export { NotFoundError } from '@csiplug/api';
