// The jobs part of the agent's service facade: jobs run, planned and stopped
// here through the one writer of each job's allocs (the job updater,
// deploy/), the allocs the last agent left restored at boot, a purge that
// takes an alloc's record, runner and dir with it (its claims released
// through the claimer, claim-sweep.ts), and how every alloc runner is built.
// In a cluster a run or a stop goes to the cluster (@csiplug/cluster's ClusterMode) and
// each node runs its share through runLocal and stopLocal.
import { ValidationError, ShutdownError, UnsupportedError, type Event } from '@csiplug/core';
import { mountsUnder } from '@csiplug/csimanager';
import type { TaskDriver } from '@csiplug/driver';
import type { ICSIHookFactory, ICSIPluginSupervisorFactory, TaskEvent } from '@csiplug/hooks';
import * as fs from 'fs';
import type { AgentContext } from './agent-context';
import { assertNoPerAllocInCluster, assertPerAllocVolumesExist } from './per-alloc-volumes';
import { AgentShuttingDownError, NotFoundError } from './agent-errors';
import type { ClaimSweep } from './claim-sweep';
import { pendingUnmountsOf } from './pending-unmounts';
import { recordedWriteClaims } from './recorded-write-claims';
import type { ClusterMode } from '@csiplug/cluster';
import { JobUpdater, type WriterClaimOptions } from '@csiplug/runner';
import type { JobPlan } from '@csiplug/jobspec';
import type { RolloutHost } from '@csiplug/runner';
import { TASK_RESTARTS_TOTAL, type PromMetrics } from './metrics';
import type { Alloc, JobSpec, NodeAttributes } from '@csiplug/jobspec';
import { DEFAULT_IMAGE_DRIVER, datacenterMatches, datacenterMismatch } from '@csiplug/jobspec';
import type { TaskImagesService } from '@csiplug/images';
import { AllocRunner, type AllocRunnerDeps } from '@csiplug/runner';
import type { AllocStore } from '@csiplug/runner';
import { drainBeforePluginStop } from '@csiplug/runner';
import { assertRawExecAllowed } from '@csiplug/runner';
import type { TaskStateWriter } from '@csiplug/runner';
import type { AgentEvent, JobView, RunJobOptions, RunJobResult } from '@csiplug/api';

/** What the job service uses besides the shared context. */
export interface JobServiceDeps {
  driver: TaskDriver;
  allocStore: AllocStore;
  taskStates: TaskStateWriter;
  supervisors: ICSIPluginSupervisorFactory;
  csiHooks: ICSIHookFactory;
  metrics: PromMetrics;
  onEvent: Event<AgentEvent>;
  claimSweep: ClaimSweep;
  /** Variables every task sees, on top of its own. */
  taskVariables: Record<string, string>;
  /** This node for `${attr.…}`, `${node.…}`, `${meta.…}` (the runner's fingerprint of it). */
  node: NodeAttributes;
  /** The image service (imagesModule): the roots of docker/podman tasks. */
  images?: TaskImagesService;
  /** Cluster mode, once made (undefined for an agent on its own). */
  cluster: () => ClusterMode | undefined;
}

export class JobService {
  /** The one writer of each job's allocs: runs (plans, rollouts, reverts) and stops (deploy/). */
  readonly jobUpdater: JobUpdater<AllocRunner>;
  /** Whether isolated tasks may have the host's network: the API asks for a token (changes with a config reload). */
  private hostNetworkAllowed: boolean;
  /** Aborted when the agent starts going away with its tasks left running (a node plugin's stop ends its wait for unmounts). */
  private readonly leaving = new AbortController();
  /** Old stopped allocs being retired (their image roots released first): not forgotten twice. */
  private readonly retiring = new Set<AllocRunner>();

  constructor(
    private readonly ctx: AgentContext,
    private readonly deps: JobServiceDeps,
  ) {
    this.hostNetworkAllowed = ctx.config.acl.token !== undefined;
    this.jobUpdater = new JobUpdater(this.rolloutHost());
  }

  // ---- AgentService: jobs ----------------------------------------------------------

  listJobs(): JobView[] {
    const ids = new Set([...this.ctx.allocs.jobIds(), ...(this.deps.cluster()?.jobIds() ?? [])]);
    return [...ids].sort().flatMap((id) => this.getJob(id) ?? []);
  }

