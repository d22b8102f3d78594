// The job routes' answers in the shapes of Nomad's api package (api/jobs.go),
// and back: GET /v1/jobs (JobListStub), GET /v1/job/:id (Job), POST /v1/jobs
// (JobRegisterResponse), POST /v1/job/:id/plan (JobPlanResponse) and
// DELETE /v1/job/:id (JobDeregisterResponse). The job's spec is Nomad's JSON
// job format (jobspec's jobToNomadJson, read back by jobFromNomadJson);
// csiplug's own data (allocs, deployment, cluster view, pending unmounts, a
// plan's per-alloc detail, a run's result) rides in `Csiplug`.
//
// csiplug has no evaluations: EvalID is "" in every answer (docs/nomad-api.md
// says what that means for `nomad job run`). It keeps no raft index per job,
// so CreateIndex, ModifyIndex, JobModifyIndex and EvalCreateIndex are left
// out (read as 0); the answer's X-Nomad-Index is the index to use.
import {
  ALLOC_UPDATES,
  jobFromNomadJson,
  jobToNomadJson,
  type AllocUpdate,
  type FieldChange,
  type GroupPlan,
  type JobPlan,
  type NomadJob,
  type PlannedAlloc,
  type ReplacementOrder,
  type UpdateStrategy,
} from '@csiplug/jobspec';
import type { ClusterJobView, DeploymentView, JobListView, JobStopView, JobView, PendingUnmountView, RunJobResult } from '../service';
import { msToUnixNano, unixNanoToMs } from './nomad-time';

/** api.TaskGroupSummary: a group's allocs by client status. */
export interface NomadTaskGroupSummary {
  Queued: number;
  Complete: number;
  Failed: number;
  Running: number;
  Starting: number;
  Lost: number;
  Unknown: number;
}

/** api.JobSummary (no Children: csiplug has no parameterized or periodic jobs). */
export interface NomadJobSummary {
  JobID: string;
  Namespace: string;
  Summary: Record<string, NomadTaskGroupSummary>;
}

/** What a job's view holds beyond Nomad's Job: csiplug's own, with its own names. */
export interface JobCsiplugExtras {
  deployment?: DeploymentView;
  cluster?: ClusterJobView;
  allocs: JobView['allocs'];
  volumeUnmountsPending?: PendingUnmountView[];
}

/** api.JobListStub (the fields csiplug knows), with the rest of the job's view in Csiplug. */
export interface NomadJobListStub {
  ID: string;
  ParentID: string;
  Name: string;
  Namespace: string;
  Datacenters: string[];
  Type: string;
  Priority: number;
  Periodic: boolean;
  ParameterizedJob: boolean;
  Stop: boolean;
  Status: JobView['status'];
  StatusDescription: string;
  JobSummary: NomadJobSummary;
  /** When the current version was submitted, Unix ns (JobView.submittedAt: derived where csiplug keeps no submit time). */
  SubmitTime: number;
  /** The stub has no Version in Nomad: here. Like Nomad's, no spec (its env, templates and auth stay out of a list). */
  Csiplug: JobCsiplugExtras & { version: number };
}

/** api.Job as GET /v1/job/:id answers it: the spec in Nomad's JSON job format with the server's fields csiplug knows. */
export interface NomadJobWithStatus extends NomadJob {
  Status: JobView['status'];
  Stop: boolean;
  Version: number;
  /** Unix ns; always sent (`nomad job status` reads it as a pointer it dereferences). */
  SubmitTime: number;
  Csiplug: JobCsiplugExtras;
}

/** structs.JobRegisterResponse; what the run did is csiplug's own. */
export interface NomadJobRegisterResponse {
  EvalID: string;
  Warnings: string;
  Csiplug: RunJobResult;
}

/** The stopped job in a deregister answer: what the stop did, csiplug's names, no spec. */
export type JobStopExtras = JobCsiplugExtras & Pick<JobView, 'id' | 'name' | 'status' | 'version' | 'submittedAt'>;

/** structs.JobDeregisterResponse; the stopped job's allocs (no spec) in Csiplug, absent when there was no such job. */
export interface NomadJobDeregisterResponse {
  EvalID: string;
  Csiplug?: { job: JobStopExtras };
}

/** api.FieldDiff */
export interface NomadFieldDiff {
  Type: NomadDiffType;
  Name: string;
  Old: string;
  New: string;
  Annotations: string[] | null;
}

