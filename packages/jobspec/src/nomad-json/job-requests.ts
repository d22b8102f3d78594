// The bodies of Nomad's job write requests, as its API takes them:
// JobRegisterRequest (PUT/POST /v1/jobs), JobPlanRequest (/v1/job/:id/plan)
// and JobsParseRequest (/v1/jobs/parse), from hashicorp/nomad api/jobs.go.
// Nomad's Go client sends the embedded WriteRequest's fields (Region,
// Namespace, SecretID) in every write body, so they are taken too. A field
// whose Nomad meaning csiplug cannot keep is refused, never dropped unsaid.
import type { JobSpec } from '../model';
import { jobFromNomadJson } from './from-nomad-json';
import { type FieldRules, NomadObject, NomadProblems, READ, SERVER, isPlainObject, unsupported, zeroOr } from './nomad-reader';

const REMOVE = 'leave it out';

/** api.WriteRequest: the region and namespace csiplug is (one of each), and the token, which the X-Nomad-Token header carries. */
const WRITE_REQUEST_FIELDS: FieldRules = {
  Region: unsupported(`csiplug has one region ("global"); ${REMOVE}`, zeroOr(['global'])),
  Namespace: unsupported(`csiplug has no namespaces ("default" only); ${REMOVE}`, zeroOr(['default'])),
  // Nomad's HTTP agent takes the token from the request's header or query, never from this field.
  SecretID: SERVER,
};

const REGISTER_FIELDS: FieldRules = {
  Job: READ,
  // "For reference only, not considered for the actual scheduling of Job" (Nomad's API docs).
  Submission: SERVER,
  EnforceIndex: unsupported(`csiplug does not check a job's modify index on register yet: send the job without EnforceIndex`),
  JobModifyIndex: SERVER,
  // No Sentinel policies here: there is nothing to override, which is what Nomad does with none.
  PolicyOverride: READ,
  PreserveCounts: unsupported(`csiplug runs each group at the count the job gives; send the counts you want, and ${REMOVE}`),
  PreserveResources: unsupported(`csiplug runs each task with the resources the job gives; ${REMOVE}`),
  // csiplug has no evaluation queue to order: every registration is acted on at once.
  EvalPriority: SERVER,
  ...WRITE_REQUEST_FIELDS,
};

const PLAN_FIELDS: FieldRules = { Job: READ, Diff: READ, PolicyOverride: READ, ...WRITE_REQUEST_FIELDS };

const PARSE_FIELDS: FieldRules = {
  JobHCL: READ,
  Canonicalize: READ,
  Variables: unsupported(`csiplug's jobspecs have no HCL variables: write the values into the jobspec; ${REMOVE}`),
  VariableFlags: unsupported(`csiplug's jobspecs have no HCL variables: write the values into the jobspec; ${REMOVE}`),
  HCLv1: unsupported(`csiplug reads HCL2 jobspecs only; ${REMOVE}`),
};

/**
 * Reads a request body that carries a `Job`: the body's own fields first
 * (`read` reads the ones the route uses), then the job. Problems are thrown
 * as one ValidationError or ValidationProblems: the body's, else the job's.
 */
function readWithJob<T>(value: unknown, rules: FieldRules, read: (body: NomadObject) => T): { job: JobSpec; fields: T } {
  const problems = new NomadProblems();
  const body = NomadObject.read(value, '', problems, rules);
  const fields = body ? read(body) : undefined;
  if (body && !body.has('Job'))
    body.report('Job', 'is required: the job in Nomad\'s JSON job format, like { "Job": { "ID": "web", "TaskGroups": [ … ] } }');
  problems.throwIfAny();
  return { job: jobFromNomadJson(body!.raw('Job'), 'Job'), fields: fields! };
}

/**
 * PUT/POST /v1/jobs: Nomad's JobRegisterRequest. `stop` is the Job's Stop: a
 * job read with GET /v1/job/:id after job stop carries Stop true; the route
 * decides (csiplug registers a job to run it), the job is read without it.
 */
export function readJobRegisterRequest(value: unknown): { job: JobSpec; stop: boolean } {
  const sent = isPlainObject(value) && isPlainObject(value.Job) ? value.Job : undefined;
  const stop = sent?.Stop === true;
  const body = stop ? { ...(value as Record<string, unknown>), Job: { ...sent, Stop: false } } : value;
  const { job } = readWithJob(body, REGISTER_FIELDS, (b) => b.bool('PolicyOverride'));
  return { job, stop };
}

/** PUT/POST /v1/job/:id/plan: Nomad's JobPlanRequest. `diff` is Nomad's Diff (default false). */
export function readJobPlanRequest(value: unknown): { job: JobSpec; diff: boolean } {
  const { job, fields } = readWithJob(value, PLAN_FIELDS, (body) => {
    body.bool('PolicyOverride');
    return body.bool('Diff') ?? false;
  });
  return { job, diff: fields };
}

/** POST /v1/jobs/parse: Nomad's JobsParseRequest. */
export function readJobsParseRequest(value: unknown): { jobHCL: string; canonicalize: boolean } {
  const problems = new NomadProblems();
  const body = NomadObject.read(value, '', problems, PARSE_FIELDS);
  const jobHCL = body?.string('JobHCL');
  if (body && (jobHCL === undefined || jobHCL.trim() === '')) body.report('JobHCL', "is required: the jobspec's HCL text");
  const canonicalize = body?.bool('Canonicalize') ?? false;
  problems.throwIfAny();
  return { jobHCL: jobHCL!, canonicalize };
}
