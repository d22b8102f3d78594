// Nomad's per_alloc volumes, checked when a job is submitted (job run, job
// plan): a group whose `volume` block says `per_alloc = true` mounts, in its
// alloc of index i, the volume "<source>[i]" — so with count 3 the volumes
// db[0], db[1] and db[2] must all be in the volume catalog before the job
// runs. (Nomad registers such a job and reports the placement as failed,
// its evaluation blocked, while a per-alloc volume does not exist.) Refused
// here, naming each missing id and what to do, rather than leaving allocs to
// fail one by one at their mount.
import { UnsupportedError, ValidationError, perAllocVolumeId } from '@csiplug/core';
import type { JobSpec } from '@csiplug/jobspec';

/** At most this many ids are named in a refusal; the rest are counted. */
export const MAX_IDS_NAMED = 10;

/** `ids` for a message: the first MAX_IDS_NAMED, then how many more. */
function listed(ids: readonly string[]): string {
  const named = ids.slice(0, MAX_IDS_NAMED).join(', ');
  return ids.length > MAX_IDS_NAMED ? `${named} and ${ids.length - MAX_IDS_NAMED} more` : named;
}

/** The ids alloc 0 to count-1 mount: each when few, else the first and the last. */
function idRange(source: string, count: number): string {
  if (count <= MAX_IDS_NAMED) return Array.from({ length: count }, (_, i) => perAllocVolumeId(source, i)).join(', ');
  return `${perAllocVolumeId(source, 0)} to ${perAllocVolumeId(source, count - 1)}`;
}

/** Throws a ValidationError naming every per_alloc volume id of `job` that `exists` says is not in the catalog. */
export function assertPerAllocVolumesExist(job: JobSpec, exists: (volumeId: string) => boolean): void {
  const problems: string[] = [];
  for (const group of job.groups) {
    const count = job.type === 'system' ? 1 : group.count;
    for (const volume of group.volumes.filter((v) => v.perAlloc)) {
      const ids = Array.from({ length: count }, (_, i) => perAllocVolumeId(volume.source, i));
      const missing = ids.filter((id) => !exists(id));
      if (missing.length === 0) continue;
      problems.push(
        `job "${job.id}" group "${group.name}" volume "${volume.name}" has per_alloc = true, so its ${count} alloc${count === 1 ? '' : 's'} ` +
          `mount ${idRange(volume.source, count)}, one each; ${listed(missing)} ${missing.length === 1 ? 'is' : 'are'} not in the volume catalog: ` +
          `register or create ${missing.length === 1 ? 'it' : 'each'} first ("csiplug volume register FILE" or "csiplug volume create FILE", ` +
          `the file saying id = ${JSON.stringify(missing[0])}${missing.length > 1 ? ', and so on for each' : ''})`,
      );
    }
  }
  if (problems.length) throw new ValidationError(problems.join('; '), 'per_alloc');
}

/**
 * A cluster places a group's allocs by its volumes, one id per group; it
 * does not yet place each alloc by its own per_alloc volume. Refused rather
 * than placed wrong.
 */
export function assertNoPerAllocInCluster(job: JobSpec): void {
  const named = job.groups.flatMap((g) => g.volumes.filter((v) => v.perAlloc).map((v) => `group "${g.name}" volume "${v.name}"`));
  if (named.length === 0) return;
  throw new UnsupportedError(
    `job "${job.id}" ${named.join(', ')}: per_alloc is not built for a cluster yet (its scheduler places a group by one volume id); ` +
      `run the job on an agent on its own, or give each alloc's volume a group of its own without per_alloc`,
  );
}
