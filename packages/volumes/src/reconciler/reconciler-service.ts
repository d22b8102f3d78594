// The volume reconciler's contract (token IVolumeReconciler): what the csi
// hook asks of it (mount, unmount), what the agent reads (records, pending
// unmounts), and its lifecycle.
import type { Disposable, PluginWaitPhase } from '@csiplug/core';
import type { UsageOptions } from '@csiplug/csimanager';
import type { VolumeMountRecord } from './mount-record';

/** What an alloc asks of one of its volumes. */
export interface VolumeMountRequest {
  allocId: string;
  /** The group's name for the volume. */
  name: string;
  /** The catalog id. */
  volumeId: string;
  usage: UsageOptions;
}

/** A volume mounted for an alloc. */
export interface MountedVolumeInfo {
  name: string;
  volumeId: string;
  pluginId: string;
  /** The published host path. */
  targetPath: string;
  stagingPath?: string;
  readOnly: boolean;
  /** It was found still mounted from before an agent restart. */
  restored: boolean;
}

export interface MountOptions {
  /** `prerun` for a fresh start, `restore` after an agent restart: the limit of the plugin wait. */
  phase: PluginWaitPhase;
  /** Gives up with the signal's reason; what was done is undone. */
  signal?: AbortSignal;
}

/** How the first attempt of one volume's unmount went; a failed one is retried in the background. */
export interface UnmountOutcome {
  name: string;
  volumeId: string;
  pluginId: string;
  /** Set when the first attempt failed (the record stays, desired unmounted, and is retried). */
  error?: unknown;
}

export interface VolumeReconcilerService extends Disposable {
  /** Reads the records back and resumes every unmount left to do. Idempotent. */
  start(): void;
  /** Wants the volume mounted for the alloc and resolves once it is; rejects with a VolumeMountError after undoing what it did. */
  mount(request: VolumeMountRequest, options: MountOptions): Promise<MountedVolumeInfo>;
  /** Wants the alloc's volumes (those named, or all) unmounted; resolves with how the first attempt at each went. */
  unmount(allocId: string, names?: readonly string[]): Promise<UnmountOutcome[]>;
  /** The volumes an alloc has mounted now. */
  mounted(allocId: string): MountedVolumeInfo[];
  /** Every record (of one alloc). */
  list(allocId?: string): VolumeMountRecord[];
  /** Unmounts not done yet. */
  pendingUnmounts(): VolumeMountRecord[];
}
