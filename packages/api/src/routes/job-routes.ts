// The job routes: list, run, plan, read, the job's allocs, stop. Bodies are
// validated in full before the service is called (see http-api.ts).
import { validateJob } from '@csiplug/jobspec';
import { ApiError } from '../api-error';
import { unwrapEnvelope } from '../request-body';
import { boolParam, withoutDiffFlag } from '../route-params';
import type { AgentService } from '../service';
import { type Handler, type Lookups, type RouteTable, addEach } from './route-context';

export function addJobRoutes(r: RouteTable, s: AgentService, find: Lookups): void {
  r.add('GET', '/v1/jobs', () => ({ body: s.listJobs() }));
  const runJob: Handler = async (ctx) => {
    const job = validateJob(unwrapEnvelope(await ctx.json(), 'Job'));
    return { body: await s.runJob(job) };
  };
  addEach(r, ['POST', 'PUT'], '/v1/jobs', runJob);
  const planJob: Handler = async (ctx) => {
    const job = validateJob(unwrapEnvelope(withoutDiffFlag(await ctx.json()), 'Job'));
    if (job.id !== ctx.params.id)
      throw ApiError.badRequest(`the job id in the path ("${ctx.params.id}") does not match the id in the body ("${job.id}")`);
    return { body: s.planJob(job) };
  };
  addEach(r, ['POST', 'PUT'], '/v1/job/:id/plan', planJob);
  r.add('GET', '/v1/job/:id', ({ params }) => ({ body: find.job(params.id!) }));
  r.add('GET', '/v1/job/:id/allocations', ({ params }) => {
    const job = find.job(params.id!);
    return { body: s.listAllocs().filter((a) => a.jobId === job.id) };
  });
  r.add('DELETE', '/v1/job/:id', async ({ params, query }) => {
    const purge = boolParam(query, 'purge');
    const job = find.job(params.id!);
    return { body: await s.stopJob(job.id, { purge }) };
  });
}
