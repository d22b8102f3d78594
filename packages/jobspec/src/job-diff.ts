// The field-by-field difference between two versions of a job, and which
// changes need a new process. Both sides are compared in their jobspec form
// (jobToDocument), so a change is named as the user wrote it —
// `task "plugin" env.FOO`, `update.max_parallel` — with durations as "10s".
//
// What forces a destructive (create/destroy) update, after Nomad's
// tasksUpdated: a task added or removed, or any field of a task — driver,
// config (command, args), env, csi_plugin, volume_mount, template — and any change to
// the group's volumes. Unlike Nomad, a task's restart, kill_signal and
// kill_timeout are destructive too: Nomad's client hands the new job to the
// running task runner, ours reads them when the runner is made, so only a
// new alloc would use them. What is updated in place (the alloc records the
// new version, no process is touched): the group's `update` and `restart`
// blocks (the group's restart is only the default its tasks fold in; a task
// whose policy it changes shows a task change too) and the job's `name`.
// `count` is neither: the plan creates or stops allocs for the difference.
import type { GroupSpec, JobSpec } from './model';
import { jobToDocument, type GroupDocument } from './jobspec';
import { EVERY_DATACENTER } from './datacenters';

export type ChangeEffect = 'destructive' | 'in-place';

export interface FieldChange {
  /** The field as a jobspec names it, e.g. `task "plugin" env.FOO` or `volume "data" access_mode`. */
  field: string;
  kind: 'added' | 'removed' | 'changed';
  /** The old value as JSON; absent when the field was added. */
  old?: string;
  /** The new value as JSON; absent when the field was removed. */
  new?: string;
  effect: ChangeEffect;
}

type Leaves = Map<string, string>;

/** Labelled blocks: the segment after one of these is a label, shown quoted. */
const LABELLED = new Set(['task', 'volume']);
/** The value a labelled block itself leaves, so that adding or removing it shows as one change. */
const BLOCK = '{block}';

function fieldName(segments: readonly string[]): string {
  const words: string[] = [];
  const dotted: string[] = [];
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i]!;
    if (dotted.length === 0 && LABELLED.has(s) && i + 1 < segments.length) {
      words.push(`${s} ${JSON.stringify(segments[i + 1])}`);
      i++;
    } else {
      dotted.push(s);
    }
  }
  return [...words, ...(dotted.length ? [dotted.join('.')] : [])].join(' ');
}

/**
 * The leaves of a document: objects are walked (a map such as env gives one
 * leaf per key), lists are one leaf each (args, volume_mount: their order
 * matters), and each labelled block (a task, a volume) leaves a mark of its own.
 */
function leaves(value: unknown, segments: string[], out: Leaves): Leaves {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const parent = segments.at(-2);
    if (parent !== undefined && LABELLED.has(parent) && segments.length === 2) out.set(JSON.stringify(segments), BLOCK);
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) leaves(v, [...segments, k], out);
    return out;
  }
  if (value !== undefined) out.set(JSON.stringify(segments), JSON.stringify(value));
  return out;
}

/** Whether a change to `segments` (of a group document) needs a new process. */
function groupEffect(segments: readonly string[]): ChangeEffect {
  const [top] = segments;
  return top === 'update' || top === 'restart' ? 'in-place' : 'destructive';
}

function compare(a: Leaves, b: Leaves, effect: (segments: readonly string[]) => ChangeEffect): FieldChange[] {
  const keys = new Set([...a.keys(), ...b.keys()]);
  // A task or volume that came or went is one change, not one per field.
  // Labelled blocks always sit at depth 2 (`task.<name>`), so a leaf is
  // within one when its first two segments are one: a set lookup per leaf,
  // linear in the spec's size.
  const whole = new Set([...keys].filter((k) => (a.get(k) === BLOCK) !== (b.get(k) === BLOCK)));
  const within = (segments: readonly string[]) => segments.length > 2 && whole.has(JSON.stringify(segments.slice(0, 2)));
  const changes: FieldChange[] = [];
  for (const key of keys) {
    const before = a.get(key);
    const after = b.get(key);
    if (before === after) continue;
    const segments = JSON.parse(key) as string[];
    if (within(segments)) continue;
    changes.push({
      field: fieldName(segments),
      kind: before === undefined ? 'added' : after === undefined ? 'removed' : 'changed',
      ...(before !== undefined && before !== BLOCK ? { old: before } : {}),
      ...(after !== undefined && after !== BLOCK ? { new: after } : {}),
      effect: effect(segments),
    });
  }
  return changes.sort((x, y) => (x.field < y.field ? -1 : x.field > y.field ? 1 : 0));
}

function groupDocument(job: JobSpec, group: GroupSpec): GroupDocument {
  const doc = jobToDocument({ ...job, groups: [group] });
  return doc.job[job.id]!.group[group.name]!;
}

/**
 * What differs between two versions of a group, count left out: each
 * changed field with its effect. Empty when the group is the same.
 */
export function diffGroup(job: JobSpec, before: GroupSpec, after: GroupSpec): FieldChange[] {
  const strip = (d: GroupDocument): GroupDocument => ({ ...d, count: undefined });
  return compare(
    leaves(strip(groupDocument(job, before)), [], new Map()),
    leaves(strip(groupDocument(job, after)), [], new Map()),
    groupEffect,
  );
}

/** What differs at the job level, groups left out (`name` and `datacenters`: in-place changes, as Nomad's). */
export function diffJobFields(before: JobSpec, after: JobSpec): FieldChange[] {
  const top = (j: JobSpec) => leaves({ name: j.name, datacenters: [...(j.datacenters ?? EVERY_DATACENTER)] }, [], new Map());
  return compare(top(before), top(after), () => 'in-place');
}

/** Whether two versions of a job are the same spec: no job field, group set, count or group field differs. */
export function sameJob(a: JobSpec, b: JobSpec): boolean {
  if (a.id !== b.id || a.groups.length !== b.groups.length || diffJobFields(a, b).length) return false;
  return a.groups.every((g) => {
    const other = b.groups.find((x) => x.name === g.name);
    return other !== undefined && other.count === g.count && diffGroup(b, g, other).length === 0;
  });
}

/** Whether any of `changes` needs a new process. */
export function isDestructive(changes: readonly FieldChange[]): boolean {
  return changes.some((c) => c.effect === 'destructive');
}

/** `env.FOO: "1" => "2"`, `task "side": added`, for reasons and plan output. */
export function describeChange(c: FieldChange): string {
  if (c.kind === 'added') return `${c.field}: added${c.new !== undefined ? ` (${c.new})` : ''}`;
  if (c.kind === 'removed') return `${c.field}: removed${c.old !== undefined ? ` (was ${c.old})` : ''}`;
  return `${c.field}: ${c.old} => ${c.new}`;
}
