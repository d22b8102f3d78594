// The volumes of a job's stopped allocs whose unmount is not done yet, as
// `job stop` and `job status` show them: a stop whose node plugin is away
// ends with the tasks stopped and the mount left in place (never torn down
// without its plugin), and the volume reconciler finishes the unmount and
// releases the claim once the plugin is back. Read from its records: a
// record wanted unmounted that is still there is one not finished;
// `pluginAway` when its node plugin neither runs here nor is on its way
// (the operator starts the plugin's job for the unmount to run).
import type { PendingUnmountView } from '@csiplug/api';
import type { VolumeMountRecord } from '@csiplug/volumes';

/** `pluginHere`: whether a node plugin runs here or is on its way (JobService.servesNodeHere). */
export function pendingUnmountsOf(records: readonly VolumeMountRecord[], pluginHere: (pluginId: string) => boolean): PendingUnmountView[] {
  return records
    .filter((r) => r.desired === 'unmounted')
    .map((r) => ({
      allocId: r.allocId,
      name: r.name,
      volumeId: r.volumeId,
      pluginId: r.pluginId,
      ...(pluginHere(r.pluginId) ? {} : { pluginAway: true }),
      ...(r.lastError ? { lastError: r.lastError } : {}),
    }));
}
