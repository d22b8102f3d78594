// Whether a `job run` can place its new allocs at all, as far as their
// single-writer volumes go: a new alloc that writes to a volume of a
// single-writer mode (single-node-writer, single-node-single-writer,
// multi-node-single-writer) while another writer holds it would only wait
// for a claim the catalog refuses — possibly for a day — so the run is
// refused first, naming the holder. (Nomad registers such a job and reports
// the placement as failed, its evaluation blocked until the claim is free;
// csiplug refuses at `job run` instead, unless the run is queued with
// -detach, the API's queue=true, which places the alloc to wait.)
//
// A holder is, for each volume id a new alloc mounts (a per_alloc volume's
// own id, `db[<index>]`, on both sides):
// - a live alloc (pending or running, wanted running) that writes to it and
//   that this run does not stop or replace: an alloc of another job, or one
//   of the same job kept by the plan;
// - another new alloc of the same run writing to it (a count over 1 without
//   per_alloc, or two groups of the job on one volume): they would wait on
//   each other;
// - a write claim the volume catalog still records for an alloc that is no
//   longer live (stopping, waiting for its unmount, restored after a
//   restart), passed in by the agent.
// An alloc the run replaces (stop-before-start for a single-writer volume,
// replacement-order.ts) or stops lets go of its claim first and is no
// holder. Pure: the allocs come from the job updater.
import { ConflictError, SINGLE_WRITER_ACCESS_MODES, requestedVolumeId } from '@csiplug/core';
import type { Alloc, JobPlan, JobSpec } from '@csiplug/jobspec';

/** A write claim the volume catalog records, as the agent reads it: which alloc holds it, and what it waits for. */
export interface RecordedWriteClaim {
  volumeId: string;
  allocId: string;
  /** What the claim is waiting for before it is let go, in words (e.g. `its unmount, which waits for plugin "hostpath"`). */
  waitingFor: string;
  /** Its unmount waits for a node plugin that is not running on this node (and may never come back). */
  pluginAway?: boolean;
}

/** Who holds (or would hold) a write claim a new alloc of the run needs. */
export type WriterClaimHolder =
  /** A live alloc; `starting`: it is pending — it holds the claim or is first in line for it (a queued run). */
  | { kind: 'alloc'; allocId: string; allocName: string; jobId: string; group: string; starting: boolean }
  /** Another alloc this same run would place. */
  | { kind: 'placed'; allocName: string; jobId: string; group: string }
  /** An alloc no longer live whose write claim the catalog still records. */
  | { kind: 'recorded'; allocId: string; waitingFor: string };

/** One write claim a new alloc of the run would need and another writer holds. */
export interface HeldWriterClaim {
  /** The group of the job being run that needs it. */
  group: string;
  /** The group's name for the volume, and the volume's id (a per_alloc volume's own id). */
  volumeName: string;
  volumeId: string;
  accessMode: string;
  holder: WriterClaimHolder;
}

const isLive = (a: Alloc): boolean => a.desiredStatus === 'run' && (a.clientStatus === 'pending' || a.clientStatus === 'running');

/** The volume ids `alloc` writes to (per_alloc ones resolved by its index). */
function writtenVolumeIds(alloc: Alloc): string[] {
  const group = alloc.job.groups.find((g) => g.name === alloc.group);
  return (group?.volumes ?? []).filter((v) => !v.readOnly).map((v) => requestedVolumeId(v, alloc.index));
}

/**
 * The write claims the new allocs of `plan` (a plan of `job`) would need and
 * another writer holds: live allocs among `allocs` (every alloc of the
 * agent), another new alloc of the plan, or a claim in `recorded` of an
 * alloc no longer live — unless that alloc is the job's own and its unmount
 * is under way with its plugin here (a run during the job's own stop or
 * replacement: the claim is let go shortly, as the rollout waits for it).
 * Empty when the run may go ahead.
 */
