// The volume reconciler's unmount path: want an alloc's volumes unmounted,
// wait (the postrun limit) for a node plugin that is away, then one attempt
// at each record's steps — unpublish, unstage (only the last user of the
// staging path), release the claim, forget — each step's result written as
// soon as its call returns, so a crash anywhere resumes from the records. A
// failed attempt stays desired unmounted and is retried with the policy's
// backoff by the reconciler, across agent restarts.
import { crashPoint, errorMessage, formatDuration, ShutdownError, type Clock, type Logger, type TimeoutPolicy } from '@csiplug/core';
import type { CSIManager, KeyedMutex } from '@csiplug/csimanager';
import { PluginTypeCSINode } from '@csiplug/registry';
import type { ClaimableVolume, VolumeClaimer } from '../catalog/volume-claimer';
import { mountKey, stagingKey, type VolumeMountRecord } from './mount-record';
import type { UnmountOptions, UnmountOutcome } from './reconciler-service';
import { volumeRef as ref } from './record-views';

/** What the unmount path needs of the reconciler: its records, queue and writes, and its retries. */
export interface UnmountHost {
  /** The records by key; set directly only when a write failed (kept in memory, retried). */
  readonly records: Map<string, VolumeMountRecord>;
  /** Records whose mount was checked against the mount table in this run. */
  readonly verified: Set<string>;
  readonly volumes: ReadonlyMap<string, ClaimableVolume>;
  readonly queue: KeyedMutex;
  readonly csi: CSIManager;
  readonly claimer: VolumeClaimer;
  readonly clock: Clock;
  readonly timeouts: TimeoutPolicy;
  readonly log: Logger;
  /** Aborted when the reconciler is disposed: no CSI step after that. */
  readonly stopping: AbortSignal;
  stopped(): boolean;
  /** Applies a change to a record and writes it through (the reconciler's update). */
  update(key: string, change: Partial<VolumeMountRecord>): VolumeMountRecord;
  /** Drops a record that holds nothing. */
  forget(key: string): void;
  scheduleRetry(volumeId: string, delayMs: number): void;
  /** One attempt at a record's unmount steps, joined when one is under way. */
  attemptDown(key: string): Promise<UnmountOutcome | undefined>;
  pluginAway(pluginId: string): boolean;
}

/**
 * Wants the alloc's volumes (those named, or all) unmounted and makes one
 * attempt at each, in parallel. Resolves with how each went; one that
 * failed stays desired unmounted and is retried with the policy's backoff,
 * and at once when its plugin turns healthy, until it is done.
 */
export async function unmountVolumes(
  host: UnmountHost,
  allocId: string,
  names: readonly string[] | undefined,
  options: UnmountOptions,
): Promise<UnmountOutcome[]> {
  const keys = [...host.records.values()]
    .filter((r) => r.allocId === allocId && (names === undefined || names.includes(r.name)))
    .map((r) => mountKey(r.allocId, r.name));
  const outcomes = await Promise.all(
    keys.map(async (key) => {
      // From here on the mount may be half gone: a later mount checks the mount table again.
      host.verified.delete(key);
      const record = host.records.get(key)!;
      if (record.desired === 'mounted') {
        try {
          crashPoint('reconciler.unmount.before-write');
          host.update(key, { desired: 'unmounted', attempts: 0, lastError: undefined, since: host.clock.now() });
          crashPoint('reconciler.unmount.after-write');
        } catch (err) {
          // Not written, but still wanted: unmounted in memory and retried (each retry writes the record again).
          host.records.set(key, { ...record, desired: 'unmounted', attempts: 0, since: host.clock.now() });
          host.log.error('could not record that a volume is to be unmounted; retrying in the background', {
            alloc_id: allocId,
            volume_id: record.volumeId,
            error: errorMessage(err),
          });
          host.scheduleRetry(record.volumeId, host.timeouts.unmountBackoff(1));
          return { name: record.name, volumeId: record.volumeId, pluginId: record.pluginId, error: err } satisfies UnmountOutcome;
        }
      }
      const done: UnmountOutcome = { name: record.name, volumeId: record.volumeId, pluginId: record.pluginId };
      let pluginWait: UnmountOutcome['pluginWait'];
      try {
        pluginWait = await awaitPluginForUnmount(host, key, options.signal, options.pluginExpected);
      } catch (err) {
        // Called off (the agent going away): still pending, for the retries or the next agent.
        host.scheduleRetry(record.volumeId, host.timeouts.unmountBackoff(1));
        return { ...done, error: err };
      }
      // No record left: a retry woken by the plugin's return finished it meanwhile.
      const outcome = (await host.attemptDown(key)) ?? done;
      return pluginWait ? { ...outcome, pluginWait } : outcome;
    }),
  );
  return outcomes;
}

/**
 * Before the first attempt at an unmount whose node plugin is not healthy
 * (a plugin task restarting during a `job stop`): wait for it, woken by
 * its return, up to the postrun limit. Past the limit the attempt is made
 * anyway and, failing, left to the background retries. Undefined when
 * there was nothing to wait for; rejects only when `signal` aborts (or the
 * CSI manager shuts down).
 */