export type NomadDiffType = 'None' | 'Added' | 'Deleted' | 'Edited';

/** api.TaskGroupDiff: csiplug's changed fields all in Fields (named as a jobspec names them), none split into Objects or Tasks. */
export interface NomadTaskGroupDiff {
  Type: NomadDiffType;
  Name: string;
  Fields: NomadFieldDiff[] | null;
  Objects: null;
  Tasks: null;
  Updates: Record<string, number>;
}

/** api.JobDiff */
export interface NomadJobDiff {
  Type: NomadDiffType;
  ID: string;
  Fields: NomadFieldDiff[] | null;
  Objects: null;
  TaskGroups: NomadTaskGroupDiff[];
}

/** api.DesiredUpdates */
export interface NomadDesiredUpdates {
  Ignore: number;
  Place: number;
  Migrate: number;
  Stop: number;
  InPlaceUpdate: number;
  DestructiveUpdate: number;
  Canary: number;
  Preemptions: number;
}

/** A group's plan beyond its TaskGroupDiff: csiplug's own. */
export interface GroupPlanExtras {
  name: string;
  count: GroupPlan['count'];
  allocs: PlannedAlloc[];
  order?: ReplacementOrder;
  update?: UpdateStrategy;
}

/** structs.JobPlanResponse (no evaluations, no placement metrics, no periodic launch); the plan's detail in Csiplug. */
export interface NomadJobPlanResponse {
  Diff: NomadJobDiff;
  Annotations: { DesiredTGUpdates: Record<string, NomadDesiredUpdates> };
  FailedTGAllocs: null;
  CreatedEvals: null;
  Warnings: string;
  Csiplug: { changed: boolean; version: JobPlan['version']; underway?: JobPlan['underway']; groups: GroupPlanExtras[] };
}

// ---- jobs ------------------------------------------------------------------------------

const emptySummary = (): NomadTaskGroupSummary => ({ Queued: 0, Complete: 0, Failed: 0, Running: 0, Starting: 0, Lost: 0, Unknown: 0 });

const SUMMARY_FIELD: Record<JobView['allocs'][number]['clientStatus'], keyof NomadTaskGroupSummary> = {
  pending: 'Starting',
  running: 'Running',
  complete: 'Complete',
  failed: 'Failed',
};

/** Nomad's JobSummary: each group of the spec, its allocs counted by client status (as Nomad counts them, whatever their desired status). */
export function jobSummaryOf(view: JobView): NomadJobSummary {
  const summary: Record<string, NomadTaskGroupSummary> = {};
  for (const g of view.job.groups) summary[g.name] = emptySummary();
  for (const a of view.allocs) (summary[a.group] ??= emptySummary())[SUMMARY_FIELD[a.clientStatus]] += 1;
  return { JobID: view.id, Namespace: 'default', Summary: summary };
}

/** Nomad's Job.Stop: the job was stopped (job stop without -purge), which here is every alloc told to stop. */
export const isStopped = (view: JobStopView): boolean =>
  view.cluster ? view.cluster.stopped : view.allocs.length > 0 && view.allocs.every((a) => a.desiredStatus === 'stop');

function extrasOf(view: JobStopView): JobCsiplugExtras {
  return {
    ...(view.deployment ? { deployment: view.deployment } : {}),
    ...(view.cluster ? { cluster: view.cluster } : {}),
    allocs: view.allocs,
    ...(view.volumeUnmountsPending ? { volumeUnmountsPending: view.volumeUnmountsPending } : {}),
  };
}

/** The spec of an answer, read leniently (a reader of answers: fields a newer agent adds are not refused). */
const specOfAnswer = (spec: NomadJob) => jobFromNomadJson(spec, 'Job', { lenient: true });

/** The view's fields beyond its spec, as the Csiplug extras carry them. */
function restOf(extras: JobCsiplugExtras): Omit<JobView, 'id' | 'name' | 'status' | 'version' | 'job' | 'submittedAt'> {
  return {
    ...(extras.deployment ? { deployment: extras.deployment } : {}),
    ...(extras.cluster ? { cluster: extras.cluster } : {}),
    allocs: extras.allocs,
    ...(extras.volumeUnmountsPending ? { volumeUnmountsPending: extras.volumeUnmountsPending } : {}),
  };
}

const submitTimeOf = (view: Pick<JobView, 'submittedAt'>): number => (view.submittedAt === undefined ? 0 : msToUnixNano(view.submittedAt));
const submittedAtOf = (ns: number): Pick<JobView, 'submittedAt'> => (ns > 0 ? { submittedAt: unixNanoToMs(ns) } : {});

