// Reading the usage of this node's live volume mounts (NodeGetVolumeStats)
// for `volume status` and the metrics: one call in flight per mount, shared
// by every reader, and an answer within its wait — "late" when the plugin
// hangs, never a reader held until the CSI call limit.
import { errorMessage, formatDuration } from '@csiplug/core';
import type { CSIManager } from '@csiplug/csimanager';
import type { ClaimableVolume } from '../catalog/volume-claimer';
import { mountKey, type VolumeMountRecord } from './mount-record';
import { volumeRef } from './record-views';
import type { MountUsageView } from './reconciler-service';
import type { UsageReader } from './usage-reader';

/** What the usage read needs of the reconciler: its records, the catalog's volumes, and its lifetime. */
export interface MountUsageHost {
  readonly records: ReadonlyMap<string, VolumeMountRecord>;
  readonly volumes: ReadonlyMap<string, ClaimableVolume>;
  readonly csi: CSIManager;
  readonly reader: UsageReader;
  /** Aborted when the reconciler is disposed: ends the calls it made on its own. */
  readonly stopping: AbortSignal;
}

/** The usage of the mounts wanted and published (of one alloc, or of one volume). */
export async function readMountUsage(host: MountUsageHost, filter: { allocId?: string; volumeId?: string }): Promise<MountUsageView[]> {
  const live = [...host.records.values()].filter(
    (r) =>
      r.desired === 'mounted' &&
      r.published &&
      (filter.allocId === undefined || r.allocId === filter.allocId) &&
      (filter.volumeId === undefined || r.volumeId === filter.volumeId),
  );
  return Promise.all(
    live.map(async (r): Promise<MountUsageView> => {
      const base = {
        allocId: r.allocId,
        name: r.name,
        volumeId: r.volumeId,
        pluginId: r.pluginId,
        ...(r.targetPath !== undefined ? { targetPath: r.targetPath } : {}),
      };
      try {
        const key = mountKey(r.allocId, r.name);
        // Shared by every read of this mount while it runs, so it is not the caller's to cancel: it runs to the CSI call limit.
        const reading = await host.reader.read(key, () =>
          host.csi.volumeManager(r.pluginId).volumeUsage(volumeRef(r, host.volumes.get(key)), r.allocId, r.usage, {
            ...(r.targetPath !== undefined ? { hostPath: r.targetPath } : {}),
            signal: host.stopping,
          }),
        );
        if (reading.kind === 'late') {
          return {
            ...base,
            late: true,
            error: `plugin "${r.pluginId}" has not answered NodeGetVolumeStats within ${formatDuration(reading.waitedMs)}: the usage is late (the call goes on; ask again later)`,
          };
        }
        const usage = reading.usage;
        return usage ? { ...base, usage } : { ...base, error: `plugin "${r.pluginId}" does not report volume stats (no GET_VOLUME_STATS)` };
      } catch (err) {
        return { ...base, error: errorMessage(err) };
      }
    }),
  );
}
