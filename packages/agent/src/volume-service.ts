// The volumes part of the agent's service facade: the catalog's volumes with
// this node's mounts of each, register, create (or expand), deregister and
// delete — in a cluster under the cluster's catalog too (@csiplug/cluster's ClusterVolumeOps)
// — usage, snapshots, the plugin's own volumes, and detach, which releases
// each claim through the claimer (claim-sweep.ts), never by hand.
import { ValidationError } from '@csiplug/core';
import { type MountCheckView, VolumeUnchangedError } from '@csiplug/volumes';
import type { AgentContext } from './agent-context';
import { ConflictError } from '@csiplug/core';
import { NotFoundError } from './agent-errors';
import { mountsOfAlloc } from './alloc-mounts';
import { listingPlugin } from './listing-plugin';
import type { ClaimSweep } from './claim-sweep';
import type { ClusterVolumeOps } from '@csiplug/cluster';
import type {
  ExternalVolumeView,
  MountUsageView,
  Page,
  SnapshotListOptions,
  SnapshotRequestOptions,
  SnapshotView,
  VolumeDetachResult,
  VolumeMountView,
  VolumeView,
} from '@csiplug/api';
import { volumeSpecToDocument, type VolumeSpec } from '@csiplug/jobspec';

export class VolumeService {
  constructor(
    private readonly ctx: AgentContext,
    private readonly claimSweep: ClaimSweep,
    /** Whether this node has (or is starting) a controller of the plugin (job-service.ts). */
    private readonly controlsHere: (pluginId: string) => boolean,
    /** Cluster mode's share of the volume operations, once made (undefined for an agent on its own). */
    private readonly cluster: () => ClusterVolumeOps | undefined,
    /** The plugins the agent knows (here and, in a cluster, on other nodes): named when a create finds no controller. */
    private readonly knownPlugins: () => string[],
  ) {}

  listVolumes(): VolumeView[] {
    return this.ctx.catalog.listVolumes();
  }

  getVolume(id: string): VolumeView | undefined {
    const { catalog, reconciler } = this.ctx;
    const volume = catalog.getVolume(id);
    if (!volume) return undefined;
    const checks = new Map(reconciler.mountChecks().map((c) => [`${c.allocId}/${c.name}`, c]));
    const mounts: VolumeMountView[] = reconciler
      .list()
      .filter((r) => r.volumeId === id)
      .map((r) => {
        const check = checks.get(`${r.allocId}/${r.name}`);
        return {
          allocId: r.allocId,
          name: r.name,
          desired: r.desired,
          claimed: r.claimed,
          staged: r.staged,
          published: r.published,
          ...(r.targetPath !== undefined ? { targetPath: r.targetPath } : {}),
          pendingUnmount: r.desired === 'unmounted',
          attempts: r.attempts,
          ...(r.lastError !== undefined ? { lastError: r.lastError } : {}),
          since: r.since,
          ...(check ? { check: checkOf(check) } : {}),
        };
      });
    return { ...volume, mounts };
  }

  async registerVolume(spec: VolumeSpec): Promise<VolumeView> {
    this.ctx.checkOpen();
    const { catalog } = this.ctx;
    const cluster = this.cluster();
    const existing = catalog.getVolume(spec?.id);
    if (existing) {
      // Nomad's register of a volume it has updates it; a cluster's volume is every node's, and its update is not built yet.
      if (cluster && (await cluster.isClusters(existing.id, existing)))
        throw new ConflictError(
          `volume "${existing.id}" is the cluster's: a register cannot update a cluster volume yet; deregister it (once unclaimed) and register it again`,
        );
      return this.updateRegistered(existing, spec, 'register');
    }
    if (!cluster) return catalog.registerVolume(spec);
    // In a cluster the id is the cluster's: reserved there first (refused when another node has it), then registered here.
    return cluster.made(
      spec,
      () => catalog.registerVolume(spec),
      () => catalog.deregisterVolume(spec.id),
    );
  }

