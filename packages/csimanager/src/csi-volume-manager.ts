// The default VolumeManager of one node plugin. It outlives plugin
// instances: every operation looks up the plugin's live instance (a plugin
// task restart swaps the instance, not the manager), while the usage tracker
// and the per-volume queue are shared by all managers of the CSI manager.
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { AbortError, Clock, Logger, ValidationError, assertPathSafeId, errorMessage } from '@csiplug/core';
import { isNotFound } from '@csiplug/csi';
import { VolumeOperationError } from './errors';
import type { KeyedMutex } from './keyed-mutex';
import { type MountTable, isMountPointRetrying } from './mount-table';
import type { NodeEvent, NodeEventMessage } from './node-event';
import type { PluginInstance } from './plugin-instance';
import { PER_ALLOC_DIR_NAME, pluginMountRoots } from './plugin-options';
import { UsageOptions, assertUsage, volumeCapabilityFor } from './usage';
import type { VolumeUsageTracker } from './usage-tracker';
import type { CSIVolumeRef, MountInfo, VolumeManager, VolumeOperationOptions } from './volume-manager';
import { VolumePaths, volumePaths } from './volume-paths';

export interface VolumeManagerDeps {
  dataDir: string;
  /** The plugin's live node instance; throws PluginInstanceNotFoundError when there is none. */
  instance(): PluginInstance;
  tracker: VolumeUsageTracker;
  mutex: KeyedMutex;
  mountTable: MountTable;
  clock: Clock;
  logger: Logger;
  emit(event: NodeEvent): void;
}

const DIR_MODE = 0o700;

function isAbort(err: unknown): boolean {
  return err instanceof AbortError || (err instanceof Error && err.name === 'AbortError');
}

/** Removes an empty directory; anything else (gone, not empty, a mount) is left alone. */
async function removeEmptyDir(dir: string): Promise<void> {
  try {
    await fs.rmdir(dir);
  } catch {
    // ENOENT, ENOTEMPTY, EBUSY: nothing to tidy, or not ours to remove.
  }
}

export class CSIVolumeManager implements VolumeManager {
  private readonly log: Logger;

  constructor(
    readonly pluginId: string,
    private readonly deps: VolumeManagerDeps,
  ) {
    this.log = deps.logger.child({ component: 'csi-volume-manager', pluginId });
  }

  get externalNodeId(): string | undefined {
    try {
      return this.deps.instance().nodeId;
    } catch {
      return undefined;
    }
  }

  async mountVolume(
    volume: CSIVolumeRef,
    alloc: { id: string },
    usage: UsageOptions,
    publishContext: Record<string, string> = {},
    options: VolumeOperationOptions = {},
  ): Promise<MountInfo> {
    const volumeId = String(volume?.id);
    const allocId = String(alloc?.id);
    try {
      this.check(volume, allocId, usage);
      const info = await this.deps.mutex.run(this.keyOf(volume.id), () => this.mount(volume, allocId, usage, publishContext, options.signal), options.signal);
      this.event('Mount volume', volumeId, allocId);
      return info;
    } catch (err) {
      this.event('Mount volume', volumeId, allocId, err);
      throw err;
    }
  }

  async unmountVolume(
    volume: Pick<CSIVolumeRef, 'id' | 'externalId' | 'pluginId'>,
    allocId: string,
    usage: UsageOptions,
    options: VolumeOperationOptions = {},
  ): Promise<void> {
    const volumeId = String(volume?.id);
    try {
      this.check(volume, allocId, usage);
      await this.deps.mutex.run(this.keyOf(volume.id), () => this.unmount(volume, allocId, usage, options.signal), options.signal);
      this.event('Unmount volume', volumeId, allocId);
    } catch (err) {
      this.event('Unmount volume', volumeId, allocId, err);
      throw err;
    }
  }

  hasMount(targetPath: string): Promise<boolean> {
    return this.deps.mountTable.isMountPoint(targetPath);
  }

  mountInfoFor(volumeId: string, allocId: string, usage: UsageOptions): MountInfo {
    const inst = this.deps.instance();
    const paths = volumePaths(pluginMountRoots(inst.registration, this.deps.dataDir), volumeId, allocId, usage);
    return this.toMountInfo(paths, inst.info().node?.requiresStaging ?? false);
  }

  usersOf(volumeId: string, usage: UsageOptions): string[] {
    return this.deps.tracker.usersWith(this.pluginId, volumeId, usage);
  }

  // ---- internals ------------------------------------------------------------

  private keyOf(volumeId: string): string {
    return `${this.pluginId}\0${volumeId}`;
  }