  /** The job here; in a cluster, with where its slots are placed. */
  getJob(id: string): JobView | undefined {
    const local = this.localJobView(id);
    const cluster = this.deps.cluster();
    return cluster ? cluster.getJob(id, local) : local;
  }

  /** A run on this agent alone refuses new allocs that would wait for a write claim a live alloc or a catalog claim holds, unless `queue`. */
  async runJob(job: JobSpec, options: RunJobOptions = {}): Promise<RunJobResult> {
    this.ctx.checkOpen();
    const cluster = this.deps.cluster();
    if (cluster) {
      assertNoPerAllocInCluster(job);
      return cluster.runJob(job);
    }
    this.checkDatacenter(job);
    // The alloc limit first: per_alloc lists an id per alloc, and count may be huge.
    this.checkAllocLimit(job);
    this.checkPerAllocVolumes(job);
    return this.runLocal(job, {
      refuseHeldWriterClaims: !options.queue,
      recordedWriteClaims: () => recordedWriteClaims(this.ctx, (id) => this.servesNodeHere(id)),
    });
  }

  planJob(job: JobSpec): JobPlan {
    if (this.deps.cluster()) {
      throw new UnsupportedError(
        `job plan is not built for a cluster yet: a plan here would show this node alone; job run places job "${job.id}" (and says where), job status shows it after`,
      );
    }
    this.checkDatacenter(job);
    this.checkAllocLimit(job);
    this.checkPerAllocVolumes(job);
    return this.jobUpdater.plan(job);
  }

  async stopJob(id: string, options: { purge?: boolean } = {}): Promise<JobView> {
    this.ctx.checkOpen();
    const stopped = await this.deps.cluster()?.stopJob(id, options);
    return stopped ?? this.stopLocal(id, options);
  }

  // ---- this node's jobs -------------------------------------------------------------

  /** The job as it runs here; undefined when nothing of it is here. */
  localJobView(jobId: string): JobView | undefined {
    const runners = this.ctx.allocs.ofJob(jobId);
    const written = this.jobUpdater.view(jobId);
    if (runners.length === 0 || !written) return undefined;
    const { version, job, deployment } = written;
    const live = runners.filter(
      (r) => r.alloc.desiredStatus === 'run' && (r.alloc.clientStatus === 'running' || r.alloc.clientStatus === 'pending'),
    );
    const status: JobView['status'] = live.some((r) => r.alloc.clientStatus === 'running') ? 'running' : live.length ? 'pending' : 'dead';
    // No submit time is kept here: the current version's deployment started as it was submitted; else its newest alloc.
    const ofVersion = runners.filter((r) => (r.alloc.jobVersion ?? 0) === version);
    const submittedAt =
      deployment?.jobVersion === version
        ? deployment.createdAt
        : Math.max(...(ofVersion.length ? ofVersion : runners).map((r) => r.alloc.createdAt));
    const pending = runners.flatMap((r) => pendingUnmountsOf(this.ctx.reconciler.list(r.alloc.id), (id) => this.servesNodeHere(id)));
    return {
      id: job.id,
      name: job.name,
      status,
      version,
      job,
      submittedAt,
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
      ...(pending.length ? { volumeUnmountsPending: pending } : {}),
    };
  }

  /** The local job as it runs now: its current spec and how many allocs want to run. */
  localJob(id: string): { job: JobSpec; wanted: number } | undefined {
    const view = this.jobUpdater.view(id);
    return view && { job: view.job, wanted: this.ctx.allocs.ofJob(id).filter((r) => r.alloc.desiredStatus === 'run').length };
  }

  /**
   * The job run here, by this agent's job updater (on its own, or this
   * node's share of a cluster job: the limit is on what this node runs).
   */
  async runLocal(job: JobSpec, options: WriterClaimOptions = {}): Promise<RunJobResult> {
    this.ctx.checkOpen();
    this.checkAllocLimit(job);
    assertRawExecAllowed(job, this.ctx.config.rawExec.enabled);
    return this.jobUpdater.run(job, () => this.ctx.checkOpen(), options);
  }

