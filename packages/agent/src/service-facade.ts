// The agent's service facade: AgentService (service.ts, what the HTTP API
// serves) as one object over the parts that implement it — jobs
// (job-service.ts), allocs (alloc-table.ts), volumes (volume-service.ts),
// the node and plugin views, the claim sweep and, in a cluster, cluster
// mode's node purge and routed controller calls. Each method only hands
// over to its part: what a request does is the part's.
import type { Event } from '@csiplug/core';
import type { AgentContext } from './agent-context';
import { NotFoundError } from './agent-errors';
import type { AllocTable } from './alloc-table';
import type { ClaimSweep, ReleasedClaim } from './claim-sweep';
import type { ClusterMode } from '@csiplug/cluster';
import type { JobPlan } from '@csiplug/jobspec';
import type { JobService } from './job-service';
import type { LogRange, LogSlice } from '@csiplug/api';
import type { JobSpec } from '@csiplug/jobspec';
import type { NodeViews } from './node-views';
import type { PluginViews } from './plugin-views';
import type {
  AgentEvent,
  AgentHealth,
  AgentService,
  AllocView,
  ExternalVolumeView,
  JobView,
  MountUsageView,
  NodeList,
  NodePurgeResult,
  NodeView,
  Page,
  PluginView,
  RoutedAnswer,
  RunJobOptions,
  RunJobResult,
  SnapshotListOptions,
  SnapshotRequestOptions,
  SnapshotView,
  VolumeDetachResult,
  VolumeView,
} from '@csiplug/api';
import type { VolumeSpec } from '@csiplug/jobspec';
import type { VolumeService } from './volume-service';

/** The parts the facade hands over to. */
export interface ServiceParts {
  ctx: AgentContext;
  jobs: JobService;
  allocs: AllocTable;
  volumes: VolumeService;
  nodes: NodeViews;
  plugins: PluginViews;
  claimSweep: ClaimSweep;
  cluster: ClusterMode | undefined;
  onEvent: Event<AgentEvent>;
}

export class ServiceFacade implements AgentService {
  readonly onEvent: Event<AgentEvent>;

  constructor(protected readonly parts: ServiceParts) {
    this.onEvent = parts.onEvent;
  }

  health(): AgentHealth {
    return this.parts.nodes.health();
  }
  node(): NodeView {
    return this.parts.nodes.node();
  }
  listNodes(): Promise<NodeList> {
    return this.parts.nodes.listNodes();
  }
  /** `node purge`: a down node of the cluster gone for good. */
  async purgeNode(name: string): Promise<NodePurgeResult> {
    this.parts.ctx.checkOpen();
    const { cluster } = this.parts;
    if (!cluster) throw new NotFoundError('this agent is not in a cluster: it is its only node, and a node is purged only from a cluster');
    return cluster.volumes.purgeNode(name);
  }

  listJobs(): JobView[] {
    return this.parts.jobs.listJobs();
  }
  getJob(id: string): JobView | undefined {
    return this.parts.jobs.getJob(id);
  }
  runJob(job: JobSpec, options?: RunJobOptions): Promise<RunJobResult> {
    return this.parts.jobs.runJob(job, options);
  }
  planJob(job: JobSpec): JobPlan {
    return this.parts.jobs.planJob(job);
  }
  stopJob(id: string, options?: { purge?: boolean }): Promise<JobView> {
    return this.parts.jobs.stopJob(id, options);
  }

  listAllocs(): AllocView[] {
    return this.parts.allocs.listAllocs();
  }
  getAlloc(id: string): AllocView | undefined {
    return this.parts.allocs.getAlloc(id);
  }
  allocLogs(allocId: string, task: string, stream: 'stdout' | 'stderr', range?: LogRange): Promise<LogSlice> {
    return this.parts.allocs.allocLogs(allocId, task, stream, range);
  }

  listPlugins(): PluginView[] {
    return this.parts.plugins.listPlugins();
  }
  getPlugin(id: string): PluginView | undefined {
    return this.parts.plugins.getPlugin(id);
  }
  /** Cluster mode, agent to agent: one CSI call made on this node's own controller of the plugin (never a routed one). */
  answerRoutedCall(plugin: string, service: string, rpc: string, request: unknown, signal?: AbortSignal): Promise<RoutedAnswer> {
    this.parts.ctx.checkOpen();
    const { cluster } = this.parts;
    if (!cluster) throw new NotFoundError('this agent is not in a cluster: no controller call is routed to it');
    return cluster.volumes.answerRoutedCall(plugin, service, rpc, request, signal);
  }

  listVolumes(): VolumeView[] {
    return this.parts.volumes.listVolumes();
  }
  getVolume(id: string): VolumeView | undefined {
    return this.parts.volumes.getVolume(id);
  }
  registerVolume(spec: VolumeSpec): Promise<VolumeView> {
    return this.parts.volumes.registerVolume(spec);
  }
  createVolume(spec: VolumeSpec, options?: { forwarded?: boolean }): Promise<VolumeView> {
    return this.parts.volumes.createVolume(spec, options);
  }
  deregisterVolume(id: string, options?: { force?: boolean }): Promise<void> {
    return this.parts.volumes.deregisterVolume(id, options);
  }
  deleteVolume(id: string, options?: { forwarded?: boolean; secrets?: Record<string, string> }): Promise<void> {
    return this.parts.volumes.deleteVolume(id, options);
  }
  volumeUsage(filter: { volumeId?: string; allocId?: string }): Promise<MountUsageView[]> {
    return this.parts.volumes.volumeUsage(filter);
  }
  createSnapshot(volumeId: string, name?: string, options?: SnapshotRequestOptions): Promise<SnapshotView> {
    return this.parts.volumes.createSnapshot(volumeId, name, options);
  }
  deleteSnapshot(pluginId: string, snapshotId: string, options?: { secrets?: Record<string, string> }): Promise<void> {
    return this.parts.volumes.deleteSnapshot(pluginId, snapshotId, options);
  }
  listSnapshots(options: SnapshotListOptions): Promise<Page<SnapshotView>> {
    return this.parts.volumes.listSnapshots(options);
  }
  listExternalVolumes(options: { pluginId?: string; perPage?: number; nextToken?: string }): Promise<Page<ExternalVolumeView>> {
    return this.parts.volumes.listExternalVolumes(options);
  }
  detachVolume(volumeId: string, nodeId: string): Promise<VolumeDetachResult> {
    return this.parts.volumes.detachVolume(volumeId, nodeId);
  }
  sweepClaims(): Promise<ReleasedClaim[]> {
    return this.parts.claimSweep.sweep();
  }
}
