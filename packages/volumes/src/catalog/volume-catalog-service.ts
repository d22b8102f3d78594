// The volume catalog's contract (token IVolumeCatalog): the volume half of
// AgentService (same method names, so the agent delegates one to one), the
// IVolumeClaimer the csi hook and the volume reconciler claim through, and a
// change event the agent turns into `Volume` lines of its event stream.
import type { Event } from '@csiplug/core';
import type { VolumeClaimer } from './volume-claimer';
import type { VolumeOp, VolumeOpView } from './volume-op-intent';
import type { Topology, VolumeSpec } from './volume-spec';
import type { VolumeView } from './volume-view';

export type VolumeCatalogEventKind =
  | 'registered'
  /** Registered again: secrets, context, capabilities (mount options while unclaimed) replaced, claims kept. */
  | 'updated'
  | 'created'
  | 'deregistered'
  | 'deleted'
  | 'claimed'
  | 'released'
  | 'expanded'
  | 'snapshot-created'
  | 'snapshot-deleted'
  /** A volume the plugin made for a create cut short, deleted again (the create had failed for its caller, or the id is another volume's). */
  | 'create-undone'
  /** An operation cut short (create, expand, delete) that the plugin refused to finish: dropped, the message says what the catalog keeps. */
  | 'resume-failed';

export interface VolumeCatalogEvent {
  volumeId: string;
  kind: VolumeCatalogEventKind;
  /** For claimed / released. */
  allocId?: string;
  /** A sentence for the event stream, e.g. `volume "data" claimed by alloc a1 (write, single-node-writer)`. */
  message: string;
  /** Set when the event settles an operation a previous agent (or a lost answer) cut short: which volume of which plugin it was. */
  resumed?: { op: VolumeOp; pluginId: string; externalId: string };
}

/** A snapshot as its plugin lists it (ListSnapshots, CreateSnapshot). */
export interface SnapshotView {
  pluginId: string;
  /** The plugin's id of the snapshot. */
  id: string;
  /** The plugin's id of the volume it was taken of. */
  externalSourceVolumeId: string;
  /** The catalog's id of that volume, when it is registered here. */
  sourceVolumeId?: string;
  sizeBytes: number;
  /** ms since the epoch; undefined when the plugin did not say. */
  createTime?: number;
  ready: boolean;
}

/** A volume as its plugin lists it (ListVolumes), and whether the catalog has it. */
export interface ExternalVolumeView {
  pluginId: string;
  /** The plugin's id of the volume. */
  externalId: string;
  capacityBytes?: number;
  accessibleTopology?: Topology[];
  /** Node ids it is published to, when the plugin lists them (LIST_VOLUMES_PUBLISHED_NODES). */
  publishedNodeIds?: string[];
  /** Its condition, when the plugin reports one. */
  condition?: { abnormal: boolean; message: string };
  /** The catalog's id for it, when it is registered here. */
  volumeId?: string;
}

/** One page of a paginated plugin list: `nextToken` asks for the next page; undefined: that was the last. */
export interface Page<T> {
  items: T[];
  nextToken?: string;
}

/** What a snapshot call may carry besides its ids: Nomad's per-call `-secret`s. */
export interface SnapshotCallOptions {
  signal?: AbortSignal;
  secrets?: Record<string, string>;
}

export interface PageRequest {
  /** At most this many (0 or absent: as many as the plugin gives). */
  perPage?: number;
  nextToken?: string;
  signal?: AbortSignal;
}

/** What an expansion did: the new capacity, and whether node plugins must expand the volume where it is mounted. */
export interface VolumeExpansion {
  volume: VolumeView;
  capacityBytes: number;
  nodeExpansionRequired: boolean;
}