export function heldWriterClaims(
  job: JobSpec,
  plan: JobPlan,
  allocs: readonly Alloc[],
  recorded: readonly RecordedWriteClaim[] = [],
): HeldWriterClaim[] {
  // Allocs of this job the run stops or replaces: they let go first.
  const leaving = new Set(
    plan.groups.flatMap((g) => g.allocs.filter((p) => p.update === 'destroy' || p.update === 'create/destroy').map((p) => p.allocId)),
  );
  const holders = allocs.filter((a) => isLive(a) && !(a.jobId === job.id && leaving.has(a.id)));
  const liveIds = new Set(allocs.filter(isLive).map((a) => a.id));
  const ownStopping = (r: RecordedWriteClaim): boolean => !r.pluginAway && allocs.some((a) => a.id === r.allocId && a.jobId === job.id);
  const held = new Map<string, HeldWriterClaim>();
  const add = (claim: HeldWriterClaim, holderKey: string) => held.set(`${claim.group}\0${claim.volumeId}\0${holderKey}`, claim);
  // The first new alloc of the run that writes to each volume id.
  const placedWriter = new Map<string, { allocName: string; group: string }>();
  for (const g of plan.groups) {
    const spec = job.groups.find((x) => x.name === g.name);
    for (const p of g.allocs.filter((x) => x.update === 'create' || x.update === 'create/destroy')) {
      for (const v of spec?.volumes ?? []) {
        if (v.readOnly || !SINGLE_WRITER_ACCESS_MODES.includes(v.accessMode)) continue;
        const volumeId = requestedVolumeId(v, p.index);
        const need = { group: g.name, volumeName: v.name, volumeId, accessMode: v.accessMode };
        for (const h of holders.filter((a) => writtenVolumeIds(a).includes(volumeId))) {
          const starting = h.clientStatus === 'pending';
          add({ ...need, holder: { kind: 'alloc', allocId: h.id, allocName: h.name, jobId: h.jobId, group: h.group, starting } }, h.id);
        }
        for (const c of recorded.filter(
          (r) => r.volumeId === volumeId && !liveIds.has(r.allocId) && !leaving.has(r.allocId) && !ownStopping(r),
        )) {
          add({ ...need, holder: { kind: 'recorded', allocId: c.allocId, waitingFor: c.waitingFor } }, c.allocId);
        }
        const first = placedWriter.get(volumeId);
        if (first) add({ ...need, holder: { kind: 'placed', ...first, jobId: job.id } }, first.allocName);
        else placedWriter.set(volumeId, { allocName: p.name, group: g.name });
      }
    }
  }
  return [...held.values()];
}

function holderText(h: WriterClaimHolder): string {
  switch (h.kind) {
    case 'alloc':
      return (
        `alloc ${h.allocId} (${h.allocName}, job "${h.jobId}", group "${h.group}") ` +
        (h.starting ? 'is starting with its write claim, held or first in line for it' : 'holds its write claim')
      );
    case 'placed':
      return `so would ${h.allocName} (group "${h.group}"), which this run places too: the two would wait on each other`;
    case 'recorded':
      return `alloc ${h.allocId}, no longer running, still holds its write claim in the volume catalog, waiting for ${h.waitingFor}`;
  }
}

/** The refusal of a run whose new allocs need write claims others hold (a 409), naming each holder and what to do. */
export function writerClaimsHeldError(jobId: string, held: readonly HeldWriterClaim[]): ConflictError {
  const each = held.map(
    (c) => `group "${c.group}" writes to volume "${c.volumeId}" (${c.accessMode}: one writer at a time), and ${holderText(c.holder)}`,
  );
  const others = [...new Set(held.flatMap((c) => (c.holder.kind === 'alloc' && c.holder.jobId !== jobId ? [c.holder.jobId] : [])))];
  const recorded = [...new Set(held.flatMap((c) => (c.holder.kind === 'recorded' ? [c.holder.allocId] : [])))];
  const todo = [
    ...(others.length ? [`stop the holder first (csiplug job stop ${others.join(', ')})`] : []),
    ...(held.some((c) => c.holder.kind !== 'recorded' && c.holder.jobId === jobId)
      ? [
          `keep one writer of the volume in job "${jobId}" (a count of 1 for the group that writes to it, or read_only = true for the others)`,
        ]
      : []),
    ...(recorded.length ? [`let the unmount of alloc ${recorded.join(', ')} finish first (start the volume's plugin if it is away)`] : []),
  ];
  return new ConflictError(
    `job "${jobId}" was not run, nothing was placed: ${each.join('; ')}. ` +
      `To run it, ${todo.join(', or ')}; or run it with -detach (the API's queue=true) to queue the placement until the claim is free`,
  );
}
