// MountChecker: the volume reconciler's look at live mounts after their node
// plugin comes back — restarted, upgraded (a new instance under the same
// name), or found again after an agent restart. A FUSE- or network-backed
// mount goes stale when the process serving it dies (ENOTCONN, ESTALE) while
// the workload keeps running on a dead path (nomad#27666, kubernetes#70013),
// so every mount published through the plugin is looked at:
//
//   - the target answers a stat within MOUNT_STAT_LIMIT_MS of the probe's
//     start (a stat of a dead network mount can hang: the table runs it in a
//     child process killed at the limit, a few at once, so a hung mount never
//     holds a thread of Node's pool; a probe that could not start says
//     nothing and is not taken as stale; a path whose probe hung stays hung
//     until a later probe answers, and one whose probe has not settled is
//     not probed again); the targets are stat'ed all at once, STATS_AT_ONCE
//     at a time (the table runs a turn's stats in one child process);
//   - it is still a mount point.
//
// Only those prove a mount broken: a stat that hangs or answers ENOTCONN or
// ESTALE (the serving end is gone), or a path no longer mounted. EIO and
// ENOENT prove nothing of the mount (a read error of one file, a path
// removed under a mount still there: the mount table says which) and are
// logged, not taken as stale. When the plugin offers GET_VOLUME_STATS, its
// NodeGetVolumeStats condition of a mount that answers is asked too
// (CONDITIONS_AT_ONCE calls at a time) and, when abnormal, reported (an
// `abnormal` event, `volume status`, a metric) — never acted on: a plugin's
// condition alone never unmounts a live mount under its workload, as in
// Kubernetes and Nomad, which only report it. Plugins get it wrong:
// csi-driver-host-path calls every mount outside kubelet's pod directories
// abnormal ("The volume isn't mounted"), and a remount for that took a
// healthy mount down under a writing workload, losing its writes.
//
// A mount proven broken is handled by its record's policy: `remount` (the
// default: the mount is dead already, its workload's I/O fails until it is
// mounted again, so the reconciler takes it down and up again through the
// current plugin, its staging mount too when that is broken and no one else
// uses it), `restart` (remount, then the alloc's tasks restart), `keep`
// (report only). Every finding is an event (the csi hook turns it into a
// task event) and a log line. A remount that fails is tried again after a
// backoff and when the plugin is next back — except one whose unpublish the
// plugin refused because the target is busy (a process still holds files on
// it): that is reported (`remount-busy`) and left as it is, never forced,
// until the plugin is next back or the agent restarts.
import { type Disposable, errorMessage, formatDuration, type Clock, type Logger, type TimeoutPolicy } from '@csiplug/core';
import {
  MountProbeHungError,
  MountProbeNotStartedError,
  isMountPointRetrying,
  type CSIManager,
  type MountTable,
  type PluginReady,
  type PluginRetired,
} from '@csiplug/csimanager';
import { PluginTypeCSINode } from '@csiplug/registry';
import { ClaimError } from '../catalog/volume-claimer';
import { RemountBusyError } from './errors';
import { remountIntentOf, stagingKey, stalePolicyOf, type StaleMountPolicy, type VolumeMountRecord } from './mount-record';
import type { LiveMountEvent, LiveMountEventKind } from './reconciler-service';

/** How long a target (or staging path) has to answer a stat before it counts as hung. */
export const MOUNT_STAT_LIMIT_MS = 5_000;

/** How long after a replaced plugin alloc went away its mounts are looked at again (its process may still be exiting). */
export const RETIRED_CHECK_GRACE_MS = 2_000;

/** Targets stat'ed at once by one check (no more than the mount table queues). */
export const STATS_AT_ONCE = 256;

/** NodeGetVolumeStats calls at once by one check. */
export const CONDITIONS_AT_ONCE = 8;

/**
 * Errors of a stat that prove the mount dead: its serving end is gone. Others
 * are logged, not taken as stale — EIO (one read failed; the mount may serve
 * the next), ENOENT (the path is gone: the mount table says whether a mount
 * is still there), an agent's own EMFILE.
 */
