// TaskStateWriter: the group commit of task states. Every task event is a
// new task state, and each used to be its own durable write (an fsync): a
// restore of a thousand allocs makes three or more events per alloc within a
// second or two. Here a runner asks for its state to be saved and the writer
// saves every state asked for within a few ms in one write.
//
// Order is kept without ordering anything: a task's state is one record that
// is only ever replaced whole, and the writer reads the runner's state when
// it writes, so the newest state wins; one asked for again before the write
// is written once. A task whose record is deleted (a purge) is cancelled
// first, so no pending write brings it back. A group write that fails for
// another reason than a full disk is made again entry by entry, so one entry
// that cannot be written (a damaged bucket) fails only its own task.
//
// The cost is a window of a few ms in which a `kill -9` loses the newest
// states of a task. The alloc runner flushes the writer before it saves an
// alloc as stopped, complete or failed, so a task state on disk is never
// behind its alloc's end; what a crash can lose is a running task's latest
// events (its handle, which a restore needs, is written at once by the
// runner), and a restore reads the task's real state from the driver (a task
// found exited goes through its restart policy, as on any exit). Once
// disposed (the agent module stopped), the writer writes each state at once,
// as it is asked: a late event still lands while the state is open.
import type { Disposable } from '@csiplug/core';
import type { TaskState } from '@csiplug/jobspec';
import type { AllocStore } from './alloc-store';

/** How long the first state asked for waits for others to join its write, in ms. */
export const TASK_STATE_WRITE_DELAY = 5;
/** A write holds at most this many states; more are written at once in the next. */
export const TASK_STATE_WRITE_MAX = 1000;

export interface TaskStateSave {
  readonly allocId: string;
  readonly task: string;
  /** The state to write, read when the write is made. */
  state(): TaskState;
  /** The write was made (`ok`), or failed with `err` (the state is unsaved). */
  done(ok: boolean, err?: unknown): void;
}

export class TaskStateWriter implements Disposable {
  private readonly pending = new Map<string, TaskStateSave>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private disposed = false;

  /**
   * The write runs on the real clock: it stands for the time an fsync takes,
   * not for anything a test's clock moves.
   */
  constructor(
    private readonly store: Pick<AllocStore, 'putTaskStates'>,
    private readonly delay = TASK_STATE_WRITE_DELAY,
  ) {}

  /** Asks for the task's state to be saved; `done` says when it was. */
  save(s: TaskStateSave): void {
    this.pending.set(key(s.allocId, s.task), s);
    if (this.disposed || this.pending.size >= TASK_STATE_WRITE_MAX) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), this.delay);
  }

  /** The task's record is going away: a state asked for and not yet written is not written. */
  cancel(allocId: string, task: string): void {
    this.pending.delete(key(allocId, task));
  }

  /** How many states wait for a write. */
  get size(): number {
    return this.pending.size;
  }

  /** Writes every state asked for, now, in one write. */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending.size === 0) return;
    const saves = [...this.pending.values()];
    this.pending.clear();
    try {
      this.write(saves);
    } catch (err) {
      // A full disk fails them all alike; anything else may be one entry's own fault.
      if (saves.length === 1 || isNoSpace(err)) {
        for (const s of saves) s.done(false, err);
        return;
      }
      for (const s of saves) {
        try {
          this.write([s]);
        } catch (own) {
          s.done(false, own);
          continue;
        }
        s.done(true);
      }
      return;
    }
    for (const s of saves) s.done(true);
  }

  private write(saves: readonly TaskStateSave[]): void {
    this.store.putTaskStates(saves.map((s) => ({ allocId: s.allocId, task: s.task, state: s.state() })));
  }

  /** Writes what waits (the agent is going away; the state closes next). */
  dispose(): void {
    this.disposed = true;
    this.flush();
  }
}

export type ITaskStateWriter = TaskStateWriter;
export const ITaskStateWriter: unique symbol = Symbol('ITaskStateWriter');

const key = (allocId: string, task: string): string => `${allocId}\0${task}`;

const isNoSpace = (err: unknown): boolean =>
  typeof err === 'object' && err !== null && (err as { code?: unknown }).code === 'ESTATE_NO_SPACE';
