// BoltVolumeState: the VolumeStateStore part of the client state — the
// volume catalog (volumes/<id>), the csi/ buckets (mounts, volume-ops, and
// the legacy usage and pending records) and the legacy volume stubs of an
// alloc (allocations/<id>/volumes) over the DB.
import type { Bucket } from './bucket';
import { BoltAllocState } from './bolt-alloc-state';
import type { DecodeFailure } from './decode-failure';
import { decode, encode, Layout } from './layout';
import type { PendingUnmountRecord, VolumeMountStub, VolumeUsageRecord } from './legacy-volume-records';
import type { Tx } from './tx';
import type { VolumeStateStore } from './volume-state-store';

export abstract class BoltVolumeState extends BoltAllocState implements VolumeStateStore {
  putVolumeStubs(allocId: string, stubs: Readonly<Record<string, unknown>>): void {
    const value = encode(stubs);
    this.db.update((tx) => this.allocBucket(tx, allocId).put(Layout.volumesKey, value));
  }

  getVolumeStubs<T = Record<string, VolumeMountStub>>(allocId: string): T | undefined {
    return this.readAllocKey<T>(allocId, Layout.volumesKey);
  }

  putVolumeUsage(pluginId: string, volumeId: string, users: readonly unknown[]): void {
    const value = users.length ? encode(users) : undefined;
    this.db.update((tx) => {
      const usage = this.csiBucket(tx, Layout.usage);
      if (value) {
        usage.createBucketIfNotExists(pluginId).put(volumeId, value);
        return;
      }
      const plugin = usage.bucket(pluginId);
      if (!plugin) return;
      plugin.delete(volumeId);
      if (!plugin.cursor().first()) usage.deleteBucket(pluginId);
    });
  }

  getVolumeUsage<U = VolumeUsageRecord>(pluginId: string, volumeId: string): U[] {
    return this.db.view((tx) => {
      const raw = tx.bucket(Layout.csi)?.bucket(Layout.usage)?.bucket(pluginId)?.get(volumeId);
      return raw ? decode<U[]>(raw, `csi/usage/${pluginId}/${volumeId}`) : [];
    });
  }

  listVolumeUsage<U = VolumeUsageRecord>(): { pluginId: string; volumeId: string; users: U[] }[] {
    return this.db.view((tx) => {
      const out: { pluginId: string; volumeId: string; users: U[] }[] = [];
      const usage = tx.bucket(Layout.csi)?.bucket(Layout.usage);
      usage?.forEachBucket((plugin) => {
        const pluginId = plugin.toString('utf8');
        usage.bucket(plugin)!.forEach((volume, raw) => {
          const volumeId = volume.toString('utf8');
          const users = this.decodeOrSkip<U[]>(raw, `csi/usage/${pluginId}/${volumeId}`);
          if (users) out.push({ pluginId, volumeId, users });
        });
      });
      return out;
    });
  }

  putPendingUnmount<T extends { readonly id: string }>(record: T): void {
    const value = encode(record);
    this.db.update((tx) => this.csiBucket(tx, Layout.pending).put(record.id, value));
  }

  deletePendingUnmount(id: string): void {
    this.db.update((tx) => this.csiBucket(tx, Layout.pending).delete(id));
  }

  listPendingUnmounts<T = PendingUnmountRecord>(): T[] {
    return this.db.view((tx) => {
      const out: T[] = [];
      tx.bucket(Layout.csi)
        ?.bucket(Layout.pending)
        ?.forEach((key, raw) => {
          const record = this.decodeOrSkip<T>(raw, `csi/pending/${key.toString('utf8')}`);
          if (record) out.push(record);
        });
      return out;
    });
  }

  putVolume(volumeId: string, volume: unknown): void {
    const value = encode(volume);
    this.db.update((tx) => tx.createBucketIfNotExists(Layout.volumeCatalog).put(volumeId, value));
  }

