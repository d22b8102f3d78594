// The VolumeClaimer of an agent in cluster mode (bound to IVolumeClaimer):
// the claim is taken cluster-wide in etcd first — one transaction, so two
// nodes can never both hold a single-node volume — and then on this node by
// the local catalog, which does what a claim does here (ControllerPublish,
// the node's volume limit, its own record). A local claim that fails keeps
// the cluster-wide one: the volume reconciler wrote `claimed` before it
// asked, and undoes a failed mount through release, which gives both back —
// after the catalog has unpublished whatever a half-done ControllerPublish
// may have attached (giving etcd back at once would let another node claim
// a volume still attached here). A release goes here first, then in etcd;
// an etcd that does not answer makes it retryable, and the reconciler tries
// again (a local release of a claim that is gone is not an error). A claim
// waits (retryable) while the agent does not hold its node, and after each
// (re)join until the agent has made what runs on the node what the cluster
// placed there (an alloc that moved while the node was away claims nothing).
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
    /**
     * Whether this agent may claim as its node now: it holds the node (a
     * current lease) and, since it last joined, has made what runs here what
     * the cluster placed here (an alloc that moved while it was away must not
     * claim first).
     */
    private readonly holdsNode: () => boolean = () => true,
    /** Where what cannot be done and is not an error of the claim is said. */
    private readonly warn?: (message: string, fields: Record<string, unknown>) => void,
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
    if (!this.holdsNode()) {
      // Not joined (etcd away since the start), or the node name is another live agent's: a claim as that node could share a single-node volume.
      throw new ClaimError(
        `volume "${request.volumeId}": this agent does not hold node "${this.nodeId}" in the cluster yet (etcd away, the node name another live agent's, or just joined and still making what runs here what the cluster placed here); the claim waits until it does`,
        true,
        { code: 'ECLAIM_NODE_NOT_JOINED' },
      );
    }
    await this.claims.claim({ id: request.volumeId, capabilities: volume.capabilities }, request, this.nodeId);
    const result = await local.claim(request, options);
    // The controller-publish state goes to etcd too: another node can unpublish it from here should this node never come back.
    if (result.publishedTo !== undefined) {
      await this.claims.markPublished(request.volumeId, request.allocId, { csiNodeId: result.publishedTo, context: result.publishContext ?? {} }).catch((err: unknown) => {
        // The local catalog holds it all the same, and this node unpublishes it on release; only a node that never comes back needs it.
        this.warn?.('the controller-publish state of a claim could not be written to etcd; should this node never come back, the volume stays published to it', { volume_id: request.volumeId, alloc_id: request.allocId, error: err instanceof Error ? err.message : String(err) });
      });
    }
    return result;
  }

  /** A stale mount comes back up only while a claim could be made: not before the node settled since its last join. */
  remountRefusal(volumeId: string): string | undefined {
    if (this.holdsNode()) return undefined;
    return `volume "${volumeId}": this agent does not hold node "${this.nodeId}" in the cluster yet (or has just joined and is still making what runs here what the cluster placed here); a stale mount is brought back up once it does`;
  }

  async release(volumeId: string, allocId: string, options?: { signal?: AbortSignal }): Promise<void> {
    await this.local().release(volumeId, allocId, options);
    await this.claims.release(volumeId, allocId);
  }
}