const STALE_STAT_CODES: ReadonlySet<string> = new Set(['ENOTCONN', 'ESTALE']);

/** What the checker needs of the reconciler, which owns the records, the queue and the steps. */
export interface MountCheckHost {
  /** The records of node plugin `pluginId` to look at: wanted mounted, attached to a live alloc in this run (restored or mounted), no unmount under way. */
  attached(pluginId: string): ReadonlyArray<readonly [string, VolumeMountRecord]>;
  /**
   * Takes the mounts of `keys` (all of one volume) down and up again through
   * the plugin's current instance, under the volume's queue; the staging
   * mounts named in `restage` (by stagingKey) are unstaged and staged again,
   * every other record wanted mounted on them taken along (in `extra`).
   * Resolves with the keys mounted
   * again and those that failed, with why; a key in neither was unmounted
   * meanwhile and is its unmount's business.
   */
  remount(volumeId: string, keys: readonly string[], restage: ReadonlySet<string>): Promise<RemountOutcome>;
  /** A remount of `key` was reported: its persisted intent is cleared. */
  remountReported(key: string): void;
  emit(event: LiveMountEvent): void;
}

export interface RemountOutcome {
  done: Set<string>;
  failed: Map<string, unknown>;
  /** Records not in the keys asked for that were remounted with them (other users of a staging mount staged again), as they were before. */
  extra?: Map<string, VolumeMountRecord>;
}

export interface MountCheckerDeps {
  csi: CSIManager;
  mountTable: MountTable;
  clock: Clock;
  timeouts: TimeoutPolicy;
  log: Logger;
}

const policyOf = (r: VolumeMountRecord): StaleMountPolicy => stalePolicyOf(r);
/** Whether a remount of the record ends with its tasks restarted: its policy, or the intent a remount already under way recorded. */
const restartsTasks = (r: VolumeMountRecord) => policyOf(r) === 'restart' || remountIntentOf(r) === 'restart';
const label = (r: VolumeMountRecord) => `volume "${r.name}" (${r.volumeId})`;

export class MountChecker implements Disposable {
  /** Per plugin: how many times it became ready; a record checked at the current count needs no new look. */
  private readonly generation = new Map<string, number>();
  private readonly checkedAt = new Map<string, number>();
  /** Per plugin: the check under way, and whether another was asked for meanwhile (with its announcement). */
  private readonly running = new Map<string, Promise<void>>();
  private readonly again = new Map<string, string | undefined>();
  /** Paths whose stat has not returned yet. */
  private readonly hanging = new Set<string>();
  /** Paths whose last probe that started did not answer in time: hung until a later probe answers. */
  private readonly hung = new Set<string>();
  private readonly retries = new Map<string, { attempt: number; timer?: Disposable }>();
  private readonly stop = new AbortController();
  /** Per plugin: the look after a replaced alloc went away, due soon. */
  private readonly retiredTimers = new Map<string, Disposable>();

  constructor(
    private readonly deps: MountCheckerDeps,
    private readonly host: MountCheckHost,
  ) {}

  /** A node plugin serves again: every attached mount through it is looked at now. */
  pluginReady(e: PluginReady): void {
    const id = e.info.name;
    this.generation.set(id, this.gen(id) + 1);
    this.retries.get(id)?.timer?.dispose();
    const why = e.replaced
      ? `a new instance, alloc ${e.info.allocId}, replacing alloc ${e.replaced.allocId}`
      : e.cause === 'recovered'
        ? `healthy again, alloc ${e.info.allocId}`
        : `alloc ${e.info.allocId}`;
    void this.check(id, `plugin ${id} is back (${why})`);
  }

