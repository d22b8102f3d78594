// csi: the alloc hook of allocs with `volume` blocks of type "csi". It states
// what the alloc wants and waits for the volume reconciler
// (@csiplug/volumes), which owns every mount, claim and retry:
//
// prerun   for each volume, asks the reconciler to mount it — which waits for
//          the node plugin (the `prerun` limit on a fresh start, the longer
//          `restore` limit after an agent restart), claims, stages and
//          publishes; or, after a restart, finds the mount still live and
//          does nothing more. A failure undoes what was done and fails the
//          prerun with a VolumeHookError naming volume, plugin and cause.
// postrun  asks the reconciler to unmount every volume of the alloc and
//          waits for the first attempt at each; one that failed is retried
//          by the reconciler in the background (across agent restarts) and
//          shows as a "Volume unmount pending" event.
import { ILogger, Logger, PluginWaitPhase, errorMessage } from '@csiplug/core';
import type { UsageOptions } from '@csiplug/csimanager';
import { IVolumeReconciler, VolumeMountError, type VolumeReconcilerService } from '@csiplug/volumes';
import { inject, injectable } from 'tsyringe';
import type { AllocHook, AllocHookContext, AllocPrerunResult, MountedVolume, VolumeRequest } from './hook';
import type { ICSIHookFactory } from './tokens';

export const EVENT_VOLUME_MOUNTED = 'Volume mounted';
export const EVENT_VOLUME_MOUNT_FAILED = 'Volume mount failed';
export const EVENT_VOLUME_UNMOUNT_PENDING = 'Volume unmount pending';

/** A volume of an alloc that could not be mounted (the reconciler's VolumeMountError). */
export const VolumeHookError = VolumeMountError;
export type VolumeHookError = VolumeMountError;

export function usageOf(request: VolumeRequest): UsageOptions {
  const usage: UsageOptions = { readOnly: request.readOnly, attachmentMode: request.attachmentMode, accessMode: request.accessMode };
  if (request.mountOptions) usage.mountOptions = request.mountOptions;
  return usage;
}

export class CSIHook implements AllocHook {
  readonly name = 'csi';

  constructor(
    private readonly volumes: VolumeReconcilerService,
    private readonly logger: Logger,
  ) {}

  async prerun(ctx: AllocHookContext): Promise<AllocPrerunResult> {
    const requests = ctx.alloc.volumes.filter((v) => v.type === 'csi');
    if (requests.length === 0) return {};
    const phase: PluginWaitPhase = ctx.kind === 'restore' ? 'restore' : 'prerun';
    const volumes: Record<string, MountedVolume> = {};
    for (const request of requests) {
      try {
        const info = await this.volumes.mount({ allocId: ctx.alloc.id, name: request.name, volumeId: request.source, usage: usageOf(request) }, { phase, signal: ctx.signal });
        volumes[request.name] = { name: request.name, volumeId: info.volumeId, pluginId: info.pluginId, hostPath: info.targetPath, readOnly: request.readOnly };
        if (!info.restored) ctx.emitEvent({ type: EVENT_VOLUME_MOUNTED, message: `volume "${request.name}" (${info.volumeId}) mounted at ${info.targetPath}` });
      } catch (err) {
        const wrapped = err instanceof VolumeMountError ? err : new VolumeMountError(request.name, request.source, undefined, err);
        ctx.emitEvent({ type: EVENT_VOLUME_MOUNT_FAILED, message: wrapped.message, failed: true });
        throw wrapped;
      }
    }
    return { volumes };
  }

  async postrun(ctx: AllocHookContext): Promise<void> {
    const outcomes = await this.volumes.unmount(ctx.alloc.id);
    for (const o of outcomes) {
      if (o.error === undefined) continue;
      this.logger.warn('unmount failed; the volume reconciler retries it in the background', { alloc_id: ctx.alloc.id, volume_id: o.volumeId, plugin_id: o.pluginId, error: errorMessage(o.error) });
      ctx.emitEvent({
        type: EVENT_VOLUME_UNMOUNT_PENDING,
        message: `volume "${o.name}" (${o.volumeId}) on plugin ${o.pluginId} could not be unmounted, retrying in the background: ${errorMessage(o.error)}`,
      });
    }
  }
}

/** Makes one csi hook per alloc, with the agent's volume reconciler. */
@injectable()
export class CSIHookFactory implements ICSIHookFactory {
  constructor(
    @inject(IVolumeReconciler) private readonly volumes: VolumeReconcilerService,
    @inject(ILogger) private readonly logger: Logger,
  ) {}

  create(): CSIHook {
    return new CSIHook(this.volumes, this.logger.child({ hook: 'csi' }));
  }
}
