// csi: the alloc hook of allocs with `volume` blocks of type "csi". It states
// what the alloc wants and waits for the volume reconciler
// (@csiplug/volumes), which owns every mount, claim and retry:
//
// prerun   for each volume, asks the reconciler to mount it — which waits for
//          the node plugin (the `prerun` limit on a fresh start, the longer
//          `restore` limit after an agent restart), claims, stages and
//          publishes; or, after a restart, finds the mount still live and
//          keeps it at once, even with its plugin away ("Volume kept, plugin
//          away"). A claim refused for now or a plugin that did not answer is
//          tried again within the limit ("Volume mount retrying", once per
//          new cause, again at retries 8, 16, 32…). A failure undoes what was done and fails the prerun
//          with a VolumeHookError naming volume, plugin and cause.
// running  from prerun to postrun it listens to the reconciler's checks of
//          the alloc's live mounts after their plugin came back, and turns
//          each into a task event ("Plugin back", "Volume checked", "Volume
//          stale", "Volume remounted"); under `on_stale_mount = "restart"` a
//          remount restarts the alloc's tasks. The agent detaching ends it.
// postrun  asks the reconciler to unmount every volume of the alloc (one
//          whose plugin is not healthy waits for it, the `postrun` limit,
//          unless nothing of the plugin runs on the node any more) and
//          waits for the first attempt at each; one that failed is retried by
//          the reconciler in the background (across agent restarts) and
//          shows as a "Volume unmount pending" event.
import { Disposable, ILogger, Logger, PluginWaitPhase, ShutdownError, errorMessage, formatDuration } from '@csiplug/core';
import type { UsageOptions } from '@csiplug/csimanager';
import {
  IVolumeReconciler,
  VolumeMountError,
  type LiveMountEventKind,
  type MountRetry,
  type PluginWaitNotice,
  type UnmountOutcome,
  type VolumeReconcilerService,
} from '@csiplug/volumes';
import { inject, injectable } from 'tsyringe';
import type { AllocHook, AllocHookContext, AllocPrerunResult, MountedVolume, VolumeRequest } from './hook';
import type { ICSIHookFactory } from './tokens';

export const EVENT_VOLUME_MOUNTED = 'Volume mounted';
export const EVENT_VOLUME_MOUNT_FAILED = 'Volume mount failed';
export const EVENT_VOLUME_UNMOUNT_PENDING = 'Volume unmount pending';
export const EVENT_VOLUME_KEPT_PLUGIN_AWAY = 'Volume kept, plugin away';
export const EVENT_VOLUME_MOUNT_RETRYING = 'Volume mount retrying';
export const EVENT_WAITING_FOR_PLUGIN = 'Waiting for plugin';
export const EVENT_PLUGIN_BACK_FOR_MOUNT = 'Plugin ready';
export const EVENT_VOLUME_UNMOUNTED = 'Volume unmounted';

/** The task event of each finding of the reconciler about a live mount. */
export const LIVE_MOUNT_EVENTS: Readonly<Record<LiveMountEventKind, string>> = Object.freeze({
  'plugin-away': 'Plugin away',
  'plugin-back': 'Plugin back',
  checked: 'Volume checked',
  abnormal: 'Volume reported abnormal',
  stale: 'Volume stale',
  remounted: 'Volume remounted',
  'remount-failed': 'Volume remount failed',
  'remount-busy': 'Volume remount refused, in use',
});

/** A volume of an alloc that could not be mounted (the reconciler's VolumeMountError). */
export const VolumeHookError = VolumeMountError;
export type VolumeHookError = VolumeMountError;

export function usageOf(request: VolumeRequest): UsageOptions {
  const usage: UsageOptions = { readOnly: request.readOnly, attachmentMode: request.attachmentMode, accessMode: request.accessMode };
  if (request.mountOptions) usage.mountOptions = request.mountOptions;
  return usage;
}

/** Why a mount is held back, for its event. */
function retryWhy(r: MountRetry): string {
  const what =
    r.reason === 'claim' ? 'could not be claimed yet' : `could not be mounted: its node plugin ${r.pluginId} went away or did not answer`;
  const when =
    r.reason === 'claim'
      ? `trying again in ${formatDuration(r.delayMs)}`
      : `trying again once the plugin is healthy (within ${formatDuration(r.delayMs)})`;
  return `volume "${r.name}" (${r.volumeId}) ${what}, ${when} (retry ${r.attempt}): ${r.error}`;
}

/**
 * Turns a mount's retries into "Volume mount retrying" task events: one per
 * cause not told yet (numbers in the cause — elapsed times, attempt counts —
 * do not make it new), and again at retries 8, 16, 32… so a cause that lasts
 * hours is neither one event nor one per backoff step (task events are few
 * and kept; a flood would push out the first, most useful ones).
 */
function retryEvents(ctx: AllocHookContext): (r: MountRetry) => void {
  const told = new Set<string>();
  return (r) => {
    const cause = `${r.reason}:${r.error.replace(/\d+/g, '#')}`;
    const again = r.attempt >= 8 && (r.attempt & (r.attempt - 1)) === 0;
    if (told.has(cause) && !again) return;
    told.add(cause);
    ctx.emitEvent({ type: EVENT_VOLUME_MOUNT_RETRYING, message: retryWhy(r) });
  };
}

/** Why an unmount is pending, for its event. */
function pendingWhy(o: UnmountOutcome): string {
  const away = o.pluginWait?.gone
    ? ` (plugin ${o.pluginId} is not running on this node; the volume stays mounted and claimed until the plugin is back)`
    : o.pluginWait && !o.pluginWait.healthy
      ? ` (plugin ${o.pluginId} was not healthy after waiting ${formatDuration(o.pluginWait.waitedMs)}, the postrun limit)`
      : '';
  return `volume "${o.name}" (${o.volumeId}) on plugin ${o.pluginId} could not be unmounted${away}, retrying in the background: ${errorMessage(o.error)}`;
}

