// One base error for csiplug with a stable, machine-readable `code` and an
// optional `cause`; each package derives its own typed errors from it.

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
  constructor(message: string, readonly timeoutMs: number, options?: { cause?: unknown }) {
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
  constructor(message: string, readonly field?: string) {
    super('EINVALID', message);
  }
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
