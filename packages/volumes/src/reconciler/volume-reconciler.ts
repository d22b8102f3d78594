// VolumeReconciler: the one owner of this node's volume mounts, after
// kubelet's desired-vs-actual model. Each record says what an alloc wants of
// a volume (desired mounted or unmounted) and what this node has done for it
// (claimed, staged, published — see mount-record.ts); a per-volume queue
// converges the two, one step at a time, persisting each intent before its
// call goes out:
//
//   mount:    claim (catalog; the controller publishes when it does)
//             → stage (when the plugin stages and the staging path is not mounted)
//             → publish (unless the target is mounted)
//   unmount:  unpublish → unstage (only the last user of the staging path)
//             → release the claim (the controller unpublishes) → forget
//
// It is driven by events, not a poll: a mount or unmount asked for, a plugin
// turning healthy (or a new instance of it), a retry timer. Restart, plugin
// absence and abort take the same path — reconcile from the records and the
// mount table:
//
//   - a restored record whose target is still mounted is kept at once,
//     without waiting for its plugin (however long the plugin stays away,
//     nothing here takes a live mount down); one whose mount is gone waits
//     for the plugin (the `restore` limit) and is mounted again;
//   - a plugin that goes away in the middle of a mount (UNAVAILABLE, no
//     instance) is waited for again and the step retried, within the
//     phase's limit;
//   - an unmount whose plugin is not healthy waits for it (the `postrun`
//     limit) before its first attempt; an unmount that fails stays
//     desired-unmounted and is retried with the policy's backoff (and at
//     once when its plugin is back) until it is done, across agent restarts;
//   - when a node plugin comes back (restarted, upgraded, or found again
//     after an agent restart) the live mounts published through it are
//     checked, and stale ones remounted, restarted or reported, by policy
//     (mount-checker.ts).
//
// Every record write goes through update(), here. The mount steps live in
// this file (the check of a restored record in restored-mounts.ts, the waits
// for a plugin away in mount-plugin-waits.ts); the unmount steps in
// unmount-steps.ts, the remount of stale mounts in stale-remount.ts, the
// node-side expansion in node-expansion.ts; the findings about live mounts
// are told by live-mount-events.ts, and their usage read by mount-usage.ts.
import {
  AbortError,
  Clock,
  Disposable,
  DisposableStore,
  Event,
  ILogger,
  IClock,
  ITimeoutPolicy,
  Logger,
  ShutdownError,
  TimeoutPolicy,
  abortReason,
  crashPoint,
  errorMessage,
  formatDuration,
} from '@csiplug/core';
import {
  ICSIManager,
  IMountTable,
  isPluginUnavailable,
  KeyedMutex,
  copyUsage,
  type CSIManager,
  type MountTable,
} from '@csiplug/csimanager';
import { PluginTypeCSINode } from '@csiplug/registry';
import { inject, injectable } from 'tsyringe';
import { ClaimError, type ClaimableVolume, type VolumeClaimer } from '../catalog/volume-claimer';
import { IVolumeClaimer } from '../catalog/tokens';
import { ReconcilerStoppedError, VolumeMountError } from './errors';
import { MountChecker } from './mount-checker';
import { UsageReader } from './usage-reader';
import { holdsAnything, mountKey, stalePolicyOf, unknownFieldValues, type VolumeMountRecord } from './mount-record';
import type { MountStore } from './mount-store';
import type {
  LiveMountEvent,
  MountCheckView,
  MountedVolumeInfo,
  MountOptions,
  MountUsageView,
  NodeExpandOutcome,
  UnmountOptions,
  UnmountOutcome,
  VolumeMountRequest,
  VolumeReconcilerService,
} from './reconciler-service';
import { IMountStore } from './tokens';
import { LiveMountEvents } from './live-mount-events';
import { expandMountedVolume, expandOwed, type ExpansionHost } from './node-expansion';
import { readMountUsage } from './mount-usage';
import { remountStale, type RemountHost } from './stale-remount';
import { runAttemptDown, unmountVolumes, volumesToUnmount, type UnmountHost } from './unmount-steps';
import { checkOneNamePerVolume } from './one-name-per-volume';
import { awaitPluginAgain, tellRetry } from './mount-plugin-waits';
import { keepRemounting, stillMounted, type RestoreHost } from './restored-mounts';
import { mountedInfo, volumeRef as ref } from './record-views';
import { refreshVolume } from './volume-refresh';

