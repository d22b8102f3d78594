// BoltAllocState: the AllocStateStore half of the client state — the
// per-alloc buckets (allocations/<id>/alloc and
// allocations/<id>/task-<name>/{handle,state}) over the DB.
import type { AllocStateStore, SavedTaskRecord } from './alloc-state-store';
import { BoltStateBuckets } from './bolt-state-buckets';
import type { DecodeFailure } from './decode-failure';
import { decode, encode, Layout } from './layout';

export abstract class BoltAllocState extends BoltStateBuckets implements AllocStateStore {
  putAllocation(allocId: string, alloc: unknown): void {
    const value = encode(alloc);
    this.db.update((tx) => this.allocBucket(tx, allocId).put(Layout.allocKey, value));
  }

  putAllocations(entries: readonly { allocId: string; alloc: unknown }[]): void {
    const values = entries.map(({ allocId, alloc }) => ({ allocId, value: encode(alloc) }));
    this.db.update((tx) => {
      for (const { allocId, value } of values) this.allocBucket(tx, allocId).put(Layout.allocKey, value);
    });
  }

  getAllocation<T = unknown>(allocId: string): T | undefined {
    return this.readAllocKey<T>(allocId, Layout.allocKey);
  }

  listAllocations<T = unknown>(): { allocs: { allocId: string; alloc: T }[]; failures: DecodeFailure[] } {
    const { allocs, failures } = this.scanAllocations<T>(false);
    return { allocs: allocs.map(({ allocId, alloc }) => ({ allocId, alloc })), failures };
  }

  listAllocationsWithTasks<T = unknown>(): {
    allocs: { allocId: string; alloc: T; tasks: Record<string, SavedTaskRecord> }[];
    failures: DecodeFailure[];
  } {
    return this.scanAllocations<T>(true);
  }

  /** Every alloc record in one read, with its tasks' handles and states when asked. */
  private scanAllocations<T>(withTasks: boolean): {
    allocs: { allocId: string; alloc: T; tasks: Record<string, SavedTaskRecord> }[];
    failures: DecodeFailure[];
  } {
    return this.db.view((tx) => {
      const allocs: { allocId: string; alloc: T; tasks: Record<string, SavedTaskRecord> }[] = [];
      const failures: DecodeFailure[] = [];
      const bucket = tx.bucket(Layout.allocations);
      bucket?.forEach((key, value) => {
        const allocId = key.toString('utf8');
        if (value !== null) {
          failures.push({ key: allocId, error: `${Layout.allocations}/${allocId} is a bare value, not an alloc bucket` });
          return;
        }
        const allocBucket = bucket.bucket(key)!;
        const raw = allocBucket.get(Layout.allocKey);
        if (!raw) {
          failures.push({ key: allocId, error: `${Layout.allocations}/${allocId} has no ${Layout.allocKey} record` });
          return;
        }
        let alloc: T;
        try {
          alloc = decode<T>(raw, `${Layout.allocations}/${allocId}/${Layout.allocKey}`);
        } catch (err) {
          failures.push({ key: allocId, error: (err as Error).message });
          return;
        }
        // No prototype: a task may be named "__proto__" (or "state", "error").
        const tasks: Record<string, SavedTaskRecord> = Object.create(null) as Record<string, SavedTaskRecord>;
        if (withTasks) {
          try {
            allocBucket.forEach((sub, subValue) => {
              const name = sub.toString('utf8');
              if (subValue !== null || !name.startsWith(Layout.taskPrefix)) return;
              const taskBucket = allocBucket.bucket(sub)!;
              const where = `${Layout.allocations}/${allocId}/${name}`;
              const saved: SavedTaskRecord = {};
              try {
                const handle = taskBucket.get(Layout.taskHandle);
                if (handle) saved.handle = decode(handle, `${where}/${Layout.taskHandle}`);
                const state = taskBucket.get(Layout.taskState);
                if (state) saved.state = decode(state, `${where}/${Layout.taskState}`);
              } catch (err) {
                tasks[name.slice(Layout.taskPrefix.length)] = { error: err as Error };
                return;
              }
              tasks[name.slice(Layout.taskPrefix.length)] = saved;
            });
          } catch (err) {
            // The alloc's tasks cannot be read at all: the alloc is left untouched, the others restored.
            failures.push({ key: allocId, error: `cannot read the tasks of ${Layout.allocations}/${allocId}: ${(err as Error).message}` });
            return;
          }
        }
        allocs.push({ allocId, alloc, tasks });
      });
      for (const f of failures) this.logger.warn('client state: alloc record skipped', { allocId: f.key, error: f.error });
      return { allocs, failures };
    });
  }

  listAllocationIds(): string[] {
    return this.db.view((tx) => {
      const ids: string[] = [];
      tx.bucket(Layout.allocations)?.forEach((key) => void ids.push(key.toString('utf8')));
      return ids;
    });
  }

  deleteAllocation(allocId: string): void {
    this.db.update((tx) => {
      const allocs = tx.bucket(Layout.allocations);
      if (allocs?.bucket(allocId)) allocs.deleteBucket(allocId);
    });
  }

  putTaskHandle(allocId: string, task: string, handle: unknown): void {
    this.putTaskKey(allocId, task, Layout.taskHandle, handle);
  }

  getTaskHandle<T = unknown>(allocId: string, task: string): T | undefined {
    return this.readTaskKey<T>(allocId, task, Layout.taskHandle);
  }

  putTaskState(allocId: string, task: string, state: unknown): void {
    this.putTaskKey(allocId, task, Layout.taskState, state);
  }

  putTaskStates(entries: readonly { allocId: string; task: string; state: unknown }[]): void {
    const values = entries.map(({ allocId, task, state }) => ({ allocId, task, raw: encode(state) }));
    this.db.update((tx) => {
      for (const { allocId, task, raw } of values)
        this.allocBucket(tx, allocId)
          .createBucketIfNotExists(Layout.taskPrefix + task)
          .put(Layout.taskState, raw);
    });
  }

  getTaskState<T = unknown>(allocId: string, task: string): T | undefined {
    return this.readTaskKey<T>(allocId, task, Layout.taskState);
  }

  deleteTask(allocId: string, task: string): void {
    this.db.update((tx) => {
      const alloc = tx.bucket(Layout.allocations)?.bucket(allocId);
      if (alloc?.bucket(Layout.taskPrefix + task)) alloc.deleteBucket(Layout.taskPrefix + task);
    });
  }

  private putTaskKey(allocId: string, task: string, key: string, value: unknown): void {
    const raw = encode(value);
    this.db.update((tx) =>
      this.allocBucket(tx, allocId)
        .createBucketIfNotExists(Layout.taskPrefix + task)
        .put(key, raw),
    );
  }

  private readTaskKey<T>(allocId: string, task: string, key: string): T | undefined {
    return this.db.view((tx) => {
      const raw = tx
        .bucket(Layout.allocations)
        ?.bucket(allocId)
        ?.bucket(Layout.taskPrefix + task)
        ?.get(key);
      return raw && decode<T>(raw, `${Layout.allocations}/${allocId}/${Layout.taskPrefix}${task}/${key}`);
    });
  }
}
