// Cluster mode (config `cluster { … }`) as one object, made by the cluster
// module (IClusterMode) only when the agent is in a cluster: this node in the
// cluster (membership), the cluster's jobs and this node's share of them
// (node-share/cluster-jobs.ts), routed controllers
// (routed-controllers/cluster-controllers.ts), its share of the volume
// operations (cluster-volume-ops.ts), and the claims this node asserts in etcd after
// each (re)join — through the cluster claimer, the one writer of its claims
// there. What the rest of the agent asks of it are the parts of the views
// (nodes, plugins, jobs) only a cluster has.
import { ValidationError } from '@csiplug/core';
import { ClaimError } from '@csiplug/volumes';
import * as path from 'path';
import type { JobPlan, JobSpec } from '@csiplug/jobspec';
import type { JobView, NodeList, PluginInstanceView, PluginView, RunJobResult } from '@csiplug/api';
import type { ClusterVolumeClaimer } from '../cluster-claimer';
import type { ClusterNode } from '../cluster-node';
import { ClusterJobsUnavailableError, MAX_GROUP_COUNT } from '../jobs';
import type { ClusterMembership } from '../membership';
import type { NodeInfo } from '../node-registry';
import { ClusterJobs, QUEUED_REASON, queuedView } from '../node-share/cluster-jobs';
import { ControllerRouter } from '../routed-controllers/cluster-controllers';
import type { ClusterAgent } from './cluster-agent';
import { ClusterUnavailableError } from './cluster-mode-errors';
import { ClusterVolumeOps } from './cluster-volume-ops';

export class ClusterMode {
  readonly jobs: ClusterJobs;
  readonly controllers: ControllerRouter;
  readonly volumes: ClusterVolumeOps;
  /** This node in the cluster (the cluster module's). */
  readonly membership: ClusterMembership;
  /** The node's IVolumeClaimer, the one writer of its claims in etcd. */
  private readonly claimer: ClusterVolumeClaimer;
  /** Whether the rollouts the last agent left were resumed (after the node first settled). */
  private resumed = false;

  constructor(
    private readonly agent: ClusterAgent,
    node: ClusterNode,
  ) {
    const { settings, registry, csiManager, clock } = agent;
    const membership = node.membership;
    this.membership = membership;
    this.claimer = node.claimer;
    this.jobs = new ClusterJobs(
      membership,
      {
        localJob: (id) => agent.localJob(id),
        localJobIds: () => agent.localJobIds(),
        runLocal: (job) => agent.runLocal(job),
        stopLocal: (id, purge) => (agent.localJobView(id) ? agent.stopLocal(id, { purge }) : Promise.resolve()),
        catalog: agent.catalog,
        maxAllocsPerJob: settings.maxAllocsPerJob,
        afterPass: () => this.controllers.reconcile(),
        unpublishFrom: (node, published) => this.volumes.unpublishFrom(node, published),
        releaseNode: (name) => this.claimer.releaseNode(name),
      },
      clock,
      agent.loggerFor('cluster-jobs'),
      path.join(settings.dataDir, 'cluster', 'applied.json'),
    );
    this.controllers = new ControllerRouter({
      dataDir: settings.dataDir,
      registry,
      membership,
      servingController: (plugin) => {
        const info = csiManager.pluginInfo('csi-controller', plugin);
        return info && { allocId: info.allocId, healthy: info.healthy };
      },
      token: () => settings.aclToken(),
      clock,
      logger: agent.loggerFor('cluster-controllers'),
    });
    this.volumes = new ClusterVolumeOps(agent, node, this.jobs);
    // A claim of this node waits until it has settled since it last joined (ClusterVolumeClaimer asks).
    node.settledBy(() => this.jobs.settled);
    // Which plugins need a routed controller here follows the registry (a node plugin or a controller coming or going).
    // (The registry's emitter goes with its module, and this listener with it.)
    registry.onDidChange(() => void this.controllers.reconcile());
    // A controller of its own taking over (healthy) ends the routing; the node records (read every pass) say where controllers are.
    // What the node says of itself follows its plugins' health too (the CSI manager's emitter goes with its module).
    csiManager.onDidChangeHealth(() => {
      void this.controllers.reconcile();
      membership.refresh(() => this.nodeInfo());
    });
  }

