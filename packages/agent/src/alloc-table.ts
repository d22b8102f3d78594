// The allocs this agent runs: their runners by id and by job, and the allocs
// boot could not restore (left as they are, tasks running: their claims
// count as in use). The one place the service facade's parts look an alloc
// up; the job updater (deploy/) is the one writer of what is in it.
import * as path from 'path';
import type { AllocView } from '@csiplug/api';
import { openLogSlice, type LogRange, type LogSlice } from '@csiplug/api';
import { rotatedLogPath } from '@csiplug/driver';
import type { AllocRunner } from '@csiplug/runner';
import { NotFoundError } from './agent-errors';

export class AllocTable {
  private readonly runners = new Map<string, AllocRunner>();
  /** The same runners by job: a job's allocs without a scan of every runner (a restore resumes each job, `job status` lists each). */
  private readonly byJob = new Map<string, Set<AllocRunner>>();
  /** Allocs boot could not read or rebuild: left as they are, tasks running — their claims count as in use. */
  readonly unrestored = new Set<string>();

  add(r: AllocRunner): void {
    this.runners.set(r.alloc.id, r);
    const ofJob = this.byJob.get(r.alloc.jobId) ?? new Set<AllocRunner>();
    ofJob.add(r);
    this.byJob.set(r.alloc.jobId, ofJob);
  }

  remove(r: AllocRunner): void {
    this.runners.delete(r.alloc.id);
    const ofJob = this.byJob.get(r.alloc.jobId);
    ofJob?.delete(r);
    if (ofJob?.size === 0) this.byJob.delete(r.alloc.jobId);
  }

  get(allocId: string): AllocRunner | undefined {
    return this.runners.get(allocId);
  }

  has(allocId: string): boolean {
    return this.runners.has(allocId);
  }

  all(): AllocRunner[] {
    return [...this.runners.values()];
  }

  /** The job's allocs, oldest first. */
  ofJob(jobId: string): AllocRunner[] {
    return [...(this.byJob.get(jobId) ?? [])].sort(
      (a, b) => a.alloc.createdAt - b.alloc.createdAt || a.alloc.name.localeCompare(b.alloc.name),
    );
  }

  /** The jobs with an alloc here. */
  jobIds(): string[] {
    return [...this.byJob.keys()];
  }

  /** Whether this node runs the alloc (or is about to): a claim of it is in use. */
  live(allocId: string): boolean {
    if (this.unrestored.has(allocId)) return true;
    const r = this.runners.get(allocId);
    return !!r && r.alloc.desiredStatus === 'run' && r.alloc.clientStatus !== 'complete' && r.alloc.clientStatus !== 'failed';
  }

  // ---- AgentService: allocs --------------------------------------------------------

  listAllocs(): AllocView[] {
    return this.all()
      .sort((a, b) => a.alloc.createdAt - b.alloc.createdAt || a.alloc.name.localeCompare(b.alloc.name))
      .map((r) => viewOf(r));
  }

  getAlloc(id: string): AllocView | undefined {
    const r = this.runners.get(id) ?? this.all().find((x) => x.alloc.id.startsWith(id) && id.length >= 8);
    return r ? viewOf(r) : undefined;
  }

  async allocLogs(allocId: string, task: string, stream: 'stdout' | 'stderr', range: LogRange = {}): Promise<LogSlice> {
    const r = this.runners.get(allocId) ?? this.all().find((x) => x.alloc.id.startsWith(allocId) && allocId.length >= 8);
    if (!r) throw new NotFoundError(`alloc "${allocId}" not found`);
    const tasks = r.taskStates();
    if (!Object.hasOwn(tasks, task))
      throw new NotFoundError(`alloc ${r.alloc.id} has no task "${task}" (tasks: ${Object.keys(tasks).join(', ')})`);
    // Only the range is read, as it is consumed: a log may be far larger than this process's heap.
    return openLogSlice(rotatedLogPath(path.join(r.taskDir(task), `${stream}.log`), range.file ?? 0), range);
  }
}

function viewOf(r: AllocRunner): AllocView {
  return { ...r.alloc, tasks: r.taskStates(), volumes: r.mountedVolumes };
}
