// Jobs in a cluster (config `cluster { … }`): a `job run` against any agent
// stores the job in etcd and places its allocs there (@csiplug/cluster's
// EtcdJobs and scheduler); each agent runs what is placed on its node.
//
// How a node runs its placements: for every cluster job, the job (its spec
// checked as a jobspec) with each group's count set to the number of that
// group's slots placed here is run as a local job (the agent's own job
// updater, rollouts and all), once per change of that share and once per
// submit of the job; a job with nothing placed here any more — stopped,
// moved off this node while it was away, purged — is stopped here (and
// purged here when the cluster purged it). The local allocs are the node's:
// what is mounted and running here stays node-local state, written by the
// local runners as on one agent.
//
// When: a pass runs every second, on a change of jobs, placements or
// volumes in etcd (a watch; nodes and claims are seen by the timer), and on
// each (re)join of the node — until one is whole (every stop here made),
// and only then may the node claim and are its claims asserted again — so a
// node that returns after its work moved stops its copies first.
//
// Each pass also brings the cluster's volumes into this node's catalog
// (cluster-volume-mirror.ts), so an alloc placed here finds its volume.
import type { ClusterClaim } from '../claims';
import {
  ClusterJobsUnavailableError,
  EtcdJobs,
  summarisePending,
  type ClusterJobRecord,
  type ClusterJobStatus,
  type PendingSlots,
  type ReconcileOptions,
} from '../jobs';
import type { ClusterMembership } from '../membership';
import type { GroupDemand, Placement, Unplaced } from '../scheduler';
import { errorMessage, type Clock, type Logger } from '@csiplug/core';
import * as fs from 'fs';
import * as path from 'path';
import type { VolumeCatalogService } from '@csiplug/volumes';
import { jobToDocument, sameJob, validateJob, type JobSpec } from '@csiplug/jobspec';
import type { ClusterJobView } from '@csiplug/api';
import { ClusterVolumeMirror } from './cluster-volume-mirror';

/** How often a pass runs when nothing in etcd changed (a node's death is noticed by time). */
const PASS_INTERVAL_MS = 1_000;
/** What a job submitted while etcd was away says until it is stored. */
export const QUEUED_REASON =
  "waiting on this agent for the cluster's etcd to answer; submitted once it does (an agent restart before then forgets it)";
/** An API call waits at most this long (job run: for the placement; job stop: for the pass that stops this node's share); the work goes on after. */
const API_WAIT_MS = 30_000;
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
  /** A node down past its grace is about to give up its claims: unpublish from it what was published to it (cluster/jobs.ts beforeRelease). */
  unpublishFrom?: (node: string, published: Array<{ volumeId: string; claim: ClusterClaim }>) => Promise<boolean>;
  /** Releases the claims of a node down past its grace (the node's ClusterVolumeClaimer: the one writer of claims in etcd). */
  releaseNode?: (name: string) => Promise<string[]>;
  /** Told after each pass that read etcd, before this node's share runs (the routed controllers follow where the cluster's controllers are). */
  afterPass?: () => Promise<void>;
  /** This agent's limits { max_allocs_per_job }: a job record in etcd asking more of the cluster than its nodes' limits allow is left out. */
  maxAllocsPerJob?: number;
}

