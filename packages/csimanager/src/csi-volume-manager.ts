// The default VolumeManager of one node plugin: the four CSI node steps,
// each idempotent and each checked against the mount table. It outlives
// plugin instances: every step looks up the plugin's live instance (a plugin
// task restart swaps the instance, not the manager). Steps on one volume run
// one at a time (the CSI manager's per-volume queue); which step runs when —
// and who else uses a staged volume — is the volume reconciler's business
// (@csiplug/volumes), not this file's.
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import {
  AbortError,
  type Clock,
  type Logger,
  type Metrics,
  ValidationError,
  assertPathSafeId,
  errorMessage,
  recordSafely,
  secondsSince,
} from '@csiplug/core';
import { CSIError, isNotFound } from '@csiplug/csi';
import { VolumeOperationError, isPluginUnavailable } from './errors';
import type { KeyedMutex } from './keyed-mutex';
import { VOLUME_STEP_SECONDS } from './metrics';
import { type MountTable, isMountPointRetrying } from './mount-table';
import type { NodeEvent, NodeEventMessage } from './node-event';
import type { PluginInstance } from './plugin-instance';
import { PER_ALLOC_DIR_NAME, pluginMountRoots } from './plugin-options';
import { type UsageOptions, assertUsage, volumeCapabilityFor } from './usage';
import type {
  CSIVolumeRef,
  MountInfo,
  VolumeCondition,
  VolumeConditionOptions,
  VolumeManager,
  VolumeOperationOptions,
  VolumeUsage,
} from './volume-manager';
import { type VolumePaths, volumePaths } from './volume-paths';

