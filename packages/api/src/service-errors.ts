// Errors the service interface promises to its callers, whoever implements
// it (the agent, or the in-memory service of @csiplug/api/testing): a route
// turns them into the same HTTP status either way.
import { CsiplugError } from '@csiplug/core';

/** A job or alloc the agent does not know (HTTP 404, by its code's shape: statusForError). */
export class NotFoundError extends CsiplugError {
  constructor(message: string) {
    super('ENOT_FOUND', message);
  }
}