  /**
   * A volume the catalog has, registered or created again: as Nomad's Register
   * (CSIVolume.Merge) and Create (csi_endpoint.go reconcileVolume: Merge, then
   * expand), the update is checked first, the volume grown, and only then
   * stored — a refusal or a failed growth stores nothing. A create asks the
   * plugin whenever it gives a capacity (a node-side expansion still owed is
   * driven again); a register only to grow.
   */
  private async updateRegistered(existing: VolumeView, spec: VolumeSpec, how: 'register' | 'create'): Promise<VolumeView> {
    const { catalog } = this.ctx;
    const { growTo } = catalog.checkRegisterUpdate(spec);
    const asked = how === 'create' ? spec.capacityMin !== undefined || spec.capacityMax !== undefined : growTo !== undefined;
    let nodeExpansion: VolumeView['nodeExpansion'];
    if (asked) {
      try {
        // With the update's secrets: they replace the volume's (Merge), and rotated ones may be all the storage takes now.
        nodeExpansion = (await this.expandVolume(existing, spec, { secrets: spec.secrets })).nodeExpansion;
      } catch (err) {
        // Grown already (another call got there first, or the same capacity asked again): nothing to grow is no error for an update.
        if (!(err instanceof VolumeUnchangedError)) throw err;
      }
    }
    const updated = await catalog.registerVolume(spec);
    return nodeExpansion ? { ...updated, nodeExpansion } : updated;
  }

  async createVolume(spec: VolumeSpec, options: { forwarded?: boolean } = {}): Promise<VolumeView> {
    this.ctx.checkOpen();
    const { catalog } = this.ctx;
    const cluster = this.cluster();
    const existing = catalog.getVolume(spec?.id);
    // Nomad's Create of a volume it has reconciles it (Merge, then expand): the Terraform provider's update is a create again.
    if (existing && !(cluster && (await cluster.isClusters(existing.id, existing)))) return this.updateRegistered(existing, spec, 'create');
    // A cluster's volume: a create again with a larger capacity expands it (its update is not built yet).
    if (existing && (spec.capacityMin !== undefined || spec.capacityMax !== undefined)) {
      // Only the capacity of an existing volume changes this way: a content source would silently not be applied.
      if (spec.snapshotId !== undefined || spec.cloneId !== undefined) {
        throw new ValidationError(
          `volume "${spec.id}" exists already: ${spec.snapshotId !== undefined ? 'snapshot_id' : 'clone_id'} is for a new volume (pick another id, or delete the volume first)`,
          spec.snapshotId !== undefined ? 'snapshot_id' : 'clone_id',
        );
      }
      // The spec's secrets, when it gives any, are the ones the storage takes now (Nomad's Create merges them in first).
      const secrets = Object.keys(spec.secrets).length > 0 ? { secrets: spec.secrets } : {};
      if (!cluster) return this.expandVolume(existing, spec, secrets);
      const ours = await cluster.isClusters(existing.id, existing);
      const grown = await this.expandVolume(existing, spec, secrets);
      // The cluster's record says the new capacity (a node registering it from now on sees it).
      if (ours) await cluster.recordGrowth(grown);
      return grown;
    }
    const here = this.controlsHere(spec.pluginId);
    if (cluster) {
      cluster.assertMember();
      // No controller of the plugin here: the create goes to a node whose controller is healthy (once: a forwarded create goes no further).
      if (!here && !options.forwarded)
        return cluster.viaController(spec.pluginId, spec.id, 'create', (c) =>
          c.createVolume(volumeSpecToDocument(spec), { forwarded: true }),
        );
    }
    if (!here) {
      const known = this.knownPlugins();
      throw new NotFoundError(
        `no controller of plugin "${spec.pluginId}" is registered on this node and no job here runs one (plugins: ${known.join(', ') || 'none'}); run the plugin's controller or monolith job first, or check plugin_id`,
      );
    }
    if (!cluster) return catalog.createVolume(spec);
    return cluster.made(
      spec,
      () => catalog.createVolume(spec),
      () => catalog.deleteVolume(spec.id),
    );
  }

  async deregisterVolume(id: string, options?: { force?: boolean }): Promise<void> {
    this.ctx.checkOpen();
    const cluster = this.cluster();
    const before = this.ctx.catalog.getVolume(id);
    const ours = cluster !== undefined && before !== undefined && (await cluster.isClusters(id, before));
    if (ours) await cluster.assertUnclaimed(id);
    await this.ctx.catalog.deregisterVolume(id, options);
    if (ours) await cluster.remove(id, before);
  }

