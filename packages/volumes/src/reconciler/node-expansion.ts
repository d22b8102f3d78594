// Node-side expansion of mounted volumes (NodeExpandVolume), for a volume
// whose controller expansion said node_expansion_required: owed first — the
// record says so (`expandTo`) before any call — then made through the node
// plugin where the volume is published, or after the next publish. A
// failure keeps it owed and never fails the mount it rides on.
import { errorMessage, type Logger } from '@csiplug/core';
import type { CSIManager, KeyedMutex } from '@csiplug/csimanager';
import type { ClaimableVolume } from '../catalog/volume-claimer';
import type { VolumeMountRecord } from './mount-record';
import type { NodeExpandOutcome } from './reconciler-service';
import { volumeRef as ref } from './record-views';

/** What node-side expansion needs of the reconciler: its records, queue and writes. */
export interface ExpansionHost {
  readonly records: ReadonlyMap<string, VolumeMountRecord>;
  readonly volumes: ReadonlyMap<string, ClaimableVolume>;
  readonly queue: KeyedMutex;
  readonly csi: CSIManager;
  readonly log: Logger;
  /** Applies a change to a record and writes it through (the reconciler's update). */
  update(key: string, change: Partial<VolumeMountRecord>): VolumeMountRecord;
  /** The record, still wanted mounted; an AbortError otherwise. */
  wanted(key: string): VolumeMountRecord;
}

/** The node-side expansion a record owes, after its publish: cleared once the plugin answered; a failure keeps it owed and never fails the mount. */
export async function expandOwed(
  host: ExpansionHost,
  key: string,
  capacityBytes: number,
  signal: AbortSignal | undefined,
  secrets?: Record<string, string>,
): Promise<number | undefined> {
  const record = host.wanted(key);
  // A register update's secrets, not stored yet, go instead of those the catalog last said (its refresh comes after).
  const volume = { ...ref(record, host.volumes.get(key)), ...(secrets ? { secrets: { ...secrets } } : {}) };
  try {
    const capacity = await host.csi
      .volumeManager(record.pluginId)
      .expandVolume(volume, record.allocId, record.usage, capacityBytes, { signal });
    // Done (or no node-side expansion at all: nothing is owed either) — unless a larger one was asked meanwhile.
    const now = host.records.get(key);
    if (now && (now.expandTo ?? 0) <= capacityBytes) host.update(key, { expandTo: undefined });
    return capacity;
  } catch (err) {
    host.log.warn('node-side expansion failed; it is made after the next publish', {
      alloc_id: record.allocId,
      volume_id: record.volumeId,
      capacity_bytes: capacityBytes,
      error: errorMessage(err),
    });
    throw err;
  }
}

/**
 * Owes the expansion to every record of the volume wanted mounted, and makes
 * it now on those published (when the plugin expands online); `secrets`, a
 * register update's, go instead of the volume's in the calls made now.
 */
export async function expandMountedVolume(
  host: ExpansionHost,
  volumeId: string,
  capacityBytes: number,
  options: { online: boolean; signal?: AbortSignal; secrets?: Record<string, string> },
): Promise<NodeExpandOutcome[]> {
  const out: NodeExpandOutcome[] = [];
  for (const key of [...host.records.keys()]) {
    // Read again each round: an earlier round awaited, and the record may be gone or unwanted since.
    const record = host.records.get(key);
    if (!record || record.volumeId !== volumeId || record.desired !== 'mounted') continue;
    // Owed from here on (a mount still on its way too: it expands after its publish); a failure, an offline-only plugin or a killed agent leaves it for the next publish.
    host.update(key, { expandTo: Math.max(record.expandTo ?? 0, capacityBytes) });
    if (!record.published) continue;
    if (!options.online) {
      out.push({ allocId: record.allocId, name: record.name, deferred: true });
      continue;
    }
    try {
      const capacity = await host.queue.run(
        volumeId,
        () => expandOwed(host, key, capacityBytes, options.signal, options.secrets),
        options.signal,
      );
      out.push({
        allocId: record.allocId,
        name: record.name,
        ...(capacity !== undefined ? { capacityBytes: capacity } : { noNodeExpansion: true as const }),
      });
    } catch (err) {
      out.push({ allocId: record.allocId, name: record.name, error: errorMessage(err) });
    }
  }
  return out;
}
