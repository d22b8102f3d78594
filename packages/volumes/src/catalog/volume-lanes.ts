// The catalog's two per-volume locks. The volume lane serialises what
// changes a volume's record and attachment: register, create, claim,
// release, deregister, delete, expand. The snapshot lane serialises a
// volume's CreateSnapshot calls with what would take the volume from under
// one (delete, expand), and nothing else: a snapshot may run for minutes, or
// hang until the CSI call limit, and a claim release (hence `job stop`) must
// never wait for it — in Kubernetes too the snapshotter and the attacher do
// not wait for each other. Order: the snapshot lane first, then the volume
// lane, never the other way round, so the two cannot deadlock.
import { KeyedMutex } from '@csiplug/csimanager';
import type { VolumeCatalogEvent } from './volume-catalog-service';

/** What an operation run in a lane returns: its value, and the event the catalog fires once the lanes are released. */
export interface LaneOutcome<T> {
  value: T;
  event?: VolumeCatalogEvent;
}

/** Which lanes an operation holds. */
export type VolumeLane = 'volume' | 'snapshot' | 'both';

export class VolumeLanes {
  private readonly volumes = new KeyedMutex();
  private readonly snapshots = new KeyedMutex();

  /** Runs `fn` holding the `lane` of volume `volumeId` ('both': waits for a snapshot under way before it takes the volume lane, so it holds no claim while it waits). */
  run<T>(lane: VolumeLane, volumeId: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (lane === 'volume') return this.volumes.run(volumeId, fn, signal);
    if (lane === 'snapshot') return this.snapshots.run(volumeId, fn, signal);
    return this.snapshots.run(volumeId, () => this.volumes.run(volumeId, fn, signal), signal);
  }
}