  async deleteVolume(id: string, options: { forwarded?: boolean; secrets?: Record<string, string> } = {}): Promise<void> {
    this.ctx.checkOpen();
    const cluster = this.cluster();
    const before = this.ctx.catalog.getVolume(id);
    const ours = cluster !== undefined && before !== undefined && (await cluster.isClusters(id, before));
    if (ours) await cluster.assertUnclaimed(id);
    // No controller here: deleted through a node that has one (which also removes it from the cluster).
    if (ours && !options.forwarded && !this.controlsHere(before.pluginId)) {
      await cluster.viaController(before.pluginId, id, 'delete', (c) =>
        c.deleteVolume(id, { forwarded: true, ...(options.secrets ? { secrets: options.secrets } : {}) }),
      );
      return;
    }
    await this.ctx.catalog.deleteVolume(id, options.secrets ? { secrets: options.secrets } : {});
    if (ours) await cluster.remove(id, before);
  }

  volumeUsage(filter: { volumeId?: string; allocId?: string }): Promise<MountUsageView[]> {
    this.ctx.checkOpen();
    if (filter.volumeId !== undefined && !this.ctx.catalog.getVolume(filter.volumeId))
      return Promise.reject(new NotFoundError(`volume "${filter.volumeId}" not found`));
    return this.ctx.reconciler.usage(filter);
  }

  createSnapshot(volumeId: string, name?: string, options: SnapshotRequestOptions = {}): Promise<SnapshotView> {
    this.ctx.checkOpen();
    return this.ctx.catalog.createSnapshot(volumeId, name, options);
  }

  deleteSnapshot(pluginId: string, snapshotId: string, options: { secrets?: Record<string, string> } = {}): Promise<void> {
    this.ctx.checkOpen();
    return this.ctx.catalog.deleteSnapshot(pluginId, snapshotId, options);
  }

  async listSnapshots(options: SnapshotListOptions): Promise<Page<SnapshotView>> {
    this.ctx.checkOpen();
    const pluginId = listingPlugin(options.pluginId, this.ctx.csiManager.plugins(), (c) => c.capabilities.listSnapshots, 'snapshots');
    return this.ctx.catalog.listSnapshots(pluginId, options);
  }

  async listExternalVolumes(options: { pluginId?: string; perPage?: number; nextToken?: string }): Promise<Page<ExternalVolumeView>> {
    this.ctx.checkOpen();
    const pluginId = listingPlugin(options.pluginId, this.ctx.csiManager.plugins(), (c) => c.supportsListVolumes, 'volumes');
    return this.ctx.catalog.listExternalVolumes(pluginId, options);
  }

