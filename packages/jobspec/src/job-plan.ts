// The plan of a job run: what `job run` of a jobspec would do to the job's
// allocs, and the version it would make. One function, planJob, serves
// `job plan` (shown, nothing done), `job run` (the rollout carries it out)
// and an agent restart (a rollout cut short is planned again from what is
// left to do).
//
// Like Nomad's reconciler, each alloc is compared with the new spec on its
// own — after a failed rollout a group may run two versions — per index of
// the group's count:
//   ignore          the alloc runs the new version already;
//   in-place        nothing it runs changed (an `update` block, the job's
//                   name, or only another group): it records the new
//                   version, no process is touched;
//   create/destroy  a field its tasks or volumes use changed (job-diff.ts):
//                   a new alloc replaces it, in the group's replacement
//                   order (replacement-order.ts);
//   create          no live alloc holds the index (a new job or group, a
//                   larger count, or the alloc there has failed);
//   destroy         the index is past the new count (the highest go
//                   first), the group left the job, or a second alloc
//                   holds an index (one left by a create-before-destroy
//                   cut short).
//
// A group's diff is computed once per (version an alloc runs, group) and
// shared by every alloc of that version (job-diff.ts is linear in the
// spec's size), so a plan costs one diff per distinct version, not one per
// alloc.
import type { Alloc, Deployment, GroupSpec, JobSpec, UpdateStrategy } from './model';
import { DEFAULT_UPDATE } from './jobspec';
import { describeChange, diffGroup, diffJobFields, isDestructive, type FieldChange } from './job-diff';
import { jobHistory } from './job-history';
import { replacementOrder, type ReplacementOrder } from './replacement-order';

export type AllocUpdate = 'create' | 'destroy' | 'create/destroy' | 'in-place' | 'ignore';
export const ALLOC_UPDATES: readonly AllocUpdate[] = ['create', 'destroy', 'create/destroy', 'in-place', 'ignore'];

export interface PlannedAlloc {
  update: AllocUpdate;
  /** The index within the group's count. */
  index: number;
  /** `<job>.<group>[<index>]` */
  name: string;
  /** The alloc this is about; absent for a create. */
  allocId?: string;
  /** The version that alloc runs now. */
  version?: number;
  /** A create's dead predecessor at the index (failed or complete), stopped for good when the plan is carried out. */
  replaces?: string;
  /** A destroyed duplicate's sibling: the alloc that stays at the index. */
  keeps?: string;
  /** Why, in one line. */
  reason: string;
  /**
   * The fields of this alloc's spec that differ from the new one
   * (create/destroy and in-place) — only for an alloc that runs another
   * version than the job's current one: for the others they are the
   * group's `fields`, given once per group, not once per alloc.
   */
  changes?: FieldChange[];
}

export interface GroupPlan {
  name: string;
  /** How the group changed against the job's current version. */
  change: 'added' | 'removed' | 'edited' | 'none';
  count: { from: number; to: number };
  /** The group's changed fields against the job's current version (count aside). */
  fields: FieldChange[];
  /** How many allocs get each kind of update. */
  updates: Record<AllocUpdate, number>;
  allocs: PlannedAlloc[];
  /** How a replaced alloc gives way; set when the group has create/destroy updates. */
  order?: ReplacementOrder;
  /** The group's update block in the new spec; absent for a removed group. */
  update?: UpdateStrategy;
}

export interface JobPlan {
  jobId: string;
  /** Whether a run would change anything: the version, or any alloc. */
  changed: boolean;
  /** The job's current version (absent for a new job) and the one a run makes. */
  version: { from?: number; to: number };
  /** Job-level fields that changed. */
  fields: FieldChange[];
  groups: GroupPlan[];
  /** Set when the spec is that of a deployment under way: a run leaves it going and changes nothing. */
  underway?: { deploymentId: string; jobVersion: number };
}

/** Whether a run would create, destroy or replace an alloc (Nomad's `job plan` exits 1 then; in-place updates alone do not count). */
export function movesAllocs(plan: JobPlan): boolean {
  return plan.groups.some((g) => g.updates.create + g.updates.destroy + g.updates['create/destroy'] > 0);
}

const versionOf = (a: Alloc): number => a.jobVersion ?? 0;
const isLive = (a: Alloc): boolean => a.desiredStatus === 'run' && (a.clientStatus === 'pending' || a.clientStatus === 'running');
const isDeadButWanted = (a: Alloc): boolean => a.desiredStatus === 'run' && (a.clientStatus === 'failed' || a.clientStatus === 'complete');
const short = (id: string): string => id.slice(0, 8);