export interface VolumeManagerDeps {
  dataDir: string;
  /** The plugin's live node instance; throws PluginInstanceNotFoundError when there is none. */
  instance(): PluginInstance;
  mutex: KeyedMutex;
  mountTable: MountTable;
  clock: Clock;
  logger: Logger;
  /** Where each step's duration is recorded (VOLUME_STEP_SECONDS); nothing is recorded without it. */
  metrics?: Metrics;
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

type Step = 'stage' | 'publish' | 'unpublish' | 'unstage' | 'expand';

/** An int64 of the wire (a decimal string) as a number; undefined when absent or not a count. */
function count(v: unknown): number | undefined {
  const n = typeof v === 'string' || typeof v === 'number' ? Number(v) : NaN;
  return Number.isFinite(n) && n >= 0 ? n : undefined;
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

  async requiresStaging(options: VolumeOperationOptions = {}): Promise<boolean> {
    return (await this.deps.instance().nodeCapabilities(options.signal)).stageUnstageVolume;
  }

  stageVolume(
    volume: CSIVolumeRef,
    usage: UsageOptions,
    publishContext: Record<string, string> = {},
    options: VolumeOperationOptions = {},
  ): Promise<void> {
    return this.failureEvented('Mount volume', volume, () =>
      this.step('stage', volume, '', usage, options, async (inst, paths, signal) => {
        let step = 'checking the staging mount';
        try {
          // Checked before the dir is made: a path that does not exist yet is
          // known not to be a mount without reading the mount table.
          if (await this.isMountPoint(paths.hostStagingPath, volume.id, '', signal)) {
            this.log.debug('volume already staged; reusing the staging mount', { volumeId: volume.id, stagingPath: paths.hostStagingPath });
            return;
          }
          step = 'creating the staging dir';
          await fs.mkdir(paths.hostStagingPath, { recursive: true, mode: DIR_MODE });
          step = 'NodeStageVolume';
          await inst.client.nodeStageVolume(
            { ...this.common(volume, usage, publishContext), stagingTargetPath: paths.pluginStagingPath },
            { signal },
          );
          this.log.info('volume staged', { volumeId: volume.id, stagingPath: paths.hostStagingPath });
        } catch (err) {
          throw this.fail('mount', volume.id, '', step, err);
        }
      }),
    );
  }

  async publishVolume(
    volume: CSIVolumeRef,
    allocId: string,
    usage: UsageOptions,
    publishContext: Record<string, string> = {},
    options: VolumeOperationOptions = {},
  ): Promise<MountInfo> {
    return this.evented('Mount volume', volume, allocId, () =>
      this.step('publish', volume, allocId, usage, options, async (inst, paths, signal) => {
        let step = 'NodeGetCapabilities';
        try {
          const staged = (await inst.nodeCapabilities(signal)).stageUnstageVolume;
          step = 'creating the alloc dir';
          await fs.mkdir(paths.hostAllocVolumeDir, { recursive: true, mode: DIR_MODE });
          step = 'checking the target mount';
          if (await this.isMountPoint(paths.hostTargetPath, volume.id, allocId, signal)) {
            this.log.debug('volume already published for this alloc; reusing it', {
              volumeId: volume.id,
              allocId,
              targetPath: paths.hostTargetPath,
            });
          } else {
            step = 'NodePublishVolume';
            await inst.client.nodePublishVolume(
              {
                ...this.common(volume, usage, publishContext),
                ...(staged ? { stagingTargetPath: paths.pluginStagingPath } : {}),
                targetPath: paths.pluginTargetPath,
                readonly: usage.readOnly,
              },
              { signal },
            );
            this.log.info('volume published', { volumeId: volume.id, allocId, targetPath: paths.hostTargetPath });
          }
          return this.toMountInfo(paths, staged);
        } catch (err) {
          throw this.fail('mount', volume.id, allocId, step, err);
        }
      }),
    );
  }

  unpublishVolume(
    volume: Pick<CSIVolumeRef, 'id' | 'externalId' | 'pluginId'>,
    allocId: string,
    usage: UsageOptions,
    options: VolumeOperationOptions = {},
  ): Promise<void> {
    return this.evented('Unmount volume', volume, allocId, () =>
      this.step('unpublish', volume, allocId, usage, options, async (inst, paths, signal) => {
        let step = 'NodeUnpublishVolume';
        try {
          try {
            await inst.client.nodeUnpublishVolume(
              { volumeId: volume.externalId || volume.id, targetPath: paths.pluginTargetPath },
              { signal },
            );
          } catch (err) {
            if (!isNotFound(err)) throw err;
            this.log.debug('NodeUnpublishVolume: plugin reports NOT_FOUND; counted as unpublished', { volumeId: volume.id, allocId });
          }
          step = 'checking the target mount';
          if (await this.deps.mountTable.isMountPoint(paths.hostTargetPath)) {
            throw new Error(`${paths.hostTargetPath} is still a mount point after NodeUnpublishVolume`);
          }
          await removeEmptyDir(paths.hostTargetPath);
          await removeEmptyDir(paths.hostAllocVolumeDir);
          await removeEmptyDir(path.join(pluginMountRoots(inst.registration, this.deps.dataDir).hostRoot, PER_ALLOC_DIR_NAME, allocId));
          this.log.info('volume unpublished', { volumeId: volume.id, allocId });
        } catch (err) {
          throw this.fail('unmount', volume.id, allocId, step, err);
        }
      }),
    );
  }

  unstageVolume(
    volume: Pick<CSIVolumeRef, 'id' | 'externalId' | 'pluginId'>,
    usage: UsageOptions,
    options: VolumeOperationOptions = {},
  ): Promise<void> {
    return this.failureEvented('Unmount volume', volume, () =>
      this.step('unstage', volume, '', usage, options, async (inst, paths, signal) => {
        let step = 'NodeGetCapabilities';
        try {
          if (!(await inst.nodeCapabilities(signal)).stageUnstageVolume) return;
          step = 'NodeUnstageVolume';
          try {
            await inst.client.nodeUnstageVolume(
              { volumeId: volume.externalId || volume.id, stagingTargetPath: paths.pluginStagingPath },
              { signal },
            );
          } catch (err) {
            if (!isNotFound(err)) throw err;
            this.log.debug('NodeUnstageVolume: plugin reports NOT_FOUND; counted as unstaged', { volumeId: volume.id });
          }
          await removeEmptyDir(paths.hostStagingPath);
          await removeEmptyDir(path.dirname(paths.hostStagingPath));
          this.log.info('volume unstaged', { volumeId: volume.id });
        } catch (err) {
          throw this.fail('unmount', volume.id, '', step, err);
        }
      }),
    );
  }

  async volumeCondition(
    volume: Pick<CSIVolumeRef, 'id' | 'externalId' | 'pluginId'>,
    allocId: string,
    usage: UsageOptions,
    at: 'target' | 'staging',
    options: VolumeConditionOptions = {},
  ): Promise<VolumeCondition | undefined> {
    this.check(volume, allocId, usage, at === 'staging');
    const inst = this.deps.instance();
    const caps = await inst.nodeCapabilities(options.signal);
    if (!caps.getVolumeStats) return undefined;
    const paths = volumePaths(pluginMountRoots(inst.registration, this.deps.dataDir), volume.id, allocId || '_', usage);
    // Made under another mount dir (a plugin upgrade moved it): this instance does not know that path.
    if (
      options.hostPath !== undefined &&
      path.resolve(options.hostPath) !== (at === 'target' ? paths.hostTargetPath : paths.hostStagingPath)
    )
      return undefined;
    const staging = caps.stageUnstageVolume ? { stagingTargetPath: paths.pluginStagingPath } : {};
    try {
      const res = await inst.client.nodeGetVolumeStats(
        {
          volumeId: volume.externalId || volume.id,
          volumePath: at === 'target' ? paths.pluginTargetPath : paths.pluginStagingPath,
          ...staging,
        },
        { signal: options.signal },
      );
      const condition = res.volumeCondition;
      if (!caps.volumeCondition || !condition) return { abnormal: false, message: '', reported: false };
      return { abnormal: condition.abnormal === true, message: condition.message ?? '', reported: true };
    } catch (err) {
      // The volume is not at that path, as far as the plugin knows: as bad as an abnormal condition.
      if (isNotFound(err))
        return {
          abnormal: true,
          message: `NodeGetVolumeStats: NOT_FOUND${err instanceof CSIError && err.details ? `: ${err.details}` : ''}`,
          reported: true,
        };
      throw err;
    }
  }

  async volumeUsage(
    volume: Pick<CSIVolumeRef, 'id' | 'externalId' | 'pluginId'>,
    allocId: string,
    usage: UsageOptions,
    options: VolumeConditionOptions = {},
  ): Promise<VolumeUsage | undefined> {
    this.check(volume, allocId, usage, false);
    const inst = this.deps.instance();
    const caps = await inst.nodeCapabilities(options.signal);
    if (!caps.getVolumeStats) return undefined;
    const paths = volumePaths(pluginMountRoots(inst.registration, this.deps.dataDir), volume.id, allocId, usage);
    if (options.hostPath !== undefined && path.resolve(options.hostPath) !== paths.hostTargetPath) return undefined;
    const res = await inst.client.nodeGetVolumeStats(
      {
        volumeId: volume.externalId || volume.id,
        volumePath: paths.pluginTargetPath,
        ...(caps.stageUnstageVolume ? { stagingTargetPath: paths.pluginStagingPath } : {}),
      },
      { signal: options.signal },
    );
    const out: VolumeUsage = {};
    for (const u of res.usage ?? []) {
      const part = {
        ...(count(u.total) !== undefined ? { total: count(u.total) } : {}),
        ...(count(u.used) !== undefined ? { used: count(u.used) } : {}),
        ...(count(u.available) !== undefined ? { available: count(u.available) } : {}),
      };
      if (String(u.unit) === 'BYTES') out.bytes = part;
      else if (String(u.unit) === 'INODES') out.inodes = part;
    }
    if (caps.volumeCondition && res.volumeCondition)
      out.condition = { abnormal: res.volumeCondition.abnormal === true, message: res.volumeCondition.message ?? '' };
    return out;
  }

  async expandVolume(
    volume: CSIVolumeRef,
    allocId: string,
    usage: UsageOptions,
    capacityBytes: number,
    options: VolumeOperationOptions = {},
  ): Promise<number | undefined> {
    if (!Number.isSafeInteger(capacityBytes) || capacityBytes <= 0)
      throw new ValidationError(`a capacity to expand to must be a whole number of bytes above 0, got ${capacityBytes}`, 'capacityBytes');
    return this.step('expand', volume, allocId, usage, options, async (inst, paths, signal) => {
      const caps = await inst.nodeCapabilities(signal);
      if (!caps.expandVolume) return undefined;
      const res = await inst.client.nodeExpandVolume(
        {
          volumeId: volume.externalId || volume.id,
          volumePath: paths.pluginTargetPath,
          capacityRange: { requiredBytes: capacityBytes, limitBytes: 0 },
          ...(caps.stageUnstageVolume ? { stagingTargetPath: paths.pluginStagingPath } : {}),
          volumeCapability: volumeCapabilityFor(usage, volume.mountOptions),
          secrets: volume.secrets ?? {},
        },
        { signal },
      );
      const capacity = count(res.capacityBytes) || capacityBytes;
      this.log.info('volume expanded on the node', { volumeId: volume.id, allocId, capacityBytes: capacity });
      return capacity;
    });
  }

  hasMount(targetPath: string): Promise<boolean> {
    return this.deps.mountTable.isMountPoint(targetPath);
  }

  mountInfoFor(volumeId: string, allocId: string, usage: UsageOptions): MountInfo {
    const inst = this.deps.instance();
    const paths = volumePaths(pluginMountRoots(inst.registration, this.deps.dataDir), volumeId, allocId, usage);
    return this.toMountInfo(paths, inst.info().node?.requiresStaging ?? false);
  }

  // ---- internals ------------------------------------------------------------

  /** Checks the arguments, then runs `fn` under the volume's queue with the plugin's live instance and the paths. */
  private async step<T>(
    step: Step,
    volume: Pick<CSIVolumeRef, 'id' | 'pluginId'>,
    allocId: string,
    usage: UsageOptions,
    options: VolumeOperationOptions,
    fn: (inst: PluginInstance, paths: VolumePaths, signal?: AbortSignal) => Promise<T>,
  ): Promise<T> {
    this.check(volume, allocId, usage, step === 'stage' || step === 'unstage');
    const started = this.deps.clock.now();
    let result = 'error';
    try {
      const done = await this.deps.mutex.run(
        `${this.pluginId}\0${volume.id}`,
        async () => {
          const inst = this.deps.instance();
          // Stage and unstage have no alloc; the paths helper wants one, and ignores it for the staging path.
          const paths = volumePaths(pluginMountRoots(inst.registration, this.deps.dataDir), volume.id, allocId || '_', usage);
          try {
            return await fn(inst, paths, options.signal);
          } catch (err) {
            // The plugin did not answer (crashed, restarting): have the instance look now, so that
            // its health — and whoever waits for it to be healthy again — does not wait for the next round.
            if (isPluginUnavailable(err) && !inst.isStopped) void inst.fingerprint();
            throw err;
          }
        },
        options.signal,
      );
      result = 'ok';
      return done;
    } finally {
      recordSafely(() =>
        this.deps.metrics?.observe(VOLUME_STEP_SECONDS, secondsSince(started, this.deps.clock.now()), {
          plugin: this.pluginId,
          step,
          result,
        }),
      );
    }
  }

  private async evented<T>(message: NodeEventMessage, volume: Pick<CSIVolumeRef, 'id'>, allocId: string, fn: () => Promise<T>): Promise<T> {
    const volumeId = String(volume?.id);
    try {
      const result = await fn();
      this.event(message, volumeId, allocId);
      return result;
    } catch (err) {
      this.event(message, volumeId, allocId, err);
      throw err;
    }
  }

  /**
   * Stage and unstage are half of a mount or an unmount: a success shows in
   * the publish or unpublish event; a failure is the mount's or unmount's,
   * and shows as its failed event (with no alloc: the staging is shared).
   */
  private async failureEvented<T>(message: NodeEventMessage, volume: Pick<CSIVolumeRef, 'id'>, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      this.event(message, String(volume?.id), '', err);
      throw err;
    }
  }

