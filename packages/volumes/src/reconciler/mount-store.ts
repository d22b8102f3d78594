// MountStore: where the volume reconciler keeps its records. The default is
// the agent's client state (bucket csi/mounts); a fake for tests lives under
// @csiplug/volumes/testing and passes the same conformance suite.
import type { Logger } from '@csiplug/core';
import { errorMessage } from '@csiplug/core';
import { copyUsage } from '@csiplug/csimanager';
import type { VolumeMountRecord } from './mount-record';
import { isVolumeMountRecord, mountKey } from './mount-record';

export interface MountStoreFailure {
  key: string;
  error: string;
}

export interface MountStore {
  /** Every record; ones that cannot be decoded or fail the shape check are reported, never dropped silently. */
  list(): { records: VolumeMountRecord[]; failures: MountStoreFailure[] };
  /** Writes the record through (replacing the one with its alloc id and name). */
  put(record: VolumeMountRecord): void;
  /** Removes the record of (alloc, name); removing a missing one is not an error. */
  delete(allocId: string, name: string): void;
}

/** What the state store offers for mount records (structurally; see @csiplug/state's VolumeStateStore). */
export interface MountRecordBucket {
  putVolumeMount(key: string, record: unknown): void;
  deleteVolumeMount(key: string): void;
  listVolumeMounts<T = unknown>(): { records: { key: string; record: T }[]; failures: { key: string; error: string }[] };
}

/** The legacy buckets of csiplug before the reconciler (mount stubs, usage, pending unmounts), read once and cleared. */
export interface LegacyVolumeState {
  listAllocations(): { allocs: { allocId: string }[] };
  getVolumeStubs(allocId: string): Record<string, LegacyStub> | undefined;
  putVolumeStubs(allocId: string, stubs: Record<string, LegacyStub>): void;
  listVolumeUsage(): { pluginId: string; volumeId: string; users: { allocId: string; usage: VolumeMountRecord['usage'] }[] }[];
  putVolumeUsage(pluginId: string, volumeId: string, users: []): void;
  listPendingUnmounts(): LegacyPending[];
  deletePendingUnmount(id: string): void;
}

interface LegacyStub {
  name: string;
  volumeId: string;
  externalId?: string;
  pluginId: string;
  stagingPath?: string;
  targetPath: string;
  usage: VolumeMountRecord['usage'];
  publishContext?: Record<string, string>;
}

interface LegacyPending {
  id: string;
  allocId: string;
  pluginId: string;
  volumeId: string;
  externalId?: string;
  volumeName?: string;
  usage: VolumeMountRecord['usage'];
  attempts: number;
  lastError?: string;
  since: number;
}

export class StateMountStore implements MountStore {
  constructor(private readonly bucket: MountRecordBucket) {}

  list(): { records: VolumeMountRecord[]; failures: MountStoreFailure[] } {
    const { records, failures } = this.bucket.listVolumeMounts<unknown>();
    const good: VolumeMountRecord[] = [];
    const bad = [...failures];
    for (const { key, record } of records) {
      if (isVolumeMountRecord(record)) good.push(record);
      else bad.push({ key, error: 'not a volume mount record (a field is missing or has the wrong type)' });
    }
    return { records: good, failures: bad };
  }

  put(record: VolumeMountRecord): void {
    this.bucket.putVolumeMount(mountKey(record.allocId, record.name), record);
  }

  delete(allocId: string, name: string): void {
    this.bucket.deleteVolumeMount(mountKey(allocId, name));
  }
}

/**
 * Turns the state an agent before the reconciler left (mount stubs per alloc,
 * pending unmounts, staging usage) into mount records, once: a stub is a
 * record desired mounted with everything done; a pending unmount one desired
 * unmounted with everything left to undo. Usage entries with neither are of
 * mounts that were under way when that agent stopped: their alloc's restore
 * mounts again, so they are logged and dropped. The legacy entries are
 * cleared only after the records are written.
 */
