// JobUpdater: how a `job run` changes a running job — the agent's one
// writer of a job's allocs. Per job, one thing at a time (a KeyedMutex): a
// run, a stop, a revert each first cancel the job's rollout under way and
// wait until it has settled, then act on what the allocs are now.
//
// A run plans (job-plan.ts, the same function `job plan` shows), and when
// something changes: marks failed allocs it replaces as stopped, records
// the new version on the allocs updated in place, stops what the plan
// destroys (a smaller count, a removed group), and — when it places or
// replaces allocs — starts a deployment: a record kept on every alloc of the
// job (the state has no job records) and a rollout (rollout.ts) in the
// background. The run returns as soon as that is under way.
//
// A deployment ends successful, failed or cancelled. A failed one with
// `auto_revert` (of a group that failed) runs the last stable version's
// spec again, as a new version, with a `Job reverted` event; a revert is
// never reverted itself. Without it, the rollout stops where it is and the
// old allocs still running are left running.
//
// History is bounded: after each run, stopped allocs of versions older than
// the job's KEPT_VERSIONS newest that hold nothing any more (no task that
// may be alive, no volume record) are removed for good (record, alloc dir),
// as Nomad garbage-collects terminal allocs. Their deployments went with
// them: every alloc carries the job's latest deployment, and a revert
// target is kept in the deployment record itself.
//
// Across an agent restart: a deployment still `running` in the records was
// cut short (a kill, or a stop that left the tasks running); the next agent
// resumes it (`resume()`, after the allocs are restored): it plans the
// deployment's version again against the allocs as they are and carries
// on, watching again any new alloc it had placed but not yet seen healthy
// before it stops the old one at its index. An agent that stops its tasks
// on exit cancels its deployments first, so nothing is resumed for them.
import { crashPoint, errorMessage } from '@csiplug/core';
import { KeyedMutex } from '@csiplug/csimanager';
import { randomUUID } from 'crypto';
import type { Alloc, Deployment, JobSpec } from '@csiplug/jobspec';
import type { DeploymentView, RunJobResult } from '@csiplug/api';
import { sameJob } from '@csiplug/jobspec';
import { jobHistory, latestDeployment, stableVersion } from '@csiplug/jobspec';
import { planJob, underwayPlan, type JobPlan } from '@csiplug/jobspec';
import { Rollout, awaitsVerdict, pluginIdsOf, type RolloutOutcome } from './rollout';
import type { RolloutAlloc, RolloutHost } from './rollout-host';
import { heldWriterClaims, writerClaimsHeldError, type RecordedWriteClaim } from './writer-claims';

/**
 * `refuseHeldWriterClaims`: refuse a run whose new allocs would wait for a
 * write claim; `recordedWriteClaims`: the write claims the volume catalog
 * records now (read at each check), so an alloc no longer live that still
 * holds one is a holder too.
 */
export interface WriterClaimOptions {
  refuseHeldWriterClaims?: boolean;
  recordedWriteClaims?: () => readonly RecordedWriteClaim[];
}

const short = (id: string): string => id.slice(0, 8);
const versionOf = (a: Alloc): number => a.jobVersion ?? 0;
/** How many of a job's newest versions keep their stopped allocs (the rest are collected after a run). */
export const KEPT_VERSIONS = 5;
const isDeadButWanted = (a: Alloc): boolean => a.desiredStatus === 'run' && (a.clientStatus === 'failed' || a.clientStatus === 'complete');

interface ActiveRollout {
  rollout: Pick<Rollout, 'cancel' | 'detach' | 'deployment' | 'going'>;
  /** Settles once the rollout ended and its outcome was recorded. */
  done: Promise<void>;
}

export class JobUpdater<R extends RolloutAlloc = RolloutAlloc> {
  private readonly lock = new KeyedMutex();
  private readonly active = new Map<string, ActiveRollout>();
  /**
   * Per job, bumped by every run that acts and every stop (under the job's
   * lock): a failed deployment reverts only if its job's generation is still
   * the one its rollout started at — nothing was run or stopped since.
   */
  private readonly generations = new Map<string, number>();
  private closed = false;

