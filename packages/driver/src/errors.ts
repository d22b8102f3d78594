// Errors of the task driver. Each says which task, what failed and what to
// do; bad input uses the shared ValidationError of @csiplug/core.
import { CsiplugError } from '@csiplug/core';

export class DriverError extends CsiplugError {}

/** The task could not be started: the executor failed, or the command could not be run. */
export class TaskStartError extends DriverError {
  constructor(
    readonly allocId: string,
    readonly taskName: string,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super('ETASK_START', `could not start task "${taskName}" of alloc ${allocId}: ${detail}`, options);
  }
}

/** start() for a task dir whose previous task still runs: stop it (or recover its handle) first. */
export class TaskAlreadyRunningError extends DriverError {
  constructor(
    readonly allocId: string,
    readonly taskName: string,
    readonly pid: number,
  ) {
    super(
      'ETASK_RUNNING',
      `task "${taskName}" of alloc ${allocId} is already running as pid ${pid}; stop it or recover its handle instead of starting it again`,
    );
  }
}

/** A signal could not be delivered for a reason other than the process being gone (EPERM, say). */
export class TaskSignalError extends DriverError {
  constructor(
    readonly taskName: string,
    readonly pid: number,
    readonly signal: string,
    cause: unknown,
  ) {
    super(
      'ETASK_SIGNAL',
      `could not send ${signal} to task "${taskName}" (pid ${pid}): ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
  }
}

/**
 * Whether the task is running could not be learned for a passing fault of
 * the agent itself (out of file descriptors or memory, say): its state is
 * unknown, not "exited". Retry later; never release what the task holds on it.
 * Carries the errno error it came from as its cause, so that
 * isTransientFsError of @csiplug/core classifies it as transient.
 */
export class TransientProbeError extends DriverError {
  constructor(
    readonly allocId: string,
    readonly taskName: string,
    detail: string,
    cause: unknown,
  ) {
    super(
      'ETASK_PROBE_TRANSIENT',
      `could not tell whether task "${taskName}" of alloc ${allocId} is running: ${detail}; this is a fault of the agent, not of the task, and it will be checked again`,
      { cause },
    );
  }
}
