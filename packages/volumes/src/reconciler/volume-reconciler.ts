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
// turning healthy, a retry timer. Restart, plugin absence and abort take the
// same path — reconcile from the records and the mount table: a restored
// record whose target is still mounted needs nothing; one whose mount is
// gone is mounted again; an unmount that fails stays desired-unmounted and
// is retried with the policy's backoff (and at once when its plugin is back)
// until it is done, across agent restarts.
import {
  AbortError,
  Clock,
  CsiplugError,
  Disposable,
  DisposableStore,
  ILogger,
  IClock,
  ITimeoutPolicy,
  Logger,
  ShutdownError,
  TimeoutPolicy,
  abortReason,
  errorMessage,
  formatDuration,
} from '@csiplug/core';
import {
  ICSIManager,
  IMountTable,
  isMountPointRetrying,
  KeyedMutex,
  copyUsage,
  type CSIManager,
  type CSIVolumeRef,
  type MountTable,
} from '@csiplug/csimanager';
import { PluginTypeCSINode } from '@csiplug/registry';
import { inject, injectable } from 'tsyringe';
import { ClaimError, type ClaimableVolume, type VolumeClaimer } from '../catalog/volume-claimer';
import { IVolumeClaimer } from '../catalog/tokens';
import { holdsAnything, mountKey, stagingKey, type VolumeMountRecord } from './mount-record';
import type { MountStore } from './mount-store';
import type { MountedVolumeInfo, MountOptions, UnmountOutcome, VolumeMountRequest, VolumeReconcilerService } from './reconciler-service';
import { IMountStore } from './tokens';

/** A mount that failed; says which volume, which plugin, and why. */
export class VolumeMountError extends CsiplugError {
  constructor(
    readonly volumeName: string,
    readonly volumeId: string,
    readonly pluginId: string | undefined,
    cause: unknown,
  ) {
    const plugin = pluginId ? ` on plugin ${pluginId}` : '';
    super('EVOLUME_MOUNT', `volume "${volumeName}" (${volumeId})${plugin}: ${errorMessage(cause)}`, { cause });
  }
}

/** The reconciler was stopped (agent shutdown); the records stay for the next start. A ShutdownError, so callers that handle one handle it. */
export class ReconcilerStoppedError extends ShutdownError {
  constructor() {
    super('the volume reconciler is stopped; the agent is shutting down');
  }
}

