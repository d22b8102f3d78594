// ApiClient reading the job routes' answers as a reader of answers, over a
// real socket: a list entry it cannot read fails with BadResponse naming the
// entry (not a bare TypeError), a Job answer with fields it does not know is
// read, and a stop whose answer it cannot read is not reported as a failed stop.
import { ApiClient, ApiErrorCode, HttpApi } from '@csiplug/api';
import { FakeAgentService } from '@csiplug/api/testing';
import { MemoryLogger } from '@csiplug/core';
import { jobToNomadJson, parseJobspec } from '@csiplug/jobspec';
import * as http from 'http';
import type { AddressInfo } from 'net';

const JOB =
  'job "web" {\n  group "app" {\n    count = 1\n    task "t" {\n      driver = "exec"\n      config { command = "/bin/true" }\n    }\n  }\n}\n';

/** The real API over the fake service, with one job run: the answers to tamper with. */
async function realAnswers(): Promise<{ list: unknown[]; job: Record<string, unknown> }> {
  const api = new HttpApi(new FakeAgentService(), { bindAddr: '127.0.0.1', port: 0, logger: new MemoryLogger() });
  const { port } = await api.listen();
  try {
    const client = new ApiClient({ address: `http://127.0.0.1:${port}` });
    await client.runJob(jobToNomadJson(await parseJobspec(JOB, 'web.nomad.hcl')));
    const get = async (path: string) => (await fetch(`http://127.0.0.1:${port}${path}`)).json();
    return { list: (await get('/v1/jobs')) as unknown[], job: (await get('/v1/job/web')) as Record<string, unknown> };
  } finally {
    await api.dispose();
  }
}

/** A server answering each `METHOD path` with the given body (200). */
async function answering(bodies: Record<string, unknown>): Promise<{ client: ApiClient; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const body = bodies[`${req.method} ${req.url}`];
    res.writeHead(body === undefined ? 404 : 200, { 'content-type': 'application/json' }).end(JSON.stringify(body ?? 'not found'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    client: new ApiClient({ address: `http://127.0.0.1:${port}` }),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe('ApiClient reads job answers as answers', () => {
  it('lists jobs without their specs; an entry it cannot read is a BadResponse naming the entry', async () => {
    const { list } = await realAnswers();
    const agent = await answering({ 'GET /v1/jobs': list, 'GET /v1/job/x': null });
    try {
      const jobs = await agent.client.listJobs();
      expect(jobs.map((j) => [j.id, j.groups])).toEqual([['web', ['app']]]);
      expect(jobs[0]).not.toHaveProperty('job');
    } finally {
      await agent.close();
    }
    const broken = await answering({ 'GET /v1/jobs': [...list, { ID: 'odd' }] });
    try {
      const err = await broken.client.listJobs().catch((e: unknown) => e);
      expect(err).toMatchObject({ code: ApiErrorCode.BadResponse, message: expect.stringContaining('entry 1 of the job list') });
    } finally {
      await broken.close();
    }
  });

  it('reads a Job answer with fields it does not know; one it cannot read is a BadResponse', async () => {
    const { job } = await realAnswers();
    const agent = await answering({
      'GET /v1/job/web': { ...job, SomeNewerField: { A: 1 }, Meta: { owner: 'ops' } },
      'GET /v1/job/odd': { ...job, ID: 42 },
    });
    try {
      expect((await agent.client.getJob('web')).job.groups.map((g) => g.name)).toEqual(['app']);
      await expect(agent.client.getJob('odd')).rejects.toMatchObject({ code: ApiErrorCode.BadResponse, status: 200 });
    } finally {
      await agent.close();
    }
  });

  it("reports a plan's or a run's answer it cannot read as a BadResponse naming the call", async () => {
    const agent = await answering({ 'POST /v1/job/web/plan': { Diff: null }, 'POST /v1/jobs': { EvalID: '' } });
    try {
      const job = jobToNomadJson(await parseJobspec(JOB, 'web.nomad.hcl'));
      await expect(agent.client.planJob(job)).rejects.toMatchObject({
        code: ApiErrorCode.BadResponse,
        message: expect.stringContaining('the plan of job "web"'),
      });
    } finally {
      await agent.close();
    }
  });

  it('does not report a stop that happened as failed because its answer could not be read', async () => {
    const agent = await answering({ 'DELETE /v1/job/web': { EvalID: '', Csiplug: { job: { id: 'web', allocs: 'many' } } } });
    try {
      const stopped = await agent.client.stopJob('web');
      expect(stopped).toMatchObject({ id: 'web', answerUnread: expect.stringContaining('allocs') });
    } finally {
      await agent.close();
    }
  });
});
