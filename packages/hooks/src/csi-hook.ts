// csi: the alloc hook of allocs with `volume` blocks of type "csi".
//
// prerun   for each volume: wait for its node plugin through the CSI manager
//          (the `prerun` limit on a fresh start, the longer `restore` limit
//          after an agent restart), claim it, mount it, save the mount stub.
//          On a restore a stub whose target is still mounted needs nothing
//          more; one whose mount is gone (host reboot) is claimed and mounted
//          again. A plugin that is not back yet is waited for, not failed on;
//          a mount table that cannot be read just now (EMFILE…) is read
//          again, never taken for "not mounted" nor failed on: a failed
//          restore would stop the running tasks and unmount their volumes.
// postrun  unmounts every volume in parallel, then releases the claims; an
//          unmount that fails goes to the pending-unmount queue, which
//          retries it in the background and survives agent restarts.
import { Clock, ILogger, IClock, ITimeoutPolicy, Logger, PluginWaitPhase, TimeoutPolicy, abortReason, errorMessage, formatDuration } from '@csiplug/core';
import { ICSIManager, IMountTable, isMountPointRetrying, type CSIManager, type MountTable } from '@csiplug/csimanager';
import { PluginTypeCSINode } from '@csiplug/registry';
import { IClientStateDB, type ClientStateDB, type VolumeMountStub, type VolumeUsageOptions } from '@csiplug/state';
import { inject, injectable } from 'tsyringe';
import type { AllocHook, AllocHookContext, AllocPrerunResult, MountedVolume, VolumeRequest } from './hook';
import { PendingUnmounts, unmountFromStub } from './pending-unmounts';
import { IPendingUnmounts, IVolumeClaimer } from './tokens';
import { ClaimError, type VolumeClaimResult, type VolumeClaimer } from './volume-claimer';
import { CsiplugError } from '@csiplug/core';

export const EVENT_VOLUME_MOUNTED = 'Volume mounted';
export const EVENT_VOLUME_MOUNT_FAILED = 'Volume mount failed';
export const EVENT_VOLUME_UNMOUNT_PENDING = 'Volume unmount pending';

export class VolumeHookError extends CsiplugError {
  constructor(
    readonly volumeName: string,
    readonly volumeId: string,
    readonly pluginId: string | undefined,
    cause: unknown,
  ) {
    const plugin = pluginId ? ` on plugin ${pluginId}` : '';
    super('EVOLUME', `volume "${volumeName}" (${volumeId})${plugin}: ${errorMessage(cause)}`, { cause });
  }
}

export function usageOf(request: VolumeRequest): VolumeUsageOptions {
  const usage: VolumeUsageOptions = { readOnly: request.readOnly, attachmentMode: request.attachmentMode, accessMode: request.accessMode };
  if (request.mountOptions) usage.mountOptions = request.mountOptions;
  return usage;
}

export class CSIHook implements AllocHook {
  readonly name = 'csi';

  constructor(
    private readonly csi: CSIManager,
    private readonly claimer: VolumeClaimer,
    private readonly state: ClientStateDB,
    private readonly mounts: MountTable,
    private readonly pending: PendingUnmounts,
    private readonly clock: Clock,
    private readonly timeouts: TimeoutPolicy,
    private readonly logger: Logger,
  ) {}

  async prerun(ctx: AllocHookContext): Promise<AllocPrerunResult> {
    const requests = ctx.alloc.volumes.filter((v) => v.type === 'csi');
    if (requests.length === 0) return {};
    const log = this.logger.child({ alloc_id: ctx.alloc.id });
    const phase: PluginWaitPhase = ctx.kind === 'restore' ? 'restore' : 'prerun';
    const stubs: Record<string, VolumeMountStub> = { ...(this.state.getVolumeStubs(ctx.alloc.id) ?? {}) };
    const volumes: Record<string, MountedVolume> = {};

    for (const request of requests) {
      const usage = usageOf(request);
      const stub = stubs[request.name];
      let pluginId = stub?.pluginId;
      let claimedNow = false;
      try {
        if (ctx.kind === 'restore' && stub) {
          await this.csi.waitForPlugin(PluginTypeCSINode, stub.pluginId, 'restore', { signal: ctx.signal });
          const stillMounted = await isMountPointRetrying(this.mounts, stub.targetPath, {
            clock: this.clock,
            signal: ctx.signal,
            onFault: (err, attempt, delayMs) =>
              log.warn('cannot read the mount table for a fault of the agent itself; checking again', { volume: request.name, volume_id: stub.volumeId, target: stub.targetPath, attempt, delay_ms: delayMs, error: errorMessage(err) }),
          });
          if (stillMounted) {
            log.info('volume still mounted after restore', { volume: request.name, volume_id: stub.volumeId, target: stub.targetPath });
            volumes[request.name] = this.mounted(request, stub);
            continue;
          }
          log.warn('volume mount gone after restore; mounting again', { volume: request.name, volume_id: stub.volumeId });
        }
        const volume = await this.claimer.lookup(request.source);
        pluginId = volume.pluginId;
        await this.csi.waitForPlugin(PluginTypeCSINode, volume.pluginId, phase, { signal: ctx.signal });
        const claimed = await this.claimWithRetry(ctx, request);
        claimedNow = true;
        const info = await this.csi
          .volumeManager(claimed.volume.pluginId)
          .mountVolume(claimed.volume, { id: ctx.alloc.id }, usage, claimed.publishContext ?? {}, { signal: ctx.signal });
        const saved: VolumeMountStub = {
          name: request.name,
          volumeId: claimed.volume.id,
          pluginId: claimed.volume.pluginId,
          targetPath: info.source,
          usage,
        };
        // The plugin's own id is what unpublish/unstage must send, later or after a restart.
        if (claimed.volume.externalId && claimed.volume.externalId !== claimed.volume.id) saved.externalId = claimed.volume.externalId;
        if (info.stagingPath) saved.stagingPath = info.stagingPath;
        if (claimed.publishContext) saved.publishContext = claimed.publishContext;
        stubs[request.name] = saved;
        // Saved after each volume so postrun can clean up a partial prerun.
        this.state.putVolumeStubs(ctx.alloc.id, stubs);
        volumes[request.name] = this.mounted(request, saved);
        ctx.emitEvent({ type: EVENT_VOLUME_MOUNTED, message: `volume "${request.name}" (${saved.volumeId}) mounted at ${saved.targetPath}` });
      } catch (err) {
        if (claimedNow && !this.state.getVolumeStubs(ctx.alloc.id)?.[request.name]) {
          // Claimed but not mounted: no stub, so postrun would never release it.
          await this.claimer
            .release(request.source, ctx.alloc.id)
            .catch((releaseErr) => log.error('releasing the claim of a volume that failed to mount failed', { volume_id: request.source, error: releaseErr }));
        }
        const wrapped = new VolumeHookError(request.name, request.source, pluginId, ctx.signal.aborted ? abortReason(ctx.signal) : err);
        ctx.emitEvent({ type: EVENT_VOLUME_MOUNT_FAILED, message: wrapped.message, failed: true });
        throw wrapped;
      }
    }
    return { volumes };
  }

