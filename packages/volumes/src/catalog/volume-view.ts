// What the catalog shows of a volume (VolumeView) and of each claim on it
// (VolumeClaimView): the agent serves these as they are over its HTTP API.
import type { VolumeSpec } from './volume-spec';

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
  schedulable: boolean;
  claims: VolumeClaimView[];
  /** The plugin's controller published it to this node (ControllerPublishVolume), keyed by alloc. */
  publishContexts?: Record<string, Record<string, string>>;
  createdAt: number;
}
