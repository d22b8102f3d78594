// One plugin volume, one catalog volume: the check that a register or create
// does not give a second volume id the storage another id has (plugin and
// external id), which would let two writers into one directory and a delete
// of either destroy the other's data. Shared by the local catalog and the
// agent's cluster check, over whatever list of volumes each reads.
import { VolumeExternalIdInUseError } from './errors';

/** What the check reads of a volume. */
export interface ExternalIdHolder {
  id: string;
  pluginId: string;
  externalId?: string;
}

/** Throws VolumeExternalIdInUseError naming the first volume of `volumes` other than `volumeId` on plugin `pluginId` volume `externalId`. */
export function assertExternalIdFree(volumes: Iterable<ExternalIdHolder>, volumeId: string, pluginId: string, externalId: string): void {
  for (const v of volumes) {
    if (v.id !== volumeId && v.pluginId === pluginId && v.externalId === externalId)
      throw new VolumeExternalIdInUseError(volumeId, pluginId, externalId, v.id);
  }
}
