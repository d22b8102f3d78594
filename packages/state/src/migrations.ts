// Schema migrations of the client state: one registered step per version,
// from N to N + 1. ClientStateDB backs the file up, then runs every step
// it needs in a single transaction, so a failure leaves the old version.
import { StateError } from './errors';
import { decode, encode, Layout } from './layout';
import type { Tx } from './tx';

export interface Migration {
  /** The version this step upgrades from; it leaves the layout at `from + 1`. */
  readonly from: number;
  readonly description: string;
  migrate(tx: Tx): void;
}

/**
 * Version 0 is the pre-versioned layout: no `meta` bucket, each alloc's
 * JSON stored flat under `allocations/<alloc id>`, and task records flat in
 * a `tasks` bucket under `<alloc id>/<task>` as `{ handle?, state? }`.
 * Version 1 nests them: `allocations/<id>/alloc` and
 * `allocations/<id>/task-<name>/{handle,state}`.
 */
export const migrateV0toV1: Migration = {
  from: 0,
  description: 'nest allocations and task records into per-alloc buckets',
  migrate(tx) {
    const allocs = tx.createBucketIfNotExists(Layout.allocations);
    const flat: [Buffer, Buffer][] = [];
    allocs.forEach((k, v) => {
      if (v !== null) flat.push([k, v]);
    });
    for (const [id, value] of flat) {
      // A key is a value or a bucket, never both: remove the value first.
      allocs.delete(id);
      allocs.createBucket(id).put(Layout.allocKey, value);
    }
    const tasks = tx.bucket('tasks');
    if (tasks) {
      tasks.forEach((k, v) => {
        const name = k.toString('utf8');
        const slash = name.indexOf('/');
        if (slash <= 0 || slash === name.length - 1 || v === null) {
          throw new StateError('EMIGRATE', `tasks/${name}: expected a value keyed "<alloc id>/<task>"`);
        }
        const record = decode<{ handle?: unknown; state?: unknown }>(v, `tasks/${name}`);
        const task = allocs
          .createBucketIfNotExists(name.slice(0, slash))
          .createBucketIfNotExists(Layout.taskPrefix + name.slice(slash + 1));
        if (record.handle !== undefined) task.put(Layout.taskHandle, encode(record.handle));
        if (record.state !== undefined) task.put(Layout.taskState, encode(record.state));
      });
      tx.deleteBucket('tasks');
    }
  },
};

/**
 * Version 2 adds `csi/mounts`, the volume reconciler's records (desired and
 * actual state of each alloc's volume), which replace the mount stubs,
 * staging usage and pending unmounts of version 1 — @csiplug/volumes adopts
 * those once. Its point is the version itself: an agent of version 1 would
 * not see the records, so it must refuse the file as newer rather than
 * restore allocs whose mounts it cannot find.
 */
export const migrateV1toV2: Migration = {
  from: 1,
  description: 'add csi/mounts, the volume reconciler records',
  migrate(tx) {
    tx.createBucketIfNotExists(Layout.csi).createBucketIfNotExists(Layout.mounts);
  },
};

export const CLIENT_STATE_MIGRATIONS: readonly Migration[] = [migrateV0toV1, migrateV1toV2];

/** The steps from `from` to `to`, in order; throws when one is missing. */
export function migrationPath(from: number, to: number, steps: readonly Migration[]): Migration[] {
  const path: Migration[] = [];
  for (let v = from; v < to; v++) {
    const step = steps.find((s) => s.from === v);
    if (!step) throw new StateError('EMIGRATE', `no migration registered from client state schema ${v} to ${v + 1}`);
    path.push(step);
  }
  return path;
}
