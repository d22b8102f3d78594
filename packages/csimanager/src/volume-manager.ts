// The contract of a node plugin's volume manager: the four CSI node steps
// (stage, publish, unpublish, unstage) for one volume and one alloc, each
// idempotent and each checked against the mount table. It keeps no state:
// who uses a staged volume, what an alloc wants mounted and what is left to
// undo belong to the volume reconciler (@csiplug/volumes), which decides
// which step to run and when.
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

/** What a node plugin says of a volume at one of its paths (NodeGetVolumeStats). */
export interface VolumeCondition {
  /**
   * The volume is not healthy there: VOLUME_CONDITION abnormal, or the plugin
   * answered NOT_FOUND (the volume is not at that path).
   */
  abnormal: boolean;
  /** The plugin's words (its condition message, or its NOT_FOUND details); empty when it said nothing. */
  message: string;
  /** Whether the plugin reported a condition at all (VOLUME_CONDITION); NOT_FOUND counts as one. */
  reported: boolean;
}

/** What NodeGetVolumeStats says a volume holds: bytes and inodes (each part the plugin reported), and its condition. */
export interface VolumeUsage {
  bytes?: { total?: number; used?: number; available?: number };
  inodes?: { total?: number; used?: number; available?: number };
  /** Present when the plugin reports conditions (VOLUME_CONDITION). */
  condition?: { abnormal: boolean; message: string };
}

export interface VolumeOperationOptions {
  /** Aborting while the call waits for another operation on the same volume rejects with an AbortError and runs nothing; aborting later abandons the current CSI call. */
  signal?: AbortSignal;
}

export interface VolumeConditionOptions extends VolumeOperationOptions {
  /**
   * The host path the mount was made at (the record's own target or staging
   * path). When the plugin's current registration puts the volume elsewhere
   * (an upgrade changed its mount dir), the plugin cannot be asked about it:
   * undefined, as without GET_VOLUME_STATS — never a NOT_FOUND read as stale.
   */
  hostPath?: string;
}

export interface VolumeManager {
  /** The node plugin this manager mounts for. */
  readonly pluginId: string;

  /** Whether the plugin stages volumes (NodeGetCapabilities STAGE_UNSTAGE_VOLUME). */
  requiresStaging(options?: VolumeOperationOptions): Promise<boolean>;

  /**
   * NodeStageVolume at the staging path of (volume, usage), unless that path
   * is a mount point already. Emits no event; a failure is a VolumeOperationError naming the step.
   */
  stageVolume(
    volume: CSIVolumeRef,
    usage: UsageOptions,
    publishContext?: Record<string, string>,
    options?: VolumeOperationOptions,
  ): Promise<void>;

  /**
   * NodePublishVolume at the alloc's target path (staged first by the
   * caller when the plugin stages), unless the target is a mount point
   * already. Emits a `Mount volume` node event.
   */
  publishVolume(
    volume: CSIVolumeRef,
    allocId: string,
    usage: UsageOptions,
    publishContext?: Record<string, string>,
    options?: VolumeOperationOptions,
  ): Promise<MountInfo>;

  /**
   * NodeUnpublishVolume (NOT_FOUND counts as done), then checks the target
   * is no longer a mount point and tidies the alloc's empty dirs. Emits an
   * `Unmount volume` node event.
   */
  unpublishVolume(
    volume: Pick<CSIVolumeRef, 'id' | 'externalId' | 'pluginId'>,
    allocId: string,
    usage: UsageOptions,
    options?: VolumeOperationOptions,
  ): Promise<void>;

  /** NodeUnstageVolume of (volume, usage) (NOT_FOUND counts as done), when the plugin stages; tidies the empty staging dirs. */
  unstageVolume(
    volume: Pick<CSIVolumeRef, 'id' | 'externalId' | 'pluginId'>,
    usage: UsageOptions,
    options?: VolumeOperationOptions,
  ): Promise<void>;

  /**
   * NodeGetVolumeStats of the volume at the alloc's target path (`at:
   * 'target'`) or at its staging path (`at: 'staging'`), read as a condition.
   * Undefined when the plugin does not offer GET_VOLUME_STATS. NOT_FOUND is an
   * abnormal condition; any other error (UNIMPLEMENTED, a timeout) is thrown.
   * Read-only: not queued behind the volume's other steps.
   */
  volumeCondition(
    volume: Pick<CSIVolumeRef, 'id' | 'externalId' | 'pluginId'>,
    allocId: string,
    usage: UsageOptions,
    at: 'target' | 'staging',
    options?: VolumeConditionOptions,
  ): Promise<VolumeCondition | undefined>;

  /**
   * NodeGetVolumeStats of the volume at the alloc's target path: its usage.
   * Undefined when the plugin does not offer GET_VOLUME_STATS, or (`hostPath`)
   * puts the volume elsewhere now. Read-only: not queued.
   */
  volumeUsage(
    volume: Pick<CSIVolumeRef, 'id' | 'externalId' | 'pluginId'>,
    allocId: string,
    usage: UsageOptions,
    options?: VolumeConditionOptions,
  ): Promise<VolumeUsage | undefined>;

  /**
   * NodeExpandVolume of the volume at the alloc's target path (online
   * expansion) to `capacityBytes`; answers the capacity the plugin reports
   * (or `capacityBytes` when it says none). Queued behind the volume's other
   * steps. Undefined when the plugin does not offer EXPAND_VOLUME on its node side.
   */
  expandVolume(
    volume: CSIVolumeRef,
    allocId: string,
    usage: UsageOptions,
    capacityBytes: number,
    options?: VolumeOperationOptions,
  ): Promise<number | undefined>;

  /** Whether `targetPath` (a host path, e.g. MountInfo.targetPath) is a mount point now. */
  hasMount(targetPath: string): Promise<boolean>;

  /** The paths a mount of `volumeId` for `allocId` with `usage` uses (host paths). */
  mountInfoFor(volumeId: string, allocId: string, usage: UsageOptions): MountInfo;

  /** The node id the plugin reported (NodeGetInfo), once fingerprinted. */
  readonly externalNodeId: string | undefined;
}
