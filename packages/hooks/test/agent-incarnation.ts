// One "agent incarnation" for integration tests, composed through a tsyringe
// child container the way the agent composes itself: core (real clock),
// SQLite state under the data dir, CSI clients, the plugin registry, the CSI
// manager, a test volume claimer and the hooks. `shutdown()` is an agent
// restart's first half: timers, sockets and subscriptions are released but
// no task stop hook runs, so registrations, mounts and saved state stay for
// the next incarnation over the same data dir.
import { MemoryLogger, RealClock, bind, registerCore, type TimeoutSettings } from '@csiplug/core';
import { registerCsi } from '@csiplug/csi';
import { ICSIManager, registerCsiManager, type CSIManager } from '@csiplug/csimanager';
import { IPluginRegistry, registerRegistry, type PluginEvent, type PluginRegistry } from '@csiplug/registry';
import { IClientStateDB, openClientState, registerState, stateFilePath, type ClientStateDB } from '@csiplug/state';
import { container as root, type DependencyContainer } from 'tsyringe';
import {
  ICSIHookFactory,
  ICSIPluginSupervisorFactory,
  IPendingUnmounts,
  IVolumeClaimer,
  parseCsiPluginConfig,
  registerHooks,
  type CSIHook,
  type CSIHookFactory,
  type CSIPluginSupervisorFactory,
  type CSIPluginSupervisorHook,
  type PendingUnmounts,
  type VolumeClaimer,
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
  readonly pending: PendingUnmounts;
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
    registerHooks(c, { dataDir: options.dataDir });

    this.state = c.resolve<ClientStateDB>(IClientStateDB);
    this.registry = c.resolve<PluginRegistry>(IPluginRegistry);
    this.registry.onDidChange((e) => this.registryEvents.push(e));
    this.csiManager = c.resolve<CSIManager>(ICSIManager);
    this.pending = c.resolve<PendingUnmounts>(IPendingUnmounts);
  }

  /** Builds an incarnation and starts it as the agent does: the CSI manager, then the pending-unmount queue. */
  static async start(options: IncarnationOptions): Promise<AgentIncarnation> {
    const agent = new AgentIncarnation(options);
    await agent.csiManager.start();
    agent.pending.start();
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

  /** Agent shutdown without stopping any task. Idempotent. */
  async shutdown(): Promise<void> {
    if (this.down) return;
    this.down = true;
    for (const hook of this.supervisors) hook.shutdown();
    await this.csiManager.shutdown();
    this.pending.dispose();
    this.registry.shutdown();
    this.state.close();
  }
}
