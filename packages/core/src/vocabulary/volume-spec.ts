// VolumeSpec: a volume as `csiplug volume register|create FILE` describes it
// (Nomad's shape), in its checked, camel-cased form. The jobspec package
// reads and checks spec files into it; the volume catalog (@csiplug/volumes)
// registers and creates volumes from it.
import type { AccessMode } from './access-modes';
import type { AttachmentMode } from './attachment-modes';

export interface VolumeCapability {
  accessMode: AccessMode;
  attachmentMode: AttachmentMode;
}

/** A topology: segment key → value (e.g. { "topology.hostpath.csiplug.io/node": "n1" }). */
export interface Topology {
  segments: Record<string, string>;
}

/** Where a created volume must (required) or should (preferred) be accessible from; goes to CreateVolume as accessibility requirements. */
export interface TopologyRequest {
  required?: Topology[];
  preferred?: Topology[];
}

export interface VolumeSpec {
  /** The catalog id; path-safe. */
  id: string;
  /** Display name (default: the id). */
  name: string;
  type: 'csi';
  pluginId: string;
  /** The storage provider's id: needed to register an existing volume, absent when creating one. */
  externalId?: string;
  /** At least one. */
  capabilities: VolumeCapability[];
  mountOptions?: { fsType?: string; mountFlags?: string[] };
  /** bytes */
  capacityMin?: number;
  /** bytes */
  capacityMax?: number;
  parameters: Record<string, string>;
  secrets: Record<string, string>;
  context: Record<string, string>;
  /** Create only: the plugin's id of a snapshot to restore the new volume from (CreateVolume's content source). */
  snapshotId?: string;
  /** Create only: the plugin's id of a volume to clone (CreateVolume's content source). */
  cloneId?: string;
  /** Create: the accessibility requirements; register: the volume's topology (its required topologies). */
  topologyRequest?: TopologyRequest;
}
