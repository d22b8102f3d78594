// The volume catalog's contract (token IVolumeCatalog): the volume half of
// AgentService (same method names, so the agent delegates one to one), the
// IVolumeClaimer the csi hook and the volume reconciler claim through, and a
// change event the agent turns into `Volume` lines of its event stream.
import type { Event } from '@csiplug/core';
import type { VolumeClaimer } from './volume-claimer';
import type { VolumeSpec } from './volume-spec';
import type { VolumeView } from './volume-view';

export type VolumeCatalogEventKind = 'registered' | 'created' | 'deregistered' | 'deleted' | 'claimed' | 'released';

export interface VolumeCatalogEvent {
  volumeId: string;
  kind: VolumeCatalogEventKind;
  /** For claimed / released. */
  allocId?: string;
  /** A sentence for the event stream, e.g. `volume "data" claimed by alloc a1 (write, single-node-writer)`. */
  message: string;
}

export interface VolumeCatalogService extends VolumeClaimer {
  /** Every catalogued volume, sorted by id; `schedulable` reflects the node plugin's health now. */
  listVolumes(): VolumeView[];
  getVolume(id: string): VolumeView | undefined;
  /**
   * Adds an existing volume (external_id required). The plugin need not be
   * running yet. Throws ValidationError for a bad spec (IVolumeSpecValidator
   * decides), VolumeExistsError for a taken id.
   */
  registerVolume(spec: VolumeSpec): Promise<VolumeView>;
  /**
   * Creates the volume through its controller plugin's CreateVolume (waiting
   * for the controller within the `prerun` plugin wait), then registers it.
   * Throws VolumePluginError when the controller cannot create volumes.
   */
  createVolume(spec: VolumeSpec, options?: { signal?: AbortSignal }): Promise<VolumeView>;
  /** Removes a volume from the catalog; VolumeInUseError while claimed unless `force`; VolumeNotFoundError for an unknown id. */
  deregisterVolume(id: string, options?: { force?: boolean }): Promise<void>;
  /** DeleteVolume through the controller (NOT_FOUND counts as deleted), then deregisters; VolumeInUseError while claimed. */
  deleteVolume(id: string, options?: { signal?: AbortSignal }): Promise<void>;
  /**
   * Releases every claim `allocId` holds (for an alloc that is gone without
   * its csi hook's postrun, e.g. purged). Returns the volume ids released.
   */
  releaseAllocClaims(allocId: string, options?: { signal?: AbortSignal }): Promise<string[]>;

  readonly onDidChange: Event<VolumeCatalogEvent>;
}