function groupOf(job: JobSpec, name: string): GroupSpec | undefined {
  return job.groups.find((g) => g.name === name);
}

/** The reason line for a list of changes: the first few, then how many more. */
export function summarizeChanges(changes: readonly FieldChange[], limit = 3): string {
  const shown = changes.slice(0, limit).map(describeChange);
  return changes.length > limit ? `${shown.join('; ')}; and ${changes.length - limit} more` : shown.join('; ');
}

/** A group's diff against the target, once per (version, group): allocs of one version share one spec. */
type GroupDiffs = (version: number, before: GroupSpec, target: GroupSpec) => FieldChange[];

function groupDiffs(job: JobSpec): GroupDiffs {
  const cache = new Map<string, FieldChange[]>();
  return (version, before, target) => {
    const key = `${version}\u0000${target.name}`;
    let changes = cache.get(key);
    if (!changes) cache.set(key, (changes = diffGroup(job, before, target)));
    return changes;
  };
}

/** Which alloc keeps an index held by several: one already at the target version, else one whose spec needs no new process, else the oldest version (the one proven before). */
function keeperOf(candidates: readonly Alloc[], target: GroupSpec, version: number, diffs: GroupDiffs): Alloc | undefined {
  if (candidates.length <= 1) return candidates[0];
  const atTarget = candidates.filter((a) => versionOf(a) === version);
  if (atTarget.length) return atTarget.sort((a, b) => b.createdAt - a.createdAt)[0];
  const same = candidates.filter((a) => {
    const g = groupOf(a.job, target.name);
    return g !== undefined && !isDestructive(diffs(versionOf(a), g, target));
  });
  const pool = same.length ? same : [...candidates];
  return pool.sort((a, b) => versionOf(a) - versionOf(b) || a.createdAt - b.createdAt)[0];
}

function planGroup(
  job: JobSpec,
  name: string,
  target: GroupSpec | undefined,
  current: { version: number; group: GroupSpec } | undefined,
  allocs: readonly Alloc[],
  version: number,
  isNewJob: boolean,
  diffs: GroupDiffs,
): GroupPlan {
  const mine = allocs.filter((a) => a.group === name);
  const live = mine.filter(isLive);
  const planned: PlannedAlloc[] = [];
  const from = current?.group.count ?? 0;
  const to = target?.count ?? 0;
  const destroy = (a: Alloc, reason: string, keeps?: string) =>
    planned.push({
      update: 'destroy',
      index: a.index,
      name: a.name,
      allocId: a.id,
      version: versionOf(a),
      reason,
      ...(keeps ? { keeps } : {}),
    });

  if (!target) {
    for (const a of [...live].sort((x, y) => y.index - x.index)) destroy(a, `group "${name}" is no longer in the job`);
  } else {
    for (let index = 0; index < target.count; index++) {
      const here = live.filter((a) => a.index === index);
      const keeper = keeperOf(here, target, version, diffs);
      const allocName = `${job.id}.${name}[${index}]`;
      if (!keeper) {
        const dead = mine.filter((a) => a.index === index && isDeadButWanted(a)).sort((a, b) => b.createdAt - a.createdAt)[0];
        const reason = dead
          ? `replaces alloc ${short(dead.id)}, which is ${dead.clientStatus}`
          : isNewJob
            ? 'new job'
            : !current
              ? `group "${name}" is new`
              : index >= from
                ? `count ${from} => ${to}`
                : `no alloc holds index ${index}`;
        planned.push({ update: 'create', index, name: allocName, reason, ...(dead ? { replaces: dead.id } : {}) });
        continue;
      }
      const before = groupOf(keeper.job, name);
      const changes = before ? diffs(versionOf(keeper), before, target) : [];
      const base = { index, name: keeper.name, allocId: keeper.id, version: versionOf(keeper) };
      const own = (changes: FieldChange[]) => (current && versionOf(keeper) === current.version ? {} : { changes });
      if (!before || isDestructive(changes)) {
        const reason = before ? summarizeChanges(changes.filter((c) => c.effect === 'destructive')) : `its job has no group "${name}"`;
        planned.push({ ...base, update: 'create/destroy', reason, ...own(changes) });
      } else if (versionOf(keeper) === version) {
        planned.push({ ...base, update: 'ignore', reason: `runs version ${version} already` });
      } else {
        const reason = changes.length
          ? summarizeChanges(changes)
          : `version ${versionOf(keeper)} => ${version}; nothing this group runs changed`;
        planned.push({ ...base, update: 'in-place', reason, ...own(changes) });
      }
      for (const other of here.filter((a) => a !== keeper))
        destroy(other, `a second alloc for index ${index}; alloc ${short(keeper.id)} stays`, keeper.id);
    }
    for (const a of live.filter((x) => x.index >= target.count).sort((x, y) => y.index - x.index)) destroy(a, `count ${from} => ${to}`);
  }

  const updates = Object.fromEntries(ALLOC_UPDATES.map((u) => [u, planned.filter((p) => p.update === u).length])) as Record<
    AllocUpdate,
    number
  >;
  const fields = current && target ? diffs(current.version, current.group, target) : [];
  const change: GroupPlan['change'] = !current
    ? target
      ? 'added'
      : 'removed'
    : !target
      ? 'removed'
      : fields.length || from !== to
        ? 'edited'
        : 'none';
  const replaced = planned.find((p) => p.update === 'create/destroy');
  const replacedFrom = replaced && groupOf(live.find((a) => a.id === replaced.allocId)!.job, name);
  return {
    name,
    change,
    count: { from, to },
    fields,
    updates,
    // By index; at one index the alloc that stays (or comes) first, what goes after it.
    allocs: planned.sort((a, b) => a.index - b.index || Number(a.update === 'destroy') - Number(b.update === 'destroy')),
    ...(target && replacedFrom ? { order: replacementOrder(replacedFrom, target) } : {}),
    ...(target ? { update: target.update ?? DEFAULT_UPDATE } : {}),
  };
}