  getVolume<T = unknown>(volumeId: string): T | undefined {
    return this.db.view((tx) => {
      const raw = tx.bucket(Layout.volumeCatalog)?.get(volumeId);
      return raw && decode<T>(raw, `${Layout.volumeCatalog}/${volumeId}`);
    });
  }

  deleteVolume(volumeId: string): void {
    this.db.update((tx) => tx.bucket(Layout.volumeCatalog)?.delete(volumeId));
  }

  listVolumes<T = unknown>(): T[] {
    return this.db.view((tx) => {
      const out: T[] = [];
      tx.bucket(Layout.volumeCatalog)?.forEach((key, raw) => {
        const volume = this.decodeOrSkip<T>(raw, `${Layout.volumeCatalog}/${key.toString('utf8')}`);
        if (volume !== undefined) out.push(volume);
      });
      return out;
    });
  }

  putVolumeMount(key: string, record: unknown): void {
    const value = encode(record);
    this.db.update((tx) => this.csiBucket(tx, Layout.mounts).put(key, value));
  }

  getVolumeMount<T = unknown>(key: string): T | undefined {
    return this.db.view((tx) => {
      const raw = tx.bucket(Layout.csi)?.bucket(Layout.mounts)?.get(key);
      return raw && decode<T>(raw, `${Layout.csi}/${Layout.mounts}/${key}`);
    });
  }

  deleteVolumeMount(key: string): void {
    this.db.update((tx) => tx.bucket(Layout.csi)?.bucket(Layout.mounts)?.delete(key));
  }

  listVolumeMounts<T = unknown>(): { records: { key: string; record: T }[]; failures: DecodeFailure[] } {
    return this.listCsiRecords<T>(Layout.mounts, 'volume mount record');
  }

  putVolumeOp(volumeId: string, intent: unknown): void {
    const value = encode(intent);
    this.db.update((tx) => this.csiBucket(tx, Layout.volumeOps).put(volumeId, value));
  }

  getVolumeOp<T = unknown>(volumeId: string): T | undefined {
    return this.db.view((tx) => {
      const raw = tx.bucket(Layout.csi)?.bucket(Layout.volumeOps)?.get(volumeId);
      return raw && decode<T>(raw, `${Layout.csi}/${Layout.volumeOps}/${volumeId}`);
    });
  }

  deleteVolumeOp(volumeId: string): void {
    this.db.update((tx) => tx.bucket(Layout.csi)?.bucket(Layout.volumeOps)?.delete(volumeId));
  }

  listVolumeOps<T = unknown>(): { records: { key: string; record: T }[]; failures: DecodeFailure[] } {
    return this.listCsiRecords<T>(Layout.volumeOps, 'volume operation intent');
  }

  /** Every record of csi/<bucket>, in key order; one that cannot be decoded is a failure (logged), not dropped. */
  private listCsiRecords<T>(bucket: string, what: string): { records: { key: string; record: T }[]; failures: DecodeFailure[] } {
    return this.db.view((tx) => {
      const records: { key: string; record: T }[] = [];
      const failures: DecodeFailure[] = [];
      tx.bucket(Layout.csi)
        ?.bucket(bucket)
        ?.forEach((k, raw) => {
          const key = k.toString('utf8');
          const where = `${Layout.csi}/${bucket}/${key}`;
          if (raw === null) {
            failures.push({ key, error: `${where} is a nested bucket, not a ${what}` });
            return;
          }
          try {
            records.push({ key, record: decode<T>(raw, where) });
          } catch (err) {
            failures.push({ key, error: (err as Error).message });
          }
        });
      for (const f of failures) this.logger.warn(`client state: ${what} skipped`, { key: f.key, error: f.error });
      return { records, failures };
    });
  }

  private csiBucket(tx: Tx, name: string): Bucket {
    return tx.createBucketIfNotExists(Layout.csi).createBucketIfNotExists(name);
  }
}
