// A mount record found after an agent restart: is its mount still live? The
// mount table says so without any plugin, so a live mount under running
// tasks is kept at once, however long its plugin stays away (the
// MountChecker looks at it when the plugin serves); a table that cannot be
// read just now is read again, never taken for "gone". A remount the last
// agent left half done is kept too, for the checker to finish.
import { errorMessage, type Clock, type Logger } from '@csiplug/core';
import { isMountPointRetrying, type MountTable } from '@csiplug/csimanager';
import type { VolumeMountRecord } from './mount-record';
import { mountedInfo } from './record-views';
import type { MountedVolumeInfo } from './reconciler-service';

/** What the restore check needs of the reconciler. */
export interface RestoreHost {
  /** Records whose mount was checked against the mount table in this run. */
  readonly verified: Set<string>;
  /** Unmount attempts under way, by record key. */
  readonly downs: ReadonlyMap<string, unknown>;
  readonly mountTable: MountTable;
  readonly clock: Clock;
  readonly log: Logger;
  /** The MountChecker, told of a restored live mount. */
  readonly checker: { restored(record: VolumeMountRecord): void };
  stopped(): boolean;
  pluginAway(pluginId: string): boolean;
  /** The record, still wanted mounted; an AbortError otherwise. */
  wanted(key: string): VolumeMountRecord;
}

/**
 * A record already published: mounted in this run (nothing to do), or from
 * before a restart — then is the mount still there? A mount table that
 * cannot be read just now is read again, never taken for "gone". Undefined
 * when the steps must run — always while an unmount attempt is under way
 * (it may take the target down after any check; the steps queue behind it).
 * A restored live mount is checked by the MountChecker when its plugin
 * serves. `whenGone` says what happens next when the mount is gone.
 */
export async function stillMounted(
  host: RestoreHost,
  key: string,
  signal: AbortSignal | undefined,
  whenGone = 'mounting again',
): Promise<MountedVolumeInfo | undefined> {
  const record = host.wanted(key);
  if (!record.published || record.targetPath === undefined || host.downs.has(key)) return undefined;
  if (host.verified.has(key)) return mountedInfo(record, false);
  const target = record.targetPath;
  let live: boolean;
  try {
    // The table never enters the target (its parent is resolved, the name looked up in mountinfo).
    live = await isMountPointRetrying(host.mountTable, target, {
      clock: host.clock,
      signal,
      onFault: (err, attempt, delayMs) =>
        host.log.warn('cannot read the mount table for a fault of the agent itself; checking again', {
          alloc_id: record.allocId,
          volume_id: record.volumeId,
          target,
          attempt,
          delay_ms: delayMs,
          error: errorMessage(err),
        }),
    });
  } catch (err) {
    if (signal?.aborted || host.stopped()) throw err;
    // A target that errors (ENOTCONN, ESTALE, EIO of a mount whose plugin died) is mounted, maybe stale:
    // kept under its running tasks and left to the checker, never a failed restore.
    host.log.warn(
      'could not tell whether a restored volume mount is still in place; kept as mounted (maybe stale) and checked when its plugin serves',
      { alloc_id: record.allocId, volume: record.name, volume_id: record.volumeId, target, error: errorMessage(err) },
    );
    live = true;
  }
  if (!live) {
    host.log.warn(`volume mount gone after restore; ${whenGone}`, {
      alloc_id: record.allocId,
      volume: record.name,
      volume_id: record.volumeId,
      plugin_id: record.pluginId,
    });
    return undefined;
  }
  host.verified.add(key);
  const away = host.pluginAway(record.pluginId);
  host.log.info('volume still mounted after restore', {
    alloc_id: record.allocId,
    volume: record.name,
    volume_id: record.volumeId,
    target,
    plugin_away: away,
  });
  const now = host.wanted(key);
  host.checker.restored(now);
  return mountedInfo(now, true, away);
}

/** A restored record with a remount under way: kept as it is, and finished by the checker when its plugin serves. */
export function keepRemounting(host: RestoreHost, key: string): MountedVolumeInfo {
  const record = host.wanted(key);
  host.verified.add(key);
  const away = host.pluginAway(record.pluginId);
  host.log.warn(
    'a remount of a stale volume mount did not finish before the last agent stopped; the alloc keeps running and the remount is finished when its plugin serves',
    {
      alloc_id: record.allocId,
      volume: record.name,
      volume_id: record.volumeId,
      target: record.targetPath,
      remounting: record.remounting,
      plugin_away: away,
    },
  );
  host.checker.restored(record);
  return mountedInfo(record, true, away);
}
