// Agent: the composition root. It builds one DI container from the config
// — an ordered list of modules (agent-modules.ts), registered after any
// binding a deployment made first — restores what an earlier agent left
// running, and serves the AgentService to the HTTP API.
//
// Start order matters for restart survival: the data dir is locked (a second
// agent on it fails fast), then the modules start — the state opens, the
// registry restores its plugins, the CSI manager subscribes and resyncs, the
// volume reconciler resumes the unmounts left to do — and only then are
// allocs restored: plugin tasks re-attach and re-register while workload
// allocs wait for them (the `restore` limit), never failing because a plugin
// came back a moment later. dispose() undoes it: the agent's own part (its
// allocs stopped or detached), the modules in reverse, then the lock.
import { bind, type Clock, IClock, ILogger, IMetrics, type Logger, ModuleHost, PinoLogger, type AsyncDisposable } from '@csiplug/core';
import { ICSIManager, PLUGIN_WAIT_SECONDS, VOLUME_STEP_SECONDS, type CSIManager } from '@csiplug/csimanager';
import { CSI_CALL_SECONDS } from '@csiplug/csi';
import { ITaskDriver, type TaskDriver } from '@csiplug/driver';
import { ITaskImages, type TaskImagesService } from '@csiplug/images';
import { ICSIHookFactory, ICSIPluginSupervisorFactory } from '@csiplug/hooks';
import {
  IVolumeCatalog,
  IVolumeClaimer,
  IVolumeReconciler,
  type VolumeCatalogService,
  type VolumeClaimer,
  type VolumeReconcilerService,
} from '@csiplug/volumes';
import { IClusterAgent, IClusterMode, dropRoutedControllers, type ClusterAgent, type ClusterMode } from '@csiplug/cluster';
import { IPluginRegistry, type PluginRegistry } from '@csiplug/registry';
import type { DB } from '@csiplug/state';
import * as path from 'path';
import { container as rootContainer, type DependencyContainer } from 'tsyringe';
import { IAgentEvents, type AgentEvents } from '@csiplug/api';
import { agentModules } from './agent-modules';
import { EVENTS_TOTAL, PromMetrics, TASK_RESTARTS_TOTAL, addStateGauges, countEvents } from './metrics';
import { lockDataDir, prepareDataDir, tightenDataDir } from './data-dir';
import { checkOrphansAtStart, fingerprintNode } from '@csiplug/runner';
import { IAllocStore, type AllocStore } from '@csiplug/runner';
import { ITaskStateWriter, type TaskStateWriter } from '@csiplug/runner';
import { type AgentConfig, chrootEnvNotices } from '@csiplug/jobspec';
import type { AgentContext } from './agent-context';
import { AgentShuttingDownError } from './agent-errors';
import { AllocTable } from './alloc-table';
import { ClaimSweep } from './claim-sweep';
import { JobService } from './job-service';
import { NodeViews } from './node-views';
import { PluginViews } from './plugin-views';
import { ServiceFacade, type ServiceParts } from './service-facade';
import { VolumeService } from './volume-service';

export { AgentShuttingDownError, ClusterUnavailableError, ConflictError, NotFoundError } from './agent-errors';
export { AGENT_VERSION } from './node-views';

export interface AgentOptions {
  /** Binds a deployment's own implementations before the defaults (a token bound here wins). */
  configure?(container: DependencyContainer): void;
  logger?: Logger;
}

function hostpathCli(): string | undefined {
  try {
    return path.join(path.dirname(require.resolve('@csiplug/hostpath-plugin/package.json')), 'dist', 'cli.js');
  } catch {
    return undefined;
  }
}

/** Whether the agent is shutting down: shared by the agent and every part of its facade. */
interface Lifecycle {
  closing: Promise<void> | undefined;
}

