// A rollout carries out the alloc work of one deployment: it places the
// plan's new allocs and replaces the destructively updated ones, and
// watches every alloc it places until it is healthy (alloc-health.ts).
//
// Per group, at most `max_parallel` replacements are under way at once (a
// sliding window, as in Nomad: the next starts as soon as one finishes);
// allocs for new indexes are placed at once and watched alongside. Each
// replacement follows the group's order (replacement-order.ts):
//   create-before-destroy  place the new alloc → it is healthy → stop the old;
//   stop-before-start      stop the old (its tasks, then its unmounts and
//                          claim releases) → place the new → it is healthy.
// A resumed rollout (the agent restarted in the middle) also finds new
// allocs it placed before the restart but never saw healthy: it watches
// them again, and only then stops the old alloc still at their index.
//
// The allocs a rollout can place at once are made but not started by
// start(): the job updater saves them in the same write as the rest of the
// run (all or nothing) and only then launches them (launchInitial), so a
// run the agent cannot save starts nothing. No step with a side effect —
// a stop (a stop-before-start replacement, a teardown still under way), a
// verdict written, a later placement — begins before that write succeeded:
// each waits for `saved`, which launchInitial() opens and discard() shuts.
// Later placements are saved one by one as they come; a refused save fails
// the deployment.
//
// Allocs of a removed group that ran a CSI plugin the new version runs in
// another group (a renamed plugin group) are handed to the rollout
// (stopAfterHealthy) instead of being stopped at once: they stop once the
// rollout succeeded, as the old alloc of a create-before-destroy
// replacement does; if it fails or is cancelled, the new allocs serving
// that plugin that were not proven healthy give way and the old ones run on.
//
// The first alloc that turns unhealthy fails the rollout: no further
// replacement starts, the watches under way end, and every new alloc not
// yet proven healthy that still has an old alloc running at its index is
// stopped, so the old one — for a plugin, the one that was serving — stays
// the only one. A cancel (a newer run, a job stop) ends it the same way; a
// detach (the agent going away) only stops watching, leaving everything to
// the next agent, which resumes it.
import { ShutdownError, crashPoint, errorMessage } from '@csiplug/core';
import { randomUUID } from 'crypto';
import type { Alloc, Deployment, GroupSpec } from '@csiplug/jobspec';
import { DEFAULT_UPDATE } from '@csiplug/jobspec';
import { UnhealthyAllocError, readAllocHealth, watchAllocHealth } from './alloc-health';
import type { GroupPlan, JobPlan, PlannedAlloc } from '@csiplug/jobspec';
import { replacementOrder } from '@csiplug/jobspec';
import type { RolloutAlloc, RolloutHost } from './rollout-host';

export type RolloutOutcome =
  { kind: 'successful' } | { kind: 'failed'; group: string; reason: string } | { kind: 'cancelled'; reason: string } | { kind: 'detached' };

/** Why a rollout was told to stop short. */
class RolloutCancelled extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'RolloutCancelled';
  }
}

/** The run that started the rollout could not be saved: it never began. */
class RolloutDiscarded extends Error {
  constructor() {
    super('the run that started this rollout could not be saved');
    this.name = 'RolloutDiscarded';
  }
}

const short = (id: string): string => id.slice(0, 8);
const isLive = (a: Alloc): boolean => a.desiredStatus === 'run' && (a.clientStatus === 'pending' || a.clientStatus === 'running');

/** The CSI plugin ids the tasks of an alloc's group run. */
export function pluginIdsOf(group: GroupSpec | undefined): string[] {
  return (group?.tasks ?? []).flatMap((t) => (t.csiPlugin ? [t.csiPlugin.id] : []));
}

function sharesPlugin(a: Alloc, b: Alloc): boolean {
  const ids = pluginIdsOf(a.job.groups.find((g) => g.name === a.group));
  return pluginIdsOf(b.job.groups.find((g) => g.name === b.group)).some((id) => ids.includes(id));
}

