// AllocStore: what the agent keeps of its allocs across an agent restart —
// each alloc with the volumes its tasks see, and each task's driver handle and
// state — typed by the agent's own records. The default, StateAllocStore,
// keeps them as JSON in the client state (@csiplug/state's AllocStateStore:
// allocations/<id>/alloc and allocations/<id>/task-<name>/{handle,state}) and
// checks each alloc record it reads back, so a restore reports one it cannot
// use instead of failing on it.
import { bindDefault, CsiplugError } from '@csiplug/core';
import type { TaskHandle } from '@csiplug/driver';
import type { MountedVolume } from '@csiplug/hooks';
import { IAllocStateStore, type AllocStateStore, type DecodeFailure, type SavedTaskRecord } from '@csiplug/state';
import type { DependencyContainer } from 'tsyringe';
import type { Alloc, TaskState } from '@csiplug/jobspec';

/** What the alloc runner saves: the alloc (with its job) and the volumes its tasks see. */
export interface AllocRecord {
  alloc: Alloc;
  volumes: Record<string, MountedVolume>;
}

/** A task's handle and state as a restore reads them; `error`: they could not be decoded. */
export interface SavedTask {
  handle?: TaskHandle;
  state?: TaskState;
  error?: Error;
}

export interface AllocStore {
  /** Saves the record under its alloc's id. */
  putAllocation(record: AllocRecord): void;
  /** Saves several records in one write: all of them, or (it throws) none. */
  putAllocations(records: readonly AllocRecord[]): void;
  /** The saved record, or undefined; throws if it cannot be read or is not an alloc record. */
  getAllocation(allocId: string): AllocRecord | undefined;
  /** Every saved alloc; those that cannot be read or are not alloc records are in `failures`, not dropped. */
  listAllocations(): { records: AllocRecord[]; failures: DecodeFailure[] };
  /** The same, with each alloc's saved tasks (by name), in one read: what a restore needs. */
  listAllocationsWithTasks(): { records: { record: AllocRecord; tasks: Record<string, SavedTask> }[]; failures: DecodeFailure[] };
  /** The id of every saved alloc, one that cannot be read included, without reading the records. */
  listAllocationIds(): string[];
  /** Removes the alloc with everything saved for it and its tasks. */
  deleteAllocation(allocId: string): void;

  putTaskHandle(allocId: string, task: string, handle: TaskHandle): void;
  getTaskHandle(allocId: string, task: string): TaskHandle | undefined;
  putTaskState(allocId: string, task: string, state: TaskState): void;
  /** Several task states in one write: all of them, or (it throws) none. */
  putTaskStates(entries: readonly { allocId: string; task: string; state: TaskState }[]): void;
  getTaskState(allocId: string, task: string): TaskState | undefined;
  deleteTask(allocId: string, task: string): void;
}

export type IAllocStore = AllocStore;
export const IAllocStore: unique symbol = Symbol('IAllocStore');