/** What the scheduler needs of a job: each group's count, drivers and volumes. */
export function demandOf(job: JobSpec): GroupDemand[] {
  return job.groups.map((g) => ({
    name: g.name,
    count: job.type === 'system' ? 1 : g.count,
    // An image task needs a node with its image driver (an agent from before images has none: it gets no such task).
    drivers: [...new Set(g.tasks.map((t) => (t.image ? t.driver : t.isolated ? 'exec' : 'raw_exec')))].sort(),
    volumes: g.volumes.map((v) => ({ volumeId: v.source, accessMode: v.accessMode, readOnly: v.readOnly })),
    // Nomad's datacenters are the job's; each group carries them, as each group is placed on its own.
    ...(job.datacenters ? { datacenters: [...job.datacenters] } : {}),
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
  /** The cluster's volumes in this node's catalog, and the ids this node reserves to make one (cluster-volume-mirror.ts). */
  readonly volumes: ClusterVolumeMirror;
  private timer: { dispose(): void } | undefined;
  private catalogEvents: { dispose(): void } | undefined;
  private watches: Array<{ close(): Promise<void> }> = [];
  private debounce: { dispose(): void } | undefined;
  private running: Promise<boolean> | undefined;
  private again = false;
  private closed = false;
  /** Aborted by dispose: a pass under way stops at its next step, so a shutdown never waits on a whole pass. */
  private readonly stopping = new AbortController();
  /** What the last pass read: jobs, placements, pending, for views that answer at once. */
  private seen:
    { jobs: ClusterJobRecord<JobSpec>[]; placements: Placement[]; pending: Map<string, PendingSlots[]>; at: number } | undefined;
  /** Local jobs unknown to the cluster, warned of once. */
  private readonly strangers = new Set<string>();

  constructor(
    private readonly membership: ClusterMembership,
    private readonly host: ClusterJobsHost,
    private readonly clock: Clock,
    private readonly logger: Logger,
    /** Where the shares run here are remembered across restarts (`<data_dir>/cluster/applied.json`). */
    private readonly appliedFile?: string,
  ) {
    // The node's one claims handle, for what a pass reads; a down node's claims it releases through the node's claimer (releaseNode).
    this.store = new EtcdJobs<JobSpec>(membership.conn, logger, () => clock.now(), {
      claims: membership.claims,
      ...(host.releaseNode ? { releaseNode: host.releaseNode } : {}),
    });
    this.applied = this.readApplied();
    this.volumes = new ClusterVolumeMirror(
      this.store.volumes,
      host.catalog,
      () => membership.nodeName,
      () => this.assertMember(),
      clock,
      logger,
    );
  }

  /**
   * The shares this node ran, as the last agent left them: a share it ran
   * and its updater then changed (a failed version reverted here) is not run
   * again after a restart. A file that cannot be read is started over (each
   * share running as placed is then taken as run; one that differs runs once).
   */
  private readApplied(): Map<string, string> {
    if (!this.appliedFile) return new Map();
    try {
      const value = JSON.parse(fs.readFileSync(this.appliedFile, 'utf8')) as unknown;
      if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Error('not an object of job id → share');
      return new Map(Object.entries(value as Record<string, unknown>).filter((e): e is [string, string] => typeof e[1] === 'string'));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
        this.logger.warn('the record of the shares this node ran cannot be read; it is started over', {
          file: this.appliedFile,
          error: errorMessage(err),
        });
      return new Map();
    }
  }

  /** Written whole (temp file, rename) after every change; a failure is said and tried again with the next change. */
  private saveApplied(): void {
    if (!this.appliedFile) return;
    try {
      fs.mkdirSync(path.dirname(this.appliedFile), { recursive: true, mode: 0o700 });
      const tmp = `${this.appliedFile}.tmp`;
      fs.writeFileSync(tmp, JSON.stringify(Object.fromEntries(this.applied)), { mode: 0o600 });
      fs.renameSync(tmp, this.appliedFile);
    } catch (err) {
      this.logger.warn('could not record the shares this node ran; an agent restart may run one again', {
        file: this.appliedFile,
        error: errorMessage(err),
      });
    }
  }

  private setApplied(id: string, key: string | undefined): void {
    if (key === undefined ? !this.applied.has(id) : this.applied.get(id) === key) return;
    if (key === undefined) this.applied.delete(id);
    else this.applied.set(id, key);
    this.saveApplied();
  }

  private get node(): string {
    return this.membership.nodeName;
  }

  /** Starts the watches and the timer; passes run from then on. Never throws (etcd away: the timer's passes catch up). */
  start(): void {
    // Fire and forget, here and below: a pass catches and logs its own failure (pass() never rejects) and the next one catches up.
    this.timer = this.clock.setInterval(() => void this.kick(), PASS_INTERVAL_MS);
    this.catalogEvents = this.host.catalog.onDidChange((e) => {
      if (e.kind !== 'deleted' || e.resumed?.op !== 'delete') return;
      this.volumes.resumedDelete(e.volumeId, { pluginId: e.resumed.pluginId, externalId: e.resumed.externalId });
      void this.kick();
    });
    const onChange = () => {
      if (this.closed || this.debounce) return;
      this.debounce = this.clock.setTimeout(() => {
        this.debounce = undefined;
        void this.kick();
      }, DEBOUNCE_MS);
    };
    void Promise.all([this.store.watch(onChange), this.store.volumes.watch(onChange)])
      .then((w) => {
        if (this.closed) void Promise.all(w.map((x) => x.close()));
        else this.watches.push(...w);
      })
      .catch((err) => this.logger.debug('the etcd watch could not start; passes run on the timer', { error: errorMessage(err) }));
  }

  /**
   * A pass now (or right after the one under way). Resolves true when a
   * whole pass ran after this call — etcd read and written, every stop here
   * made (a share that failed to run is said and tried again, and does not
   * count) — false when one failed (the timer's next pass tries again).
   */
  kick(): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    if (this.running) {
      this.again = true;
      return this.running;
    }
    const run = async () => {
      let ok = false;
      try {
        do {
          this.again = false;
          ok = await this.pass();
        } while (this.again && !this.closed);
      } finally {
        // Here, not in a later callback: a kick after the loop's last check starts a new pass, never gets this one's answer.
        this.running = undefined;
      }
      return ok;
    };
    this.running = run();
    return this.running;
  }

  /**
   * On every (re)join of the node: passes until one is whole, so what runs
   * here is what the cluster placed here — a node back after its work
   * moved has stopped its copies — and only then `then` (the claims
   * asserted in etcd). Gives up when disposed.
   */
  async settleThen(then: () => Promise<void>): Promise<void> {
    this.settledSinceJoin = false;
    // A later join starts its own: this one, from an earlier join, stops (it must not call a node settled from a pass before that join).
    const join = ++this.joins;
    for (let delay = 250; !this.closed && join === this.joins; delay = Math.min(delay * 2, 5_000)) {
      if (this.membership.holdsNode && (await this.kick()) && join === this.joins) {
        // From now on this node's claims may go to etcd (ClusterVolumeClaimer asks): what runs here is what is placed here.
        this.settledSinceJoin = true;
        await then();
        return;
      }
      await this.clock.sleep(delay).catch(() => undefined);
    }
  }

  /**
   * Whether a whole pass ran since the node last (re)joined: until then a
   * claim of this node waits (an alloc restored here may have moved while
   * the node was away, and must be stopped before it claims anything).
   */
  get settled(): boolean {
    return this.settledSinceJoin;
  }

  private settledSinceJoin = false;
  private joins = 0;

  async dispose(): Promise<void> {
    this.closed = true;
    this.stopping.abort(new Error('the agent is shutting down'));
    this.timer?.dispose();
    this.debounce?.dispose();
    this.catalogEvents?.dispose();
    // A watch's cancel waits on etcd: never longer than a moment when it is away.
    await Promise.race([Promise.all(this.watches.map((w) => w.close())), this.clock.sleep(1_000).catch(() => undefined)]);
    await this.running?.catch(() => undefined);
  }

  /**
   * Stores the job in etcd and places it; returns the record and this
   * pass's view of it. etcd away: the job waits here (`queued`) and is
   * stored by the first pass that reaches etcd, unless the job was changed
   * in etcd after it was queued; it waits in this agent's memory only, so
   * an agent restart before etcd is back forgets it (the API says so).
   */
  async submit(
    job: JobSpec,
  ): Promise<{ record: ClusterJobRecord<JobSpec>; unchanged: boolean; view: ClusterJobView | undefined; queued?: boolean }> {
    this.assertMember();
    const at = this.clock.now();
    let stored;
    try {
      stored = await this.storeJob(job);
    } catch (err) {
      if (!(err instanceof ClusterJobsUnavailableError)) throw err;
      this.outbox.set(job.id, { kind: 'run', job, at, base: this.baseOf(job.id) });
      this.logger.warn('etcd did not answer: the job waits on this agent and is submitted once etcd does', {
        job_id: job.id,
        error: errorMessage(err),
      });
      const record: ClusterJobRecord<JobSpec> = {
        id: job.id,
        type: job.type === 'system' ? 'system' : 'service',
        version: 0,
        stopped: false,
        submittedAt: at,
        groups: demandOf(job),
        spec: job,
      };
      return { record, unchanged: false, queued: true, view: queuedView(record.type, 0, `${QUEUED_REASON} (${errorMessage(err)})`, at) };
    }
    // A newer op queued meanwhile (by another request) stands; this one's is done.
    const waiting = this.outbox.get(job.id);
    if (waiting && waiting.at <= at) this.outbox.delete(job.id);
    // Placed before the answer (so it can say where); this node's share runs after, in the pass that follows.
    await this.bounded(this.placeNow());
    void this.kick();
    return { ...stored, view: await this.view(job.id).catch(() => undefined) };
  }

  /** One scheduling pass now (beside any pass under way: the epoch lets one of them commit); etcd away is said by the view after. */
  private async placeNow(): Promise<void> {
    if (!this.membership.holdsNode) return;
    // Another pass committing first (the job's own write wakes every agent) is no failure: read again, a few times.
    for (let attempt = 0; attempt < 4; attempt++) {
      try {
        const result = await this.store.reconcile(await this.reconcileOptions());
        if (result.conflicts === 0) return;
      } catch (err) {
        this.logger.debug('placing a job at once failed; the next pass places it', { error: errorMessage(err) });
        return;
      }
    }
  }

  /** What every scheduling pass of this agent is given: the nodes as etcd has them now, and what a node down past its grace needs. */
  private async reconcileOptions(): Promise<ReconcileOptions> {
    return {
      nodes: await this.membership.list(),
      now: this.clock.now(),
      disconnectGraceMs: this.membership.options.disconnectGraceMs,
      ...(this.host.maxAllocsPerJob !== undefined ? { maxAllocsPerJob: this.host.maxAllocsPerJob } : {}),
      signal: this.stopping.signal,
      onNodeReleased: (node, volumes) =>
        this.logger.warn('a node down past its disconnect grace gave up its claims; its service allocs are placed elsewhere', {
          node,
          volumes,
        }),
      ...(this.host.unpublishFrom ? { beforeRelease: this.host.unpublishFrom } : {}),
    };
  }

  /** An API call waits for the pass it started at most this long: the work goes on after. */
  private async bounded(p: Promise<unknown>): Promise<void> {
    await Promise.race([p, this.clock.sleep(API_WAIT_MS).catch(() => undefined)]);
  }

  private storeJob(job: JobSpec) {
    return this.store.submit(job.id, job.type === 'system' ? 'system' : 'service', demandOf(job), job, this.clock.now());
  }

  /** Runs and stops made while etcd was away, stored by the first pass that reaches it. */
  private readonly outbox = new Map<
    string,
    | { kind: 'run'; job: JobSpec; at: number; base: number | undefined }
    | { kind: 'stop'; purge: boolean; at: number; base: number | undefined }
  >();

  /** The job's record as this agent last read it (its submit time, as written in etcd): a queued op is made only over that record. */
  private baseOf(id: string): number | undefined {
    return this.seen?.jobs.find((j) => j.id === id)?.submittedAt;
  }

  /** The jobs waiting on this agent for etcd to be submitted. */
  queued(): JobSpec[] {
    return [...this.outbox.values()].flatMap((o) => (o.kind === 'run' ? [o.job] : []));
  }

  /** A machine refused its node name (another live agent holds it) changes nothing in the cluster: no job, no volume. */
  assertMember(): void {
    const refusal = this.membership.refusal;
    if (refusal !== undefined) throw refusal;
  }

  /** Stops (or purges) the job cluster-wide; undefined: the cluster has no such job. */
  async stop(id: string, purge: boolean): Promise<ClusterJobRecord<JobSpec> | 'queued' | undefined> {
    this.assertMember();
    const at = this.clock.now();
    let record;
    try {
      record = await this.store.stop(id, purge, at);
    } catch (err) {
      if (!(err instanceof ClusterJobsUnavailableError)) throw err;
      // etcd away: the stop waits here, replacing a run queued before it (so the job is not placed again once etcd is back), and the job stops on this node now.
      this.outbox.set(id, { kind: 'stop', purge, at, base: this.baseOf(id) });
      // Stopped here now: should the stop be dropped (the job changed meanwhile), the next pass runs this node's share again.
      this.setApplied(id, undefined);
      this.logger.warn(
        'etcd did not answer: the job is stopped on this node now, and in the cluster once etcd answers (if this agent still runs then)',
        { job_id: id, error: errorMessage(err) },
      );
      return 'queued';
    }
    const waiting = this.outbox.get(id);
    if (waiting && waiting.at <= at) this.outbox.delete(id);
    if (record) await this.bounded(this.kick());
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
          view: viewOf(
            { record, placements: seen.placements.filter((p) => p.jobId === record.id), pending: seen.pending.get(record.id) ?? [] },
            seen.at,
          ),
        })),
    };
  }

  /**
   * Stores what waited for etcd. An op is dropped when the job's record is
   * not the one this agent last read before it was queued (another agent
   * changed the job meanwhile: that stands), or when etcd refuses it.
   */
  private async flushOutbox(): Promise<void> {
    for (const [id, op] of [...this.outbox]) {
      const what = op.kind === 'run' ? 'run' : 'stop';
      try {
        const current = (await this.store.status(id))?.record;
        // Unknown base (no pass had read etcd before it was queued): made, as the API said it would be.
        if (op.base !== undefined && current?.submittedAt !== op.base) {
          this.logger.warn(`a job ${what} made while etcd was away is dropped: the job was changed in the cluster meanwhile`, {
            job_id: id,
          });
        } else if (op.kind === 'run') {
          await this.storeJob(op.job);
          this.logger.info('etcd answers again: a job run made while it did not is made in the cluster', { job_id: id });
        } else if (await this.store.stop(id, op.purge, this.clock.now())) {
          this.logger.info('etcd answers again: a job stop made while it did not is made in the cluster', { job_id: id });
        }
      } catch (err) {
        if (err instanceof ClusterJobsUnavailableError) throw err;
        this.logger.error(`a job ${what} made while etcd was away cannot be made in the cluster; it is dropped`, {
          job_id: id,
          error: errorMessage(err),
        });
      }
      // Made or dropped; one queued again meanwhile stands.
      if (this.outbox.get(id) === op) this.outbox.delete(id);
    }
  }

  /** One pass; true when it was whole (nothing failed). */
  private async pass(): Promise<boolean> {
    // Only the agent holding its node schedules and runs that node's share (a refused second machine does neither).
    if (!this.membership.holdsNode) return false;
    try {
      await this.flushOutbox();
      const result = await this.store.reconcile(await this.reconcileOptions());
      for (const p of result.put.filter((x) => x.movedFrom)) {
        this.logger.info('an alloc slot moved off a node down past its disconnect grace, or off a node that cannot run its new version', {
          job_id: p.jobId,
          slot: p.slot,
          from: p.movedFrom,
          to: p.node,
        });
      }
      const pending = new Map<string, PendingSlots[]>();
      const byJob = new Map<string, Unplaced[]>();
      for (const u of result.unplaced) {
        const list = byJob.get(u.jobId);
        if (list) list.push(u);
        else byJob.set(u.jobId, [u]);
      }
      for (const [id, us] of byJob) pending.set(id, summarisePending(us));
      this.seen = { jobs: result.records, placements: result.placements, pending, at: this.clock.now() };
      await this.host.afterPass?.();
      // The agent began shutting down meanwhile: nothing more runs or stops here.
      if (this.closed) return false;
      const mirrored = await this.volumes.mirror();
      const projected = await this.project(result.records, result.placements);
      if (!projected || !mirrored) return false;
      this.failing = false;
      return true;
    } catch (err) {
      // Cut short by the shutdown: nothing failed.
      if (this.closed) return false;
      // Said once per run of failures (etcd away says so every pass otherwise), in full at debug level.
      if (!this.failing) this.logger.warn('a cluster pass failed; passes go on every second and catch up', { error: errorMessage(err) });
      this.failing = true;
      this.logger.debug('a cluster pass failed', { error: errorMessage(err) });
      return false;
    }
  }

  private failing = false;
  /** The share of each job last run here (its projected spec, as JSON): run again only when it changes. */
  private readonly applied: Map<string, string>;
  /** The last warning said per job, so a pass each second does not repeat it. */
  private readonly warned = new Map<string, string>();

  private warnOnce(jobId: string, message: string, fields: Record<string, unknown>): void {
    const key = `${message}\u0000${JSON.stringify(fields)}`;
    if (this.warned.get(jobId) === key) return;
    this.warned.set(jobId, key);
    this.logger.warn(message, { job_id: jobId, ...fields });
  }

  /**
   * Runs here what is placed here; stops here what is not (any more).
   * A share is run once per change of it: what the local job updater does
   * with it then (a rollout that fails and reverts, a task that fails) is
   * the node's, as on one agent, and is not undone by the next pass.
   * True when every run and stop was made.
   */
  private async project(jobs: ClusterJobRecord<JobSpec>[], placements: Placement[]): Promise<boolean> {
    // Only the agent holding its node runs that node's placements (a refused second machine runs nothing).
    if (!this.membership.holdsNode) return false;
    const known = new Set(jobs.map((j) => j.id));
    const runs: Array<{ record: ClusterJobRecord<JobSpec>; job: JobSpec; key: string }> = [];
    // Each stop with the spec this node runs (a record's own spec is not trusted to be one).
    const stops: Array<{ record: ClusterJobRecord<JobSpec>; job: JobSpec }> = [];
    // Whole when every stop was made: a share that fails to run here is the node's to say (and tried again), and never holds the claims back.
    let ok = true;
    for (const record of jobs) {
      const local = this.host.localJob(record.id);
      const here = placements.filter((p) => p.jobId === record.id && p.node === this.node);
      if (record.stopped || record.purged || here.length === 0) {
        this.setApplied(record.id, undefined);
        if (local && (local.wanted > 0 || record.purged)) stops.push({ record, job: local.job });
        continue;
      }
      // A slot here kept at an older version (the scheduler found this node cannot run the new one): the node's share stays as it runs.
      if (here.some((p) => p.jobVersion !== record.version) && local) continue;
      let wanted: JobSpec | undefined;
      try {
        // The spec as a jobspec would give it: a record etcd holds is checked like any request before anything runs.
        wanted = projectJob(validateJob(jobToDocument(record.spec)), placements, this.node);
      } catch (err) {
        this.warnOnce(record.id, "the job's spec in etcd is not a valid job; what of it runs here is left as it is until it is run again", {
          error: errorMessage(err),
        });
        continue;
      }
      if (!wanted) continue;
      // A share is run once per change of it, and once per submit of the job (a run of the same file replaces what failed): the
      // record's version and submit time name the spec, the counts here the share (not the spec's JSON, which an agent upgrade
      // could write differently and so run every share again).
      const key = `${record.version}:${record.submittedAt}:${wanted.groups.map((g) => `${g.name}=${g.count}`).join(',')}`;
      if (this.applied.get(record.id) === key) continue;
      const count = wanted.groups.reduce((n, g) => n + g.count, 0);
      // After a restart: a share this node runs already, as it is, is taken as run.
      if (!this.applied.has(record.id) && local && local.wanted === count && sameJob(local.job, wanted)) {
        this.setApplied(record.id, key);
        continue;
      }
      runs.push({ record, job: wanted, key });
    }
    // Plugins start before the workloads that need them and stop after them, so a volume is unmounted while its plugin still runs.
    const isPlugin = (job: JobSpec) => job.groups.some((g) => g.tasks.some((t) => t.csiPlugin));
    const run = async (r: { record: ClusterJobRecord<JobSpec>; job: JobSpec; key: string }) => {
      try {
        await this.host.runLocal(r.job);
        this.setApplied(r.record.id, r.key);
        this.warned.delete(r.record.id);
      } catch (err) {
        this.warnOnce(r.record.id, 'could not run here what the cluster placed here; the next pass tries again', {
          error: errorMessage(err),
        });
      }
    };
    const stop = async ({ record }: { record: ClusterJobRecord<JobSpec> }) => {
      this.logger.info(
        record.stopped
          ? 'the job was stopped in the cluster; stopping it here'
          : 'nothing of this job is placed on this node any more; stopping it here',
        { job_id: record.id },
      );
      try {
        await this.host.stopLocal(record.id, !!record.purged);
      } catch (err) {
        ok = false;
        this.warnOnce(record.id, 'could not stop here what the cluster no longer places here; the next pass tries again', {
          error: errorMessage(err),
        });
      }
    };
    for (const r of runs.filter((x) => isPlugin(x.job))) await run(r);
    await Promise.all(stops.filter((x) => !isPlugin(x.job)).map(stop));
    await Promise.all(stops.filter((x) => isPlugin(x.job)).map(stop));
    for (const r of runs.filter((x) => !isPlugin(x.job))) await run(r);
    for (const id of this.host.localJobIds()) {
      if (known.has(id) || this.strangers.has(id)) continue;
      this.strangers.add(id);
      this.logger.warn(
        'a job runs here that the cluster does not know (run before this agent joined, or purged over a day ago); it is left as it is: stop it with csiplug job stop',
        { job_id: id },
      );
    }
    return ok;
  }
}

/** The view of a job waiting on this agent for etcd. */
export function queuedView(type: 'service' | 'system', version: number, why: string, at: number): ClusterJobView {
  return {
    type,
    version,
    stopped: false,
    placements: [],
    pending: [{ group: '*', count: 0, slots: [], reasons: { etcd: why } }],
    readAt: at,
  };
}

function viewOf(status: ClusterJobStatus<JobSpec>, readAt: number): ClusterJobView {
  return {
    type: status.record.type,
    version: status.record.version,
    stopped: status.record.stopped,
    placements: status.placements
      .map((p) => ({
        slot: p.slot,
        group: p.group,
        index: p.index,
        node: p.node,
        jobVersion: p.jobVersion,
        ...(p.movedFrom ? { movedFrom: p.movedFrom } : {}),
      }))
      .sort((a, b) => a.group.localeCompare(b.group) || a.index - b.index || a.node.localeCompare(b.node)),
    pending: status.pending,
    readAt,
  };
}