/** Whether a kept alloc at the target version was placed by this deployment and never judged: a resumed rollout watches it again. */
export function awaitsVerdict(alloc: Alloc, deployment: Deployment): boolean {
  return alloc.deploymentId === deployment.id && alloc.deploymentStatus === undefined && (alloc.jobVersion ?? 0) === deployment.jobVersion;
}

export class Rollout<R extends RolloutAlloc = RolloutAlloc> {
  /** The allocs this rollout placed, in order. */
  readonly placed: string[] = [];
  private readonly controller = new AbortController();
  private failure: { group: string; reason: string } | undefined;
  private outcome: Promise<RolloutOutcome> | undefined;
  /** While start() runs: the allocs it places, made but neither saved nor started. */
  private initial: R[] | undefined;
  /** Whether the run that started this rollout was saved: true once launchInitial() ran, false after discard(). */
  private readonly saved: Promise<boolean>;
  private settleSaved!: (saved: boolean) => void;
  /** Old allocs (a removed plugin group) that stop once the rollout succeeded, and the plugin ids they serve. */
  private readonly heldOld: R[] = [];

  constructor(
    private readonly host: RolloutHost<R>,
    readonly deployment: Deployment,
    private readonly plan: JobPlan,
  ) {
    this.saved = new Promise<boolean>((resolve) => (this.settleSaved = resolve));
  }

  /** Old allocs of a removed group whose CSI plugin the new version runs elsewhere: stopped once the new allocs are healthy. Call before start(). */
  stopAfterHealthy(allocs: readonly R[]): void {
    this.heldOld.push(...allocs);
  }

  /**
   * Starts the rollout and returns the allocs it places at once — the new
   * allocs of new indexes and the first create-before-destroy replacements
   * — made but not saved nor started: the caller saves them with the rest
   * of its run, then calls launchInitial() (or discard() when the save
   * failed). The rest goes on in the background; `finished` tells the end.
   */
  start(): R[] {
    if (this.outcome) throw new Error(`deployment ${this.deployment.id}: the rollout was started already`);
    this.initial = [];
    this.outcome = this.execute();
    const initial = this.initial;
    this.initial = undefined;
    return initial;
  }

  /** Starts the allocs start() returned, once they are saved (a saved alloc is always started: the next agent would). */
  launchInitial(allocs: readonly R[]): void {
    for (const r of allocs) this.host.launch(r);
    this.settleSaved(true);
  }

  /** The run could not be saved: end the rollout at once, with nothing started and nothing recorded. */
  discard(): Promise<RolloutOutcome> {
    if (!this.signal.aborted) this.controller.abort(new RolloutDiscarded());
    this.settleSaved(false);
    return this.finished;
  }

  /** Settles with the outcome once the rollout has ended (and, after a failure or a cancel, its unproven allocs gave way). */
  get finished(): Promise<RolloutOutcome> {
    if (!this.outcome) throw new Error(`deployment ${this.deployment.id}: the rollout was never started`);
    return this.outcome;
  }

  /** Ends the rollout as cancelled; resolves once its steps under way have settled and its unproven allocs gave way. */
  cancel(reason: string): Promise<RolloutOutcome> {
    if (!this.signal.aborted) this.controller.abort(new RolloutCancelled(reason));
    return this.finished;
  }

  /** The agent is going away: stop watching and starting, change nothing more; the next agent resumes. */
  detach(): void {
    if (!this.signal.aborted) this.controller.abort(new ShutdownError('the agent is shutting down; the next agent resumes the rollout'));
  }

  /** Whether it is still going: not failed, cancelled, discarded or detached. */
  get going(): boolean {
    return !this.signal.aborted;
  }

  private get signal(): AbortSignal {
    return this.controller.signal;
  }

  private checkGoing(): void {
    if (this.signal.aborted) throw this.signal.reason;
  }

