// `job run`'s watch over what it set under way, as `nomad job run` monitors
// its evaluation and deployment: every allocation the run's deployment
// places, each new task event once (received, waiting for a plugin, volumes
// mounted, started, failures…) with the allocation's short id and the
// event's time, status changes and health verdicts, until the deployment
// ends. It polls the agent's API (the job, then its allocations) rather
// than following the event stream: a poll reads whole state, so nothing is
// lost across a dropped connection or an agent restart, and an agent that
// does not answer for a while is asked again before the watch gives up.
import { type Clock, CsiplugError, RealClock, ValidationError, errorMessage, formatGoDuration } from '@csiplug/core';
import { ApiError, ApiErrorCode, ClientErrorCode, type ApiClient } from '@csiplug/api/client';
import type { JobPlan } from '@csiplug/jobspec';
import type { AllocStubView, DeploymentView, JobView, RunJobResult } from '@csiplug/api/client';
import { DEFAULT_UPDATE } from '@csiplug/jobspec';
import type { JobSpec, TaskEvent } from '@csiplug/jobspec';
import { formatTable, formatTime, shortId } from './format';

/** ms between two looks at the deployment. */
export const MONITOR_POLL_MS = 400;
/** After an agent stops answering: the waits before each new try; then the watch gives up (about half a minute in all). */
export const MONITOR_RETRY_DELAYS_MS: readonly number[] = [500, 1_500, 3_000, 5_000, 8_000, 12_000];
/** How long an allocation may stay failed before the watch ends without the deployment's verdict (which follows a failure at once). */
export const MONITOR_FAILURE_GRACE_MS = 5_000;
/** Added to the longest a deployment can take, for the default bound of the watch. */
export const MONITOR_MARGIN_MS = 60_000;

/** How the watch ended: the deployment succeeded; it (or an allocation of it) failed, or it was cancelled or replaced; or the watch stopped first. */
export type MonitorVerdict = { kind: 'successful' } | { kind: 'failed'; reason: string } | { kind: 'timeout' };

export interface RunMonitorOptions {
  client: Pick<ApiClient, 'address' | 'getJob' | 'jobAllocations'>;
  /** What `job run` answered; it has a deploymentId. */
  result: RunJobResult;
  /** A line of the watch, on stdout. */
  out(line: string): void;
  /** A line about the watch itself (the agent not answering), on stderr. */
  note(line: string): void;
  verbose: boolean;
  /** Stops watching after this long (ms); 0 watches until the deployment ends. */
  timeoutMs: number;
  pollMs?: number;
  retryDelaysMs?: readonly number[];
  failureGraceMs?: number;
  clock?: Clock;
}

/** The agent did not answer for longer than the watch waits. */
export class MonitorLostError extends CsiplugError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('EMONITOR_LOST', message, options);
  }
}

/**
 * The longest the run's deployment can take by its update blocks — each
 * group replaces its allocations `max_parallel` at a time, each round
 * allowed `healthy_deadline` — plus a margin: the default bound of the
 * watch, which the deployment's own deadlines beat.
 */
export function defaultMonitorTimeout(job: JobSpec, plan: JobPlan): number {
  let longest = 0;
  for (const g of plan.groups) {
    const placed = g.updates.create + g.updates['create/destroy'];
    if (placed === 0) continue;
    const update = g.update ?? job.groups.find((x) => x.name === g.name)?.update ?? DEFAULT_UPDATE;
    longest = Math.max(longest, Math.ceil(placed / update.maxParallel) * update.healthyDeadline);
  }
  return longest + MONITOR_MARGIN_MS;
}

/** An agent that may come back: no answer at all, out of time, or a 503 (shutting down, not listening yet, too many connections). */
function isTransient(err: unknown): boolean {
  if (!(err instanceof ApiError)) return false;
  if (err.status === 503) return true;
  return err.status === 0 && (err.code === ApiErrorCode.Connect || err.code === ClientErrorCode.Timeout);
}

interface Line {
  time: number;
  text: string;
}

/** Watches the deployment of `result` until it ends, printing as it goes; resolves with how it ended. */
export async function monitorRun(options: RunMonitorOptions): Promise<MonitorVerdict> {
  return new RunMonitor(options).run();
}

class RunMonitor {
  private readonly clock: Clock;
  private readonly deploymentId: string;
  /** Allocations `job run` printed as created already. */
  private readonly initial: ReadonlySet<string>;
  private readonly announced = new Set<string>();
  /** Per allocation, how many times each event (time, type, message) was printed. */
  private readonly printed = new Map<string, Map<string, number>>();
  private readonly statuses = new Map<string, string>();
  private readonly verdicts = new Set<string>();
  private failedSince: number | undefined;
  /** Whether the job's latest deployment was ours in some look: another one after it replaced it. */
  private sawOurs = false;