  constructor(private readonly host: RolloutHost<R>) {}

  /** What running `job` would change now (nothing is done). */
  plan(job: JobSpec): JobPlan {
    const allocs = this.allocs(job.id);
    const underway = this.underway(job);
    return underway ? underwayPlan(job, allocs, underway) : planJob(job, allocs);
  }

  /** The deployment under way (not failing or cancelled) of exactly `job` (count included), if any: running that file again leaves it going. */
  private underway(job: JobSpec): Deployment | undefined {
    const active = this.active.get(job.id);
    if (!active?.rollout.going) return undefined;
    const d = active.rollout.deployment;
    return sameJob(d.job, job) ? d : undefined;
  }

  private bump(jobId: string): number {
    const next = (this.generations.get(jobId) ?? 0) + 1;
    this.generations.set(jobId, next);
    return next;
  }

  /**
   * Runs `job`: an unchanged job is left alone; otherwise the plan is set
   * under way and the result says what started. `checkOpen` throws when
   * the agent began to shut down while this waited for the job. Throws,
   * with nothing changed, when the run cannot be saved, or — with
   * `refuseHeldWriterClaims` — when a new alloc would wait for a write claim
   * another writer holds (writer-claims.ts), checked again right before the
   * plan is applied.
   */
  run(job: JobSpec, checkOpen: () => void, options: WriterClaimOptions = {}): Promise<RunJobResult> {
    return this.lock.run(job.id, async () => {
      const underway = this.underway(job);
      if (underway) {
        // The same file again mid-rollout (a retry): nothing to change, the rollout goes on.
        this.host.emit({
          topic: 'Job',
          type: 'Job unchanged',
          message: `job ${job.id}: the spec is version ${underway.jobVersion}'s, whose deployment ${short(underway.id)} is under way; it goes on`,
          jobId: job.id,
        });
        return {
          jobId: job.id,
          allocIds: [],
          replaced: true,
          unchanged: true,
          version: underway.jobVersion,
          deploymentId: underway.id,
          plan: underwayPlan(job, this.allocs(job.id), underway),
        };
      }
      // Checked first (a refused run cancels nothing), and again right before the plan is
      // applied, with no wait in between: runs of other jobs hold other locks, and one of
      // them may have placed a writer of the same volume while this one waited for its rollout.
      this.refuseHeldWriterClaims(job, options);
      this.bump(job.id);
      await this.cancel(job.id, 'Cancelled due to newer version of job');
      checkOpen();
      this.refuseHeldWriterClaims(job, options);
      return this.apply(job);
    });
  }

  /** Throws the refusal (writer-claims.ts) when `options` ask for it and a new alloc of `job`'s plan would wait for a write claim. */
  private refuseHeldWriterClaims(job: JobSpec, options: WriterClaimOptions): void {
    if (!options.refuseHeldWriterClaims) return;
    const held = heldWriterClaims(
      job,
      planJob(job, this.allocs(job.id)),
      this.host.jobIds().flatMap((id) => this.allocs(id)),
      options.recordedWriteClaims?.() ?? [],
    );
    if (held.length) throw writerClaimsHeldError(job.id, held);
  }

  /** Runs `fn` (a job stop) as the job's one writer, its rollout cancelled first. */
  exclusive<T>(jobId: string, why: string, fn: () => Promise<T>): Promise<T> {
    return this.lock.run(jobId, async () => {
      this.bump(jobId);
      await this.cancel(jobId, why);
      return fn();
    });
  }

  /** The versions being rolled out now: their plugins are on their way even while an old alloc has stopped and its successor not yet started. */
  deploying(): JobSpec[] {
    return [...this.active.values()].map((a) => a.rollout.deployment.job);
  }

