// Typed errors of @csiplug/csi. A CSIError carries the gRPC status code, the
// RPC, the plugin endpoint and a sentence a person can act on. Whether an
// error is NOT_FOUND or worth retrying comes from the code, never the text.
import { status as GrpcStatus } from '@grpc/grpc-js';
import { CsiplugError, ValidationError } from '@csiplug/core';

export { GrpcStatus };
export type GrpcStatusCode = GrpcStatus;

/** Codes retried by default: transient transport trouble, overload, and concurrent-operation conflicts. */
export const DEFAULT_RETRYABLE_CODES: readonly GrpcStatus[] = Object.freeze([
  GrpcStatus.UNAVAILABLE,
  GrpcStatus.RESOURCE_EXHAUSTED,
  GrpcStatus.ABORTED,
]);

/** The name of a numeric gRPC status code ("NOT_FOUND"), or "CODE_<n>" for an unknown one. */
export function grpcCodeName(code: number): string {
  const name = (GrpcStatus as unknown as Record<number, string>)[code];
  return typeof name === 'string' ? name : `CODE_${code}`;
}

export interface CSIErrorInit {
  grpcCode: number;
  method: string;
  endpoint: string;
  /** The plugin's own status message (or the local reason). */
  details: string;
  attempts?: number;
  /** True when the client refused the call before sending it. */
  local?: boolean;
  timeoutMs?: number;
  cause?: unknown;
}

function describe(init: CSIErrorInit): string {
  const name = grpcCodeName(init.grpcCode);
  const rpc = `CSI ${init.method}`;
  const where = `plugin at ${init.endpoint}`;
  const tries = init.attempts && init.attempts > 1 ? ` (after ${init.attempts} attempts)` : '';
  const details = init.details ? `: ${init.details}` : '';
  if (init.local) return `${rpc} not sent to ${where}: ${init.details}`;
  switch (init.grpcCode) {
    case GrpcStatus.UNAVAILABLE:
      return `${rpc} failed: ${where} is not reachable${tries} (UNAVAILABLE${details}); check that the plugin is running and listening on that socket`;
    case GrpcStatus.DEADLINE_EXCEEDED:
      return `${rpc} got no answer from ${where} within ${init.timeoutMs ?? '?'} ms${tries} (DEADLINE_EXCEEDED); the plugin may be hung or overloaded`;
    case GrpcStatus.UNIMPLEMENTED:
      return `${where} does not implement ${rpc} (UNIMPLEMENTED${details}); check its capabilities before calling`;
    case GrpcStatus.NOT_FOUND:
      return `${rpc} failed: ${where} reports NOT_FOUND${details}`;
    default:
      return `${rpc} failed on ${where}${tries}: ${name}${details}`;
  }
}

export class CSIError extends CsiplugError {
  /** Numeric gRPC status code (see GrpcStatus). */
  readonly grpcCode: number;
  /** Its name, e.g. "NOT_FOUND". */
  readonly codeName: string;
  /** The CSI RPC, e.g. "NodeStageVolume". */
  readonly method: string;
  /** The plugin endpoint as the client was given it. */
  readonly endpoint: string;
  /** The plugin's status message, or the local reason. */
  readonly details: string;
  /** How many attempts were made (0 when refused locally). */
  readonly attempts: number;
  /** True when the client refused the call before sending it. */
  readonly local: boolean;

  constructor(init: CSIErrorInit) {
    super(`ECSI_${grpcCodeName(init.grpcCode)}`, describe(init), init.cause !== undefined ? { cause: init.cause } : undefined);
    this.grpcCode = init.grpcCode;
    this.codeName = grpcCodeName(init.grpcCode);
    this.method = init.method;
    this.endpoint = init.endpoint;
    this.details = init.details;
    this.attempts = init.attempts ?? (init.local ? 0 : 1);
    this.local = init.local ?? false;
  }

  isNotFound(): boolean {
    return this.grpcCode === GrpcStatus.NOT_FOUND;
  }

  isRetryable(codes: readonly number[] = DEFAULT_RETRYABLE_CODES): boolean {
    return codes.includes(this.grpcCode);
  }

  isUnimplemented(): boolean {
    return this.grpcCode === GrpcStatus.UNIMPLEMENTED;
  }
}

/** True for a CSIError whose code is NOT_FOUND. */
export function isNotFound(err: unknown): boolean {
  return err instanceof CSIError && err.isNotFound();
}

/** True for a CSIError whose code is in `codes` (default: UNAVAILABLE, RESOURCE_EXHAUSTED, ABORTED). */
export function isRetryable(err: unknown, codes: readonly number[] = DEFAULT_RETRYABLE_CODES): boolean {
  return err instanceof CSIError && err.isRetryable(codes);
}

/** True for a CSIError whose code is UNIMPLEMENTED. */
export function isUnimplemented(err: unknown): boolean {
  return err instanceof CSIError && err.isUnimplemented();
}

/**
 * Thrown by server handlers (see serveCsi) to answer with a specific gRPC
 * status. Anything else a handler throws becomes INTERNAL.
 */
export class CSIStatusError extends CsiplugError {
  constructor(
    readonly grpcCode: GrpcStatus,
    message: string,
  ) {
    super(`ECSI_${grpcCodeName(grpcCode)}`, message);
  }
}

/** Shorthands for plugin authors: `throw csiStatus.notFound('volume "x" does not exist')`. */
export const csiStatus = {
  invalidArgument: (m: string) => new CSIStatusError(GrpcStatus.INVALID_ARGUMENT, m),
  notFound: (m: string) => new CSIStatusError(GrpcStatus.NOT_FOUND, m),
  alreadyExists: (m: string) => new CSIStatusError(GrpcStatus.ALREADY_EXISTS, m),
  failedPrecondition: (m: string) => new CSIStatusError(GrpcStatus.FAILED_PRECONDITION, m),
  aborted: (m: string) => new CSIStatusError(GrpcStatus.ABORTED, m),
  outOfRange: (m: string) => new CSIStatusError(GrpcStatus.OUT_OF_RANGE, m),
  resourceExhausted: (m: string) => new CSIStatusError(GrpcStatus.RESOURCE_EXHAUSTED, m),
  unimplemented: (m: string) => new CSIStatusError(GrpcStatus.UNIMPLEMENTED, m),
  internal: (m: string) => new CSIStatusError(GrpcStatus.INTERNAL, m),
  unavailable: (m: string) => new CSIStatusError(GrpcStatus.UNAVAILABLE, m),
};

/**
 * csi.proto is neither in the package (dist/proto/csi.proto, copied by the
 * build) nor in the repository: a broken build or install, not a missing
 * volume or plugin, hence not a _NOT_FOUND code.
 */
export class CsiProtoMissingError extends CsiplugError {
  constructor(readonly searched: readonly string[]) {
    super(
      'ECSIPROTO_MISSING',
      `csi.proto not found; looked in ${searched.join(', ')}. Rebuild @csiplug/csi (its build copies the proto into dist/proto) or reinstall it.`,
    );
  }
}

/** A CSI RPC name csi.proto does not define for the service: bad input, so a ValidationError (EINVALID). */
export class UnknownCsiMethodError extends ValidationError {
  constructor(
    readonly service: string,
    readonly rpc: string,
  ) {
    super(`CSI ${service} has no method ${JSON.stringify(rpc)}; see csi.proto for the RPCs of each service`, 'rpc');
  }
}