export class CSIHook implements AllocHook {
  readonly name = 'csi';
  private listening: Disposable | undefined;
  /** Removes the abort listener that ends the subscription (once postrun ended it first). */
  private unlistenAbort: (() => void) | undefined;

  constructor(
    private readonly volumes: VolumeReconcilerService,
    private readonly logger: Logger,
  ) {}

  async prerun(ctx: AllocHookContext): Promise<AllocPrerunResult> {
    const requests = ctx.alloc.volumes.filter((v) => v.type === 'csi');
    if (requests.length === 0) return {};
    this.listen(ctx);
    const phase: PluginWaitPhase = ctx.kind === 'restore' ? 'restore' : 'prerun';
    const volumes: Record<string, MountedVolume> = {};
    for (const request of requests) {
      try {
        const mountRequest = {
          allocId: ctx.alloc.id,
          name: request.name,
          volumeId: request.source,
          usage: usageOf(request),
          ...(request.onStaleMount ? { onStaleMount: request.onStaleMount } : {}),
        };
        const onRetry = retryEvents(ctx);
        // Why an alloc sits pending: the plugin it waits for, and the limit; then that it came.
        const onPluginWait = (w: PluginWaitNotice) =>
          ctx.emitEvent(
            w.state === 'waiting'
              ? {
                  type: EVENT_WAITING_FOR_PLUGIN,
                  message: `waiting for plugin ${w.pluginId} (csi-node) to mount volume "${w.name}" (${w.volumeId}), limit ${formatDuration(w.limitMs)}`,
                }
              : {
                  type: EVENT_PLUGIN_BACK_FOR_MOUNT,
                  message: `plugin ${w.pluginId} is ready; mounting volume "${w.name}" (${w.volumeId})`,
                },
          );
        const info = await this.volumes.mount(mountRequest, { phase, signal: ctx.signal, onRetry, onPluginWait });
        volumes[request.name] = {
          name: request.name,
          volumeId: info.volumeId,
          pluginId: info.pluginId,
          hostPath: info.targetPath,
          readOnly: request.readOnly,
        };
        if (!info.restored)
          ctx.emitEvent({
            type: EVENT_VOLUME_MOUNTED,
            message: `volume "${request.name}" (${info.volumeId}) mounted at ${info.targetPath}`,
          });
        else if (info.pluginAway) {
          ctx.emitEvent({
            type: EVENT_VOLUME_KEPT_PLUGIN_AWAY,
            message: `volume "${request.name}" (${info.volumeId}) is still mounted at ${info.targetPath} and is kept while its plugin ${info.pluginId} is away; it is checked when the plugin is back`,
          });
        }
      } catch (err) {
        const wrapped = err instanceof VolumeMountError ? err : new VolumeMountError(request.name, request.source, undefined, err);
        ctx.emitEvent({ type: EVENT_VOLUME_MOUNT_FAILED, message: wrapped.message, failed: true });
        throw wrapped;
      }
    }
    return { volumes };
  }

  async postrun(ctx: AllocHookContext): Promise<void> {
    this.stopListening();
    const outcomes = await this.volumes.unmount(ctx.alloc.id, undefined, {
      signal: ctx.signal,
      ...(ctx.nodePluginExpected ? { pluginExpected: ctx.nodePluginExpected } : {}),
    });
    for (const o of outcomes) {
      if (o.error === undefined) {
        ctx.emitEvent({
          type: EVENT_VOLUME_UNMOUNTED,
          message: `volume "${o.name}" (${o.volumeId}) unmounted and its claim released`,
          details: { volume_id: o.volumeId },
        });
        continue;
      }
      this.logger.warn('unmount failed; the volume reconciler retries it in the background', {
        alloc_id: ctx.alloc.id,
        volume_id: o.volumeId,
        plugin_id: o.pluginId,
        error: errorMessage(o.error),
      });
      // The volume's id in details: when a background retry finishes the unmount, the agent says so on this alloc (its "Volume unmounted").
      ctx.emitEvent({ type: EVENT_VOLUME_UNMOUNT_PENDING, message: pendingWhy(o), details: { volume_id: o.volumeId } });
    }
  }

  /** The reconciler's checks of this alloc's live mounts become task events, until postrun or the agent detaching. */
  private listen(ctx: AllocHookContext): void {
    if (this.listening) return;
    this.listening = this.volumes.onDidCheckMountOf(ctx.alloc.id)((e) => {
      ctx.emitEvent({ type: LIVE_MOUNT_EVENTS[e.kind], message: e.message, time: e.time });
      if (e.restartTasks)
        ctx.restartTasks(`volume "${e.name}" (${e.volumeId}) was stale and has been remounted (on_stale_mount = "restart")`);
      else if (e.kind === 'remounted') ctx.volumeRemounted?.(e.name);
    });
    // The agent detaching (ShutdownError) ends it; a signal already aborted so is seen now, not never.
    const onAbort = () => {
      if (ctx.signal.reason instanceof ShutdownError) this.stopListening();
    };
    if (ctx.signal.aborted) onAbort();
    else {
      ctx.signal.addEventListener('abort', onAbort, { once: true });
      this.unlistenAbort = () => ctx.signal.removeEventListener('abort', onAbort);
    }
  }

  private stopListening(): void {
    this.listening?.dispose();
    this.listening = undefined;
    this.unlistenAbort?.();
    this.unlistenAbort = undefined;
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