  /** Waits until the run that started the rollout was saved; throws when it was not (discarded). */
  private async afterSave(): Promise<void> {
    if (!(await this.saved)) throw this.signal.reason;
  }

  private async execute(): Promise<RolloutOutcome> {
    const runs = this.plan.groups.filter((g) => g.update).map((g) => this.runGroup(g).catch((err: unknown) => this.onGroupError(g, err)));
    await Promise.all(runs);
    const reason: unknown = this.signal.reason;
    if (reason instanceof ShutdownError || reason instanceof RolloutDiscarded || !(await this.saved)) return { kind: 'detached' };
    if (!this.failure && !this.signal.aborted && this.heldOld.length) {
      // The new allocs serving the plugin are healthy: the old group's go now.
      // Cut short by the agent going away (ShutdownError), the stop is the next agent's to finish: not a failure.
      await this.stopAll(this.heldOld).catch((err: unknown) => {
        if (!(err instanceof ShutdownError))
          this.host.logger.error('stopping the old allocs of a removed plugin group failed', { job_id: this.deployment.jobId, error: err });
      });
    }
    if (this.failure || reason instanceof RolloutCancelled) await this.giveWay();
    if (this.failure) return { kind: 'failed', ...this.failure };
    if (reason instanceof RolloutCancelled) return { kind: 'cancelled', reason: reason.reason };
    return { kind: 'successful' };
  }

  private onGroupError(g: GroupPlan, err: unknown): void {
    if (this.signal.aborted && err === this.signal.reason) return; // ended by the cancel, detach or failure that aborted it
    if (this.failure) return;
    const reason = err instanceof UnhealthyAllocError ? err.message : `a step of the rollout failed: ${errorMessage(err)}`;
    if (!(err instanceof UnhealthyAllocError))
      this.host.logger.error('a rollout step failed; the deployment fails', { job_id: this.deployment.jobId, group: g.name, error: err });
    this.failure = { group: g.name, reason };
    if (!this.signal.aborted) this.controller.abort(new RolloutCancelled(`failed: ${reason}`));
  }

  private targetGroup(name: string): GroupSpec {
    const group = this.deployment.job.groups.find((g) => g.name === name);
    if (!group) throw new Error(`deployment ${this.deployment.id}: job version ${this.deployment.jobVersion} has no group "${name}"`);
    return group;
  }

  private async runGroup(g: GroupPlan): Promise<void> {
    const target = this.targetGroup(g.name);
    const allocs = new Map<string, R>(this.host.allocsOf(this.deployment.jobId).map((r) => [r.alloc.id, r]));
    // A resumed rollout may find an alloc it placed already judged unhealthy,
    // or dead, before the restart: that failed the deployment, whatever comes next.
    for (const r of allocs.values()) {
      const judged = r.alloc.group === g.name ? this.judgedUnhealthy(r) : undefined;
      if (judged) throw judged;
    }
    const replacements: PlannedAlloc[] = [];
    const creates: Promise<void>[] = [];
    for (const p of g.allocs) {
      if (p.update === 'create') creates.push(this.createAt(target, p.index));
      else if (p.update === 'create/destroy') replacements.push(p);
      else if (p.update === 'ignore' && awaitsVerdict(allocs.get(p.allocId!)!.alloc, this.deployment)) replacements.push(p);
    }
    await Promise.all([
      ...creates,
      this.window(replacements, (target.update ?? DEFAULT_UPDATE).maxParallel, (p) => this.replace(target, p, allocs)),
    ]);
  }

