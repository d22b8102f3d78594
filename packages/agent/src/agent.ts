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
import { bind, type Clock, CsiplugError, IClock, ILogger, IMetrics, type Logger, ModuleHost, PinoLogger, ShutdownError, UnsupportedError, ValidationError, type AsyncDisposable, type Event } from '@csiplug/core';
import { ICSIManager, PLUGIN_WAIT_SECONDS, VOLUME_STEP_SECONDS, mountsUnder, type CSIManager, type PluginInfo } from '@csiplug/csimanager';
import { CSI_CALL_SECONDS, isNotFound, type CSIClient } from '@csiplug/csi';
import { ITaskDriver, findRunc, type TaskDriver } from '@csiplug/driver';
import { ICSIHookFactory, ICSIPluginSupervisorFactory, type TaskEvent } from '@csiplug/hooks';
import { ClaimError, IVolumeCatalog, IVolumeClaimer, IVolumeReconciler, type VolumeCatalogService, type MountCheckView, type VolumeReconcilerService } from '@csiplug/volumes';
import { ClusterJobsUnavailableError, ClusterVolumeClaimer, MAX_GROUP_COUNT, externalIdOf, isEtcdAway, type ClusterClaim, type NodeInfo } from '@csiplug/cluster';
import { ClusterJobs, QUEUED_REASON, queuedView } from './cluster-jobs';
import { ControllerRouter, answerRoutedCall, healthyControllerNodes, isRoutedController } from './cluster-controllers';
import { ApiClient } from '@csiplug/api';
import { ApiError, NotFoundError } from '@csiplug/api';
// NotFoundError is the service interface's (the in-memory service throws it too); re-exported under its old name here.
export { NotFoundError } from '@csiplug/api';
import { CLUSTER_INSTANCE_FILE, ClusterMembership, clusterInstanceId } from './cluster-membership';
import { purgeClusterNode } from './cluster-node-purge';
import { IPluginRegistry, type PluginRegistry } from '@csiplug/registry';
import type { DB } from '@csiplug/state';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { container as rootContainer, type DependencyContainer } from 'tsyringe';
import { IAgentEvents, type AgentEventInput, type AgentEvents } from '@csiplug/api';
import { agentModules } from './agent-modules';
import { EVENTS_TOTAL, PromMetrics, TASK_RESTARTS_TOTAL, addStateGauges, countEvents } from './metrics';
import { lockDataDir, prepareDataDir, tightenDataDir } from './data-dir';
import { openLogSlice, type LogRange, type LogSlice } from '@csiplug/api';
import { checkOrphansAtStart } from '@csiplug/runner';
import type { Alloc, JobSpec } from '@csiplug/jobspec';
import { JobUpdater } from '@csiplug/runner';
import type { JobPlan } from '@csiplug/jobspec';
import type { RolloutHost } from '@csiplug/runner';
import { AllocRunner, type AllocRunnerDeps } from '@csiplug/runner';
import { IAllocStore, type AllocStore } from '@csiplug/runner';
import { ITaskStateWriter, type TaskStateWriter } from '@csiplug/runner';
import { drainBeforePluginStop } from '@csiplug/runner';
import { assertRawExecAllowed } from '@csiplug/runner';
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
  PluginInstanceView,
  PluginView,
  RoutedAnswer,
  RunJobResult,
  SnapshotView,
  VolumeDetachResult,
  VolumeMountView,
  VolumeView,
} from '@csiplug/api';
import { volumeSpecToDocument, type AgentConfig, type VolumeSpec } from '@csiplug/jobspec';

export const AGENT_VERSION = '0.1.0';

export interface AgentOptions {
  /** Binds a deployment's own implementations before the defaults (a token bound here wins). */
  configure?(container: DependencyContainer): void;
  logger?: Logger;
}

/** The agent is shutting down and takes no new work (HTTP 503, by its code: statusForError). */
export class AgentShuttingDownError extends ShutdownError {
  constructor() {
    super('the agent is shutting down; retry against the next agent');
  }
}

/** A request the state of things refuses now (a volume claimed by a running alloc…): HTTP 409. */
export class ConflictError extends CsiplugError {
  constructor(message: string) {
    super('ECONFLICT', message);
  }
}

/** The cluster's etcd does not answer (HTTP 503): what needs it waits; this node's tasks and mounts do not. */
export class ClusterUnavailableError extends CsiplugError {
  constructor(message: string) {
    super('ECLUSTER_UNAVAILABLE', message);
  }
}

function hostpathCli(): string | undefined {
  try {
    return path.join(path.dirname(require.resolve('@csiplug/hostpath-plugin/package.json')), 'dist', 'cli.js');
  } catch {
    return undefined;
  }
}

/** What a fingerprint found, as flat name → value pairs for status output. */
function fingerprintFacts(info: PluginInfo): Record<string, string | number | boolean> {
  const facts: Record<string, string | number | boolean> = {};
  if (info.lastError) facts['Last Error'] = info.lastError;
  if (info.node) {
    facts['Node ID'] = info.node.nodeId;
    facts['Max Volumes'] = Number.isFinite(info.node.maxVolumes) ? info.node.maxVolumes : 'unlimited';
    if (info.node.topology) facts['Topology'] = Object.entries(info.node.topology).map(([k, v]) => `${k}=${v}`).join(', ');
    facts['Requires Staging'] = info.node.requiresStaging;
    facts['Volume Stats'] = info.node.supportsStats;
    facts['Volume Condition'] = info.node.supportsCondition;
    facts['Expand'] = info.node.supportsExpand;
  }
  if (info.controller) {
    facts['Create/Delete Volumes'] = info.controller.supportsCreateDelete;
    facts['Attach/Detach (ControllerPublish)'] = info.controller.supportsAttachDetach;
    facts['List Volumes'] = info.controller.supportsListVolumes;
    facts['List Volumes Published Nodes'] = info.controller.capabilities.listVolumesPublishedNodes;
    facts['Get Capacity'] = info.controller.supportsGetCapacity;
    facts['Snapshots'] = info.controller.supportsSnapshots;
    facts['List Snapshots'] = info.controller.capabilities.listSnapshots;
    facts['Clone'] = info.controller.supportsClone;
    facts['Expand'] = info.controller.supportsExpand;
  }
  if (info.pluginCapabilities) {
    facts['Accessibility Constraints'] = info.pluginCapabilities.accessibilityConstraints;
    if (info.pluginCapabilities.onlineExpansion || info.pluginCapabilities.offlineExpansion) {
      facts['Volume Expansion'] = [info.pluginCapabilities.onlineExpansion && 'online', info.pluginCapabilities.offlineExpansion && 'offline'].filter(Boolean).join(', ');
    }
  }
  return facts;
}

export class Agent implements AgentService, AsyncDisposable {
  private readonly runners = new Map<string, AllocRunner>();
  /** The same runners by job: a job's allocs without a scan of every runner (a restore resumes each job, `job status` lists each). */
  private readonly runnersByJob = new Map<string, Set<AllocRunner>>();
  /** The one writer of each job's allocs: runs (plans, rollouts, reverts) and stops (deploy/). */
  private readonly updates: JobUpdater<AllocRunner>;
  private readonly startedAt: number;
  /** The timer of the claim sweep (sweepClaims), from boot until dispose. */
  private claimSweep: { dispose(): void } | undefined;
  /** Aborted when the agent starts going away with its tasks left running (a node plugin's stop ends its wait for unmounts). */
  private readonly leaving = new AbortController();
  /** A sweep under way: the next round waits for it rather than running beside it. */
  private sweeping: Promise<unknown> | undefined;
  /** Whether isolated tasks may have the host's network: the API asks for a token (changes with a config reload). */
  private hostNetworkAllowed: boolean;
  /** Allocs boot could not read or rebuild: left as they are, tasks running — their claims count as in use. */
  private readonly unrestored = new Set<string>();
  private closed: Promise<void> | undefined;
  /** Cluster mode: the jobs in etcd and this node's share of their placements (cluster-jobs.ts). */
  private readonly clusterJobs: ClusterJobs | undefined;
  /** Cluster mode: whether the rollouts the last agent left were resumed (after the node first settled). */
  private resumed = false;
  /** Cluster mode: controller calls of plugins whose controller runs on other nodes (cluster-controllers.ts). */
  private readonly controllers: ControllerRouter | undefined;
  /** Variables every task sees, on top of its own. */
  private readonly taskVariables: Record<string, string>;

  // What the agent itself uses, from the container its modules registered.
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly events: AgentEvents;
  readonly onEvent: Event<AgentEvent>;
  private readonly allocStore: AllocStore;
  private readonly taskStates: TaskStateWriter;
  private readonly registry: PluginRegistry;
  private readonly csi: CSIManager;
  private readonly volumeMounts: VolumeReconcilerService;
  private readonly driver: TaskDriver;
  private readonly catalog: VolumeCatalogService;
  private readonly supervisors: ICSIPluginSupervisorFactory;
  private readonly csiHooks: ICSIHookFactory;

