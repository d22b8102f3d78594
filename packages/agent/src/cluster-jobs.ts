// Jobs in a cluster (config `cluster { … }`): a `job run` against any agent
// stores the job in etcd and places its allocs there (@csiplug/cluster's
// EtcdJobs and scheduler); each agent runs what is placed on its node.
//
// How a node runs its placements: for every cluster job, the job with each
// group's count set to the number of that group's slots placed here is run
// as a local job (the agent's own job updater, rollouts and all); a job with
// nothing placed here any more — stopped, moved off this node while it was
// away, purged — is stopped here (purged with it). The local allocs are
// the node's: what is mounted and running here stays node-local state,
// written by the local runners as on one agent.
//
// When: after every scheduling pass, which runs on every change of jobs or
// placements in etcd (a watch), on a timer (the watch may miss what
// happened while etcd was away, and a node's death is noticed by time), and
// on each (re)join of the node before its claims are asserted again — so a
// node that returns after its work moved stops its copies first.
//
// The cluster's volumes (volumes/<id> in etcd) are registered in this
// node's catalog as they appear, and deregistered here once they are gone
// from etcd and unclaimed here, so an alloc placed here finds its volume.
import { ClusterJobsUnavailableError, ClusterVolumeExistsError, EtcdJobs, NodeNameInUseError, type ClusterJobRecord, type ClusterJobStatus, type GroupDemand, type Placement, type Unplaced } from '@csiplug/cluster';
import { errorMessage, type Clock, type Logger } from '@csiplug/core';
import type { VolumeCatalogService, VolumeSpec, VolumeView } from '@csiplug/volumes';
import type { ClusterMembership } from './cluster-membership';
import { sameJob } from './deploy/job-diff';
import type { JobSpec } from './model';
import type { ClusterJobView } from './service';

/** How often a pass runs when nothing in etcd changed (a node's death is noticed by time). */
const PASS_INTERVAL_MS = 1_000;
/** What a job submitted while etcd was away says until it is stored. */
export const QUEUED_REASON = 'waiting on this agent for the cluster\'s etcd to answer; submitted once it does (an agent restart before then forgets it)';
/** Changes arriving together are handled in one pass. */
const DEBOUNCE_MS = 50;

/** What the node's runner of placements needs of the agent. */
export interface ClusterJobsHost {
  /** The local job as it runs now: its current spec and how many allocs want to run. */
  localJob(id: string): { job: JobSpec; wanted: number } | undefined;
  localJobIds(): string[];
  /** Runs the job here (the agent's job updater). */
  runLocal(job: JobSpec): Promise<unknown>;
  /** Stops the job here (and purges it). */
  stopLocal(id: string, purge: boolean): Promise<unknown>;
  catalog: VolumeCatalogService;
}

/** What the scheduler needs of a job: each group's count, drivers and volumes. */
export function demandOf(job: JobSpec): GroupDemand[] {
  return job.groups.map((g) => ({
    name: g.name,
    count: job.type === 'system' ? 1 : g.count,
    drivers: [...new Set(g.tasks.map((t) => (t.isolated ? 'exec' : 'raw_exec')))].sort(),
    volumes: g.volumes.map((v) => ({ volumeId: v.source, accessMode: v.accessMode, readOnly: v.readOnly })),
  }));
}

/** The job as this node runs it: each group's count is its slots placed here; undefined when nothing is. */
export function projectJob(job: JobSpec, placements: readonly Placement[], node: string): JobSpec | undefined {
  const here = placements.filter((p) => p.jobId === job.id && p.node === node);
  const groups = job.groups.flatMap((g) => {
    const n = here.filter((p) => p.group === g.name).length;
    return n > 0 ? [{ ...g, count: n }] : [];
  });
  return groups.length > 0 ? { ...job, groups } : undefined;
}

export class ClusterJobs {
  readonly store: EtcdJobs<JobSpec>;
  private timer: { dispose(): void } | undefined;
  private watches: Array<{ close(): Promise<void> }> = [];
  private debounce: { dispose(): void } | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private closed = false;
  /** What the last pass read: jobs, placements, pending, for views that answer at once. */
  private seen: { jobs: ClusterJobRecord<JobSpec>[]; placements: Placement[]; pending: Map<string, Unplaced[]>; at: number } | undefined;
  /** Volumes of the cluster this node registered (or found registered) in its catalog during this run. */
  private readonly mirrored = new Set<string>();
  /** Volumes whose registration here failed, with the reason last logged (said once per reason). */
  private readonly mirrorFailures = new Map<string, string>();
  /** Local jobs unknown to the cluster, warned of once. */
  private readonly strangers = new Set<string>();