/** A saved alloc record that is not one: the agent cannot run or restore it. */
export class MalformedAllocRecordError extends CsiplugError {
  constructor(
    readonly allocId: string,
    why: string,
  ) {
    super(
      'EALLOC_RECORD_MALFORMED',
      `the saved record of alloc ${allocId} (allocations/${allocId}/alloc) is not an alloc record: ${why}; it is left in the state file untouched`,
    );
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Checks what the runner needs to rebuild an alloc: the alloc, under its own
 * id, with its job's groups. A record saved before volumes were recorded
 * reads as having none.
 */
function checkAllocRecord(value: unknown, allocId: string): AllocRecord {
  if (!isObject(value)) throw new MalformedAllocRecordError(allocId, 'not an object');
  const { alloc, volumes } = value;
  if (!isObject(alloc)) throw new MalformedAllocRecordError(allocId, 'no "alloc" object');
  if (alloc['id'] !== allocId) throw new MalformedAllocRecordError(allocId, `it names alloc ${JSON.stringify(alloc['id'])}`);
  if (typeof alloc['jobId'] !== 'string' || typeof alloc['group'] !== 'string')
    throw new MalformedAllocRecordError(allocId, 'no job id or group name');
  if (!isObject(alloc['job']) || !Array.isArray(alloc['job']['groups'])) throw new MalformedAllocRecordError(allocId, 'no job with groups');
  if (volumes !== undefined && !isObject(volumes)) throw new MalformedAllocRecordError(allocId, '"volumes" is not an object');
  return { alloc: alloc as unknown as Alloc, volumes: (volumes ?? {}) as Record<string, MountedVolume> };
}

/** The alloc records that are alloc records; the others join the failures. */
function checkRecords(read: {
  allocs: { allocId: string; alloc: unknown; tasks?: Record<string, SavedTaskRecord> }[];
  failures: DecodeFailure[];
}): {
  records: { record: AllocRecord; tasks: Record<string, SavedTask> }[];
  failures: DecodeFailure[];
} {
  const records: { record: AllocRecord; tasks: Record<string, SavedTask> }[] = [];
  const failures = [...read.failures];
  for (const { allocId, alloc, tasks } of read.allocs) {
    try {
      records.push({ record: checkAllocRecord(alloc, allocId), tasks: (tasks ?? {}) as Record<string, SavedTask> });
    } catch (err) {
      failures.push({ key: allocId, error: (err as Error).message });
    }
  }
  return { records, failures };
}

export class StateAllocStore implements AllocStore {
  constructor(private readonly state: AllocStateStore) {}

  putAllocation(record: AllocRecord): void {
    this.state.putAllocation(record.alloc.id, record);
  }

  putAllocations(records: readonly AllocRecord[]): void {
    this.state.putAllocations(records.map((record) => ({ allocId: record.alloc.id, alloc: record })));
  }

  getAllocation(allocId: string): AllocRecord | undefined {
    const value = this.state.getAllocation(allocId);
    return value === undefined ? undefined : checkAllocRecord(value, allocId);
  }

  listAllocations(): { records: AllocRecord[]; failures: DecodeFailure[] } {
    const { records, failures } = checkRecords(this.state.listAllocations());
    return { records: records.map(({ record }) => record), failures };
  }

  listAllocationsWithTasks(): { records: { record: AllocRecord; tasks: Record<string, SavedTask> }[]; failures: DecodeFailure[] } {
    return checkRecords(this.state.listAllocationsWithTasks());
  }

  listAllocationIds(): string[] {
    return this.state.listAllocationIds();
  }

  deleteAllocation(allocId: string): void {
    this.state.deleteAllocation(allocId);
  }

  putTaskHandle(allocId: string, task: string, handle: TaskHandle): void {
    this.state.putTaskHandle(allocId, task, handle);
  }

  getTaskHandle(allocId: string, task: string): TaskHandle | undefined {
    return this.state.getTaskHandle<TaskHandle>(allocId, task);
  }

  putTaskState(allocId: string, task: string, state: TaskState): void {
    this.state.putTaskState(allocId, task, state);
  }

  putTaskStates(entries: readonly { allocId: string; task: string; state: TaskState }[]): void {
    this.state.putTaskStates(entries);
  }

  getTaskState(allocId: string, task: string): TaskState | undefined {
    return this.state.getTaskState<TaskState>(allocId, task);
  }

  deleteTask(allocId: string, task: string): void {
    this.state.deleteTask(allocId, task);
  }
}

/**
 * Binds IAllocStore to the client state (IAllocStateStore, bound by
 * registerState) unless a deployment bound its own first.
 */
export function registerAllocStore(container: DependencyContainer): void {
  bindDefault(container, IAllocStore, { useFactory: (c) => new StateAllocStore(c.resolve<IAllocStateStore>(IAllocStateStore)) });
}
