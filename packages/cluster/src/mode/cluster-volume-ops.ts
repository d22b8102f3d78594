// Cluster mode's share of the volume operations (config `cluster { … }`):
// a volume made here under an id reserved in etcd first, a create or delete
// sent to a node whose controller of the plugin is healthy, a volume
// deregistered or deleted only while no node claims it, and removed from the
// cluster's catalog with it; what was published to a node down past its
// grace (or purged) unpublished through a controller here; `node purge`; a
// routed controller call answered on this node's own controller.
import { ConflictError } from '@csiplug/core';
import { isNotFound, type CSIClient } from '@csiplug/csi';
import type { VolumeView } from '@csiplug/volumes';
import { ApiClient, ApiError, NotFoundError, type NodePurgeResult, type RoutedAnswer } from '@csiplug/api';
import type { VolumeSpec } from '@csiplug/jobspec';
import type { ClusterClaim } from '../claims';
import type { ClusterNode } from '../cluster-node';
import { externalIdOf } from '../cluster-volumes';
import { isEtcdAway } from '../connect';
import { ClusterJobsUnavailableError } from '../jobs';
import type { ClusterMembership } from '../membership';
import type { ClusterJobs } from '../node-share/cluster-jobs';
import { answerRoutedCall, healthyControllerNodes } from '../routed-controllers/cluster-controllers';
import type { ClusterAgent } from './cluster-agent';
import { ClusterUnavailableError } from './cluster-mode-errors';

/** An etcd call for the API: etcd away is a 503 that says so. */
export async function clusterCall<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof Error && isEtcdAway(err))
      throw new ClusterUnavailableError(`the cluster's etcd did not answer (${err.message}); nothing was changed, try again once it does`);
    if (err instanceof ClusterJobsUnavailableError) throw new ClusterUnavailableError(err.message);
    throw err;
  }
}

export class ClusterVolumeOps {
  constructor(
    private readonly agent: ClusterAgent,
    private readonly node: ClusterNode,
    private readonly jobs: ClusterJobs,
  ) {
    this.membership = node.membership;
  }

  private readonly membership: ClusterMembership;

  /** A machine refused its node name changes nothing in the cluster. */
  assertMember(): void {
    this.jobs.assertMember();
  }

  /**
   * A volume made here (created through this node's controller, or
   * registered) under an id reserved in etcd first — no other node makes
   * one under it meanwhile — and then written there whole for every node.
   * The make failing gives the id back. etcd away for the last write: the
   * volume is here and the next pass writes it.
   */
  async made(spec: VolumeSpec, make: () => Promise<VolumeView>, undo: () => Promise<unknown>): Promise<VolumeView> {
    const { jobs, agent } = this;
    await clusterCall(() => jobs.volumes.reserve(spec));
    try {
      let view: VolumeView;
      try {
        view = await make();
      } catch (err) {
        await jobs.volumes.cancel(spec.id).catch((e: unknown) =>
          agent.logger.warn("could not give back the reservation of a volume id whose make failed; this agent's next pass does", {
            volume_id: spec.id,
            error: e,
          }),
        );
        throw err;
      }
      let kept: boolean;
      try {
        kept = await jobs.volumes.finish(view);
      } catch (err) {
        agent.logger.warn('the volume is made here; etcd did not answer, and the cluster gets it at the next pass that reaches etcd', {
          volume_id: view.id,
          error: err,
        });
        return view;
      }
      if (!kept) {
        // Finished by a pass of this agent meanwhile (the same volume): made. Anything else: the reservation was removed by hand.
        const now = await clusterCall(() => jobs.store.volumes.get(view.id));
        const same = now && now.state === undefined && now.origin === this.membership.nodeName && externalIdOf(now) === view.externalId;
        if (!same) {
          await undo().catch((e: unknown) =>
            agent.logger.error(
              'a volume whose reservation in the cluster was removed could not be removed here again; remove it with csiplug volume delete',
              { volume_id: view.id, error: e },
            ),
          );
          throw new ConflictError(
            `volume "${view.id}": its reservation in the cluster was removed while it was made; nothing was kept, try again`,
          );
        }
      }
      return view;
    } finally {
      jobs.volumes.made(spec.id);
    }
  }