  constructor(
    private readonly membership: ClusterMembership,
    private readonly host: ClusterJobsHost,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {
    this.store = new EtcdJobs<JobSpec>(membership.conn, logger, () => clock.now());
  }

  private get node(): string {
    return this.membership.nodeName;
  }

  /** Starts the watches and the timer; passes run from then on. Never throws (etcd away: the timer's passes catch up). */
  start(): void {
    this.timer = this.clock.setInterval(() => this.kick(), PASS_INTERVAL_MS);
    const onChange = () => {
      if (this.closed || this.debounce) return;
      this.debounce = this.clock.setTimeout(() => {
        this.debounce = undefined;
        this.kick();
      }, DEBOUNCE_MS);
    };
    void Promise.all([this.store.watch(onChange), this.store.volumes.watch(onChange)])
      .then((w) => {
        if (this.closed) void Promise.all(w.map((x) => x.close()));
        else this.watches.push(...w);
      })
      .catch((err) => this.logger.debug('the etcd watch could not start; passes run on the timer', { error: errorMessage(err) }));
  }

  /** A pass now (or right after the one under way); resolves when it is done. */
  kick(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        this.again = false;
        await this.pass();
      } while (this.again && !this.closed);
    })().finally(() => (this.running = undefined));
    return this.running;
  }

  async dispose(): Promise<void> {
    this.closed = true;
    this.timer?.dispose();
    this.debounce?.dispose();
    await Promise.all(this.watches.map((w) => w.close()));
    await this.running?.catch(() => undefined);
  }

  /**
   * Stores the job in etcd and places it; returns the record and this
   * pass's view of it. etcd away: the job waits here (`queued`) and is
   * stored by the first pass that reaches etcd — the latest submit of an id
   * wins; it waits in this agent's memory only, so an agent restart before
   * etcd is back forgets it (the API says so).
   */
  async submit(job: JobSpec): Promise<{ record: ClusterJobRecord<JobSpec>; unchanged: boolean; view: ClusterJobView | undefined; queued?: boolean }> {
    this.assertMember();
    let stored;
    try {
      stored = await this.storeJob(job);
    } catch (err) {
      if (!(err instanceof ClusterJobsUnavailableError)) throw err;
      this.outbox.set(job.id, { kind: 'run', job });
      this.logger.warn('etcd did not answer: the job waits on this agent and is submitted once etcd does', { job_id: job.id, error: errorMessage(err) });
      const now = this.clock.now();
      const record: ClusterJobRecord<JobSpec> = { id: job.id, type: job.type === 'system' ? 'system' : 'service', version: 0, stopped: false, submittedAt: now, groups: demandOf(job), spec: job };
      return { record, unchanged: false, queued: true, view: { type: record.type, version: 0, stopped: false, placements: [], pending: [{ jobId: job.id, group: '*', slot: '*', reasons: { etcd: `${QUEUED_REASON} (${errorMessage(err)})` } }], readAt: now } };
    }
    this.outbox.delete(job.id);
    await this.kick();
    return { ...stored, view: await this.view(job.id).catch(() => undefined) };
  }

  private storeJob(job: JobSpec) {
    return this.store.submit(job.id, job.type === 'system' ? 'system' : 'service', demandOf(job), job, this.clock.now());
  }

  /** Jobs submitted while etcd was away, stored by the first pass that reaches it. */
  private readonly outbox = new Map<string, { kind: 'run'; job: JobSpec } | { kind: 'stop'; purge: boolean }>();

  /** The jobs waiting on this agent for etcd to be submitted. */
  queued(): JobSpec[] {
    return [...this.outbox.values()].flatMap((o) => (o.kind === 'run' ? [o.job] : []));
  }

  /** A machine refused its node name (another live agent holds it) changes nothing in the cluster. */
  private assertMember(): void {
    const holder = this.membership.nameHeldBy;
    if (holder !== undefined) {
      throw new NodeNameInUseError(this.node, holder);
    }
  }

  /** Stops (or purges) the job cluster-wide; undefined: the cluster has no such job. */
  async stop(id: string, purge: boolean): Promise<ClusterJobRecord<JobSpec> | 'queued' | undefined> {
    this.assertMember();
    // A stop overrides a submit still waiting for etcd.
    const waiting = this.outbox.get(id);
    this.outbox.delete(id);
    let record;
    try {
      record = await this.store.stop(id, purge, this.clock.now());
    } catch (err) {
      if (!(err instanceof ClusterJobsUnavailableError)) throw err;
      // etcd away: the stop waits here (so the job is not placed again once etcd is back) and the job stops on this node now.
      if (waiting?.kind !== 'run') this.outbox.set(id, { kind: 'stop', purge });
      this.logger.warn('etcd did not answer: the job is stopped on this node now, and in the cluster once etcd answers', { job_id: id, error: errorMessage(err) });
      return 'queued';
    }
    if (record) await this.kick();
    return record;
  }

  /** The job as etcd holds it now (throws when etcd does not answer). */
  async view(id: string): Promise<ClusterJobView | undefined> {
    const status = await this.store.status(id);
    return status ? viewOf(status, this.clock.now()) : undefined;
  }

  /** The jobs as the last pass read them (for views that may not wait on etcd). */
  lastSeen(): { jobs: Array<{ record: ClusterJobRecord<JobSpec>; view: ClusterJobView }>; at: number } | undefined {
    const seen = this.seen;
    if (!seen) return undefined;
    return {
      at: seen.at,
      jobs: seen.jobs
        .filter((r) => !r.purged)
        .map((record) => ({
          record,
          view: viewOf({ record, placements: seen.placements.filter((p) => p.jobId === record.id), pending: seen.pending.get(record.id) ?? [] }, seen.at),
        })),
    };
  }

  private async pass(): Promise<void> {
    // Only the agent holding its node schedules and runs that node's share (a refused second machine does neither).
    if (!this.membership.holdsNode) return;
    try {
      for (const [id, op] of [...this.outbox]) {
        if (op.kind === 'run') await this.storeJob(op.job);
        else await this.store.stop(id, op.purge, this.clock.now());
        // Submitted or stopped again meanwhile: that one stands.
        if (this.outbox.get(id) === op) this.outbox.delete(id);
        this.logger.info(`etcd answers again: a job ${op.kind === 'run' ? 'submitted' : 'stopped'} while it did not is ${op.kind === 'run' ? 'submitted' : 'stopped'} in the cluster`, { job_id: id });
      }
      const fresh = await this.membership.list();
      const result = await this.store.reconcile({
        nodes: fresh,
        now: this.clock.now(),
        disconnectGraceMs: this.membership.options.disconnectGraceMs,
        onNodeReleased: (node, volumes) => this.logger.warn('a node down past its disconnect grace gave up its claims; its service allocs are placed elsewhere', { node, volumes }),
      });
      for (const p of result.put.filter((x) => x.movedFrom)) {
        this.logger.info('an alloc slot moved off a node down past its disconnect grace', { job_id: p.jobId, slot: p.slot, from: p.movedFrom, to: p.node });
      }
      const [jobs, placements] = await Promise.all([this.store.jobs(), this.store.placements()]);
      const pending = new Map<string, Unplaced[]>();
      for (const u of result.unplaced) pending.set(u.jobId, [...(pending.get(u.jobId) ?? []), u]);
      this.seen = { jobs, placements, pending, at: this.clock.now() };
      await this.mirrorVolumes();
      await this.project(jobs, placements);
    } catch (err) {
      this.logger.debug('a cluster pass failed; the next one tries again', { error: errorMessage(err) });
    }
  }

  /** Runs here what is placed here; stops here what is not (any more). */
  private async project(jobs: ClusterJobRecord<JobSpec>[], placements: Placement[]): Promise<void> {
    // Only the agent holding its node runs that node's placements (a refused second machine runs nothing).
    if (!this.membership.holdsNode) return;
    const known = new Set(jobs.map((j) => j.id));
    const runs: Array<{ record: ClusterJobRecord<JobSpec>; job: JobSpec }> = [];
    const stops: ClusterJobRecord<JobSpec>[] = [];
    for (const record of jobs) {
      const local = this.host.localJob(record.id);
      const wanted = record.stopped || record.purged ? undefined : projectJob(record.spec, placements, this.node);
      if (wanted) {
        const count = wanted.groups.reduce((n, g) => n + g.count, 0);
        if (!local || local.wanted !== count || !sameJob(local.job, wanted)) runs.push({ record, job: wanted });
      } else if (local && (local.wanted > 0 || record.purged)) {
        stops.push(record);
      }
    }
    // Plugins start before the workloads that need them and stop after them, so a volume is unmounted while its plugin still runs.
    const isPlugin = (job: JobSpec) => job.groups.some((g) => g.tasks.some((t) => t.csiPlugin));
    const run = async (r: { record: ClusterJobRecord<JobSpec>; job: JobSpec }) => {
      try {
        await this.host.runLocal(r.job);
      } catch (err) {
        this.logger.warn('could not run here what the cluster placed here; the next pass tries again', { job_id: r.record.id, error: errorMessage(err) });
      }
    };
    const stop = async (record: ClusterJobRecord<JobSpec>) => {
      this.logger.info(record.stopped ? 'the job was stopped in the cluster; stopping it here' : 'nothing of this job is placed on this node any more; stopping it here', { job_id: record.id });
      try {
        await this.host.stopLocal(record.id, !!record.purged);
      } catch (err) {
        this.logger.warn('could not stop here what the cluster no longer places here; the next pass tries again', { job_id: record.id, error: errorMessage(err) });
      }
    };
    for (const r of runs.filter((x) => isPlugin(x.job))) await run(r);
    await Promise.all(stops.filter((x) => !isPlugin(x.spec)).map(stop));
    await Promise.all(stops.filter((x) => isPlugin(x.spec)).map(stop));
    for (const r of runs.filter((x) => !isPlugin(x.job))) await run(r);
    for (const id of this.host.localJobIds()) {
      if (known.has(id) || this.strangers.has(id)) continue;
      this.strangers.add(id);
      this.logger.warn('a job runs here that the cluster does not know (run before this agent joined, or purged over a day ago); it is left as it is: stop it with csiplug job stop', { job_id: id });
    }
  }

  /** Registers here the cluster's volumes this catalog lacks; deregisters those gone from etcd that were mirrored and are unclaimed here. */
  private async mirrorVolumes(): Promise<void> {
    const records = await this.store.volumes.list();
    const ids = new Set(records.map((r) => r.id));
    for (const record of records) {
      const volume = record.volume as VolumeView;
      const local = this.host.catalog.getVolume(record.id);
      if (local) {
        this.mirrored.add(record.id);
        continue;
      }
      const spec: VolumeSpec = {
        id: volume.id,
        name: volume.name,
        type: 'csi',
        pluginId: volume.pluginId,
        externalId: volume.externalId,
        capabilities: volume.capabilities,
        ...(volume.mountOptions ? { mountOptions: volume.mountOptions } : {}),
        ...(volume.capacityBytes !== undefined ? { capacityMin: volume.capacityBytes } : {}),
        parameters: volume.parameters ?? {},
        secrets: volume.secrets ?? {},
        context: volume.context ?? {},
        ...(volume.accessibleTopology?.length ? { topologyRequest: { required: volume.accessibleTopology.map((t) => ({ segments: { ...t.segments } })) } } : {}),
      };
      try {
        await this.host.catalog.registerVolume(spec);
        this.mirrored.add(record.id);
        this.mirrorFailures.delete(record.id);
        this.logger.info('registered a volume of the cluster in this node\'s catalog', { volume_id: record.id, origin: record.origin });
      } catch (err) {
        const why = errorMessage(err);
        if (this.mirrorFailures.get(record.id) !== why) this.logger.warn('could not register a volume of the cluster here; allocs placed here cannot use it until it is', { volume_id: record.id, error: why });
        this.mirrorFailures.set(record.id, why);
      }
    }
    for (const id of [...this.mirrored]) {
      if (ids.has(id)) continue;
      const local = this.host.catalog.getVolume(id);
      if (!local) {
        this.mirrored.delete(id);
        continue;
      }
      if (local.claims.length > 0) continue;
      try {
        await this.host.catalog.deregisterVolume(id);
        this.mirrored.delete(id);
        this.logger.info('deregistered here a volume the cluster no longer has', { volume_id: id });
      } catch (err) {
        this.logger.debug('could not deregister here a volume the cluster no longer has; the next pass tries again', { volume_id: id, error: errorMessage(err) });
      }
    }
  }

  /** Adds a volume this node created or registered to the cluster's catalog. */
  async addVolume(volume: VolumeView): Promise<void> {
    await this.store.volumes.add({
      id: volume.id,
      pluginId: volume.pluginId,
      ...(volume.accessibleTopology?.length ? { accessibleTopology: volume.accessibleTopology.map((t) => ({ ...t.segments })) } : {}),
      origin: this.node,
      createdAt: this.clock.now(),
      volume: { ...volume, claims: [], secrets: {} },
    });
    this.mirrored.add(volume.id);
  }

  /** Throws ClusterVolumeExistsError when the cluster has the id already. */
  async assertVolumeFree(id: string): Promise<void> {
    const existing = await this.store.volumes.get(id);
    if (existing) throw new ClusterVolumeExistsError(id, existing.origin);
  }
}

function viewOf(status: ClusterJobStatus<JobSpec>, readAt: number): ClusterJobView {
  return {
    type: status.record.type,
    version: status.record.version,
    stopped: status.record.stopped,
    placements: status.placements
      .map((p) => ({ slot: p.slot, group: p.group, index: p.index, node: p.node, jobVersion: p.jobVersion, ...(p.movedFrom ? { movedFrom: p.movedFrom } : {}) }))
      .sort((a, b) => a.group.localeCompare(b.group) || a.index - b.index || a.node.localeCompare(b.node)),
    pending: status.pending,
    readAt,
  };
}
