// What a mount record is shown as: the CSI volume reference a node step is
// called with (the record's ids, over what the catalog said of the volume —
// secrets, context, mount options — when this run has it), and the
// MountedVolumeInfo a mount answers with.
import type { CSIVolumeRef } from '@csiplug/csimanager';
import type { ClaimableVolume } from '../catalog/volume-claimer';
import type { VolumeMountRecord } from './mount-record';
import type { MountedVolumeInfo } from './reconciler-service';

export function volumeRef(record: VolumeMountRecord, volume?: ClaimableVolume): CSIVolumeRef {
  return { ...(volume ?? {}), id: record.volumeId, externalId: record.externalId, pluginId: record.pluginId };
}

/** The mount as the alloc sees it; `restored` when it was found mounted after a restart, `pluginAway` when its plugin does not serve now. */
export function mountedInfo(record: VolumeMountRecord, restored: boolean, pluginAway = false): MountedVolumeInfo {
  const info: MountedVolumeInfo = {
    name: record.name,
    volumeId: record.volumeId,
    pluginId: record.pluginId,
    targetPath: record.targetPath!,
    readOnly: record.usage.readOnly,
    restored,
    pluginAway,
  };
  if (record.stagingPath) info.stagingPath = record.stagingPath;
  return info;
}