export interface VolumeCatalogService extends VolumeClaimer {
  /** Every catalogued volume, sorted by id; `schedulable` reflects the node plugin's health now. */
  listVolumes(): VolumeView[];
  getVolume(id: string): VolumeView | undefined;
  /**
   * Adds an existing volume (external_id required). The plugin need not be
   * running yet. Throws ValidationError for a bad spec (IVolumeSpecValidator
   * decides). An id the catalog has is updated as Nomad does (secrets,
   * context, capabilities, mount options while unclaimed; claims kept);
   * VolumeUpdateRefusedError for what Nomad does not let change.
   */
  registerVolume(spec: VolumeSpec): Promise<VolumeView>;
  /**
   * A register update of volume `spec.id` checked as registerVolume would,
   * storing nothing: every refusal thrown as registerVolume throws it, and
   * the capacity the volume must first grow to (its capacity_min above the
   * capacity it has), if any. Undefined growth too for an id not registered.
   */
  checkRegisterUpdate(spec: VolumeSpec): { growTo?: number };
  /**
   * Creates the volume through its controller plugin's CreateVolume (waiting
   * for the controller within the `prerun` plugin wait), then registers it.
   * Throws VolumePluginError when the controller cannot create volumes.
   */
  createVolume(spec: VolumeSpec, options?: { signal?: AbortSignal }): Promise<VolumeView>;
  /** Removes a volume from the catalog; VolumeInUseError while claimed unless `force`; VolumeNotFoundError for an unknown id. */
  deregisterVolume(id: string, options?: { force?: boolean }): Promise<void>;
  /**
   * DeleteVolume through the controller (NOT_FOUND counts as deleted), then
   * deregisters; VolumeInUseError while claimed. The call's `secrets` go over
   * the volume's (Nomad's `volume delete -secret`; the call's win).
   */
  deleteVolume(id: string, options?: { signal?: AbortSignal; secrets?: Record<string, string> }): Promise<void>;
  /**
   * The volumes `allocId` holds anything on: a claim, a controller publish,
   * or a publish under way or cut short (which a release unpublishes). The
   * volume view shows only claims, so whoever releases a gone alloc's
   * volumes (an alloc purged without its csi hook's postrun) asks here, then
   * releases each through the IVolumeClaimer — in a cluster, in etcd too.
   */
  volumesHeldBy(allocId: string): string[];
  /**
   * Grows a volume to `capacity` (Nomad: `volume create` again with a larger
   * capacity): ControllerExpandVolume when the controller offers
   * EXPAND_VOLUME, else only the node side (when the node plugin offers it).
   * A smaller capacity is a ValidationError; the same one, VolumeExistsError.
   * `secrets` go instead of the volume's: a register update's, checked and
   * not stored yet (Nomad's Register expands the volume as merged).
   */
  expandVolume(
    id: string,
    capacity: { capacityMin?: number; capacityMax?: number },
    options?: { signal?: AbortSignal; secrets?: Record<string, string> },
  ): Promise<VolumeExpansion>;
  /**
   * CreateSnapshot of a catalogued volume (its controller must offer
   * CREATE_DELETE_SNAPSHOT); `name` defaults to `<id>-snapshot-<time>`. As
   * Nomad: the call's `secrets` go over the volume's (the call's win on a
   * shared key), its `parameters` are the snapshot's own.
   */
  createSnapshot(
    volumeId: string,
    name?: string,
    options?: SnapshotCallOptions & { parameters?: Record<string, string> },
  ): Promise<SnapshotView>;
  /** DeleteSnapshot on `pluginId`'s controller with the call's `secrets` (an unknown id is gone already, per CSI). */
  deleteSnapshot(pluginId: string, snapshotId: string, options?: SnapshotCallOptions): Promise<void>;
  /** ListSnapshots on `pluginId`'s controller with the call's `secrets`, one page. */
  listSnapshots(
    pluginId: string,
    request?: PageRequest & { sourceVolumeId?: string; secrets?: Record<string, string> },
  ): Promise<Page<SnapshotView>>;
  /** ListVolumes on `pluginId`'s controller, one page, marking the volumes the catalog has. */
  listExternalVolumes(pluginId: string, request?: PageRequest): Promise<Page<ExternalVolumeView>>;

  /**
   * The create, expand or delete of the volume that an agent restart (or a
   * lost answer) cut short and that is not finished yet (volume-op-intent.ts);
   * undefined when none. A catalog without intents need not implement it.
   */
  interruptedOp?(volumeId: string): VolumeOpView | undefined;

  readonly onDidChange: Event<VolumeCatalogEvent>;
}