function viewOf(spec: NomadJob, status: JobView['status'], version: number, submitTime: number, extras: JobCsiplugExtras): JobView {
  const job = specOfAnswer(spec);
  return { id: job.id, name: job.name, status, version, job, ...submittedAtOf(submitTime), ...restOf(extras) };
}

/** GET /v1/job/:id: Nomad's Job. */
export function encodeJob(view: JobView): NomadJobWithStatus {
  return {
    ...jobToNomadJson(view.job),
    Status: view.status,
    Stop: isStopped(view),
    Version: view.version,
    SubmitTime: submitTimeOf(view),
    Csiplug: extrasOf(view),
  };
}

/** Nomad's Job back into the job's view; the spec read as POST /v1/jobs reads it (the server's fields set aside first). */
export function decodeJob(wire: NomadJobWithStatus): JobView {
  const { Status, Stop: _stop, Version, SubmitTime, Csiplug, ...spec } = wire;
  return viewOf(spec, Status, Version, SubmitTime, Csiplug);
}

/** GET /v1/jobs: one JobListStub per job. */
export function encodeJobListStub(view: JobView): NomadJobListStub {
  const spec = jobToNomadJson(view.job);
  return {
    ID: view.id,
    ParentID: '',
    Name: view.name,
    Namespace: spec.Namespace,
    Datacenters: spec.Datacenters,
    Type: spec.Type,
    Priority: spec.Priority,
    Periodic: false,
    ParameterizedJob: false,
    Stop: isStopped(view),
    Status: view.status,
    StatusDescription: '',
    JobSummary: jobSummaryOf(view),
    SubmitTime: submitTimeOf(view),
    Csiplug: { ...extrasOf(view), version: view.version },
  };
}

/** A list entry: the job without its spec, its groups the JobSummary's (the spec's, and any an older version's allocs still hold). */
export function decodeJobListStub(wire: NomadJobListStub): JobListView {
  const { version, ...extras } = wire.Csiplug;
  return {
    id: wire.ID,
    name: wire.Name,
    status: wire.Status,
    version,
    ...submittedAtOf(wire.SubmitTime),
    groups: Object.keys(wire.JobSummary.Summary),
    ...restOf(extras),
  };
}

// ---- deployments -----------------------------------------------------------------------

/** api.DeploymentState (the fields csiplug knows: no canaries, no progress deadline). */
export interface NomadDeploymentState {
  PlacedCanaries: string[];
  Promoted: boolean;
  DesiredCanaries: number;
  DesiredTotal: number;
  PlacedAllocs: number;
  HealthyAllocs: number;
  UnhealthyAllocs: number;
}

/** api.Deployment; a revert's versions are csiplug's own. */
export interface NomadDeployment {
  ID: string;
  Namespace: string;
  JobID: string;
  JobVersion: number;
  IsMultiregion: boolean;
  TaskGroups: Record<string, NomadDeploymentState>;
  Status: DeploymentView['status'];
  StatusDescription: string;
  CreateTime: number;
  ModifyTime: number;
  Csiplug: { revertTo?: number; revertOf?: number };
}

/** GET /v1/job/:id/deployment: the job's latest deployment as Nomad's Deployment. */
export function encodeDeployment(jobId: string, d: DeploymentView): NomadDeployment {
  return {
    ID: d.id,
    Namespace: 'default',
    JobID: jobId,
    JobVersion: d.jobVersion,
    IsMultiregion: false,
    TaskGroups: Object.fromEntries(
      d.groups.map((g) => [
        g.name,
        {
          PlacedCanaries: [],
          Promoted: false,
          DesiredCanaries: 0,
          DesiredTotal: g.desired,
          PlacedAllocs: g.placed,
          HealthyAllocs: g.healthy,
          UnhealthyAllocs: g.unhealthy,
        },
      ]),
    ),
    Status: d.status,
    StatusDescription: d.description,
    CreateTime: msToUnixNano(d.createdAt),
    ModifyTime: msToUnixNano(d.updatedAt),
    Csiplug: {
      ...(d.revertTo !== undefined ? { revertTo: d.revertTo } : {}),
      ...(d.revertOf !== undefined ? { revertOf: d.revertOf } : {}),
    },
  };
}

