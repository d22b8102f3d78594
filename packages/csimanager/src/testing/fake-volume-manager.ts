// A node plugin's VolumeManager for tests of what drives the four CSI node
// steps (the volume reconciler, the csi hook): it keeps the real manager's
// contract — stage and publish skip a path that is a mount point already,
// unpublish and unstage count a missing mount as done, every step of a plugin
// that is down throws PluginInstanceNotFoundError, a signal aborted before a
// step runs rejects with its reason — and changes a FakeMountTable instead of
// the host's. A test reads what was asked (`calls`) and what changed on the
// node (`changes`), and can make the plugin stop staging, make a step fail
// (before or after it did its work, for a call that mounted and then
// errored), or make a step hang until its signal aborts or the test lets it go.
// With `volumeStats` on it answers NodeGetVolumeStats as a plugin with
// VOLUME_CONDITION would: healthy, unless the test set a path's condition.
import { ValidationError, abortReason, settleOnce } from '@csiplug/core';
import { normalizeMountPath } from '@csiplug/csi/testing';
import { PluginInstanceNotFoundError, VolumeOperationError } from '../errors';
import type { MountTable } from '../mount-table';
import { type UsageOptions, usageToFS } from '../usage';
import type {
  CSIVolumeRef,
  MountInfo,
  VolumeCondition,
  VolumeConditionOptions,
  VolumeManager,
  VolumeOperationOptions,
  VolumeUsage,
} from '../volume-manager';
import { volumePaths, type VolumePaths } from '../volume-paths';

/** The four CSI node steps, by the name a call is recorded under. */
export type FakeVolumeStep = 'stage' | 'publish' | 'unpublish' | 'unstage';

/** What the fake needs of the test's mount table (a FakeMountTable): read it, and change it as a mount or unmount would. */
export interface FakeMountMarks extends MountTable {
  mark(path: string): void;
  unmark(path: string): void;
}

/** One call of a step, as it was asked. */
export interface FakeVolumeRequest {
  step: FakeVolumeStep;
  volume: Pick<CSIVolumeRef, 'id' | 'externalId' | 'pluginId'> & Partial<CSIVolumeRef>;
  /** Empty for stage and unstage. */
  allocId: string;
  usage: UsageOptions;
  publishContext?: Record<string, string>;
}

export interface FakeStepFailureOptions {
  /** How many calls in a row fail (default 1). */
  times?: number;
  /** Fail after doing the step's work (a call that mounted, or unmounted, and then errored). */
  after?: boolean;
  /** The error to throw (default a VolumeOperationError naming the step). */
  error?: Error;
}

/** A step call made to hang: the test waits for it, then lets it go (or aborts its signal). */
export interface FakeStepHang {
  /** Resolves once a call of the step hangs. */
  readonly reached: Promise<void>;
  /** Lets the hanging call go on and finish as it would have. */
  release(): void;
}

type Injection =
  { kind: 'fail'; after: boolean; error?: Error } | { kind: 'hang'; after: boolean; reached: () => void; released: Promise<void> };

const RPC: Record<FakeVolumeStep, string> = {
  stage: 'NodeStageVolume',
  publish: 'NodePublishVolume',
  unpublish: 'NodeUnpublishVolume',
  unstage: 'NodeUnstageVolume',
};

export class FakeVolumeManager implements VolumeManager {
  /** Every step asked, in order: `stage <vol>`, `publish <vol> <alloc>`, `unpublish <vol> <alloc>`, `unstage <vol>` (failed and skipped ones too). */
  readonly calls: string[] = [];
  /** What the steps changed on the node, in order: `stage <vol> <usage>`, `publish <vol> <alloc> <usage>`, `unpublish …`, `unstage …`. A step that found its work done adds nothing. */
  readonly changes: string[] = [];
  /** Every call with its arguments, in order. */
  readonly requests: FakeVolumeRequest[] = [];
  /** Whether the plugin has STAGE_UNSTAGE_VOLUME. */
  staging = true;
  /** While true the plugin has no live instance: every step throws PluginInstanceNotFoundError. */
  down = false;
  /** Whether the plugin has GET_VOLUME_STATS (and VOLUME_CONDITION); without it volumeCondition answers undefined. */
  volumeStats = false;
  /** What NodeGetVolumeStats says of a host path (target or staging): a condition, or an error to throw. Unset paths are healthy. */
  readonly conditions = new Map<string, VolumeCondition | Error>();
  /** Every volumeCondition asked while the plugin has GET_VOLUME_STATS, in order: `<vol> <alloc> target` or `<vol> staging`. */
  readonly conditionChecks: string[] = [];
  private readonly injections: Record<FakeVolumeStep, Injection[]> = { stage: [], publish: [], unpublish: [], unstage: [] };
  private readonly hostRoot: string;

