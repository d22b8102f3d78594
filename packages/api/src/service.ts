// AgentService: what the agent offers to its surfaces (HTTP API, CLI via the
// API, tests). The API layer only ever talks to this contract.
import type { Event } from '@csiplug/core';
import type { MountedVolume } from '@csiplug/hooks';
import type {
  ExternalVolumeView,
  MountUsageView,
  NodeExpandOutcome,
  Page,
  SnapshotView,
  VolumeSpec,
  VolumeView as CatalogVolumeView,
} from '@csiplug/volumes';
import type { Alloc, DeploymentStatus, JobSpec, TaskState } from '@csiplug/jobspec';
import type { LogRange, LogSlice } from './log-slice';
import type { JobPlan } from '@csiplug/jobspec';

/** One alloc slot of a cluster job and the node it is placed on (the API's own shape of @csiplug/cluster's Placement). */
export interface ClusterPlacementView {
  /** The alloc slot: `<group>/<index>` (service) or `<group>/@<node>` (system). */
  slot: string;
  group: string;
  /** The index in the group's count (service); 0 for system. */
  index: number;
  node: string;
  /** The job version it was placed for. */
  jobVersion: number;
  /** The node it was placed on before, when it was moved off a node down past its grace. */
  movedFrom?: string;
}

/** Slots of a group no node can take now, and why (the API's own shape of @csiplug/cluster's PendingSlots). */
export interface ClusterPendingView {
  group: string;
  /** How many slots. */
  count: number;
  /** The first few of them. */
  slots: string[];
  /** Node name → why not there ("etcd" when the job waits for etcd; empty when no node is ready). */
  reasons: Record<string, string>;
}

/** A cluster job as the agent shows it: its record, where its slots are, what could not be placed. */
export interface ClusterJobView {
  type: 'service' | 'system';
  version: number;
  stopped: boolean;
  placements: ClusterPlacementView[];
  /** Slots no node can take now, grouped by their reasons. */
  pending: ClusterPendingView[];
  /** ms since the epoch: when this was read from etcd. */
  readAt: number;
}

/** What an agent answers a routed controller call with (cluster mode, agent to agent): the plugin's response, or its gRPC status. */
export type RoutedAnswer = { response: unknown } | { error: { code: number; details: string } };

/** What `job plan` answers: the plan of a run, per group and alloc (deploy/job-plan.ts). */
export type { AllocUpdate, GroupPlan, JobPlan, PlannedAlloc } from '@csiplug/jobspec';
export type { FieldChange } from '@csiplug/jobspec';
export type { ReplacementOrder } from '@csiplug/jobspec';

/** The catalog's views of claims are its own (@csiplug/volumes); a volume's view adds what this node does with it. */
export type { ExternalVolumeView, MountUsageView, NodeExpandOutcome, Page, SnapshotView, VolumeClaimView } from '@csiplug/volumes';

/** What detaching a volume from a node did: the claims of allocs that are gone, unmounted here and released (unpublished by the controller). */
export interface VolumeDetachResult {
  volumeId: string;
  nodeId: string;
  /** The allocs whose claims were released. */
  released: string[];
}

/** One alloc's use of a volume on this node, as the volume reconciler keeps it (a pending unmount included). */
export interface VolumeMountView {
  allocId: string;
  /** The group's name for the volume. */
  name: string;
  desired: 'mounted' | 'unmounted';
  claimed: boolean;
  staged: boolean;
  published: boolean;
  targetPath?: string;
  /** Desired unmounted with something still held: retried in the background until done. */
  pendingUnmount: boolean;
  /** A live mount's last check (plugin away, ok, abnormal: the plugin says so, stale, busy: stale but in use, remounting) and what it found, when there was one. */
  check?: { state: 'plugin-away' | 'ok' | 'abnormal' | 'stale' | 'busy' | 'remounting'; message?: string; time?: number };
  /** Failed attempts since `desired` last changed, and the last error. */
  attempts: number;
  lastError?: string;
  /** When `desired` last changed (ms since the epoch). */
  since: number;
}

/** A volume as the catalog has it, with its mounts on this node (`volume status ID`). */
export interface VolumeView extends CatalogVolumeView {
  mounts?: VolumeMountView[];
  /** After an expansion (`volume create` again, larger): what each live mount's node-side expansion did. */
  nodeExpansion?: NodeExpandOutcome[];
}