  /** The verdict on an alloc this deployment placed that was found unhealthy, or dead, before now; undefined otherwise. */
  private judgedUnhealthy(r: R): UnhealthyAllocError | undefined {
    const a = r.alloc;
    if (a.deploymentId !== this.deployment.id) return undefined;
    if (a.deploymentStatus?.healthy === false)
      return new UnhealthyAllocError(a.id, a.name, a.deploymentStatus.reason ?? 'found unhealthy before the agent restarted');
    if (a.desiredStatus === 'run' && (a.clientStatus === 'failed' || a.clientStatus === 'complete')) {
      return new UnhealthyAllocError(a.id, a.name, `it was ${a.clientStatus} before the agent restarted`);
    }
    return undefined;
  }

  /** Runs `work` over `items`, at most `width` at a time, starting the next as one ends; stops taking new ones once the rollout is aborted. */
  private async window<T>(items: readonly T[], width: number, work: (item: T) => Promise<void>): Promise<void> {
    let next = 0;
    const lane = async (): Promise<void> => {
      while (next < items.length) {
        this.checkGoing();
        await work(items[next++]!);
      }
    };
    await Promise.all(Array.from({ length: Math.min(width, items.length) }, lane));
  }

  /** A new alloc at a new index (or one whose alloc failed): after any teardown still under way there, place it and watch it. */
  private async createAt(target: GroupSpec, index: number): Promise<void> {
    // Placed before the first await when nothing is in the way, so that the caller learns its id at once.
    const teardowns = this.teardownsAt(target.name, index);
    if (teardowns) await teardowns;
    this.checkGoing();
    await this.watch(target, this.placeAt(target, index));
  }

  private async replace(target: GroupSpec, p: PlannedAlloc, allocs: Map<string, R>): Promise<void> {
    const current = allocs.get(p.allocId!)!;
    const siblings = this.plan.groups
      .find((g) => g.name === target.name)!
      .allocs.filter((x) => x.keeps === p.allocId)
      .map((x) => allocs.get(x.allocId!)!);
    if (p.update === 'ignore') {
      // Resumed: the new alloc was placed before the restart; prove it, then its old sibling goes.
      await this.watch(target, current);
      await this.stopAll(siblings);
      return;
    }
    const before = current.alloc.job.groups.find((x) => x.name === target.name) ?? target;
    const order = replacementOrder(before, target);
    if (order.kind === 'create-before-destroy') {
      const fresh = this.placeAt(target, p.index);
      await this.watch(target, fresh);
      crashPoint('agent.plugin-update.after-new-healthy');
      await this.stopAll([current, ...siblings]);
      return;
    }
    await this.stopAll([current, ...siblings]);
    this.checkGoing();
    await this.teardownsAt(target.name, p.index);
    this.checkGoing();
    await this.watch(target, this.placeAt(target, p.index));
  }

  private async stopAll(allocs: readonly RolloutAlloc[]): Promise<void> {
    await this.afterSave();
    await Promise.all(allocs.map((r) => r.stop()));
    // The agent is going away and left a stop undone (a plugin waiting for unmounts): nothing may follow it; the next agent resumes.
    if (allocs.some((r) => r.stopCutShort)) {
      this.detach();
      this.checkGoing();
    }
  }

  /**
   * The teardowns to wait for at an index: allocs there that are stopped or
   * dead but may still hold something (a task, a mount) — a new claim must
   * not race their release. Undefined when there is none.
   */
  private teardownsAt(group: string, index: number): Promise<void> | undefined {
    const pending = this.host
      .allocsOf(this.deployment.jobId)
      .filter((r) => r.alloc.group === group && r.alloc.index === index && !isLive(r.alloc) && r.needsTeardown);
    return pending.length ? this.stopAll(pending) : undefined;
  }

  private placeAt(target: GroupSpec, index: number): R {
    const d = this.deployment;
    const alloc: Alloc = {
      id: randomUUID(),
      jobId: d.jobId,
      group: target.name,
      index,
      name: `${d.jobId}.${target.name}[${index}]`,
      job: d.job,
      jobVersion: d.jobVersion,
      desiredStatus: 'run',
      clientStatus: 'pending',
      createdAt: this.host.clock.now(),
      deploymentId: d.id,
      jobDeployment: d,
    };
    const placed = this.host.prepare(alloc);
    if (this.initial) {
      this.initial.push(placed); // saved and launched by the caller of start()
    } else {
      this.host.save([placed]);
      this.host.launch(placed);
    }
    this.placed.push(alloc.id);
    return placed;
  }