export function adoptLegacyVolumeState(legacy: LegacyVolumeState, store: MountStore, now: number, log: Logger): number {
  const adopted = new Map<string, VolumeMountRecord>();
  const staged = new Set<string>();
  const cleared = { allocs: [] as string[], pending: [] as string[] };
  // One bad entry is logged and left where it is; it never stops the agent from starting.
  const each = <T>(what: string, items: () => T[], fn: (item: T) => void): void => {
    let list: T[];
    try {
      list = items();
    } catch (err) {
      log.error(`could not read the legacy ${what}; left in the state untouched`, { error: errorMessage(err) });
      return;
    }
    for (const item of list) {
      try {
        fn(item);
      } catch (err) {
        log.error(`a legacy ${what} entry could not be adopted; left in the state untouched`, {
          entry: JSON.stringify(item)?.slice(0, 200),
          error: errorMessage(err),
        });
      }
    }
  };
  each(
    'volume usage',
    () => legacy.listVolumeUsage(),
    (entry) => {
      for (const u of entry.users) staged.add(`${entry.pluginId}\0${entry.volumeId}\0${u.allocId}`);
    },
  );
  each(
    'mount stubs',
    () => legacy.listAllocations().allocs,
    ({ allocId }) => {
      const stubs = legacy.getVolumeStubs(allocId);
      if (!stubs || Object.keys(stubs).length === 0) return;
      const records: VolumeMountRecord[] = [];
      for (const stub of Object.values(stubs)) {
        const record: VolumeMountRecord = {
          allocId,
          name: stub.name,
          volumeId: stub.volumeId,
          externalId: stub.externalId ?? stub.volumeId,
          pluginId: stub.pluginId,
          usage: copyUsage(stub.usage),
          desired: 'mounted',
          claimed: true,
          staged: stub.stagingPath !== undefined || staged.has(`${stub.pluginId}\0${stub.volumeId}\0${allocId}`),
          published: true,
          targetPath: stub.targetPath,
          attempts: 0,
          since: now,
        };
        if (stub.stagingPath) record.stagingPath = stub.stagingPath;
        if (stub.publishContext) record.publishContext = { ...stub.publishContext };
        if (!isVolumeMountRecord(record)) throw new Error(`mount stub "${String(stub.name)}" of alloc ${allocId} is malformed`);
        records.push(record);
      }
      for (const record of records) adopted.set(mountKey(allocId, record.name), record);
      cleared.allocs.push(allocId);
    },
  );
  each(
    'pending unmount',
    () => legacy.listPendingUnmounts(),
    (p) => {
      const name = p.volumeName ?? p.volumeId;
      const record: VolumeMountRecord = {
        allocId: p.allocId,
        name,
        volumeId: p.volumeId,
        externalId: p.externalId ?? p.volumeId,
        pluginId: p.pluginId,
        usage: copyUsage(p.usage),
        desired: 'unmounted',
        claimed: true,
        staged: true,
        published: true,
        attempts: typeof p.attempts === 'number' ? p.attempts : 0,
        since: typeof p.since === 'number' ? p.since : now,
      };
      if (p.lastError) record.lastError = String(p.lastError);
      if (!isVolumeMountRecord(record)) throw new Error(`pending unmount ${String(p.id)} is malformed`);
      adopted.set(mountKey(p.allocId, name), record);
      cleared.pending.push(p.id);
    },
  );
  if (adopted.size === 0 && staged.size === 0) return 0;
  // A record the store has already is newer than the legacy entry (adopted
  // on an earlier start whose clearing failed): it is kept, never overwritten.
  const { records: existing } = store.list();
  const have = new Set(existing.map((r) => mountKey(r.allocId, r.name)));
  let written = 0;
  for (const [key, record] of adopted) {
    if (have.has(key)) continue;
    store.put(record);
    written++;
  }
  for (const key of staged) {
    const [pluginId, volumeId, allocId] = key.split('\0') as [string, string, string];
    const owned = [...adopted.values()].some((r) => r.allocId === allocId && r.volumeId === volumeId && r.pluginId === pluginId);
    if (!owned)
      log.warn(
        'dropping a staging user left by an older agent without a mount stub (its mount was under way; the alloc mounts again on restore)',
        { alloc_id: allocId, volume_id: volumeId, plugin_id: pluginId },
      );
  }
  try {
    for (const allocId of cleared.allocs) legacy.putVolumeStubs(allocId, {});
    for (const id of cleared.pending) legacy.deletePendingUnmount(id);
    for (const entry of legacy.listVolumeUsage()) legacy.putVolumeUsage(entry.pluginId, entry.volumeId, []);
  } catch (err) {
    // The records are written; the legacy entries are adopted again next start, where records already stored win.
    log.warn('could not clear the legacy volume state after adopting it; it is looked at again next start', { error: errorMessage(err) });
  }
  log.info('adopted the volume state of an older agent', { records: written });
  return written;
}