/**
 * What running `job` would do, given every alloc this agent holds of it
 * (any status; stopped ones carry the job's history). The version grows by
 * one when the spec differs from the current version's in any field.
 */
export function planJob(job: JobSpec, allocs: readonly Alloc[]): JobPlan {
  const history = jobHistory(allocs);
  const current = history?.job;
  const fields = current ? diffJobFields(current, job) : [];
  const diffs = groupDiffs(job);
  const names = [
    ...new Set([
      ...(current?.groups ?? []).map((g) => g.name),
      ...job.groups.map((g) => g.name),
      ...allocs.filter(isLive).map((a) => a.group),
    ]),
  ].sort();
  const specChanged =
    !history ||
    fields.length > 0 ||
    names.some((n) => {
      const before = current && groupOf(current, n);
      const after = groupOf(job, n);
      if (!before || !after) return before !== after;
      return before.count !== after.count || diffs(history.version, before, after).length > 0;
    });
  const version = !history ? 0 : specChanged ? history.version + 1 : history.version;
  const groups = names.map((n) => {
    const before = current && groupOf(current, n);
    return planGroup(
      job,
      n,
      groupOf(job, n),
      history && before ? { version: history.version, group: before } : undefined,
      allocs,
      version,
      !history,
      diffs,
    );
  });
  const changed = specChanged || groups.some((g) => g.allocs.some((a) => a.update !== 'ignore'));
  return { jobId: job.id, changed, version: { ...(history ? { from: history.version } : {}), to: version }, fields, groups };
}

/**
 * The plan of running, mid-rollout, exactly the spec of the deployment
 * under way: nothing changes (the rollout goes on), so every live alloc is
 * shown as left alone, with why.
 */
export function underwayPlan(job: JobSpec, allocs: readonly Alloc[], d: Deployment): JobPlan {
  const reason = `deployment ${short(d.id)} of version ${d.jobVersion} is under way and goes on`;
  const groups = job.groups.map((g): GroupPlan => {
    const live = allocs.filter((a) => a.group === g.name && isLive(a)).sort((a, b) => a.index - b.index);
    const planned = live.map((a): PlannedAlloc => ({
      update: 'ignore',
      index: a.index,
      name: a.name,
      allocId: a.id,
      version: versionOf(a),
      reason,
    }));
    const updates = Object.fromEntries(ALLOC_UPDATES.map((u) => [u, u === 'ignore' ? planned.length : 0])) as Record<AllocUpdate, number>;
    return {
      name: g.name,
      change: 'none',
      count: { from: g.count, to: g.count },
      fields: [],
      updates,
      allocs: planned,
      update: g.update ?? DEFAULT_UPDATE,
    };
  });
  return {
    jobId: job.id,
    changed: false,
    version: { from: d.jobVersion, to: d.jobVersion },
    fields: [],
    groups,
    underway: { deploymentId: d.id, jobVersion: d.jobVersion },
  };
}