  private check(volume: Pick<CSIVolumeRef, 'id' | 'pluginId'>, allocId: string, usage: UsageOptions): void {
    if (typeof volume !== 'object' || volume === null) throw new ValidationError('a volume is required', 'volume');
    assertPathSafeId(volume.id, 'volume id');
    assertPathSafeId(allocId, 'alloc id');
    if (volume.pluginId !== this.pluginId) {
      throw new ValidationError(`volume "${volume.id}" belongs to plugin "${volume.pluginId}", not "${this.pluginId}"; use that plugin's volume manager`, 'pluginId');
    }
    assertUsage(usage);
  }

  private toMountInfo(paths: VolumePaths, staged: boolean): MountInfo {
    return { source: paths.hostTargetPath, targetPath: paths.hostTargetPath, ...(staged ? { stagingPath: paths.hostStagingPath } : {}) };
  }

  private fail(op: 'mount' | 'unmount', volumeId: string, allocId: string, step: string, err: unknown): Error {
    if (isAbort(err) || err instanceof ValidationError) return err as Error;
    return new VolumeOperationError(
      op,
      volumeId,
      allocId,
      this.pluginId,
      `${op} of volume "${volumeId}" for alloc ${allocId} on plugin "${this.pluginId}" failed at ${step}: ${errorMessage(err)}`,
      { cause: err },
    );
  }

  private async mount(volume: CSIVolumeRef, allocId: string, usage: UsageOptions, publishContext: Record<string, string>, signal?: AbortSignal): Promise<MountInfo> {
    const { tracker } = this.deps;
    const inst = this.deps.instance();
    const paths = volumePaths(pluginMountRoots(inst.registration, this.deps.dataDir), volume.id, allocId, usage);
    const volumeId = volume.externalId || volume.id;
    const capability = volumeCapabilityFor(usage, volume.mountOptions);
    const common = { volumeId, publishContext, volumeCapability: capability, secrets: volume.secrets ?? {}, volumeContext: volume.context ?? {} };

    // Recorded first: an unmount of another alloc that runs while this mount
    // is under way must see this alloc as a user of the staged volume.
    const claimed = tracker.claim(this.pluginId, volume.id, allocId, usage);
    // Set before each call: a call that fails or is abandoned (deadline,
    // abort) may still have mounted on the plugin's side.
    let stageAttempted = false;
    let publishAttempted = false;
    let requiresStaging = false;
    let step = 'NodeGetCapabilities';
    try {
      requiresStaging = (await inst.nodeCapabilities(signal)).stageUnstageVolume;
      if (requiresStaging) {
        // Checked before the dir is made: a path that does not exist yet is
        // known not to be a mount without reading the mount table.
        step = 'checking the staging mount';
        if (await this.isMountPoint(paths.hostStagingPath, volume.id, allocId, signal)) {
          this.log.debug('volume already staged; reusing the staging mount', { volumeId: volume.id, allocId, stagingPath: paths.hostStagingPath });
        } else {
          step = 'creating the staging dir';
          await fs.mkdir(paths.hostStagingPath, { recursive: true, mode: DIR_MODE });
          step = 'NodeStageVolume';
          stageAttempted = true;
          await inst.client.nodeStageVolume({ ...common, stagingTargetPath: paths.pluginStagingPath }, { signal });
        }
      }
      step = 'creating the alloc dir';
      await fs.mkdir(paths.hostAllocVolumeDir, { recursive: true, mode: DIR_MODE });
      step = 'checking the target mount';
      if (await this.isMountPoint(paths.hostTargetPath, volume.id, allocId, signal)) {
        this.log.debug('volume already published for this alloc; reusing it', { volumeId: volume.id, allocId, targetPath: paths.hostTargetPath });
      } else {
        step = 'NodePublishVolume';
        publishAttempted = true;
        await inst.client.nodePublishVolume(
          { ...common, ...(requiresStaging ? { stagingTargetPath: paths.pluginStagingPath } : {}), targetPath: paths.pluginTargetPath, readonly: usage.readOnly },
          { signal },
        );
      }
      this.log.info('volume mounted', { volumeId: volume.id, allocId, targetPath: paths.hostTargetPath, staged: stageAttempted });
      return this.toMountInfo(paths, requiresStaging);
    } catch (err) {
      if (claimed) await this.releaseAfterFailedMount(volume.id, volumeId, allocId, usage, paths, { stageAttempted, publishAttempted });
      throw this.fail('mount', volume.id, allocId, step, err);
    }
  }

