// One "agent incarnation" for integration tests, composed through a tsyringe
// child container the way the agent composes itself: core (real clock),
// SQLite state under the data dir, CSI clients, the plugin registry, the CSI
// manager, a test volume claimer, the volume reconciler (@csiplug/volumes,
// its records in the same state file) and the hooks. `dispose()` is an
// agent restart's first half: timers, sockets and subscriptions are released
// but no task stop hook runs, so registrations, mounts and saved state stay
// for the next incarnation over the same data dir.
import { MemoryLogger, RealClock, bind, registerCore, type TimeoutSettings } from '@csiplug/core';
import { registerCsi } from '@csiplug/csi';
import { ICSIManager, registerCsiManager, type CSIManager } from '@csiplug/csimanager';
import { IPluginRegistry, registerRegistry, type PluginEvent, type PluginRegistry } from '@csiplug/registry';
import { IClientStateDB, openClientState, registerState, stateFilePath, type ClientStateDB } from '@csiplug/state';
import {
  IVolumeClaimer,
  IVolumeReconciler,
  registerVolumeReconciler,
  type VolumeClaimer,
  type VolumeReconcilerService,
} from '@csiplug/volumes';
import { container as root, type DependencyContainer } from 'tsyringe';
import {
  ICSIHookFactory,
  ICSIPluginSupervisorFactory,
  parseCsiPluginConfig,
  registerHooks,
  type CSIHook,
  type CSIHookFactory,
  type CSIPluginSupervisorFactory,
  type CSIPluginSupervisorHook,
} from '../src';

export interface IncarnationOptions {
  dataDir: string;
  claimer: VolumeClaimer;
  timeouts?: Partial<TimeoutSettings>;
  /** Wraps the real SQLite state before anything resolves it (bound ahead of registerState, which then keeps it). */
  wrapState?: (db: ClientStateDB) => ClientStateDB;
}

export class AgentIncarnation {
  readonly logger = new MemoryLogger();
  readonly container: DependencyContainer = root.createChildContainer();
  readonly state: ClientStateDB;
  readonly registry: PluginRegistry;
  readonly csiManager: CSIManager;
  /** The one owner of this incarnation's volume mounts (and of the unmounts left to retry). */
  readonly reconciler: VolumeReconcilerService;
  /** Every registry change this incarnation saw, in order. */
  readonly registryEvents: PluginEvent[] = [];
  private readonly supervisors: CSIPluginSupervisorHook[] = [];
  private down = false;

  private constructor(options: IncarnationOptions) {
    const c = this.container;
    registerCore(c, { clock: new RealClock(), logger: this.logger, timeouts: options.timeouts });
    if (options.wrapState) {
      bind(c, IClientStateDB, { useValue: options.wrapState(openClientState({ path: stateFilePath(options.dataDir) })) });
    }
    registerState(c, { backend: 'sqlite', dataDir: options.dataDir });
    registerCsi(c);
    registerRegistry(c);
    registerCsiManager(c, { dataDir: options.dataDir });
    bind(c, IVolumeClaimer, { useValue: options.claimer });
    registerVolumeReconciler(c);
    registerHooks(c, { dataDir: options.dataDir });

    this.state = c.resolve<ClientStateDB>(IClientStateDB);
    this.registry = c.resolve<PluginRegistry>(IPluginRegistry);
    this.registry.onDidChange((e) => this.registryEvents.push(e));
    this.csiManager = c.resolve<CSIManager>(ICSIManager);
    this.reconciler = c.resolve<VolumeReconcilerService>(IVolumeReconciler);
  }

  /** Builds an incarnation and starts it as the agent does: the CSI manager, then the volume reconciler (which resumes the unmounts left to do). */
  static async start(options: IncarnationOptions): Promise<AgentIncarnation> {
    const agent = new AgentIncarnation(options);
    await agent.csiManager.start();
    agent.reconciler.start();
    return agent;
  }

  /** A csi_plugin_supervisor hook for the `hostpath` monolith plugin task. */
  supervisor(): CSIPluginSupervisorHook {
    const config = parseCsiPluginConfig({ id: 'hostpath', type: 'monolith', health_timeout: '20s' }, 'task "plugin"');
    const hook = this.container.resolve<CSIPluginSupervisorFactory>(ICSIPluginSupervisorFactory).create(config);
    this.supervisors.push(hook);
    return hook;
  }

  /** A csi hook for one workload alloc. */
  csiHook(): CSIHook {
    return this.container.resolve<CSIHookFactory>(ICSIHookFactory).create();
  }

  /** Agent shutdown without stopping any task: the supervisor hooks detach. Idempotent. */
  async dispose(): Promise<void> {
    if (this.down) return;
    this.down = true;
    for (const hook of this.supervisors) hook.detach();
    await this.csiManager.dispose();
    this.reconciler.dispose();
    this.registry.dispose();
    this.state.dispose();
  }
}
