// The claim sweep (Nomad's claim GC) and the agent's own releases: claims of
// allocs this node no longer has (purged, or lost with a state the last
// agent could not save) are released on a timer, and in a cluster the
// claims etcd holds under this node's identity that this node does not.
// Every release here — the sweep's, a purge's, a detach's — goes through
// the IVolumeClaimer (ctx.claimer): in a cluster that claimer releases here
// and then in etcd; nothing here writes a claim of its own.
import type { AgentContext } from './agent-context';
import { mountsOfAlloc } from './alloc-mounts';

/** What cluster mode gives the sweep. */
export interface ClusterClaims {
  /** Whether this agent holds its node now: another machine refused the same name must never release that node's claims. */
  readonly holdsNode: boolean;
  /** The claims etcd holds under this node's identity. Throws when etcd does not answer. */
  ownClaims(): Promise<Array<{ volumeId: string; allocId: string }>>;
}

export type ReleasedClaim = { volumeId: string; allocId: string };

export class ClaimSweep {
  /** The sweep's timer, from start until dispose. */
  private timer: { dispose(): void } | undefined;
  /** A sweep under way: the next round waits for it rather than running beside it. */
  private sweeping: Promise<unknown> | undefined;

  constructor(
    private readonly ctx: AgentContext,
    /** Cluster mode, once made (undefined for an agent on its own). */
    private readonly cluster: () => ClusterClaims | undefined = () => undefined,
  ) {}

  /** Sweeps every `claim_gc_interval` from now on. */
  start(): void {
    this.timer = this.ctx.clock.setInterval(() => {
      if (this.sweeping) return;
      this.sweeping = this.sweep()
        .catch((err) => this.ctx.logger.warn('the claim sweep failed; it runs again on its next round', { error: err }))
        .finally(() => (this.sweeping = undefined));
    }, this.ctx.config.claimGcInterval);
  }

  /** No new round; the one under way ends first. */
  async dispose(): Promise<void> {
    this.timer?.dispose();
    await this.sweeping;
  }

  /** One round: what it released. */
  async sweep(): Promise<ReleasedClaim[]> {
    const { ctx } = this;
    if (ctx.closed) return [];
    const released: ReleasedClaim[] = [];
    for (const volume of ctx.catalog.listVolumes()) {
      for (const claim of volume.claims) {
        if (ctx.closed) return released;
        // An alloc this node still has (a stopped one finishes its own teardown), could not restore, or still holds something for (a pending unmount) keeps its claim.
        if (ctx.allocs.has(claim.allocId) || ctx.allocs.unrestored.has(claim.allocId) || ctx.reconciler.list(claim.allocId).length > 0)
          continue;
        // Nor while anything is still mounted for it here (a record lost with its mount left): unpublishing the volume from under a mount would break CSI's order.
        const left = mountsOfAlloc(ctx.config.dataDir, volume.pluginId, claim.allocId, volume.id);
        if (left.length) {
          ctx.logger.warn(
            'the claim sweep keeps a claim of an alloc this node no longer has: its volume is still mounted here (volume detach unmounts it)',
            { volume_id: volume.id, alloc_id: claim.allocId, mounts: left },
          );
          continue;
        }
        try {
          await this.release(volume.id, claim.allocId);
          released.push({ volumeId: volume.id, allocId: claim.allocId });
          ctx.emit({
            topic: 'Volume',
            type: 'Claim released',
            message: `claim of volume "${volume.id}" by alloc ${claim.allocId} released by the claim sweep: this node has no such alloc`,
            volumeId: volume.id,
            allocId: claim.allocId,
          });
        } catch (err) {
          ctx.logger.warn('the claim sweep could not release a claim; it tries again on its next round', {
            volume_id: volume.id,
            alloc_id: claim.allocId,
            error: err,
          });
        }
      }
    }
    const cluster = this.cluster();
    if (cluster?.holdsNode && !ctx.closed) {
      try {
        released.push(...(await this.sweepCluster(cluster)));
      } catch (err) {
        ctx.logger.warn('the claim sweep could not read the claims in etcd; it tries again on its next round', { error: err });
      }
    }
    return released;
  }

  /**
   * The alloc's claim of the volume released through the claimer (in a
   * cluster: here, then in etcd). Released here but not in etcd (etcd away)
   * is said and left to the sweep, which finds it in etcd; a release that
   * failed here throws.
   */
  async release(volumeId: string, allocId: string): Promise<void> {
    try {
      await this.ctx.claimer.release(volumeId, allocId);
    } catch (err) {
      if (!this.cluster() || this.ctx.catalog.getVolume(volumeId)?.claims.some((c) => c.allocId === allocId)) throw err;
      this.ctx.logger.warn('the claim in etcd could not be released; the claim sweep tries again', {
        volume_id: volumeId,
        alloc_id: allocId,
        error: err,
      });
    }
  }

  /** Every claim (or controller publish) a purged alloc holds, released through the claimer; a failure is said, and the sweep tries again. */
  async releaseAllOf(allocId: string): Promise<void> {
    // Asked of the catalog, not read off the volume views: a publish cut short holds the volume too, and only the record shows it.
    for (const volumeId of this.ctx.catalog.volumesHeldBy(allocId)) {
      await this.release(volumeId, allocId).catch((err: unknown) =>
        this.ctx.logger.warn('releasing claims of a purged alloc failed', { alloc_id: allocId, volume_id: volumeId, error: err }),
      );
    }
  }

  /**
   * Claims in etcd held by this node for allocs it no longer has (a release
   * that reached the local catalog but not etcd): released there. A claim of
   * an alloc this node still has, could not restore, or holds a mount record
   * for, stays.
   */
  private async sweepCluster(cluster: ClusterClaims): Promise<ReleasedClaim[]> {
    const { ctx } = this;
    const released: ReleasedClaim[] = [];
    // Only this identity's: a claim of another machine under the same name (or of unknown identity, from before identities) is never listed.
    for (const { volumeId, allocId } of await cluster.ownClaims()) {
      if (ctx.closed) break;
      // Kept: a claim this node's catalog holds, or its reconciler has a record of (a claim in flight, a pending unmount), or of an alloc it could not restore.
      if (ctx.allocs.unrestored.has(allocId) || ctx.reconciler.list(allocId).some((r) => r.volumeId === volumeId)) continue;
      if (ctx.catalog.getVolume(volumeId)?.claims.some((c) => c.allocId === allocId)) continue;
      try {
        // Through the claimer: nothing here to release, then the claim in etcd.
        await ctx.claimer.release(volumeId, allocId);
        released.push({ volumeId, allocId });
        ctx.emit({
          topic: 'Volume',
          type: 'Claim released',
          message: `claim of volume "${volumeId}" by alloc ${allocId} released in the cluster by the claim sweep: this node holds no such claim`,
          volumeId,
          allocId,
        });
      } catch (err) {
        ctx.logger.warn('the claim sweep could not release a claim in etcd; it tries again on its next round', {
          volume_id: volumeId,
          alloc_id: allocId,
          error: err,
        });
      }
    }
    return released;
  }
}