/** How long a mount waits for its node plugin before it tells (MountOptions.onPluginWait). */
export const PLUGIN_WAIT_NOTICE_MS = 1_000;

@injectable()
export class VolumeReconciler implements VolumeReconcilerService {
  private readonly log: Logger;
  private readonly records = new Map<string, VolumeMountRecord>();
  /** Records whose mount was checked against the mount table since this reconciler started. */
  private readonly verified = new Set<string>();
  /** What the catalog said of a record's volume (secrets, context, mount options), kept in memory only. */
  private readonly volumes = new Map<string, ClaimableVolume>();
  private readonly queue = new KeyedMutex();
  private readonly retryTimers = new Map<string, Disposable>();
  /** Unmount attempts under way, by record key. */
  private readonly downs = new Map<string, Promise<UnmountOutcome | undefined>>();
  private readonly subscriptions = new DisposableStore();
  /** The live-mount findings, told to listeners (all, or per alloc) and kept for mountChecks. */
  private readonly liveEvents: LiveMountEvents;
  readonly onDidCheckMount: Event<LiveMountEvent>;
  private readonly checker: MountChecker;
  /** Status reads of usage: one call in flight per mount, an answer within its wait (late, when the plugin hangs). */
  private readonly usageReader: UsageReader;
  private started = false;
  private stopped = false;
  /** Aborted by dispose(): ends the waits this reconciler makes on its own (an unmount's wait for its plugin). */
  private readonly stopping = new AbortController();
  /** What the unmount path (unmount-steps.ts) works on: this reconciler's records, queue and writes. */
  private readonly unmountHost: UnmountHost;
  /** What a remount of stale mounts (stale-remount.ts) works on. */
  private readonly remountHost: RemountHost;
  /** What the check of a restored record (restored-mounts.ts) works on. */
  private readonly restoreHost: RestoreHost;
  /** What a node-side expansion (node-expansion.ts) works on. */
  private readonly expansionHost: ExpansionHost;

  constructor(
    @inject(ICSIManager) private readonly csi: CSIManager,
    @inject(IVolumeClaimer) private readonly claimer: VolumeClaimer,
    @inject(IMountStore) private readonly store: MountStore,
    @inject(IMountTable) mountTable: MountTable,
    @inject(IClock) private readonly clock: Clock,
    @inject(ITimeoutPolicy) private readonly timeouts: TimeoutPolicy,
    @inject(ILogger) logger: Logger,
  ) {
    this.log = logger.child({ component: 'volume-reconciler' });
    this.usageReader = new UsageReader(clock);
    this.liveEvents = new LiveMountEvents(this.log);
    this.onDidCheckMount = this.liveEvents.onDidCheckMount;
    this.unmountHost = {
      records: this.records,
      verified: this.verified,
      volumes: this.volumes,
      queue: this.queue,
      csi,
      claimer: this.claimer,
      clock,
      timeouts,
      log: this.log,
      stopping: this.stopping.signal,
      stopped: () => this.stopped,
      update: (key, change) => this.update(key, change),
      forget: (key) => this.forget(key),
      scheduleRetry: (volumeId, delayMs) => this.scheduleRetry(volumeId, delayMs),
      attemptDown: (key) => this.attemptDown(key),
      pluginAway: (pluginId) => this.pluginAway(pluginId),
    };
    this.remountHost = {
      records: this.records,
      volumes: this.volumes,
      downs: this.downs,
      queue: this.queue,
      csi,
      claimer: this.claimer,
      stopped: () => this.stopped,
      update: (key, change) => this.update(key, change),
      nodeSteps: (key, signal) => this.nodeSteps(key, signal),
      remountReported: (key) => this.remountReported(key),
    };
    this.restoreHost = {
      verified: this.verified,
      downs: this.downs,
      mountTable,
      clock,
      log: this.log,
      checker: { restored: (record) => this.checker.restored(record) },
      stopped: () => this.stopped,
      pluginAway: (pluginId) => this.pluginAway(pluginId),
      wanted: (key) => this.wanted(key),
    };
    this.expansionHost = {
      records: this.records,
      volumes: this.volumes,
      queue: this.queue,
      csi,
      log: this.log,
      update: (key, change) => this.update(key, change),
      wanted: (key) => this.wanted(key),
    };
    this.checker = new MountChecker(
      { csi, mountTable, clock, timeouts, log: this.log },
      {
        attached: (pluginId) => this.attached(pluginId).map(([k, r]) => [k, structuredClone(r)] as const),
        remount: (volumeId, keys, restage) => remountStale(this.remountHost, volumeId, keys, restage),
        remountReported: (key) => this.remountReported(key),
        emit: (event) => this.liveEvents.emit(event),
      },
    );
  }