/** The parts of the service facade over the started modules (and, in a cluster, cluster mode over them). */
function composeParts(config: AgentConfig, container: DependencyContainer, metrics: PromMetrics, life: Lifecycle): ServiceParts {
  const logger = container.resolve<Logger>(ILogger).child({ component: 'agent' });
  const events = container.resolve<AgentEvents>(IAgentEvents);
  const claimer = container.resolve<VolumeClaimer>(IVolumeClaimer);
  const clock = container.resolve<Clock>(IClock);
  const ctx: AgentContext = {
    config,
    logger,
    clock,
    registry: container.resolve<PluginRegistry>(IPluginRegistry),
    csiManager: container.resolve<CSIManager>(ICSIManager),
    reconciler: container.resolve<VolumeReconcilerService>(IVolumeReconciler),
    catalog: container.resolve<VolumeCatalogService>(IVolumeCatalog),
    claimer,
    allocs: new AllocTable(),
    startedAt: clock.now(),
    get closed() {
      return life.closing !== undefined;
    },
    checkOpen() {
      if (life.closing) throw new AgentShuttingDownError();
    },
    emit: (e) => events.emit(e),
  };
  let cluster: ClusterMode | undefined;
  const claimSweep = new ClaimSweep(ctx, () => cluster);
  const cli = hostpathCli();
  // Read once at start, as Nomad's static fingerprints are; a config reload that changes the node's part needs a restart.
  const nodeAttributes = fingerprintNode({ id: config.nodeId, ...config.node });
  const jobs = new JobService(ctx, {
    driver: container.resolve<TaskDriver>(ITaskDriver),
    allocStore: container.resolve<AllocStore>(IAllocStore),
    taskStates: container.resolve<TaskStateWriter>(ITaskStateWriter),
    supervisors: container.resolve<ICSIPluginSupervisorFactory>(ICSIPluginSupervisorFactory),
    csiHooks: container.resolve<ICSIHookFactory>(ICSIHookFactory),
    metrics,
    onEvent: events.onEvent,
    claimSweep,
    taskVariables: cli ? { CSIPLUG_HOSTPATH_CLI: cli } : {},
    node: nodeAttributes,
    images: container.resolve<TaskImagesService>(ITaskImages),
    cluster: () => cluster,
  });
  const nodes = new NodeViews(ctx, () => cluster, nodeAttributes);
  if (config.cluster) {
    // Cluster mode is the cluster module's (@csiplug/cluster), over the node it made when it started: what it uses of
    // this agent is bound here, then the module makes it on this first resolve.
    const agent: ClusterAgent = {
      settings: {
        dataDir: config.dataDir,
        bindAddr: config.bindAddr,
        port: config.port,
        tls: config.tls !== undefined,
        maxAllocsPerJob: config.limits.maxAllocsPerJob,
        aclToken: () => config.acl.token,
      },
      logger,
      loggerFor: (component) => container.resolve<Logger>(ILogger).child({ component }),
      clock,
      registry: ctx.registry,
      csiManager: ctx.csiManager,
      catalog: ctx.catalog,
      get closed() {
        return ctx.closed;
      },
      emit: (e) => ctx.emit(e),
      node: () => nodes.node(),
      localJob: (id) => jobs.localJob(id),
      localJobIds: () => ctx.allocs.jobIds(),
      localJobView: (id) => jobs.localJobView(id),
      runLocal: (job) => jobs.runLocal(job),
      stopLocal: (id, options) => jobs.stopLocal(id, options),
      resumeRollouts: () => jobs.jobUpdater.resume(),
      allocStopping: (allocId) => ctx.allocs.get(allocId)?.alloc.desiredStatus === 'stop',
    };
    bind(container, IClusterAgent, { useValue: agent });
    cluster = container.resolve<ClusterMode>(IClusterMode);
  } else {
    // Without a cluster, a routed controller a cluster-mode run of this data dir registered routes nowhere: it goes.
    dropRoutedControllers(ctx.registry);
  }
  const plugins = new PluginViews(ctx, cluster);
  const volumes = new VolumeService(
    ctx,
    claimSweep,
    (pluginId) => jobs.controlsHere(pluginId),
    () => cluster?.volumes,
    () => plugins.listPlugins().map((p) => p.id),
  );
  return { ctx, jobs, allocs: ctx.allocs, volumes, nodes, plugins, claimSweep, cluster, onEvent: events.onEvent };
}

export class Agent extends ServiceFacade implements AsyncDisposable {
  /** This node in its cluster (config `cluster { … }`); undefined for an agent on its own. */
  readonly cluster: ClusterMode | undefined;
  private readonly logger: Logger;
  private readonly events: AgentEvents;