  /**
   * A mount's check of a path, retried while the mount table cannot be read
   * for a transient fault of the agent (EMFILE…): failing the mount then would
   * fail an alloc's restore and unmount under its running tasks. (unmount's
   * own check needs no retry: a failure there keeps the volume pending.)
   */
  private isMountPoint(target: string, volumeId: string, allocId: string, signal?: AbortSignal): Promise<boolean> {
    return isMountPointRetrying(this.deps.mountTable, target, {
      clock: this.deps.clock,
      signal,
      onFault: (err, attempt, delayMs) =>
        this.log.warn('cannot read the mount table for a fault of the agent itself; checking again', { volumeId, allocId, target, attempt, delayMs, error: errorMessage(err) }),
    });
  }

  /**
   * Undoes what a failed mount did: unpublishes if it asked to publish,
   * forgets the usage, and unstages if it asked to stage and nobody else
   * uses the staged volume. Both CSI calls are idempotent, so asking again
   * for what never happened is harmless; they run without the caller's
   * (possibly aborted) signal, through the plugin's current instance.
   */
  private async releaseAfterFailedMount(
    volumeId: string,
    externalId: string,
    allocId: string,
    usage: UsageOptions,
    paths: VolumePaths,
    attempted: { stageAttempted: boolean; publishAttempted: boolean },
  ): Promise<void> {
    try {
      const client = this.deps.instance().client;
      if (attempted.publishAttempted) await client.nodeUnpublishVolume({ volumeId: externalId, targetPath: paths.pluginTargetPath });
      const { remaining } = this.deps.tracker.free(this.pluginId, volumeId, allocId, usage);
      if (attempted.stageAttempted && remaining.length === 0) {
        await client.nodeUnstageVolume({ volumeId: externalId, stagingTargetPath: paths.pluginStagingPath });
      }
    } catch (err) {
      this.log.error('could not undo a failed mount; the volume may stay mounted until its last user unmounts', { volumeId, allocId, error: errorMessage(err) });
    }
  }

  private async unmount(volume: Pick<CSIVolumeRef, 'id' | 'externalId'>, allocId: string, usage: UsageOptions, signal?: AbortSignal): Promise<void> {
    const { tracker, mountTable } = this.deps;
    const inst = this.deps.instance();
    const roots = pluginMountRoots(inst.registration, this.deps.dataDir);
    const paths = volumePaths(roots, volume.id, allocId, usage);
    const volumeId = volume.externalId || volume.id;
    let step = 'NodeUnpublishVolume';
    try {
      try {
        await inst.client.nodeUnpublishVolume({ volumeId, targetPath: paths.pluginTargetPath }, { signal });
      } catch (err) {
        if (!isNotFound(err)) throw err;
        this.log.debug('NodeUnpublishVolume: plugin reports NOT_FOUND; counted as unpublished', { volumeId: volume.id, allocId });
      }
      step = 'checking the target mount';
      if (await mountTable.isMountPoint(paths.hostTargetPath)) {
        throw new Error(`${paths.hostTargetPath} is still a mount point after NodeUnpublishVolume`);
      }
      await removeEmptyDir(paths.hostTargetPath);
      await removeEmptyDir(paths.hostAllocVolumeDir);
      await removeEmptyDir(path.join(roots.hostRoot, PER_ALLOC_DIR_NAME, allocId));

      step = 'releasing the usage';
      const { removed, remaining } = tracker.free(this.pluginId, volume.id, allocId, usage);
      step = 'NodeGetCapabilities';
      const requiresStaging = (await inst.nodeCapabilities(signal)).stageUnstageVolume;
      if (requiresStaging && remaining.length === 0) {
        step = 'NodeUnstageVolume';
        try {
          await inst.client.nodeUnstageVolume({ volumeId, stagingTargetPath: paths.pluginStagingPath }, { signal });
        } catch (err) {
          if (!isNotFound(err)) throw err;
          this.log.debug('NodeUnstageVolume: plugin reports NOT_FOUND; counted as unstaged', { volumeId: volume.id });
        }
        await removeEmptyDir(paths.hostStagingPath);
        await removeEmptyDir(path.dirname(paths.hostStagingPath));
      }
      this.log.info('volume unmounted', { volumeId: volume.id, allocId, wasRecorded: removed, unstaged: requiresStaging && remaining.length === 0, otherUsers: remaining.length });
    } catch (err) {
      throw this.fail('unmount', volume.id, allocId, step, err);
    }
  }

  private event(message: NodeEventMessage, volumeId: string, allocId: string, err?: unknown): void {
    const details = {
      volume_id: volumeId,
      alloc_id: allocId,
      plugin_id: this.pluginId,
      success: err === undefined ? ('true' as const) : ('false' as const),
      ...(err !== undefined ? { error: errorMessage(err) } : {}),
    };
    this.deps.emit(Object.freeze({ subsystem: 'Storage', message, details: Object.freeze(details), time: this.deps.clock.now() }));
  }
}
