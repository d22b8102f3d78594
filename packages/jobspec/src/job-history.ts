// What a job is now, read from its allocs: the client state keeps no job
// records (a job lives in its allocs, stopped ones included until a purge),
// so the job's current version, that version's spec and its latest
// deployment are the newest of what its allocs carry.
import type { Alloc, Deployment, JobSpec } from './model';

export interface JobHistory {
  /** The job's current version: the highest any alloc or deployment record names. */
  version: number;
  /** That version's spec. */
  job: JobSpec;
  /** The job's latest deployment, if it ever had one. */
  deployment?: Deployment;
}

const versionOf = (a: Alloc): number => a.jobVersion ?? 0;

/** Whether `a` is a newer deployment record than `b`: a higher version, then a later start, then a later update. */
function newer(a: Deployment, b: Deployment): boolean {
  return (a.jobVersion - b.jobVersion || a.createdAt - b.createdAt || a.updatedAt - b.updatedAt) > 0;
}

/** The newest of the deployment copies the allocs carry. */
export function latestDeployment(allocs: readonly Alloc[]): Deployment | undefined {
  let latest: Deployment | undefined;
  for (const a of allocs) {
    const d = a.jobDeployment;
    if (d && (!latest || newer(d, latest))) latest = d;
  }
  return latest;
}

/** The job's history as its allocs tell it; undefined for a job with no allocs (a new one). */
export function jobHistory(allocs: readonly Alloc[]): JobHistory | undefined {
  if (allocs.length === 0) return undefined;
  const deployment = latestDeployment(allocs);
  let newest = allocs[0]!;
  for (const a of allocs) {
    if (versionOf(a) > versionOf(newest) || (versionOf(a) === versionOf(newest) && a.createdAt > newest.createdAt)) newest = a;
  }
  // A deployment of a newer version than any alloc runs (a stop-before-start
  // rollout cut short between the stop and the start) still names the
  // job's current version and spec.
  if (deployment && deployment.jobVersion > versionOf(newest)) return { version: deployment.jobVersion, job: deployment.job, deployment };
  return { version: versionOf(newest), job: newest.job, ...(deployment ? { deployment } : {}) };
}

/**
 * The version a failure of the next deployment goes back to under
 * auto_revert: the current one if it is stable — its deployment succeeded,
 * or it had none of its own and the latest one before it succeeded (or
 * there never was one) — else whatever the latest deployment would have
 * gone back to.
 */
export function stableVersion(history: JobHistory | undefined): Deployment['revertTo'] {
  if (!history) return undefined;
  const d = history.deployment;
  if (!d || d.status === 'successful') return { version: history.version, job: history.job };
  return d.revertTo;
}
