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
// first, so no pending write brings it back. The cost is a window of a few
// ms in which a `kill -9` loses the newest events of a task: its state is
// read again from the driver on the restore (a task found dead is dead), and
// its handle, which the restore needs, is still written at once by the
// runner.
import type { Disposable } from '@csiplug/core';
import type { TaskState } from '../model';
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
  /** The write was made (no error) or failed (every state of it is unsaved). */
  done(err?: unknown): void;
}

export class TaskStateWriter implements Disposable {
  private readonly pending = new Map<string, TaskStateSave>();
  private timer: ReturnType<typeof setTimeout> | undefined;

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
    if (this.pending.size >= TASK_STATE_WRITE_MAX) this.flush();
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
    let failure: { err: unknown } | undefined;
    try {
      this.store.putTaskStates(saves.map((s) => ({ allocId: s.allocId, task: s.task, state: s.state() })));
    } catch (err) {
      failure = { err };
    }
    for (const s of saves) s.done(failure?.err);
  }

  /** Writes what waits (the agent is going away; the state closes next). */
  dispose(): void {
    this.flush();
  }
}

export type ITaskStateWriter = TaskStateWriter;
export const ITaskStateWriter: unique symbol = Symbol('ITaskStateWriter');

const key = (allocId: string, task: string): string => `${allocId}\0${task}`;
