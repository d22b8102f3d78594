// Fakes for csi hook unit tests: a CSI manager whose plugins appear when the
// test says, volume managers that record every call and can be made to fail,
// a mount table the test controls, and a claimer that counts claims.
import { Emitter, PluginWaitPhase, TimeoutError, abortReason } from '@csiplug/core';
import type {
  CSIManager,
  CSIVolumeRef,
  MountInfo,
  MountTable,
  NodeEvent,
  PluginHealthChange,
  PluginInfo,
  UsageOptions,
  VolumeManager,
} from '@csiplug/csimanager';
import { ClaimError, type ClaimableVolume, type VolumeClaimRequest, type VolumeClaimResult, type VolumeClaimer } from '../volume-claimer';

export class FakeMountTable implements MountTable {
  readonly mounted = new Set<string>();
  async isMountPoint(target: string): Promise<boolean> {
    return this.mounted.has(target);
  }
}

export class FakeVolumeManager implements VolumeManager {
  readonly calls: string[] = [];
  /** The volume refs unmountVolume got, as given (a plugin knows a volume by its externalId). */
  readonly unmountRefs: { id: string; externalId?: string }[] = [];
  failUnmount: Error | undefined;
  failMount: Error | undefined;
  readonly externalNodeId = 'node-1';
  constructor(
    readonly pluginId: string,
    private readonly mounts: FakeMountTable,
  ) {}

  mountInfoFor(volumeId: string, allocId: string, _usage: UsageOptions): MountInfo {
    const target = `/data/csi/node/${this.pluginId}/per-alloc/${allocId}/${volumeId}/rw-file-system-single-node-writer`;
    return { source: target, targetPath: target, stagingPath: `/data/csi/node/${this.pluginId}/staging/${volumeId}/rw-file-system-single-node-writer` };
  }

  async mountVolume(volume: CSIVolumeRef, alloc: { id: string }, usage: UsageOptions): Promise<MountInfo> {
    this.calls.push(`mount ${volume.id} ${alloc.id}`);
    if (this.failMount) throw this.failMount;
    const info = this.mountInfoFor(volume.id, alloc.id, usage);
    this.mounts.mounted.add(info.targetPath);
    return info;
  }

  async unmountVolume(volume: Pick<CSIVolumeRef, 'id' | 'externalId'>, allocId: string, usage: UsageOptions): Promise<void> {
    this.calls.push(`unmount ${volume.id} ${allocId}`);
    this.unmountRefs.push({ id: volume.id, ...(volume.externalId !== undefined ? { externalId: volume.externalId } : {}) });
    if (this.failUnmount) throw this.failUnmount;
    this.mounts.mounted.delete(this.mountInfoFor(volume.id, allocId, usage).targetPath);
  }

  async hasMount(targetPath: string): Promise<boolean> {
    return this.mounts.isMountPoint(targetPath);
  }

  usersOf(): string[] {
    return [];
  }
}

/** Plugins are "up" once the test calls `bringUp(name)`; waits honour a per-phase limit. */
export class FakeCSIManager implements CSIManager {
  readonly up = new Set<string>();
  readonly managers = new Map<string, FakeVolumeManager>();
  readonly waits: { name: string; phase: PluginWaitPhase }[] = [];
  private readonly waiters: { name: string; resolve: () => void }[] = [];
  private readonly health = new Emitter<PluginHealthChange>();
  private readonly nodeEvents = new Emitter<NodeEvent>();
  readonly onDidChangeHealth = this.health.event;
  readonly onNodeEvent = this.nodeEvents.event;

  constructor(
    readonly mounts: FakeMountTable,
    private readonly limits: Record<PluginWaitPhase, number>,
    private readonly clock: { setTimeout(fn: () => void, ms: number): { dispose(): void } },
  ) {}

  bringUp(name: string): void {
    this.up.add(name);
    if (!this.managers.has(name)) this.managers.set(name, new FakeVolumeManager(name, this.mounts));
    for (const w of this.waiters.filter((w) => w.name === name)) w.resolve();
    this.health.fire({ type: 'csi-node', name, healthy: true } as PluginHealthChange);
  }

  bringDown(name: string): void {
    this.up.delete(name);
  }

  async start(): Promise<void> {}

  waitForPlugin(_type: string, name: string, phase: PluginWaitPhase, options?: { signal?: AbortSignal }): Promise<PluginInfo> {
    this.waits.push({ name, phase });
    const info = { name, type: 'csi-node', healthy: true } as PluginInfo;
    if (options?.signal?.aborted) return Promise.reject(abortReason(options.signal));
    if (this.up.has(name)) return Promise.resolve(info);
    return new Promise<PluginInfo>((resolve, reject) => {
      const limit = this.limits[phase];
      const timer = this.clock.setTimeout(
        () => reject(new TimeoutError(`plugin ${name} for type csi-node did not become healthy within ${limit} ms (${phase}): check the plugin task's logs`, limit)),
        limit,
      );
      options?.signal?.addEventListener('abort', () => {
        timer.dispose();
        reject(abortReason(options.signal!));
      });
      this.waiters.push({ name, resolve: () => (timer.dispose(), resolve(info)) });
    });
  }

  pluginInfo(): PluginInfo | undefined {
    return undefined;
  }
  plugins(): PluginInfo[] {
    return [];
  }

  volumeManager(name: string): VolumeManager {
    if (!this.up.has(name)) throw new Error(`plugin ${name} for type csi-node not found`);
    return this.managers.get(name)!;
  }

  async shutdown(): Promise<void> {}
  dispose(): void {}
}

export class FakeClaimer implements VolumeClaimer {
  readonly volumes = new Map<string, ClaimableVolume>();
  readonly claims: VolumeClaimRequest[] = [];
  readonly releases: string[] = [];
  /** Claims refused (retryably) before one is granted. */
  refuseNext = 0;

  add(id: string, pluginId = 'hostpath'): void {
    this.volumes.set(id, { id, externalId: `ext-${id}`, pluginId });
  }

  async lookup(volumeId: string): Promise<ClaimableVolume> {
    const v = this.volumes.get(volumeId);
    if (!v) throw new ClaimError(`volume ${volumeId} is not registered; it cannot be scheduled (register it with "csiplug volume register")`, false);
    return v;
  }

  async claim(request: VolumeClaimRequest): Promise<VolumeClaimResult> {
    this.claims.push(request);
    if (this.refuseNext > 0) {
      this.refuseNext--;
      throw new ClaimError(`volume ${request.volumeId} has no free write claim`, true);
    }
    return { volume: await this.lookup(request.volumeId), publishContext: { attached: 'yes' } };
  }

  async release(volumeId: string, allocId: string): Promise<void> {
    this.releases.push(`${volumeId} ${allocId}`);
  }
}
