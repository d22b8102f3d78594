// VolumeStateStore: the client state's volume buckets, as JSON values whose
// shapes the volume code owns (@csiplug/volumes, once it lands):
//   volumes/<id>         the local volume catalog
//   csi/mounts/<key>     one record per mount, keyed as its owner chooses
//   csi/volume-ops/<id>  a catalog operation (create, expand, delete) under way on a volume
// and, until their owners have adopted them once and cleared them, the
// legacy buckets the CSI manager and the hooks write today:
//   csi/usage/<plugin>/<volume>, csi/pending/<id>, allocations/<id>/volumes.
// Buckets are created by the first write; a store that never had one reads
// as empty, so none of them needs a schema migration.
import type { DecodeFailure } from './decode-failure';
import type { PendingUnmountRecord, VolumeMountStub, VolumeUsageRecord } from './legacy-volume-records';

export interface VolumeStateStore {
  /** volumes/<id> — the local volume catalog and its claims. */
  putVolume(volumeId: string, volume: unknown): void;
  getVolume<T = unknown>(volumeId: string): T | undefined;
  deleteVolume(volumeId: string): void;
  /** Every catalog entry; one that cannot be decoded is skipped with a warning in the log. */
  listVolumes<T = unknown>(): T[];

  /** csi/mounts/<key> — one mount record. */
  putVolumeMount(key: string, record: unknown): void;
  getVolumeMount<T = unknown>(key: string): T | undefined;
  /** Removing a key that is not there is not an error. */
  deleteVolumeMount(key: string): void;
  /** Every mount record, in key order; those that cannot be read are in `failures` (and logged), not dropped. */
  listVolumeMounts<T = unknown>(): { records: { key: string; record: T }[]; failures: DecodeFailure[] };

  /** csi/volume-ops/<volume id> — the intent of a catalog operation on the volume, written before its plugin call. */
  putVolumeOp(volumeId: string, intent: unknown): void;
  getVolumeOp<T = unknown>(volumeId: string): T | undefined;
  /** Removing a key that is not there is not an error. */
  deleteVolumeOp(volumeId: string): void;
  /** Every intent, in volume id order; those that cannot be read are in `failures` (and logged), not dropped. */
  listVolumeOps<T = unknown>(): { records: { key: string; record: T }[]; failures: DecodeFailure[] };

  /**
   * csi/usage/<plugin>/<volume>; an empty list removes the entry.
   * @deprecated — legacy; @csiplug/volumes reads it once (listVolumeUsage) and clears it.
   */
  putVolumeUsage(pluginId: string, volumeId: string, users: readonly unknown[]): void;
  /** @deprecated — legacy, see putVolumeUsage. */
  getVolumeUsage<U = VolumeUsageRecord>(pluginId: string, volumeId: string): U[];
  /** Every usage entry; one that cannot be decoded is skipped with a warning in the log. @deprecated — legacy, see putVolumeUsage. */
  listVolumeUsage<U = VolumeUsageRecord>(): { pluginId: string; volumeId: string; users: U[] }[];

  /**
   * csi/pending/<id>, keyed by the record's `id`.
   * @deprecated — legacy; @csiplug/volumes reads it once (listPendingUnmounts) and clears it.
   */
  putPendingUnmount<T extends { readonly id: string }>(record: T): void;
  /** @deprecated — legacy, see putPendingUnmount. */
  deletePendingUnmount(id: string): void;
  /** Every pending unmount; one that cannot be decoded is skipped with a warning in the log. @deprecated — legacy, see putPendingUnmount. */
  listPendingUnmounts<T = PendingUnmountRecord>(): T[];

  /**
   * allocations/<id>/volumes — an alloc's mount stubs keyed by the group's
   * volume name (removed with the alloc by deleteAllocation).
   * @deprecated — legacy; @csiplug/volumes reads them once and clears them (an empty object).
   */
  putVolumeStubs(allocId: string, stubs: Readonly<Record<string, unknown>>): void;
  /** @deprecated — legacy, see putVolumeStubs. */
  getVolumeStubs<T = Record<string, VolumeMountStub>>(allocId: string): T | undefined;
}
