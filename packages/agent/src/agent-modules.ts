// The agent as an ordered list of modules, lowest layer first. A ModuleHost
// (@csiplug/core) registers them in this order, starts them in this order
// (after the agent has locked its data dir: the state opens in
// stateModule's start) and stops them in reverse. The order is the
// restart-survival order of agent.ts:
//
//   start:  state opens → registry restores its plugins → (in a cluster: the
//           node's identity read, etcd connected) → the agent listens → CSI
//           manager subscribes and resyncs → volume reconciler resumes the
//           unmounts left to do
//   stop:   reconciler and catalog → CSI manager (closing every plugin
//           client) → the agent's event stream → (the node's lease let go)
//           → registry → images (GC timers end; task roots stay mounted) → driver → state
//
// The driver sits below the registry so that it is disposed after it, as the
// agent always did. The agent's own module (its alloc store, the volume spec
// check the catalog uses, its event stream) sits below the CSI manager so
// that it listens before the manager starts.
import {
  bind,
  bindDefault,
  coreModule,
  declareTokenOwner,
  IClock,
  withConfig,
  type Clock,
  type ConfiguredModule,
  type Logger,
  type Module,
} from '@csiplug/core';
import { clusterModule } from '@csiplug/cluster';
import { csiModule } from '@csiplug/csi';
import { csiManagerModule, ICSIManager, type CSIManager } from '@csiplug/csimanager';
import { driverModule } from '@csiplug/driver';
import { hooksModule } from '@csiplug/hooks';
import { imagesModule } from '@csiplug/images';
import { registryModule } from '@csiplug/registry';
import { stateModule } from '@csiplug/state';
import { IVolumeCatalog, IVolumeSpecValidator, volumesModule, type VolumeCatalogService } from '@csiplug/volumes';
import { AgentEvents, IAgentEvents } from '@csiplug/api';
import { IAllocStore, archivePathPolicy, registerAllocStore, type AllocStore } from '@csiplug/runner';
import { ITaskStateWriter, TaskStateWriter } from '@csiplug/runner';
import { DEFAULT_IMAGE_DRIVER, checkVolumeSpec, type AgentConfig } from '@csiplug/jobspec';

/**
 * What is the agent's own to register: its alloc store and the group write
 * of task states over it, the check the volume catalog runs on every spec
 * (the agent's own spec reader), and its event stream, which relays the CSI
 * manager's and the catalog's events from start until it stops. On stop the
 * task states still waiting are written, and any asked for later is written
 * at once: the modules above it (hooks, reconciler, CSI manager) have
 * stopped, and the state below it is still open.
 */
export const agentModule: Module = {
  name: 'agent',
  register: (container) => {
    registerAllocStore(container);
    bind(container, ITaskStateWriter, { useFactory: (c) => new TaskStateWriter(c.resolve<AllocStore>(IAllocStore)) });
    bindDefault(container, IVolumeSpecValidator, { useValue: checkVolumeSpec });
    bind(container, IAgentEvents, { useFactory: (c) => new AgentEvents(c.resolve<Clock>(IClock)) });
  },
  start: (container) => {
    container
      .resolve<AgentEvents>(IAgentEvents)
      .relay(container.resolve<CSIManager>(ICSIManager), container.resolve<VolumeCatalogService>(IVolumeCatalog));
  },
  stop: (container) => {
    try {
      container.resolve<TaskStateWriter>(ITaskStateWriter).dispose();
    } finally {
      container.resolve<AgentEvents>(IAgentEvents).dispose();
    }
  },
};

declareTokenOwner({ name: 'agent', exportName: 'agentModule', packageName: '@csiplug/agent' }, [
  IAllocStore,
  ITaskStateWriter,
  IVolumeSpecValidator,
  IAgentEvents,
]);

/** The agent's modules for `config`, in start order; `logger` is core's default logger. */
export function agentModules(config: AgentConfig, logger: Logger): ConfiguredModule[] {
  return [
    withConfig(coreModule, {
      logger,
      timeouts: config.timeouts,
      heartbeat: { strategy: config.heartbeat.strategy, ...config.heartbeat.settings },
    }),
    withConfig(stateModule, { backend: config.state.backend, dataDir: config.dataDir }),
    withConfig(csiModule, {}),
    withConfig(driverModule, {}),
    // The image store (<dataDir>/images) opens after the data dir is locked, before any task starts; it stops after the tasks' runners.
    withConfig(imagesModule, {
      dataDir: config.dataDir,
      docker: config.docker ?? DEFAULT_IMAGE_DRIVER,
      // An archive a job names is read (as root) only from allowed_host_paths, checked as a bind's source is (archive-path-policy.ts).
      archivePathPolicy: archivePathPolicy((config.docker ?? DEFAULT_IMAGE_DRIVER).allowedHostPaths),
    }),
    withConfig(registryModule, {}),
    // A cluster node (config `cluster { … }`): its claimer is bound before the volumes module's default, and it connects before the volumes start.
    ...(config.cluster ? [withConfig(clusterModule, { options: config.cluster, dataDir: config.dataDir })] : []),
    agentModule,
    withConfig(csiManagerModule, { dataDir: config.dataDir }),
    volumesModule,
    withConfig(hooksModule, { dataDir: config.dataDir }),
  ];
}
