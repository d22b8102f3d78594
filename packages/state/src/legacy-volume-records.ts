// The volume records the CSI manager and the hooks persist today through the
// legacy VolumeStateStore methods (csi/usage, csi/pending, the mount stubs in
// each alloc's bucket). They stay here only until @csiplug/volumes owns them:
// the state sits below the packages that use it and should not know their
// shapes. New code keeps its records in its own package and stores them as
// JSON (VolumeStateStore.putVolumeMount).

/**
 * How an alloc uses a volume; compared by value.
 * @deprecated — moves to @csiplug/volumes.
 */
export interface VolumeUsageOptions {
  readOnly: boolean;
  attachmentMode: string;
  accessMode: string;
  mountOptions?: { fsType?: string; mountFlags?: string[] };
}

/**
 * One alloc's use of a staged volume (bucket csi/usage/<plugin>/<volume>).
 * @deprecated — moves to @csiplug/volumes.
 */
export interface VolumeUsageRecord {
  allocId: string;
  usage: VolumeUsageOptions;
}

/**
 * An unmount that failed and is retried in the background (bucket csi/pending).
 * @deprecated — moves to @csiplug/volumes.
 */
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

/**
 * A mounted volume of an alloc, saved so a restore can check it.
 * @deprecated — moves to @csiplug/volumes.
 */
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