  /** Whether this node has settled since it last joined: until then a claim of it waits (ClusterVolumeClaimer asks). */
  get settled(): boolean {
    return this.jobs.settled;
  }

  get holdsNode(): boolean {
    return this.membership.holdsNode;
  }

  /**
   * Joins in the background (an etcd that is away never holds the start);
   * on every (re)join what runs here is first made what the cluster placed
   * here — a node back after its work moved stops its copies — and only
   * then are its claims asserted in etcd. Passes and routed controllers
   * start now.
   */
  start(): void {
    this.membership.join(
      () => this.nodeInfo(),
      () =>
        void this.jobs.settleThen(async () => {
          if (!this.resumed) {
            this.resumed = true;
            this.agent.resumeRollouts();
          }
          await this.assertClaims();
        }),
    );
    if (this.agent.settings.aclToken() === undefined) {
      this.agent.logger.warn(
        "cluster mode without an ACL token: any job run through this agent's API runs on every node of the cluster; set acl { token } on every agent (the same token: agents call each other with it)",
      );
    }
    this.jobs.start();
    void this.controllers.reconcile();
  }

  /** No pass may run a job here or stop one from now on (first of the agent's shutdown). Idempotent: the cluster module's stop calls it too. */
  stopPasses(): Promise<void> {
    this.passesStopped ??= this.jobs.dispose().catch(() => undefined);
    return this.passesStopped;
  }

  /** The routed controllers go (after the workloads that may unpublish through them stopped). Idempotent, as stopPasses. */
  stopControllers(): Promise<void> {
    this.controllersStopped ??= this.controllers.dispose().catch(() => undefined);
    return this.controllersStopped;
  }

  private passesStopped: Promise<void> | undefined;
  private controllersStopped: Promise<void> | undefined;

  // ---- this node and the cluster's ----------------------------------------------

  /** What this node says of itself in its cluster. */
  nodeInfo(): NodeInfo {
    const { settings } = this.agent;
    const options = this.membership.options;
    const node = this.agent.node();
    const address = this.advertisedAddress();
    return {
      name: options.nodeName,
      nodeClass: options.nodeClass,
      meta: { ...options.meta },
      ...(options.datacenter ? { datacenter: options.datacenter } : {}),
      drivers: Object.entries(node.drivers)
        .filter(([, d]) => d.detected && d.healthy)
        .map(([name]) => name),
      plugins: node.plugins.map((p) => ({
        id: p.id,
        type: p.type,
        healthy: p.healthy,
        ...(p.topology ? { topology: p.topology } : {}),
        ...(typeof p.maxVolumes === 'number' ? { maxVolumes: p.maxVolumes } : {}),
      })),
      ...(address ? { address } : {}),
      version: node.version,
      maxAllocsPerJob: settings.maxAllocsPerJob,
    };
  }

  /** Where other agents reach this one: `cluster { advertise }`, else the bind address unless it is a wildcard (0.0.0.0, ::), which names no host. */
  private advertisedAddress(): string | undefined {
    const { settings } = this.agent;
    if (this.membership.options.advertise) return this.membership.options.advertise;
    const host = settings.bindAddr;
    if (host === '0.0.0.0' || host === '::' || host === '') return undefined;
    return `${settings.tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${settings.port}`;
  }

  async listNodes(): Promise<NodeList> {
    let nodes;
    try {
      nodes = await this.membership.list();
    } catch (err) {
      throw new ClusterUnavailableError(
        `the cluster's etcd did not answer (${err instanceof Error ? err.message : String(err)}); this node's tasks and mounts are untouched`,
      );
    }
    const { nodeName: self, identity } = this.membership;
    return {
      cluster: true,
      nodes: nodes.map((n) => ({
        name: n.name,
        ...(n.identity ? { identity: n.identity } : {}),
        status: n.status,
        nodeClass: n.nodeClass,
        ...(n.datacenter !== undefined ? { datacenter: n.datacenter } : {}),
        drivers: n.drivers,
        plugins: n.plugins.map((p) => ({ id: p.id, type: p.type, healthy: p.healthy })),
        address: n.address,
        updatedAt: n.updatedAt,
        self: n.name === self && n.identity === identity,
      })),
    };
  }

