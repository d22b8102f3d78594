// The volume reconciler's contract (token IVolumeReconciler): what the csi
// hook asks of it (mount, unmount) and hears from it (live mounts checked
// after their plugin came back), what the agent reads (records, pending
// unmounts), and its lifecycle.
import type { Disposable, Event, PluginWaitPhase } from '@csiplug/core';
import type { UsageOptions, VolumeUsage } from '@csiplug/csimanager';
import type { StaleMountPolicy, VolumeMountRecord } from './mount-record';

/** What an alloc asks of one of its volumes. */
export interface VolumeMountRequest {
  allocId: string;
  /** The group's name for the volume. */
  name: string;
  /** The catalog id. */
  volumeId: string;
  usage: UsageOptions;
  /** What to do when the live mount is found stale after its plugin came back (default `remount`). */
  onStaleMount?: StaleMountPolicy;
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
  /**
   * Its node plugin is not healthy now (not registered, not fingerprinted
   * yet, or failing): a restored mount kept without it, checked when the
   * plugin is back.
   */
  pluginAway: boolean;
}

export interface MountOptions {
  /** `prerun` for a fresh start, `restore` after an agent restart: the limit of the plugin wait. */
  phase: PluginWaitPhase;
  /** Gives up with the signal's reason; what was done is undone. */
  signal?: AbortSignal;
  /**
   * Told each time the mount is held back and tried again (a claim refused
   * for now, a controller or node plugin that did not answer), before the
   * wait: whoever waits for the mount can say why it takes long.
   */
  onRetry?: (retry: MountRetry) => void;
  /**
   * Told when the mount has to wait for its node plugin (not healthy when
   * the mount needs it), with the limit, and again when the plugin is back:
   * whoever waits for the mount can say so (Nomad's "Waiting for plugin").
   */
  onPluginWait?: (wait: PluginWaitNotice) => void;
}

/** A mount waiting for its node plugin, or done waiting. */
export interface PluginWaitNotice {
  state: 'waiting' | 'back';
  name: string;
  volumeId: string;
  pluginId: string;
  phase: PluginWaitPhase;
  /** For `waiting`: how long at most (the phase's limit, less what was spent). */
  limitMs: number;
}

/** A mount held back, to be tried again. */
export interface MountRetry {
  name: string;
  volumeId: string;
  pluginId: string;
  /** `claim`: the catalog refused the claim for now (or its controller publish failed); `plugin`: the node plugin went away or did not answer during a node step. */
  reason: 'claim' | 'plugin';
  /** 1 for the first retry. */
  attempt: number;
  /** What failed, as the error said it. */
  error: string;
  /** How long the mount waits before trying again (for `plugin`: at most, it tries as soon as the plugin is healthy). */
  delayMs: number;
}

export interface UnmountOptions {
  /**
   * Ends the wait for an unhealthy plugin (the agent going away): the
   * unmount stays pending, for the retries or the next agent.
   */
  signal?: AbortSignal;
  /**
   * Whether node plugin `pluginId` may come back (a task of it runs or is
   * restarting here). When it says no, an unmount whose plugin is away does
   * not wait the postrun limit for it: the attempt is made at once and,
   * failing, stays pending for the background retries that run when the
   * plugin is back. Absent: always waited for.
   */
  pluginExpected?: (pluginId: string) => boolean;
}

/** How the first attempt of one volume's unmount went; a failed one is retried in the background. */
export interface UnmountOutcome {
  name: string;
  volumeId: string;
  pluginId: string;
  /** Set when the first attempt failed (the record stays, desired unmounted, and is retried). */
  error?: unknown;
  /**
   * Set when the node plugin was not healthy when the unmount was asked for:
   * how long the unmount waited for it (up to the postrun limit), and whether
   * it came back in time; `gone` when it was not waited for, nothing of it
   * running here (UnmountOptions.pluginExpected).
   */
  pluginWait?: { waitedMs: number; healthy: boolean; gone?: boolean };
}

/** What the reconciler found or did about a live mount after its node plugin came back (or after an agent restart). */
export type LiveMountEventKind =
  'plugin-away' | 'plugin-back' | 'checked' | 'abnormal' | 'stale' | 'remounted' | 'remount-failed' | 'remount-busy';

export interface LiveMountEvent {
  /**
   * `plugin-back`: the plugin serves again, the mount is being checked;
   * `checked`: it answers, kept as it is; `abnormal`: it answers, but the
   * plugin reports its condition abnormal (reported only, kept as it is);
   * `stale`: it does not (the message says why and what is done about it);
   * `remounted`: staged and published again through the plugin;
   * `remount-failed`: that failed, and is tried again (after a backoff, and
   * when the plugin is next back); `remount-busy`: its target is in use, so
   * it was not unmounted, and is left as it is (checked again when the
   * plugin is next back).
   */
  readonly kind: LiveMountEventKind;
  readonly allocId: string;
  /** The group's name for the volume. */
  readonly name: string;
  readonly volumeId: string;
  readonly pluginId: string;
  readonly targetPath?: string;
  /** The record's policy for a stale mount. */
  readonly policy: StaleMountPolicy;
  /** A sentence for people: what was found or done, naming the volume, the path and the plugin. */
  readonly message: string;
  /** On `remounted` under the `restart` policy: the alloc's tasks should restart to see the new mount. */
  readonly restartTasks?: boolean;
  /** ms since the epoch, from the Clock. */
  readonly time: number;
}

