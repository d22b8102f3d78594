// VolumeSpec: a volume as `csiplug volume register|create FILE` describes it
// (Nomad's shape), in its checked, camel-cased form; and the contract of the
// check every spec handed to the catalog goes through (token
// IVolumeSpecValidator). Reading spec files (HCL, JSON) is the agent's job:
// it binds the validator.
import type { AccessMode, AttachmentMode } from './modes';

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

/**
 * Checks a spec that may not have come through a parser (HTTP bodies, code)
 * and returns it in canonical form; throws core's ValidationError naming the
 * field when it is not a good spec.
 */
export type VolumeSpecValidator = (spec: unknown) => VolumeSpec;