  /**
   * The alloc a serving plugin instance replaced went away after the swap
   * (create-before-destroy): mounts its process served (FUSE, network) go
   * stale now, so every attached mount through the plugin is looked at
   * again, RETIRED_CHECK_GRACE_MS later (its process may still be exiting).
   */
  pluginRetired(e: PluginRetired): void {
    const id = e.info.name;
    this.retiredTimers.get(id)?.dispose();
    this.retiredTimers.set(
      id,
      this.deps.clock.setTimeout(() => {
        this.retiredTimers.delete(id);
        if (this.stopped) return;
        this.generation.set(id, this.gen(id) + 1);
        void this.check(
          id,
          `plugin ${id}: alloc ${e.retired.allocId}, which alloc ${e.info.allocId} replaced, went away (what it served may be stale)`,
        );
      }, RETIRED_CHECK_GRACE_MS),
    );
  }

  /** A restored mount was kept: looked at now when its plugin serves (else when it is back). */
  restored(record: VolumeMountRecord): void {
    if (this.healthy(record.pluginId)) void this.check(record.pluginId);
  }

  /** How many times the plugin became ready: read at the start of a mount's steps, and handed to fresh() at their end. */
  generationOf(pluginId: string): number {
    return this.gen(pluginId);
  }

  /**
   * A mount made (or made again) in this run, by steps that started at
   * `generation`, needs no look until its plugin next comes back: a bounce
   * during the steps is a newer generation, and the mount is looked at then.
   * A newer stamp is never overwritten.
   */
  fresh(key: string, generation: number): void {
    if ((this.checkedAt.get(key) ?? -1) < generation) this.checkedAt.set(key, generation);
  }

  /** The record is gone or being unmounted: nothing more to remember of it. */
  forget(key: string): void {
    this.checkedAt.delete(key);
  }

  dispose(): void {
    this.stop.abort();
    for (const r of this.retries.values()) r.timer?.dispose();
    this.retries.clear();
    for (const t of this.retiredTimers.values()) t.dispose();
    this.retiredTimers.clear();
  }

  private get stopped(): boolean {
    return this.stop.signal.aborted;
  }

  private gen(pluginId: string): number {
    return this.generation.get(pluginId) ?? 0;
  }

  private healthy(pluginId: string): boolean {
    return this.deps.csi.pluginInfo(PluginTypeCSINode, pluginId)?.healthy === true;
  }

  /** Checks the plugin's attached mounts not checked since it last came back; one run per plugin at a time, a request meanwhile runs after it. */
  private check(pluginId: string, announce?: string): Promise<void> {
    if (this.stopped) return Promise.resolve();
    const running = this.running.get(pluginId);
    if (running) {
      if (announce !== undefined || !this.again.has(pluginId)) this.again.set(pluginId, announce);
      return running;
    }
    const run = this.run(pluginId, announce)
      .catch((err: unknown) =>
        this.deps.log.error('checking the live mounts of a plugin failed; they are checked again when it is next back', {
          plugin_id: pluginId,
          error: errorMessage(err),
        }),
      )
      .finally(() => {
        this.running.delete(pluginId);
        if (!this.again.has(pluginId)) return;
        const next = this.again.get(pluginId);
        this.again.delete(pluginId);
        void this.check(pluginId, next);
      });
    this.running.set(pluginId, run);
    return run;
  }

