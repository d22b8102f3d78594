// One base error for csiplug with a stable, machine-readable `code` and an
// optional `cause`; each package derives its own typed errors from it.
//
// The error-code convention (also in this package's README):
// - Every error csiplug throws on purpose is a class that extends
//   CsiplugError (usually through its package's base, e.g. RegistryError).
//   No `new CsiplugError(code, …)` at a throw site: make the class.
// - `code` is "E" + UPPER_SNAKE_CASE (ETIMEOUT, EPLUGIN_NOT_FOUND), set by the
//   class's constructor, never by its caller. One code per class (it does
//   not depend on the arguments), and two classes that mean the same thing
//   are one class.
// - A class that refines a shared kind (a plugin wait's TimeoutError, an
//   unknown type's ValidationError) keeps the kind's code, so callers that
//   switch on the code or catch the core class handle it too.
// - A code is stable: callers, logs and the HTTP API's JSON errors carry it.
//   Renaming one is a breaking change; a new meaning gets a new code.
// - Shape says kind: a "not there" code ends in _NOT_FOUND, a clash with
//   the current state in _EXISTS, _IN_USE, _CONFLICT or _BUSY.
// - Documented exceptions: CSIError and CSIStatusError carry "ECSI_" + the
//   gRPC status name (ECSI_NOT_FOUND), a wire status rather than a class;
//   the API's ApiError carries the code the agent answered with; and
//   @csiplug/state keeps bbolt's names (ErrBucketNotFound) so bbolt users
//   recognise them.
// - Errors do not know HTTP: the agent's API maps codes to statuses in one
//   place (statusForError, by the shapes above), not the error classes.

export class CsiplugError extends Error {
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause !== undefined ? { cause: options.cause } : undefined);
    this.code = code;
    this.name = new.target.name;
  }
}

/** A wait that ran out of time. Says what was waited for and how long. */
export class TimeoutError extends CsiplugError {
  constructor(
    message: string,
    readonly timeoutMs: number,
    options?: { cause?: unknown },
  ) {
    super('ETIMEOUT', message, options);
  }
}

/** An operation given up because its AbortSignal fired. */
export class AbortError extends CsiplugError {
  constructor(message = 'the operation was aborted', options?: { cause?: unknown }) {
    super('EABORTED', message, options);
  }
}

/** An operation refused or cut short because its owner is shutting down. */
export class ShutdownError extends CsiplugError {
  constructor(message: string) {
    super('ESHUTDOWN', message);
  }
}

/** Bad input: a config value, a jobspec field, an id. Names what and where. */
export class ValidationError extends CsiplugError {
  constructor(
    message: string,
    readonly field?: string,
  ) {
    super('EINVALID', message);
  }
}

/**
 * A change refused because the state it changes clashes with it, or kept
 * changing under it (a compare-and-swap that lost every try). Says what, and
 * whether trying again can succeed.
 */
export class ConflictError extends CsiplugError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ECONFLICT', message, options);
  }
}

/** What was asked is something this build or mode does not offer (yet): the caller's to change, not to retry. */
export class UnsupportedError extends CsiplugError {
  constructor(message: string) {
    super('EUNSUPPORTED', message);
  }
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
