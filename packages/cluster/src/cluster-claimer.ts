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
//
// It is the one writer of this node's claims in etcd: besides claim and
// release (the volume reconciler's, and the agent's purge, detach and claim
// sweep, all through IVolumeClaimer), a claim the catalog holds is asserted
// here after each (re)join (reassert), the claims etcd holds under this
// node's identity are listed for the sweep (ownClaims), and a node gone for
// good (node purge) or down past its grace (a pass, jobs.ts) gives up its
// claims here (releaseNode).
import {
  ClaimError,
  type ClaimableVolume,
  type VolumeCapability,
  type VolumeClaimRequest,
  type VolumeClaimResult,
  type VolumeClaimView,
  type VolumeClaimer,
} from '@csiplug/volumes';
import type { ClusterClaim, EtcdVolumeClaims } from './claims';

/** The local catalog as the cluster claimer uses it: its claimer, and a volume's capabilities and claims. */
export interface LocalCatalog extends VolumeClaimer {
  getVolume(id: string): { capabilities: readonly VolumeCapability[]; claims: readonly VolumeClaimView[] } | undefined;
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
    /**
     * Whether a claim in etcd under this node's name is this agent's: its
     * identity's (or one written before identities, when this agent adopted
     * that node). Default: any claim under the node's name.
     */
    private readonly ownsClaim: (claim: ClusterClaim) => boolean = (claim) => claim.nodeId === nodeId,
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
      await this.claims
        .markPublished(request.volumeId, request.allocId, { csiNodeId: result.publishedTo, context: result.publishContext ?? {} })
        .catch((err: unknown) => {
          // The local catalog holds it all the same, and this node unpublishes it on release; only a node that never comes back needs it.
          this.warn?.(
            'the controller-publish state of a claim could not be written to etcd; should this node never come back, the volume stays published to it',
            { volume_id: request.volumeId, alloc_id: request.allocId, error: err instanceof Error ? err.message : String(err) },
          );
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

  /**
   * Once the node is in the cluster again: a claim this node's catalog holds
   * is claimed in etcd too (the same alloc again is granted as it stands);
   * one the catalog let go of meanwhile (a teardown finishing at the same
   * time) is given back there again. Throws ClaimError as claim does: a
   * refusal (another node holds the volume), or ECLAIM_ETCD_UNAVAILABLE
   * (try again).
   */
  async reassert(volumeId: string, allocId: string): Promise<void> {
    const volume = this.local().getVolume(volumeId);
    const held = volume?.claims.find((c) => c.allocId === allocId);
    if (!volume || !held) return;
    const request: VolumeClaimRequest = {
      volumeId,
      allocId,
      readOnly: held.mode === 'read',
      accessMode: held.accessMode,
      attachmentMode: held.attachmentMode,
    };
    await this.claims.claim({ id: volumeId, capabilities: volume.capabilities }, request, this.nodeId);
    if (
      this.local()
        .getVolume(volumeId)
        ?.claims.some((c) => c.allocId === allocId)
    )
      return;
    await this.claims.release(volumeId, allocId).catch((err: unknown) => {
      this.warn?.('a claim released here while it was asserted in etcd could not be given back there; the claim sweep tries again', {
        volume_id: volumeId,
        alloc_id: allocId,
        error: err instanceof Error ? err.message : String(err),
      });
    });
  }

  /** The claims etcd holds under this node's identity (for the claim sweep). Throws when etcd does not answer. */
  async ownClaims(): Promise<Array<{ volumeId: string; allocId: string }>> {
    const all = await this.claims.all();
    return all.flatMap(({ volumeId, claims }) => claims.filter((c) => this.ownsClaim(c)).map((c) => ({ volumeId, allocId: c.allocId })));
  }

  /** The claims of node `name` that were published to it (ControllerPublishVolume), cluster-wide: what a purge of that node unpublishes first. */
  async publishedTo(name: string): Promise<Array<{ volumeId: string; claim: ClusterClaim }>> {
    return (await this.claims.all()).flatMap(({ volumeId, claims }) =>
      claims.filter((c) => c.nodeId === name && c.published).map((claim) => ({ volumeId, claim })),
    );
  }

  /** Every claim of node `name` (gone for good: `node purge`; down past its grace: a pass) released, only while it has no live lease; returns the volumes touched. */
  releaseNode(name: string): Promise<string[]> {
    return this.claims.releaseNode(name);
  }
}