  async stopLocal(id: string, options: { purge?: boolean } = {}): Promise<JobView> {
    this.ctx.checkOpen();
    if (this.ctx.allocs.ofJob(id).length === 0) throw new NotFoundError(`job "${id}" not found`);
    // As the job's one writer: a rollout under way is cancelled first, so nothing starts again behind the stop.
    return this.jobUpdater.exclusive(id, 'Cancelled because job is stopped', () => {
      // Again as the job's writer: a purge that ran while this waited leaves nothing to stop.
      if (this.ctx.allocs.ofJob(id).length === 0) throw new NotFoundError(`job "${id}" not found`);
      return this.stopAllocs(id, options);
    });
  }

  /** per_alloc volumes (db[0], db[1], …) all in the catalog, for a run and a plan alike (per-alloc-volumes.ts). */
  private checkPerAllocVolumes(job: JobSpec): void {
    assertPerAllocVolumesExist(job, (id) => this.ctx.catalog.getVolume(id) !== undefined);
  }

  /** The job's datacenters hold this node's (a 400 naming both: on one agent, no other node could take it). */
  private checkDatacenter(job: JobSpec): void {
    const { datacenter } = this.ctx.config.node;
    if (job.datacenters && !datacenterMatches(job.datacenters, datacenter))
      throw new ValidationError(datacenterMismatch(job.id, job.datacenters, datacenter), 'datacenters');
  }

  /** `limits { max_allocs_per_job }`, for a run and a plan alike, before any per-alloc work (a 400 naming the count). */
  private checkAllocLimit(job: JobSpec): void {
    const wanted = job.groups.reduce((n, g) => n + g.count, 0);
    const limit = this.ctx.config.limits.maxAllocsPerJob;
    if (wanted > limit) {
      throw new ValidationError(
        `job "${job.id}" asks for ${wanted} allocs (${job.groups.map((g) => `${g.name}: ${g.count}`).join(', ')}); this agent runs at most ${limit} per job (limits { max_allocs_per_job })`,
        'count',
      );
    }
  }