  private async run(pluginId: string, announce: string | undefined): Promise<void> {
    const gen = this.gen(pluginId);
    const records = this.host.attached(pluginId).filter(([key]) => this.checkedAt.get(key) !== gen);
    if (records.length === 0) return;
    for (const [key] of records) this.checkedAt.set(key, gen);
    if (announce)
      for (const [, r] of records) this.report('plugin-back', r, `${announce}; checking ${label(r)} at ${r.targetPath ?? 'its target'}`);

    const problems = new Map<string, string>();
    /** Mounts that answer, but that the plugin calls abnormal: what it says, for their event (reported, never acted on). */
    const abnormal = new Map<string, string>();
    /** Mounts that answer, but whose condition the plugin could not tell: why, for their event. */
    const unread = new Map<string, string>();
    // Every target's stat and mount-table entry at once (the table stats a
    // turn's paths in one child process and shares its reads)...
    const answered: (readonly [string, VolumeMountRecord])[] = [];
    for (let i = 0; i < records.length && !this.stopped; i += STATS_AT_ONCE) {
      const slice = records.slice(i, i + STATS_AT_ONCE);
      const found = await Promise.all(slice.map(([, r]) => this.probeTarget(r)));
      slice.forEach((entry, j) => (found[j] !== undefined ? problems.set(entry[0], found[j]!) : answered.push(entry)));
    }
    // ...then the plugin's word on the ones that answered, a few calls at a time.
    let next = 0;
    const worker = async () => {
      while (next < answered.length && !this.stopped) {
        const [key, r] = answered[next++]!;
        const said = await this.probeCondition(r, (why) => unread.set(key, why));
        if (said) abnormal.set(key, said);
      }
    };
    await Promise.all(Array.from({ length: Math.min(CONDITIONS_AT_ONCE, answered.length) }, worker));
    const byVolume = new Map<string, (readonly [string, VolumeMountRecord])[]>();
    for (const entry of records) byVolume.set(entry[1].volumeId, [...(byVolume.get(entry[1].volumeId) ?? []), entry]);
    const outcomes = await Promise.all(
      [...byVolume].map(([volumeId, group]) => this.handleVolume(volumeId, group, problems, abnormal, unread)),
    );
    if (this.stopped) return;
    if (outcomes.some((failed) => failed)) this.scheduleRetry(pluginId);
    else this.retries.delete(pluginId);
  }