  /** The job's current version, its spec and its latest deployment, for its view; undefined for a job with no allocs. */
  view(jobId: string): { version: number; job: JobSpec; deployment?: DeploymentView } | undefined {
    const allocs = this.allocs(jobId);
    const history = jobHistory(allocs);
    if (!history) return undefined;
    const d = history.deployment;
    return { version: history.version, job: history.job, ...(d ? { deployment: deploymentView(d, allocs) } : {}) };
  }

  /** Resumes every deployment the last agent left running; call once the allocs are restored. */
  resume(): void {
    for (const jobId of this.host.jobIds()) {
      const d = latestDeployment(this.allocs(jobId));
      if (!d || d.status !== 'running') continue;
      void this.lock
        .run(jobId, async () => {
          if (this.closed) return;
          // A run since boot (a cluster node's first pass, before the resume) has its own rollout: it is not resumed over it.
          const now = latestDeployment(this.allocs(jobId));
          if (this.active.has(jobId) || now?.id !== d.id || now.status !== 'running') return;
          const version = jobHistory(this.allocs(jobId))?.version;
          if (version !== d.jobVersion) {
            // Its end was never saved, and the job moved on since (a later in-place run): resuming would roll that back.
            this.settle(
              d,
              'cancelled',
              `Cancelled: the job is at version ${version} now, made after this deployment of version ${d.jobVersion}`,
            );
            return;
          }
          this.host.emit({
            topic: 'Job',
            type: 'Deployment resumed',
            message: `job ${jobId}: deployment ${short(d.id)} of version ${d.jobVersion} was cut short by an agent restart; it goes on from where it was`,
            jobId,
          });
          this.carryOut(d.job, planJob(d.job, this.allocs(jobId)), d);
        })
        .catch((err: unknown) =>
          this.host.logger.error('resuming a deployment failed; the next agent tries again', {
            job_id: jobId,
            deployment_id: d.id,
            error: err,
          }),
        );
    }
  }

  /**
   * The agent is going away. With `stopTasks` every rollout is cancelled
   * (its tasks are about to be stopped anyway, and nothing must be resumed);
   * otherwise each is only detached, for the next agent to resume.
   */
  async dispose(options: { stopTasks: boolean }): Promise<void> {
    this.closed = true;
    if (!options.stopTasks) {
      for (const { rollout } of this.active.values()) rollout.detach();
      return;
    }
    await Promise.all([...this.active.keys()].map((jobId) => this.cancel(jobId, 'Cancelled because the agent stopped every task on exit')));
  }

  // ---------------------------------------------------------------------------

  private allocs(jobId: string): Alloc[] {
    return this.host.allocsOf(jobId).map((r) => r.alloc);
  }

  private async cancel(jobId: string, description: string): Promise<void> {
    const active = this.active.get(jobId);
    if (!active) return;
    void active.rollout.cancel(description);
    await active.done;
  }

  /** Plans a run of `job` and carries it out. Called under the job's lock. */
  private apply(job: JobSpec, options: { revertOf?: number } = {}): RunJobResult {
    const allocs = this.allocs(job.id);
    const plan = planJob(job, allocs);
    if (!plan.changed) {
      this.host.emit({
        topic: 'Job',
        type: 'Job unchanged',
        message: `job ${job.id}: the spec is version ${plan.version.to}'s and every alloc runs it; nothing to do`,
        jobId: job.id,
      });
      return { jobId: job.id, allocIds: [], replaced: true, unchanged: true, version: plan.version.to, plan };
    }
    let deployment: Deployment | undefined;
    if (plan.groups.some((g) => g.updates.create + g.updates['create/destroy'] > 0)) {
      const now = this.host.clock.now();
      const revertTo = stableVersion(jobHistory(allocs));
      deployment = {
        id: randomUUID(),
        jobId: job.id,
        jobVersion: plan.version.to,
        job,
        status: 'running',
        description: 'Deployment is running',
        createdAt: now,
        updatedAt: now,
        ...(revertTo && revertTo.version !== plan.version.to ? { revertTo } : {}),
        ...(options.revertOf !== undefined ? { revertOf: options.revertOf } : {}),
      };
    }
    const placed = this.carryOut(job, plan, deployment);
    if (deployment) {
      this.host.emit({
        topic: 'Job',
        type: 'Deployment started',
        message: `job ${job.id}: deployment ${short(deployment.id)} of version ${deployment.jobVersion} started: ${summarizePlan(plan)}`,
        jobId: job.id,
      });
    }
    this.host.emit({
      topic: 'Job',
      type: allocs.length ? 'Job updated' : 'Job registered',
      message: `job ${job.id}: version ${plan.version.to}: ${summarizePlan(plan)}`,
      jobId: job.id,
    });
    return {
      jobId: job.id,
      allocIds: placed,
      replaced: allocs.length > 0,
      unchanged: false,
      version: plan.version.to,
      ...(deployment ? { deploymentId: deployment.id } : {}),
      plan,
    };
  }

