// What cluster mode (cluster-mode.ts, cluster-volume-ops.ts) uses of the
// agent it runs in, and nothing else of it: a few settings, the node's
// plugin registry, CSI manager and volume catalog, the agent's clock, log
// and event stream, this node as the API shows it, and its local jobs —
// the share of each cluster job this node runs goes through them. The agent
// binds it to IClusterAgent: the cluster package never imports the agent.
import type { Clock, Logger } from '@csiplug/core';
import type { CSIManager } from '@csiplug/csimanager';
import type { PluginRegistry } from '@csiplug/registry';
import type { VolumeCatalogService } from '@csiplug/volumes';
import type { JobSpec } from '@csiplug/jobspec';
import type { AgentEvent, JobView, NodeView, RunJobResult } from '@csiplug/api';

/** The agent's settings cluster mode reads. */
export interface ClusterAgentSettings {
  dataDir: string;
  /** The API's bind address and port, and whether it serves TLS: where other agents reach this one without `cluster { advertise }`. */
  bindAddr: string;
  port: number;
  tls: boolean;
  /** limits { max_allocs_per_job }: per node, for a cluster job as for a local one. */
  maxAllocsPerJob: number;
  /** The agents' shared ACL token: sent on every call to another agent. */
  aclToken(): string | undefined;
}

export interface ClusterAgent {
  readonly settings: ClusterAgentSettings;
  /** The agent's own log (what cluster mode says for the agent). */
  readonly logger: Logger;
  /** A log of its own for a part of cluster mode (`cluster-jobs`, `cluster-controllers`). */
  loggerFor(component: string): Logger;
  readonly clock: Clock;
  readonly registry: PluginRegistry;
  readonly csiManager: CSIManager;
  readonly catalog: VolumeCatalogService;
  /** Whether the agent began shutting down. */
  readonly closed: boolean;
  emit(e: Omit<AgentEvent, 'index' | 'time'>): void;
  /** This node as the API shows it. */
  node(): NodeView;
  /** The local job as it runs now: its current spec and how many allocs want to run. */
  localJob(id: string): { job: JobSpec; wanted: number } | undefined;
  localJobIds(): string[];
  /** The local job's view; undefined when nothing of it is here. */
  localJobView(id: string): JobView | undefined;
  /** Runs the job here (this node's share). */
  runLocal(job: JobSpec): Promise<RunJobResult>;
  /** Stops (and purges) the job here; only called when something of it is here. */
  stopLocal(id: string, options: { purge?: boolean }): Promise<JobView>;
  /** The rollouts the last agent left go on (once, after the node first settled). */
  resumeRollouts(): void;
  /** Whether the alloc here is being stopped (moved away, a smaller share): it lets go of its claim. */
  allocStopping(allocId: string): boolean;
}
