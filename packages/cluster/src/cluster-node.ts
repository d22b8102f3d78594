// This agent as a node of its cluster, as the cluster module (module.ts)
// makes it: its identity (read from the data dir, or made there once), its
// connection to etcd and its node under a lease (membership.ts), and the
// cluster volume claimer — the IVolumeClaimer of a cluster node, and the one
// writer of its claims in etcd. Opened when the module starts (the agent has
// locked its data dir by then; nothing waits for etcd), closed when it stops:
// the node's lease runs out unless the next agent renews it, and its claims
// in etcd stay (its mounts do too).
import { IClock, ILogger, errorMessage, type Clock, type Logger } from '@csiplug/core';
import { IVolumeCatalog } from '@csiplug/volumes';
import * as fs from 'fs';
import * as path from 'path';
import type { DependencyContainer } from 'tsyringe';
import type { ClusterClaim } from './claims';
import { ClusterVolumeClaimer, type LocalCatalog } from './cluster-claimer';
import { CLUSTER_INSTANCE_FILE, ClusterMembership, clusterInstanceId } from './membership';
import { purgeClusterNode, type PurgedNode } from './node-purge';
import type { ClusterOptions } from './options';
import { ClusterNodeNotOpenError } from './cluster-node-errors';

export interface ClusterNodeConfig {
  options: ClusterOptions;
  /** The agent's data dir: the node's identity file lives there. */
  dataDir: string;
}

export class ClusterNode {
  private opened: { membership: ClusterMembership; claimer: ClusterVolumeClaimer } | undefined;
  /** Whether the agent has settled this node since it last joined (its cluster passes say): until then a claim waits. */
  private settled: () => boolean = () => false;

  constructor(
    readonly config: ClusterNodeConfig,
    private readonly container: DependencyContainer,
  ) {}

  /**
   * Reads the node's identity from the data dir (made there on first use)
   * and connects to etcd; the node joins later, in the background (the
   * agent's cluster mode). Throws NodeIdentityFileError for an identity file
   * that cannot be read or holds no identity.
   */
  open(): void {
    if (this.opened) return;
    const { options, dataDir } = this.config;
    const logger = this.container.resolve<Logger>(ILogger);
    // The mount table and the lock see real paths: the identity file is kept beside them.
    const dir = fs.realpathSync(dataDir);
    // An id already in the data dir (not made now) may adopt a node record written before identities: its own, upgraded.
    const idBefore = fs.existsSync(path.join(dir, CLUSTER_INSTANCE_FILE));
    const membership = new ClusterMembership(
      options,
      clusterInstanceId(dir),
      this.container.resolve<Clock>(IClock),
      logger.child({ component: 'cluster' }),
      idBefore,
    );
    const claimer = new ClusterVolumeClaimer(
      () => this.container.resolve<LocalCatalog>(IVolumeCatalog),
      membership.claims,
      options.nodeName,
      () => membership.holdsNode && this.settled(),
      (message, fields) => logger.warn(message, fields),
      (claim: ClusterClaim) => membership.ownsClaim(claim),
    );
    this.opened = { membership, claimer };
  }

  /** This node in the cluster; throws ClusterNodeNotOpenError before the module started. */
  get membership(): ClusterMembership {
    return this.ready().membership;
  }

  /** The node's IVolumeClaimer; throws ClusterNodeNotOpenError before the module started. */
  get claimer(): ClusterVolumeClaimer {
    return this.ready().claimer;
  }

  /** From now on a claim of this node waits until `settled` says the node has settled since it last joined. */
  settledBy(settled: () => boolean): void {
    this.settled = settled;
  }

  /** `node purge`: the down node `name` gone for good (node-purge.ts). */
  purge(
    name: string,
    unpublishFrom: (node: string, published: Array<{ volumeId: string; claim: ClusterClaim }>) => Promise<boolean>,
  ): Promise<PurgedNode> {
    const { membership, claimer } = this.ready();
    return purgeClusterNode(membership, claimer, name, unpublishFrom);
  }

  /** Lets the lease run out and closes the connection; never waits on etcd. Idempotent. */
  async close(): Promise<void> {
    await this.opened?.membership
      .dispose()
      .catch((err: unknown) =>
        this.container.resolve<Logger>(ILogger).warn('leaving the cluster connection failed', { error: errorMessage(err) }),
      );
  }

  private ready(): { membership: ClusterMembership; claimer: ClusterVolumeClaimer } {
    if (!this.opened) throw new ClusterNodeNotOpenError(this.config.options.nodeName);
    return this.opened;
  }
}