  /**
   * Carries out a plan. One write first, all or nothing: the allocs updated
   * in place (the new version, no process touched), the deployment on every
   * alloc of the job, the allocs the rollout places at once, and — as
   * desired stop — the failed allocs the plan replaces and what it destroys
   * (a smaller count, a removed group), so that an agent killed right after
   * the write finishes their teardown. If it is refused, the change is
   * undone in memory and this throws, with nothing started or stopped (the
   * rollout's own stops wait for this write too). Then: those allocs start,
   * the stopped ones are torn down, and the rollout goes on in the
   * background. Returns the ids of the allocs placed at once.
   */
  private carryOut(job: JobSpec, plan: JobPlan, deployment: Deployment | undefined): string[] {
    const runners = this.host.allocsOf(job.id);
    const byId = new Map(runners.map((r) => [r.alloc.id, r]));
    const undo: (() => void)[] = [];
    const touched = new Set<R>();
    for (const g of plan.groups) {
      for (const p of g.allocs) {
        const r = p.update === 'in-place' && p.allocId !== undefined ? byId.get(p.allocId) : undefined;
        if (!r) continue;
        const { job: was, jobVersion } = r.alloc;
        undo.push(() => Object.assign(r.alloc, { job: was, jobVersion }));
        Object.assign(r.alloc, { job, jobVersion: plan.version.to });
        touched.add(r);
      }
    }
    if (deployment) {
      for (const r of runners) {
        const was = r.alloc.jobDeployment;
        undo.push(() => (r.alloc.jobDeployment = was));
        r.alloc.jobDeployment = deployment;
        touched.add(r);
      }
    }
    // What this run stops: failed allocs it replaces, and what it destroys —
    // unless the rollout stops it later (a keeper not yet proven healthy; a
    // removed group whose plugin the new version runs in another group).
    const stopping = new Map<R, string>();
    const heldForPlugin: R[] = [];
    const pluginsAfter = new Set(job.groups.flatMap(pluginIdsOf));
    for (const r of runners) if (isDeadButWanted(r.alloc)) stopping.set(r, 'it had ended and is replaced');
    for (const g of plan.groups) {
      for (const p of g.allocs) {
        const r = p.update === 'destroy' && p.allocId !== undefined ? byId.get(p.allocId) : undefined;
        if (!r) continue;
        const keeper = p.keeps === undefined ? undefined : byId.get(p.keeps);
        if (keeper && deployment && awaitsVerdict(keeper.alloc, deployment)) continue; // the rollout stops it once the keeper is healthy
        const groupGone = !job.groups.some((x) => x.name === r.alloc.group);
        if (
          groupGone &&
          deployment &&
          pluginIdsOf(r.alloc.job.groups.find((x) => x.name === r.alloc.group)).some((id) => pluginsAfter.has(id))
        ) {
          heldForPlugin.push(r); // create-before-destroy across groups: it serves the plugin until the new allocs are healthy
          continue;
        }
        stopping.set(r, p.reason);
      }
    }
    const rollout = deployment ? new Rollout(this.host, deployment, plan) : undefined;
    rollout?.stopAfterHealthy(heldForPlugin);
    const initial = rollout?.start() ?? [];
    try {
      if (touched.size + initial.length + stopping.size) this.host.save([...touched, ...initial], [...stopping.keys()]);
    } catch (err) {
      void rollout?.discard();
      for (const u of undo.reverse()) u();
      throw err;
    }
    if (initial.length) crashPoint('agent.run-job.after-save');
    if (rollout && deployment) {
      this.track(rollout, deployment);
      rollout.launchInitial(initial);
    }
    for (const [r, why] of stopping) {
      void r
        .stop()
        .catch((err: unknown) => this.host.logger.error(`stopping an alloc (${why}) failed`, { alloc_id: r.alloc.id, error: err }));
    }
    this.collect(job.id);
    return rollout ? [...rollout.placed] : [];
  }