  /**
   * A controller operation routed to another node whose controller of the
   * plugin is healthy (as the nodes last said), with the agents' ACL token.
   * The next node is tried only when one could not be reached before it
   * began (refused connection, no controller there after all); a call that
   * may have been delivered is not sent twice.
   */
  async viaController<T>(
    pluginId: string,
    volumeId: string,
    what: 'create' | 'delete',
    call: (client: ApiClient) => Promise<T>,
  ): Promise<T> {
    const nodes = healthyControllerNodes(this.membership, pluginId).filter((n) => n.address);
    if (nodes.length === 0) {
      throw new NotFoundError(
        `no healthy controller of plugin "${pluginId}" on this node or any ready node of the cluster; run the plugin's controller or monolith job first, or check plugin_id`,
      );
    }
    const failures: string[] = [];
    const token = this.agent.settings.aclToken();
    for (const node of nodes) {
      const address = node.address;
      if (address === undefined) continue;
      const client = new ApiClient({ address, ...(token ? { token } : {}), timeoutMs: 120_000 });
      try {
        const result = await call(client);
        this.agent.logger.info(`volume ${what} made through another node's controller`, {
          volume_id: volumeId,
          plugin_id: pluginId,
          node: node.name,
        });
        return result;
      } catch (err) {
        const refused = err instanceof ApiError && err.status === 0 && /ECONNREFUSED|EHOSTUNREACH|ENETUNREACH/.test(err.message);
        const noController = err instanceof ApiError && err.status === 404 && /no (healthy )?controller/.test(err.message);
        if (!refused && !noController) {
          if (err instanceof ApiError && (err.status === 0 || err.status >= 500)) {
            throw new ClusterUnavailableError(
              `volume "${volumeId}": the ${what} was sent to node ${node.name}, whose answer did not come (${err.message}); it may be under way there: see csiplug volume status ${volumeId}`,
            );
          }
          throw err;
        }
        failures.push(`${node.name}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    throw new ClusterUnavailableError(
      `volume "${volumeId}": no node with a healthy controller of plugin "${pluginId}" could be reached (${failures.join('; ')})`,
    );
  }

  /** The volume grew: the cluster's record says the new capacity (a node registering it from now on sees it). */
  async recordGrowth(view: VolumeView): Promise<void> {
    const volumes = this.jobs.store.volumes;
    try {
      const record = await volumes.get(view.id);
      if (record && !(await volumes.replace({ ...record, volume: { ...view, claims: [] } })))
        throw new Error('its record changed meanwhile');
    } catch (err) {
      this.agent.logger.warn('the volume grew, but its record in the cluster could not say so; it still shows the old capacity', {
        volume_id: view.id,
        error: err,
      });
    }
  }

  /**
   * Whether this node's volume `id` is the cluster's (the same plugin and
   * external id as its record in etcd). A volume of the node's own under an
   * id the cluster also has is the node's alone: changing it never touches
   * the cluster's.
   */
  async isClusters(id: string, local: VolumeView | undefined): Promise<boolean> {
    if (!local) return false;
    this.jobs.assertMember();
    const record = await clusterCall(() => this.jobs.store.volumes.get(id));
    return (
      record !== undefined && record.state === undefined && record.pluginId === local.pluginId && externalIdOf(record) === local.externalId
    );
  }

  /** A volume claimed on any node is not deregistered or deleted (refused before anything is done). */
  async assertUnclaimed(id: string): Promise<void> {
    this.jobs.assertMember();
    const claims = await clusterCall(() => this.jobs.store.claims.claims(id));
    if (claims.length > 0) {
      throw new ConflictError(
        `volume "${id}" is claimed in the cluster (${claims.map((c) => `alloc ${c.allocId} on node ${c.nodeId}`).join(', ')}); stop the jobs using it first`,
      );
    }
  }

  /** Once gone here, the volume leaves the cluster's catalog too (only the record of that volume), and every node drops its copy. */
  async remove(id: string, was: VolumeView): Promise<void> {
    let removed = false;
    try {
      removed = await this.jobs.store.volumes.remove(
        id,
        (r) => r.state === undefined && r.pluginId === was.pluginId && externalIdOf(r) === was.externalId,
      );
    } catch (err) {
      throw new ClusterUnavailableError(
        `volume "${id}" is gone from this node, but the cluster's etcd did not answer (${err instanceof Error ? err.message : String(err)}): run the same command again once it does, so other nodes drop it too`,
      );
    }
    if (!removed)
      throw new ConflictError(
        `volume "${id}" is gone from this node, but the cluster's record of it changed meanwhile (a claim taken, or another volume under the id); that record stays`,
      );
  }

  /**
   * A node down past its grace is about to give up its claims; what was
   * published to it (the controller-publish state in etcd) is unpublished
   * through this node's controller of the plugin (its own or routed), so the
   * volume can be published to the node it moves to. Best effort: what
   * cannot be unpublished is said, and stays attached in the backend until
   * that node comes back or an operator detaches it.
   */
  async unpublishFrom(node: string, published: Array<{ volumeId: string; claim: ClusterClaim }>): Promise<boolean> {
    const { agent } = this;
    for (const { volumeId, claim } of published) {
      // The node back meanwhile keeps what it holds: nothing is detached under it, and the release waits (it is refused anyway).
      if (await this.membership.nodeAlive(node)) return false;
      const volume = agent.catalog.getVolume(volumeId);
      const target = claim.published?.csiNodeId;
      // Only the cluster's volume (never a node-local one under the same id).
      if (!volume || target === undefined || !(await this.isClusters(volumeId, volume).catch(() => false))) {
        agent.logger.warn(
          "a volume published to a node down past its grace is not in this node's catalog as the cluster has it; it cannot be unpublished from here",
          { node, volume_id: volumeId, alloc_id: claim.allocId },
        );
        continue;
      }
      if (!agent.registry.get('csi-controller', volume.pluginId)) {
        // Another node with a controller of the plugin does it: the release waits for its pass.
        const elsewhere = healthyControllerNodes(this.membership, volume.pluginId).length > 0;
        if (elsewhere) return false;
        agent.logger.warn(
          'a volume published to a node down past its grace cannot be unpublished: no node has a controller of its plugin; it stays attached to that node in the backend',
          { node, volume_id: volumeId, alloc_id: claim.allocId },
        );
        continue;
      }
      const client = agent.registry.dispense<CSIClient>('csi-controller', volume.pluginId);
      try {
        await client.controllerUnpublishVolume({ volumeId: volume.externalId, nodeId: target, secrets: { ...volume.secrets } });
        agent.logger.info('unpublished a volume from a node down past its grace, before its claim is released', {
          node,
          volume_id: volumeId,
          alloc_id: claim.allocId,
          csi_node_id: target,
        });
      } catch (err) {
        if (isNotFound(err)) continue;
        agent.logger.warn(
          'could not unpublish a volume from a node down past its grace; its claim is released all the same, and the next publish may be refused until it is detached',
          { node, volume_id: volumeId, alloc_id: claim.allocId, error: err },
        );
      } finally {
        client.dispose();
      }
    }
    return true;
  }

  /** `node purge`: a down node of the cluster gone for good (@csiplug/cluster's node-purge.ts). */
  purgeNode(name: string): Promise<NodePurgeResult> {
    return clusterCall(() => this.node.purge(name, (node, published) => this.unpublishFrom(node, published)));
  }

  /** Agent to agent: one CSI call made on this node's own controller of the plugin (never a routed one). */
  answerRoutedCall(plugin: string, service: string, rpc: string, request: unknown, signal?: AbortSignal): Promise<RoutedAnswer> {
    return answerRoutedCall(this.agent.registry, plugin, service, rpc, request, signal);
  }
}