export async function awaitPluginForUnmount(
  host: UnmountHost,
  key: string,
  signal: AbortSignal | undefined,
  pluginExpected?: (pluginId: string) => boolean,
): Promise<UnmountOutcome['pluginWait']> {
  const record = host.records.get(key);
  if (!record || !(record.published || record.staged) || !host.pluginAway(record.pluginId)) return undefined;
  // Nothing of the plugin runs here to come back: no wait; the retries finish the unmount once it is run again.
  if (pluginExpected && !pluginExpected(record.pluginId)) return { waitedMs: 0, healthy: false, gone: true };
  const started = host.clock.now();
  const limit = host.timeouts.pluginWait('postrun');
  const fields = { alloc_id: record.allocId, volume_id: record.volumeId, plugin_id: record.pluginId };
  host.log.info('the node plugin is not healthy; the unmount waits for it (postrun limit)', { ...fields, limit_ms: limit });
  try {
    // Ended by the caller's signal, and by this reconciler's dispose(): no CSI step after it is disposed.
    await host.csi.waitForPlugin(PluginTypeCSINode, record.pluginId, 'postrun', {
      signal: signal ? AbortSignal.any([signal, host.stopping]) : host.stopping,
    });
    return { waitedMs: host.clock.now() - started, healthy: true };
  } catch (err) {
    if (signal?.aborted || host.stopped() || err instanceof ShutdownError) throw err;
    host.log.warn(
      `the node plugin was not healthy within ${formatDuration(limit)} (the postrun limit); unmounting anyway, retried in the background if it fails`,
      { ...fields, error: errorMessage(err) },
    );
    return { waitedMs: host.clock.now() - started, healthy: false };
  }
}

export async function runAttemptDown(host: UnmountHost, key: string): Promise<UnmountOutcome | undefined> {
  const first = host.records.get(key);
  if (!first) return undefined;
  const outcome: UnmountOutcome = { name: first.name, volumeId: first.volumeId, pluginId: first.pluginId };
  try {
    await host.queue.run(first.volumeId, () => bringDown(host, key));
  } catch (err) {
    outcome.error = err;
    const record = host.records.get(key);
    if (record && record.desired === 'unmounted') {
      let next: VolumeMountRecord = { ...record, attempts: record.attempts + 1, lastError: errorMessage(err) };
      try {
        next = host.update(key, { attempts: next.attempts, lastError: next.lastError });
      } catch (writeErr) {
        // Counting the attempt is bookkeeping: a store that refuses it must not stop the retries
        // (nor, from a retry timer, escape as an unhandled rejection).
        host.records.set(key, next);
        host.log.error('could not record a failed unmount attempt in the state; retrying anyway', {
          alloc_id: record.allocId,
          volume_id: record.volumeId,
          error: errorMessage(writeErr),
        });
      }
      const overdue = host.clock.now() - record.since > host.timeouts.pluginWait('postrun');
      const fields = {
        alloc_id: next.allocId,
        volume_id: next.volumeId,
        plugin_id: next.pluginId,
        attempts: next.attempts,
        error: errorMessage(err),
      };
      if (overdue)
        host.log.error(`unmount still failing after ${formatDuration(host.timeouts.pluginWait('postrun'))}; still retrying`, fields);
      else host.log.warn('unmount failed; retrying in the background', fields);
      host.scheduleRetry(next.volumeId, host.timeouts.unmountBackoff(next.attempts));
    }
  }
  return outcome;
}

/**
 * The unmount steps of one record; runs under its volume's queue. Each
 * step's result is written as soon as it returns; if the record is wanted
 * mounted again meanwhile (an alloc restoring), the rest is left to its mount.
 */
async function bringDown(host: UnmountHost, key: string): Promise<void> {
  const stillUnwanted = () => {
    const r = host.records.get(key);
    return r && r.desired === 'unmounted' ? r : undefined;
  };
  let record = stillUnwanted();
  if (!record) return;
  const volume = ref(record, host.volumes.get(key));
  if (record.published) {
    await host.csi.volumeManager(record.pluginId).unpublishVolume(volume, record.allocId, record.usage);
    crashPoint('reconciler.unpublish.after-call');
    host.update(key, { published: false, targetPath: undefined });
    crashPoint('reconciler.unpublish.after-write');
    record = stillUnwanted();
    if (!record) return;
  }
  if (record.staged) {
    // Only the last user of the staging path unstages; the others just stop counting.
    const mine = stagingKey(record);
    const others = [...host.records.entries()].filter(([k, r]) => k !== key && r.staged && stagingKey(r) === mine);
    if (others.length === 0) await host.csi.volumeManager(record.pluginId).unstageVolume(volume, record.usage);
    crashPoint('reconciler.unstage.after-call');
    host.update(key, { staged: false, stagingPath: undefined });
    crashPoint('reconciler.unstage.after-write');
    record = stillUnwanted();
    if (!record) return;
  }
  if (record.claimed) {
    await host.claimer.release(record.volumeId, record.allocId);
    crashPoint('reconciler.release.after-call');
    host.update(key, { claimed: false, publishContext: undefined });
    crashPoint('reconciler.release.after-write');
    record = stillUnwanted();
    if (!record) return;
  }
  crashPoint('reconciler.forget.before');
  host.forget(key);
  host.log.info('volume unmounted and released', {
    alloc_id: record.allocId,
    volume: record.name,
    volume_id: record.volumeId,
    attempts: record.attempts + 1,
  });
}

/** The volumes with records of (plugin) left to unmount. */
export function volumesToUnmount(records: ReadonlyMap<string, VolumeMountRecord>, pluginId?: string): string[] {
  const ids = new Set<string>();
  for (const r of records.values())
    if (r.desired === 'unmounted' && (pluginId === undefined || r.pluginId === pluginId)) ids.add(r.volumeId);
  return [...ids];
}