  /** Watches a placed alloc until it is healthy; records the verdict on it either way. */
  private async watch(target: GroupSpec, r: R): Promise<void> {
    const { alloc } = r;
    const strategy = target.update ?? DEFAULT_UPDATE;
    await this.afterSave();
    try {
      await watchAllocHealth({
        alloc,
        strategy,
        clock: this.host.clock,
        read: () =>
          readAllocHealth(alloc, target, r.taskStates(), this.host.plugins(), (type, name) => this.host.pluginRegistrations(type, name)),
        // A plugin event of another alloc (a newer registration) may change this one's reading too.
        onChange: (listener, disposables) =>
          this.host.onEvent(
            (e) => (e.topic === 'Plugin' ? listener(alloc.id) : e.allocId !== undefined && listener(e.allocId)),
            disposables,
          ),
        signal: this.signal,
      });
    } catch (err) {
      if (err instanceof UnhealthyAllocError) {
        this.verdict(r, false, err.why);
        this.host.emit({
          topic: 'Job',
          type: 'Deployment alloc unhealthy',
          message: `deployment ${short(this.deployment.id)}: ${err.message}`,
          jobId: alloc.jobId,
          allocId: alloc.id,
        });
      }
      throw err;
    }
    this.verdict(r, true);
    this.host.emit({
      topic: 'Job',
      type: 'Deployment alloc healthy',
      message: `deployment ${short(this.deployment.id)}: alloc ${alloc.name} (${short(alloc.id)}) of version ${this.deployment.jobVersion} is healthy`,
      jobId: alloc.jobId,
      allocId: alloc.id,
    });
  }

  private verdict(r: R, healthy: boolean, reason?: string): void {
    r.alloc.deploymentStatus = { healthy, time: this.host.clock.now(), ...(reason ? { reason } : {}) };
    try {
      this.host.save([r]);
    } catch (err) {
      // In memory the verdict stands; a resumed rollout would only watch the alloc again.
      this.host.logger.error('could not save a deployment verdict on an alloc', { alloc_id: r.alloc.id, error: err });
    }
  }

  /**
   * After a failure or a cancel: a new alloc of this deployment not proven
   * healthy gives way to an old one still running at its index.
   */
  private async giveWay(): Promise<void> {
    const all = this.host.allocsOf(this.deployment.jobId);
    const unproven = all.filter((r) => {
      const a = r.alloc;
      if (a.deploymentId !== this.deployment.id || a.deploymentStatus?.healthy || (!isLive(a) && !r.needsTeardown)) return false;
      if (this.heldOld.some((o) => isLive(o.alloc) && sharesPlugin(o.alloc, a))) return true;
      return all.some(
        (o) =>
          o !== r &&
          o.alloc.group === a.group &&
          o.alloc.index === a.index &&
          o.alloc.deploymentId !== this.deployment.id &&
          isLive(o.alloc),
      );
    });
    for (const r of unproven) {
      this.host.emit({
        topic: 'Job',
        type: 'Deployment alloc stopped',
        message: `deployment ${short(this.deployment.id)}: alloc ${r.alloc.name} (${short(r.alloc.id)}) was not proven healthy; it is stopped and the old alloc at its index keeps running`,
        jobId: r.alloc.jobId,
        allocId: r.alloc.id,
      });
    }
    await Promise.all(
      unproven.map((r) =>
        r
          .stop()
          .catch((err: unknown) =>
            this.host.logger.error('stopping an unproven alloc of a failed deployment failed', { alloc_id: r.alloc.id, error: err }),
          ),
      ),
    );
  }
}
