// FaultLog: how the exec driver logs the transient faults of the agent's own
// process (EMFILE under a connection flood, say) met while checking one task,
// without flooding the log — such a fault says nothing about the task.
import { errorMessage, type IClock, type ILogger } from '@csiplug/core';
import type { TaskHandle } from './driver';

/** At most one warning per this many ms while a task cannot be checked, so an EMFILE storm does not flood the log. */
const FAULT_LOG_INTERVAL = 30_000;

/**
 * Logs the transient faults met while checking one task without flooding:
 * the first at once, then at most one line per FAULT_LOG_INTERVAL, and one
 * line when the checks work again.
 */
export class FaultLog {
  private since: number | undefined;
  private lastLine = 0;
  private faults = 0;

  constructor(
    private readonly clock: IClock,
    private readonly log: ILogger,
    private readonly fields: Record<string, unknown>,
  ) {}

  fault(during: string, err: unknown): void {
    const now = this.clock.now();
    this.faults++;
    if (this.since === undefined) this.since = now;
    else if (now - this.lastLine < FAULT_LOG_INTERVAL) return;
    this.lastLine = now;
    this.log.warn('cannot check the task for a fault of the agent itself (not of the task); its state is unknown and is checked again', {
      ...this.fields,
      during,
      faults: this.faults,
      err: errorMessage(err),
    });
  }

  recovered(): void {
    if (this.since === undefined) return;
    this.log.info('task checks work again after faults of the agent itself', {
      ...this.fields,
      faults: this.faults,
      unknownForMs: this.clock.now() - this.since,
    });
    this.since = undefined;
    this.faults = 0;
  }
}

/** The fields every log line about a task carries. */
export function taskFields(handle: TaskHandle): Record<string, unknown> {
  return { allocId: handle.allocId, taskName: handle.taskName, taskPid: handle.pid, executorPid: handle.executorPid };
}