  constructor(
    readonly pluginId: string,
    private readonly mounts: FakeMountMarks,
    options: { hostRoot?: string } = {},
  ) {
    this.hostRoot = options.hostRoot ?? `/var/lib/csiplug/csi/node/${pluginId}`;
  }

  get externalNodeId(): string | undefined {
    return this.down ? undefined : `node-of-${this.pluginId}`;
  }

  /** The next call(s) of `step` fail. */
  failNext(step: FakeVolumeStep, options: FakeStepFailureOptions = {}): void {
    for (let i = 0; i < (options.times ?? 1); i++)
      this.injections[step].push({ kind: 'fail', after: options.after ?? false, error: options.error });
  }

  /** The next call of `step` hangs (before its work, or after it with `after`) until its signal aborts or the test releases it. */
  hangNext(step: FakeVolumeStep, options: { after?: boolean } = {}): FakeStepHang {
    let reached!: () => void;
    let release!: () => void;
    const reachedP = new Promise<void>((r) => (reached = r));
    const released = new Promise<void>((r) => (release = r));
    this.injections[step].push({ kind: 'hang', after: options.after ?? false, reached, released });
    return { reached: reachedP, release };
  }

  /** Failures and hangs not used yet, per step. */
  pendingInjections(): Record<FakeVolumeStep, number> {
    return {
      stage: this.injections.stage.length,
      publish: this.injections.publish.length,
      unpublish: this.injections.unpublish.length,
      unstage: this.injections.unstage.length,
    };
  }

  async requiresStaging(options: VolumeOperationOptions = {}): Promise<boolean> {
    this.assertUp();
    if (options.signal?.aborted) throw abortReason(options.signal);
    return this.staging;
  }

  async stageVolume(
    volume: CSIVolumeRef,
    usage: UsageOptions,
    publishContext: Record<string, string> = {},
    options: VolumeOperationOptions = {},
  ): Promise<void> {
    await this.step('stage', { step: 'stage', volume, allocId: '', usage, publishContext }, options, async (paths) => {
      if (await this.mounts.isMountPoint(paths.hostStagingPath)) return;
      this.mounts.mark(paths.hostStagingPath);
      this.changes.push(`stage ${volume.id} ${usageToFS(usage)}`);
    });
  }

  async publishVolume(
    volume: CSIVolumeRef,
    allocId: string,
    usage: UsageOptions,
    publishContext: Record<string, string> = {},
    options: VolumeOperationOptions = {},
  ): Promise<MountInfo> {
    let info: MountInfo | undefined;
    await this.step('publish', { step: 'publish', volume, allocId, usage, publishContext }, options, async (paths) => {
      info = this.toMountInfo(paths);
      if (await this.mounts.isMountPoint(paths.hostTargetPath)) return;
      this.mounts.mark(paths.hostTargetPath);
      this.changes.push(`publish ${volume.id} ${allocId} ${usageToFS(usage)}`);
    });
    return info!;
  }

  async unpublishVolume(
    volume: Pick<CSIVolumeRef, 'id' | 'externalId' | 'pluginId'>,
    allocId: string,
    usage: UsageOptions,
    options: VolumeOperationOptions = {},
  ): Promise<void> {
    await this.step('unpublish', { step: 'unpublish', volume, allocId, usage }, options, async (paths) => {
      // A target that is not mounted counts as unpublished (the plugin's NOT_FOUND).
      if (!(await this.mounts.isMountPoint(paths.hostTargetPath))) return;
      this.mounts.unmark(paths.hostTargetPath);
      this.changes.push(`unpublish ${volume.id} ${allocId} ${usageToFS(usage)}`);
    });
  }

  async unstageVolume(
    volume: Pick<CSIVolumeRef, 'id' | 'externalId' | 'pluginId'>,
    usage: UsageOptions,
    options: VolumeOperationOptions = {},
  ): Promise<void> {
    await this.step('unstage', { step: 'unstage', volume, allocId: '', usage }, options, async (paths) => {
      // Like the real manager: a plugin that does not stage has nothing to unstage.
      if (!this.staging || !(await this.mounts.isMountPoint(paths.hostStagingPath))) return;
      this.mounts.unmark(paths.hostStagingPath);
      this.changes.push(`unstage ${volume.id} ${usageToFS(usage)}`);
    });
  }

  async volumeCondition(
    volume: Pick<CSIVolumeRef, 'id' | 'externalId' | 'pluginId'>,
    allocId: string,
    usage: UsageOptions,
    at: 'target' | 'staging',
    options: VolumeConditionOptions = {},
  ): Promise<VolumeCondition | undefined> {
    this.assertUp();
    if (options.signal?.aborted) throw abortReason(options.signal);
    if (!this.volumeStats) return undefined;
    const paths = this.paths(volume.id, allocId || '_', usage);
    // As the real one: a path this plugin does not put the volume at is not asked about.
    if (
      options.hostPath !== undefined &&
      normalizeMountPath(options.hostPath) !== normalizeMountPath(at === 'target' ? paths.hostTargetPath : paths.hostStagingPath)
    )
      return undefined;
    this.conditionChecks.push(at === 'target' ? `${volume.id} ${allocId} target` : `${volume.id} staging`);
    const answer = this.conditions.get(at === 'target' ? paths.hostTargetPath : paths.hostStagingPath);
    if (answer instanceof Error) throw answer;
    return answer ?? { abnormal: false, message: 'healthy', reported: true };
  }