function ref(record: VolumeMountRecord, volume?: ClaimableVolume): CSIVolumeRef {
  return { ...(volume ?? {}), id: record.volumeId, externalId: record.externalId, pluginId: record.pluginId };
}

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
  private started = false;
  private stopped = false;

  constructor(
    @inject(ICSIManager) private readonly csi: CSIManager,
    @inject(IVolumeClaimer) private readonly claimer: VolumeClaimer,
    @inject(IMountStore) private readonly store: MountStore,
    @inject(IMountTable) private readonly mountTable: MountTable,
    @inject(IClock) private readonly clock: Clock,
    @inject(ITimeoutPolicy) private readonly timeouts: TimeoutPolicy,
    @inject(ILogger) logger: Logger,
  ) {
    this.log = logger.child({ component: 'volume-reconciler' });
  }

  // ---- lifecycle ----------------------------------------------------------------

  /**
   * Reads the records back, resumes every unmount left to do, and retries a
   * plugin's unmounts at once when it turns healthy. Records desired mounted
   * wait for their alloc's restore to ask again. Idempotent.
   */
  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    const { records, failures } = this.store.list();
    for (const f of failures) this.log.error('a volume mount record could not be read; it is left in the state untouched', { key: f.key, error: f.error });
    for (const r of records) this.records.set(mountKey(r.allocId, r.name), r);
    this.subscriptions.add(
      this.csi.onDidChangeHealth((change) => {
        if (!change.healthy || change.type !== PluginTypeCSINode) return;
        for (const volumeId of this.volumesToUnmount(change.name)) this.scheduleRetry(volumeId, 0);
      }),
    );
    const toUnmount = this.volumesToUnmount();
    const left = records.filter((r) => r.desired === 'unmounted').length;
    if (left) this.log.info('resuming unmounts left by the last agent', { count: left });
    for (const volumeId of toUnmount) this.scheduleRetry(volumeId, 0);
  }

  /** Stops retrying; the records stay in the store for the next start. */
  dispose(): void {
    this.stopped = true;
    this.subscriptions.dispose();
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

  /** The volumes an alloc has mounted, by the group's volume name. */
  mounted(allocId: string): MountedVolumeInfo[] {
    return this.list(allocId)
      .filter((r) => r.desired === 'mounted' && r.published && r.targetPath !== undefined)
      .map((r) => this.info(r, false));
  }

  // ---- mount --------------------------------------------------------------------

  /**
   * Wants the volume mounted for the alloc and waits until it is: looks the
   * volume up, waits for its node plugin (the phase's limit), then claims,
   * stages and publishes under the volume's queue — or, for a record from
   * before a restart whose target is still mounted, nothing more. A claim
   * refused for now is asked again with the policy's backoff within its
   * limit. On failure or abort what was done is undone (the first attempt
   * before this rejects; the rest in the background) and a VolumeMountError
   * names the volume, plugin and cause — except for a record that was wanted
   * mounted before this call (restored after an agent restart): its mount may
   * be live under running tasks, so it stays wanted until the alloc's
   * unmount, and an agent shutting down mid-restore leaves it to the next.
   */
  async mount(request: VolumeMountRequest, options: MountOptions): Promise<MountedVolumeInfo> {
    const { signal, phase } = options;
    const key = mountKey(request.allocId, request.name);
    let pluginId = this.records.get(key)?.pluginId;
    // A record wanted mounted before this call (a restored live mount) is
    // not this call's to undo: the alloc's unmount undoes it.
    const wantedBefore = this.records.get(key)?.desired === 'mounted';
    try {
      if (this.stopped) throw new ReconcilerStoppedError();
      const record = await this.want(key, request);
      pluginId = record.pluginId;
      await this.csi.waitForPlugin(PluginTypeCSINode, record.pluginId, phase, { signal });
      return await this.bringUpWithClaimRetry(key, signal);
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
    if (existing?.desired === 'mounted' && existing.volumeId === request.volumeId) return existing;
    this.checkOneNamePerVolume(key, request);
    const volume = await this.claimer.lookup(request.volumeId);
    this.checkOneNamePerVolume(key, request);
    this.volumes.set(key, volume);
    const now = this.records.get(key);
    if (now) {
      // Asked again while its unmount is still pending: mount it again from where it is.
      return this.update(key, { desired: 'mounted', attempts: 0, lastError: undefined, since: this.clock.now() });
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
    };
    this.persist(record);
    return record;
  }

  /**
   * One name per (alloc, volume): the catalog keeps one claim per alloc and
   * volume, and two usages of one volume by one alloc share its target path,
   * so undoing one name would take the other's mount and claim with it.
   */
  private checkOneNamePerVolume(key: string, request: VolumeMountRequest): void {
    const existing = this.records.get(key);
    if (existing && existing.volumeId !== request.volumeId) {
      throw new ClaimError(`alloc ${request.allocId} already has volume "${existing.volumeId}" as "${request.name}"; it cannot also mount "${request.volumeId}" under that name`, false);
    }
    const other = [...this.records.entries()].find(([k, r]) => k !== key && r.allocId === request.allocId && r.volumeId === request.volumeId);
    if (other) {
      throw new ClaimError(`alloc ${request.allocId} already uses volume "${request.volumeId}" as "${other[1].name}"; a group may use a volume once (mount that one volume into several tasks instead)`, false);
    }
  }

  private async bringUpWithClaimRetry(key: string, signal: AbortSignal | undefined): Promise<MountedVolumeInfo> {
    const started = this.clock.now();
    const limit = this.timeouts.claimRetryLimit();
    for (let attempt = 1; ; attempt++) {
      const record = this.wanted(key);
      try {
        // An unmount of this record still under way (asked for again meanwhile)
        // finishes its current step first: its release must not cross this claim.
        const down = this.downs.get(key);
        if (down) await down;
        this.wanted(key);
        const live = await this.stillMounted(key, signal);
        if (live) return live;
        // The claim (which may wait for the controller and publish through it)
        // runs outside the volume's queue: its intent is recorded first, and
        // other allocs' steps on the volume need not wait for it.
        await this.claim(key, signal);
        return await this.queue.run(record.volumeId, () => this.nodeSteps(key, signal), signal);
      } catch (err) {
        if (!(err instanceof ClaimError) || !err.retryable) throw err;
        const delay = this.timeouts.claimBackoff(attempt);
        if (this.clock.now() - started + delay > limit) {
          throw new ClaimError(`claim not granted within ${formatDuration(limit)} (${attempt} attempts): ${err.message}`, false, { cause: err });
        }
        this.log.info('volume claim refused for now; retrying', { alloc_id: record.allocId, volume_id: record.volumeId, attempt, delay_ms: delay, error: err });
        await this.clock.sleep(delay, signal);
      }
    }
  }

  /**
   * A record already published: mounted in this run (nothing to do), or from
   * before a restart — then is the mount still there? A mount table that
   * cannot be read just now is read again, never taken for "gone". Undefined
   * when the steps must run — always while an unmount attempt is under way
   * (it may take the target down after any check; the steps queue behind it).
   */
  private async stillMounted(key: string, signal: AbortSignal | undefined): Promise<MountedVolumeInfo | undefined> {
    const record = this.wanted(key);
    if (!record.published || record.targetPath === undefined || this.downs.has(key)) return undefined;
    if (this.verified.has(key)) return this.info(record, false);
    const target = record.targetPath;
    const live = await isMountPointRetrying(this.mountTable, target, {
      clock: this.clock,
      signal,
      onFault: (err, attempt, delayMs) =>
        this.log.warn('cannot read the mount table for a fault of the agent itself; checking again', { alloc_id: record.allocId, volume_id: record.volumeId, target, attempt, delay_ms: delayMs, error: errorMessage(err) }),
    });
    if (!live) {
      this.log.warn('volume mount gone after restore; mounting again', { alloc_id: record.allocId, volume: record.name, volume_id: record.volumeId });
      return undefined;
    }
    this.verified.add(key);
    this.log.info('volume still mounted after restore', { alloc_id: record.allocId, volume: record.name, volume_id: record.volumeId, target });
    return this.info(this.wanted(key), true);
  }

  /** The claim step. The catalog grants the same claim again as it stands (a retried mount, a mount gone after a restart). */
  private async claim(key: string, signal: AbortSignal | undefined): Promise<void> {
    if (this.stopped) throw new ReconcilerStoppedError();
    const record = this.update(key, { claimed: true });
    const claim = await this.claimer.claim(
      { volumeId: record.volumeId, allocId: record.allocId, readOnly: record.usage.readOnly, accessMode: record.usage.accessMode, attachmentMode: record.usage.attachmentMode },
      { signal },
    );
    this.volumes.set(key, claim.volume);
    this.update(key, { publishContext: claim.publishContext, externalId: claim.volume.externalId || claim.volume.id });
  }

  /** Stage (when the plugin stages) and publish; runs under the volume's queue. */
  private async nodeSteps(key: string, signal: AbortSignal | undefined): Promise<MountedVolumeInfo> {
    if (this.stopped) throw new ReconcilerStoppedError();
    let record = this.wanted(key);
    const volume = ref(record, this.volumes.get(key));
    const vm = this.csi.volumeManager(record.pluginId);
    const publishContext = record.publishContext ?? {};
    if (await vm.requiresStaging({ signal })) {
      if (!this.wanted(key).staged) record = this.update(key, { staged: true });
      await vm.stageVolume(volume, record.usage, publishContext, { signal });
    }
    this.wanted(key);
    record = this.update(key, { published: true });
    const info = await vm.publishVolume(volume, record.allocId, record.usage, publishContext, { signal });
    record = this.update(key, { targetPath: info.targetPath, stagingPath: info.stagingPath, attempts: 0, lastError: undefined });
    this.verified.add(key);
    return this.info(this.wanted(key), false);
  }

  /** A mount that failed or was abandoned: want it unmounted, try that once now, keep retrying in the background. */
  private async giveUp(key: string, cause: unknown): Promise<void> {
    const record = this.records.get(key);
    if (!record) return;
    this.verified.delete(key);
    try {
      // Nothing done, nothing to undo: forgotten now, not queued behind another alloc's step on the volume.
      if (!holdsAnything(record)) return this.forget(key);
      if (record.desired === 'mounted') this.update(key, { desired: 'unmounted', attempts: 0, lastError: errorMessage(cause), since: this.clock.now() });
    } catch (err) {
      // The mount still fails with its own cause; the record keeps what was done, for the alloc's unmount to undo.
      this.log.error('could not record that a failed mount is to be undone; it is undone when its alloc unmounts', { alloc_id: record.allocId, volume_id: record.volumeId, error: errorMessage(err) });
      return;
    }
    const outcome = await this.attemptDown(key);
    if (outcome?.error !== undefined) {
      this.log.error('could not undo a failed mount; retrying in the background', { alloc_id: record.allocId, volume_id: record.volumeId, error: errorMessage(outcome.error) });
    }
  }

  // ---- unmount ------------------------------------------------------------------

  /**
   * Wants the alloc's volumes (those named, or all) unmounted and makes one
   * attempt at each, in parallel. Resolves with how each went; one that
   * failed stays desired unmounted and is retried with the policy's backoff,
   * and at once when its plugin turns healthy, until it is done.
   */
  async unmount(allocId: string, names?: readonly string[]): Promise<UnmountOutcome[]> {
    const keys = [...this.records.values()].filter((r) => r.allocId === allocId && (names === undefined || names.includes(r.name))).map((r) => mountKey(r.allocId, r.name));
    const outcomes = await Promise.all(
      keys.map(async (key) => {
        // From here on the mount may be half gone: a later mount checks the mount table again.
        this.verified.delete(key);
        const record = this.records.get(key)!;
        if (record.desired === 'mounted') {
          try {
            this.update(key, { desired: 'unmounted', attempts: 0, lastError: undefined, since: this.clock.now() });
          } catch (err) {
            // Not written, but still wanted: unmounted in memory and retried (each retry writes the record again).
            this.records.set(key, { ...record, desired: 'unmounted', attempts: 0, since: this.clock.now() });
            this.log.error('could not record that a volume is to be unmounted; retrying in the background', { alloc_id: allocId, volume_id: record.volumeId, error: errorMessage(err) });
            this.scheduleRetry(record.volumeId, this.timeouts.unmountBackoff(1));
            return { name: record.name, volumeId: record.volumeId, pluginId: record.pluginId, error: err } satisfies UnmountOutcome;
          }
        }
        return this.attemptDown(key);
      }),
    );
    return outcomes.filter((o): o is UnmountOutcome => o !== undefined);
  }

  /**
   * One attempt at a record's unmount steps, under its volume's queue; a
   * failure schedules the next. An attempt already under way for the record
   * is joined, not repeated.
   */
  private attemptDown(key: string): Promise<UnmountOutcome | undefined> {
    const running = this.downs.get(key);
    if (running) return running;
    const attempt = this.runAttemptDown(key).finally(() => this.downs.delete(key));
    this.downs.set(key, attempt);
    return attempt;
  }

  private async runAttemptDown(key: string): Promise<UnmountOutcome | undefined> {
    const first = this.records.get(key);
    if (!first) return undefined;
    const outcome: UnmountOutcome = { name: first.name, volumeId: first.volumeId, pluginId: first.pluginId };
    try {
      await this.queue.run(first.volumeId, () => this.bringDown(key));
    } catch (err) {
      outcome.error = err;
      const record = this.records.get(key);
      if (record && record.desired === 'unmounted') {
        let next: VolumeMountRecord = { ...record, attempts: record.attempts + 1, lastError: errorMessage(err) };
        try {
          next = this.update(key, { attempts: next.attempts, lastError: next.lastError });
        } catch (writeErr) {
          // Counting the attempt is bookkeeping: a store that refuses it must not stop the retries
          // (nor, from a retry timer, escape as an unhandled rejection).
          this.records.set(key, next);
          this.log.error('could not record a failed unmount attempt in the state; retrying anyway', { alloc_id: record.allocId, volume_id: record.volumeId, error: errorMessage(writeErr) });
        }
        const overdue = this.clock.now() - record.since > this.timeouts.pluginWait('postrun');
        const fields = { alloc_id: next.allocId, volume_id: next.volumeId, plugin_id: next.pluginId, attempts: next.attempts, error: errorMessage(err) };
        if (overdue) this.log.error(`unmount still failing after ${formatDuration(this.timeouts.pluginWait('postrun'))}; still retrying`, fields);
        else this.log.warn('unmount failed; retrying in the background', fields);
        this.scheduleRetry(next.volumeId, this.timeouts.unmountBackoff(next.attempts));
      }
    }
    return outcome;
  }

  /**
   * The unmount steps of one record; runs under its volume's queue. Each
   * step's result is written as soon as it returns; if the record is wanted
   * mounted again meanwhile (an alloc restoring), the rest is left to its mount.
   */
  private async bringDown(key: string): Promise<void> {
    const stillUnwanted = () => {
      const r = this.records.get(key);
      return r && r.desired === 'unmounted' ? r : undefined;
    };
    let record = stillUnwanted();
    if (!record) return;
    const volume = ref(record, this.volumes.get(key));
    if (record.published) {
      await this.csi.volumeManager(record.pluginId).unpublishVolume(volume, record.allocId, record.usage);
      this.update(key, { published: false, targetPath: undefined });
      record = stillUnwanted();
      if (!record) return;
    }
    if (record.staged) {
      // Only the last user of the staging path unstages; the others just stop counting.
      const mine = stagingKey(record);
      const others = [...this.records.entries()].filter(([k, r]) => k !== key && r.staged && stagingKey(r) === mine);
      if (others.length === 0) await this.csi.volumeManager(record.pluginId).unstageVolume(volume, record.usage);
      this.update(key, { staged: false, stagingPath: undefined });
      record = stillUnwanted();
      if (!record) return;
    }
    if (record.claimed) {
      await this.claimer.release(record.volumeId, record.allocId);
      this.update(key, { claimed: false, publishContext: undefined });
      record = stillUnwanted();
      if (!record) return;
    }
    this.forget(key);
    this.log.info('volume unmounted and released', { alloc_id: record.allocId, volume: record.name, volume_id: record.volumeId, attempts: record.attempts + 1 });
  }

  // ---- helpers ------------------------------------------------------------------

  /** The volumes with records of (plugin) left to unmount. */
  private volumesToUnmount(pluginId?: string): string[] {
    const ids = new Set<string>();
    for (const r of this.records.values()) if (r.desired === 'unmounted' && (pluginId === undefined || r.pluginId === pluginId)) ids.add(r.volumeId);
    return [...ids];
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
    if (record.desired !== 'mounted') throw new AbortError(`volume "${record.name}" of alloc ${record.allocId} was unmounted while it was being mounted`);
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
  }

  private info(record: VolumeMountRecord, restored: boolean): MountedVolumeInfo {
    const info: MountedVolumeInfo = {
      name: record.name,
      volumeId: record.volumeId,
      pluginId: record.pluginId,
      targetPath: record.targetPath!,
      readOnly: record.usage.readOnly,
      restored,
    };
    if (record.stagingPath) info.stagingPath = record.stagingPath;
    return info;
  }
}
