// What the reconciler keeps of a volume for its live mounts (secrets,
// context, mount options: what stage, publish, node expansion, a stale
// remount and unpublish/unstage hand the node plugin) is read again when the
// catalog says the volume was updated (a `volume register` of it): a mount
// made before the update then sends the new secrets on its next call, as
// Nomad's client reads the volume from the server for each call.
import { errorMessage, type Logger } from '@csiplug/core';
import type { ClaimableVolume, VolumeClaimer } from '../catalog/volume-claimer';
import type { VolumeMountRecord } from './mount-record';

/** What the refresh needs of the reconciler: its records, its copy of each record's volume, and the catalog to read. */
export interface VolumeRefreshHost {
  readonly records: ReadonlyMap<string, VolumeMountRecord>;
  readonly volumes: Map<string, ClaimableVolume>;
  readonly claimer: Pick<VolumeClaimer, 'lookup'>;
  readonly log: Logger;
}

/**
 * Replaces the kept copy of `volumeId` for each of its mounts with what the
 * catalog has now. A volume the catalog cannot give (deregistered meanwhile)
 * keeps the old copy, logged: an unmount still needs its secrets. Never throws.
 */
export async function refreshVolume(host: VolumeRefreshHost, volumeId: string): Promise<void> {
  const keys = () => [...host.records].filter(([key, r]) => r.volumeId === volumeId && host.volumes.has(key)).map(([key]) => key);
  if (keys().length === 0) return;
  let volume: ClaimableVolume;
  try {
    volume = await host.claimer.lookup(volumeId);
  } catch (err) {
    host.log.warn('could not read an updated volume again for its mounts; they keep what they had', {
      volume_id: volumeId,
      error: errorMessage(err),
    });
    return;
  }
  // Read again after the lookup: a mount made or ended meanwhile is taken as it is now.
  for (const key of keys()) host.volumes.set(key, structuredClone(volume));
}
