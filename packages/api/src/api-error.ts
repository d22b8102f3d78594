// The error of the HTTP API, on both sides of the wire: the server throws it
// to answer with a status, and ApiClient throws it for every failed call.
// Also the one place that decides which status a service error becomes.
import { CsiplugError, ValidationError } from '@csiplug/core';

/** Codes the API itself gives (errors from the service keep their own). */
export const ApiErrorCode = Object.freeze({
  /** A body that is not JSON. */
  BadJson: 'EBAD_JSON',
  /** A body over the size limit. */
  BodyTooLarge: 'EBODY_TOO_LARGE',
  /** Bad input: unknown fields, bad query values, a failed jobspec check (ValidationError's code). */
  Invalid: 'EINVALID',
  /** A missing or wrong ACL token. */
  Forbidden: 'EFORBIDDEN',
  NotFound: 'ENOT_FOUND',
  MethodNotAllowed: 'EMETHOD_NOT_ALLOWED',
  /** The request conflicts with the state (e.g. a claimed volume). */
  Conflict: 'ECONFLICT',
  /** A failure without a code of its own. */
  Internal: 'EINTERNAL',
  /** Client side: the agent could not be reached. */
  Connect: 'ECONNECT',
  /** Client side: the agent answered with something that is not the API's JSON. */
  BadResponse: 'EBAD_RESPONSE',
} as const);

export class ApiError extends CsiplugError {
  /** The HTTP status; 0 when no answer came (client side). */
  readonly status: number;

  constructor(status: number, code: string, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.status = status;
  }

  static badRequest(message: string, code: string = ApiErrorCode.Invalid): ApiError {
    return new ApiError(400, code, message);
  }

  static notFound(message: string): ApiError {
    return new ApiError(404, ApiErrorCode.NotFound, message);
  }
}

/** What an error answer carries: the message (its plain-text body, as Nomad answers) and the code (the ERROR_CODE_HEADER header). */
export interface ApiErrorAnswer {
  message: string;
  code: string;
}

// Service errors carry stable codes; these shapes of code decide the status.
// Packages name their codes E<THING>_NOT_FOUND, E<THING>_IN_USE, … so new
// errors get the right status without this table knowing them.
const NOT_FOUND = /(^ENOENT$|NOT_FOUND$)/;
/** Two codes named before these shapes, kept as they are (a code is stable): a node name another identity holds, a purge refused. */
const CONFLICT = /(^EBUSY$|^ECONFLICT$|CONFLICT$|IN_USE$|CLAIMED$|EXISTS$|_BUSY$|^ENODE_NAME_HELD$|^ENODE_PURGE_REFUSED$)/;
/** What was asked is something the plugin does not offer (a missing capability): the caller's to change. */
const UNSUPPORTED = /UNSUPPORTED$/;
/** Try again (503): a plugin registered but not healthy now, the cluster's etcd not answering, the agent shutting down. */
const UNAVAILABLE = /^(EPLUGIN_UNAVAILABLE|ECLUSTER_UNAVAILABLE|ESHUTDOWN)$/;
/** The agent could not persist the request: its state's filesystem is full (507 Insufficient Storage). */
const NO_SPACE = /(^ENOSPC$|^EDQUOT$|NO_SPACE$)/;

/**
 * The HTTP status for an error thrown by the service: ApiError keeps its own;
 * errors do not know HTTP (core/errors.ts), their codes decide: ValidationError (or
 * code EINVALID) is 400; codes ending in NOT_FOUND (or ENOENT) are 404; codes
 * ending in CONFLICT, IN_USE, CLAIMED, EXISTS or BUSY (and ENODE_NAME_HELD,
 * ENODE_PURGE_REFUSED) are 409; UNSUPPORTED (a plugin capability missing) is 400;
 * EPLUGIN_UNAVAILABLE, ECLUSTER_UNAVAILABLE and ESHUTDOWN are 503; codes ending in
 * NO_SPACE (or ENOSPC, EDQUOT: a write the agent could not persist) are 507;
 * the rest 500.
 */
export function statusForError(err: unknown): number {
  if (err instanceof ApiError && err.status >= 400) return err.status;
  if (err instanceof ValidationError) return 400;
  const code = err instanceof CsiplugError ? err.code : undefined;
  if (code === undefined) return 500;
  if (code === ApiErrorCode.Invalid) return 400;
  if (NOT_FOUND.test(code)) return 404;
  if (CONFLICT.test(code)) return 409;
  if (UNSUPPORTED.test(code)) return 400;
  if (UNAVAILABLE.test(code)) return 503;
  if (NO_SPACE.test(code)) return 507;
  return statusForPluginAnswer(err) ?? 500;
}

/**
 * gRPC status codes (numeric, as the CSI client reports them in `grpcCode`)
 * that say the caller asked for something wrong, not that the agent failed.
 */
const GRPC_STATUS: Readonly<Record<number, number>> = Object.freeze({
  3: 400, // INVALID_ARGUMENT
  5: 404, // NOT_FOUND
  6: 409, // ALREADY_EXISTS
  8: 409, // RESOURCE_EXHAUSTED (e.g. a topology no node of the plugin can satisfy)
  9: 409, // FAILED_PRECONDITION
  10: 409, // ABORTED
  11: 400, // OUT_OF_RANGE
  12: 501, // UNIMPLEMENTED
});

/**
 * A plugin's own answer, found on the error or along its causes (the
 * catalog wraps the CSI error in one that names the volume): the status it
 * means for the API's caller, or undefined.
 */
function statusForPluginAnswer(err: unknown): number | undefined {
  let e: unknown = err;
  for (let depth = 0; depth < 8 && e !== null && typeof e === 'object'; depth++) {
    const grpc = (e as { grpcCode?: unknown; local?: unknown }).grpcCode;
    // A call the client refused locally (bad input on our side, closed client) says nothing about the request.
    if (typeof grpc === 'number' && (e as { local?: unknown }).local !== true) return GRPC_STATUS[grpc];
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** The error answer for `err`: its message and code (EINTERNAL when it has none). */
export function errorAnswer(err: unknown): ApiErrorAnswer {
  const message = err instanceof Error ? err.message : String(err);
  const code = err instanceof CsiplugError ? err.code : ApiErrorCode.Internal;
  return { message: message || 'internal error', code };
}