  /** Removes the stopped allocs of versions older than the KEPT_VERSIONS newest that hold nothing any more. */
  private collect(jobId: string): void {
    const runners = this.host.allocsOf(jobId);
    const kept = new Set([...new Set(runners.map((r) => versionOf(r.alloc)))].sort((a, b) => b - a).slice(0, KEPT_VERSIONS));
    let removed = 0;
    for (const r of runners) {
      if (kept.has(versionOf(r.alloc)) || r.alloc.desiredStatus !== 'stop' || r.needsTeardown) continue;
      if (this.host.forget(r)) removed++;
    }
    if (removed)
      this.host.logger.info('removed stopped allocs of old job versions', { job_id: jobId, allocs: removed, versions_kept: KEPT_VERSIONS });
  }

  private track(rollout: Rollout<R>, deployment: Deployment): void {
    const generation = this.generations.get(deployment.jobId) ?? 0;
    const done = rollout.finished
      .then((outcome) => this.finish(deployment, outcome, generation))
      .catch((err: unknown) =>
        this.host.logger.error('a deployment ended with an error', { job_id: deployment.jobId, deployment_id: deployment.id, error: err }),
      )
      .finally(() => {
        if (this.active.get(deployment.jobId)?.rollout === rollout) this.active.delete(deployment.jobId);
      });
    this.active.set(deployment.jobId, { rollout, done });
  }

  /** Writes the deployment's new status onto every alloc of its job. A refused write is logged: the copies written still tell. */
  private settle(d: Deployment, status: Deployment['status'], description: string): void {
    d.status = status;
    d.description = description;
    d.updatedAt = this.host.clock.now();
    const runners = this.host.allocsOf(d.jobId);
    for (const r of runners) r.alloc.jobDeployment = d;
    try {
      this.host.save(runners);
    } catch (err) {
      this.host.logger.error('could not save the status of a deployment on the allocs of its job', {
        job_id: d.jobId,
        deployment_id: d.id,
        status,
        error: err,
      });
    }
  }