  private async stopAllocs(id: string, options: { purge?: boolean }): Promise<JobView> {
    const { ctx } = this;
    const runners = ctx.allocs.ofJob(id);
    await Promise.all(runners.map((r) => r.stop()));
    // The agent went away while a plugin of the job waited for unmounts: its tasks run on and the saved stop is the
    // next agent's to finish — nothing is purged (its record is how the next agent knows the tasks).
    if (runners.some((r) => r.stopCutShort)) throw new AgentShuttingDownError();
    const view = this.localJobView(id);
    if (!view) throw new NotFoundError(`job "${id}" not found`);
    if (options.purge) {
      for (const r of runners) {
        const records = ctx.reconciler.list(r.alloc.id);
        // A volume still wanted mounted (its postrun could not even record the
        // unmount) is unmounted now: once the alloc is gone, nothing else would ask.
        if (records.some((v) => v.desired === 'mounted')) {
          await ctx.reconciler.unmount(r.alloc.id).catch((err) =>
            ctx.logger.warn('unmounting the volumes of a purged alloc failed; the volume reconciler retries', {
              alloc_id: r.alloc.id,
              error: err,
            }),
          );
        }
        // A claim the volume reconciler holds a record of is released by it, in order; any other through the claimer.
        if (records.length === 0) await this.deps.claimSweep.releaseAllOf(r.alloc.id);
        await this.retire(r);
      }
      // A purged job's restart counts go with it: its series would otherwise be scraped for as long as the agent runs.
      await this.deps.metrics.forgetSeries(TASK_RESTARTS_TOTAL, { job: id });
    }
    ctx.emit({ topic: 'Job', type: 'Job stopped', message: `job ${id} stopped${options.purge ? ' and purged' : ''}`, jobId: id });
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
        this.ctx.logger.warn('keeping the dir of a purged alloc: something is still mounted below it', {
          alloc_id: r.alloc.id,
          dir,
          mounts: mounted,
        });
        return;
      }
      fs.rmSync(dir, { recursive: true, force: true });
    } catch (err) {
      this.ctx.logger.warn('could not remove the dir of a purged alloc', { alloc_id: r.alloc.id, dir, error: err });
    }
  }

  /**
   * Whether this node has (or is starting) a controller of the plugin.
   * Waiting makes sense only for a plugin that is here or on its way: a
   * name nothing registers nor runs is refused at once, not after the wait.
   */
  controlsHere(pluginId: string): boolean {
    const controls = (job: JobSpec, group?: string) =>
      job.groups.some(
        (g) =>
          (group === undefined || g.name === group) && g.tasks.some((t) => t.csiPlugin?.id === pluginId && t.csiPlugin.type !== 'node'),
      );
    const starting =
      this.jobUpdater.deploying().some((job) => controls(job)) ||
      this.ctx.allocs
        .all()
        .some(
          (r) =>
            r.alloc.desiredStatus === 'run' &&
            r.alloc.clientStatus !== 'complete' &&
            r.alloc.clientStatus !== 'failed' &&
            controls(r.alloc.job, r.alloc.group),
        );
    return starting || this.ctx.registry.get('csi-controller', pluginId) !== undefined;
  }

  /**
   * Whether node plugin `pluginId` is registered here, or a task of it is
   * wanted running (pending, running, restarting) or on its way in a
   * rollout: a plugin that may come back, which an unmount waits for. A
   * plugin whose job was stopped is none: its unmounts are left pending at
   * once, for the retries that run when it is back.
   */
  servesNodeHere(pluginId: string): boolean {
    const serves = (job: JobSpec, group?: string) =>
      job.groups.some(
        (g) =>
          (group === undefined || g.name === group) &&
          g.tasks.some((t) => t.csiPlugin?.id === pluginId && t.csiPlugin.type !== 'controller'),
      );
    return (
      this.ctx.registry.get('csi-node', pluginId) !== undefined ||
      this.jobUpdater.deploying().some((job) => serves(job)) ||
      this.ctx.allocs
        .all()
        .some(
          (r) =>
            r.alloc.desiredStatus === 'run' &&
            r.alloc.clientStatus !== 'complete' &&
            r.alloc.clientStatus !== 'failed' &&
            serves(r.alloc.job, r.alloc.group),
        )
    );
  }

  // ---- restore, token, shutdown -------------------------------------------------------

  /** Restores the allocs the last agent saved (the modules are started); returns how many it read and how many it is restoring. */
  restore(): { allocs: number; restoring: number } {
    const { ctx } = this;
    // One read of every alloc with its tasks' handles and states (not one per task).
    const { records: allocs, failures } = this.deps.allocStore.listAllocationsWithTasks();
    for (const f of failures) {
      ctx.logger.error('a saved alloc could not be read; it is left in the state file untouched', { key: f.key, error: f.error });
      // Its key is its id: its claims are in use as far as anyone here can tell.
      const id = f.key.split('/')[0];
      if (id) ctx.allocs.unrestored.add(id);
    }
    let restoring = 0;
    for (const { record, tasks } of allocs) {
      const { alloc } = record;
      let runner: AllocRunner;
      try {
        runner = new AllocRunner(alloc, this.runnerDeps(), record, tasks);
      } catch (err) {
        // One alloc that cannot be rebuilt (a group its job lacks, a task state
        // that cannot be read) is left untouched — its tasks keep running —
        // and never stops the others from being restored.
        ctx.logger.error('a saved alloc could not be restored; it is left as it is, its tasks untouched', {
          alloc_id: alloc.id,
          error: err,
        });
        ctx.allocs.unrestored.add(alloc.id);
        continue;
      }
      ctx.allocs.add(runner);
      const terminal = alloc.desiredStatus === 'stop' || alloc.clientStatus === 'complete' || alloc.clientStatus === 'failed';
      if (!terminal) {
        restoring++;
        void runner.run('restore').catch((err) => ctx.logger.error('alloc restore failed', { alloc_id: alloc.id, error: err }));
      } else if (runner.needsTeardown) {
        // It was being stopped (or its tasks had ended) when the last agent
        // went away: finish the teardown — kill what still runs, unmount,
        // release the claims.
        ctx.logger.info('finishing the teardown of an alloc the last agent left half-stopped', { alloc_id: alloc.id });
        void runner.stop().catch((err) => ctx.logger.error('alloc teardown failed', { alloc_id: alloc.id, error: err }));
      } else {
        // An unmount it left pending may have been finished while no agent watched (its claim released): it says so now.
        runner.closeFinishedUnmounts();
      }
    }
    return { allocs: allocs.length, restoring };
  }

  /** A SIGHUP: every running task's templates rendered again (AllocRunner.reloadTemplates). */
  reloadTemplates(): Promise<void> {
    return Promise.all(this.ctx.allocs.all().map((r) => r.reloadTemplates())).then(() => undefined);
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
    for (const r of this.ctx.allocs.all()) r.recheckRefusals();
    const { unrestored } = this.ctx.allocs;
    if (unrestored.size > 0) {
      this.ctx.logger.warn(
        "the API no longer asks for a token; allocs this agent could not restore run on unseen, and any of their isolated tasks on the host's network can reach it",
        { allocs: [...unrestored] },
      );
    }
  }

  /**
   * The agent begins going away: with its tasks left running, a wait for
   * unmounts before a plugin stops ends now (a cluster pass stopping a
   * plugin must not hold the shutdown). First of the agent's shutdown.
   */
  leave(stopTasks: boolean): void {
    if (!stopTasks && !this.leaving.signal.aborted)
      this.leaving.abort(new ShutdownError('the agent is shutting down; its tasks keep running'));
  }

  /**
   * The agent's shutdown, for the allocs: rollouts first (cancelled when
   * every task stops, else left to the next agent), then every alloc stopped
   * — workloads before plugins, so their volumes are unmounted while the
   * plugins still run — or detached (tasks left running). Every step runs;
   * the first failure is thrown after.
   */
  async dispose(stopTasks: boolean): Promise<void> {
    this.leave(stopTasks);
    let failure: unknown;
    await this.jobUpdater.dispose({ stopTasks }).catch((err: unknown) => (failure ??= err));
    const settle = async (stops: Promise<void>[]) => {
      for (const r of await Promise.allSettled(stops)) if (r.status === 'rejected') failure ??= r.reason;
    };
    const all = this.ctx.allocs.all();
    if (stopTasks) {
      // Allocs already stopping (a job stop, a teardown boot resumed) are waited for with them. Every stop runs even if one fails.
      const plugins = all.filter((r) => r.alloc.job.groups.some((g) => g.name === r.alloc.group && g.tasks.some((t) => t.csiPlugin)));
      await settle(all.filter((r) => !plugins.includes(r)).map((r) => r.stop()));
      await settle(plugins.map((r) => r.stop()));
    } else {
      for (const r of all) r.detach();
    }
    if (failure !== undefined) throw failure;
  }

  // ---- how runners are built -----------------------------------------------------------

  /** What the job updater works on: this agent's runners, the CSI manager's plugins, its event stream. */
  private rolloutHost(): RolloutHost<AllocRunner> {
    const { ctx } = this;
    return {
      clock: ctx.clock,
      logger: ctx.logger,
      allocsOf: (jobId) => ctx.allocs.ofJob(jobId),
      jobIds: () => ctx.allocs.jobIds().sort(),
      prepare: (alloc) => new AllocRunner(alloc, this.runnerDeps()),
      // One write, all or nothing (AllocsNotSavedError): a run that cannot be saved starts and stops nothing.
      save: (runners, stopping) => AllocRunner.saveBeforeRun(runners, stopping),
      forget: (runner) => this.forgetOldAlloc(runner),
      launch: (runner) => {
        const alloc = runner.alloc;
        ctx.allocs.add(runner);
        ctx.emit({
          topic: 'Alloc',
          type: 'Alloc received',
          message: `alloc ${alloc.name} received (job version ${alloc.jobVersion ?? 0})`,
          allocId: alloc.id,
          jobId: alloc.jobId,
        });
        void runner.run('start').catch((err) => ctx.logger.error('alloc failed to start', { alloc_id: alloc.id, error: err }));
      },
      plugins: () => ctx.csiManager.plugins(),
      pluginRegistrations: (type, name) => ctx.registry.registrations(type, name),
      onEvent: this.deps.onEvent,
      emit: (e) => ctx.emit(e),
    };
  }

  /**
   * A stopped alloc of an old job version that holds nothing (no task that
   * may live, no volume record) goes for good, as a purged one does
   * (retire); true when it is on its way.
   */
  private forgetOldAlloc(r: AllocRunner): boolean {
    if (r.alloc.desiredStatus !== 'stop' || r.needsTeardown || this.ctx.reconciler.list(r.alloc.id).length > 0) return false;
    if (this.retiring.has(r)) return false;
    this.retiring.add(r);
    void this.retire(r)
      .catch((err) =>
        this.ctx.logger.warn('could not remove an old stopped alloc; a later run tries again', { alloc_id: r.alloc.id, error: err }),
      )
      .finally(() => this.retiring.delete(r));
    return true;
  }

  /**
   * An alloc that goes for good (purged, or stopped in an old version): its
   * image tasks' roots released (unmounted, writable layers removed; the
   * images stay for image GC), then its record, saves, runner and dir — the
   * record last but the dir, so an agent killed in between finds the record
   * and releases the roots itself. Throws when the record cannot be removed.
   */
  private async retire(r: AllocRunner): Promise<void> {
    if (hasImageTask(r)) await r.releaseTaskImages();
    this.deps.allocStore.deleteAllocation(r.alloc.id);
    r.forgetSaves();
    this.ctx.allocs.remove(r);
    this.removeAllocDir(r);
  }

  private runnerDeps(): AllocRunnerDeps {
    const { ctx, deps } = this;
    const { config, allocs, reconciler, registry, csiManager } = ctx;
    return {
      dataDir: config.dataDir,
      nodeId: config.nodeId,
      driver: deps.driver,
      allocStore: deps.allocStore,
      taskStates: deps.taskStates,
      exec: config.exec,
      docker: config.docker ?? DEFAULT_IMAGE_DRIVER,
      ...(deps.images ? { images: deps.images } : {}),
      hostNetwork: () => this.hostNetworkAllowed,
      rawExec: () => config.rawExec.enabled,
      claimHeld: (volumeId: string, allocId: string) => ctx.catalog.getVolume(volumeId)?.claims.some((c) => c.allocId === allocId) ?? false,
      nodePluginExpected: (pluginId) => this.servesNodeHere(pluginId),
      volumes: reconciler,
      clock: ctx.clock,
      logger: ctx.logger,
      supervisors: deps.supervisors,
      csiHooks: deps.csiHooks,
      variables: deps.taskVariables,
      node: deps.node,
      drainPlugins: (allocId, plugins, say, signal) =>
        drainBeforePluginStop(
          {
            clock: ctx.clock,
            records: () => reconciler.list(),
            allocEnding: (id) => allocs.get(id)?.tearingDown === true,
            // Another instance serves the unmounts only if it is not going too (a plugin job of two allocs stopped at once).
            otherInstances: (pluginId, self) =>
              registry.registrations('csi-node', pluginId).filter((r) => r.allocId !== self && allocs.get(r.allocId)?.tearingDown !== true)
                .length,
            healthy: (pluginId) => {
              const info = csiManager.pluginInfo('csi-node', pluginId);
              if (!info) return false;
              // Not judged yet (a restarted agent finishing a teardown, before the first fingerprint round ended).
              if (!info.healthy && !info.fingerprinted && info.lastError === undefined) return undefined;
              return info.healthy;
            },
            retryNow: (pluginId) => reconciler.retryUnmountsNow(pluginId),
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
        ctx.emit({
          topic: 'Task',
          type: event.type,
          message: event.message,
          allocId: alloc.id,
          jobId: alloc.jobId,
          task,
          time: event.time,
        }),
      onStatusChange: (alloc: Alloc) =>
        ctx.emit({
          topic: 'Alloc',
          type: `Alloc ${alloc.clientStatus}`,
          message: `alloc ${alloc.name} is ${alloc.clientStatus}`,
          allocId: alloc.id,
          jobId: alloc.jobId,
        }),
    };
  }
}

/** Whether the alloc's group has an image task (whose root, mounted in its task dir, is released before the alloc goes). */
function hasImageTask(r: AllocRunner): boolean {
  return r.alloc.job.groups.some((g) => g.name === r.alloc.group && g.tasks.some((t) => t.image));
}
