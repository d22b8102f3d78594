// The VolumeClaimer of an agent in cluster mode (bound to IVolumeClaimer):
// the claim is taken cluster-wide in etcd first — one transaction, so two
// nodes can never both hold a single-node volume — and then on this node by
// the local catalog, which does what a claim does here (ControllerPublish,
// the node's volume limit, its own record). A local claim that fails gives
// the cluster-wide one back. A release goes the other way: here first, then
// in etcd; an etcd that does not answer makes the release retryable, and
// the volume reconciler tries it again (a local release of a claim that is
// gone is not an error).
import { ClaimError, type ClaimableVolume, type VolumeCapability, type VolumeClaimRequest, type VolumeClaimResult, type VolumeClaimer } from '@csiplug/volumes';
import type { EtcdVolumeClaims } from './claims';

/** The local catalog as the cluster claimer uses it: its claimer, and a volume's capabilities. */
export interface LocalCatalog extends VolumeClaimer {
  getVolume(id: string): { capabilities: readonly VolumeCapability[] } | undefined;
}

export class ClusterVolumeClaimer implements VolumeClaimer {
  constructor(
    private readonly local: () => LocalCatalog,
    private readonly claims: EtcdVolumeClaims,
    private readonly nodeId: string,
  ) {}

  lookup(volumeId: string): Promise<ClaimableVolume> {
    return this.local().lookup(volumeId);
  }

  async claim(request: VolumeClaimRequest, options?: { signal?: AbortSignal }): Promise<VolumeClaimResult> {
    const local = this.local();
    const volume = local.getVolume(request.volumeId);
    if (!volume) {
      // The local catalog says why (an unknown volume is not retryable).
      await local.lookup(request.volumeId);
      throw new ClaimError(`volume "${request.volumeId}" is not in this node's catalog`, false);
    }
    await this.claims.claim({ id: request.volumeId, capabilities: volume.capabilities }, request, this.nodeId);
    try {
      return await local.claim(request, options);
    } catch (err) {
      // Not claimed here: the cluster-wide claim goes too. (With etcd away at this very moment it stays, held for an alloc that holds nothing;
      // releasing a down node's claims — releaseNode — clears it. Issue 16 has the sweep still to build.)
      await this.claims.release(request.volumeId, request.allocId).catch(() => undefined);
      throw err;
    }
  }

  async release(volumeId: string, allocId: string, options?: { signal?: AbortSignal }): Promise<void> {
    await this.local().release(volumeId, allocId, options);
    await this.claims.release(volumeId, allocId);
  }
}