  /** Reports what was found of one volume's mounts and remounts the stale ones its policy allows; true when a remount failed. */
  private async handleVolume(
    volumeId: string,
    group: (readonly [string, VolumeMountRecord])[],
    problems: Map<string, string>,
    abnormal: ReadonlyMap<string, string>,
    unread: ReadonlyMap<string, string>,
  ): Promise<boolean> {
    const toRemount = new Set<string>();
    const restage = new Set<string>();
    /** Stale keys that cannot be remounted now, with why. */
    const blocked = new Map<string, string>();
    const byStaging = new Map<string, (readonly [string, VolumeMountRecord])[]>();
    for (const entry of group) byStaging.set(stagingKey(entry[1]), [...(byStaging.get(stagingKey(entry[1])) ?? []), entry]);
    for (const [staging, users] of byStaging) {
      const stale = users.filter(([key]) => problems.has(key));
      const first = stale[0]?.[1];
      if (!first) continue;
      // The targets are bind mounts of the staging mount: when it is stale too, every user of it comes down with it.
      const stagingProblem = first.staged && first.stagingPath ? await this.probeStaging(first) : undefined;
      if (stagingProblem) {
        const keepers = users.filter(([, r]) => policyOf(r) === 'keep' && r.remounting === undefined);
        if (keepers.length === 0) {
          restage.add(staging);
          for (const [key] of users) {
            if (!problems.has(key)) problems.set(key, `its staging mount ${first.stagingPath} is stale: ${stagingProblem}`);
            toRemount.add(key);
          }
        } else {
          // Publishing again from a stale staging mount mends nothing: the others are reported stale, not remounted.
          const keptFor = keepers.map(([, r]) => r.allocId);
          this.deps.log.warn('a staging mount is stale, but is kept for an alloc whose policy is "keep"; its other users stay stale', {
            volume_id: volumeId,
            staging_path: first.stagingPath,
            problem: stagingProblem,
            kept_for: keptFor,
          });
          for (const [key, r] of users) {
            if (policyOf(r) === 'keep') {
              if (!problems.has(key)) problems.set(key, `its staging mount ${first.stagingPath} is stale: ${stagingProblem}`);
              continue;
            }
            blocked.set(
              key,
              `its staging mount ${first.stagingPath} is stale (${stagingProblem}) and is kept for alloc ${keptFor.join(', ')} (on_stale_mount = "keep"), so it cannot be staged again`,
            );
            if (!problems.has(key)) problems.set(key, `its staging mount ${first.stagingPath} is stale: ${stagingProblem}`);
          }
          continue;
        }
      }
      for (const [key, r] of stale) if (policyOf(r) !== 'keep' || r.remounting !== undefined) toRemount.add(key);
    }
    for (const [key, r] of group) {
      const problem = problems.get(key);
      if (problem === undefined) {
        const said = abnormal.get(key);
        if (said !== undefined) {
          this.deps.log.warn(
            'a node plugin reports a live volume mount abnormal; it answers every check of its own, so it is kept as it is',
            { alloc_id: r.allocId, volume: r.name, volume_id: r.volumeId, plugin_id: r.pluginId, target: r.targetPath, condition: said },
          );
          this.report(
            'abnormal',
            r,
            `${label(r)} at ${r.targetPath} answers, but ${said}; kept as it is (a plugin's condition alone never unmounts a live mount: if the volume is broken, restart the alloc)`,
          );
          continue;
        }
        const why = unread.get(key);
        this.report(
          'checked',
          r,
          `${label(r)} at ${r.targetPath} answers; kept as it is${why !== undefined ? ` (plugin ${r.pluginId} could not tell its condition: ${why})` : ''}`,
        );
        continue;
      }
      const why = blocked.get(key);
      const action =
        why !== undefined
          ? `not remounted: ${why}; its tasks see a broken path until the alloc is restarted`
          : !toRemount.has(key)
            ? 'kept as it is (on_stale_mount = "keep"): its tasks see a broken path until the alloc is restarted'
            : `remounting it through plugin ${r.pluginId}${restartsTasks(r) ? ", then restarting the alloc's tasks" : ''}`;
      this.deps.log.warn('a live volume mount is stale', {
        alloc_id: r.allocId,
        volume: r.name,
        volume_id: r.volumeId,
        plugin_id: r.pluginId,
        target: r.targetPath,
        problem,
        policy: policyOf(r),
      });
      this.report('stale', r, `${label(r)} at ${r.targetPath ?? 'its target'} is stale: ${problem}; ${action}`);
    }
    if (toRemount.size === 0 || this.stopped) return false;

    const keys = [...toRemount];
    let outcome: RemountOutcome;
    try {
      outcome = await this.host.remount(volumeId, keys, restage);
    } catch (err) {
      outcome = { done: new Set(), failed: new Map(keys.map((k) => [k, err])) };
    }
    const { done, failed } = outcome;
    for (const [key, r] of [...group, ...(outcome.extra ?? new Map<string, VolumeMountRecord>())]) {
      if (done.has(key)) {
        // A stat still hung on the old mount says nothing of the new one.
        for (const p of [r.targetPath, r.stagingPath && restage.has(stagingKey(r)) ? r.stagingPath : undefined]) {
          if (p === undefined) continue;
          this.hanging.delete(p);
          this.hung.delete(p);
        }
        this.deps.log.info('a stale volume mount was remounted', {
          alloc_id: r.allocId,
          volume: r.name,
          volume_id: r.volumeId,
          plugin_id: r.pluginId,
          target: r.targetPath,
        });
        const restart = restartsTasks(r);
        const along = outcome.extra?.has(key) ? ` (with the other users of its stale staging mount ${r.stagingPath ?? ''})` : '';
        this.report(
          'remounted',
          r,
          `${label(r)} staged and published again at ${r.targetPath} through plugin ${r.pluginId}${along}${restart ? "; restarting the alloc's tasks so they see it" : ''}`,
          restart,
        );
        this.host.remountReported(key);
      } else if (failed.get(key) instanceof RemountBusyError) {
        // Never forced: left as it is, and not tried again until the plugin is next back (its checkedAt stays).
        const err = failed.get(key);
        this.deps.log.warn('a broken volume mount is in use and was not remounted; it is left as it is', {
          alloc_id: r.allocId,
          volume: r.name,
          volume_id: r.volumeId,
          plugin_id: r.pluginId,
          target: r.targetPath,
          error: errorMessage(err),
        });
        this.report(
          'remount-busy',
          r,
          `${label(r)} is stale, but its target ${r.targetPath ?? ''} is in use (${errorMessage(err)}); left as it is, not forced: stop what holds it (or restart the alloc), it is checked again when plugin ${r.pluginId} is next back`,
        );
      } else if (failed.has(key)) {
        const err = failed.get(key);
        // Looked at again on the retry, whatever generation the plugin is at.
        this.checkedAt.delete(key);
        // Not allowed yet (a cluster node not settled since it joined) is a wait, not a failure of the plugin.
        const waiting = err instanceof ClaimError && err.retryable;
        this.deps.log[waiting ? 'info' : 'error'](
          'a stale volume mount could not be remounted; trying again after a backoff and when its plugin is next back',
          { alloc_id: r.allocId, volume: r.name, volume_id: r.volumeId, plugin_id: r.pluginId, error: errorMessage(err) },
        );
        this.report(
          'remount-failed',
          r,
          `${label(r)} is stale and could not be remounted: ${errorMessage(err)}; trying again after a backoff and when plugin ${r.pluginId} is next back`,
        );
      }
    }
    return [...failed.values()].some((err) => !(err instanceof RemountBusyError));
  }

