// An in-memory MountStore for tests: the same contract as the client-state
// store (see mount-store-contract.ts, run against both), plus a switch to
// make the next writes fail, a log of the writes, a way to plant entries that
// cannot be used, and a copy of what is stored. A second reconciler over the
// same store is "the agent restarted here".
import { isVolumeMountRecord, mountKey, type VolumeMountRecord } from '../reconciler/mount-record';
import type { MountStore, MountStoreFailure } from '../reconciler/mount-store';

/** A stored entry: a value as written (shape-checked when listed), or one that cannot be decoded at all. */
type Entry = { value: unknown } | { undecodable: string };

export class FakeMountStore implements MountStore {
  private readonly data = new Map<string, Entry>();
  /** Writes fail while this is above zero (counting down). */
  failWrites = 0;
  /** Every put and delete, in order, as `put <key>` / `delete <key>`. */
  readonly writes: string[] = [];

  list(): { records: VolumeMountRecord[]; failures: MountStoreFailure[] } {
    const records: VolumeMountRecord[] = [];
    const failures: MountStoreFailure[] = [];
    for (const [key, entry] of [...this.data.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      if ('undecodable' in entry) failures.push({ key, error: entry.undecodable });
      else if (!isVolumeMountRecord(entry.value))
        failures.push({ key, error: 'not a volume mount record (a field is missing or has the wrong type)' });
      else records.push(structuredClone(entry.value));
    }
    return { records, failures };
  }

  put(record: VolumeMountRecord): void {
    const key = mountKey(record.allocId, record.name);
    this.failIfAsked(`put ${key}`);
    this.data.set(key, { value: structuredClone(record) });
  }

  delete(allocId: string, name: string): void {
    const key = mountKey(allocId, name);
    this.failIfAsked(`delete ${key}`);
    this.data.delete(key);
  }

  /** Stores an entry that cannot be read back (listed as a failure with `error`). */
  putCorrupt(key: string, error = 'unexpected end of JSON input'): void {
    this.data.set(key, { undecodable: error });
  }

  /** Stores `value` under `key` as it is, as another writer might have (listed as a failure unless it is a record). */
  putRaw(key: string, value: unknown): void {
    this.data.set(key, { value: structuredClone(value) });
  }

  /** The stored records, by key. */
  snapshot(): Record<string, VolumeMountRecord> {
    return Object.fromEntries(this.list().records.map((r) => [mountKey(r.allocId, r.name), r]));
  }

  private failIfAsked(what: string): void {
    if (this.failWrites > 0) {
      this.failWrites--;
      throw new Error(`fake mount store: write refused (${what})`);
    }
    this.writes.push(what);
  }
}