  /** The records of node plugin `pluginId` that are live mounts of this run: wanted mounted, verified, no unmount under way. */
  private attached(pluginId: string): [string, VolumeMountRecord][] {
    return [...this.records.entries()].filter(
      ([k, r]) => r.pluginId === pluginId && r.desired === 'mounted' && this.verified.has(k) && !this.downs.has(k),
    );
  }

  /** Node plugin `pluginId` stopped serving: every live mount through it is told (it stays mounted, and is looked at when the plugin is back). */
  private reportPluginAway(pluginId: string, why: string): void {
    const live = this.attached(pluginId).filter(([, r]) => r.published && r.targetPath !== undefined);
    if (live.length)
      this.log.warn('a node plugin with live mounts stopped serving; the mounts stay, and are checked when it is back', {
        plugin_id: pluginId,
        mounts: live.length,
        why,
      });
    for (const [, r] of live) {
      this.liveEvents.emit({
        kind: 'plugin-away',
        allocId: r.allocId,
        name: r.name,
        volumeId: r.volumeId,
        pluginId: r.pluginId,
        targetPath: r.targetPath!,
        policy: stalePolicyOf(r),
        message: `plugin ${pluginId} is away (${why}); volume "${r.name}" (${r.volumeId}) stays mounted at ${r.targetPath} for the alloc's tasks, and is checked when the plugin is back`,
        time: this.clock.now(),
      });
    }
  }

  onDidCheckMountOf(allocId: string): Event<LiveMountEvent> {
    return this.liveEvents.onDidCheckMountOf(allocId);
  }

  // ---- lifecycle ----------------------------------------------------------------