  /** Why the record's target is stale, or undefined when it answers. */
  /** A problem of the target mount seen without the plugin (its remount intent, a stat, the mount table), or undefined. */
  private async probeTarget(r: VolumeMountRecord): Promise<string | undefined> {
    if (r.remounting !== undefined) return 'a remount of it was started and did not finish';
    if (!r.published || r.targetPath === undefined) return 'it is not mounted (an earlier remount did not finish)';
    return this.probePath(r.targetPath, r);
  }

  /** The staging mount by csiplug's own checks only (stat, mount table): the plugin's condition of it is not asked, it never unmounts anything. */
  private async probeStaging(r: VolumeMountRecord): Promise<string | undefined> {
    return this.probePath(r.stagingPath!, r);
  }

  /** A stat within the bound, then the mount table. */
  private async probePath(p: string, r: VolumeMountRecord): Promise<string | undefined> {
    const stat = await this.statWithin(p, r);
    if (stat) return stat;
    try {
      const mounted = await isMountPointRetrying(this.deps.mountTable, p, {
        clock: this.deps.clock,
        signal: this.stop.signal,
        onFault: (err, attempt, delayMs) =>
          this.deps.log.warn('cannot read the mount table for a fault of the agent itself; checking again', {
            target: p,
            attempt,
            delay_ms: delayMs,
            error: errorMessage(err),
          }),
      });
      return mounted ? undefined : `${p} is no longer a mount point`;
    } catch (err) {
      if (!this.stopped)
        this.deps.log.warn('could not read the mount table to check a live mount; not taken as stale', {
          alloc_id: r.allocId,
          volume_id: r.volumeId,
          target: p,
          error: errorMessage(err),
        });
      return undefined;
    }
  }

