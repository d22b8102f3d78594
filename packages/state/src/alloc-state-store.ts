// AllocStateStore: the client state's per-alloc buckets, as JSON values whose
// shapes the agent owns (allocations/<id>/alloc and
// allocations/<id>/task-<name>/{handle,state}).
import type { DecodeFailure } from './decode-failure';

/** A task's saved handle and state as one read found them; `error` when one could not be decoded (the other is then left out too). */
export interface SavedTaskRecord {
  handle?: unknown;
  state?: unknown;
  error?: Error;
}

export interface AllocStateStore {
  /** allocations/<id>/alloc — the alloc and its job, as the agent shapes it. */
  putAllocation(allocId: string, alloc: unknown): void;
  /** Several alloc records in one write: all of them are saved, or (the write failed) none. */
  putAllocations(entries: readonly { allocId: string; alloc: unknown }[]): void;
  getAllocation<T = unknown>(allocId: string): T | undefined;
  /** Every alloc record; those that cannot be read are in `failures` (and logged), not dropped. */
  listAllocations<T = unknown>(): { allocs: { allocId: string; alloc: T }[]; failures: DecodeFailure[] };
  /**
   * The same, read in one pass with every task's handle and state (what a
   * restore needs, without a read per task): `tasks` by task name.
   */
  listAllocationsWithTasks<T = unknown>(): {
    allocs: { allocId: string; alloc: T; tasks: Record<string, SavedTaskRecord> }[];
    failures: DecodeFailure[];
  };
  /** The id of every alloc with a bucket, read from the keys alone (no record is decoded): one whose record cannot be read is listed too. */
  listAllocationIds(): string[];
  /** Removes the alloc's bucket as a whole: its record, its task sub-buckets and its volume mount stubs. */
  deleteAllocation(allocId: string): void;

  /** allocations/<id>/task-<name>/{handle,state}. */
  putTaskHandle(allocId: string, task: string, handle: unknown): void;
  getTaskHandle<T = unknown>(allocId: string, task: string): T | undefined;
  putTaskState(allocId: string, task: string, state: unknown): void;
  /** Several task states in one write (a group commit): all of them are saved, or (the write failed) none. */
  putTaskStates(entries: readonly { allocId: string; task: string; state: unknown }[]): void;
  getTaskState<T = unknown>(allocId: string, task: string): T | undefined;
  deleteTask(allocId: string, task: string): void;
}
