// The job routes: list, run, plan, parse, read, the job's allocs, stop, its
// summary, its (no) evaluations, its latest deployment. Answers in Nomad's shapes (JobListStub, Job,
// JobRegisterResponse, JobPlanResponse, JobDeregisterResponse, Deployment:
// wire/job-wire.ts).
// Jobs come in Nomad's JSON job format, in Nomad's request bodies
// (JobRegisterRequest, JobPlanRequest, JobsParseRequest), read by jobspec's
// nomad-json; bodies are validated in full before the service is called
// (see http-api.ts).
import {
  type JobSpec,
  jobToNomadJson,
  parseJobspec,
  readJobPlanRequest,
  readJobRegisterRequest,
  readJobsParseRequest,
} from '@csiplug/jobspec';
import { ApiError } from '../api-error';
import { boolParam, goBoolParam } from '../route-params';
import type { AgentService, RunJobResult } from '../service';
import { encodeAllocStub } from '../wire/alloc-wire';
import { allocNode } from './alloc-routes';
import {
  encodeDeployment,
  encodeJob,
  encodeJobDeregisterResponse,
  encodeJobListStub,
  encodeJobPlanResponse,
  encodeJobRegisterResponse,
  isStopped,
  jobSummaryOf,
} from '../wire/job-wire';
import { type Handler, type Lookups, type RouteTable, addEach } from './route-context';

export function addJobRoutes(r: RouteTable, s: AgentService, find: Lookups): void {
  // ?prefix=: Nomad's PrefixList (`nomad job status ID` looks the id up by prefix first).
  r.add('GET', '/v1/jobs', ({ query }) => {
    const prefix = query.get('prefix') ?? '';
    return { body: s.listJobs().flatMap((j) => (j.id.startsWith(prefix) ? [encodeJobListStub(j)] : [])) };
  });
  const runJob: Handler = async (ctx) => {
    const { job, stop } = readJobRegisterRequest(await ctx.json());
    if (stop) return { body: encodeJobRegisterResponse(registerStopped(s, job)) };
    // ?queue=true: csiplug's own (Nomad's register has no such flag): place allocs that must wait for a held write claim.
    return { body: encodeJobRegisterResponse(await s.runJob(job, { queue: boolParam(ctx.query, 'queue') })) };
  };
  addEach(r, ['POST', 'PUT'], '/v1/jobs', runJob);
  const planJob: Handler = async (ctx) => {
    // Diff is taken and the answer is the same either way: csiplug's plan always lists what changes.
    const { job } = readJobPlanRequest(await ctx.json());
    if (job.id !== ctx.params.id)
      throw ApiError.badRequest(`the job id in the path ("${ctx.params.id}") does not match the id in the body ("${job.id}")`);
    const stored = s.getJob(job.id);
    return { body: encodeJobPlanResponse(s.planJob(job), { stopped: stored !== undefined && isStopped(stored) }) };
  };
  addEach(r, ['POST', 'PUT'], '/v1/job/:id/plan', planJob);
  // Nomad's Parse Job: the HCL read and checked as job run reads it, answered as the Job in Nomad's JSON. csiplug's
  // reader fills in every default, so the answer is the canonical job whether or not Canonicalize asks for it.
  r.add('POST', '/v1/jobs/parse', async (ctx) => {
    const { jobHCL } = readJobsParseRequest(await ctx.json());
    return { body: jobToNomadJson(await parseJobspec(jobHCL, 'JobHCL.hcl')) };
  });
  r.add('GET', '/v1/job/:id', ({ params }) => ({ body: encodeJob(find.job(params.id!)) }));
  r.add('GET', '/v1/job/:id/allocations', ({ params }) => {
    const job = find.job(params.id!);
    const node = allocNode(s);
    return { body: s.listAllocs().flatMap((a) => (a.jobId === job.id ? [encodeAllocStub(a, node)] : [])) };
  });
  // Nomad's Job.Deregister of a job it does not have succeeds with no EvalID (Terraform's destroy after the job vanished).
  r.add('DELETE', '/v1/job/:id', async ({ params, query }) => {
    const purge = goBoolParam(query, 'purge');
    const job = s.getJob(params.id!);
    return { body: encodeJobDeregisterResponse(job && (await s.stopJob(job.id, { purge }))) };
  });
  r.add('GET', '/v1/job/:id/summary', ({ params }) => ({ body: jobSummaryOf(find.job(params.id!)) }));
  // csiplug has no evaluations (a run is placed as it is registered): a job's list of them is empty, as Nomad's is for a
  // job it does not have.
  r.add('GET', '/v1/job/:id/evaluations', () => ({ body: [] }));
  // Nomad's latest deployment (null when the job has none) and the job's deployments: csiplug keeps the latest alone.
  r.add('GET', '/v1/job/:id/deployment', ({ params }) => {
    const job = find.job(params.id!);
    return { body: job.deployment ? encodeDeployment(job.id, job.deployment) : null };
  });
  // [] for a job csiplug does not have, as Nomad answers.
  r.add('GET', '/v1/job/:id/deployments', ({ params }) => {
    const job = s.getJob(params.id!);
    return { body: job?.deployment ? [encodeDeployment(job.id, job.deployment)] : [] };
  });
}

/**
 * A register with Stop true (a job read after job stop, sent back as it is). Nomad registers the job stopped; csiplug
 * registers a job to run it, so it takes Stop true only where that changes nothing: the job stopped here already, with
 * the same spec (answered as unchanged, nothing runs). Anything else is refused, saying how to start or stop it.
 */
function registerStopped(s: AgentService, job: JobSpec): RunJobResult {
  const stored = s.getJob(job.id);
  const same =
    stored !== undefined && isStopped(stored) && JSON.stringify(jobToNomadJson(stored.job)) === JSON.stringify(jobToNomadJson(job));
  if (!stored || !same) {
    throw ApiError.badRequest(
      `job "${job.id}" has Stop true, which csiplug takes only for the job as it is stopped now (nothing to do): ` +
        `set Stop to false to start it (as nomad job start does), or use job stop to stop it`,
    );
  }
  const version = { from: stored.version, to: stored.version };
  return {
    jobId: job.id,
    allocIds: [],
    replaced: true,
    unchanged: true,
    version: stored.version,
    plan: { jobId: job.id, changed: false, version, fields: [], groups: [] },
  };
}
