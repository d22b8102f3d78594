// Whether a `job run` can place its new allocs at all, as far as their
// single-writer volumes go: a new alloc that writes to a volume of a
// single-writer mode (single-node-writer, single-node-single-writer,
// multi-node-single-writer) while a live alloc writes to it would only wait
// for a claim the catalog refuses — possibly for a day — so the run is
// refused first, naming the holder, as Nomad's scheduler refuses the
// placement. The holder is any live alloc (pending or running, wanted
// running) whose group writes to the volume and that this run does not stop
// or replace: an alloc of another job, or one of the same job kept by the
// plan. An alloc the run replaces (stop-before-start for a single-writer
// volume, replacement-order.ts) or stops lets go of its claim first and is
// no holder. Pure: the allocs come from the job updater.
import { ConflictError, SINGLE_WRITER_ACCESS_MODES } from '@csiplug/core';
import type { Alloc, JobPlan, JobSpec } from '@csiplug/jobspec';

/** One write claim a new alloc of the run would need and a live alloc holds. */
export interface HeldWriterClaim {
  /** The group of the job being run that needs it. */
  group: string;
  /** The group's name for the volume, and the volume's id. */
  volumeName: string;
  volumeId: string;
  accessMode: string;
  /** `starting`: the alloc is pending — it holds the claim or is first in line for it (a queued run). */
  holder: { allocId: string; allocName: string; jobId: string; group: string; starting: boolean };
}

const isLive = (a: Alloc): boolean => a.desiredStatus === 'run' && (a.clientStatus === 'pending' || a.clientStatus === 'running');

/** Whether `alloc`'s group writes to volume `volumeId`. */
function writes(alloc: Alloc, volumeId: string): boolean {
  const group = alloc.job.groups.find((g) => g.name === alloc.group);
  return !!group?.volumes.some((v) => v.source === volumeId && !v.readOnly);
}

/**
 * The write claims the new allocs of `plan` (a plan of `job`) would need and
 * live allocs among `allocs` (every alloc of the agent) hold; empty when the
 * run may go ahead.
 */
export function heldWriterClaims(job: JobSpec, plan: JobPlan, allocs: readonly Alloc[]): HeldWriterClaim[] {
  // Allocs of this job the run stops or replaces: they let go first.
  const leaving = new Set(
    plan.groups.flatMap((g) => g.allocs.filter((p) => p.update === 'destroy' || p.update === 'create/destroy').map((p) => p.allocId)),
  );
  const holders = allocs.filter((a) => isLive(a) && !(a.jobId === job.id && leaving.has(a.id)));
  const held: HeldWriterClaim[] = [];
  for (const g of plan.groups) {
    if (g.updates.create + g.updates['create/destroy'] === 0) continue;
    const spec = job.groups.find((x) => x.name === g.name);
    for (const v of spec?.volumes ?? []) {
      if (v.readOnly || !SINGLE_WRITER_ACCESS_MODES.includes(v.accessMode)) continue;
      for (const h of holders.filter((a) => writes(a, v.source))) {
        held.push({
          group: g.name,
          volumeName: v.name,
          volumeId: v.source,
          accessMode: v.accessMode,
          holder: { allocId: h.id, allocName: h.name, jobId: h.jobId, group: h.group, starting: h.clientStatus === 'pending' },
        });
      }
    }
  }
  return held;
}

/** The refusal of a run whose new allocs need write claims others hold (a 409), naming each holder and what to do. */
export function writerClaimsHeldError(jobId: string, held: readonly HeldWriterClaim[]): ConflictError {
  const each = held.map(
    (c) =>
      `group "${c.group}" writes to volume "${c.volumeId}" (${c.accessMode}: one writer at a time), and alloc ${c.holder.allocId} ` +
      `(${c.holder.allocName}, job "${c.holder.jobId}", group "${c.holder.group}") ` +
      (c.holder.starting ? 'is starting with its write claim, held or first in line for it' : 'holds its write claim'),
  );
  const others = [...new Set(held.filter((c) => c.holder.jobId !== jobId).map((c) => c.holder.jobId))];
  const todo = [
    ...(others.length ? [`stop the holder first (csiplug job stop ${others.join(', ')})`] : []),
    ...(held.some((c) => c.holder.jobId === jobId)
      ? [
          `keep one writer of the volume in job "${jobId}" (a count of 1 for the group that writes to it, or read_only = true for the others)`,
        ]
      : []),
  ];
  return new ConflictError(
    `job "${jobId}" was not run, nothing was placed: ${each.join('; ')}. ` +
      `To run it, ${todo.join(', or ')}; or run it with -detach (the API's queue=true) to queue the placement until the claim is free`,
  );
}