  async postrun(ctx: AllocHookContext): Promise<void> {
    const stubs = { ...(this.state.getVolumeStubs(ctx.alloc.id) ?? {}) };
    const names = Object.keys(stubs);
    if (names.length === 0) return;
    await Promise.all(
      names.map(async (name) => {
        const stub = stubs[name]!;
        try {
          await unmountFromStub(this.csi, this.claimer, stub, ctx.alloc.id, ctx.signal);
          delete stubs[name];
        } catch (err) {
          // The pending queue owns it from here, and drops the stub when done.
          this.pending.enqueue(ctx.alloc.id, stub, err);
          ctx.emitEvent({
            type: EVENT_VOLUME_UNMOUNT_PENDING,
            message: `volume "${name}" (${stub.volumeId}) on plugin ${stub.pluginId} could not be unmounted, retrying in the background: ${errorMessage(err)}`,
          });
        }
      }),
    );
    this.state.putVolumeStubs(ctx.alloc.id, stubs);
  }

  private mounted(request: VolumeRequest, stub: VolumeMountStub): MountedVolume {
    return { name: request.name, volumeId: stub.volumeId, pluginId: stub.pluginId, hostPath: stub.targetPath, readOnly: request.readOnly };
  }

  /** Claims, retrying retryable refusals with the policy's backoff up to its limit. */
  private async claimWithRetry(ctx: AllocHookContext, request: VolumeRequest): Promise<VolumeClaimResult> {
    const started = this.clock.now();
    const limit = this.timeouts.claimRetryLimit();
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.claimer.claim(
          { volumeId: request.source, allocId: ctx.alloc.id, readOnly: request.readOnly, accessMode: request.accessMode, attachmentMode: request.attachmentMode },
          { signal: ctx.signal },
        );
      } catch (err) {
        if (!(err instanceof ClaimError) || !err.retryable) throw err;
        const delay = this.timeouts.claimBackoff(attempt);
        if (this.clock.now() - started + delay > limit) {
          throw new ClaimError(`claim not granted within ${formatDuration(limit)} (${attempt} attempts): ${err.message}`, false, { cause: err });
        }
        this.logger.info('volume claim refused for now; retrying', { alloc_id: ctx.alloc.id, volume_id: request.source, attempt, delay_ms: delay, error: err });
        await this.clock.sleep(delay, ctx.signal);
      }
    }
  }
}

/** Makes one csi hook per alloc, with the agent's shared services. */
@injectable()
export class CSIHookFactory {
  constructor(
    @inject(ICSIManager) private readonly csi: CSIManager,
    @inject(IVolumeClaimer) private readonly claimer: VolumeClaimer,
    @inject(IClientStateDB) private readonly state: ClientStateDB,
    @inject(IMountTable) private readonly mounts: MountTable,
    @inject(IPendingUnmounts) private readonly pending: PendingUnmounts,
    @inject(IClock) private readonly clock: Clock,
    @inject(ITimeoutPolicy) private readonly timeouts: TimeoutPolicy,
    @inject(ILogger) private readonly logger: Logger,
  ) {}

  create(): CSIHook {
    return new CSIHook(this.csi, this.claimer, this.state, this.mounts, this.pending, this.clock, this.timeouts, this.logger.child({ hook: 'csi' }));
  }
}
