// The volume reconciler's remount of live mounts the MountChecker found
// stale: down and up again through the plugin's current instance, under the
// volume's queue. It keeps the reconciler's rule — state written before each
// call — with the intent (`remounting`) written to each record first, so an
// agent killed anywhere in a remount leaves the next one a remount to finish.
import { crashPoint, errorMessage } from '@csiplug/core';
import type { CSIManager, KeyedMutex } from '@csiplug/csimanager';
import { ClaimError, type ClaimableVolume, type VolumeClaimer } from '../catalog/volume-claimer';
import { ReconcilerStoppedError, RemountBusyError, isTargetBusy } from './errors';
import type { RemountOutcome } from './mount-checker';
import { stagingKey, stalePolicyOf, type VolumeMountRecord } from './mount-record';
import { volumeRef as ref } from './record-views';
import type { MountedVolumeInfo } from './reconciler-service';

/** What a remount needs of the reconciler: its records and queue, and its one way to write a record. */
export interface RemountHost {
  readonly records: ReadonlyMap<string, VolumeMountRecord>;
  /** What the catalog said of a record's volume; filled in here for a restored record. */
  readonly volumes: Map<string, ClaimableVolume>;
  /** Unmount attempts under way, by record key. */
  readonly downs: ReadonlyMap<string, unknown>;
  readonly queue: KeyedMutex;
  readonly csi: CSIManager;
  readonly claimer: VolumeClaimer;
  stopped(): boolean;
  /** Applies a change to a record and writes it through (the reconciler's update). */
  update(key: string, change: Partial<VolumeMountRecord>): VolumeMountRecord;
  /** Stage (when the plugin stages) and publish, as a mount does; runs under the volume's queue. */
  nodeSteps(key: string, signal: AbortSignal | undefined): Promise<MountedVolumeInfo>;
  /** The checker reported a remount done: its intent is cleared. */
  remountReported(key: string): void;
}

/**
 * Takes the stale mounts of `keys` (one volume) down and up again through
 * the plugin's current instance, under the volume's queue, each record
 * written step by step as a mount and an unmount write it. First the
 * intent (`remounting`) is written to each record, so an agent killed
 * mid-way leaves the next one a remount to finish. Then: unpublish each;
 * unstage each staging mount named in `restage` — every other record
 * wanted mounted on it comes down and up with it (its target is a bind
 * mount of the stale staging mount), and one whose unmount holds it
 * (under way or pending) keeps it: the keys on it are then left as they
 * are and reported failed, to be tried again; then stage and publish each
 * again at the same target. A record unmounted meanwhile is left to its
 * unmount. Resolves with the keys mounted again and those that failed
 * (with why), and the records taken along that were not in `keys`. The
 * intent stays on a key mounted again until the checker has reported it
 * (remountReported), so a kill before the report still restarts the
 * tasks under `restart`.
 */