  private common(volume: CSIVolumeRef, usage: UsageOptions, publishContext: Record<string, string>) {
    return {
      volumeId: volume.externalId || volume.id,
      publishContext,
      volumeCapability: volumeCapabilityFor(usage, volume.mountOptions),
      secrets: volume.secrets ?? {},
      volumeContext: volume.context ?? {},
    };
  }

  private check(volume: Pick<CSIVolumeRef, 'id' | 'pluginId'>, allocId: string, usage: UsageOptions, noAlloc: boolean): void {
    if (typeof volume !== 'object' || volume === null) throw new ValidationError('a volume is required', 'volume');
    assertPathSafeId(volume.id, 'volume id');
    if (!noAlloc) assertPathSafeId(allocId, 'alloc id');
    if (volume.pluginId !== this.pluginId) {
      throw new ValidationError(
        `volume "${volume.id}" belongs to plugin "${volume.pluginId}", not "${this.pluginId}"; use that plugin's volume manager`,
        'pluginId',
      );
    }
    assertUsage(usage);
  }

  private toMountInfo(paths: VolumePaths, staged: boolean): MountInfo {
    return { source: paths.hostTargetPath, targetPath: paths.hostTargetPath, ...(staged ? { stagingPath: paths.hostStagingPath } : {}) };
  }

  private fail(op: 'mount' | 'unmount', volumeId: string, allocId: string, step: string, err: unknown): Error {
    if (isAbort(err) || err instanceof ValidationError) return err as Error;
    const forAlloc = allocId ? ` for alloc ${allocId}` : '';
    return new VolumeOperationError(
      op,
      volumeId,
      allocId,
      this.pluginId,
      `${op} of volume "${volumeId}"${forAlloc} on plugin "${this.pluginId}" failed at ${step}: ${errorMessage(err)}`,
      {
        cause: err,
      },
    );
  }

  /**
   * A step's check of a path, retried while the mount table cannot be read
   * for a transient fault of the agent (EMFILE…): failing a mount then would
   * fail an alloc's restore and unmount under its running tasks.
   */
  private isMountPoint(target: string, volumeId: string, allocId: string, signal?: AbortSignal): Promise<boolean> {
    return isMountPointRetrying(this.deps.mountTable, target, {
      clock: this.deps.clock,
      signal,
      onFault: (err, attempt, delayMs) =>
        this.log.warn('cannot read the mount table for a fault of the agent itself; checking again', {
          volumeId,
          allocId,
          target,
          attempt,
          delayMs,
          error: errorMessage(err),
        }),
    });
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