  /**
   * Reads the records back, resumes every unmount left to do, and — when a
   * node plugin is ready again — retries its unmounts at once and checks
   * the live mounts published through it. Records desired mounted wait for
   * their alloc's restore to ask again. Idempotent.
   */
  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    const { records, failures } = this.store.list();
    for (const f of failures)
      this.log.error('a volume mount record could not be read; it is left in the state untouched', { key: f.key, error: f.error });
    for (const r of records) {
      this.records.set(mountKey(r.allocId, r.name), r);
      const unknown = unknownFieldValues(r);
      if (unknown.length)
        this.log.warn('a volume mount record holds values this agent does not know (from a newer agent?); read with defaults', {
          alloc_id: r.allocId,
          volume: r.name,
          volume_id: r.volumeId,
          fields: unknown.join(', '),
        });
    }
    this.subscriptions.add(
      this.csi.onDidBecomeReady((ready) => {
        if (ready.info.type !== PluginTypeCSINode) return;
        for (const volumeId of volumesToUnmount(this.records, ready.info.name)) this.scheduleRetry(volumeId, 0);
        this.checker.pluginReady(ready);
      }),
    );
    this.subscriptions.add(
      // A node plugin that stops serving while mounts through it are live: each of them says so (they stay mounted).
      this.csi.onDidChangeHealth((change) => {
        if (change.info.type !== PluginTypeCSINode || change.healthy || change.previous !== true) return;
        // The old instance of an upgrade going away: the plugin still serves through the new one.
        if (this.csi.pluginInfo(PluginTypeCSINode, change.name)?.healthy === true) return;
        this.reportPluginAway(
          change.name,
          `${change.description}${change.lastError && !change.description.includes(change.lastError) ? `: ${change.lastError}` : ''}`,
        );
      }),
    );
    this.subscriptions.add(
      // Create-before-destroy: the old alloc going away after the swap is when what it served goes stale.
      this.csi.onDidRetireInstance((retired) => {
        if (retired.info.type === PluginTypeCSINode) this.checker.pluginRetired(retired);
      }),
    );
    const toUnmount = volumesToUnmount(this.records);
    const left = records.filter((r) => r.desired === 'unmounted').length;
    if (left) this.log.info('resuming unmounts left by the last agent', { count: left });
    for (const volumeId of toUnmount) this.scheduleRetry(volumeId, 0);
  }

  /** Stops retrying and checking; the records stay in the store for the next start. */
  dispose(): void {
    this.stopped = true;
    this.stopping.abort(new ReconcilerStoppedError());
    this.subscriptions.dispose();
    this.checker.dispose();
    this.liveEvents.dispose();
    for (const t of this.retryTimers.values()) t.dispose();
    this.retryTimers.clear();
  }

  // ---- reading ------------------------------------------------------------------

  /** Every record (of one alloc), as stored. */
  list(allocId?: string): VolumeMountRecord[] {
    return [...this.records.values()].filter((r) => allocId === undefined || r.allocId === allocId).map((r) => structuredClone(r));
  }

  /** The unmounts not done yet: desired unmounted, something still held. */
  pendingUnmounts(): VolumeMountRecord[] {
    return this.list().filter((r) => r.desired === 'unmounted');
  }

  /** The live mounts with their last check result (see MountCheckView). */
  mountChecks(allocId?: string): MountCheckView[] {
    return this.list(allocId)
      .filter((r) => r.desired === 'mounted' && (r.published || r.remounting !== undefined) && r.targetPath !== undefined)
      .map((r) => {
        const last = this.liveEvents.last(mountKey(r.allocId, r.name));
        const state: MountCheckView['state'] =
          r.remounting !== undefined
            ? 'remounting'
            : last?.kind === 'stale'
              ? 'stale'
              : last?.kind === 'remount-busy'
                ? 'busy'
                : this.pluginAway(r.pluginId)
                  ? 'plugin-away'
                  : last?.kind === 'abnormal'
                    ? 'abnormal'
                    : 'ok';
        return {
          allocId: r.allocId,
          name: r.name,
          volumeId: r.volumeId,
          pluginId: r.pluginId,
          state,
          ...(last ? { message: last.message, time: last.time } : {}),
        };
      });
  }

  /** The volumes an alloc has mounted, by the group's volume name. */
  mounted(allocId: string): MountedVolumeInfo[] {
    return (
      this.list(allocId)
        // A record mid-remount (its intent written) is not mounted until the remount is done, whatever its flags say.
        .filter((r) => r.desired === 'mounted' && r.published && r.targetPath !== undefined && r.remounting === undefined)
        .map((r) => mountedInfo(r, false, this.pluginAway(r.pluginId)))
    );
  }

  private pluginAway(pluginId: string): boolean {
    return this.csi.pluginInfo(PluginTypeCSINode, pluginId)?.healthy !== true;
  }

  // ---- mount --------------------------------------------------------------------

  /**
   * Wants the volume mounted for the alloc and waits until it is: looks the
   * volume up, waits for its node plugin (the phase's limit), then claims,
   * stages and publishes under the volume's queue. A record from before a
   * restart whose target is still mounted is kept at once, without waiting
   * for the plugin (`pluginAway` says whether it serves now; it is checked
   * when it does). A claim refused for now is asked again with the policy's
   * backoff within its limit; a plugin that goes away mid-mount is waited for
   * again and the step retried, within the phase's limit. On failure or abort
   * what was done is undone (the first attempt before this rejects; the rest
   * in the background) and a VolumeMountError names the volume, plugin and
   * cause — except for a record that was wanted mounted before this call
   * (restored after an agent restart): its mount may be live under running
   * tasks, so it stays wanted until the alloc's unmount, and an agent
   * shutting down mid-restore leaves it to the next.
   */
  async mount(request: VolumeMountRequest, options: MountOptions): Promise<MountedVolumeInfo> {
    const { signal, phase } = options;
    const key = mountKey(request.allocId, request.name);
    const deadline = this.clock.now() + this.timeouts.pluginWait(phase);
    let pluginId = this.records.get(key)?.pluginId;
    // A record wanted mounted before this call (a restored live mount) is
    // not this call's to undo: the alloc's unmount undoes it.
    const wantedBefore = this.records.get(key)?.desired === 'mounted';
    try {
      if (this.stopped) throw new ReconcilerStoppedError();
      const record = await this.want(key, request);
      pluginId = record.pluginId;
      if (wantedBefore) {
        // A remount the last agent started: the alloc keeps running, the checker finishes it when the plugin serves (never the restore limit).
        if (record.remounting !== undefined && record.targetPath !== undefined && !this.downs.has(key))
          return keepRemounting(this.restoreHost, key);
        // The mount table says whether the mount is live; no plugin is needed to see that.
        const live = await stillMounted(this.restoreHost, key, signal, 'waiting for its plugin to mount it again');
        if (live) return live;
      }
      // Held to the phase's deadline overall: time spent looking the volume up or reading the mount table counts.
      const limitMs = Math.max(0, deadline - this.clock.now());
      const away = this.csi.pluginInfo(PluginTypeCSINode, record.pluginId)?.healthy !== true;
      const notice = { name: record.name, volumeId: record.volumeId, pluginId: record.pluginId, phase };
      // Said only for a wait that lasts (a plugin still starting for a moment is not news); then that it ended.
      let told = false;
      const tell =
        away && options.onPluginWait
          ? this.clock.setTimeout(() => {
              told = true;
              options.onPluginWait!({ ...notice, state: 'waiting', limitMs: Math.max(0, limitMs - PLUGIN_WAIT_NOTICE_MS) });
            }, PLUGIN_WAIT_NOTICE_MS)
          : undefined;
      try {
        await this.csi.waitForPlugin(PluginTypeCSINode, record.pluginId, phase, { signal, withinMs: limitMs });
      } finally {
        tell?.dispose();
      }
      if (told) options.onPluginWait?.({ ...notice, state: 'back', limitMs: 0 });
      return await this.bringUpWithClaimRetry(key, options, deadline);
    } catch (err) {
      const cause = signal?.aborted ? abortReason(signal) : err;
      // Cut short by the agent going away: the next agent finishes it (restore) or undoes it (teardown).
      const leftForNextAgent = signal?.aborted === true && cause instanceof ShutdownError;
      if (!wantedBefore && !leftForNextAgent && this.records.get(key)?.volumeId === request.volumeId) {
        // A failed mount is undone before the failure is reported (its claim
        // released, as the caller may expect); an aborted one reports at once
        // and is undone in the background — the undo may queue behind another
        // alloc's step on the volume, and whoever aborted should not wait for it.
        const undoing = this.giveUp(key, cause);
        if (!signal?.aborted) await undoing;
      }
      throw new VolumeMountError(request.name, request.volumeId, pluginId, cause);
    }
  }

  /** The record for (alloc, name), made (desired mounted, nothing done) when there is none. */
  private async want(key: string, request: VolumeMountRequest): Promise<VolumeMountRecord> {
    const existing = this.records.get(key);
    // Already wanted (a restore): as it stands — a rule for new records must not fail a live alloc's restore.
    if (existing?.desired === 'mounted' && existing.volumeId === request.volumeId) {
      if (existing.onStaleMount === request.onStaleMount) return existing;
      try {
        return this.update(key, { onStaleMount: request.onStaleMount });
      } catch (err) {
        this.log.warn('could not record a changed stale-mount policy; it holds until the agent restarts', {
          alloc_id: request.allocId,
          volume_id: request.volumeId,
          error: errorMessage(err),
        });
        const changed: VolumeMountRecord = { ...existing, onStaleMount: request.onStaleMount };
        if (changed.onStaleMount === undefined) delete changed.onStaleMount;
        this.records.set(key, changed);
        return changed;
      }
    }
    checkOneNamePerVolume(this.records, key, request);
    const volume = await this.claimer.lookup(request.volumeId);
    checkOneNamePerVolume(this.records, key, request);
    this.volumes.set(key, volume);
    const now = this.records.get(key);
    if (now) {
      // Asked again while its unmount is still pending: mount it again from where it is.
      return this.update(key, {
        desired: 'mounted',
        attempts: 0,
        lastError: undefined,
        since: this.clock.now(),
        onStaleMount: request.onStaleMount,
      });
    }
    const record: VolumeMountRecord = {
      allocId: request.allocId,
      name: request.name,
      volumeId: volume.id,
      externalId: volume.externalId || volume.id,
      pluginId: volume.pluginId,
      usage: copyUsage(request.usage),
      desired: 'mounted',
      claimed: false,
      staged: false,
      published: false,
      attempts: 0,
      since: this.clock.now(),
      ...(request.onStaleMount ? { onStaleMount: request.onStaleMount } : {}),
    };
    this.persist(record);
    crashPoint('reconciler.want.after-write');
    return record;
  }

  private async bringUpWithClaimRetry(key: string, options: MountOptions, deadline: number): Promise<MountedVolumeInfo> {
    const { signal, phase } = options;
    const started = this.clock.now();
    const limit = this.timeouts.claimRetryLimit();
    let claimed = false;
    let pluginRetries = 0;
    for (let attempt = 1; ;) {
      const record = this.wanted(key);
      try {
        // An unmount of this record still under way (asked for again meanwhile)
        // finishes its current step first: its release must not cross this claim.
        const down = this.downs.get(key);
        if (down) await down;
        this.wanted(key);
        const live = await stillMounted(this.restoreHost, key, signal);
        if (live) return live;
        // The claim (which may wait for the controller and publish through it)
        // runs outside the volume's queue: its intent is recorded first, and
        // other allocs' steps on the volume need not wait for it.
        if (!claimed) await this.claim(key, signal);
        claimed = true;
        return await this.queue.run(record.volumeId, () => this.nodeSteps(key, signal), signal);
      } catch (err) {
        if (err instanceof ClaimError && err.retryable) {
          const delay = this.timeouts.claimBackoff(attempt);
          if (this.clock.now() - started + delay > limit) {
            throw new ClaimError(`claim not granted within ${formatDuration(limit)} (${attempt} attempts): ${err.message}`, false, {
              cause: err,
            });
          }
          this.log.info('volume claim refused for now; retrying', {
            alloc_id: record.allocId,
            volume_id: record.volumeId,
            attempt,
            delay_ms: delay,
            error: err,
          });
          if (!this.stopped && !signal?.aborted) tellRetry(this.log, options, record, 'claim', attempt, err, delay);
          await this.clock.sleep(delay, signal);
          attempt++;
          continue;
        }
        // A claim's refusal is the catalog's answer; a node step's failure while the node plugin is away is not.
        if (err instanceof ClaimError || this.stopped || signal?.aborted || !(isPluginUnavailable(err) || this.pluginAway(record.pluginId)))
          throw err;
        const left = deadline - this.clock.now();
        if (left > 0)
          tellRetry(
            this.log,
            options,
            record,
            'plugin',
            pluginRetries + 1,
            err,
            this.pluginAway(record.pluginId) ? left : Math.min(left, this.timeouts.unmountBackoff(pluginRetries + 1)),
          );
        await awaitPluginAgain(this.unmountHost, record, err, ++pluginRetries, phase, deadline, signal);
      }
    }
  }

  /** The claim step. The catalog grants the same claim again as it stands (a retried mount, a mount gone after a restart). */
  private async claim(key: string, signal: AbortSignal | undefined): Promise<void> {
    if (this.stopped) throw new ReconcilerStoppedError();
    crashPoint('reconciler.claim.before-write');
    const record = this.update(key, { claimed: true });
    crashPoint('reconciler.claim.after-write');
    const claim = await this.claimer.claim(
      {
        volumeId: record.volumeId,
        allocId: record.allocId,
        readOnly: record.usage.readOnly,
        accessMode: record.usage.accessMode,
        attachmentMode: record.usage.attachmentMode,
      },
      { signal },
    );
    this.volumes.set(key, claim.volume);
    crashPoint('reconciler.claim.after-call');
    // A volume expanded with node_expansion_required is expanded on the node after this mount's publish.
    const owed = Math.max(this.mustHave(key).expandTo ?? 0, claim.volume.nodeExpandTo ?? 0) || undefined;
    this.update(key, {
      publishContext: claim.publishContext,
      externalId: claim.volume.externalId || claim.volume.id,
      ...(owed !== undefined ? { expandTo: owed } : {}),
    });
  }

  /** Stage (when the plugin stages) and publish; runs under the volume's queue. */
  private async nodeSteps(key: string, signal: AbortSignal | undefined): Promise<MountedVolumeInfo> {
    if (this.stopped) throw new ReconcilerStoppedError();
    let record = this.wanted(key);
    // Read before the first call: a plugin that bounces during the steps is a newer generation, and the mount is looked at again then.
    const generation = this.checker.generationOf(record.pluginId);
    const volume = ref(record, this.volumes.get(key));
    const vm = this.csi.volumeManager(record.pluginId);
    const publishContext = record.publishContext ?? {};
    if (await vm.requiresStaging({ signal })) {
      crashPoint('reconciler.stage.before-write');
      if (!this.wanted(key).staged) record = this.update(key, { staged: true });
      crashPoint('reconciler.stage.after-write');
      await vm.stageVolume(volume, record.usage, publishContext, { signal });
      crashPoint('reconciler.stage.after-call');
    }
    this.wanted(key);
    crashPoint('reconciler.publish.before-write');
    record = this.update(key, { published: true });
    crashPoint('reconciler.publish.after-write');
    const info = await vm.publishVolume(volume, record.allocId, record.usage, publishContext, { signal });
    crashPoint('reconciler.publish.after-call');
    record = this.update(key, { targetPath: info.targetPath, stagingPath: info.stagingPath, attempts: 0, lastError: undefined });
    crashPoint('reconciler.publish.after-record');
    this.verified.add(key);
    this.checker.fresh(key, generation);
    if (record.expandTo !== undefined) {
      // Owed from an expansion: a failure keeps it owed (the next publish, or the next expansion, tries again) and never fails the mount it rides on.
      await expandOwed(this.expansionHost, key, record.expandTo, signal).catch(() => undefined);
    }
    return mountedInfo(this.wanted(key), false);
  }

  refreshVolume(volumeId: string): Promise<void> {
    return refreshVolume({ records: this.records, volumes: this.volumes, claimer: this.claimer, log: this.log }, volumeId);
  }

  expandMounted(
    volumeId: string,
    capacityBytes: number,
    options: { online: boolean; signal?: AbortSignal; secrets?: Record<string, string> },
  ): Promise<NodeExpandOutcome[]> {
    return expandMountedVolume(this.expansionHost, volumeId, capacityBytes, options);
  }

  /** `_options.signal` is not taken: a mount's read is shared by every caller while it runs, so no one caller cancels it (it runs to the CSI call limit). */
  usage(filter: { allocId?: string; volumeId?: string }, _options: { signal?: AbortSignal } = {}): Promise<MountUsageView[]> {
    return readMountUsage(
      { records: this.records, volumes: this.volumes, csi: this.csi, reader: this.usageReader, stopping: this.stopping.signal },
      filter,
    );
  }

  /** A mount that failed or was abandoned: want it unmounted, try that once now, keep retrying in the background. */
  private async giveUp(key: string, cause: unknown): Promise<void> {
    const record = this.records.get(key);
    if (!record) return;
    this.verified.delete(key);
    try {
      // Nothing done, nothing to undo: forgotten now, not queued behind another alloc's step on the volume.
      if (!holdsAnything(record)) return this.forget(key);
      if (record.desired === 'mounted')
        this.update(key, { desired: 'unmounted', attempts: 0, lastError: errorMessage(cause), since: this.clock.now() });
    } catch (err) {
      // The mount still fails with its own cause; the record keeps what was done, for the alloc's unmount to undo.
      this.log.error('could not record that a failed mount is to be undone; it is undone when its alloc unmounts', {
        alloc_id: record.allocId,
        volume_id: record.volumeId,
        error: errorMessage(err),
      });
      return;
    }
    const outcome = await this.attemptDown(key);
    if (outcome?.error !== undefined) {
      this.log.error('could not undo a failed mount; retrying in the background', {
        alloc_id: record.allocId,
        volume_id: record.volumeId,
        error: errorMessage(outcome.error),
      });
    }
  }

  /**
   * Wants the alloc's volumes (those named, or all) unmounted and makes one
   * attempt at each, in parallel (unmount-steps.ts).
   */
  unmount(allocId: string, names?: readonly string[], options: UnmountOptions = {}): Promise<UnmountOutcome[]> {
    return unmountVolumes(this.unmountHost, allocId, names, options);
  }

  // ---- unmount ------------------------------------------------------------------

  /**
   * One attempt at a record's unmount steps, under its volume's queue; a
   * failure schedules the next. An attempt already under way for the record
   * is joined, not repeated.
   */
  private attemptDown(key: string): Promise<UnmountOutcome | undefined> {
    const running = this.downs.get(key);
    if (running) return running;
    const attempt = runAttemptDown(this.unmountHost, key).finally(() => this.downs.delete(key));
    this.downs.set(key, attempt);
    return attempt;
  }

  // ---- live mounts found stale (MountChecker) ------------------------------------

  /** The checker reported a remount done: its intent is cleared. */
  private remountReported(key: string): void {
    const r = this.records.get(key);
    if (!r?.remounting) return;
    try {
      this.update(key, { remounting: undefined });
    } catch (err) {
      // Left set: a next agent remounts it again (and restarts under `restart`) — more than needed, never less.
      this.log.error('could not clear a finished remount from its record; a next agent does it again', {
        alloc_id: r.allocId,
        volume_id: r.volumeId,
        error: errorMessage(err),
      });
    }
  }

  // ---- helpers ------------------------------------------------------------------

  retryUnmountsNow(pluginId: string): void {
    for (const volumeId of volumesToUnmount(this.records, pluginId)) this.scheduleRetry(volumeId, 0);
  }

  private scheduleRetry(volumeId: string, delayMs: number): void {
    if (this.stopped) return;
    this.retryTimers.get(volumeId)?.dispose();
    this.retryTimers.set(
      volumeId,
      this.clock.setTimeout(() => {
        this.retryTimers.delete(volumeId);
        if (this.stopped) return;
        const keys = [...this.records.entries()].filter(([, r]) => r.volumeId === volumeId && r.desired === 'unmounted').map(([k]) => k);
        for (const key of keys) void this.attemptDown(key);
      }, delayMs),
    );
  }

  private mustHave(key: string): VolumeMountRecord {
    const record = this.records.get(key);
    if (!record) throw new AbortError('the volume was unmounted and forgotten while it was being mounted');
    return record;
  }

  /** The record, still wanted mounted; an AbortError when its alloc asked for it to be unmounted meanwhile. */
  private wanted(key: string): VolumeMountRecord {
    const record = this.mustHave(key);
    if (record.desired !== 'mounted')
      throw new AbortError(`volume "${record.name}" of alloc ${record.allocId} was unmounted while it was being mounted`);
    return record;
  }

  /** Applies a change to a record and writes it through; the in-memory record changes only once the write succeeded. */
  private update(key: string, change: Partial<VolumeMountRecord>): VolumeMountRecord {
    const next: VolumeMountRecord = { ...this.mustHave(key), ...change };
    for (const k of Object.keys(next) as (keyof VolumeMountRecord)[]) if (next[k] === undefined) delete next[k];
    this.persist(next);
    return next;
  }

  private persist(record: VolumeMountRecord): void {
    this.store.put(record);
    this.records.set(mountKey(record.allocId, record.name), record);
  }

  /** Drops a record that holds nothing. */
  private forget(key: string): void {
    const record = this.records.get(key);
    if (!record || holdsAnything(record)) return;
    this.store.delete(record.allocId, record.name);
    this.records.delete(key);
    this.verified.delete(key);
    this.volumes.delete(key);
    this.liveEvents.forget(key);
    this.checker.forget(key);
  }
}