  private constructor(
    readonly config: AgentConfig,
    readonly container: DependencyContainer,
    private readonly modules: ModuleHost,
    private readonly lock: DB,
    /** The agent's figures (/v1/metrics): what the packages record, gauges read from its state, the process's own. */
    readonly metrics: PromMetrics,
    private readonly life: Lifecycle,
  ) {
    super(composeParts(config, container, metrics, life));
    this.cluster = this.parts.cluster;
    this.logger = this.parts.ctx.logger;
    this.events = container.resolve<AgentEvents>(IAgentEvents);
    const { registry, reconciler, catalog, allocs } = this.parts.ctx;
    addStateGauges(metrics, {
      service: this,
      registryEntries: () =>
        Object.fromEntries(
          ['csi-controller', 'csi-node'].map((type) => [
            type,
            registry.list(type).reduce((n, p) => n + registry.registrations(type, p.name).length, 0),
          ]),
        ),
      pendingUnmounts: () => reconciler.pendingUnmounts().length,
      liveMounts: () => reconciler.mountChecks(),
    });
    // The stream's emitter is disposed with the agent module, and this listener with it.
    this.onEvent((e) => countEvents(metrics, e));
    // A claim released (the reconciler's background retry, a detach) ends an unmount an alloc left pending: the alloc says so too.
    // (The catalog's emitter goes with the volumes module, and this listener with it.)
    // A volume updated by a register: its live mounts here read it again, so their next calls send its new secrets.
    catalog.onDidChange((e) => {
      if (e.kind === 'released' && e.allocId) allocs.get(e.allocId)?.closeFinishedUnmounts();
      if (e.kind === 'updated') void reconciler.refreshVolume(e.volumeId);
    });
  }
  /** Builds the container from the config, locks the data dir, starts the modules, restores, and returns the running agent. */
  static async start(config: AgentConfig, options: AgentOptions = {}): Promise<Agent> {
    const container = rootContainer.createChildContainer();
    options.configure?.(container);
    // The packages record into the agent's own registry, unless the embedder bound its own Metrics.
    const metrics = new PromMetrics();
    metrics.declare(TASK_RESTARTS_TOTAL, EVENTS_TOTAL);
    if (!container.isRegistered(IMetrics)) {
      bind(container, IMetrics, { useValue: metrics });
      // Listed (empty) from the start only where they are recorded here: with an embedder's own Metrics they would read as "no calls".
      metrics.declare(CSI_CALL_SECONDS, PLUGIN_WAIT_SECONDS, VOLUME_STEP_SECONDS);
    }
    const logger = options.logger ?? new PinoLogger({ level: config.logLevel, format: config.logJson ? 'json' : 'human' });
    const modules = new ModuleHost(container, agentModules(config, logger));
    modules.register();

    // Before anything is written in the data dir: refuse one another user
    // controls and tighten what an older release left open (data-dir.ts has
    // the layout and its modes). Then take its lock — whatever the state
    // backend, so a memory agent and a sqlite agent exclude each other too —
    // and only then start the modules, which opens the state.
    const log = container.resolve<Logger>(ILogger).child({ component: 'agent' });
    const realDir = prepareDataDir(config.dataDir);
    const lock = lockDataDir(config.dataDir, log);
    try {
      tightenDataDir(realDir, log);
      await modules.start(); // a failed start stops what had started
    } catch (err) {
      lock.close();
      throw err;
    }
    let agent: Agent | undefined;
    try {
      agent = new Agent(config, container, modules, lock, metrics, { closing: undefined });
      // Before boot: which allocs exist is fixed by the state once the modules
      // have started (boot only reads it), and nothing is restored, mounted or
      // resumed yet, so the cleanup never races a restore. Say what the state
      // does not know (tasks, mounts, alloc dirs), and clean it with reconcile_orphans.
      await checkOrphansAtStart(container, { dataDir: config.dataDir, reconcile: config.reconcileOrphans, logger: log });
      agent.boot();
      // In the background: an etcd that is away never holds the start (tasks and mounts here do not need it).
      agent.cluster?.start();
      return agent;
    } catch (err) {
      // What boot began is left to the next agent, as on any shutdown: the
      // runners let go before the modules stop under them (a plugin wait cut
      // short by the CSI manager's dispose must not fail a restoring alloc).
      // A rollout boot resumed stops first (detached: the next agent resumes it), so nothing it does runs over stopped modules.
      if (agent) await agent.cluster?.stopPasses();
      if (agent) await agent.parts.claimSweep.dispose().catch(() => undefined);
      if (agent) await agent.parts.jobs.dispose(false).catch(() => undefined);
      if (agent) await agent.cluster?.stopControllers();
      await modules.stop().catch(() => {
        // Each module that failed to stop was logged by the host, by name; the start's error is the one to report.
      });
      lock.close();
      throw err;
    }
  }