/** One line of the event stream (/v1/event/stream, newline-delimited JSON). */
export interface AgentEvent {
  /** Monotonic per agent run. */
  index: number;
  topic: 'Task' | 'Alloc' | 'Plugin' | 'Volume' | 'Job' | 'Node';
  /** e.g. "Started", "Plugin became healthy", "Mount volume", "Deployment started", "Job reverted". */
  type: string;
  /** ms since the epoch */
  time: number;
  message: string;
  allocId?: string;
  task?: string;
  jobId?: string;
  pluginId?: string;
  volumeId?: string;
  details?: Record<string, string>;
}

export interface AllocView extends Alloc {
  tasks: Record<string, TaskState>;
  volumes: Record<string, MountedVolume>;
}

/** A job's latest deployment, as `job status` shows it. */
export interface DeploymentView {
  id: string;
  jobVersion: number;
  status: DeploymentStatus;
  description: string;
  /** ms since the epoch */
  createdAt: number;
  updatedAt: number;
  /** The version a failure goes back to under auto_revert. */
  revertTo?: number;
  /** Set when this deployment is a revert: the version that failed. */
  revertOf?: number;
  /** Per group: the count wanted, and the allocs this deployment placed, healthy and unhealthy. */
  groups: { name: string; desired: number; placed: number; healthy: number; unhealthy: number }[];
}

export interface JobView {
  id: string;
  name: string;
  /** running while any alloc wants to run; dead once all are stopped. */
  status: 'pending' | 'running' | 'dead';
  /** The current version: 0 when first run, one more for each run that changed the spec (a revert too). */
  version: number;
  /** The current version's spec. */
  job: JobSpec;
  /**
   * When the current version was submitted (ms since the epoch), as near as csiplug knows it: the cluster's record of
   * the submit; on one agent, the start of the current version's deployment, else the newest alloc's creation.
   */
  submittedAt?: number;
  deployment?: DeploymentView;
  /** In a cluster: where the job's slots are placed, and what no node could take (as last read from etcd). `allocs` are this node's. */
  cluster?: ClusterJobView;
  allocs: {
    id: string;
    name: string;
    group: string;
    jobVersion: number;
    clientStatus: Alloc['clientStatus'];
    desiredStatus: Alloc['desiredStatus'];
    /** The verdict of the deployment that placed it, once it has one. */
    healthy?: boolean;
  }[];
  /**
   * csiplug's own: volumes of stopped allocs of the job whose unmount is not
   * done yet (their node plugin away): the mount stays, and the volume
   * reconciler unmounts it and releases the claim once the plugin is back.
   */
  volumeUnmountsPending?: PendingUnmountView[];
}

/** A job as GET /v1/jobs lists it: without its spec (Nomad's JobListStub has none), with its groups' names (the JobSummary's). */
export type JobListView = Omit<JobView, 'job'> & { groups: string[] };

/** A stopped job as DELETE /v1/job/:id answers it: what the stop did to its allocs, without its spec. */
export type JobStopView = Omit<JobView, 'job'> & {
  /** Client side: the stop was done but its answer could not be read (why); the other fields then say only the id. */
  answerUnread?: string;
};

/** One volume of a stopped alloc still waiting for its unmount. */
export interface PendingUnmountView {
  allocId: string;
  /** The group's name for the volume. */
  name: string;
  volumeId: string;
  /** The node plugin the unmount waits for. */
  pluginId: string;
  /** Set when that plugin neither runs on the node nor is on its way: the unmount runs once it is back (its job started again). */
  pluginAway?: true;
  /** Why the last attempt failed, if one was made. */
  lastError?: string;
}

export interface PluginInstanceView {
  healthy: boolean;
  allocId: string;
  description: string;
  version: string;
  /** What the fingerprint found (node id, topology, capabilities…), as name → value pairs. */
  info: Record<string, string | number | boolean>;
  /** Cluster mode, a controller routed to other nodes (no controller of its own here): the node whose controller answered last, if one has. */
  routed?: { node?: string };
}

export interface PluginView {
  id: string;
  provider?: string;
  version?: string;
  controllerRequired: boolean;
  controllersHealthy: number;
  controllersExpected: number;
  nodesHealthy: number;
  nodesExpected: number;
  controller?: PluginInstanceView;
  node?: PluginInstanceView;
  /** Allocs running the plugin's tasks. */
  allocs: string[];
  /**
   * In cluster mode, the plugin across the cluster's nodes, as their records
   * say (read every 2 s): expected = nodes whose record lists the instance;
   * healthy = those among them that are ready and say it is healthy.
   */
  cluster?: {
    controllersHealthy: number;
    controllersExpected: number;
    nodesHealthy: number;
    nodesExpected: number;
    instances: { node: string; type: string; healthy: boolean; nodeStatus: 'ready' | 'down' }[];
    /** ms since the epoch: when the nodes were read. */
    readAt: number;
  };
}