  // ---- plugins (ClusterPluginViews) -------------------------------------------------

  pluginView(id: string): PluginView['cluster'] {
    const seen = this.membership.lastSeenNodes;
    if (!seen) return undefined;
    // By node, then type: the order Nomad's maps keyed by node read back in (the API's plugin-wire.ts).
    const instances = seen.nodes
      .flatMap((n) =>
        n.plugins
          .filter((p) => p.id === id)
          .map((p) => ({ node: n.name, type: p.type, healthy: p.healthy && n.status === 'ready', nodeStatus: n.status })),
      )
      .sort((a, b) => a.node.localeCompare(b.node) || a.type.localeCompare(b.type));
    const count = (type: string, healthy: boolean) => instances.filter((i) => i.type === type && (!healthy || i.healthy)).length;
    return {
      controllersHealthy: count('csi-controller', true),
      controllersExpected: count('csi-controller', false),
      nodesHealthy: count('csi-node', true),
      nodesExpected: count('csi-node', false),
      instances,
      readAt: seen.at,
    };
  }

  routedView(id: string): NonNullable<PluginInstanceView['routed']> {
    return this.controllers.view(id);
  }

  pluginIds(): string[] {
    return (this.membership.lastSeenNodes?.nodes ?? []).flatMap((n) => n.plugins.map((p) => p.id));
  }

  // ---- jobs ---------------------------------------------------------------------------

  /** The cluster's jobs as last read, and those waiting here for etcd. */
  jobIds(): string[] {
    return [...this.jobs.queued().map((j) => j.id), ...(this.jobs.lastSeen()?.jobs ?? []).map((j) => j.record.id)];
  }

  /** The job here with where its slots are placed (as last read from etcd, at most a second or so old). */
  getJob(id: string, local: JobView | undefined): JobView | undefined {
    const queued = this.jobs.queued().find((j) => j.id === id);
    const seen = this.jobs.lastSeen()?.jobs.find((j) => j.record.id === id);
    if (queued) {
      const view = queuedView(
        queued.type === 'system' ? 'system' : 'service',
        seen?.record.version ?? 0,
        QUEUED_REASON,
        this.agent.clock.now(),
      );
      return { ...(local ?? clusterOnlyView(id, queued, view.version, false)), cluster: view };
    }
    if (!seen) return local;
    return {
      ...(local ?? clusterOnlyView(id, seen.record.spec, seen.record.version, seen.record.stopped)),
      submittedAt: seen.record.submittedAt,
      cluster: seen.view,
    };
  }

  /** The job goes to etcd and is placed there; each node runs its share. */
  async runJob(job: JobSpec): Promise<RunJobResult> {
    const { maxAllocsPerJob } = this.agent.settings;
    // Each node runs at most max_allocs_per_job of it: the cluster as a whole, that many per node it has.
    const big = job.groups.find((g) => g.count > MAX_GROUP_COUNT);
    if (big)
      throw new ValidationError(
        `job "${job.id}" group "${big.name}": count ${big.count} is more than a cluster job's group may ask for (${MAX_GROUP_COUNT})`,
        'count',
      );
    // The nodes as etcd has them now (the last read is up to seconds old: just after a start it may know only this node).
    const known = await this.membership.list().catch(() => this.membership.lastSeenNodes?.nodes ?? []);
    const nodes = Math.max(1, known.length);
    const wanted = job.groups.reduce((n, g) => n + g.count, 0);
    const limit = maxAllocsPerJob * nodes;
    if (wanted > limit) {
      throw new ValidationError(
        `job "${job.id}" asks for ${wanted} allocs; the cluster's ${nodes} node(s) run at most ${maxAllocsPerJob} each per job (limits { max_allocs_per_job }), ${limit} in all`,
        'count',
      );
    }
    let submitted;
    try {
      submitted = await this.jobs.submit(job);
    } catch (err) {
      if (err instanceof ClusterJobsUnavailableError) throw new ClusterUnavailableError(err.message);
      throw err;
    }
    const { record, unchanged, view } = submitted;
    if (submitted.queued)
      this.agent.emit({
        topic: 'Job',
        type: 'Job queued',
        message: `job ${job.id}: the cluster's etcd did not answer; the job waits on this agent and is submitted once it does`,
        jobId: job.id,
      });
    const plan: JobPlan = {
      jobId: job.id,
      changed: !unchanged,
      version: {
        ...(record.version > 0 || unchanged ? { from: unchanged ? record.version : record.version - 1 } : {}),
        to: record.version,
      },
      fields: [],
      groups: [],
    };
    return {
      jobId: job.id,
      allocIds: [],
      replaced: record.version > 0,
      unchanged,
      version: record.version,
      plan,
      ...(view ? { cluster: view } : {}),
    };
  }