  private constructor(
    readonly config: AgentConfig,
    readonly container: DependencyContainer,
    private readonly modules: ModuleHost,
    private readonly lock: DB,
    /** The agent's figures (/v1/metrics): what the packages record, gauges read from its state, the process's own. */
    readonly metrics: PromMetrics,
    /** This node in its cluster (config `cluster { … }`); undefined for an agent on its own. */
    readonly membership?: ClusterMembership,
  ) {
    this.logger = container.resolve<Logger>(ILogger).child({ component: 'agent' });
    this.clock = container.resolve<Clock>(IClock);
    this.events = container.resolve<AgentEvents>(IAgentEvents);
    this.onEvent = this.events.onEvent;
    this.allocStore = container.resolve<AllocStore>(IAllocStore);
    this.taskStates = container.resolve<TaskStateWriter>(ITaskStateWriter);
    this.registry = container.resolve<PluginRegistry>(IPluginRegistry);
    this.hostNetworkAllowed = config.acl.token !== undefined;
    this.csi = container.resolve<CSIManager>(ICSIManager);
    this.volumeMounts = container.resolve<VolumeReconcilerService>(IVolumeReconciler);
    this.driver = container.resolve<TaskDriver>(ITaskDriver);
    this.catalog = container.resolve<VolumeCatalogService>(IVolumeCatalog);
    this.supervisors = container.resolve<ICSIPluginSupervisorFactory>(ICSIPluginSupervisorFactory);
    this.csiHooks = container.resolve<ICSIHookFactory>(ICSIHookFactory);
    this.startedAt = this.clock.now();
    const cli = hostpathCli();
    this.taskVariables = cli ? { CSIPLUG_HOSTPATH_CLI: cli } : {};
    this.updates = new JobUpdater(this.rolloutHost());
    this.clusterJobs = membership
      ? new ClusterJobs(
          membership,
          {
            localJob: (id) => {
              const view = this.updates.view(id);
              return view && { job: view.job, wanted: this.jobAllocs(id).filter((r) => r.alloc.desiredStatus === 'run').length };
            },
            localJobIds: () => [...this.runnersByJob.keys()],
            runLocal: (job) => this.runLocalJob(job),
            stopLocal: (id, purge) => (this.jobAllocs(id).length ? this.stopLocalJob(id, { purge }) : Promise.resolve()),
            catalog: this.catalog,
            maxAllocsPerJob: config.limits.maxAllocsPerJob,
            afterPass: () => this.controllers?.reconcile() ?? Promise.resolve(),
            unpublishFrom: (node, published) => this.unpublishFrom(node, published),
          },
          this.clock,
          container.resolve<Logger>(ILogger).child({ component: 'cluster-jobs' }),
          path.join(config.dataDir, 'cluster', 'applied.json'),
        )
      : undefined;
    if (membership) {
      this.controllers = new ControllerRouter({
        dataDir: config.dataDir,
        registry: this.registry,
        membership,
        servingController: (plugin) => {
          const info = this.csi.pluginInfo('csi-controller', plugin);
          return info && { allocId: info.allocId, healthy: info.healthy };
        },
        token: () => this.config.acl.token,
        clock: this.clock,
        logger: container.resolve<Logger>(ILogger).child({ component: 'cluster-controllers' }),
      });
      // Which plugins need a routed controller here follows the registry (a node plugin or a controller coming or going).
      // (The registry's emitter goes with its module, and this listener with it.)
      this.registry.onDidChange(() => void this.controllers?.reconcile());
      // A controller of its own taking over (healthy) ends the routing; the node records (read every pass) say where controllers are.
      this.csi.onDidChangeHealth(() => void this.controllers?.reconcile());
    } else {
      // Without a cluster, a routed controller a cluster-mode run of this data dir registered routes nowhere: it goes.
      for (const p of this.registry.list('csi-controller')) {
        for (const r of this.registry.registrations('csi-controller', p.name)) if (isRoutedController(r.allocId)) this.registry.deregister('csi-controller', p.name, r.allocId);
      }
    }
    addStateGauges(metrics, {
      service: this,
      registryEntries: () =>
        Object.fromEntries(['csi-controller', 'csi-node'].map((type) => [type, this.registry.list(type).reduce((n, p) => n + this.registry.registrations(type, p.name).length, 0)])),
      pendingUnmounts: () => this.volumeMounts.pendingUnmounts().length,
      liveMounts: () => this.volumeMounts.mountChecks(),
    });
    // The stream's emitter is disposed with the agent module, and this listener with it.
    this.onEvent((e) => countEvents(metrics, e));
    // In a cluster, what the node says of itself follows its plugins' health (the CSI manager's emitter goes with its module).
    if (membership) this.csi.onDidChangeHealth(() => membership.refresh(() => this.nodeInfo()));
    // A claim released (the reconciler's background retry, a detach) ends an unmount an alloc left pending: the alloc says so too.
    // (The catalog's emitter goes with the volumes module, and this listener with it.)
    this.catalog.onDidChange((e) => {
      if (e.kind === 'released' && e.allocId) this.runners.get(e.allocId)?.closeFinishedUnmounts();
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
    // Cluster mode: claims are taken cluster-wide in etcd first, then here (ClusterVolumeClaimer); bound before the
    // volumes module registers its default (the local catalog alone). The connection is made now; nothing waits for etcd.
    let membership: ClusterMembership | undefined;
    // Set once the agent exists: whether it has settled this node since it last joined (cluster-jobs.ts).
    let settled = (): boolean => false;
    if (config.cluster) {
      const cluster = config.cluster;
      bind(container, IVolumeClaimer, {
        useFactory: (c) =>
          new ClusterVolumeClaimer(
            () => c.resolve<VolumeCatalogService>(IVolumeCatalog),
            membership!.claims,
            cluster.nodeName,
            () => membership!.holdsNode && settled(),
            (message, fields) => c.resolve<Logger>(ILogger).warn(message, fields),
          ),
      });
    }
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
    if (config.cluster) {
      try {
        // An id already in the data dir (not made now) may adopt a node record written before identities: its own, upgraded.
        const idBefore = fs.existsSync(path.join(realDir, CLUSTER_INSTANCE_FILE));
        membership = new ClusterMembership(config.cluster, clusterInstanceId(realDir), container.resolve<Clock>(IClock), container.resolve<Logger>(ILogger).child({ component: 'cluster' }), idBefore);
      } catch (err) {
        lock.close();
        throw err;
      }
    }
    try {
      tightenDataDir(realDir, log);
      await modules.start(); // a failed start stops what had started
    } catch (err) {
      lock.close();
      await membership?.dispose();
      throw err;
    }
    let agent: Agent | undefined;
    try {
      agent = new Agent(config, container, modules, lock, metrics, membership);
      const built = agent;
      settled = () => built.clusterJobs?.settled ?? false;
      // Before boot: which allocs exist is fixed by the state once the modules
      // have started (boot only reads it), and nothing is restored, mounted or
      // resumed yet, so the cleanup never races a restore. Say what the state
      // does not know (tasks, mounts, alloc dirs), and clean it with reconcile_orphans.
      await checkOrphansAtStart(container, { dataDir: config.dataDir, reconcile: config.reconcileOrphans, logger: log });
      agent.boot();
      // In the background: an etcd that is away never holds the start (tasks and mounts here do not need it).
      const joined = agent;
      // On every (re)join: what runs here is first made what the cluster placed here — a node back after its work moved
      // stops its copies — and only then are its claims asserted in etcd.
      membership?.join(
        () => joined.nodeInfo(),
        () =>
          void joined.clusterJobs!.settleThen(async () => {
            if (!joined.resumed) {
              joined.resumed = true;
              joined.updates.resume();
            }
            await joined.assertClaimsInCluster();
          }),
      );
      if (config.cluster && config.acl.token === undefined) {
        log.warn('cluster mode without an ACL token: any job run through this agent\'s API runs on every node of the cluster; set acl { token } on every agent (the same token: agents call each other with it)');
      }
      agent.clusterJobs?.start();
      void agent.controllers?.reconcile();
      return agent;
    } catch (err) {
      // What boot began is left to the next agent, as on any shutdown: the
      // runners let go before the modules stop under them (a plugin wait cut
      // short by the CSI manager's dispose must not fail a restoring alloc).
      // A rollout boot resumed stops first (detached: the next agent resumes it), so nothing it does runs over stopped modules.
      if (agent) await agent.updates.dispose({ stopTasks: false }).catch(() => undefined);
      if (agent) await agent.clusterJobs?.dispose().catch(() => undefined);
      if (agent) await agent.controllers?.dispose().catch(() => undefined);
      if (agent) for (const r of agent.runners.values()) r.detach();
      await modules.stop().catch(() => {
        // Each module that failed to stop was logged by the host, by name; the start's error is the one to report.
      });
      lock.close();
      await membership?.dispose();
      throw err;
    }
  }

  /** Restores the allocs the last agent saved; the modules are started. */
  private boot(): void {
    // One read of every alloc with its tasks' handles and states (not one per task).
    const { records: allocs, failures } = this.allocStore.listAllocationsWithTasks();
    for (const f of failures) {
      this.logger.error('a saved alloc could not be read; it is left in the state file untouched', { key: f.key, error: f.error });
      // Its key is its id: its claims are in use as far as anyone here can tell.
      this.unrestored.add(f.key.split('/')[0]!);
    }
    let restored = 0;
    for (const { record, tasks } of allocs) {
      const { alloc } = record;
      let runner: AllocRunner;
      try {
        runner = new AllocRunner(alloc, this.runnerDeps(), record, tasks);
      } catch (err) {
        // One alloc that cannot be rebuilt (a group its job lacks, a task state
        // that cannot be read) is left untouched — its tasks keep running —
        // and never stops the others from being restored.
        this.logger.error('a saved alloc could not be restored; it is left as it is, its tasks untouched', { alloc_id: alloc.id, error: err });
        this.unrestored.add(alloc.id);
        continue;
      }
      this.addRunner(runner);
      const terminal = alloc.desiredStatus === 'stop' || alloc.clientStatus === 'complete' || alloc.clientStatus === 'failed';
      if (!terminal) {
        restored++;
        void runner.run('restore').catch((err) => this.logger.error('alloc restore failed', { alloc_id: alloc.id, error: err }));
      } else if (runner.needsTeardown) {
        // It was being stopped (or its tasks had ended) when the last agent
        // went away: finish the teardown — kill what still runs, unmount,
        // release the claims.
        this.logger.info('finishing the teardown of an alloc the last agent left half-stopped', { alloc_id: alloc.id });
        void runner.stop().catch((err) => this.logger.error('alloc teardown failed', { alloc_id: alloc.id, error: err }));
      } else {
        // An unmount it left pending may have been finished while no agent watched (its claim released): it says so now.
        runner.closeFinishedUnmounts();
      }
    }
    // A rollout the last agent was in the middle of goes on (deploy/job-updater.ts) — in a cluster, only once the node has
    // settled after joining: a job may have moved or changed meanwhile, and the new allocs' claims wait until then anyway.
    if (!this.clusterJobs) this.updates.resume();
    // Claims of allocs this node no longer has (purged, or lost with a state the last agent could not save) are released on a timer (Nomad's claim GC).
    this.claimSweep = this.clock.setInterval(() => {
      if (this.sweeping) return;
      this.sweeping = this.sweepClaims()
        .catch((err) => this.logger.warn('the claim sweep failed; it runs again on its next round', { error: err }))
        .finally(() => (this.sweeping = undefined));
    }, this.config.claimGcInterval);
    this.logger.info('agent started', { data_dir: this.config.dataDir, node_id: this.config.nodeId, allocs: allocs.length, restoring: restored });
  }

  /** What the job updater works on: this agent's runners, the CSI manager's plugins, its event stream. */
  private rolloutHost(): RolloutHost<AllocRunner> {
    return {
      clock: this.clock,
      logger: this.logger,
      allocsOf: (jobId) => this.jobAllocs(jobId),
      jobIds: () => [...this.runnersByJob.keys()].sort(),
      prepare: (alloc) => new AllocRunner(alloc, this.runnerDeps()),
      // One write, all or nothing (AllocsNotSavedError): a run that cannot be saved starts and stops nothing.
      save: (runners, stopping) => AllocRunner.saveBeforeRun(runners, stopping),
      forget: (runner) => this.forgetOldAlloc(runner),
      launch: (runner) => {
        const alloc = runner.alloc;
        this.addRunner(runner);
        this.emit({ topic: 'Alloc', type: 'Alloc received', message: `alloc ${alloc.name} received (job version ${alloc.jobVersion ?? 0})`, allocId: alloc.id, jobId: alloc.jobId });
        void runner.run('start').catch((err) => this.logger.error('alloc failed to start', { alloc_id: alloc.id, error: err }));
      },
      plugins: () => this.csi.plugins(),
      pluginRegistrations: (type, name) => this.registry.registrations(type, name),
      onEvent: this.events.onEvent,
      emit: (e) => this.emit(e),
    };
  }

  /** A stopped alloc of an old job version that holds nothing (no task that may live, no volume record) goes for good: record, runner, alloc dir. */
  private forgetOldAlloc(r: AllocRunner): boolean {
    if (r.alloc.desiredStatus !== 'stop' || r.needsTeardown || this.volumeMounts.list(r.alloc.id).length > 0) return false;
    try {
      this.allocStore.deleteAllocation(r.alloc.id);
    } catch (err) {
      this.logger.warn('could not remove the record of an old stopped alloc; a later run tries again', { alloc_id: r.alloc.id, error: err });
      return false;
    }
    r.forgetSaves();
    this.removeRunner(r);
    this.removeAllocDir(r);
    return true;
  }

  private runnerDeps(): AllocRunnerDeps {
    return {
      dataDir: this.config.dataDir,
      nodeId: this.config.nodeId,
      driver: this.driver,
      allocStore: this.allocStore,
      taskStates: this.taskStates,
      exec: this.config.exec,
      hostNetwork: () => this.hostNetworkAllowed,
      rawExec: () => this.config.rawExec.enabled,
      claimHeld: (volumeId: string, allocId: string) => this.catalog.getVolume(volumeId)?.claims.some((c) => c.allocId === allocId) ?? false,
      volumes: this.volumeMounts,
      clock: this.clock,
      logger: this.logger,
      supervisors: this.supervisors,
      csiHooks: this.csiHooks,
      variables: this.taskVariables,
      drainPlugins: (allocId, plugins, say, signal) =>
        drainBeforePluginStop(
          {
            clock: this.clock,
            records: () => this.volumeMounts.list(),
            allocEnding: (id) => this.runners.get(id)?.tearingDown === true,
            // Another instance serves the unmounts only if it is not going too (a plugin job of two allocs stopped at once).
            otherInstances: (pluginId, self) => this.registry.registrations('csi-node', pluginId).filter((r) => r.allocId !== self && this.runners.get(r.allocId)?.tearingDown !== true).length,
            healthy: (pluginId) => {
              const info = this.csi.pluginInfo('csi-node', pluginId);
              if (!info) return false;
              // Not judged yet (a restarted agent finishing a teardown, before the first fingerprint round ended).
              if (!info.healthy && !info.fingerprinted && info.lastError === undefined) return undefined;
              return info.healthy;
            },
            retryNow: (pluginId) => this.volumeMounts.retryUnmountsNow(pluginId),
            // The agent going away with its tasks left running ends the wait (a cluster pass stopping a plugin must not hold the shutdown).
            leaving: () => this.leaving.signal.aborted,
          },
          allocId,
          plugins,
          say,
          signal,
        ),
      leaving: () => this.leaving.signal.aborted,
      onTaskEvent: (alloc: Alloc, task: string, event: TaskEvent) =>
        this.emit({ topic: 'Task', type: event.type, message: event.message, allocId: alloc.id, jobId: alloc.jobId, task, time: event.time }),
      onStatusChange: (alloc: Alloc) =>
        this.emit({ topic: 'Alloc', type: `Alloc ${alloc.clientStatus}`, message: `alloc ${alloc.name} is ${alloc.clientStatus}`, allocId: alloc.id, jobId: alloc.jobId }),
    };
  }

  private emit(e: AgentEventInput): void {
    this.events.emit(e);
  }

  // ---- AgentService: health and jobs -----------------------------------------

  health(): AgentHealth {
    const counts = { running: 0, pending: 0, dead: 0 };
    for (const r of this.runners.values()) {
      const s = r.alloc.clientStatus;
      if (s === 'running') counts.running++;
      else if (s === 'pending') counts.pending++;
      else counts.dead++;
    }
    const plugins = this.csi.plugins();
    return {
      ok: !this.closed,
      nodeId: this.config.nodeId,
      dataDir: this.config.dataDir,
      version: AGENT_VERSION,
      startedAt: this.startedAt,
      allocs: counts,
      plugins: { healthy: plugins.filter((p) => p.healthy).length, total: plugins.length },
    };
  }

  node(): NodeView {
    const health = this.health();
    const runc = findRunc();
    return {
      id: this.config.nodeId,
      name: os.hostname(),
      version: AGENT_VERSION,
      dataDir: this.config.dataDir,
      startedAt: this.startedAt,
      status: this.closed ? 'down' : 'ready',
      drivers: {
        exec: runc
          ? { detected: true, healthy: true, description: `isolated tasks on runc (${runc})` }
          : { detected: false, healthy: false, description: 'runc is not installed (apt-get install runc): exec tasks fail to start; raw_exec works' },
        // Nomad's raw_exec fingerprint when disabled: undetected, "disabled" (a cluster places no raw_exec task here).
        raw_exec: this.config.rawExec.enabled ? { detected: true, healthy: true, description: 'host processes' } : { detected: false, healthy: false, description: 'disabled (plugin "raw_exec" { config { enabled = true } } enables it)' },
      },
      // A controller routed to another node is that node's, not this one's: never advertised (no call is routed twice).
      plugins: this.csi
        .plugins()
        .filter((p) => !isRoutedController(p.allocId))
        .map((p) => ({
          id: p.name,
          type: p.type,
          healthy: p.healthy,
          description: p.description,
          ...(p.node ? { nodeId: p.node.nodeId, maxVolumes: Number.isFinite(p.node.maxVolumes) ? p.node.maxVolumes : ('unlimited' as const), ...(p.node.topology ? { topology: { ...p.node.topology } } : {}) } : {}),
        }))
        .sort((a, b) => a.id.localeCompare(b.id) || a.type.localeCompare(b.type)),
      allocs: health.allocs,
    };
  }

  /** What this node says of itself in its cluster. */
  nodeInfo(): NodeInfo {
    const cluster = this.config.cluster!;
    const node = this.node();
    return {
      name: cluster.nodeName,
      nodeClass: cluster.nodeClass,
      meta: { ...cluster.meta },
      drivers: Object.entries(node.drivers)
        .filter(([, d]) => d.detected && d.healthy)
        .map(([name]) => name),
      plugins: node.plugins.map((p) => ({ id: p.id, type: p.type, healthy: p.healthy, ...(p.topology ? { topology: p.topology } : {}), ...(typeof p.maxVolumes === 'number' ? { maxVolumes: p.maxVolumes } : {}) })),
      ...(this.advertisedAddress() ? { address: this.advertisedAddress() } : {}),
      version: AGENT_VERSION,
      maxAllocsPerJob: this.config.limits.maxAllocsPerJob,
    };
  }

  /** Where other agents reach this one: `cluster { advertise }`, else the bind address unless it is a wildcard (0.0.0.0, ::), which names no host. */
  private advertisedAddress(): string | undefined {
    if (this.config.cluster?.advertise) return this.config.cluster.advertise;
    const host = this.config.bindAddr;
    if (host === '0.0.0.0' || host === '::' || host === '') return undefined;
    return `${this.config.tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${this.config.port}`;
  }

  async listNodes(): Promise<NodeList> {
    if (!this.membership) {
      const n = this.node();
      return { cluster: false, nodes: [{ name: n.id, status: n.status, nodeClass: '', drivers: Object.keys(n.drivers).filter((d) => n.drivers[d as keyof NodeView['drivers']].detected), plugins: n.plugins.map((p) => ({ id: p.id, type: p.type, healthy: p.healthy })), self: true }] };
    }
    let nodes;
    try {
      nodes = await this.membership.list();
    } catch (err) {
      throw new ClusterUnavailableError(`the cluster's etcd did not answer (${err instanceof Error ? err.message : String(err)}); this node's tasks and mounts are untouched`);
    }
    const self = this.membership.nodeName;
    return {
      cluster: true,
      nodes: nodes.map((n) => ({ name: n.name, ...(n.identity ? { identity: n.identity } : {}), status: n.status, nodeClass: n.nodeClass, drivers: n.drivers, plugins: n.plugins.map((p) => ({ id: p.id, type: p.type, healthy: p.healthy })), address: n.address, updatedAt: n.updatedAt, self: n.name === self && n.identity === this.membership!.identity })),
    };
  }

  private addRunner(r: AllocRunner): void {
    this.runners.set(r.alloc.id, r);
    const ofJob = this.runnersByJob.get(r.alloc.jobId) ?? new Set<AllocRunner>();
    ofJob.add(r);
    this.runnersByJob.set(r.alloc.jobId, ofJob);
  }

  private removeRunner(r: AllocRunner): void {
    this.runners.delete(r.alloc.id);
    const ofJob = this.runnersByJob.get(r.alloc.jobId);
    ofJob?.delete(r);
    if (ofJob?.size === 0) this.runnersByJob.delete(r.alloc.jobId);
  }

  private jobAllocs(jobId: string): AllocRunner[] {
    return [...(this.runnersByJob.get(jobId) ?? [])].sort((a, b) => a.alloc.createdAt - b.alloc.createdAt || a.alloc.name.localeCompare(b.alloc.name));
  }

  private jobView(jobId: string): JobView | undefined {
    const runners = this.jobAllocs(jobId);
    if (runners.length === 0) return undefined;
    const { version, job, deployment } = this.updates.view(jobId)!;
    const live = runners.filter((r) => r.alloc.desiredStatus === 'run' && (r.alloc.clientStatus === 'running' || r.alloc.clientStatus === 'pending'));
    const status: JobView['status'] = live.some((r) => r.alloc.clientStatus === 'running') ? 'running' : live.length ? 'pending' : 'dead';
    return {
      id: job.id,
      name: job.name,
      status,
      version,
      job,
      ...(deployment ? { deployment } : {}),
      allocs: runners.map(({ alloc: a }) => ({
        id: a.id,
        name: a.name,
        group: a.group,
        jobVersion: a.jobVersion ?? 0,
        clientStatus: a.clientStatus,
        desiredStatus: a.desiredStatus,
        ...(a.deploymentStatus ? { healthy: a.deploymentStatus.healthy } : {}),
      })),
    };
  }

  listJobs(): JobView[] {
    const ids = new Set(this.runnersByJob.keys());
    for (const job of this.clusterJobs?.queued() ?? []) ids.add(job.id);
    for (const { record } of this.clusterJobs?.lastSeen()?.jobs ?? []) ids.add(record.id);
    return [...ids].sort().map((id) => this.getJob(id)!);
  }

  /** The job here; in a cluster, with where its slots are placed (as last read from etcd, at most a second or so old). */
  getJob(id: string): JobView | undefined {
    const local = this.jobView(id);
    const queued = this.clusterJobs?.queued().find((j) => j.id === id);
    const seen = this.clusterJobs?.lastSeen()?.jobs.find((j) => j.record.id === id);
    if (queued) {
      const view = queuedView(queued.type === 'system' ? 'system' : 'service', seen?.record.version ?? 0, QUEUED_REASON, this.clock.now());
      return { ...(local ?? this.clusterOnlyView(id, queued, view.version, false)), cluster: view };
    }
    if (!seen) return local;
    return { ...(local ?? this.clusterOnlyView(id, seen.record.spec, seen.record.version, seen.record.stopped)), cluster: seen.view };
  }

  /** A cluster job with nothing of it on this node. */
  private clusterOnlyView(id: string, job: JobSpec, version: number, stopped: boolean): JobView {
    return { id, name: typeof job?.name === 'string' ? job.name : id, status: stopped ? 'dead' : 'pending', version, job, allocs: [] };
  }

  async runJob(job: JobSpec): Promise<RunJobResult> {
    this.checkOpen();
    if (this.clusterJobs) return this.runClusterJob(job);
    return this.runLocalJob(job);
  }

  /**
   * The job run here, by this agent's job updater (on its own, or this
   * node's share of a cluster job: the limit is on what this node runs).
   */
  private async runLocalJob(job: JobSpec): Promise<RunJobResult> {
    this.checkOpen();
    this.checkAllocLimit(job);
    assertRawExecAllowed(job, this.config.rawExec.enabled);
    return this.updates.run(job, () => this.checkOpen());
  }

  /** Cluster mode: the job goes to etcd and is placed there; each node runs its share. */
  private async runClusterJob(job: JobSpec): Promise<RunJobResult> {
    // Each node runs at most max_allocs_per_job of it: the cluster as a whole, that many per node it has.
    const big = job.groups.find((g) => g.count > MAX_GROUP_COUNT);
    if (big) throw new ValidationError(`job "${job.id}" group "${big.name}": count ${big.count} is more than a cluster job's group may ask for (${MAX_GROUP_COUNT})`, 'count');
    // The nodes as etcd has them now (the last read is up to seconds old: just after a start it may know only this node).
    const known = await this.membership!.list().catch(() => this.membership!.lastSeenNodes?.nodes ?? []);
    const nodes = Math.max(1, known.length);
    const wanted = job.groups.reduce((n, g) => n + g.count, 0);
    const limit = this.config.limits.maxAllocsPerJob * nodes;
    if (wanted > limit) {
      throw new ValidationError(`job "${job.id}" asks for ${wanted} allocs; the cluster's ${nodes} node(s) run at most ${this.config.limits.maxAllocsPerJob} each per job (limits { max_allocs_per_job }), ${limit} in all`, 'count');
    }
    let submitted;
    try {
      submitted = await this.clusterJobs!.submit(job);
    } catch (err) {
      if (err instanceof ClusterJobsUnavailableError) throw new ClusterUnavailableError(err.message);
      throw err;
    }
    const { record, unchanged, view } = submitted;
    if (submitted.queued) this.emit({ topic: 'Job', type: 'Job queued', message: `job ${job.id}: the cluster's etcd did not answer; the job waits on this agent and is submitted once it does`, jobId: job.id });
    const plan: JobPlan = { jobId: job.id, changed: !unchanged, version: { ...(record.version > 0 || unchanged ? { from: unchanged ? record.version : record.version - 1 } : {}), to: record.version }, fields: [], groups: [] };
    return { jobId: job.id, allocIds: [], replaced: record.version > 0, unchanged, version: record.version, plan, ...(view ? { cluster: view } : {}) };
  }

  planJob(job: JobSpec): JobPlan {
    if (this.clusterJobs) {
      throw new UnsupportedError(`job plan is not built for a cluster yet: a plan here would show this node alone; job run places job "${job.id}" (and says where), job status shows it after`);
    }
    this.checkAllocLimit(job);
    return this.updates.plan(job);
  }

  /** `limits { max_allocs_per_job }`, for a run and a plan alike, before any per-alloc work (a 400 naming the count). */
  private checkAllocLimit(job: JobSpec): void {
    const wanted = job.groups.reduce((n, g) => n + g.count, 0);
    const limit = this.config.limits.maxAllocsPerJob;
    if (wanted > limit) {
      throw new ValidationError(
        `job "${job.id}" asks for ${wanted} allocs (${job.groups.map((g) => `${g.name}: ${g.count}`).join(', ')}); this agent runs at most ${limit} per job (limits { max_allocs_per_job })`,
        'count',
      );
    }
  }

  async stopJob(id: string, options: { purge?: boolean } = {}): Promise<JobView> {
    this.checkOpen();
    if (this.clusterJobs) {
      let record;
      try {
        record = await this.clusterJobs.stop(id, !!options.purge);
      } catch (err) {
        if (err instanceof ClusterJobsUnavailableError) throw new ClusterUnavailableError(err.message);
        throw err;
      }
      // etcd away: stopped here now, in the cluster once etcd answers.
      if (record === 'queued') {
        this.emit({ topic: 'Job', type: 'Job stopped', message: `job ${id} stopped on this node; the cluster's etcd did not answer, and the stop is made there once it does`, jobId: id });
        if (this.jobAllocs(id).length) return this.stopLocalJob(id, options);
        return this.clusterOnlyView(id, { id, name: id, groups: [] }, 0, true);
      }
      // A job the cluster does not know (run here before this agent joined) is stopped here, as on one agent.
      if (record) {
        this.emit({ topic: 'Job', type: 'Job stopped', message: `job ${id} stopped in the cluster${options.purge ? ' and purged' : ''}`, jobId: id });
        return this.jobView(id) ?? this.clusterOnlyView(id, record.spec, record.version, true);
      }
    }
    return this.stopLocalJob(id, options);
  }

  private async stopLocalJob(id: string, options: { purge?: boolean } = {}): Promise<JobView> {
    this.checkOpen();
    if (this.jobAllocs(id).length === 0) throw new NotFoundError(`job "${id}" not found`);
    // As the job's one writer: a rollout under way is cancelled first, so nothing starts again behind the stop.
    return this.updates.exclusive(id, 'Cancelled because job is stopped', () => {
      // Again as the job's writer: a purge that ran while this waited leaves nothing to stop.
      if (this.jobAllocs(id).length === 0) throw new NotFoundError(`job "${id}" not found`);
      return this.stopAllocs(id, options);
    });
  }

  private async stopAllocs(id: string, options: { purge?: boolean }): Promise<JobView> {
    const runners = this.jobAllocs(id);
    await Promise.all(runners.map((r) => r.stop()));
    // The agent went away while a plugin of the job waited for unmounts: its tasks run on and the saved stop is the
    // next agent's to finish — nothing is purged (its record is how the next agent knows the tasks).
    if (runners.some((r) => r.stopCutShort)) throw new AgentShuttingDownError();
    const view = this.jobView(id)!;
    if (options.purge) {
      for (const r of runners) {
        const records = this.volumeMounts.list(r.alloc.id);
        // A volume still wanted mounted (its postrun could not even record the
        // unmount) is unmounted now: once the alloc is gone, nothing else would ask.
        if (records.some((v) => v.desired === 'mounted')) {
          await this.volumeMounts.unmount(r.alloc.id).catch((err) => this.logger.warn('unmounting the volumes of a purged alloc failed; the volume reconciler retries', { alloc_id: r.alloc.id, error: err }));
        }
        // A claim the volume reconciler holds a record of is released by it, in order.
        if (records.length === 0) {
          const released = await this.catalog.releaseAllocClaims(r.alloc.id).catch((err) => {
            this.logger.warn('releasing claims of a purged alloc failed', { alloc_id: r.alloc.id, error: err });
            return [] as string[];
          });
          for (const volumeId of released) await this.releaseInCluster(volumeId, r.alloc.id);
        }
        r.forgetSaves();
        this.allocStore.deleteAllocation(r.alloc.id);
        this.removeRunner(r);
        this.removeAllocDir(r);
      }
    }
    // A purged job's restart counts go with it: its series would otherwise be scraped for as long as the agent runs.
    if (options.purge) await this.metrics.forgetSeries(TASK_RESTARTS_TOTAL, { job: id });
    this.emit({ topic: 'Job', type: 'Job stopped', message: `job ${id} stopped${options.purge ? ' and purged' : ''}`, jobId: id });
    return view;
  }

  /**
   * A purged alloc's dir goes with it (logs, task dirs, volume links),
   * unless something is still mounted below it: never delete through a
   * live mount.
   */
  private removeAllocDir(r: AllocRunner): void {
    let dir = r.allocDir;
    try {
      // mountinfo names real paths; the data dir may be reached through a symlink.
      dir = fs.realpathSync(dir);
      const mounted = mountsUnder(dir);
      if (mounted.length) {
        this.logger.warn('keeping the dir of a purged alloc: something is still mounted below it', { alloc_id: r.alloc.id, dir, mounts: mounted });
        return;
      }
      fs.rmSync(dir, { recursive: true, force: true });
    } catch (err) {
      this.logger.warn('could not remove the dir of a purged alloc', { alloc_id: r.alloc.id, dir, error: err });
    }
  }

  // ---- allocs ------------------------------------------------------------------

  private allocView(r: AllocRunner): AllocView {
    return { ...r.alloc, tasks: r.taskStates(), volumes: r.mountedVolumes };
  }

  listAllocs(): AllocView[] {
    return [...this.runners.values()].sort((a, b) => a.alloc.createdAt - b.alloc.createdAt || a.alloc.name.localeCompare(b.alloc.name)).map((r) => this.allocView(r));
  }

  getAlloc(id: string): AllocView | undefined {
    const r = this.runners.get(id) ?? [...this.runners.values()].find((x) => x.alloc.id.startsWith(id) && id.length >= 8);
    return r ? this.allocView(r) : undefined;
  }

  async allocLogs(allocId: string, task: string, stream: 'stdout' | 'stderr', range: LogRange = {}): Promise<LogSlice> {
    const alloc = this.getAlloc(allocId);
    if (!alloc) throw new NotFoundError(`alloc "${allocId}" not found`);
    if (!Object.hasOwn(alloc.tasks, task)) throw new NotFoundError(`alloc ${alloc.id} has no task "${task}" (tasks: ${Object.keys(alloc.tasks).join(', ')})`);
    // Only the range is read, as it is consumed: a log may be far larger than this process's heap.
    return openLogSlice(path.join(this.runners.get(alloc.id)!.taskDir(task), `${stream}.log`), range);
  }

  // ---- plugins -----------------------------------------------------------------

  /** The plugin across the cluster's nodes, from their records as last read; undefined on its own or before the first read. */
  private clusterPluginView(id: string): PluginView['cluster'] {
    const seen = this.membership?.lastSeenNodes;
    if (!seen) return undefined;
    const instances = seen.nodes.flatMap((n) => n.plugins.filter((p) => p.id === id).map((p) => ({ node: n.name, type: p.type, healthy: p.healthy && n.status === 'ready', nodeStatus: n.status })));
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

  private pluginView(id: string): PluginView | undefined {
    const instances = this.csi.plugins().filter((p) => p.name === id);
    const controllerReg = this.registry.get('csi-controller', id);
    const nodeReg = this.registry.get('csi-node', id);
    const cluster = this.clusterPluginView(id);
    // A plugin that runs only on other nodes is still the cluster's.
    if (!instances.length && !controllerReg && !nodeReg && !cluster?.instances.length) return undefined;
    const view = (info: PluginInfo | undefined): PluginInstanceView | undefined =>
      info && {
        healthy: info.healthy,
        allocId: info.allocId,
        description: info.description,
        version: info.version,
        info: fingerprintFacts(info),
        ...(isRoutedController(info.allocId) ? { routed: this.controllers?.view(id) ?? {} } : {}),
      };
    const controller = instances.find((p) => p.type === 'csi-controller');
    const node = instances.find((p) => p.type === 'csi-node');
    const allocs = new Set([...this.registry.registrations('csi-controller', id), ...this.registry.registrations('csi-node', id)].map((r) => r.allocId).filter((a) => !isRoutedController(a)));
    const reg = nodeReg ?? controllerReg;
    return {
      id,
      provider: reg?.options.provider,
      version: reg?.version,
      controllerRequired: !!controller?.controller?.supportsAttachDetach,
      controllersHealthy: controller?.healthy ? 1 : 0,
      controllersExpected: controllerReg ? 1 : 0,
      nodesHealthy: node?.healthy ? 1 : 0,
      nodesExpected: nodeReg ? 1 : 0,
      ...(controller ? { controller: view(controller) } : {}),
      ...(node ? { node: view(node) } : {}),
      allocs: [...allocs].sort(),
      ...(cluster ? { cluster } : {}),
    };
  }

  listPlugins(): PluginView[] {
    const ids = new Set([...this.registry.list('csi-controller'), ...this.registry.list('csi-node')].map((r) => r.name));
    for (const p of this.csi.plugins()) ids.add(p.name);
    for (const n of this.membership?.lastSeenNodes?.nodes ?? []) for (const p of n.plugins) ids.add(p.id);
    return [...ids].sort().map((id) => this.pluginView(id)!);
  }

  getPlugin(id: string): PluginView | undefined {
    return this.pluginView(id);
  }

  // ---- volumes -----------------------------------------------------------------

  listVolumes(): VolumeView[] {
    return this.catalog.listVolumes();
  }
  getVolume(id: string): VolumeView | undefined {
    const volume = this.catalog.getVolume(id);
    if (!volume) return undefined;
    const checks = new Map(this.volumeMounts.mountChecks().map((c) => [`${c.allocId}/${c.name}`, c]));
    const mounts: VolumeMountView[] = this.volumeMounts
      .list()
      .filter((r) => r.volumeId === id)
      .map((r) => ({
        allocId: r.allocId,
        name: r.name,
        desired: r.desired,
        claimed: r.claimed,
        staged: r.staged,
        published: r.published,
        ...(r.targetPath !== undefined ? { targetPath: r.targetPath } : {}),
        pendingUnmount: r.desired === 'unmounted',
        attempts: r.attempts,
        ...(r.lastError !== undefined ? { lastError: r.lastError } : {}),
        since: r.since,
        ...(checks.has(`${r.allocId}/${r.name}`) ? { check: checkOf(checks.get(`${r.allocId}/${r.name}`)!) } : {}),
      }));
    return { ...volume, mounts };
  }
  async registerVolume(spec: VolumeSpec): Promise<VolumeView> {
    this.checkOpen();
    if (!this.clusterJobs) return this.catalog.registerVolume(spec);
    // In a cluster the id is the cluster's: reserved there first (refused when another node has it), then registered here.
    return this.madeInCluster(spec, () => this.catalog.registerVolume(spec), () => this.catalog.deregisterVolume(spec.id));
  }

  async createVolume(spec: VolumeSpec, options: { forwarded?: boolean } = {}): Promise<VolumeView> {
    this.checkOpen();
    // Nomad's `volume create` of a volume that exists with a larger capacity expands it.
    const existing = this.catalog.getVolume(spec?.id);
    if (existing && (spec.capacityMin !== undefined || spec.capacityMax !== undefined)) {
      // Only the capacity of an existing volume changes this way: a content source would silently not be applied.
      if (spec.snapshotId !== undefined || spec.cloneId !== undefined) {
        throw new ValidationError(`volume "${spec.id}" exists already: ${spec.snapshotId !== undefined ? 'snapshot_id' : 'clone_id'} is for a new volume (pick another id, or delete the volume first)`, spec.snapshotId !== undefined ? 'snapshot_id' : 'clone_id');
      }
      if (!this.clusterJobs) return this.expandVolume(existing, spec);
      const ours = await this.clusterVolumeIs(existing.id, existing);
      const grown = await this.expandVolume(existing, spec);
      // The cluster's record says the new capacity (a node registering it from now on sees it).
      if (ours) await this.recordGrowth(grown);
      return grown;
    }
    const here = this.controlsHere(spec.pluginId);
    if (this.clusterJobs) {
      this.clusterJobs.assertMember();
      // No controller of the plugin here: the create goes to a node whose controller is healthy (once: a forwarded create goes no further).
      if (!here && !options.forwarded) return this.viaController(spec.pluginId, spec.id, 'create', (c) => c.createVolume(volumeSpecToDocument(spec), { forwarded: true }));
    }
    if (!here) {
      const known = this.listPlugins().map((p) => p.id);
      throw new NotFoundError(`no controller of plugin "${spec.pluginId}" is registered on this node and no job here runs one (plugins: ${known.join(', ') || 'none'}); run the plugin's controller or monolith job first, or check plugin_id`);
    }
    if (!this.clusterJobs) return this.catalog.createVolume(spec);
    return this.madeInCluster(spec, () => this.catalog.createVolume(spec), () => this.catalog.deleteVolume(spec.id));
  }

  /**
   * Whether this node has (or is starting) a controller of the plugin.
   * Waiting makes sense only for a plugin that is here or on its way: a
   * name nothing registers nor runs is refused at once, not after the wait.
   */
  private controlsHere(pluginId: string): boolean {
    const controls = (job: JobSpec, group?: string) =>
      job.groups.some((g) => (group === undefined || g.name === group) && g.tasks.some((t) => t.csiPlugin?.id === pluginId && t.csiPlugin.type !== 'node'));
    const starting =
      this.updates.deploying().some((job) => controls(job)) ||
      [...this.runners.values()].some((r) => r.alloc.desiredStatus === 'run' && r.alloc.clientStatus !== 'complete' && r.alloc.clientStatus !== 'failed' && controls(r.alloc.job, r.alloc.group));
    return starting || this.registry.get('csi-controller', pluginId) !== undefined;
  }

  /**
   * Cluster mode: a volume made here (created through this node's
   * controller, or registered) under an id reserved in etcd first — no
   * other node makes one under it meanwhile — and then written there whole
   * for every node. The make failing gives the id back. etcd away for the
   * last write: the volume is here and the next pass writes it.
   */
  private async madeInCluster(spec: VolumeSpec, make: () => Promise<VolumeView>, undo: () => Promise<unknown>): Promise<VolumeView> {
    const cluster = this.clusterJobs!;
    await this.clusterCall(() => cluster.reserveVolume(spec));
    try {
      let view: VolumeView;
      try {
        view = await make();
      } catch (err) {
        await cluster.cancelVolume(spec.id).catch((e: unknown) => this.logger.warn('could not give back the reservation of a volume id whose make failed; this agent\'s next pass does', { volume_id: spec.id, error: e }));
        throw err;
      }
      let kept: boolean;
      try {
        kept = await cluster.finishVolume(view);
      } catch (err) {
        this.logger.warn('the volume is made here; etcd did not answer, and the cluster gets it at the next pass that reaches etcd', { volume_id: view.id, error: err });
        return view;
      }
      if (!kept) {
        // Finished by a pass of this agent meanwhile (the same volume): made. Anything else: the reservation was removed by hand.
        const now = await this.clusterCall(() => cluster.store.volumes.get(view.id));
        const same = now && now.state === undefined && now.origin === this.membership!.nodeName && externalIdOf(now) === view.externalId;
        if (!same) {
          await undo().catch((e: unknown) => this.logger.error('a volume whose reservation in the cluster was removed could not be removed here again; remove it with csiplug volume delete', { volume_id: view.id, error: e }));
          throw new ConflictError(`volume "${view.id}": its reservation in the cluster was removed while it was made; nothing was kept, try again`);
        }
      }
      return view;
    } finally {
      cluster.madeVolume(spec.id);
    }
  }

  /**
   * Cluster mode: a controller operation routed to another node whose
   * controller of the plugin is healthy (as the nodes last said), with the
   * agents' ACL token. The next node is tried only when one could not be
   * reached before it began (refused connection, no controller there after
   * all); a call that may have been delivered is not sent twice.
   */
  private async viaController<T>(pluginId: string, volumeId: string, what: 'create' | 'delete', call: (client: ApiClient) => Promise<T>): Promise<T> {
    const nodes = healthyControllerNodes(this.membership!, pluginId).filter((n) => n.address);
    if (nodes.length === 0) {
      throw new NotFoundError(`no healthy controller of plugin "${pluginId}" on this node or any ready node of the cluster; run the plugin's controller or monolith job first, or check plugin_id`);
    }
    const failures: string[] = [];
    for (const node of nodes) {
      const client = new ApiClient({ address: node.address!, ...(this.config.acl.token ? { token: this.config.acl.token } : {}), timeoutMs: 120_000 });
      try {
        const result = await call(client);
        this.logger.info(`volume ${what} made through another node's controller`, { volume_id: volumeId, plugin_id: pluginId, node: node.name });
        return result;
      } catch (err) {
        const refused = err instanceof ApiError && err.status === 0 && /ECONNREFUSED|EHOSTUNREACH|ENETUNREACH/.test(err.message);
        const noController = err instanceof ApiError && err.status === 404 && /no (healthy )?controller/.test(err.message);
        if (!refused && !noController) {
          if (err instanceof ApiError && (err.status === 0 || err.status >= 500)) {
            throw new ClusterUnavailableError(`volume "${volumeId}": the ${what} was sent to node ${node.name}, whose answer did not come (${err.message}); it may be under way there: see csiplug volume status ${volumeId}`);
          }
          throw err;
        }
        failures.push(`${node.name}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    throw new ClusterUnavailableError(`volume "${volumeId}": no node with a healthy controller of plugin "${pluginId}" could be reached (${failures.join('; ')})`);
  }

  /** An etcd call for the API: etcd away is a 503 that says so. */
  private async clusterCall<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof Error && isEtcdAway(err)) throw new ClusterUnavailableError(`the cluster's etcd did not answer (${err.message}); nothing was changed, try again once it does`);
      if (err instanceof ClusterJobsUnavailableError) throw new ClusterUnavailableError(err.message);
      throw err;
    }
  }

  async deregisterVolume(id: string, options?: { force?: boolean }): Promise<void> {
    this.checkOpen();
    const before = this.catalog.getVolume(id);
    const ours = await this.clusterVolumeIs(id, before);
    if (ours) await this.assertUnclaimedInCluster(id);
    await this.catalog.deregisterVolume(id, options);
    if (ours) await this.removeFromCluster(id, before!);
  }

  async deleteVolume(id: string, options: { forwarded?: boolean } = {}): Promise<void> {
    this.checkOpen();
    const before = this.catalog.getVolume(id);
    const ours = await this.clusterVolumeIs(id, before);
    if (ours) await this.assertUnclaimedInCluster(id);
    // No controller here: deleted through a node that has one (which also removes it from the cluster).
    if (ours && before && !options.forwarded && !this.controlsHere(before.pluginId)) {
      await this.viaController(before.pluginId, id, 'delete', (c) => c.deleteVolume(id, { forwarded: true }));
      return;
    }
    await this.catalog.deleteVolume(id);
    if (ours) await this.removeFromCluster(id, before!);
  }

  /**
   * Cluster mode: a node down past its grace is about to give up its
   * claims; what was published to it (the controller-publish state in etcd)
   * is unpublished through this node's controller of the plugin (its own or
   * routed), so the volume can be published to the node it moves to. Best
   * effort: what cannot be unpublished is said, and stays attached in the
   * backend until that node comes back or an operator detaches it.
   */
  private async unpublishFrom(node: string, published: Array<{ volumeId: string; claim: ClusterClaim }>): Promise<boolean> {
    const membership = this.membership!;
    for (const { volumeId, claim } of published) {
      // The node back meanwhile keeps what it holds: nothing is detached under it, and the release waits (it is refused anyway).
      if (await membership.conn.kv.get(`alive/${node}`).exists()) return false;
      const volume = this.catalog.getVolume(volumeId);
      const target = claim.published!.csiNodeId;
      // Only the cluster's volume (never a node-local one under the same id).
      if (!volume || !(await this.clusterVolumeIs(volumeId, volume).catch(() => false))) {
        this.logger.warn('a volume published to a node down past its grace is not in this node\'s catalog as the cluster has it; it cannot be unpublished from here', { node, volume_id: volumeId, alloc_id: claim.allocId });
        continue;
      }
      if (!this.registry.get('csi-controller', volume.pluginId)) {
        // Another node with a controller of the plugin does it: the release waits for its pass.
        const elsewhere = healthyControllerNodes(membership, volume.pluginId).length > 0;
        if (elsewhere) return false;
        this.logger.warn('a volume published to a node down past its grace cannot be unpublished: no node has a controller of its plugin; it stays attached to that node in the backend', { node, volume_id: volumeId, alloc_id: claim.allocId });
        continue;
      }
      const client = this.registry.dispense<CSIClient>('csi-controller', volume.pluginId);
      try {
        await client.controllerUnpublishVolume({ volumeId: volume.externalId, nodeId: target, secrets: { ...volume.secrets } });
        this.logger.info('unpublished a volume from a node down past its grace, before its claim is released', { node, volume_id: volumeId, alloc_id: claim.allocId, csi_node_id: target });
      } catch (err) {
        if (isNotFound(err)) continue;
        this.logger.warn('could not unpublish a volume from a node down past its grace; its claim is released all the same, and the next publish may be refused until it is detached', { node, volume_id: volumeId, alloc_id: claim.allocId, error: err });
      } finally {
        client.dispose();
      }
    }
    return true;
  }

  /** `node purge`: a down node of the cluster gone for good (cluster-node-purge.ts). */
  async purgeNode(name: string): Promise<NodePurgeResult> {
    this.checkOpen();
    if (!this.membership) throw new NotFoundError('this agent is not in a cluster: it is its only node, and a node is purged only from a cluster');
    return this.clusterCall(() => purgeClusterNode(this.membership!, name, (node, published) => this.unpublishFrom(node, published)));
  }

  /** Cluster mode, agent to agent: one CSI call made on this node's own controller of the plugin (never a routed one). */
  answerRoutedCall(plugin: string, service: string, rpc: string, request: unknown, signal?: AbortSignal): Promise<RoutedAnswer> {
    this.checkOpen();
    if (!this.membership) throw new NotFoundError('this agent is not in a cluster: no controller call is routed to it');
    return answerRoutedCall(this.registry, plugin, service, rpc, request, signal);
  }

  private async recordGrowth(view: VolumeView): Promise<void> {
    const volumes = this.clusterJobs!.store.volumes;
    try {
      const record = await volumes.get(view.id);
      if (record && !(await volumes.replace({ ...record, volume: { ...view, claims: [] } }))) throw new Error('its record changed meanwhile');
    } catch (err) {
      this.logger.warn('the volume grew, but its record in the cluster could not say so; it still shows the old capacity', { volume_id: view.id, error: err });
    }
  }

  /**
   * Cluster mode: whether this node's volume `id` is the cluster's (the same
   * plugin and external id as its record in etcd). A volume of the node's own
   * under an id the cluster also has is the node's alone: changing it never
   * touches the cluster's.
   */
  private async clusterVolumeIs(id: string, local: VolumeView | undefined): Promise<boolean> {
    if (!this.clusterJobs || !local) return false;
    this.clusterJobs.assertMember();
    const record = await this.clusterCall(() => this.clusterJobs!.store.volumes.get(id));
    return record !== undefined && record.state === undefined && record.pluginId === local.pluginId && externalIdOf(record) === local.externalId;
  }

  /** Cluster mode: a volume claimed on any node is not deregistered or deleted (refused before anything is done). */
  private async assertUnclaimedInCluster(id: string): Promise<void> {
    if (!this.clusterJobs) return;
    this.clusterJobs.assertMember();
    const claims = await this.clusterCall(() => this.clusterJobs!.store.claims.claims(id));
    if (claims.length > 0) {
      throw new ConflictError(`volume "${id}" is claimed in the cluster (${claims.map((c) => `alloc ${c.allocId} on node ${c.nodeId}`).join(', ')}); stop the jobs using it first`);
    }
  }

  /** Cluster mode: once gone here, the volume leaves the cluster's catalog too (only the record of that volume), and every node drops its copy. */
  private async removeFromCluster(id: string, was: VolumeView): Promise<void> {
    if (!this.clusterJobs) return;
    let removed = false;
    try {
      removed = await this.clusterJobs.store.volumes.remove(id, (r) => r.state === undefined && r.pluginId === was.pluginId && externalIdOf(r) === was.externalId);
    } catch (err) {
      throw new ClusterUnavailableError(`volume "${id}" is gone from this node, but the cluster's etcd did not answer (${err instanceof Error ? err.message : String(err)}): run the same command again once it does, so other nodes drop it too`);
    }
    if (!removed) throw new ConflictError(`volume "${id}" is gone from this node, but the cluster's record of it changed meanwhile (a claim taken, or another volume under the id); that record stays`);
  }

  /**
   * Grows a volume (the controller side, then every live mount here): online
   * when the node plugin expands ONLINE (the catalog refuses a claimed volume
   * of any other), else owed and made when each mount is next published.
   */
  private async expandVolume(existing: VolumeView, spec: VolumeSpec): Promise<VolumeView> {
    if (spec.pluginId !== existing.pluginId) {
      throw new ValidationError(`volume "${existing.id}" exists on plugin "${existing.pluginId}"; a volume create of it on plugin "${spec.pluginId}" can neither expand nor move it`, 'plugin_id');
    }
    const grown = await this.catalog.expandVolume(existing.id, { ...(spec.capacityMin !== undefined ? { capacityMin: spec.capacityMin } : {}), ...(spec.capacityMax !== undefined ? { capacityMax: spec.capacityMax } : {}) });
    if (!grown.nodeExpansionRequired) return this.getVolume(existing.id) ?? grown.volume;
    // CSI: only a plugin that expands ONLINE is asked while the volume is published (the catalog refused the rest while claimed).
    const online = this.csi.pluginInfo('csi-node', existing.pluginId)?.pluginCapabilities?.onlineExpansion === true;
    const nodeExpansion = await this.volumeMounts.expandMounted(existing.id, grown.capacityBytes, { online });
    for (const o of nodeExpansion) {
      if (o.error !== undefined) this.logger.warn('a node-side expansion failed; it is made when the mount is next published', { volume_id: existing.id, alloc_id: o.allocId, error: o.error });
    }
    return { ...(this.getVolume(existing.id) ?? grown.volume), nodeExpansion };
  }

  volumeUsage(filter: { volumeId?: string; allocId?: string }): Promise<MountUsageView[]> {
    this.checkOpen();
    if (filter.volumeId !== undefined && !this.catalog.getVolume(filter.volumeId)) return Promise.reject(new NotFoundError(`volume "${filter.volumeId}" not found`));
    return this.volumeMounts.usage(filter);
  }

  createSnapshot(volumeId: string, name?: string): Promise<SnapshotView> {
    this.checkOpen();
    return this.catalog.createSnapshot(volumeId, name);
  }

  deleteSnapshot(pluginId: string, snapshotId: string): Promise<void> {
    this.checkOpen();
    return this.catalog.deleteSnapshot(pluginId, snapshotId);
  }

  listSnapshots(options: { pluginId?: string; perPage?: number; nextToken?: string }): Promise<Page<SnapshotView>> {
    this.checkOpen();
    const pluginId = this.listingPlugin(options.pluginId, (c) => c.capabilities.listSnapshots, 'snapshots');
    if (pluginId === undefined) return Promise.resolve({ items: [] });
    return this.catalog.listSnapshots(pluginId, options);
  }

  listExternalVolumes(options: { pluginId?: string; perPage?: number; nextToken?: string }): Promise<Page<ExternalVolumeView>> {
    this.checkOpen();
    const pluginId = this.listingPlugin(options.pluginId, (c) => c.supportsListVolumes, 'volumes');
    if (pluginId === undefined) return Promise.resolve({ items: [] });
    return this.catalog.listExternalVolumes(pluginId, options);
  }

  /** The plugin a list goes to: the one named, or the only one whose controller offers it (undefined: none does). */
  private listingPlugin(named: string | undefined, offers: (c: NonNullable<PluginInfo['controller']>) => boolean, what: string): string | undefined {
    if (named !== undefined) return named;
    const able = [...new Set(this.csi.plugins().filter((p) => p.type === 'csi-controller' && p.controller && offers(p.controller)).map((p) => p.name))].sort();
    if (able.length > 1) throw new ValidationError(`more than one plugin lists its ${what} (${able.join(', ')}); name one with -plugin`, 'plugin_id');
    return able[0];
  }

  /** What is mounted below the alloc's publish dirs of the volume (per-alloc/<alloc>/<volume>), whatever the plugin's type dir. */
  private mountsOfAlloc(pluginId: string, allocId: string, volumeId: string): string[] {
    let root = this.config.dataDir;
    try {
      root = fs.realpathSync(root);
    } catch {
      // The mount table lists real paths; an unresolvable data dir has nothing mounted under it.
    }
    return ['monolith', 'node', 'controller'].flatMap((type) => mountsUnder(path.join(root, 'csi', type, pluginId, 'per-alloc', allocId, volumeId)));
  }

  async detachVolume(volumeId: string, nodeId: string): Promise<VolumeDetachResult> {
    this.checkOpen();
    const volume = this.catalog.getVolume(volumeId);
    if (!volume) throw new NotFoundError(`volume "${volumeId}" not found`);
    const pluginNode = this.csi.pluginInfo('csi-node', volume.pluginId)?.node?.nodeId;
    if (nodeId !== this.config.nodeId && nodeId !== pluginNode) {
      throw new ValidationError(`node "${nodeId}" is not this node (${this.config.nodeId}${pluginNode && pluginNode !== this.config.nodeId ? `, node ${pluginNode} to plugin ${volume.pluginId}` : ''}): detach a volume through the agent of its node`, 'node');
    }
    const broken = volume.claims.filter((c) => this.unrestored.has(c.allocId)).map((c) => c.allocId);
    if (broken.length) {
      throw new ConflictError(`volume "${volumeId}" is claimed by alloc${broken.length > 1 ? 's' : ''} ${broken.join(', ')}, which this agent could not restore (its saved state could not be read or rebuilt; its tasks were left running): fix or remove that state and restart the agent before you detach the volume`);
    }
    const live = volume.claims.filter((c) => this.allocLive(c.allocId)).map((c) => c.allocId);
    if (live.length) {
      throw new ConflictError(`volume "${volumeId}" is claimed by running alloc${live.length > 1 ? 's' : ''} ${live.join(', ')}; stop ${live.length > 1 ? 'them' : 'it'} (job stop) before you detach the volume`);
    }
    const released: string[] = [];
    for (const claim of volume.claims) {
      const names = this.volumeMounts.list(claim.allocId).filter((r) => r.volumeId === volumeId).map((r) => r.name);
      // Unmounted here first (unpublish, unstage), which releases the claim; a claim with nothing mounted is released directly.
      if (names.length) {
        const outcomes = await this.volumeMounts.unmount(claim.allocId, names);
        const failed = outcomes.find((o) => o.error !== undefined);
        if (failed) throw new ConflictError(`volume "${volumeId}" could not be unmounted for alloc ${claim.allocId}: ${String(failed.error instanceof Error ? failed.error.message : failed.error)}; it is retried in the background (volume status shows it)${released.length ? `; claims released before it: ${released.join(', ')}` : ''}`);
      } else {
        // No record of what was mounted for it: a mount left here is not this agent's to take down blindly.
        const left = this.mountsOfAlloc(volume.pluginId, claim.allocId, volume.id);
        if (left.length) throw new ConflictError(`volume "${volumeId}" is still mounted for alloc ${claim.allocId} at ${left.join(', ')}, and no mount record says how: unmount it (or run the agent with -reconcile-orphans), then detach again${released.length ? `; claims released before it: ${released.join(', ')}` : ''}`);
      }
      if (this.catalog.getVolume(volumeId)?.claims.some((c) => c.allocId === claim.allocId)) await this.catalog.release(volumeId, claim.allocId);
      await this.releaseInCluster(volumeId, claim.allocId);
      released.push(claim.allocId);
    }
    this.logger.info('volume detached', { volume_id: volumeId, node_id: nodeId, released });
    return { volumeId, nodeId, released };
  }

  /** Whether this node runs the alloc (or is about to): a claim of it is in use. */
  private allocLive(allocId: string): boolean {
    if (this.unrestored.has(allocId)) return true;
    const r = this.runners.get(allocId);
    return !!r && r.alloc.desiredStatus === 'run' && r.alloc.clientStatus !== 'complete' && r.alloc.clientStatus !== 'failed';
  }

  async sweepClaims(): Promise<{ volumeId: string; allocId: string }[]> {
    if (this.closed) return [];
    const released: { volumeId: string; allocId: string }[] = [];
    for (const volume of this.catalog.listVolumes()) {
      for (const claim of volume.claims) {
        if (this.closed) return released;
        // An alloc this node still has (a stopped one finishes its own teardown), could not restore, or still holds something for (a pending unmount) keeps its claim.
        if (this.runners.has(claim.allocId) || this.unrestored.has(claim.allocId) || this.volumeMounts.list(claim.allocId).length > 0) continue;
        // Nor while anything is still mounted for it here (a record lost with its mount left): unpublishing the volume from under a mount would break CSI's order.
        const left = this.mountsOfAlloc(volume.pluginId, claim.allocId, volume.id);
        if (left.length) {
          this.logger.warn('the claim sweep keeps a claim of an alloc this node no longer has: its volume is still mounted here (volume detach unmounts it)', { volume_id: volume.id, alloc_id: claim.allocId, mounts: left });
          continue;
        }
        try {
          await this.catalog.release(volume.id, claim.allocId);
          await this.releaseInCluster(volume.id, claim.allocId);
          released.push({ volumeId: volume.id, allocId: claim.allocId });
          this.emit({ topic: 'Volume', type: 'Claim released', message: `claim of volume "${volume.id}" by alloc ${claim.allocId} released by the claim sweep: this node has no such alloc`, volumeId: volume.id, allocId: claim.allocId });
        } catch (err) {
          this.logger.warn('the claim sweep could not release a claim; it tries again on its next round', { volume_id: volume.id, alloc_id: claim.allocId, error: err });
        }
      }
    }
    // Only while this agent holds its node: another machine refused the same name must never release that node's claims.
    if (this.membership?.holdsNode && !this.closed) {
      try {
        released.push(...(await this.sweepClusterClaims()));
      } catch (err) {
        this.logger.warn('the claim sweep could not read the claims in etcd; it tries again on its next round', { error: err });
      }
    }
    return released;
  }

  /** In cluster mode, the claim in etcd goes with the local one (a purge, a detach, the sweep); etcd away: the sweep tries again. */
  private async releaseInCluster(volumeId: string, allocId: string): Promise<void> {
    if (!this.membership) return;
    await this.membership.claims.release(volumeId, allocId).catch((err: unknown) => this.logger.warn('the claim in etcd could not be released; the claim sweep tries again', { volume_id: volumeId, alloc_id: allocId, error: err }));
  }

  /**
   * Claims in etcd held by this node for allocs it no longer has (a release
   * that reached the local catalog but not etcd): released there. A claim of
   * an alloc this node still has, could not restore, or holds a mount record
   * for, stays.
   */
  private async sweepClusterClaims(): Promise<{ volumeId: string; allocId: string }[]> {
    const released: { volumeId: string; allocId: string }[] = [];
    const all = await this.membership!.claims.all();
    for (const { volumeId, claims } of all) {
      for (const claim of claims) {
        // Only this identity's: a claim of another machine under the same name (or of unknown identity, from before identities) is never released here.
        if (!this.membership!.ownsClaim(claim) || this.closed) continue;
        // Kept: a claim this node's catalog holds, or its reconciler has a record of (a claim in flight, a pending unmount), or of an alloc it could not restore.
        if (this.unrestored.has(claim.allocId) || this.volumeMounts.list(claim.allocId).some((r) => r.volumeId === volumeId)) continue;
        if (this.catalog.getVolume(volumeId)?.claims.some((c) => c.allocId === claim.allocId)) continue;
        try {
          await this.membership!.claims.release(volumeId, claim.allocId);
          released.push({ volumeId, allocId: claim.allocId });
          this.emit({ topic: 'Volume', type: 'Claim released', message: `claim of volume "${volumeId}" by alloc ${claim.allocId} released in the cluster by the claim sweep: this node holds no such claim`, volumeId, allocId: claim.allocId });
        } catch (err) {
          this.logger.warn('the claim sweep could not release a claim in etcd; it tries again on its next round', { volume_id: volumeId, alloc_id: claim.allocId, error: err });
        }
      }
    }
    return released;
  }

  /**
   * Once the node is in the cluster: every claim this node's catalog holds is
   * claimed in etcd too (the same alloc again is granted as it stands). A
   * claim another node holds there is a conflict no one may resolve
   * silently: it is said loudly, and left for an operator.
   */
  async assertClaimsInCluster(): Promise<void> {
    const membership = this.membership;
    if (!membership || this.closed) return;
    for (const volume of this.catalog.listVolumes()) {
      for (const c of volume.claims) {
        // An alloc being stopped here (moved away, a smaller share) lets go of its claim: it is not claimed again in etcd.
        if (this.runners.get(c.allocId)?.alloc.desiredStatus === 'stop') continue;
        const request = { volumeId: volume.id, allocId: c.allocId, readOnly: c.mode === 'read', accessMode: c.accessMode, attachmentMode: c.attachmentMode };
        // etcd away (just after joining, a flap): tried again with backoff; only a refusal is a conflict.
        for (let delay = 500; ; delay = Math.min(delay * 2, 10_000)) {
          // A later join (a lost lease) starts over: this one stops, and that one asserts once the node settled again.
          if (this.closed || !membership.holdsNode || !this.clusterJobs?.settled) return;
          try {
            await membership.claims.claim(volume, request, membership.nodeName);
            // Released here while it was claimed there (a teardown finishing at the same time): given back in etcd too.
            if (!this.catalog.getVolume(volume.id)?.claims.some((x) => x.allocId === c.allocId)) await this.releaseInCluster(volume.id, c.allocId);
            break;
          } catch (err) {
            if (err instanceof ClaimError && err.code === 'ECLAIM_ETCD_UNAVAILABLE') {
              await this.clock.sleep(delay).catch(() => undefined);
              continue;
            }
            this.logger.error('a claim this node holds could not be claimed in the cluster: another node holds the volume in etcd, or etcd refused; both may be using it — check both nodes', { volume_id: volume.id, alloc_id: c.allocId, error: err });
            this.emit({ topic: 'Volume', type: 'Claim conflict', message: `claim of volume "${volume.id}" by alloc ${c.allocId} here is not held in the cluster: ${err instanceof Error ? err.message : String(err)}`, volumeId: volume.id, allocId: c.allocId });
            break;
          }
        }
      }
    }
  }

  /**
   * The API's token changed (a config reload): tasks started from now on may
   * have the host's network only while there is one. Tasks already running
   * keep what they have (a re-attach says so, see TaskRunner).
   */
  apiTokenChanged(hasToken: boolean): void {
    const was = this.hostNetworkAllowed;
    this.hostNetworkAllowed = hasToken;
    if (!was || hasToken) return;
    // Tasks already on the host's network run on (stopping them is the operator's call), but they now reach a
    // token-less API: each says so (a "Config Refused" event and a warning), and is refused at its next start.
    for (const r of this.runners.values()) r.recheckRefusals();
    if (this.unrestored.size > 0) {
      this.logger.warn('the API no longer asks for a token; allocs this agent could not restore run on unseen, and any of their isolated tasks on the host\'s network can reach it', { allocs: [...this.unrestored] });
    }
  }

  // ---- lifecycle ---------------------------------------------------------------

  private checkOpen(): void {
    if (this.closed) throw new AgentShuttingDownError();
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
    this.closed ??= (async () => {
      const stopTasks = options.stopTasks ?? this.config.stopTasksOnExit;
      if (!stopTasks) this.leaving.abort(new ShutdownError('the agent is shutting down; its tasks keep running'));
      let failure: unknown;
      // No pass may run a job here or stop one while the agent shuts down.
      await this.clusterJobs?.dispose().catch(() => undefined);
      this.claimSweep?.dispose();
      await this.sweeping;
      // Rollouts first: cancelled when every task stops (nothing to resume), else left to the next agent.
      await this.updates.dispose({ stopTasks }).catch((err: unknown) => (failure ??= err));
      const settle = async (stops: Promise<void>[]) => {
        for (const r of await Promise.allSettled(stops)) if (r.status === 'rejected') failure ??= r.reason;
      };
      if (stopTasks) {
        // Workloads first, so their volumes are unmounted while the plugins
        // still run; allocs already stopping (a job stop, a teardown boot
        // resumed) are waited for with them. Every stop runs even if one fails.
        const all = [...this.runners.values()];
        const plugins = all.filter((r) => r.alloc.job.groups.some((g) => g.name === r.alloc.group && g.tasks.some((t) => t.csiPlugin)));
        await settle(all.filter((r) => !plugins.includes(r)).map((r) => r.stop()));
        await settle(plugins.map((r) => r.stop()));
      } else {
        for (const r of this.runners.values()) r.detach();
      }
      // Routed controllers last of the agent's own parts: the workloads stopped above may have unpublished through them.
      await this.controllers?.dispose().catch(() => undefined);
      this.events.stopRelaying();
      // The state is about to close: a scrape from here on reads no gauges rather than failing.
      this.metrics.retire();
      await this.modules.stop().catch((err: unknown) => (failure ??= err));
      // The node's lease runs out unless the next agent renews it first; its claims in etcd stay (its mounts do too).
      await this.membership?.dispose().catch((err: unknown) => this.logger.warn('leaving the cluster connection failed', { error: err }));
      try {
        this.lock.close();
      } catch (err) {
        // The lock dies with the process anyway.
        this.logger.error('closing the data dir lock failed; it is closed anyway', { error: err });
      }
      // Whatever the container made and the modules did not release (all idempotent).
      await Promise.resolve(this.container.dispose()).catch((err: unknown) => this.logger.error('disposing the container failed', { error: err }));
      this.logger.info('agent stopped', { tasks_stopped: stopTasks });
      if (failure !== undefined) throw failure;
    })();
    return this.closed;
  }
}

/** A live mount's check as the volume view shows it. */
function checkOf(c: MountCheckView): NonNullable<VolumeMountView['check']> {
  return { state: c.state, ...(c.message !== undefined ? { message: c.message } : {}), ...(c.time !== undefined ? { time: c.time } : {}) };
}