  /** Restores the allocs the last agent saved and starts the claim sweep; the modules are started. */
  private boot(): void {
    const { allocs, restoring } = this.parts.jobs.restore();
    // A rollout the last agent was in the middle of goes on (deploy/job-updater.ts) — in a cluster, only once the node has
    // settled after joining: a job may have moved or changed meanwhile, and the new allocs' claims wait until then anyway.
    if (!this.cluster) this.parts.jobs.jobUpdater.resume();
    // Claims of allocs this node no longer has (purged, or lost with a state the last agent could not save) are released on a timer (Nomad's claim GC).
    this.parts.claimSweep.start();
    this.logger.info('agent started', { data_dir: this.config.dataDir, node_id: this.config.nodeId, allocs, restoring });
    // Each chroot_env entry that shows a host dir at another path, once: an entry written the old way round whose two paths both exist shows here.
    for (const notice of chrootEnvNotices(this.config.exec.chrootEnv)) this.logger.warn(notice);
  }

  /** A SIGHUP: every running task's templates rendered again, a changed file's change_mode applied. */
  reloadTemplates(): Promise<void> {
    return this.parts.jobs.reloadTemplates();
  }

  /**
   * The API's token changed (a config reload): tasks started from now on may
   * have the host's network only while there is one. Tasks already running
   * keep what they have (a re-attach says so, see TaskRunner).
   */
  apiTokenChanged(hasToken: boolean): void {
    this.parts.jobs.apiTokenChanged(hasToken);
  }

  /**
   * Shuts the agent down: its own part first — by default tasks keep running
   * (their runners detach, and a restarted agent re-attaches to them);
   * `stopTasks` stops every alloc, workloads before plugins, unmounting their
   * volumes — then the modules in reverse, then the data dir's lock.
   * Idempotent. Every step runs even if one fails; a module that failed to
   * stop is logged by name and its error rethrown once everything ran.
   */
  dispose(options: { stopTasks?: boolean } = {}): Promise<void> {
    this.life.closing ??= (async () => {
      const stopTasks = options.stopTasks ?? this.config.stopTasksOnExit;
      const { jobs, claimSweep } = this.parts;
      jobs.leave(stopTasks);
      let failure: unknown;
      // No pass may run a job here or stop one while the agent shuts down.
      await this.cluster?.stopPasses();
      await claimSweep.dispose();
      // Rollouts first: cancelled when every task stops (nothing to resume), else left to the next agent; then every alloc stopped or detached.
      await jobs.dispose(stopTasks).catch((err: unknown) => (failure ??= err));
      // Routed controllers last of the agent's own parts: the workloads stopped above may have unpublished through them.
      await this.cluster?.stopControllers();
      this.events.stopRelaying();
      // The state is about to close: a scrape from here on reads no gauges rather than failing.
      this.metrics.retire();
      // (In a cluster, the cluster module's stop lets the node's lease run out; its claims in etcd stay, its mounts too.)
      await this.modules.stop().catch((err: unknown) => (failure ??= err));
      try {
        this.lock.close();
      } catch (err) {
        // The lock dies with the process anyway.
        this.logger.error('closing the data dir lock failed; it is closed anyway', { error: err });
      }
      // Whatever the container made and the modules did not release (all idempotent).
      await Promise.resolve(this.container.dispose()).catch((err: unknown) =>
        this.logger.error('disposing the container failed', { error: err }),
      );
      this.logger.info('agent stopped', { tasks_stopped: stopTasks });
      if (failure !== undefined) throw failure;
    })();
    return this.life.closing;
  }
}