/**
 * A live mount's state as `volume status` shows it: `plugin-away` (kept
 * without its plugin; not checked since), `ok` (its last check found it
 * answering, or it was mounted in this run), `abnormal` (it answers, but
 * its plugin reports the volume abnormal: kept, reported only), `stale`
 * (found stale, kept by policy or not remountable now), `busy` (found
 * stale, but in use: not unmounted, left as it is), `remounting` (a remount
 * started and not done: under way, failed and retried, or left by the last
 * agent).
 */
export type MountCheckState = 'plugin-away' | 'ok' | 'abnormal' | 'stale' | 'busy' | 'remounting';
export const MOUNT_CHECK_STATES: readonly MountCheckState[] = ['plugin-away', 'ok', 'abnormal', 'stale', 'busy', 'remounting'];

export interface MountCheckView {
  readonly allocId: string;
  readonly name: string;
  readonly volumeId: string;
  readonly pluginId: string;
  readonly state: MountCheckState;
  /** The last finding's sentence (absent when nothing was checked in this run). */
  readonly message?: string;
  /** When the last finding was made (ms since the epoch), if any. */
  readonly time?: number;
}

/** One mount's part of a node-side expansion. */
export interface NodeExpandOutcome {
  allocId: string;
  name: string;
  /** The capacity the node plugin reports after NodeExpandVolume. */
  capacityBytes?: number;
  /** Owed and made after the next publish (the plugin does not expand online). */
  deferred?: true;
  /** The node plugin has no node-side expansion (no EXPAND_VOLUME): nothing to do on the node. */
  noNodeExpansion?: true;
  /** Why NodeExpandVolume failed (it is owed, and made after the next publish). */
  error?: string;
}

/** What NodeGetVolumeStats says of one mount of a volume. */
export interface MountUsageView {
  allocId: string;
  name: string;
  volumeId: string;
  pluginId: string;
  targetPath?: string;
  usage?: VolumeUsage;
  /** Why it could not be read (the plugin away, no GET_VOLUME_STATS, a failed call, a late answer). */
  error?: string;
  /** NodeGetVolumeStats had not answered within the read's wait (USAGE_ANSWER_WITHIN_MS); the call goes on. */
  late?: boolean;
}

export interface VolumeReconcilerService extends Disposable {
  /** Reads the records back and resumes every unmount left to do. Idempotent. */
  start(): void;
  /** Wants the volume mounted for the alloc and resolves once it is; rejects with a VolumeMountError after undoing what it did. */
  mount(request: VolumeMountRequest, options: MountOptions): Promise<MountedVolumeInfo>;
  /**
   * Wants the alloc's volumes (those named, or all) unmounted; one whose node
   * plugin is not healthy first waits for it (the postrun limit). Resolves
   * with how the first attempt at each went.
   */
  unmount(allocId: string, names?: readonly string[], options?: UnmountOptions): Promise<UnmountOutcome[]>;
  /** The volumes an alloc has mounted now. */
  mounted(allocId: string): MountedVolumeInfo[];
  /** Every record (of one alloc). */
  list(allocId?: string): VolumeMountRecord[];
  /** Unmounts not done yet. */
  pendingUnmounts(): VolumeMountRecord[];
  /** Retries the pending unmounts through node plugin `pluginId` now rather than at their backoff (a plugin about to stop). */
  retryUnmountsNow(pluginId: string): void;
  /** The live mounts (desired mounted and published, or mid-remount) with their last check result, for `volume status`. */
  mountChecks(allocId?: string): MountCheckView[];
  /**
   * Reads volume `volumeId` again from the catalog for each of its live
   * mounts (after a register updated it): their next stage, publish, node
   * expansion, remount or unmount sends its new secrets. Never throws.
   */
  refreshVolume(volumeId: string): Promise<void>;
  /**
   * Expands every live mount of `volumeId` on the node to `capacityBytes`:
   * NodeExpandVolume now when `online`, else (and for a call that fails)
   * owed, and made after the mount's next publish.
   */
  expandMounted(
    volumeId: string,
    capacityBytes: number,
    options: { online: boolean; signal?: AbortSignal; secrets?: Record<string, string> },
  ): Promise<NodeExpandOutcome[]>;
  /** NodeGetVolumeStats of each live mount (of one alloc, or of one volume). */
  usage(filter: { allocId?: string; volumeId?: string }, options?: { signal?: AbortSignal }): Promise<MountUsageView[]>;
  /** A live mount was checked after its node plugin came back (or after an agent restart), and what came of it. Every stale one is reported. */
  readonly onDidCheckMount: Event<LiveMountEvent>;
  /** The same, for one alloc's mounts only: each check reaches only the listeners of its alloc (a thousand allocs listening cost nothing extra per check). */
  onDidCheckMountOf(allocId: string): Event<LiveMountEvent>;
}
