// The contract of a node plugin's volume manager: mount (stage + publish)
// and unmount (unpublish + unstage on the last user) for allocs.
import type { UsageOptions } from './usage';

/** A volume as the volume manager needs it. */
export interface CSIVolumeRef {
  /** The volume's id on this cluster; a path component, checked like one. */
  id: string;
  /** The storage provider's id for it (CSI volume_id); defaults to `id`. */
  externalId?: string;
  /** The plugin that serves it. */
  pluginId: string;
  secrets?: Record<string, string>;
  /** The volume context from CreateVolume (CSI volume_context). */
  context?: Record<string, string>;
  /** The volume's own mount options; a usage's options override them. */
  mountOptions?: { fsType?: string; mountFlags?: string[] };
}

/** Where a mounted volume is, as host paths. */
export interface MountInfo {
  /** What to bind into the alloc's tasks: the published host path. */
  source: string;
  /** The staging path on the host, when the plugin stages. */
  stagingPath?: string;
  /** The published (target) host path; same as `source`. */
  targetPath: string;
}

export interface VolumeOperationOptions {
  /** Aborting while the call waits for another operation on the same volume rejects with an AbortError and runs nothing; aborting later abandons the current CSI call. */
  signal?: AbortSignal;
}

export interface VolumeManager {
  /** The node plugin this manager mounts for. */
  readonly pluginId: string;

  /**
   * Records the usage, stages the volume if the plugin requires staging and
   * it is not staged yet, publishes it unless the target is a mount already.
   * On failure releases what this call recorded. Emits a `Mount volume` node event.
   */
  mountVolume(
    volume: CSIVolumeRef,
    alloc: { id: string },
    usage: UsageOptions,
    publishContext?: Record<string, string>,
    options?: VolumeOperationOptions,
  ): Promise<MountInfo>;

  /**
   * Unpublishes, releases the usage, and unstages when no other alloc uses
   * the staged volume (with that usage). A plugin NOT_FOUND counts as done.
   * Emits an `Unmount volume` node event.
   */
  unmountVolume(volume: Pick<CSIVolumeRef, 'id' | 'externalId' | 'pluginId'>, allocId: string, usage: UsageOptions, options?: VolumeOperationOptions): Promise<void>;

  /** Whether `targetPath` (a host path, e.g. MountInfo.targetPath) is a mount point now. */
  hasMount(targetPath: string): Promise<boolean>;

  /** The paths a mount of `volumeId` for `allocId` with `usage` uses (host paths). */
  mountInfoFor(volumeId: string, allocId: string, usage: UsageOptions): MountInfo;

  /** The allocs recorded as using (this plugin's) `volumeId` with `usage`. */
  usersOf(volumeId: string, usage: UsageOptions): string[];

  /** The node id the plugin reported (NodeGetInfo), once fingerprinted. */
  readonly externalNodeId: string | undefined;
}