  /** Stops (or purges) the job cluster-wide; undefined when the cluster does not know it (run here before this agent joined: stopped here, as on one agent). */
  async stopJob(id: string, options: { purge?: boolean }): Promise<JobView | undefined> {
    let record;
    try {
      record = await this.jobs.stop(id, !!options.purge);
    } catch (err) {
      if (err instanceof ClusterJobsUnavailableError) throw new ClusterUnavailableError(err.message);
      throw err;
    }
    // etcd away: stopped here now, in the cluster once etcd answers.
    if (record === 'queued') {
      this.agent.emit({
        topic: 'Job',
        type: 'Job stopped',
        message: `job ${id} stopped on this node; the cluster's etcd did not answer, and the stop is made there once it does`,
        jobId: id,
      });
      if (this.agent.localJobView(id)) return this.agent.stopLocal(id, options);
      return clusterOnlyView(id, { id, name: id, groups: [] }, 0, true);
    }
    if (!record) return undefined;
    this.agent.emit({
      topic: 'Job',
      type: 'Job stopped',
      message: `job ${id} stopped in the cluster${options.purge ? ' and purged' : ''}`,
      jobId: id,
    });
    return this.agent.localJobView(id) ?? clusterOnlyView(id, record.spec, record.version, true);
  }

  // ---- claims (ClusterClaims) ---------------------------------------------------------

  ownClaims(): Promise<Array<{ volumeId: string; allocId: string }>> {
    return this.claimer.ownClaims();
  }

  /**
   * Once the node is in the cluster: every claim this node's catalog holds is
   * claimed in etcd too (the same alloc again is granted as it stands). A
   * claim another node holds there is a conflict no one may resolve
   * silently: it is said loudly, and left for an operator.
   */
  async assertClaims(): Promise<void> {
    const { agent } = this;
    if (agent.closed) return;
    for (const volume of agent.catalog.listVolumes()) {
      for (const c of volume.claims) {
        // An alloc being stopped here (moved away, a smaller share) lets go of its claim: it is not claimed again in etcd.
        if (agent.allocStopping(c.allocId)) continue;
        // etcd away (just after joining, a flap): tried again with backoff; only a refusal is a conflict.
        for (let delay = 500; ; delay = Math.min(delay * 2, 10_000)) {
          // A later join (a lost lease) starts over: this one stops, and that one asserts once the node settled again.
          if (agent.closed || !this.membership.holdsNode || !this.jobs.settled) return;
          try {
            // Released here while it was claimed there (a teardown finishing at the same time): the claimer gives it back in etcd too.
            await this.claimer.reassert(volume.id, c.allocId);
            break;
          } catch (err) {
            if (err instanceof ClaimError && err.code === 'ECLAIM_ETCD_UNAVAILABLE') {
              await agent.clock.sleep(delay).catch(() => undefined);
              continue;
            }
            agent.logger.error(
              'a claim this node holds could not be claimed in the cluster: another node holds the volume in etcd, or etcd refused; both may be using it — check both nodes',
              { volume_id: volume.id, alloc_id: c.allocId, error: err },
            );
            agent.emit({
              topic: 'Volume',
              type: 'Claim conflict',
              message: `claim of volume "${volume.id}" by alloc ${c.allocId} here is not held in the cluster: ${err instanceof Error ? err.message : String(err)}`,
              volumeId: volume.id,
              allocId: c.allocId,
            });
            break;
          }
        }
      }
    }
  }
}

/** A cluster job with nothing of it on this node. */
function clusterOnlyView(id: string, job: JobSpec, version: number, stopped: boolean): JobView {
  return { id, name: typeof job?.name === 'string' ? job.name : id, status: stopped ? 'dead' : 'pending', version, job, allocs: [] };
}
