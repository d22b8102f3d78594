// The CSI volume reference of a mount record: what a node step is called
// with — the record's ids, over what the catalog said of the volume (secrets,
// context, mount options) when this run has it.
import type { CSIVolumeRef } from '@csiplug/csimanager';
import type { ClaimableVolume } from '../catalog/volume-claimer';
import type { VolumeMountRecord } from './mount-record';

export function volumeRef(record: VolumeMountRecord, volume?: ClaimableVolume): CSIVolumeRef {
  return { ...(volume ?? {}), id: record.volumeId, externalId: record.externalId, pluginId: record.pluginId };
}
