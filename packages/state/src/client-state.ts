// ClientStateDB: the typed client state of DESIGN.md ("State layout"), the
// one place the registry, the CSI manager, the hooks and the agent persist
// what must survive an agent restart. Values are JSON.
import type { Disposable } from '@csiplug/core';

/** One plugin registration as stored; `options` holds e.g. mount points. */
export interface PluginRegistrationRecord {
  type: string;
  name: string;
  version: string;
  allocId: string;
  socketPath: string;
  options: Record<string, string>;
}

/** The dynamic plugin registry: per type, per name, registrations newest first. */
export interface RegistryStateRecord {
  plugins: Record<string, Record<string, PluginRegistrationRecord[]>>;
}

/** How an alloc uses a volume; compared by value. */
export interface VolumeUsageOptions {
  readOnly: boolean;
  attachmentMode: string;
  accessMode: string;
  mountOptions?: { fsType?: string; mountFlags?: string[] };
}

/** One alloc's use of a staged volume (bucket csi/usage/<plugin>/<volume>). */
export interface VolumeUsageRecord {
  allocId: string;
  usage: VolumeUsageOptions;
}

/** An unmount that failed and is retried in the background (bucket csi/pending). */
export interface PendingUnmountRecord {
  id: string;
  allocId: string;
  pluginId: string;
  volumeId: string;
  /** The plugin's own id for the volume, when it differs from volumeId. */
  externalId?: string;
  /** The group's name for the volume (its key in the alloc's mount stubs). */
  volumeName?: string;
  usage: VolumeUsageOptions;
  attempts: number;
  lastError?: string;
  /** When it was first queued, ms since the epoch. */
  since: number;
}

/** A mounted volume of an alloc, saved so a restore can check it. */
export interface VolumeMountStub {
  /** The group's volume name. */
  name: string;
  volumeId: string;
  /** The plugin's own id for the volume, when it differs from volumeId. */
  externalId?: string;
  pluginId: string;
  stagingPath?: string;
  targetPath: string;
  usage: VolumeUsageOptions;
  publishContext?: Record<string, string>;
}

/** Entries that could not be decoded are reported, never dropped silently. */
export interface DecodeFailure {
  key: string;
  error: string;
}

export interface ClientStateDB extends Disposable {
  /** The schema version the store is at (after any migration on open). */
  readonly schemaVersion: number;
  /** The file behind the store, or undefined for the in-memory one. */
  readonly path: string | undefined;

  getRegistryState(): RegistryStateRecord | undefined;
  putRegistryState(state: RegistryStateRecord): void;

  /** allocations/<id>/alloc — the alloc and its job, as the agent shapes it. */
  putAllocation(allocId: string, alloc: unknown): void;
  getAllocation<T = unknown>(allocId: string): T | undefined;
  listAllocations<T = unknown>(): { allocs: { allocId: string; alloc: T }[]; failures: DecodeFailure[] };
  /** Removes the alloc with its volumes and task sub-buckets. */
  deleteAllocation(allocId: string): void;

  /** allocations/<id>/volumes — mount stubs keyed by the group's volume name. */
  putVolumeStubs(allocId: string, stubs: Record<string, VolumeMountStub>): void;
  getVolumeStubs(allocId: string): Record<string, VolumeMountStub> | undefined;

  /** allocations/<id>/task-<name>/{handle,state}. */
  putTaskHandle(allocId: string, task: string, handle: unknown): void;
  getTaskHandle<T = unknown>(allocId: string, task: string): T | undefined;
  putTaskState(allocId: string, task: string, state: unknown): void;
  getTaskState<T = unknown>(allocId: string, task: string): T | undefined;
  deleteTask(allocId: string, task: string): void;

  /** csi/usage/<plugin>/<volume>; an empty list removes the entry. */
  putVolumeUsage(pluginId: string, volumeId: string, users: VolumeUsageRecord[]): void;
  getVolumeUsage(pluginId: string, volumeId: string): VolumeUsageRecord[];
  listVolumeUsage(): { pluginId: string; volumeId: string; users: VolumeUsageRecord[] }[];

  /** csi/pending. */
  putPendingUnmount(record: PendingUnmountRecord): void;
  deletePendingUnmount(id: string): void;
  listPendingUnmounts(): PendingUnmountRecord[];

  /** volumes/<id> — the local volume catalog and its claims (shape owned by the agent). */
  putVolume(volumeId: string, volume: unknown): void;
  getVolume<T = unknown>(volumeId: string): T | undefined;
  deleteVolume(volumeId: string): void;
  listVolumes<T = unknown>(): T[];

  close(): void;
}
