// TaskSaves: how a task runner's handle and state reach the client state.
// The handle is written at once (a restore needs it); the state joins the
// next group write (TaskStateWriter). What cannot be saved (a full disk) is
// logged, never thrown at the task: it is written again on the task's next
// change or by a retry timer (backoff up to 30 s; a dead task has no next
// change), and nothing is written once the record is gone (a purge) or the
// agent detaches.
import { doublingBackoff, type Clock, type Disposable, type Logger } from '@csiplug/core';
import type { TaskHandle } from '@csiplug/driver';
import type { TaskState } from '@csiplug/jobspec';
import type { AllocStore } from './alloc-store';
import type { TaskStateSave, TaskStateWriter } from './task-state-writer';

/** Backoff (ms) of the retry of a save that failed: doubling from the base up to the max. */
const SAVE_RETRY_BASE = 1_000;
const SAVE_RETRY_MAX = 30_000;

export interface TaskSavesDeps {
  allocStore: AllocStore;
  taskStates: TaskStateWriter;
  clock: Clock;
}

export class TaskSaves {
  /** The handle could not be saved (a full disk): persist() tries again. */
  private handleUnsaved = false;
  /** The retry of a save that failed, while one is pending; how many failed in a row; whether the record is gone (forget). */
  private saveRetry: Disposable | undefined;
  private saveFailures = 0;
  private forgotten = false;
  private detached = false;
  /** What the group write of task states asks of this task. */
  private readonly stateSave: TaskStateSave;

  constructor(
    private readonly allocId: string,
    private readonly task: string,
    state: () => TaskState,
    /** The handle of the process the task runs now, if any. */
    private readonly handle: () => TaskHandle | undefined,
    private readonly deps: TaskSavesDeps,
    private readonly log: Logger,
  ) {
    this.stateSave = { allocId, task, state, done: (ok, err) => this.stateSaved(ok, err) };
  }

  /** The state changed: a handle still unsaved is written now, the state with the next group write. */
  persist(): void {
    if (this.forgotten) return;
    this.saveRetry?.dispose();
    this.saveRetry = undefined;
    const handle = this.handle();
    if (this.handleUnsaved && handle) this.saveHandle(handle);
    // The handle is written at once (a restore needs it); the state joins the next group write.
    this.deps.taskStates.save(this.stateSave);
  }

  /**
   * Saves the handle of the process that runs now. A failure (a full disk)
   * is logged and tried again on the next change: the task runs, and a
   * restore finds it from the executor's record if it never gets saved.
   */
  saveHandle(handle: TaskHandle): void {
    try {
      this.deps.allocStore.putTaskHandle(this.allocId, this.task, handle);
      this.handleUnsaved = false;
    } catch (err) {
      this.handleUnsaved = true;
      this.saveFailures++;
      this.log.error(
        'could not save the task handle; it is saved again on the next change (a restore finds the task from its executor meanwhile)',
        { pid: handle.pid, error: err },
      );
    }
  }

  /** The task's record is deleted (a purge): no save that failed is made again, which would bring it back. */
  forget(): void {
    this.forgotten = true;
    this.deps.taskStates.cancel(this.allocId, this.task);
    this.saveRetry?.dispose();
    this.saveRetry = undefined;
  }

  /** Agent shutdown: no retry timer outlives it. */
  detach(): void {
    this.detached = true;
    this.saveRetry?.dispose();
    this.saveRetry = undefined;
  }

  private stateSaved(ok: boolean, err: unknown): void {
    if (this.forgotten) return;
    if (ok) {
      if (!this.handleUnsaved) this.saveFailures = 0;
    } else {
      this.saveFailures++;
      this.log.error('could not save the task state; it is saved again on its next change or after a delay', { error: err });
    }
    if (this.saveFailures && !this.detached && !this.saveRetry) {
      const delay = doublingBackoff(this.saveFailures, SAVE_RETRY_BASE, SAVE_RETRY_MAX);
      this.saveRetry = this.deps.clock.setTimeout(() => {
        this.saveRetry = undefined;
        if (!this.detached) this.persist();
      }, delay);
    }
  }
}
