// What the catalog shows of a volume (VolumeView) and of each claim on it
// (VolumeClaimView): the agent serves these as they are over its HTTP API.
import type { Topology, VolumeSpec } from './volume-spec';

export interface VolumeClaimView {
  allocId: string;
  mode: 'read' | 'write';
  accessMode: string;
  attachmentMode: string;
  /** ms since the epoch */
  since: number;
}

export interface VolumeView extends VolumeSpec {
  /** From CreateVolume, or given at register. */
  externalId: string;
  capacityBytes?: number;
  /** Where the volume can be reached from (CreateVolume's accessible_topology, or the required topologies it was registered with); absent: anywhere. */
  accessibleTopology?: Topology[];
  schedulable: boolean;
  claims: VolumeClaimView[];
  /** The plugin's controller published it to this node (ControllerPublishVolume), keyed by alloc. */
  publishContexts?: Record<string, Record<string, string>>;
  createdAt: number;
}