export function decodeDeployment(wire: NomadDeployment): DeploymentView {
  return {
    id: wire.ID,
    jobVersion: wire.JobVersion,
    status: wire.Status,
    description: wire.StatusDescription,
    createdAt: unixNanoToMs(wire.CreateTime),
    updatedAt: unixNanoToMs(wire.ModifyTime),
    ...(wire.Csiplug.revertTo !== undefined ? { revertTo: wire.Csiplug.revertTo } : {}),
    ...(wire.Csiplug.revertOf !== undefined ? { revertOf: wire.Csiplug.revertOf } : {}),
    groups: Object.entries(wire.TaskGroups).map(([name, g]) => ({
      name,
      desired: g.DesiredTotal,
      placed: g.PlacedAllocs,
      healthy: g.HealthyAllocs,
      unhealthy: g.UnhealthyAllocs,
    })),
  };
}

// ---- run and stop ----------------------------------------------------------------------

export function encodeJobRegisterResponse(result: RunJobResult): NomadJobRegisterResponse {
  return { EvalID: '', Warnings: '', Csiplug: result };
}

export function decodeJobRegisterResponse(wire: NomadJobRegisterResponse): RunJobResult {
  return wire.Csiplug;
}

/** DELETE /v1/job/:id: Nomad's answer; no view for a job that was not there (Nomad's deregister of an unknown job succeeds). */
export function encodeJobDeregisterResponse(view: JobStopView | undefined): NomadJobDeregisterResponse {
  if (!view) return { EvalID: '' };
  const { id, name, status, version } = view;
  return {
    EvalID: '',
    Csiplug: {
      job: { id, name, status, version, ...(view.submittedAt !== undefined ? { submittedAt: view.submittedAt } : {}), ...extrasOf(view) },
    },
  };
}

/** The stopped job; undefined when the agent had no such job (nothing was stopped). */
export function decodeJobDeregisterResponse(wire: NomadJobDeregisterResponse): JobStopView | undefined {
  const job = wire.Csiplug?.job;
  if (!job) return undefined;
  if (typeof job.id !== 'string' || !Array.isArray(job.allocs)) throw new Error('Csiplug.job needs an id and a list of allocs');
  const { id, name, status, version } = job;
  return { id, name, status, version, ...(job.submittedAt !== undefined ? { submittedAt: job.submittedAt } : {}), ...restOf(job) };
}

// ---- plan ------------------------------------------------------------------------------

const DIFF_TYPE: Record<FieldChange['kind'], NomadDiffType> = { added: 'Added', removed: 'Deleted', changed: 'Edited' };
const GROUP_DIFF_TYPE: Record<GroupPlan['change'], NomadDiffType> = { added: 'Added', removed: 'Deleted', edited: 'Edited', none: 'None' };
/** scheduler/annotate.go's annotations for what a change forces. */
const EFFECT_ANNOTATION: Record<FieldChange['effect'], string> = {
  destructive: 'forces create/destroy update',
  'in-place': 'forces in-place update',
};
/** scheduler/annotate.go's names of the updates a group's allocs get. */
const UPDATE_NAME: Record<AllocUpdate, string> = {
  create: 'create',
  destroy: 'destroy',
  'create/destroy': 'create/destroy update',
  'in-place': 'in-place update',
  ignore: 'ignore',
};

const invert = <K extends string, V extends string>(m: Record<K, V>): Record<V, K> =>
  Object.fromEntries(Object.entries(m).map(([k, v]) => [v, k])) as Record<V, K>;
const CHANGE_KIND = invert(DIFF_TYPE);
const GROUP_CHANGE = invert(GROUP_DIFF_TYPE);
const ANNOTATION_EFFECT = invert(EFFECT_ANNOTATION);
const UPDATE_OF_NAME = invert(UPDATE_NAME);

function encodeField(c: FieldChange): NomadFieldDiff {
  return { Type: DIFF_TYPE[c.kind], Name: c.field, Old: c.old ?? '', New: c.new ?? '', Annotations: [EFFECT_ANNOTATION[c.effect]] };
}

function decodeField(d: NomadFieldDiff): FieldChange {
  const kind = CHANGE_KIND[d.Type as Exclude<NomadDiffType, 'None'>];
  const effect = ANNOTATION_EFFECT[d.Annotations?.[0] ?? ''] ?? 'destructive';
  return {
    field: d.Name,
    kind,
    ...(kind !== 'added' ? { old: d.Old } : {}),
    ...(kind !== 'removed' ? { new: d.New } : {}),
    effect,
  };
}