  constructor(private readonly o: RunMonitorOptions) {
    this.clock = o.clock ?? new RealClock();
    if (!o.result.deploymentId)
      throw new ValidationError(`job "${o.result.jobId}": this run started no deployment; there is nothing to watch`);
    this.deploymentId = o.result.deploymentId;
    this.initial = new Set(o.result.allocIds);
  }

  private short(id: string): string {
    return shortId(id, this.o.verbose);
  }

  async run(): Promise<MonitorVerdict> {
    const { jobId } = this.o.result;
    const started = this.clock.now();
    const pollMs = this.o.pollMs ?? MONITOR_POLL_MS;
    const delays = this.o.retryDelaysMs ?? MONITOR_RETRY_DELAYS_MS;
    let misses = 0;
    for (;;) {
      let job: JobView;
      let allocs: AllocStubView[];
      try {
        // The job first: allocations read after a final verdict hold everything that led to it.
        job = await this.o.client.getJob(jobId);
        allocs = await this.o.client.jobAllocations(jobId);
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) {
          this.o.out(`==> Job "${jobId}" is gone: it was stopped and purged while it was being watched`);
          return { kind: 'failed', reason: 'the job was purged' };
        }
        if (!isTransient(err)) throw err;
        if (misses >= delays.length) {
          const waited = formatGoDuration(delays.reduce((a, b) => a + b, 0));
          throw new MonitorLostError(
            `lost the agent at ${this.o.client.address} while watching deployment "${this.short(this.deploymentId)}" (no answer for ${waited}: ${errorMessage(err)}). ` +
              `Job "${jobId}" was submitted (version ${this.o.result.version}) and its deployment goes on while the agent runs: see 'csiplug job status ${jobId}' once it answers`,
            { cause: err },
          );
        }
        if (misses === 0)
          this.o.note(
            `    (the agent at ${this.o.client.address} does not answer: ${errorMessage(err)}; asking again for up to ${formatGoDuration(delays.reduce((a, b) => a + b, 0))})`,
          );
        await this.clock.sleep(delays[misses++]!);
        continue;
      }
      if (misses > 0) this.o.note('    (the agent answers again)');
      misses = 0;
      const verdict = this.update(job, allocs);
      if (verdict) return verdict;
      if (this.o.timeoutMs > 0 && this.clock.now() - started >= this.o.timeoutMs) {
        this.o.out(
          `==> Stopped watching after ${formatGoDuration(this.o.timeoutMs)}: deployment "${this.short(this.deploymentId)}" is still running and goes on. ` +
            `Follow it with 'csiplug job status ${jobId}'`,
        );
        return { kind: 'timeout' };
      }
      await this.clock.sleep(pollMs);
    }
  }

  /** Prints what is new in this look, and returns the verdict once there is one. */
  private update(job: JobView, allocs: AllocStubView[]): MonitorVerdict | undefined {
    const mine = allocs
      .filter((a) => a.deploymentId === this.deploymentId || this.initial.has(a.id))
      .sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id));
    const lines: Line[] = [];
    const now = this.clock.now();
    for (const a of mine) lines.push(...this.allocLines(a, now));
    // In the order things happened: a look can find several events of several allocations.
    lines.sort((a, b) => a.time - b.time);
    for (const l of lines) this.o.out(`    ${formatTime(l.time)}: ${l.text}`);

    const d = job.deployment;
    if (d?.id === this.deploymentId) this.sawOurs = true;
    if (d?.id === this.deploymentId && d.status !== 'running') return this.ended(d, mine);
    if (d && d.id !== this.deploymentId && (this.sawOurs || d.jobVersion > this.o.result.version)) {
      // Ours is no longer the job's latest: it failed and was reverted, or a newer run (or a stop) cancelled it.
      const reverted = d.revertOf === this.o.result.version;
      const why = reverted
        ? `failed, and auto_revert runs the last stable version again as version ${d.jobVersion} (deployment "${this.short(d.id)}")`
        : `was cancelled: deployment "${this.short(d.id)}" of version ${d.jobVersion} replaced it`;
      this.o.out(`==> Deployment "${this.short(this.deploymentId)}" ${why}`);
      this.failures(mine);
      return { kind: 'failed', reason: why };
    }
    const failed = mine.filter((a) => a.clientStatus === 'failed');
    if (failed.length === 0) {
      this.failedSince = undefined;
      return undefined;
    }
    // The deployment fails at once with a failed allocation; if its verdict is slow to show, the watch ends on the failure alone.
    this.failedSince ??= now;
    if (now - this.failedSince < (this.o.failureGraceMs ?? MONITOR_FAILURE_GRACE_MS)) return undefined;
    this.o.out(
      `==> ${failed.length === 1 ? 'An allocation' : `${failed.length} allocations`} of deployment "${this.short(this.deploymentId)}" failed`,
    );
    this.failures(mine);
    return { kind: 'failed', reason: 'an allocation failed' };
  }

  private allocLines(a: AllocStubView, now: number): Line[] {
    const lines: Line[] = [];
    const name = `Allocation "${this.short(a.id)}"`;
    if (!this.announced.has(a.id)) {
      this.announced.add(a.id);
      // The ones placed at once were listed by `job run` already; a rolling update places the others as it goes.
      if (!this.initial.has(a.id)) lines.push({ time: a.createdAt, text: `${name} created: ${a.name} (version ${a.jobVersion ?? 0})` });
    }
    lines.push(...this.eventLines(a, name));
    const was = this.statuses.get(a.id) ?? 'pending';
    if (a.clientStatus !== was) lines.push({ time: now, text: `${name} status changed: "${was}" -> "${a.clientStatus}"` });
    this.statuses.set(a.id, a.clientStatus);
    const v = a.deploymentStatus;
    if (v && !this.verdicts.has(a.id)) {
      this.verdicts.add(a.id);
      lines.push({ time: v.time, text: v.healthy ? `${name} is healthy` : `${name} is unhealthy${v.reason ? `: ${v.reason}` : ''}` });
    }
    return lines;
  }

  /**
   * The events not printed yet. An event of the alloc as a whole (a volume
   * mounted, a plugin waited for) is recorded in each of its tasks: it is
   * printed once, without a task name.
   */
  private eventLines(a: AllocStubView, name: string): Line[] {
    const tasks = Object.keys(a.tasks).sort();
    const seen = new Map<string, { event: TaskEvent; count: number; tasks: string[] }>();
    for (const task of tasks) {
      const counts = new Map<string, number>();
      for (const event of a.tasks[task]!.events) {
        const key = `${event.time}\0${event.type}\0${event.message}`;
        const n = (counts.get(key) ?? 0) + 1;
        counts.set(key, n);
        const entry = seen.get(key) ?? { event, count: 0, tasks: [] };
        entry.count = Math.max(entry.count, n);
        if (!entry.tasks.includes(task)) entry.tasks.push(task);
        seen.set(key, entry);
      }
    }
    let printed = this.printed.get(a.id);
    if (!printed) this.printed.set(a.id, (printed = new Map()));
    const lines: Line[] = [];
    for (const [key, { event, count, tasks: where }] of seen) {
      const done = printed.get(key) ?? 0;
      if (count <= done) continue;
      printed.set(key, count);
      const whole = tasks.length > 1 && where.length === tasks.length;
      const label = whole ? '' : ` task${where.length > 1 ? 's' : ''} ${where.map((t) => `"${t}"`).join(', ')}`;
      const text = `${name}${label}: ${event.type}${event.message ? `: ${event.message}` : ''}`;
      for (let i = done; i < count; i++) lines.push({ time: event.time, text });
    }
    return lines;
  }

  private ended(d: DeploymentView, mine: AllocStubView[]): MonitorVerdict {
    const head = `==> Deployment "${this.short(d.id)}" ${d.status}`;
    this.o.out(d.status === 'successful' ? head : `${head}: ${d.description}`);
    if (d.groups.length) {
      const table = formatTable(
        ['Task Group', 'Desired', 'Placed', 'Healthy', 'Unhealthy'],
        d.groups.map((g) => [g.name, String(g.desired), String(g.placed), String(g.healthy), String(g.unhealthy)]),
      );
      this.o.out(
        table
          .split('\n')
          .map((l) => `    ${l}`)
          .join('\n'),
      );
    }
    if (d.status === 'successful') return { kind: 'successful' };
    this.failures(mine);
    return { kind: 'failed', reason: d.description };
  }

  /** Each allocation that failed or was found unhealthy, with why, and where to look next. */
  private failures(mine: AllocStubView[]): void {
    const bad = mine.filter((a) => a.clientStatus === 'failed' || a.deploymentStatus?.healthy === false);
    for (const a of bad) {
      // The task event that says what failed names the cause; the health verdict's reason (a deadline passed) stands in when there is none.
      const event = lastFailure(a);
      const why = event
        ? `task "${event.task}": ${event.event.type}: ${event.event.message}`
        : (a.deploymentStatus?.reason ?? `its status is ${a.clientStatus}`);
      this.o.out(`    Allocation "${this.short(a.id)}" (${a.name}) failed: ${why}`);
    }
    const first = bad[0];
    if (first) {
      const task = lastFailure(first)?.task ?? Object.keys(first.tasks).sort()[0];
      this.o.out(
        `    See 'csiplug alloc status ${this.short(first.id)}'${task ? ` and 'csiplug alloc logs -stderr ${this.short(first.id)} ${task}'` : ''}`,
      );
    }
  }
}

/** The alloc's latest event that says its task failed, and the task. */
function lastFailure(a: AllocStubView): { task: string; event: TaskEvent } | undefined {
  let found: { task: string; event: TaskEvent } | undefined;
  for (const [task, state] of Object.entries(a.tasks)) {
    for (const event of state.events) if (event.failed && (!found || event.time >= found.event.time)) found = { task, event };
  }
  return found;
}