  async detachVolume(volumeId: string, nodeId: string): Promise<VolumeDetachResult> {
    this.ctx.checkOpen();
    const { ctx } = this;
    const volume = ctx.catalog.getVolume(volumeId);
    if (!volume) throw new NotFoundError(`volume "${volumeId}" not found`);
    const pluginNode = ctx.csiManager.pluginInfo('csi-node', volume.pluginId)?.node?.nodeId;
    // This node's ID as every route gives it (in a cluster its node name), its node_id, or its plugin's node id.
    const shownId = ctx.config.cluster?.nodeName ?? ctx.config.nodeId;
    if (nodeId !== shownId && nodeId !== ctx.config.nodeId && nodeId !== pluginNode) {
      throw new ValidationError(
        `node "${nodeId}" is not this node (${shownId}${pluginNode && pluginNode !== shownId ? `, node ${pluginNode} to plugin ${volume.pluginId}` : ''}): detach a volume through the agent of its node`,
        'node',
      );
    }
    const broken = volume.claims.filter((c) => ctx.allocs.unrestored.has(c.allocId)).map((c) => c.allocId);
    if (broken.length) {
      throw new ConflictError(
        `volume "${volumeId}" is claimed by alloc${broken.length > 1 ? 's' : ''} ${broken.join(', ')}, which this agent could not restore (its saved state could not be read or rebuilt; its tasks were left running): fix or remove that state and restart the agent before you detach the volume`,
      );
    }
    const live = volume.claims.filter((c) => ctx.allocs.live(c.allocId)).map((c) => c.allocId);
    if (live.length) {
      throw new ConflictError(
        `volume "${volumeId}" is claimed by running alloc${live.length > 1 ? 's' : ''} ${live.join(', ')}; stop ${live.length > 1 ? 'them' : 'it'} (job stop) before you detach the volume`,
      );
    }
    const released: string[] = [];
    for (const claim of volume.claims) {
      const names = ctx.reconciler
        .list(claim.allocId)
        .filter((r) => r.volumeId === volumeId)
        .map((r) => r.name);
      // Unmounted here first (unpublish, unstage), which releases the claim; a claim with nothing mounted is released directly.
      if (names.length) {
        const outcomes = await ctx.reconciler.unmount(claim.allocId, names);
        const failed = outcomes.find((o) => o.error !== undefined);
        if (failed)
          throw new ConflictError(
            `volume "${volumeId}" could not be unmounted for alloc ${claim.allocId}: ${String(failed.error instanceof Error ? failed.error.message : failed.error)}; it is retried in the background (volume status shows it)${released.length ? `; claims released before it: ${released.join(', ')}` : ''}`,
          );
      } else {
        // No record of what was mounted for it: a mount left here is not this agent's to take down blindly.
        const left = mountsOfAlloc(ctx.config.dataDir, volume.pluginId, claim.allocId, volume.id);
        if (left.length)
          throw new ConflictError(
            `volume "${volumeId}" is still mounted for alloc ${claim.allocId} at ${left.join(', ')}, and no mount record says how: unmount it (or run the agent with -reconcile-orphans), then detach again${released.length ? `; claims released before it: ${released.join(', ')}` : ''}`,
          );
      }
      await this.claimSweep.release(volumeId, claim.allocId);
      released.push(claim.allocId);
    }
    ctx.logger.info('volume detached', { volume_id: volumeId, node_id: nodeId, released });
    return { volumeId, nodeId, released };
  }

  /**
   * Grows a volume (the controller side, then every live mount here): online
   * when the node plugin expands ONLINE (the catalog refuses a claimed volume
   * of any other), else owed and made when each mount is next published.
   */
  private async expandVolume(
    existing: VolumeView,
    spec: VolumeSpec,
    options: { secrets?: Record<string, string> } = {},
  ): Promise<VolumeView> {
    const { ctx } = this;
    if (spec.pluginId !== existing.pluginId) {
      throw new ValidationError(
        `volume "${existing.id}" exists on plugin "${existing.pluginId}"; a volume create of it on plugin "${spec.pluginId}" can neither expand nor move it`,
        'plugin_id',
      );
    }
    const grown = await ctx.catalog.expandVolume(
      existing.id,
      {
        ...(spec.capacityMin !== undefined ? { capacityMin: spec.capacityMin } : {}),
        ...(spec.capacityMax !== undefined ? { capacityMax: spec.capacityMax } : {}),
      },
      options,
    );
    if (!grown.nodeExpansionRequired) return this.getVolume(existing.id) ?? grown.volume;
    // CSI: only a plugin that expands ONLINE is asked while the volume is published (the catalog refused the rest while claimed).
    const online = ctx.csiManager.pluginInfo('csi-node', existing.pluginId)?.pluginCapabilities?.onlineExpansion === true;
    const nodeExpansion = await ctx.reconciler.expandMounted(existing.id, grown.capacityBytes, { online, ...options });
    for (const o of nodeExpansion) {
      if (o.error !== undefined)
        ctx.logger.warn('a node-side expansion failed; it is made when the mount is next published', {
          volume_id: existing.id,
          alloc_id: o.allocId,
          error: o.error,
        });
    }
    return { ...(this.getVolume(existing.id) ?? grown.volume), nodeExpansion };
  }
}

/** A live mount's check as the volume view shows it. */
function checkOf(c: MountCheckView): NonNullable<VolumeMountView['check']> {
  return { state: c.state, ...(c.message !== undefined ? { message: c.message } : {}), ...(c.time !== undefined ? { time: c.time } : {}) };
}