export async function remountStale(
  host: RemountHost,
  volumeId: string,
  keys: readonly string[],
  restage: ReadonlySet<string>,
): Promise<RemountOutcome> {
  const failed = new Map<string, unknown>();
  const done = new Set<string>();
  const extra = new Map<string, VolumeMountRecord>();
  // Not now (a cluster node not settled since it joined): each is a failed remount, tried again after a backoff, saying why.
  const refusal = host.claimer.remountRefusal?.(volumeId);
  if (refusal !== undefined) return { done, failed: new Map(keys.map((k) => [k, new ClaimError(refusal, true)])) };
  const lookUp = async (key: string) => {
    // The volume's secrets and context, handed to stage and publish as on a first mount (a restored record has none in memory).
    if (host.volumes.has(key)) return;
    try {
      host.volumes.set(key, await host.claimer.lookup(volumeId));
    } catch (err) {
      failed.set(key, err);
    }
  };
  for (const key of keys) await lookUp(key);
  return host.queue.run(volumeId, async () => {
    if (host.stopped()) throw new ReconcilerStoppedError();
    const inPlay = new Set(keys);
    const held = new Map<string, string>();
    for (const staging of restage) {
      for (const [k, r] of host.records) {
        if (inPlay.has(k) || !r.staged || stagingKey(r) !== staging) continue;
        if (r.desired === 'mounted' && !host.downs.has(k)) {
          inPlay.add(k);
          extra.set(k, structuredClone(r));
        } else {
          held.set(staging, `the unmount of alloc ${r.allocId} still holds it`);
        }
      }
    }
    for (const key of extra.keys()) await lookUp(key);
    for (const key of inPlay) {
      const r = host.records.get(key);
      const reason = r && held.get(stagingKey(r));
      if (r && reason !== undefined && restage.has(stagingKey(r)))
        failed.set(
          key,
          new Error(
            `its staging mount ${r.stagingPath ?? ''} is stale and cannot be staged again now: ${reason}; tried again after a backoff`,
          ),
        );
    }
    const live = () => [...inPlay].filter((k) => !failed.has(k) && host.records.get(k)?.desired === 'mounted' && !host.downs.has(k));
    // The intent first: a next agent finishes what this one starts.
    for (const key of live()) {
      const r = host.records.get(key)!;
      const intent = r.remounting === 'restart' || stalePolicyOf(r) === 'restart' ? 'restart' : 'remount';
      try {
        if (r.remounting !== intent) host.update(key, { remounting: intent });
      } catch (err) {
        failed.set(key, err);
      }
    }
    crashPoint('reconciler.remount.intent.after-write');
    for (const key of live()) {
      const r = host.records.get(key)!;
      if (!r.published) continue;
      try {
        await host.csi.volumeManager(r.pluginId).unpublishVolume(ref(r, host.volumes.get(key)), r.allocId, r.usage);
        crashPoint('reconciler.remount.unpublish.after-call');
        // The target path stays recorded: it is where the mount goes again (and what a next agent keeps meanwhile).
        host.update(key, { published: false });
        crashPoint('reconciler.remount.unpublish.after-write');
      } catch (err) {
        failed.set(key, isTargetBusy(err) ? new RemountBusyError(r.targetPath ?? key, err) : err);
        // In use: nothing came down and nothing is forced; the intent goes (the mount is as it was), so it is not held "remounting".
        if (isTargetBusy(err)) host.remountReported(key);
      }
    }
    const unstageFailed = new Map<string, unknown>();
    for (const staging of restage) {
      const group = live().filter((k) => host.records.get(k)!.staged && stagingKey(host.records.get(k)!) === staging);
      const first = group[0];
      if (first === undefined) continue;
      // A target on it in use is still mounted from it: not unstaged under it; the others are published again from it and reported failed.
      const busy = [...inPlay].find((k) => failed.get(k) instanceof RemountBusyError && stagingKey(host.records.get(k)!) === staging);
      if (busy !== undefined)
        unstageFailed.set(staging, new Error(`its staging mount was not staged again: ${errorMessage(failed.get(busy))}`));
      if (busy !== undefined) continue;
      const r = host.records.get(first)!;
      try {
        await host.csi.volumeManager(r.pluginId).unstageVolume(ref(r, host.volumes.get(first)), r.usage);
        crashPoint('reconciler.remount.unstage.after-call');
        for (const k of group) host.update(k, { staged: false, stagingPath: undefined });
        crashPoint('reconciler.remount.unstage.after-write');
      } catch (err) {
        // Published again from the stale staging mount all the same (better than no mount at all), and reported as failed.
        unstageFailed.set(staging, err);
      }
    }
    for (const key of live()) {
      try {
        await host.nodeSteps(key, undefined);
      } catch (err) {
        // Unmounted meanwhile: its unmount's business, not a failure.
        if (host.records.get(key)?.desired === 'mounted') failed.set(key, err);
        continue;
      }
      const staging = unstageFailed.get(stagingKey(host.records.get(key)!));
      if (staging !== undefined) failed.set(key, staging);
      else done.add(key);
    }
    return { done, failed, extra };
  });
}