/** How a job is run. */
export interface RunJobOptions {
  /**
   * Place new allocs even when a write claim they need is held by a live
   * alloc: they wait until it is free. A csiplug addition (Nomad's
   * JobRegisterRequest has no such flag: its scheduler queues a blocked
   * placement); over HTTP, `POST /v1/jobs?queue=true`, which `job run
   * -detach` sends.
   */
  queue?: boolean;
}

export interface RunJobResult {
  jobId: string;
  /**
   * The allocs this run placed at once: new indexes, and the first
   * create-before-destroy replacements. A rolling update places the rest
   * as it goes (events, `job status`). Empty when the job is unchanged.
   */
  allocIds: string[];
  /** True when the job existed before this run. */
  replaced: boolean;
  /** True when the spec is the current version's and every alloc runs it: nothing was touched. */
  unchanged: boolean;
  /** The job's version after this run. */
  version: number;
  /** The deployment that rolls the change out, when the run places or replaces allocs. */
  deploymentId?: string;
  /** What the run set under way (the same plan `job plan` shows). In a cluster, the job's version only: its allocs are the nodes'. */
  plan: JobPlan;
  /** In a cluster: where the job's slots are placed, and what no node could take (and why). */
  cluster?: ClusterJobView;
}

export interface AgentHealth {
  ok: boolean;
  nodeId: string;
  dataDir: string;
  version: string;
  startedAt: number;
  allocs: { running: number; pending: number; dead: number };
  plugins: { healthy: number; total: number };
}

/** This node as `node status` shows it: its id, its task drivers, and what its plugins' fingerprints found. */
export interface NodeView {
  id: string;
  /** The machine's host name. */
  name: string;
  version: string;
  dataDir: string;
  startedAt: number;
  status: 'ready' | 'down';
  /** The agent config's `datacenter`, `region` and `node_class` (Nomad's node.datacenter, node.region, node.class). */
  datacenter?: string;
  region?: string;
  nodeClass?: string;
  /** The machine's attributes as jobs read them (`attr.<name>`, its fingerprint at start; one it cannot tell is left out). */
  attributes?: Record<string, string>;
  /** The agent's client { meta }. */
  meta?: Record<string, string>;
  /** Task drivers and whether each can run tasks here (exec, docker and podman need runc). */
  drivers: Record<'exec' | 'raw_exec' | 'docker' | 'podman', { detected: boolean; healthy: boolean; description: string }>;
  /** Each CSI plugin instance on this node, as fingerprinted. */
  plugins: {
    id: string;
    type: string;
    healthy: boolean;
    description: string;
    nodeId?: string;
    topology?: Record<string, string>;
    maxVolumes?: number | 'unlimited';
  }[];
  allocs: { running: number; pending: number; dead: number };
}

/** The nodes `node status` lists: this one alone, or every node of the cluster, ready or down. */
export interface NodeList {
  /** Whether the agent runs in cluster mode (config `cluster { … }`). */
  cluster: boolean;
  nodes: {
    /** The node's ID, when it is not its name (an agent on its own: the config's node_id; a cluster's nodes are known by name). */
    id?: string;
    name: string;
    /** The node's identity (an id kept in its agent's data dir; absent on a record written before identities). */
    identity?: string;
    status: 'ready' | 'down';
    nodeClass: string;
    /** The node's datacenter (absent on a record written before datacenters). */
    datacenter?: string;
    drivers: string[];
    plugins: { id: string; type: string; healthy: boolean }[];
    /** The agent's API address, as it registered it. */
    address?: string;
    /** ms since the epoch: when the node last wrote its record. */
    updatedAt?: number;
    /** The node of the agent that answered. */
    self: boolean;
  }[];
}

/** What `node purge` did. */
export interface NodePurgeResult {
  name: string;
  /** The identity the removed record named (absent: written before node identities). */
  identity?: string;
  /** The volumes whose claims of the node were released. */
  releasedVolumes: string[];
}

/** Nomad's per-call `-secret` and `-parameter` of `volume snapshot create` (CSISnapshot's Secrets and Parameters). */
export interface SnapshotRequestOptions {
  secrets?: Record<string, string>;
  parameters?: Record<string, string>;
}

/** One page of a plugin's snapshots (Nomad's CSISnapshotListRequest), with the call's secrets. */
export interface SnapshotListOptions {
  pluginId?: string;
  perPage?: number;
  nextToken?: string;
  secrets?: Record<string, string>;
}

