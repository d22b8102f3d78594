// What the parts of the agent's service facade share (job-service.ts,
// volume-service.ts, the node and plugin views, the claim sweep, cluster
// mode): the config, what they use from the container, the allocs here, the
// event stream and whether the agent still takes work. Made once by the
// Agent; each part takes only this and the parts it asks of.
import type { Clock, Logger } from '@csiplug/core';
import type { CSIManager } from '@csiplug/csimanager';
import type { PluginRegistry } from '@csiplug/registry';
import type { VolumeCatalogService, VolumeClaimer, VolumeReconcilerService } from '@csiplug/volumes';
import type { AgentEventInput } from '@csiplug/api';
import type { AllocTable } from './alloc-table';
import type { AgentConfig } from '@csiplug/jobspec';

export interface AgentContext {
  readonly config: AgentConfig;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly registry: PluginRegistry;
  readonly csiManager: CSIManager;
  /** The volume reconciler: mounts and unmounts, their records. */
  readonly reconciler: VolumeReconcilerService;
  readonly catalog: VolumeCatalogService;
  /** The one way a claim is made or released (IVolumeClaimer: the catalog alone, or in a cluster the claimer of etcd then the catalog). */
  readonly claimer: VolumeClaimer;
  readonly allocs: AllocTable;
  /** When this agent started (ms since the epoch). */
  readonly startedAt: number;
  /** Whether dispose began: nothing new is taken from then on. */
  readonly closed: boolean;
  /** Throws AgentShuttingDownError once dispose began. */
  checkOpen(): void;
  emit(e: AgentEventInput): void;
}
