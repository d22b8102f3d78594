// The HTTP API over a real server on 127.0.0.1:0 and an in-memory service.
import { ConflictError, MemoryLogger } from '@csiplug/core';
import { FakeClock, flushMicrotasks } from '@csiplug/core/testing';
import * as http from 'http';
import type { AddressInfo } from 'net';
import { ApiClient } from './api-client';
import { FOLLOW_POLL_MS, HEARTBEAT_MS } from './alloc-logs';
import { ApiError } from './api-error';
import { FakeAgentService } from './testing';
import { HttpApi } from './http-api';
import { StatusPage } from './status-page';
import { nomadJob, raw, startApi, volumeBody, volumeDoc } from './testing';
import { volumeDocumentToNomad } from './wire/volume-wire';

/** A GET whose path is sent exactly as written (no client-side resolution of dots). */
function rawPath(base: string, path: string): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    http
      .get({ host: hostname, port, path }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on('error', reject);
  });
}

async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 10_000; i++) {
    if (cond()) return;
    await new Promise((r) => setImmediate(r));
  }
  throw new Error(`gave up waiting for ${what}`);
}

describe('HttpApi', () => {
  let fake: FakeAgentService;
  let api: HttpApi;
  let url: string;
  let client: ApiClient;

  beforeEach(async () => {
    fake = new FakeAgentService();
    fake.addPlugin({
      id: 'hostpath',
      node: { healthy: true, allocId: 'p1', description: 'node', version: '1.0.0', info: { nodeId: 'n1' } },
    });
    ({ api, url } = await startApi(fake));
    client = new ApiClient({ address: url });
  });

  afterEach(async () => {
    await api.dispose();
  });

  describe('server', () => {
    it('listens on a free port and says where', () => {
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(api.url).toBe(url);
    });

    it('dispose is idempotent and a disposed server refuses to listen again', async () => {
      await api.dispose();
      await api.dispose();
      await expect(api.listen()).rejects.toThrow(/already listening \(or was closed\)/);
      await expect(client.health()).rejects.toMatchObject({ status: 0, code: 'ECONNECT' });
    });

    it('dispose lets an in-flight request finish, then resolves', async () => {
      await client.runJob(nomadJob());
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const stopJob = fake.stopJob.bind(fake);
      fake.stopJob = async (id, options) => {
        await gate;
        return stopJob(id, options);
      };
      const stopping = client.stopJob('web');
      await until(() => fake.calls.length === 1 && (api as unknown as { inflight: number }).inflight === 1, 'the request to arrive');
      let closed = false;
      const closing = api.dispose().then(() => (closed = true));
      await flushMicrotasks();
      expect(closed).toBe(false);
      release();
      expect((await stopping).status).toBe('dead');
      await closing;
      expect(closed).toBe(true);
    });

    it('refuses an empty ACL token', () => {
      expect(() => new HttpApi(fake, { bindAddr: '127.0.0.1', port: 0, aclToken: '', logger: new MemoryLogger() })).toThrow(
        /may not be empty/,
      );
    });

    it('reports a port in use', async () => {
      const port = Number(new URL(url).port);
      const other = new HttpApi(fake, { bindAddr: '127.0.0.1', port, logger: new MemoryLogger() });
      await expect(other.listen()).rejects.toMatchObject({ code: 'ELISTEN' });
      await other.dispose();
    });
  });

  describe('routing', () => {
    it('answers 404 with a JSON error for unknown paths', async () => {
      const r = await raw(url, 'GET', '/v1/nope');
      expect(r.status).toBe(404);
      // As Nomad answers errors: the message alone, as plain text; csiplug's code in a header of its own.
      expect(r.headers['content-type']).toBe('text/plain; charset=utf-8');
      expect(r.text).toBe('no such API path: GET /v1/nope');
      expect(r.headers['x-csiplug-error-code']).toBe('ENOT_FOUND');
      expect(r.headers['x-content-type-options']).toBe('nosniff');
    });

    it("gives the API client the error's status, message and code from the plain-text answer", async () => {
      await expect(new ApiClient({ address: url }).getJob('nope')).rejects.toMatchObject({
        status: 404,
        code: 'ENOT_FOUND',
        message: 'job "nope" not found',
      });
    });

    it("names an error answer that is not the agent's (no code header) as such, with its first words", async () => {
      const foreign = http.createServer((_req, res) => {
        res.writeHead(502, { 'Content-Type': 'text/html' });
        res.end('<h1>Bad Gateway</h1>');
      });
      await new Promise<void>((resolve) => foreign.listen(0, '127.0.0.1', resolve));
      try {
        const { port } = foreign.address() as AddressInfo;
        await expect(new ApiClient({ address: `http://127.0.0.1:${port}` }).listJobs()).rejects.toMatchObject({
          status: 502,
          code: 'EBAD_RESPONSE',
          message: 'the agent answered 502 Bad Gateway: <h1>Bad Gateway</h1>',
        });
      } finally {
        await new Promise<void>((resolve) => foreign.close(() => resolve()));
      }
    });

    it("reads an alloc answer that is not a csiplug agent's (no Csiplug) as a bad answer, not a TypeError", async () => {
      // A Nomad server's answers: Nomad's shapes, no Csiplug.
      const foreign = http.createServer((req, res) => {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        const stub = { ID: 'a1', Name: 'web.g[0]', JobID: 'web', TaskGroup: 'g', CreateTime: 0, TaskStates: {} };
        res.end(JSON.stringify(req.url?.endsWith('/allocations') ? [stub] : { ...stub, Job: { ID: 'web' } }));
      });
      await new Promise<void>((resolve) => foreign.listen(0, '127.0.0.1', resolve));
      try {
        const { port } = foreign.address() as AddressInfo;
        const nomad = new ApiClient({ address: `http://127.0.0.1:${port}` });
        for (const call of [() => nomad.listAllocs(), () => nomad.getAlloc('a1'), () => nomad.jobAllocations('web')]) {
          const err = await call().catch((e: unknown) => e);
          expect(err).toBeInstanceOf(ApiError);
          expect(err).toMatchObject({ code: 'EBAD_RESPONSE', message: expect.stringMatching(/allocation a1 has no Csiplug field/) });
        }
      } finally {
        await new Promise<void>((resolve) => foreign.close(() => resolve()));
      }
    });

    it('answers 405 with Allow for a known path and the wrong method', async () => {
      const r = await raw(url, 'PATCH', '/v1/jobs');
      expect(r.status).toBe(405);
      expect(r.headers.allow).toBe('GET, POST, PUT');
      expect(r.code).toBe('EMETHOD_NOT_ALLOWED');
      expect((await raw(url, 'POST', '/v1/allocations')).status).toBe(405);
      expect((await raw(url, 'DELETE', '/v1/agent/health')).status).toBe(405);
    });

    it('tolerates a trailing slash and decodes ids segment by segment', async () => {
      expect((await raw(url, 'GET', '/v1/jobs/')).status).toBe(200);
      const r = await raw(url, 'GET', '/v1/job/a%2Fb');
      expect(r.status).toBe(404);
      expect(r.error).toBe('job "a/b" not found');
      expect((await raw(url, 'GET', '/v1/job/%E0%A4%A')).status).toBe(400);
      // A control character is never part of an id: a bad request, not a missing job.
      for (const bad of ['a%00b', 'a%0Ab', '%7F', 'a%1Bb']) {
        const r = await raw(url, 'GET', `/v1/job/${bad}`);
        expect(r.status).toBe(400);
        expect(r.error).toMatch(/decodes to control characters/);
      }
    });

    it('turns a failing service call into a 500 that names the failure', async () => {
      fake.nextError = new Error('disk on fire');
      const r = await raw(url, 'GET', '/v1/jobs');
      expect(r.status).toBe(500);
      expect({ error: r.error, code: r.code }).toEqual({ error: 'disk on fire', code: 'EINTERNAL' });
    });
  });

  describe('health', () => {
    it('GET /v1/agent/health', async () => {
      const h = await client.health();
      expect(h).toMatchObject({ ok: true, nodeId: 'fake-node', plugins: { healthy: 1, total: 1 } });
    });

    it("answers Nomad's AgentHealthResponse: client and server parts, 500 with the same body when unhealthy", async () => {
      const ok = await raw(url, 'GET', '/v1/agent/health');
      expect(ok.status).toBe(200);
      expect(ok.json).toMatchObject({
        client: { ok: true, message: 'ok' },
        server: { ok: true, message: 'ok' },
        Csiplug: { nodeId: 'fake-node' },
      });
      fake.healthy = false;
      const sick = await raw(url, 'GET', '/v1/agent/health');
      expect(sick.status).toBe(500);
      expect(sick.json).toMatchObject({ client: { ok: false }, server: { ok: false } });
      expect((await client.health()).ok).toBe(false);
    });

    it('an unknown ?type= is ignored as Nomad does: alone it answers 200 with neither part', async () => {
      const other = await raw(url, 'GET', '/v1/agent/health?type=bogus');
      expect(other.status).toBe(200);
      expect(other.json).not.toHaveProperty('client');
      expect(other.json).not.toHaveProperty('server');
      const withClient = await raw(url, 'GET', '/v1/agent/health?type=bogus&type=client');
      expect(withClient.status).toBe(200);
      expect(withClient.json).toMatchObject({ client: { ok: true } });
      expect(withClient.json).not.toHaveProperty('server');
    });

    it("GET /v1/agent/self: Nomad's AgentSelf; /v1/status/leader and peers: this agent's API address", async () => {
      const self = await raw(url, 'GET', '/v1/agent/self');
      expect(self.status).toBe(200);
      expect(self.json).toMatchObject({
        config: { NodeName: expect.any(String), Version: { Version: expect.any(String) } },
        member: { Status: 'alive' },
      });
      const host = new URL(url).host;
      expect(JSON.parse((await raw(url, 'GET', '/v1/status/leader')).text)).toBe(host);
      expect(JSON.parse((await raw(url, 'GET', '/v1/status/peers')).text)).toEqual([host]);
    });
  });

  describe('nodes', () => {
    it("GET /v1/node/self and /v1/node/:id answer Nomad's Node; another node is a 404; the client reads the view back", async () => {
      const self = await raw(url, 'GET', '/v1/node/self');
      expect(self.json).toMatchObject({
        ID: 'fake-node',
        Status: 'ready',
        SchedulingEligibility: 'eligible',
        Drivers: { exec: { Detected: true } },
      });
      expect((await raw(url, 'GET', '/v1/node/fake-node')).json).toEqual(self.json);
      const other = await raw(url, 'GET', '/v1/node/elsewhere');
      expect(other.status).toBe(404);
      expect(other.error).toMatch(/node "elsewhere" not found/);
      expect(await client.node()).toEqual(fake.node());
    });

    it("GET /v1/nodes answers Nomad's []NodeListStub; PUT /v1/node/:id/purge outside a cluster is a 404", async () => {
      const list = await raw(url, 'GET', '/v1/nodes');
      expect(JSON.parse(list.text)).toEqual([
        expect.objectContaining({
          ID: 'fake-node',
          Name: 'fake-node',
          Status: 'ready',
          Drivers: { exec: { Detected: true }, raw_exec: { Detected: true } },
        }),
      ]);
      expect(await client.listNodes()).toEqual(await fake.listNodes());
      await expect(client.purgeNode('gone')).rejects.toMatchObject({ status: 404 });
      expect(fake.calls).toContain('purgeNode gone');
    });
  });

  describe('jobs', () => {
    it('runs, lists, shows and stops a job', async () => {
      await client.registerVolume(volumeDoc());
      const run = await client.runJob(nomadJob('web', 2));
      expect(run.jobId).toBe('web');
      expect(run.allocIds).toHaveLength(2);
      expect(run.replaced).toBe(false);

      expect((await client.listJobs()).map((j) => j.id)).toEqual(['web']);
      const job = await client.getJob('web');
      expect(job.status).toBe('running');
      expect(job.job.groups[0]!.tasks[0]!.config.command).toBe('/bin/sleep');
      expect((await client.jobAllocations('web')).map((a) => a.id).sort()).toEqual([...run.allocIds].sort());

      const stopped = await client.stopJob('web');
      expect(stopped.status).toBe('dead');
      expect(fake.calls).toEqual(['registerVolume vol1', 'runJob web', 'stopJob web']);
      await client.stopJob('web', { purge: true });
      expect(fake.calls[3]).toBe('stopJob web purge');
      await expect(client.getJob('web')).rejects.toMatchObject({ status: 404, code: 'ENOT_FOUND', message: 'job "web" not found' });
    });

    it("answers in Nomad's shapes: JobListStub, Job, JobSummary, Deployment, JobDeregisterResponse", async () => {
      await client.registerVolume(volumeDoc());
      await client.runJob(nomadJob('web', 2));
      const list = await raw(url, 'GET', '/v1/jobs');
      expect(list.json).toEqual([
        expect.objectContaining({
          ID: 'web',
          Name: 'web',
          Type: 'service',
          Status: 'running',
          Stop: false,
          SubmitTime: expect.any(Number),
          JobSummary: { JobID: 'web', Namespace: 'default', Summary: { app: expect.objectContaining({ Running: 2, Failed: 0 }) } },
        }),
      ]);
      const job = await raw(url, 'GET', '/v1/job/web');
      expect(job.json).toMatchObject({ ID: 'web', Status: 'running', Stop: false, Version: 0, TaskGroups: [{ Name: 'app', Count: 2 }] });
      expect(job.json).toHaveProperty('Csiplug.allocs');
      // Nomad's PrefixList, the job's summary, its evaluations (csiplug has none).
      expect(((await raw(url, 'GET', '/v1/jobs?prefix=we')).json as unknown as { ID: string }[]).map((j) => j.ID)).toEqual(['web']);
      expect((await raw(url, 'GET', '/v1/jobs?prefix=x')).json).toEqual([]);
      expect((await raw(url, 'GET', '/v1/job/web/summary')).json).toMatchObject({ JobID: 'web', Summary: { app: { Running: 2 } } });
      expect((await raw(url, 'GET', '/v1/job/web/evaluations')).json).toEqual([]);
      // A job csiplug does not have: [] as Nomad answers (Terraform's destroy after the job vanished).
      expect((await raw(url, 'GET', '/v1/job/nope/evaluations')).json).toEqual([]);
      expect((await raw(url, 'GET', '/v1/job/nope/deployments')).json).toEqual([]);
      expect((list.json as unknown as Record<string, unknown>[])[0]!.Csiplug).not.toHaveProperty('job');
      // No deployment (the fake keeps none): Nomad answers null and an empty list.
      expect((await raw(url, 'GET', '/v1/job/web/deployment')).text.trim()).toBe('null');
      expect((await raw(url, 'GET', '/v1/job/web/deployments')).json).toEqual([]);
      await expect(client.jobDeployment('web')).resolves.toBeUndefined();
      const stop = await raw(url, 'DELETE', '/v1/job/web');
      expect(stop.json).toMatchObject({ EvalID: '', Csiplug: { job: { id: 'web', status: 'dead' } } });
      expect(stop.json).not.toHaveProperty('Csiplug.job.TaskGroups');
      // Nomad's Job.Deregister of a job it does not have succeeds, with no EvalID.
      const unknown = await raw(url, 'DELETE', '/v1/job/nope');
      expect([unknown.status, unknown.json]).toEqual([200, { EvalID: '' }]);
      await expect(client.stopJob('nope')).rejects.toMatchObject({ status: 404, code: 'ENOT_FOUND' });
    });

    it("passes ?queue=true on as the run's queue option, and answers a held write claim with 409 and its words", async () => {
      await client.runJob(nomadJob('queued'), { queue: true });
      expect((await raw(url, 'POST', '/v1/jobs?queue=maybe', { body: JSON.stringify({ Job: nomadJob('bad') }) })).status).toBe(400);
      const words =
        'job "web" was not run, nothing was placed: group "app" writes to volume "vol1" (single-node-writer: one writer at a time)';
      fake.nextError = new ConflictError(words);
      await expect(client.runJob(nomadJob())).rejects.toMatchObject({ status: 409, code: 'ECONFLICT', message: words });
      expect(fake.calls).toEqual(['runJob queued queue']);
    });

    it('accepts PUT, and refuses a bare job or csiplug\'s old jobspec document (Nomad\'s body is { "Job": … })', async () => {
      const r = await raw(url, 'PUT', '/v1/jobs', { body: JSON.stringify({ Job: nomadJob('put') }) });
      expect(r.status).toBe(200);
      // Nomad's JobRegisterResponse: no evaluation (csiplug has none), the run's result in Csiplug.
      expect(r.json).toMatchObject({ EvalID: '', Warnings: '', Csiplug: { jobId: 'put' } });
      const bare = await raw(url, 'PUT', '/v1/jobs', { body: JSON.stringify(nomadJob('bare')) });
      expect(bare.status).toBe(400);
      expect(bare.error).toMatch(/^ID is not a field csiplug knows here \(the fields it reads: Job, PolicyOverride\)/);
      const old = await raw(url, 'POST', '/v1/jobs', { body: JSON.stringify({ Job: { job: { old: { group: {} } } } }) });
      expect(old.status).toBe(400);
      expect(old.error).toMatch(/^Job\.job is not a field csiplug knows here/);
      expect(fake.calls).toEqual(['runJob put']);
    });

    it("parses HCL into the job in Nomad's JSON job format: POST /v1/jobs/parse", async () => {
      const hcl =
        'job "parsed" {\n  group "app" {\n    task "main" {\n      driver = "raw_exec"\n      config {\n        command = "/bin/true"\n      }\n      kill_timeout = "7s"\n    }\n  }\n}\n';
      const job = await client.parseJob(hcl);
      expect(job).toMatchObject({
        ID: 'parsed',
        Name: 'parsed',
        Type: 'service',
        TaskGroups: [
          {
            Name: 'app',
            Count: 1,
            Tasks: [{ Name: 'main', Driver: 'raw_exec', KillTimeout: 7_000_000_000, Config: { command: '/bin/true' } }],
          },
        ],
      });
      // What parse answers runs as it is.
      expect((await client.runJob(job)).jobId).toBe('parsed');
      // Nomad's documented sample payload: the HCL is read, and its group without tasks refused.
      const r = await raw(url, 'POST', '/v1/jobs/parse', {
        body: JSON.stringify({ JobHCL: 'job "example" {\n  type = "service"\n  group "cache" {}\n}', Canonicalize: true }),
      });
      expect(r.status).toBe(400);
      expect(r.error).toBe('JobHCL.hcl: job "example" group "cache": needs at least one task');
      expect(fake.calls).toEqual(['runJob parsed']);
    });

    it('answers 404 when stopping an unknown job, and 400 for a bad purge value', async () => {
      await expect(client.stopJob('ghost')).rejects.toMatchObject({ status: 404 });
      await client.runJob(nomadJob());
      expect((await raw(url, 'DELETE', '/v1/job/web?purge=maybe')).status).toBe(400);
      expect(fake.calls).toEqual(['runJob web']);
      // Go's strconv.ParseBool, as Nomad reads purge: an empty value is false, "True" is true.
      expect((await raw(url, 'DELETE', '/v1/job/web?purge=')).status).toBe(200);
      expect((await raw(url, 'DELETE', '/v1/job/web?purge=True')).status).toBe(200);
      expect(fake.calls).toEqual(['runJob web', 'stopJob web', 'stopJob web purge']);
    });

    it('refuses an invalid jobspec with 400 and runs nothing', async () => {
      const r = await raw(url, 'POST', '/v1/jobs', { body: JSON.stringify({ Job: nomadJob('web', 0) }) });
      expect(r.status).toBe(400);
      expect(r.code).toBe('EINVALID');
      expect(r.error).toMatch(/count/);
      expect(fake.calls).toEqual([]);
    });

    it('refuses unknown fields with 400 naming them', async () => {
      let r = await raw(url, 'POST', '/v1/jobs', { body: JSON.stringify({ Job: nomadJob(), Extra: 1 }) });
      expect(r.status).toBe(400);
      expect(r.error).toMatch(/^Extra is not a field csiplug knows here/);
      r = await raw(url, 'POST', '/v1/jobs', { body: JSON.stringify({ Job: { ...nomadJob(), Priority: 10 } }) });
      expect(r.status).toBe(400);
      expect(r.error).toMatch(/^Job\.Priority is not supported: /);
      r = await raw(url, 'POST', '/v1/jobs', { body: JSON.stringify({ Job: nomadJob('web', 1, { Sprd: true }) }) });
      expect(r.status).toBe(400);
      expect(r.error).toMatch(/^Job\.TaskGroups\[0\]\.Sprd is not a field csiplug knows here/);
      // A field Nomad has and csiplug does not: named by its path, with what to do instead.
      r = await raw(url, 'POST', '/v1/jobs', {
        body: JSON.stringify({ Job: nomadJob('web', 1, { Spreads: [{ Attribute: '${node.datacenter}' }] }) }),
      });
      expect(r.status).toBe(400);
      expect(r.error).toMatch(/^Job\.TaskGroups\[0\]\.Spreads is not supported: .*remove it/);
      expect(fake.calls).toEqual([]);
    });

    it('plans a run without doing it: POST /v1/job/:id/plan', async () => {
      await client.registerVolume(volumeDoc());
      const fresh = await client.planJob(nomadJob('web', 2));
      expect(fresh).toMatchObject({
        jobId: 'web',
        changed: true,
        version: { to: 0 },
        groups: [{ name: 'app', change: 'added', updates: { create: 2 } }],
      });
      await client.runJob(nomadJob('web', 2));
      expect(await client.planJob(nomadJob('web', 2))).toMatchObject({
        changed: false,
        version: { from: 0, to: 0 },
        groups: [{ updates: { ignore: 2 } }],
      });
      const smaller = await client.planJob(nomadJob('web', 1));
      expect(smaller).toMatchObject({
        changed: true,
        version: { from: 0, to: 1 },
        groups: [{ count: { from: 2, to: 1 }, updates: { destroy: 1, 'in-place': 1 } }],
      });
      // Nomad's body shape, with "Diff", and PUT; nothing was run by any of these.
      const r = await raw(url, 'PUT', '/v1/job/web/plan', { body: JSON.stringify({ Job: nomadJob('web', 2), Diff: true }) });
      expect(r.status).toBe(200);
      // Nomad's JobPlanResponse: nothing in the spec changed, each alloc is left alone.
      expect(r.json).toMatchObject({
        Diff: { Type: 'None', ID: 'web', TaskGroups: [{ Type: 'None', Name: 'app', Updates: { ignore: 2 } }] },
        Annotations: { DesiredTGUpdates: { app: { Ignore: 2, Place: 0, Stop: 0, InPlaceUpdate: 0, DestructiveUpdate: 0 } } },
        Csiplug: { changed: false },
      });
      expect(fake.calls).toEqual(['registerVolume vol1', 'runJob web']);
    });

    it('refuses a plan whose path names another job, or a bad Diff, with 400', async () => {
      let r = await raw(url, 'POST', '/v1/job/other/plan', { body: JSON.stringify({ Job: nomadJob('web') }) });
      expect(r.status).toBe(400);
      expect(r.error).toBe('the job id in the path ("other") does not match the id in the body ("web")');
      r = await raw(url, 'POST', '/v1/job/web/plan', { body: JSON.stringify({ Job: nomadJob('web'), Diff: 'yes' }) });
      expect(r.status).toBe(400);
      expect(r.error).toBe('Diff must be true or false (got "yes")');
      r = await raw(url, 'POST', '/v1/job/web/plan', { body: JSON.stringify({ Job: nomadJob('web', 0) }) });
      expect(r.status).toBe(400);
      expect(r.error).toMatch(/count/);
      expect(fake.calls).toEqual([]);
    });

    it('refuses bad JSON, an empty body and a non-object with 400', async () => {
      for (const body of ['{"Job": ', '', '   ', '[1,2]', '"job"', 'null']) {
        const r = await raw(url, 'POST', '/v1/jobs', { body });
        expect(r.status).toBe(400);
        expect(typeof r.error).toBe('string');
      }
      expect((await raw(url, 'POST', '/v1/jobs', { body: '{"Job": ' })).code).toBe('EBAD_JSON');
      expect(fake.calls).toEqual([]);
    });
  });

  describe('oversized bodies', () => {
    let small: { api: HttpApi; url: string };
    beforeEach(async () => {
      small = await startApi(fake, { maxBodyBytes: 2048 });
    });
    afterEach(async () => {
      await small.api.dispose();
    });

    const big = () => JSON.stringify({ Job: nomadJob('big', 1, { Meta: { x: 'x'.repeat(300_000) } }) });

    it('refuses a body whose Content-Length is over the limit with 400', async () => {
      const r = await raw(small.url, 'POST', '/v1/jobs', { body: big() });
      expect(r.status).toBe(400);
      expect({ error: r.error, code: r.code }).toEqual({
        error: 'the request body is larger than the limit of 2048 bytes',
        code: 'EBODY_TOO_LARGE',
      });
      expect(fake.calls).toEqual([]);
    });

    it('refuses a chunked body that grows over the limit with 400', async () => {
      const r = await raw(small.url, 'PUT', '/v1/volume/csi/vol1', {
        body: JSON.stringify(volumeBody('vol1', { context: { pad: 'y'.repeat(200_000) } })),
        chunked: true,
      });
      expect(r.status).toBe(400);
      expect(r.code).toBe('EBODY_TOO_LARGE');
      expect(fake.calls).toEqual([]);
      expect(fake.volumes.size).toBe(0);
    });

    it('answers a 2 MiB body with 400 every time, over a kept-alive connection', async () => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        const body = JSON.stringify({ Job: { pad: 'x'.repeat(2 * 1024 * 1024) } });
        for (let i = 0; i < 5; i++) {
          const status = await new Promise<number>((resolve, reject) => {
            const req = http.request(
              `${small.url}/v1/jobs`,
              { method: 'POST', agent, headers: { 'Content-Type': 'application/json' } },
              (res) => {
                res.resume();
                res.on('end', () => resolve(res.statusCode!));
              },
            );
            req.on('error', reject);
            req.end(body);
          });
          expect(status).toBe(400);
        }
      } finally {
        agent.destroy();
      }
      expect(fake.calls).toEqual([]);
    });

    it('still serves the next request', async () => {
      await raw(small.url, 'POST', '/v1/jobs', { body: big() });
      const r = await raw(small.url, 'POST', '/v1/jobs', { body: JSON.stringify({ Job: nomadJob('ok') }) });
      expect(r.status).toBe(200);
    });

    it('the client reports the 400 too', async () => {
      const c = new ApiClient({ address: small.url });
      const err = await c.runJob(JSON.parse(big()).Job).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ApiError);
      expect(err).toMatchObject({ status: 400, code: 'EBODY_TOO_LARGE' });
    });
  });

  describe('allocations', () => {
    it('lists and shows allocs; 404 for unknown ones', async () => {
      await client.registerVolume(volumeDoc());
      const run = await client.runJob(nomadJob());
      const allocs = await client.listAllocs();
      expect(allocs.map((a) => a.id)).toEqual(run.allocIds);
      const alloc = await client.getAlloc(run.allocIds[0]!);
      expect(alloc.tasks.main!.state).toBe('running');
      // Nomad's shapes on the wire: AllocationListStub in the list, Allocation for one.
      const [stub] = (await raw(url, 'GET', '/v1/allocations')).json as unknown as Record<string, unknown>[];
      expect(stub).toMatchObject({ ID: alloc.id, JobID: alloc.jobId, TaskGroup: alloc.group, ClientStatus: 'running', JobType: 'service' });
      expect(stub!.TaskStates).toMatchObject({ main: { State: 'running' } });
      const one = (await raw(url, 'GET', `/v1/allocation/${alloc.id}`)).json as Record<string, unknown>;
      expect(one).toMatchObject({
        ID: alloc.id,
        Namespace: 'default',
        Job: { ID: alloc.jobId },
        TaskStates: { main: { State: 'running' } },
      });
      expect(await client.jobAllocations(alloc.jobId)).toEqual(allocs);
      const byPrefix = (await raw(url, 'GET', `/v1/allocations?prefix=${alloc.id.slice(0, 4)}`)).json as unknown as { ID: string }[];
      expect(byPrefix.map((a) => a.ID)).toEqual(allocs.filter((a) => a.id.startsWith(alloc.id.slice(0, 4))).map((a) => a.id));
      expect((await raw(url, 'GET', '/v1/allocations?prefix=zz')).json).toEqual([]);
      expect(alloc.volumes.data!.volumeId).toBe('vol1');
      await expect(client.getAlloc('nope')).rejects.toMatchObject({ status: 404, message: 'alloc "nope" not found' });
    });

    it('serves task logs by stream and offset', async () => {
      const { allocIds } = await client.runJob(nomadJob());
      const id = allocIds[0]!;
      fake.logs.set(`${id}/main/stdout`, 'hello\nworld\n');
      fake.logs.set(`${id}/main/stderr`, 'oops\n');
      expect(await client.allocLogs(id, 'main')).toEqual({
        allocId: id,
        task: 'main',
        stream: 'stdout',
        offset: 0,
        nextOffset: 12,
        size: 12,
        data: 'hello\nworld\n',
      });
      // On the wire: Nomad's StreamFrames, one JSON object a line, Offset right after the frame's bytes, Data in base64.
      const framed = await raw(url, 'GET', `/v1/client/fs/logs/${id}?task=main&type=stdout&offset=6`);
      expect(framed.headers['content-type']).toBe('application/json');
      const frames = framed.text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { Offset: number; Data: string });
      expect(frames).toEqual([{ Offset: 12, Data: Buffer.from('world\n').toString('base64') }]);
      expect((await client.allocLogs(id, 'main', { offset: 6 })).data).toBe('world\n');
      expect((await client.allocLogs(id, 'main', { stream: 'stderr' })).data).toBe('oops\n');
      // Nomad's codes and texts (client/fs_endpoint.go): a task the alloc has not is a 400, one not started yet a 404.
      await expect(client.allocLogs(id, 'other')).rejects.toMatchObject({
        status: 400,
        message: expect.stringMatching(/^unknown task name "other"/),
      });
      delete fake.getAlloc(id)!.tasks.main!.startedAt;
      await expect(client.allocLogs(id, 'main')).rejects.toMatchObject({
        status: 404,
        message: 'task "main" not started yet. No logs available',
      });
      fake.getAlloc(id)!.tasks.main!.startedAt = 1;
      await expect(client.allocLogs('nope', 'main')).rejects.toMatchObject({ status: 404 });
      expect((await raw(url, 'GET', `/v1/client/fs/logs/${id}?task=main&type=both`)).status).toBe(400);
      expect((await raw(url, 'GET', `/v1/client/fs/logs/${id}?task=main&type=stdout&offset=abc`)).status).toBe(400);
      // Offsets as Nomad reads them: negative counts from the other end, past either end stops there; past int64 is a 400.
      const plainAt = async (q: string) => (await raw(url, 'GET', `/v1/client/fs/logs/${id}?task=main&type=stdout&plain=true&${q}`)).text;
      expect(await plainAt('offset=-6')).toBe('world\n');
      expect(await plainAt('origin=end&offset=-6')).toBe('world\n');
      expect(await plainAt('offset=-100')).toBe('hello\nworld\n');
      expect(await plainAt('offset=9223372036854775807')).toBe('');
      expect(await plainAt('origin=end&offset=9223372036854775807')).toBe('hello\nworld\n');
      expect((await raw(url, 'GET', `/v1/client/fs/logs/${id}?task=main&type=stdout&offset=9223372036854775808`)).status).toBe(400);
      // The old csiplug-shaped route is gone (one dialect).
      expect((await raw(url, 'GET', `/v1/allocation/${id}/logs/main`)).status).toBe(404);
    });

    it('reads a byte range from the start or back from the end, at most limit bytes (64 KiB by default)', async () => {
      const id = (await client.runJob(nomadJob())).allocIds[0]!;
      const log = Buffer.alloc(200 * 1024, 'x');
      log.write('HEAD', 0);
      log.write('TAIL', log.length - 4);
      fake.logs.set(`${id}/main/stdout`, log);
      const first = await client.allocLogs(id, 'main');
      expect(first).toMatchObject({ offset: 0, nextOffset: 64 * 1024, size: log.length });
      expect(first.data.length).toBe(64 * 1024);
      expect(first.data.startsWith('HEAD')).toBe(true);
      expect(await client.allocLogs(id, 'main', { origin: 'end', offset: 4 })).toMatchObject({
        offset: log.length - 4,
        nextOffset: log.length,
        data: 'TAIL',
      });
      expect(await client.allocLogs(id, 'main', { origin: 'end', offset: 6, limit: 3 })).toMatchObject({
        offset: log.length - 6,
        nextOffset: log.length - 3,
        data: 'xxT',
      });
      expect(await client.allocLogs(id, 'main', { offset: 1, limit: 3 })).toMatchObject({ offset: 1, nextOffset: 4, data: 'EAD' });
      // Past either end: an empty answer at the end, or everything from the start.
      expect(await client.allocLogs(id, 'main', { offset: log.length + 10 })).toMatchObject({
        offset: log.length,
        nextOffset: log.length,
        data: '',
      });
      expect(await client.allocLogs(id, 'main', { origin: 'end', offset: log.length + 10, limit: 4 })).toMatchObject({
        offset: 0,
        data: 'HEAD',
      });
      expect((await client.allocLogs(id, 'main', { limit: 4 * 1024 * 1024 })).data.length).toBe(log.length);
      expect(await client.allocLogs(id, 'main', { stream: 'stderr' })).toMatchObject({ offset: 0, nextOffset: 0, size: 0, data: '' });
    });

    it('refuses bad log parameters with a 400 that names them', async () => {
      const id = (await client.runJob(nomadJob())).allocIds[0]!;
      const logs = (q: string) => raw(url, 'GET', `/v1/client/fs/logs/${id}?task=main&type=stdout&${q}`);
      expect((await raw(url, 'GET', `/v1/client/fs/logs/${id}?type=stdout`)).error).toMatch(/^must provide task name/);
      expect((await raw(url, 'GET', `/v1/client/fs/logs/${id}?task=main`)).error).toMatch(/^must provide log type \(stdout\/stderr\)/);
      expect((await logs('follow=true&limit=5')).error).toMatch(/^query parameter limit cannot be used with follow=true/);
      expect((await logs('follow=perhaps')).error).toBe(
        'query parameter follow must be a boolean: true or false (or 1, t, T, TRUE, True, 0, f, F, FALSE, False); got "perhaps"',
      );
      expect((await logs('origin=middle')).error).toBe('query parameter origin must be one of start, end (got "middle")');
      expect((await logs('limit=lots')).error).toBe('query parameter limit must be a whole number of at least 0 (got "lots")');
      expect((await logs('limit=0')).error).toMatch(/limit must be at least 1 byte/);
      expect((await logs('plain=maybe')).error).toMatch(/^query parameter plain must be a boolean: true or false/);
      // Go's strconv.ParseBool, as Nomad reads them; empty is false (python-nomad sends follow=False&plain=False).
      expect((await logs('follow=False&plain=False')).headers['content-type']).toBe('application/json');
      expect((await logs('follow=&plain=')).headers['content-type']).toBe('application/json');
      expect((await logs('follow=f&plain=T')).headers['content-type']).toMatch(/^text\/plain/);
      expect((await logs('plain=TRUE')).headers['content-type']).toMatch(/^text\/plain/);
      expect((await logs('plain=1')).headers['content-type']).toMatch(/^text\/plain/);
      // Frames are streamed, so the server takes any limit; the client's text answer is what is capped (it holds it).
      expect((await logs(`limit=${4 * 1024 * 1024 + 1}`)).status).toBe(200);
      expect((await logs(`limit=${4 * 1024 * 1024 + 1}&plain=true`)).status).toBe(200);
      await expect(client.allocLogs(id, 'main', { limit: 4 * 1024 * 1024 + 1 })).rejects.toMatchObject({
        status: 400,
        message: expect.stringMatching(/at most 4194304 bytes \(4 MiB\), not 4194305/),
      });
      expect((await raw(url, 'GET', `/v1/client/fs/logs/${id}?task=nope&type=stdout&plain=true`)).status).toBe(400);
    });

    it('streams the raw bytes with plain=true, with the offset and file size in headers', async () => {
      const id = (await client.runJob(nomadJob())).allocIds[0]!;
      const bytes = Buffer.concat([Buffer.from('héllo ✓\n'), Buffer.from([0xff, 0x00, 0xc3])]);
      fake.logs.set(`${id}/main/stdout`, bytes);
      const r = await raw(url, 'GET', `/v1/client/fs/logs/${id}?task=main&type=stdout&plain=true&origin=end&offset=5`);
      expect(r.status).toBe(200);
      expect(r.headers['content-type']).toBe('text/plain; charset=utf-8');
      expect(r.headers['x-csiplug-log-offset']).toBe(String(bytes.length - 5));
      expect(r.headers['x-csiplug-log-size']).toBe(String(bytes.length));
      const got = await client.allocLogStream(id, 'main', { offset: 1, limit: 6 });
      expect(got).toMatchObject({ offset: 1, size: bytes.length });
      const chunks: Buffer[] = [];
      for await (const c of got.stream) chunks.push(c as Buffer);
      expect(Buffer.concat(chunks)).toEqual(bytes.subarray(1, 7));
      const whole: Buffer[] = [];
      for await (const c of (await client.allocLogStream(id, 'main')).stream) whole.push(c as Buffer);
      expect(Buffer.concat(whole)).toEqual(bytes);
      await expect(client.allocLogStream(id, 'other')).rejects.toMatchObject({ status: 400 });
    });

    /** A followed log's frames as they come, and how its answer went: head seen, ended cleanly, or cut. */
    function followFrames(base: string, id: string) {
      const got = { head: false, ended: false, cut: false, frames: [] as { Offset?: number; Data?: string; FileEvent?: string }[] };
      const req = http.get(`${base}/v1/client/fs/logs/${id}?task=main&type=stdout&follow=true`, (r) => {
        got.head = true;
        r.setEncoding('utf8');
        let buf = '';
        r.on('data', (c: string) => {
          buf += c;
          const lines = buf.split('\n');
          buf = lines.pop()!;
          got.frames.push(...lines.map((l) => JSON.parse(l) as (typeof got.frames)[number]));
        });
        r.on('end', () => (got.ended = r.complete));
        r.on('aborted', () => (got.cut = true));
        r.on('error', () => (got.cut = true));
      });
      req.on('error', () => (got.cut = true));
      const text = () => Buffer.concat(got.frames.map((f) => Buffer.from(f.Data ?? '', 'base64'))).toString('utf8');
      const heartbeats = () => got.frames.filter((f) => Object.keys(f).length === 0).length;
      return { got, req, text, heartbeats };
    }

    /** Waits until the follow loop sleeps before its next look, then lets that look happen. */
    async function nextLook(clock: FakeClock, more = true): Promise<void> {
      const sleeping = () => until(() => clock.nextDue() === clock.now() + FOLLOW_POLL_MS, 'the follow loop to wait for its next look');
      await sleeping();
      await clock.advance(FOLLOW_POLL_MS);
      if (more) await sleeping();
    }

    it('follow=true sends its head at once, heartbeats when idle, what the task writes next, and a shorter log again from its start', async () => {
      const clock = new FakeClock();
      const followed = await startApi(fake, { clock });
      try {
        const id = (await client.runJob(nomadJob())).allocIds[0]!;
        const key = `${id}/main/stdout`;
        // Nothing written yet: the head goes all the same (Nomad's CLI waits for it), then a heartbeat each idle second.
        const { got, req, text, heartbeats } = followFrames(followed.url, id);
        await until(() => got.head, 'the head of the followed answer');
        for (let i = 0; i < HEARTBEAT_MS / FOLLOW_POLL_MS; i++) await nextLook(clock);
        await until(() => heartbeats() === 1, 'a heartbeat');
        expect(got.frames).toEqual([{}]);
        fake.logs.set(key, 'one\n');
        await nextLook(clock);
        await until(() => text() === 'one\n', 'the first frame');
        // Busy: no heartbeat after a frame until a second without one.
        await nextLook(clock);
        expect(heartbeats()).toBe(1);
        fake.logs.set(key, 'one\ntwo\n');
        await nextLook(clock);
        await until(() => text() === 'one\ntwo\n', 'the frame of what was written next');
        expect(got.frames.at(-1)).toMatchObject({ Offset: 8 });
        // Shorter than where the reader was, in the same file: Nomad's "file truncated", then the log again from its start.
        fake.logs.set(key, 'x\n');
        await nextLook(clock);
        await until(() => text() === 'one\ntwo\nx\n', 'the log read again');
        expect(got.frames.map((f) => f.FileEvent).filter(Boolean)).toEqual(['file truncated']);
        req.destroy();
      } finally {
        await followed.api.dispose();
      }
    });

    it('follow=true stays open after the alloc ended (as Nomad: a clean end makes its CLI read again), until the alloc is purged', async () => {
      const clock = new FakeClock();
      const followed = await startApi(fake, { clock });
      try {
        const id = (await client.runJob(nomadJob())).allocIds[0]!;
        const key = `${id}/main/stdout`;
        fake.logs.set(key, 'one\n');
        const { got, text, heartbeats } = followFrames(followed.url, id);
        await until(() => text() === 'one\n', 'the first frame');
        const jobId = fake.getAlloc(id)!.jobId;
        await client.stopJob(jobId);
        fake.logs.set(key, 'one\nlast\n');
        await nextLook(clock);
        await until(() => text() === 'one\nlast\n', 'the last bytes');
        for (let i = 0; i < 8; i++) await nextLook(clock);
        await until(() => heartbeats() >= 2, 'heartbeats after the alloc ended');
        expect(got.ended || got.cut).toBe(false);
        // Purged: nothing is left to read, and the answer ends cleanly.
        await client.stopJob(jobId, { purge: true });
        await nextLook(clock, false);
        await until(() => got.ended, 'the followed answer to end once the alloc is gone');
        expect(got.cut).toBe(false);
      } finally {
        await followed.api.dispose();
      }
    });

    it('follow=true reads a rotated log to the end of the old file, then the new one, without "file truncated"', async () => {
      const clock = new FakeClock();
      const followed = await startApi(fake, { clock });
      try {
        const id = (await client.runJob(nomadJob())).allocIds[0]!;
        const key = `${id}/main/stdout`;
        fake.logs.set(key, 'one\n');
        fake.logFileIds.set(key, 'first');
        const { got, req, text } = followFrames(followed.url, id);
        await until(() => text() === 'one\n', 'the first frame');
        // Written after the last look, then rotated (stdout.log → stdout.log.1), then the new file written: nothing is lost.
        fake.logs.set(key, 'one\ntwo\n');
        fake.rotateLog(key);
        fake.logs.set(key, 'three\n');
        await nextLook(clock);
        await until(() => text() === 'one\ntwo\nthree\n', 'the rest of the old file, then the new one');
        expect(got.frames.filter((f) => f.FileEvent)).toEqual([]);
        expect(got.frames.map((f) => f.Offset)).toEqual([4, 8, 6]);
        req.destroy();
      } finally {
        await followed.api.dispose();
      }
    });

    it('follow=true ends cleanly when the API closes', async () => {
      const clock = new FakeClock();
      const followed = await startApi(fake, { clock });
      const id = (await client.runJob(nomadJob())).allocIds[0]!;
      fake.logs.set(`${id}/main/stdout`, 'one\n');
      const { got, text } = followFrames(followed.url, id);
      await until(() => text() === 'one\n', 'the first frame');
      await followed.api.dispose();
      await until(() => got.ended || got.cut, 'the followed answer to end');
      expect(got).toMatchObject({ ended: true, cut: false });
    });

    it('follow=true stops reading when its reader goes', async () => {
      const clock = new FakeClock();
      const followed = await startApi(fake, { clock });
      try {
        const id = (await client.runJob(nomadJob())).allocIds[0]!;
        fake.logs.set(`${id}/main/stdout`, 'one\n');
        let got = '';
        const req = http.get(`${followed.url}/v1/client/fs/logs/${id}?task=main&type=stdout&follow=true&plain=true`, (r) => {
          r.setEncoding('utf8');
          r.on('data', (c: string) => (got += c));
        });
        await until(() => got === 'one\n', 'the first bytes');
        req.destroy();
        await until(() => clock.pendingTimers === 0, 'the follow loop to stop');
      } finally {
        await followed.api.dispose();
      }
    });

    it('as text (allocLogs over StreamFrames), never splits a character: offsets stay in bytes and a reader going on from nextOffset loses nothing', async () => {
      const id = (await client.runJob(nomadJob())).allocIds[0]!;
      const text = 'aé€😀b✓\nüñí€ode 😀😀 end';
      fake.logs.set(`${id}/main/stdout`, text);
      const size = Buffer.byteLength(text);
      for (const limit of [4, 5, 7]) {
        let offset = 0;
        let joined = '';
        while (offset < size) {
          const part = await client.allocLogs(id, 'main', { offset, limit });
          expect(part.offset).toBe(offset);
          expect(part.nextOffset).toBeGreaterThan(offset);
          expect(part.nextOffset - part.offset).toBe(Buffer.byteLength(part.data));
          joined += part.data;
          offset = part.nextOffset;
        }
        expect(joined).toBe(text);
      }
      // '€' is bytes 3..5: a range starting inside it skips to the next whole character, and says so.
      expect(await client.allocLogs(id, 'main', { offset: 4, limit: 6 })).toMatchObject({ offset: 6, nextOffset: 6 + 4, data: '😀' });
      expect(await client.allocLogs(id, 'main', { offset: 4, limit: 5 })).toMatchObject({ offset: 6, nextOffset: 6, data: '' });
      // A limit smaller than the character still moves on (the bytes show as U+FFFD).
      expect(await client.allocLogs(id, 'main', { offset: 3, limit: 1 })).toMatchObject({ offset: 3, nextOffset: 4, data: '\ufffd' });
      // At the end of the file, half a character is left for the next read: the task may be writing it.
      fake.logs.set(`${id}/main/stdout`, Buffer.from([0x61, 0x62, 0xe2, 0x82]));
      expect(await client.allocLogs(id, 'main')).toMatchObject({ offset: 0, nextOffset: 2, size: 4, data: 'ab' });
      expect(await client.allocLogs(id, 'main', { offset: 2 })).toMatchObject({ offset: 2, nextOffset: 2, data: '' });
    });
  });

  describe('plugins', () => {
    it('lists and shows plugins', async () => {
      expect((await client.listPlugins()).map((p) => p.id)).toEqual(['hostpath']);
      const p = await client.getPlugin('hostpath');
      expect(p).toEqual(fake.getPlugin('hostpath'));
      const wire = await raw(url, 'GET', '/v1/plugin/csi/hostpath');
      expect(wire.json).toMatchObject({ ID: 'hostpath', Nodes: { 'fake-node': { PluginID: 'hostpath', Healthy: true } } });
      expect(JSON.parse((await raw(url, 'GET', '/v1/plugins?type=csi')).text)).toEqual([
        expect.objectContaining({ ID: 'hostpath', NodesHealthy: 1 }),
      ]);
      await expect(client.getPlugin('nope')).rejects.toMatchObject({ status: 404, message: 'plugin "nope" not found' });
      expect((await raw(url, 'GET', '/v1/plugins?type=host')).status).toBe(400);
      expect((await raw(url, 'GET', '/v1/plugins')).status).toBe(200);
    });
  });

  describe('volumes', () => {
    it('registers, creates, lists, shows, deregisters and deletes', async () => {
      const reg = await client.registerVolume(volumeDoc('vol1'));
      expect(reg).toMatchObject({ id: 'vol1', externalId: 'ext-vol1', pluginId: 'hostpath', claims: [] });
      const created = await client.createVolume({
        id: 'vol2',
        type: 'csi',
        plugin_id: 'other',
        capability: { access_mode: 'single-node-writer', attachment_mode: 'file-system' },
        capacity_min: '10MiB',
      });
      expect(created).toMatchObject({ id: 'vol2', externalId: 'ext-vol2', capacityBytes: 10 * 1024 * 1024 });
      expect((await client.listVolumes()).map((v) => v.id)).toEqual(['vol1', 'vol2']);
      expect((await client.listVolumes({ pluginId: 'other' })).map((v) => v.id)).toEqual(['vol2']);
      expect((await client.getVolume('vol1')).externalId).toBe('ext-vol1');
      await client.deregisterVolume('vol1');
      await client.deleteVolume('vol2');
      expect(fake.calls).toEqual(['registerVolume vol1', 'createVolume vol2', 'deregisterVolume vol1', 'deleteVolume vol2']);
      await expect(client.getVolume('vol1')).rejects.toMatchObject({ status: 404 });
      await expect(client.deregisterVolume('vol1')).rejects.toMatchObject({ status: 404 });
      await expect(client.deleteVolume('vol1')).rejects.toMatchObject({ status: 404 });
    });

    it("answers in Nomad's shapes: CSIVolume with its claims, CSIVolumeListStub filtered by plugin_id and node_id, no body for a removal", async () => {
      await client.registerVolume(volumeDoc('vol1', { secrets: { password: 'hunter2' } }));
      const run = await client.runJob(nomadJob('web', 1));
      const allocId = run.allocIds[0]!;
      const one = await raw(url, 'GET', '/v1/volume/csi/vol1');
      expect(one.headers['x-nomad-index']).toMatch(/^\d+$/);
      expect(one.json).toMatchObject({
        ID: 'vol1',
        Namespace: 'default',
        ExternalID: 'ext-vol1',
        PluginID: 'hostpath',
        Secrets: null,
        RequestedCapabilities: [{ AccessMode: 'single-node-writer', AttachmentMode: 'file-system' }],
        ReadAllocs: {},
        WriteAllocs: { [allocId]: null },
        Allocations: [{ ID: allocId, NodeID: 'fake-node', JobID: 'web', TaskGroup: 'app', DesiredStatus: 'run' }],
        Csiplug: { claims: [{ allocId, accessMode: 'single-node-writer', attachmentMode: 'file-system' }] },
      });
      expect(typeof one.json!['CreateTime']).toBe('number');
      const ids = async (q: string) =>
        ((await raw(url, 'GET', `/v1/volumes?type=csi${q}`)).json as unknown as { ID: string }[]).map((v) => v.ID);
      await client.registerVolume(volumeDoc('vol2', { plugin_id: 'other' }));
      expect(await ids('')).toEqual(['vol1', 'vol2']);
      expect(await ids('&plugin_id=other')).toEqual(['vol2']);
      expect(await ids('&node_id=fake-node')).toEqual(['vol1']);
      expect(await ids('&node_id=elsewhere')).toEqual([]);
      expect(await ids('&prefix=vol2')).toEqual(['vol2']);
      const stub = ((await raw(url, 'GET', '/v1/volumes?plugin_id=hostpath')).json as unknown as Record<string, unknown>[])[0]!;
      expect(stub).toMatchObject({ ID: 'vol1', CurrentWriters: 1, CurrentReaders: 0, AccessMode: 'single-node-writer', Schedulable: true });
      expect(stub).not.toHaveProperty('Secrets');
      expect(JSON.stringify(stub)).not.toContain('hunter2');
      // csiplug's list views from the stub alone: capabilities and claims in Csiplug.
      expect(stub['Csiplug']).toMatchObject({
        capabilities: [{ accessMode: 'single-node-writer', attachmentMode: 'file-system' }],
        claims: [{ allocId, mode: 'write' }],
      });
      const gone = await raw(url, 'DELETE', '/v1/volume/csi/vol2');
      expect(gone.status).toBe(200);
      expect(gone.text.trim()).toBe('null');
    });

    it('answers 409 for a claimed volume unless forced, and for a duplicate create (a register of it updates it)', async () => {
      await client.registerVolume(volumeDoc('vol1'));
      await expect(client.createVolume(volumeDoc('vol1'))).rejects.toMatchObject({ status: 409, code: 'EVOLUME_EXISTS' });
      fake.claim('vol1', 'a1');
      await expect(client.deregisterVolume('vol1')).rejects.toMatchObject({ status: 409, code: 'EVOLUME_IN_USE' });
      await expect(client.deleteVolume('vol1')).rejects.toMatchObject({ status: 409 });
      expect(fake.volumes.has('vol1')).toBe(true);
      await client.deregisterVolume('vol1', { force: true });
      expect(fake.calls).toEqual(['registerVolume vol1', 'deregisterVolume vol1 force']);
    });

    it('never sends secrets nor mount flags back: Secrets null and MountFlags ["[REDACTED]"], as Nomad\'s CSIVolume.Sanitize', async () => {
      const doc = volumeDoc('vol1', { secrets: { password: 'hunter2' }, mount_options: { mount_flags: ['password=hunter3'] } });
      const registered = await raw(url, 'PUT', '/v1/volume/csi/vol1', { body: JSON.stringify({ Volumes: [volumeDocumentToNomad(doc)] }) });
      expect(registered.status).toBe(200);
      expect(fake.volumes.get('vol1')!.secrets).toEqual({ password: 'hunter2' });
      expect(fake.volumes.get('vol1')!.mountOptions).toEqual({ mountFlags: ['password=hunter3'] });
      const read = await raw(url, 'GET', '/v1/volume/csi/vol1');
      for (const answer of [registered, read, await raw(url, 'GET', '/v1/volumes')]) {
        expect(answer.text).not.toContain('hunter2');
        expect(answer.text).not.toContain('hunter3');
      }
      const volume = (registered.json as unknown as { Volumes: Record<string, unknown>[] }).Volumes[0]!;
      expect(volume).toMatchObject({ Secrets: null, MountOptions: { MountFlags: ['[REDACTED]'] } });
      expect(read.json).toMatchObject({ Secrets: null, MountOptions: { MountFlags: ['[REDACTED]'] } });
      // The client shows what it gets: the sanitized view.
      expect(await client.getVolume('vol1')).toMatchObject({ secrets: {}, mountOptions: { mountFlags: ['[REDACTED]'] } });
    });

    it('refuses a register that sends "[REDACTED]" back as a secret or a mount flag, naming the field; the stored ones stay', async () => {
      await client.registerVolume(volumeDoc('vol1', { secrets: { password: 'hunter2' } }));
      const read = (await raw(url, 'GET', '/v1/volume/csi/vol1')).json as unknown as Record<string, unknown>;
      for (const [change, field] of [
        [{ Secrets: { password: '[REDACTED]' } }, 'Volumes[0].Secrets.password'],
        [{ MountOptions: { MountFlags: ['[REDACTED]'] } }, 'Volumes[0].MountOptions.MountFlags[0]'],
      ] as const) {
        const again = await raw(url, 'PUT', '/v1/volume/csi/vol1', { body: JSON.stringify({ Volumes: [{ ...read, ...change }] }) });
        expect(again.status).toBe(400);
        expect(again.text).toContain(`${field} is \"[REDACTED]\"`);
        expect(again.text).toContain('send the real');
      }
      expect(fake.volumes.get('vol1')!.secrets).toEqual({ password: 'hunter2' });
    });

    it("names the body's Nomad field in a refusal validateVolumeSpec makes, not csiplug's spec field", async () => {
      const body = volumeBody('vol1') as unknown as { Volumes: Record<string, unknown>[] };
      body.Volumes[0]!['RequestedCapabilities'] = [{ AccessMode: 'bogus', AttachmentMode: 'file-system' }];
      const refused = await raw(url, 'PUT', '/v1/volume/csi/vol1', { body: JSON.stringify(body) });
      expect(refused.status).toBe(400);
      expect(refused.text).toMatch(/^Volumes\[0\]\.RequestedCapabilities\[0\]\.AccessMode must be one of single-node-writer/);
      body.Volumes[0]!['RequestedCapabilities'] = [{ AccessMode: 'single-node-writer', AttachmentMode: 'file-system' }];
      body.Volumes[0]!['RequestedCapacityMin'] = 10;
      body.Volumes[0]!['RequestedCapacityMax'] = 5;
      expect((await raw(url, 'PUT', '/v1/volume/csi/vol1', { body: JSON.stringify(body) })).text).toMatch(
        /^Volumes\[0\]\.RequestedCapacityMin \(10B\) must not exceed/,
      );
    });

    it('answers [] for host volumes (`nomad volume status` lists them first) and refuses a namespace other than default', async () => {
      await client.registerVolume(volumeDoc('vol1'));
      const host = await raw(url, 'GET', '/v1/volumes?type=host');
      expect(host.status).toBe(200);
      expect(host.json).toEqual([]);
      for (const path of [
        '/v1/volumes?namespace=default',
        '/v1/volumes?namespace=',
        '/v1/volumes?namespace=*',
        '/v1/volume/csi/vol1?namespace=default',
      ])
        expect((await raw(url, 'GET', path)).status).toBe(200);
      for (const [method, path] of [
        ['GET', '/v1/volumes?type=csi&namespace=prod'],
        ['GET', '/v1/volume/csi/vol1?namespace=prod'],
        ['DELETE', '/v1/volume/csi/vol1?namespace=prod'],
        ['PUT', '/v1/volume/csi/vol1?namespace=*'],
      ] as const) {
        const refused = await raw(url, method, path, method === 'PUT' ? { body: JSON.stringify(volumeBody('vol1')) } : {});
        expect(refused.status).toBe(400);
        expect(refused.text).toContain('csiplug has one namespace, "default"');
      }
      expect(fake.volumes.has('vol1')).toBe(true);
    });

    it("takes Nomad's CSIVolumeRegisterRequest by PUT and POST and answers CSIVolumeRegisterResponse; refuses a path that does not match the body", async () => {
      const ok = await raw(url, 'POST', '/v1/volume/csi/vol1', { body: JSON.stringify(volumeBody('vol1')) });
      expect(ok.status).toBe(200);
      expect(ok.json).toMatchObject({
        Volumes: [{ ID: 'vol1', ExternalID: 'ext-vol1', PluginID: 'hostpath', Namespace: 'default' }],
        Warnings: '',
      });
      const r = await raw(url, 'PUT', '/v1/volume/csi/other', { body: JSON.stringify(volumeBody('vol3')) });
      expect(r.status).toBe(400);
      expect(r.error).toBe('Volumes[0].ID ("vol3") does not match the volume id in the path ("other")');
      expect(fake.calls).toEqual(['registerVolume vol1']);
    });

    it('refuses invalid requests with 400, naming the field of the request; fields Nomad only answers with are ignored, as Nomad does', async () => {
      const cases: [unknown, RegExp][] = [
        [{ Volume: volumeDoc('vol1') }, /CSIVolumeRegisterRequest like \{ "Volumes"/],
        [volumeDoc('vol1'), /CSIVolumeRegisterRequest/],
        [{ Volumes: [] }, /exactly one volume/],
        [{ Volumes: [{ ...volumeBody('vol1').Volumes[0], RequestedCapabilities: [] }] }, /Volumes\[0\]\.RequestedCapabilities is required/],
        [
          { Volumes: [{ ...volumeBody('vol1').Volumes[0], RequestedCapacityMin: 'big' }] },
          /Volumes\[0\]\.RequestedCapacityMin must be a whole number of bytes/,
        ],
        [{ Volumes: [{ ...volumeBody('vol1').Volumes[0], ExternalID: '' }] }, /external_id/],
      ];
      for (const [body, message] of cases) {
        const r = await raw(url, 'PUT', '/v1/volume/csi/vol1', { body: JSON.stringify(body) });
        expect(r.status).toBe(400);
        expect(r.error).toMatch(message);
      }
      expect(fake.calls).toEqual([]);
      const answered = { ...volumeBody('vol1').Volumes[0], Schedulable: true, Allocations: null, CreateIndex: 7, ControllersHealthy: 1 };
      expect((await raw(url, 'PUT', '/v1/volume/csi/vol1', { body: JSON.stringify({ Volumes: [answered] }) })).status).toBe(200);
    });
  });

  describe('ACL', () => {
    let secured: { api: HttpApi; url: string };
    beforeEach(async () => {
      secured = await startApi(fake, { aclToken: 's3cret' });
    });
    afterEach(async () => {
      await secured.api.dispose();
    });

    it('answers 403 without a token, on every path', async () => {
      for (const [method, path] of [
        ['GET', '/v1/agent/health'],
        ['GET', '/v1/jobs'],
        ['GET', '/v1/nope'],
        ['GET', '/v1/event/stream'],
      ] as const) {
        const r = await raw(secured.url, method, path);
        expect(r.status).toBe(403);
        expect(r.code).toBe('EFORBIDDEN');
        expect(r.error).toMatch(/X-Nomad-Token header or as Authorization: Bearer \(the CLI: -token, or the NOMAD_TOKEN or CSIPLUG_TOKEN/);
      }
    });

    it("takes the token in Nomad's header only: the old X-Csiplug-Token is not read", async () => {
      const r = await raw(secured.url, 'GET', '/v1/jobs', { headers: { 'X-Csiplug-Token': 's3cret' } });
      expect(r.status).toBe(403);
      expect(r.error).toMatch(/requires an ACL token: send it in the X-Nomad-Token header/);
    });

    it('answers 403 for a wrong token and changes nothing', async () => {
      const r = await raw(secured.url, 'POST', '/v1/jobs', {
        body: JSON.stringify({ Job: nomadJob() }),
        headers: { 'X-Nomad-Token': 's3cre' },
      });
      expect(r.status).toBe(403);
      expect(r.error).toBe('the ACL token in X-Nomad-Token is not valid');
      await expect(new ApiClient({ address: secured.url, token: 'wrong' }).listJobs()).rejects.toMatchObject({ status: 403 });
      expect(fake.calls).toEqual([]);
    });

    it('takes the token as Authorization: Bearer too (a Prometheus scrape job sends it so)', async () => {
      expect((await raw(secured.url, 'GET', '/v1/jobs', { headers: { authorization: 'Bearer s3cret' } })).status).toBe(200);
      const wrong = await raw(secured.url, 'GET', '/v1/jobs', { headers: { authorization: 'Bearer s3cre' } });
      expect(wrong.status).toBe(403);
      expect(wrong.error).toBe('the ACL token in Authorization is not valid');
      expect((await raw(secured.url, 'GET', '/v1/jobs', { headers: { authorization: 'Basic czNjcmV0' } })).status).toBe(403);
      // Nomad's header wins when both are sent.
      expect(
        (await raw(secured.url, 'GET', '/v1/jobs', { headers: { 'x-nomad-token': 'nope', authorization: 'Bearer s3cret' } })).status,
      ).toBe(403);
    });

    it('serves requests with the right token', async () => {
      expect((await raw(secured.url, 'GET', '/v1/jobs', { headers: { 'x-nomad-token': 's3cret' } })).status).toBe(200);
      const c = new ApiClient({ address: secured.url, token: 's3cret' });
      expect((await c.runJob(nomadJob())).jobId).toBe('web');
    });
  });

  describe('without a token: root on this machine only', () => {
    /** An API whose connections are owned by `uid`, as /proc/net/tcp would say; counts the look-ups. */
    async function apiAs(uid: number | undefined, options: Parameters<typeof startApi>[1] = {}) {
      const asked: number[] = [];
      const started = await startApi(fake, { peerUid: (socket) => (asked.push(socket.remotePort!), uid), ...options });
      return { ...started, asked };
    }

    it('serves a connection of uid 0, looking its owner up once per connection', async () => {
      const { api: a, url: u, asked } = await apiAs(0);
      try {
        const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
        expect((await raw(u, 'GET', '/v1/jobs', { agent })).status).toBe(200);
        expect((await raw(u, 'POST', '/v1/jobs', { agent, body: JSON.stringify({ Job: nomadJob() }) })).status).toBe(200);
        expect(asked).toHaveLength(1);
        agent.destroy();
      } finally {
        await a.dispose();
      }
    });

    it.each([
      [65534, /this connection comes from uid 65534, not root/],
      [undefined, /not a local process of this machine/],
    ])('refuses uid %s with 403 on every path, saying what to do, and runs nothing', async (uid, who) => {
      const { api: a, url: u } = await apiAs(uid);
      try {
        for (const [method, path] of [
          ['GET', '/v1/agent/health'],
          ['GET', '/v1/volumes'],
          ['POST', '/v1/jobs'],
          ['GET', '/v1/event/stream'],
        ] as const) {
          const r = await raw(u, method, path, method === 'POST' ? { body: JSON.stringify({ Job: nomadJob() }) } : {});
          expect(r.status).toBe(403);
          expect(r.code).toBe('EFORBIDDEN');
          expect(r.error).toMatch(who);
          expect(r.error).toContain('run the command as root, or set acl { token = "…" } in the agent config');
        }
        expect(fake.calls).toEqual([]);
        // The status page's files hold no data: served to anyone, as with a token.
        expect((await raw(u, 'GET', '/ui/')).status).toBe(200);
      } finally {
        await a.dispose();
      }
    });

    it('a failed look-up serves nobody: 503, asked again at the next request', async () => {
      let fail = true;
      const {
        api: a,
        url: u,
        logger,
      } = await startApi(fake, {
        peerUid: () => {
          if (fail) throw new Error('EMFILE: too many open files');
          return 0;
        },
      });
      try {
        const r = await raw(u, 'GET', '/v1/jobs');
        expect(r.status).toBe(503);
        expect({ error: r.error, code: r.code }).toEqual({
          code: 'EPEER_UNKNOWN',
          error:
            'the agent could not tell which user this connection comes from (EMFILE: too many open files), and without an ACL token it serves only root: retry, or set acl { token } and send it',
        });
        expect(logger.find('could not be looked up', 'warn')).toHaveLength(1);
        expect(fake.calls).toEqual([]);
        fail = false;
        expect((await raw(u, 'GET', '/v1/jobs')).status).toBe(200);
      } finally {
        await a.dispose();
      }
    });

    it('with a token, the token decides, whoever connects; a public bind with insecure_allow_public serves anyone (INSECURE)', async () => {
      const { api: a, url: u, asked } = await apiAs(65534, { aclToken: 's3cret' });
      try {
        expect((await raw(u, 'GET', '/v1/jobs', { headers: { 'x-nomad-token': 's3cret' } })).status).toBe(200);
        expect(asked).toEqual([]);
      } finally {
        await a.dispose();
      }
      const {
        api: b,
        url: v,
        asked: askedB,
      } = await apiAs(65534, { bindAddr: '0.0.0.0', insecureAllowPublic: true, allowedHosts: ['127.0.0.1'] });
      try {
        expect((await raw(v.replace('0.0.0.0', '127.0.0.1'), 'GET', '/v1/jobs')).status).toBe(200);
        expect(askedB).toEqual([]);
      } finally {
        await b.dispose();
      }
      // insecure_allow_public on a loopback address changes nothing: still root only.
      const { api: c, url: w } = await apiAs(65534, { insecureAllowPublic: true });
      try {
        expect((await raw(w, 'GET', '/v1/jobs')).status).toBe(403);
      } finally {
        await c.dispose();
      }
    });

    it('a token removed at a reload brings the root-only rule back', async () => {
      const { api: a, url: u } = await apiAs(65534, { aclToken: 's3cret' });
      try {
        expect((await raw(u, 'GET', '/v1/jobs', { headers: { 'x-nomad-token': 's3cret' } })).status).toBe(200);
        a.setAclToken(undefined);
        expect((await raw(u, 'GET', '/v1/jobs')).status).toBe(403);
      } finally {
        await a.dispose();
      }
    });
  });

  describe('metrics and the status page', () => {
    it('/v1/metrics answers 404 when the API was given no metrics source, and serves the source it was given, behind the token', async () => {
      expect((await raw(url, 'GET', '/v1/metrics')).status).toBe(404);
      const source = {
        json: async () => [{ name: 'm', values: [] }],
        prometheus: async () => '# HELP m m\nm 1\n',
        contentType: 'text/plain; version=0.0.4; charset=utf-8',
      };
      const secured = await startApi(fake, { aclToken: 's3cret', metrics: source });
      try {
        expect((await raw(secured.url, 'GET', '/v1/metrics')).status).toBe(403);
        const headers = { 'X-Nomad-Token': 's3cret' };
        expect((await raw(secured.url, 'GET', '/v1/metrics', { headers })).json).toEqual([{ name: 'm', values: [] }]);
        const text = await raw(secured.url, 'GET', '/v1/metrics?format=prometheus', { headers });
        expect(text.status).toBe(200);
        expect(text.text).toBe('# HELP m m\nm 1\n');
        expect((await raw(secured.url, 'GET', '/v1/metrics?format=yaml', { headers })).error).toMatch(
          /format must be one of json, prometheus/,
        );
      } finally {
        await secured.api.dispose();
      }
    });

    it('serves the page files without the token (they hold no data), GET and HEAD only, and nothing else under /ui/', async () => {
      const secured = await startApi(fake, { aclToken: 's3cret' });
      try {
        const page = await raw(secured.url, 'GET', '/ui/');
        expect(page.status).toBe(200);
        expect(page.text).toContain('<title>csiplug status</title>');
        expect((await raw(secured.url, 'GET', '/ui/app.js')).text).toContain('X-Nomad-Token');
        expect((await raw(secured.url, 'HEAD', '/ui/app.css')).status).toBe(200);
        const moved = await raw(secured.url, 'GET', '/ui');
        expect(moved.status).toBe(301);
        expect(moved.headers.location).toBe('ui/');
        // Sent as written (raw() would let the URL class resolve the dots first): none reaches a file, or data without the token.
        for (const sneaky of [
          '/ui/../../package.json',
          '/ui/..%2f..%2fpackage.json',
          '/ui/%2e%2e/%2e%2e/package.json',
          '/ui//app.js',
          '/ui/__proto__',
        ]) {
          const r = await rawPath(secured.url, sneaky);
          expect(r.status).not.toBe(200);
          expect(r.body).not.toContain('@csiplug');
        }
        expect((await raw(secured.url, 'GET', '/ui/index.htm')).status).toBe(404);
        const post = await raw(secured.url, 'POST', '/ui/', { body: '{}' });
        expect(post.status).toBe(405);
        expect(post.headers.allow).toBe('GET, HEAD');
      } finally {
        await secured.api.dispose();
      }
    });

    it('an install without the page files answers 500 with no path of this machine in it', async () => {
      const bare = await startApi(fake, { statusPage: new StatusPage('/nonexistent/csiplug-ui') });
      try {
        const r = await raw(bare.url, 'GET', '/ui/');
        expect(r.status).toBe(500);
        expect({ error: r.error, code: r.code }).toEqual({
          error: 'the status page is not available: its files are missing from this install of @csiplug/api',
          code: 'ESTATUS_PAGE_MISSING',
        });
      } finally {
        await bare.api.dispose();
      }
    });
  });

  describe('event stream', () => {
    it('delivers events as NDJSON, filtered by topic, and unsubscribes when the client leaves', async () => {
      const ac = new AbortController();
      const all = client.events({ signal: ac.signal });
      const tasks = client.events({ topics: ['Task'], signal: ac.signal });
      const firstAll = all.next();
      const firstTask = tasks.next();
      await until(() => fake.eventSubscribers === 2, 'both streams to subscribe');
      fake.emit({ topic: 'Plugin', type: 'PluginHealthy', message: 'Plugin became healthy', pluginId: 'hostpath' });
      fake.emit({ topic: 'Task', type: 'Started', message: 'Task started', allocId: 'a1', task: 'main' });
      expect((await firstAll).value).toMatchObject({ index: 1, topic: 'Plugin', message: 'Plugin became healthy' });
      expect((await firstTask).value).toMatchObject({ index: 2, topic: 'Task', task: 'main' });
      expect((await all.next()).value).toMatchObject({ index: 2 });
      ac.abort();
      await all.return();
      await tasks.return();
      await until(() => fake.eventSubscribers === 0, 'the subscriptions to be disposed');
    });

    it('writes raw NDJSON lines and a {} heartbeat on the clock', async () => {
      const clock = new FakeClock();
      const hb = await startApi(fake, { clock });
      try {
        const lines: string[] = [];
        let res!: http.IncomingMessage;
        const req = http.get(`${hb.url}/v1/event/stream?topic=CSIVolume:*`, (r) => {
          res = r;
          r.setEncoding('utf8');
          let buf = '';
          r.on('data', (c: string) => {
            buf += c;
            const parts = buf.split('\n');
            buf = parts.pop()!;
            lines.push(...parts);
          });
        });
        await until(() => res !== undefined && fake.eventSubscribers === 1, 'the stream to open');
        expect(res.headers['content-type']).toMatch(/application\/x-ndjson/);
        fake.emit({ topic: 'Task', type: 'Started', message: 'filtered out' });
        fake.emit({ topic: 'Volume', type: 'VolumeRegistered', message: 'volume v registered', volumeId: 'v' });
        await until(() => lines.length === 1, 'the event line');
        await clock.advance(10_000);
        await until(() => lines.length === 2, 'the heartbeat');
        expect(JSON.parse(lines[0]!)).toMatchObject({
          Index: 2,
          Events: [{ Topic: 'CSIVolume', Type: 'VolumeRegistered', Key: 'v', Index: 2 }],
        });
        expect(lines[1]).toBe('{}');
        req.destroy();
        await until(() => fake.eventSubscribers === 0, 'the subscription to go');
        expect(clock.pendingTimers).toBe(0);
      } finally {
        await hb.api.dispose();
      }
    });

    it('a changed ACL token ends the streams the old one let in; setting the same token again ends none', async () => {
      const secured = await startApi(fake, { aclToken: 'first' });
      try {
        const ended: string[] = [];
        const open = (token: string, name: string) =>
          new Promise<void>((resolve) => {
            http.get(`${secured.url}/v1/event/stream`, { headers: { 'X-Nomad-Token': token } }, (r) => {
              r.resume();
              r.on('close', () => ended.push(name));
              resolve();
            });
          });
        await open('first', 'a');
        await until(() => fake.eventSubscribers === 1, 'the stream to open');
        secured.api.setAclToken('first');
        await new Promise((r) => setTimeout(r, 50));
        expect(ended).toEqual([]);
        secured.api.setAclToken('second');
        await until(() => ended.length === 1 && fake.eventSubscribers === 0, 'the stream to end');
        expect((await raw(secured.url, 'GET', '/v1/event/stream', { headers: { 'X-Nomad-Token': 'first' } })).status).toBe(403);
      } finally {
        await secured.api.dispose();
      }
    });

    it('reads ?topic= as Nomad does: an unknown topic is accepted, `*:key` is the key in any topic, a comma is part of a name', async () => {
      const lines: string[] = [];
      let res!: http.IncomingMessage;
      const query = ['Bogus', '*:web', 'Task,Job'].map((t) => `topic=${encodeURIComponent(t)}`).join('&');
      const req = http.get(`${url}/v1/event/stream?${query}`, (r) => {
        res = r;
        r.setEncoding('utf8');
        let buf = '';
        r.on('data', (c: string) => {
          buf += c;
          const parts = buf.split('\n');
          buf = parts.pop()!;
          lines.push(...parts);
        });
      });
      try {
        await until(() => res !== undefined && fake.eventSubscribers === 1, 'the stream to open');
        expect(res.statusCode).toBe(200);
        fake.emit({ topic: 'Task', type: 'Started', message: 'not web', allocId: 'a1', task: 'main' });
        fake.emit({ topic: 'Job', type: 'JobRegistered', message: 'job api registered', jobId: 'api' });
        fake.emit({ topic: 'Alloc', type: 'AllocRunning', message: 'alloc of web', allocId: 'a2', jobId: 'web' });
        fake.emit({ topic: 'Job', type: 'JobRegistered', message: 'job web registered', jobId: 'web' });
        await until(() => lines.length === 2, 'the two events of key web');
        expect(lines.map((l) => (JSON.parse(l) as { Events: { Topic: string; Key: string }[] }).Events[0])).toMatchObject([
          { Topic: 'Allocation', Key: 'a2' },
          { Topic: 'Job', Key: 'web' },
        ]);
        const bad = await raw(url, 'GET', '/v1/event/stream?topic=Job:a:b');
        expect(bad.status).toBe(400);
        expect(bad.error).toMatch(/invalid key value pair for topic, topic: Job:a:b/);
      } finally {
        req.destroy();
      }
      await until(() => fake.eventSubscribers === 0, 'the subscription to go');
    });

    it('ends open streams when the server closes', async () => {
      const events = client.events();
      const next = events.next();
      await until(() => fake.eventSubscribers === 1, 'the stream to open');
      await api.dispose();
      expect(await next).toEqual({ done: true, value: undefined });
      expect(fake.eventSubscribers).toBe(0);
      await flushMicrotasks();
    });
  });
});