  /**
   * A stat of `p` within MOUNT_STAT_LIMIT_MS of its start (the table runs it
   * in a child process, at most a few at once; time spent queued for a slot
   * is not counted). A path whose earlier probe hung stays hung until a
   * later probe answers; one whose earlier probe has not settled is not
   * probed again. A probe that could not start says nothing: not stale.
   */
  private async statWithin(p: string, r: VolumeMountRecord): Promise<string | undefined> {
    if (this.hanging.has(p)) return `a stat of ${p} from an earlier check has not returned (the mount hangs)`;
    this.hanging.add(p);
    let timer: Disposable | undefined;
    /** Set once this stat is answered: a late onStarted starts no timer. */
    let done = false;
    let hungAnswer!: (v: string) => void;
    const limit = new Promise<string>((resolve) => (hungAnswer = resolve));
    const hungMessage = `${p} did not answer a stat within ${formatDuration(MOUNT_STAT_LIMIT_MS)} (the mount hangs)`;
    const stat = this.deps.mountTable
      .stat(p, {
        limitMs: MOUNT_STAT_LIMIT_MS,
        onStarted: () => {
          if (done) return;
          // Started again (a batched stat the table asks again on its own): the limit counts from the new start.
          timer?.dispose();
          // At the limit, one more turn of the loop first: an answer that came while the agent was busy past the limit is heard before the mount is called hung.
          timer = this.deps.clock.setTimeout(
            () => (timer = this.deps.clock.setTimeout(() => hungAnswer(hungMessage), 0)),
            MOUNT_STAT_LIMIT_MS,
          );
        },
      })
      .then(
        () => {
          this.hanging.delete(p);
          this.hung.delete(p);
          return undefined;
        },
        (err: unknown) => {
          this.hanging.delete(p);
          if (err instanceof MountProbeNotStartedError) {
            this.deps.log.warn('could not start a stat of a live mount; nothing is known of it, so it is not taken as stale', {
              alloc_id: r.allocId,
              volume_id: r.volumeId,
              target: p,
              error: errorMessage(err),
            });
            return this.hung.has(p) ? `an earlier stat of ${p} hung and no later one has answered` : undefined;
          }
          if (err instanceof MountProbeHungError) {
            this.hung.add(p);
            return err.message;
          }
          this.hung.delete(p);
          const code = (err as NodeJS.ErrnoException).code;
          if (code !== undefined && STALE_STAT_CODES.has(code)) return `${p} does not answer a stat (${code})`;
          this.deps.log.warn('could not stat a live mount for a reason that does not say it is dead; not taken as stale', {
            alloc_id: r.allocId,
            volume_id: r.volumeId,
            target: p,
            error: errorMessage(err),
          });
          return undefined;
        },
      );
    try {
      const answer = await Promise.race([stat, limit]);
      if (answer === hungMessage) this.hung.add(p);
      return answer;
    } finally {
      done = true;
      timer?.dispose();
    }
  }

  /** What NodeGetVolumeStats says of the target, when the plugin offers it: the plugin's word that it is abnormal, or undefined. */
  private async probeCondition(r: VolumeMountRecord, unread?: (why: string) => void): Promise<string | undefined> {
    const where = r.targetPath;
    try {
      const vm = this.deps.csi.volumeManager(r.pluginId);
      const condition = await vm.volumeCondition(
        { id: r.volumeId, externalId: r.externalId, pluginId: r.pluginId },
        r.allocId,
        r.usage,
        'target',
        { signal: this.stop.signal, ...(where !== undefined ? { hostPath: where } : {}) },
      );
      if (condition?.abnormal)
        return `plugin ${r.pluginId} reports the volume abnormal at ${where}${condition.message ? `: ${condition.message}` : ''}`;
    } catch (err) {
      if (!this.stopped) {
        this.deps.log.warn('could not read the volume condition; the mount itself answers, so it is kept', {
          alloc_id: r.allocId,
          volume_id: r.volumeId,
          plugin_id: r.pluginId,
          path: where,
          error: errorMessage(err),
        });
        unread?.(errorMessage(err));
      }
    }
    return undefined;
  }

  private scheduleRetry(pluginId: string): void {
    const retry = this.retries.get(pluginId) ?? { attempt: 0 };
    retry.attempt++;
    retry.timer?.dispose();
    retry.timer = this.deps.clock.setTimeout(() => {
      retry.timer = undefined;
      // A plugin away again is checked when it is back, not now.
      if (!this.stopped && this.healthy(pluginId)) void this.check(pluginId);
    }, this.deps.timeouts.unmountBackoff(retry.attempt));
    this.retries.set(pluginId, retry);
  }

  private report(kind: LiveMountEventKind, r: VolumeMountRecord, message: string, restartTasks = false): void {
    this.host.emit({
      kind,
      allocId: r.allocId,
      name: r.name,
      volumeId: r.volumeId,
      pluginId: r.pluginId,
      ...(r.targetPath !== undefined ? { targetPath: r.targetPath } : {}),
      policy: policyOf(r),
      message,
      ...(restartTasks ? { restartTasks: true } : {}),
      time: this.deps.clock.now(),
    });
  }
}
