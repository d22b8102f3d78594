// VolumeClaimer (token IVolumeClaimer): how a node learns about a volume and
// claims it for an alloc. The local volume catalog implements it; a
// deployment backed by a real scheduler binds its own. The csi hook and the
// volume reconciler claim through it.
import { CsiplugError } from '@csiplug/core';

/** What a node needs to know of a catalogued volume to mount it. */
export interface ClaimableVolume {
  id: string;
  /** The plugin's own id for the volume (CSI volume_id); defaults to id. */
  externalId: string;
  pluginId: string;
  secrets?: Record<string, string>;
  context?: Record<string, string>;
  mountOptions?: { fsType?: string; mountFlags?: string[] };
  /** The volume was expanded with node_expansion_required: each mount runs NodeExpandVolume to this size after its publish. */
  nodeExpandTo?: number;
}

export interface VolumeClaimRequest {
  volumeId: string;
  allocId: string;
  readOnly: boolean;
  accessMode: string;
  attachmentMode: string;
}

export interface VolumeClaimResult {
  volume: ClaimableVolume;
  /** From ControllerPublishVolume, when the plugin has a controller that publishes. */
  publishContext?: Record<string, string>;
  /** The CSI node id the controller published the volume to (set with publishContext). */
  publishedTo?: string;
}

export interface VolumeClaimer {
  /** Looks a volume up; throws ClaimError (not retryable) when it is unknown. */
  lookup(volumeId: string): Promise<ClaimableVolume>;
  /** Claims the volume for an alloc; ClaimError.retryable says whether trying again may help. */
  claim(request: VolumeClaimRequest, options?: { signal?: AbortSignal }): Promise<VolumeClaimResult>;
  /** Releases the alloc's claim; releasing a claim that is gone is not an error. */
  release(volumeId: string, allocId: string, options?: { signal?: AbortSignal }): Promise<void>;
  /**
   * Why this node may not mount a claimed volume again right now, or
   * undefined when it may (absent: it always may). A stale mount is
   * remounted only then: in a cluster, a node back after its work moved must
   * not bring a volume back up for an alloc it is about to stop.
   */
  remountRefusal?(volumeId: string): string | undefined;
}

export class ClaimError extends CsiplugError {
  constructor(
    message: string,
    readonly retryable: boolean,
    options?: { cause?: unknown; code?: string },
  ) {
    super(options?.code ?? (retryable ? 'ECLAIM_RETRYABLE' : 'ECLAIM'), message, options);
  }
}