  /** What volumeUsage answers for every volume (when volumeStats is on). */
  usage: VolumeUsage = { bytes: { total: 1000, used: 10, available: 990 } };
  /** Whether the node side offers EXPAND_VOLUME; every expandVolume call while it does, in order: `<vol> <alloc> <bytes>`. */
  nodeExpand = false;
  readonly expansions: string[] = [];

  async volumeUsage(
    volume: Pick<CSIVolumeRef, 'id' | 'externalId' | 'pluginId'>,
    allocId: string,
    usage: UsageOptions,
    options: VolumeConditionOptions = {},
  ): Promise<VolumeUsage | undefined> {
    this.assertUp();
    if (options.signal?.aborted) throw abortReason(options.signal);
    if (!this.volumeStats) return undefined;
    const paths = this.paths(volume.id, allocId, usage);
    if (options.hostPath !== undefined && normalizeMountPath(options.hostPath) !== normalizeMountPath(paths.hostTargetPath))
      return undefined;
    return structuredClone(this.usage);
  }

  async expandVolume(
    volume: CSIVolumeRef,
    allocId: string,
    _usage: UsageOptions,
    capacityBytes: number,
    options: VolumeOperationOptions = {},
  ): Promise<number | undefined> {
    this.assertUp();
    if (options.signal?.aborted) throw abortReason(options.signal);
    if (!this.nodeExpand) return undefined;
    this.expansions.push(`${volume.id} ${allocId} ${capacityBytes}`);
    return capacityBytes;
  }

  hasMount(targetPath: string): Promise<boolean> {
    return this.mounts.isMountPoint(targetPath);
  }

  mountInfoFor(volumeId: string, allocId: string, usage: UsageOptions): MountInfo {
    this.assertUp();
    return this.toMountInfo(this.paths(volumeId, allocId, usage));
  }

  // ---- internals ------------------------------------------------------------

  private async step(
    step: FakeVolumeStep,
    request: FakeVolumeRequest,
    options: VolumeOperationOptions,
    work: (paths: VolumePaths) => Promise<void>,
  ): Promise<void> {
    const { volume, allocId, usage } = request;
    this.calls.push(allocId ? `${step} ${volume.id} ${allocId}` : `${step} ${volume.id}`);
    this.requests.push(structuredClone(request));
    if (volume.pluginId !== this.pluginId) {
      throw new ValidationError(
        `volume "${volume.id}" belongs to plugin "${volume.pluginId}", not "${this.pluginId}"; use that plugin's volume manager`,
        'pluginId',
      );
    }
    const paths = this.paths(volume.id, allocId || '_', usage);
    this.assertUp();
    if (options.signal?.aborted) throw abortReason(options.signal);
    const injection = this.injections[step].shift();
    if (injection && !injection.after) await this.inject(injection, step, request, options.signal);
    await work(paths);
    if (injection?.after) await this.inject(injection, step, request, options.signal);
  }

  private async inject(
    injection: Injection,
    step: FakeVolumeStep,
    request: FakeVolumeRequest,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    if (injection.kind === 'fail') {
      const op = step === 'stage' || step === 'publish' ? 'mount' : 'unmount';
      const forAlloc = request.allocId ? ` for alloc ${request.allocId}` : '';
      throw (
        injection.error ??
        new VolumeOperationError(
          op,
          request.volume.id,
          request.allocId,
          this.pluginId,
          `${op} of volume "${request.volume.id}"${forAlloc} on plugin "${this.pluginId}" failed at ${RPC[step]}: injected failure`,
        )
      );
    }
    injection.reached();
    // Until the test releases it, or the signal aborts (with its reason).
    await settleOnce<void>((wait) => void injection.released.then(() => wait.resolve()), { signal });
    // A plugin that went down while the call hung fails it.
    this.assertUp();
  }

  private assertUp(): void {
    if (this.down) throw new PluginInstanceNotFoundError('csi-node', this.pluginId);
  }

  private paths(volumeId: string, allocId: string, usage: UsageOptions): VolumePaths {
    return volumePaths({ deployment: 'node', hostRoot: this.hostRoot, pluginRoot: '/csi' }, volumeId, allocId, usage);
  }

  private toMountInfo(paths: VolumePaths): MountInfo {
    return {
      source: paths.hostTargetPath,
      targetPath: paths.hostTargetPath,
      ...(this.staging ? { stagingPath: paths.hostStagingPath } : {}),
    };
  }
}