export interface AgentService {
  health(): AgentHealth;
  /** This node: id, drivers, the plugins' fingerprinted facts (node id, topology, volume limit). */
  node(): NodeView;
  /** Every node: this one alone, or the cluster's (ClusterUnavailableError, a 503, while its etcd does not answer). */
  listNodes(): Promise<NodeList>;
  /** `node purge`: a down node of the cluster gone for good — its claims released, its record removed (409 while it is live; 404 when unknown or not in a cluster). */
  purgeNode(name: string): Promise<NodePurgeResult>;

  listJobs(): JobView[];
  getJob(id: string): JobView | undefined;
  /**
   * Runs the job: nothing when it is unchanged; otherwise its changes are
   * set under way (a rolling deployment for replaced allocs) and the call
   * returns once they are accepted. A run whose new allocs would wait for a
   * write claim a live alloc holds is refused (a ConflictError naming the
   * holder) unless `queue` is set: then they are placed and wait for it.
   */
  runJob(job: JobSpec, options?: RunJobOptions): Promise<RunJobResult>;
  /** What runJob would change now; nothing is done. */
  planJob(job: JobSpec): JobPlan;
  /** Stops every alloc of the job (unmounting its volumes and releasing claims); resolves when they are stopped. */
  stopJob(id: string, options?: { purge?: boolean }): Promise<JobView>;

  listAllocs(): AllocView[];
  getAlloc(id: string): AllocView | undefined;
  /**
   * The bytes `range` picks out of a task's log, read from the file only as
   * the slice's stream is consumed (never the whole file at once).
   */
  allocLogs(allocId: string, task: string, stream: 'stdout' | 'stderr', range?: LogRange): Promise<LogSlice>;

  listPlugins(): PluginView[];
  getPlugin(id: string): PluginView | undefined;

  listVolumes(): VolumeView[];
  getVolume(id: string): VolumeView | undefined;
  /** Adds an existing volume (already on its plugin) to the catalog. */
  registerVolume(spec: VolumeSpec): Promise<VolumeView>;
  /** Creates the volume through its controller plugin's CreateVolume, then registers it. */
  createVolume(spec: VolumeSpec, options?: { forwarded?: boolean }): Promise<VolumeView>;
  /** Removes a volume from the catalog; refuses while claimed unless `force`. */
  deregisterVolume(id: string, options?: { force?: boolean }): Promise<void>;
  /** Deletes the volume through DeleteVolume, then deregisters it; refuses while claimed. `secrets` go over the volume's (Nomad's `volume delete -secret`). */
  deleteVolume(id: string, options?: { forwarded?: boolean; secrets?: Record<string, string> }): Promise<void>;
  /** Cluster mode, agent to agent: one CSI Identity or Controller call made on this node's own controller of the plugin. */
  answerRoutedCall(plugin: string, service: string, rpc: string, request: unknown, signal?: AbortSignal): Promise<RoutedAnswer>;
  /** NodeGetVolumeStats of each live mount of a volume, or of an alloc's volumes, on this node. */
  volumeUsage(filter: { volumeId?: string; allocId?: string }): Promise<MountUsageView[]>;
  /** CreateSnapshot of a volume (its controller must offer it); the call's secrets go over the volume's, its parameters are the snapshot's. */
  createSnapshot(volumeId: string, name?: string, options?: SnapshotRequestOptions): Promise<SnapshotView>;
  /** DeleteSnapshot on the plugin's controller, with the call's secrets. */
  deleteSnapshot(pluginId: string, snapshotId: string, options?: { secrets?: Record<string, string> }): Promise<void>;
  /** ListSnapshots of a plugin (the only one that lists snapshots when none is named; an error when none does), one page. */
  listSnapshots(options: SnapshotListOptions): Promise<Page<SnapshotView>>;
  /** ListVolumes of a plugin (every plugin that lists its volumes when none is named), one page, marking the catalogued ones. */
  listExternalVolumes(options: { pluginId?: string; perPage?: number; nextToken?: string }): Promise<Page<ExternalVolumeView>>;
  /**
   * Detaches a volume from a node (this one): the claims of allocs that are
   * gone (or stopped) are unmounted here and released, which unpublishes
   * them through the controller. Refused while a running alloc claims it.
   */
  detachVolume(volumeId: string, nodeId: string): Promise<VolumeDetachResult>;
  /** Releases the claims of allocs this node no longer has (Nomad's claim GC); returns what it released. */
  sweepClaims(): Promise<{ volumeId: string; allocId: string }[]>;

  readonly onEvent: Event<AgentEvent>;
}