  private finish(d: Deployment, outcome: RolloutOutcome, generation: number): void {
    const jobId = d.jobId;
    switch (outcome.kind) {
      case 'detached':
        return; // left running in the records: the next agent resumes it
      case 'successful':
        this.settle(d, 'successful', 'Deployment completed successfully');
        this.host.emit({
          topic: 'Job',
          type: 'Deployment successful',
          message: `job ${jobId}: deployment ${short(d.id)} of version ${d.jobVersion} completed successfully`,
          jobId,
        });
        return;
      case 'cancelled':
        this.settle(d, 'cancelled', outcome.reason);
        this.host.emit({
          topic: 'Job',
          type: 'Deployment cancelled',
          message: `job ${jobId}: deployment ${short(d.id)} of version ${d.jobVersion}: ${outcome.reason}`,
          jobId,
        });
        return;
      case 'failed':
        break;
    }
    const group = d.job.groups.find((g) => g.name === outcome.group);
    const wantsRevert = group?.update?.autoRevert ?? false;
    const revertTo = d.revertTo;
    const why = !wantsRevert
      ? `auto_revert is off for group "${outcome.group}": the rollout stops here and the old allocs still running are left running`
      : d.revertOf !== undefined
        ? `this deployment reverted version ${d.revertOf} and is not reverted itself: the old allocs still running are left running`
        : !revertTo
          ? 'there is no earlier stable version to revert to: the old allocs still running are left running'
          : `rolling back to job version ${revertTo.version}`;
    this.settle(d, 'failed', `Failed due to unhealthy allocations - ${why}`);
    this.host.emit({
      topic: 'Job',
      type: 'Deployment failed',
      message: `job ${jobId}: deployment ${short(d.id)} of version ${d.jobVersion} failed: ${outcome.reason}; ${why}`,
      jobId,
    });
    if (!wantsRevert || d.revertOf !== undefined || !revertTo || this.closed) return;
    // Only what the failed deployment's own run left may be reverted: no run or
    // stop since it started (the generation), no other rollout going, and it
    // still the job's latest deployment.
    const stale = (): string | undefined => {
      if (this.closed) return 'the agent is shutting down';
      if ((this.generations.get(jobId) ?? 0) !== generation) return 'the job was run or stopped since the deployment started';
      const active = this.active.get(jobId);
      if (active && active.rollout.deployment.id !== d.id) return 'another deployment of the job is under way';
      const allocs = this.allocs(jobId);
      if (latestDeployment(allocs)?.id !== d.id) return 'a later deployment of the job exists';
      if (jobHistory(allocs)?.version !== d.jobVersion) return `the job is at version ${jobHistory(allocs)?.version} now`;
      return undefined;
    };
    void this.lock
      .run(jobId, async () => {
        const why = stale();
        if (why) {
          this.host.logger.info(`not reverting a failed deployment: ${why}`, {
            job_id: jobId,
            deployment_id: d.id,
            failed_version: d.jobVersion,
          });
          return;
        }
        // A revert is a run: it counts as one, after cancelling whatever is still rolling out.
        this.bump(jobId);
        await this.cancel(jobId, `Cancelled to revert version ${d.jobVersion}`);
        if (this.closed) return;
        const result = this.apply(revertTo.job, { revertOf: d.jobVersion });
        this.host.emit({
          topic: 'Job',
          type: 'Job reverted',
          message: `job ${jobId}: version ${d.jobVersion} did not become healthy (${outcome.reason}); reverted to version ${revertTo.version}, which runs again as version ${result.version}`,
          jobId,
        });
      })
      .catch((err: unknown) =>
        this.host.logger.error('reverting a failed deployment failed', { job_id: jobId, deployment_id: d.id, error: errorMessage(err) }),
      );
  }
}

/** "1 create/destroy, 2 ignore" — the plan's counts, for events. */
export function summarizePlan(plan: JobPlan): string {
  const totals = new Map<string, number>();
  for (const g of plan.groups) for (const [k, n] of Object.entries(g.updates)) if (n) totals.set(k, (totals.get(k) ?? 0) + n);
  return [...totals].map(([k, n]) => `${n} ${k}`).join(', ') || 'no alloc changes';
}

/** A deployment as a job's view shows it: the record, with each group's counts read from the allocs. */
export function deploymentView(d: Deployment, allocs: readonly Alloc[]): DeploymentView {
  const mine = allocs.filter((a) => a.deploymentId === d.id);
  return {
    id: d.id,
    jobVersion: d.jobVersion,
    status: d.status,
    description: d.description,
    createdAt: d.createdAt,
    updatedAt: d.updatedAt,
    ...(d.revertTo ? { revertTo: d.revertTo.version } : {}),
    ...(d.revertOf !== undefined ? { revertOf: d.revertOf } : {}),
    groups: d.job.groups.map((g) => {
      const placed = mine.filter((a) => a.group === g.name);
      return {
        name: g.name,
        desired: g.count,
        placed: placed.length,
        healthy: placed.filter((a) => a.deploymentStatus?.healthy === true).length,
        unhealthy: placed.filter((a) => a.deploymentStatus?.healthy === false).length,
      };
    }),
  };
}