const fieldList = (fields: FieldChange[]): NomadFieldDiff[] | null => (fields.length ? fields.map(encodeField) : null);

function desiredUpdates(u: GroupPlan['updates']): NomadDesiredUpdates {
  return {
    Ignore: u.ignore,
    Place: u.create,
    Migrate: 0,
    Stop: u.destroy,
    InPlaceUpdate: u['in-place'],
    DestructiveUpdate: u['create/destroy'],
    Canary: 0,
    Preemptions: 0,
  };
}

/** Whether the spec itself changed (a plan may move allocs of an unchanged spec: a failed one replaced). */
const specChanged = (plan: JobPlan): boolean =>
  plan.version.from !== plan.version.to || plan.fields.length > 0 || plan.groups.some((g) => g.change !== 'none');

/** The job field Nomad's diff gives a stopped job that a plan would start again (structs.Job's Stop, true → false). */
const RESTART_FIELD: NomadFieldDiff = { Type: 'Edited', Name: 'Stop', Old: 'true', New: 'false', Annotations: null };

/**
 * POST /v1/job/:id/plan: Nomad's JobPlanResponse, with Diff always given (csiplug's plan always has it). `stopped`: the
 * job is stopped now, so a plan that places allocs starts it again, an edit (Stop true → false) as Nomad's diff says.
 */
export function encodeJobPlanResponse(plan: JobPlan, options: { stopped?: boolean } = {}): NomadJobPlanResponse {
  const restarts = options.stopped === true && plan.groups.some((g) => g.updates.create > 0);
  const diffType: NomadDiffType = plan.version.from === undefined ? 'Added' : specChanged(plan) || restarts ? 'Edited' : 'None';
  const fields = fieldList(plan.fields);
  return {
    Diff: {
      Type: diffType,
      ID: plan.jobId,
      Fields: restarts ? [RESTART_FIELD, ...(fields ?? [])] : fields,
      Objects: null,
      TaskGroups: plan.groups.map((g) => ({
        Type: GROUP_DIFF_TYPE[g.change],
        Name: g.name,
        Fields: fieldList(g.fields),
        Objects: null,
        Tasks: null,
        Updates: Object.fromEntries(Object.entries(g.updates).flatMap(([k, n]) => (n > 0 ? [[UPDATE_NAME[k as AllocUpdate], n]] : []))),
      })),
    },
    Annotations: { DesiredTGUpdates: Object.fromEntries(plan.groups.map((g) => [g.name, desiredUpdates(g.updates)])) },
    FailedTGAllocs: null,
    CreatedEvals: null,
    Warnings: '',
    Csiplug: {
      changed: plan.changed,
      version: plan.version,
      ...(plan.underway ? { underway: plan.underway } : {}),
      groups: plan.groups.map((g) => ({
        name: g.name,
        count: g.count,
        allocs: g.allocs,
        ...(g.order ? { order: g.order } : {}),
        ...(g.update ? { update: g.update } : {}),
      })),
    },
  };
}

export function decodeJobPlanResponse(wire: NomadJobPlanResponse): JobPlan {
  const diffs = new Map(wire.Diff.TaskGroups.map((d) => [d.Name, d]));
  const groups = wire.Csiplug.groups.map((extras): GroupPlan => {
    const diff = diffs.get(extras.name);
    const updates = Object.fromEntries(ALLOC_UPDATES.map((u) => [u, 0])) as Record<AllocUpdate, number>;
    for (const [name, n] of Object.entries(diff?.Updates ?? {})) {
      const update = UPDATE_OF_NAME[name];
      if (update) updates[update] = n;
    }
    return {
      name: extras.name,
      change: diff ? GROUP_CHANGE[diff.Type] : 'none',
      count: extras.count,
      fields: (diff?.Fields ?? []).map(decodeField),
      updates,
      allocs: extras.allocs,
      ...(extras.order ? { order: extras.order } : {}),
      ...(extras.update ? { update: extras.update } : {}),
    };
  });
  return {
    jobId: wire.Diff.ID,
    changed: wire.Csiplug.changed,
    version: wire.Csiplug.version,
    // The Stop field is the plan's restart of a stopped job, not a change of csiplug's spec (its allocs say what starts).
    fields: (wire.Diff.Fields ?? []).filter((f) => f.Name !== RESTART_FIELD.Name).map(decodeField),
    groups,
    ...(wire.Csiplug.underway ? { underway: wire.Csiplug.underway } : {}),
  };
}
