// Nomad compatibility, jobs: a real agent, driven by a Nomad-style client
// (nomad-api.ts, no csiplug types) as api.Jobs drives Nomad: a job
// registered with Nomad's JobRegisterRequest (the "Create Job" example of
// Nomad's api-docs/jobs.mdx, trimmed to what csiplug supports and run as a
// raw_exec sleep), listed (api.JobListStub with its JobSummary), read
// (api.Job), read and sent back as it is (`nomad job inspect` into `nomad
// job run`), planned with a change (api.JobPlanResponse), stopped and purged
// (api.JobDeregisterResponse); X-Nomad-Index on every answer.
import { AgentHarness, pollUntil } from '../support/agent-process';
import { NomadApi, NomadResponseError } from './nomad-api';

jest.setTimeout(120_000);

/** api.TaskGroupSummary */
interface TaskGroupSummary {
  Queued: number;
  Complete: number;
  Failed: number;
  Running: number;
  Starting: number;
  Lost: number;
  Unknown: number;
}

/** api.JobListStub (the fields read here). */
interface JobListStub {
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
  Status: string;
  StatusDescription: string;
  JobSummary: { JobID: string; Namespace: string; Summary: Record<string, TaskGroupSummary> };
  SubmitTime: number;
}

/** api.Task (the fields read here). */
interface Task {
  Name: string;
  Driver: string;
  Config: Record<string, unknown>;
}

/** api.Job (the fields read here). */
interface Job {
  ID: string;
  Name: string;
  Namespace: string;
  Type: string;
  Datacenters: string[];
  Status: string;
  Stop: boolean;
  Version: number;
  /** *int64 in api.Job: `nomad job status ID` dereferences it, so it must be sent. */
  SubmitTime: number;
  TaskGroups: { Name: string; Count: number; Tasks: Task[] }[];
}

/** api.Deployment (the fields read here) with api.DeploymentState. */
interface Deployment {
  ID: string;
  Namespace: string;
  JobID: string;
  JobVersion: number;
  Status: string;
  StatusDescription: string;
  TaskGroups: Record<string, { DesiredTotal: number; PlacedAllocs: number; HealthyAllocs: number; UnhealthyAllocs: number }>;
  CreateTime: number;
  ModifyTime: number;
}

/** api.JobRegisterResponse (structs.JobRegisterResponse). */
interface JobRegisterResponse {
  EvalID: string;
  EvalCreateIndex?: number;
  JobModifyIndex?: number;
  Warnings: string;
}

/** api.JobDeregisterResponse (structs.JobDeregisterResponse). */
interface JobDeregisterResponse {
  EvalID: string;
  EvalCreateIndex?: number;
  JobModifyIndex?: number;
}

/** api.FieldDiff */
interface FieldDiff {
  Type: string;
  Name: string;
  Old: string;
  New: string;
  Annotations: string[] | null;
}

/** api.JobPlanResponse (the fields read here: api.JobDiff, api.TaskGroupDiff, api.PlanAnnotations, api.DesiredUpdates). */
interface JobPlanResponse {
  JobModifyIndex?: number;
  Diff: {
    Type: string;
    ID: string;
    Fields: FieldDiff[] | null;
    TaskGroups: { Type: string; Name: string; Fields: FieldDiff[] | null; Updates: Record<string, number> }[];
  };
  Annotations: {
    DesiredTGUpdates: Record<
      string,
      {
        Ignore: number;
        Place: number;
        Migrate: number;
        Stop: number;
        InPlaceUpdate: number;
        DestructiveUpdate: number;
        Canary: number;
        Preemptions: number;
      }
    >;
  };
  Warnings: string;
}

/** jobs.mdx, "Create Job", Sample Payload, less NodePool, Networks and Services (csiplug refuses them), its docker task a raw_exec sleep. */
const createJobPayload = (seconds: string) => ({
  Job: {
    Datacenters: ['dc1'],
    ID: 'cache',
    TaskGroups: [{ Name: 'cache', Tasks: [{ Config: { command: '/bin/sleep', args: [seconds] }, Driver: 'raw_exec', Name: 'redis' }] }],
  },
});

/** The query api.Jobs.DeregisterOpts always sends (`nomad job stop [-purge]`). */
const deregisterQuery = (purge: boolean) => ({ purge, global: false, eval_priority: 0, no_shutdown_delay: false });

describe('Nomad compatibility: jobs', () => {
  let h: AgentHarness;
  let nomad: NomadApi;

  beforeAll(async () => {
    h = new AgentHarness();
    await h.start();
    nomad = new NomadApi(`http://127.0.0.1:${h.port}`);
  });
  afterAll(async () => {
    await h.cleanup();
  });

  it('registers, lists, reads, plans, stops and purges a job as api.Jobs does', async () => {
    // Register (api.Jobs.Register: PUT /v1/jobs).
    const register = await nomad.put<JobRegisterResponse>('/v1/jobs', createJobPayload('3600'));
    expect(register.status).toBe(200);
    expect(register.lastIndex).toBeGreaterThan(0);
    // csiplug has no evaluations: EvalID is empty (`nomad job run` needs -detach), no index is made up.
    expect(register.body).toMatchObject({ EvalID: '', Warnings: '' });
    expect(register.body.JobModifyIndex).toBeUndefined();

    // List (api.Jobs.List: GET /v1/jobs), once the alloc runs.
    const list = await pollUntil('job cache running in the list', async () => {
      const answer = await nomad.get<JobListStub[]>('/v1/jobs');
      return answer.body[0]?.JobSummary.Summary.cache?.Running === 1 ? answer : undefined;
    });
    expect(list.lastIndex).toBeGreaterThan(0);
    expect(list.body).toHaveLength(1);
    expect(list.body[0]).toMatchObject({
      ID: 'cache',
      ParentID: '',
      Name: 'cache',
      Namespace: 'default',
      Datacenters: ['dc1'],
      Type: 'service',
      Priority: 50,
      Periodic: false,
      ParameterizedJob: false,
      Stop: false,
      Status: 'running',
      StatusDescription: '',
      JobSummary: {
        JobID: 'cache',
        Namespace: 'default',
        Summary: { cache: { Queued: 0, Complete: 0, Failed: 0, Running: 1, Starting: 0, Lost: 0, Unknown: 0 } },
      },
    });

    // What `nomad job status cache` reads besides: the id by prefix (api.Jobs.PrefixList), the summary
    // (api.Jobs.Summary: api.JobSummary), the evaluations (api.Jobs.Evaluations: none, csiplug has no evaluations).
    const byPrefix = await nomad.get<JobListStub[]>('/v1/jobs', { prefix: 'ca' });
    expect(byPrefix.body.map((j) => j.ID)).toEqual(['cache']);
    expect((await nomad.get<JobListStub[]>('/v1/jobs', { prefix: 'web' })).body).toEqual([]);
    const summary = await nomad.get<JobListStub['JobSummary']>('/v1/job/cache/summary');
    expect(summary.lastIndex).toBeGreaterThan(0);
    expect(summary.body).toEqual(list.body[0]!.JobSummary);
    expect((await nomad.get<unknown[]>('/v1/job/cache/evaluations')).body).toEqual([]);

    // Read (api.Jobs.Info: GET /v1/job/:id).
    const info = await nomad.get<Job>('/v1/job/cache');
    expect(info.lastIndex).toBeGreaterThan(0);
    expect(info.body).toMatchObject({
      ID: 'cache',
      Name: 'cache',
      Namespace: 'default',
      Type: 'service',
      Datacenters: ['dc1'],
      Status: 'running',
      Stop: false,
      Version: 0,
    });
    expect(info.body.TaskGroups).toHaveLength(1);
    expect(info.body.TaskGroups[0]).toMatchObject({ Name: 'cache', Count: 1 });
    expect(info.body.TaskGroups[0]!.Tasks[0]).toMatchObject({
      Name: 'redis',
      Driver: 'raw_exec',
      Config: { command: '/bin/sleep', args: ['3600'] },
    });
    await expect(nomad.get('/v1/job/nope')).rejects.toMatchObject({ status: 404 });

    // The latest deployment (api.Jobs.LatestDeployment) and the job's deployments (api.Jobs.Deployments).
    const latest = await nomad.get<Deployment>('/v1/job/cache/deployment');
    expect(latest.lastIndex).toBeGreaterThan(0);
    expect(latest.body).toMatchObject({ Namespace: 'default', JobID: 'cache', JobVersion: 0 });
    expect(latest.body.ID).toMatch(/^[0-9a-f-]{36}$/);
    expect(['running', 'successful']).toContain(latest.body.Status);
    expect(latest.body.TaskGroups.cache).toMatchObject({ DesiredTotal: 1, PlacedAllocs: 1, UnhealthyAllocs: 0 });
    // Unix nanoseconds, as Nomad's CreateTime: after 2020 in nanoseconds.
    expect(latest.body.CreateTime).toBeGreaterThan(1_577_836_800 * 1e9);
    expect(latest.body.ModifyTime).toBeGreaterThanOrEqual(latest.body.CreateTime);
    expect((await nomad.get<Deployment[]>('/v1/job/cache/deployments')).body.map((d) => d.ID)).toEqual([latest.body.ID]);

    // SubmitTime (Unix ns), in the Job and its stub: the current version's submit, here its deployment's start.
    expect(typeof info.body.SubmitTime).toBe('number');
    expect(info.body.SubmitTime).toBe(latest.body.CreateTime);
    expect(list.body[0]!.SubmitTime).toBe(latest.body.CreateTime);
    // Like Nomad's list, no spec in a stub (a task's env, templates and auth stay out of a list).
    expect(JSON.stringify(list.body)).not.toContain('TaskGroups');

    // The job read and sent back as it is (`nomad job inspect` into `nomad job run`): the same job, no new version.
    const again = await nomad.put<JobRegisterResponse>('/v1/jobs', { Job: info.body });
    expect(again.status).toBe(200);
    expect((await nomad.get<Job>('/v1/job/cache')).body.Version).toBe(0);

    // Plan (api.Jobs.Plan: PUT /v1/job/:id/plan with Diff), unchanged and then with the task's args changed.
    const same = await nomad.put<JobPlanResponse>('/v1/job/cache/plan', { ...createJobPayload('3600'), Diff: true });
    expect(same.lastIndex).toBeGreaterThan(0);
    expect(same.body.Diff).toMatchObject({
      Type: 'None',
      ID: 'cache',
      TaskGroups: [{ Type: 'None', Name: 'cache', Updates: { ignore: 1 } }],
    });
    const plan = await nomad.put<JobPlanResponse>('/v1/job/cache/plan', { ...createJobPayload('7200'), Diff: true });
    expect(plan.status).toBe(200);
    expect(plan.lastIndex).toBeGreaterThan(0);
    expect(plan.body.Diff.Type).toBe('Edited');
    expect(plan.body.Diff.ID).toBe('cache');
    const group = plan.body.Diff.TaskGroups[0]!;
    expect(group).toMatchObject({ Type: 'Edited', Name: 'cache', Updates: { 'create/destroy update': 1 } });
    expect(group.Fields).toContainEqual(
      expect.objectContaining({
        Type: 'Edited',
        Old: expect.stringContaining('3600'),
        New: expect.stringContaining('7200'),
        Annotations: ['forces create/destroy update'],
      }),
    );
    expect(plan.body.Annotations.DesiredTGUpdates.cache).toEqual({
      Ignore: 0,
      Place: 0,
      Migrate: 0,
      Stop: 0,
      InPlaceUpdate: 0,
      DestructiveUpdate: 1,
      Canary: 0,
      Preemptions: 0,
    });
    expect(plan.body.Warnings).toBe('');
    // A plan runs nothing.
    expect((await nomad.get<Job>('/v1/job/cache')).body.TaskGroups[0]!.Tasks[0]!.Config.args).toEqual(['3600']);

    // Stop (api.Jobs.DeregisterOpts, as `nomad job stop` sends it): the job stays, stopped; Job.Stop says so.
    const stop = await nomad.delete<JobDeregisterResponse>('/v1/job/cache', deregisterQuery(false));
    expect(stop.status).toBe(200);
    expect(stop.lastIndex).toBeGreaterThan(plan.lastIndex);
    // No evaluation: `nomad job stop` returns at once on an empty EvalID, as for a periodic job.
    expect(stop.body.EvalID).toBe('');
    const stopped = await pollUntil('job cache dead', async () => {
      const answer = await nomad.get<Job>('/v1/job/cache');
      return answer.body.Status === 'dead' ? answer.body : undefined;
    });
    expect(stopped.Stop).toBe(true);
    const stub = (await nomad.get<JobListStub[]>('/v1/jobs')).body[0]!;
    expect(stub).toMatchObject({ ID: 'cache', Stop: true, Status: 'dead' });
    expect(stub.JobSummary.Summary.cache!.Running).toBe(0);

    // The stopped job read and sent back as it is (Stop true): nothing to do, answered as unchanged; still stopped.
    const stoppedBack = await nomad.put<JobRegisterResponse>('/v1/jobs', { Job: stopped });
    expect(stoppedBack.status).toBe(200);
    expect((await nomad.get<Job>('/v1/job/cache')).body).toMatchObject({ Status: 'dead', Stop: true, Version: 0 });
    // Stop true with a changed spec: csiplug registers a job to run it, and says how to start it.
    const changedStopped = await nomad
      .put('/v1/jobs', { Job: { ...stopped, TaskGroups: [{ ...stopped.TaskGroups[0]!, Count: 2 }] } })
      .catch((err: unknown) => err);
    expect(changedStopped).toMatchObject({ status: 400, text: expect.stringContaining('set Stop to false to start it') });

    // A plan of the stopped job: running it starts it again, an edit (Stop true → false), as Nomad's diff says.
    const restart = await nomad.put<JobPlanResponse>('/v1/job/cache/plan', { ...createJobPayload('3600'), Diff: true });
    expect(restart.body.Diff.Type).toBe('Edited');
    expect(restart.body.Diff.Fields).toContainEqual({ Type: 'Edited', Name: 'Stop', Old: 'true', New: 'false', Annotations: null });
    expect(restart.body.Annotations.DesiredTGUpdates.cache!.Place).toBe(1);

    // Purge (?purge=true): gone.
    const purge = await nomad.delete<JobDeregisterResponse>('/v1/job/cache', deregisterQuery(true));
    expect(purge.status).toBe(200);
    expect(purge.lastIndex).toBeGreaterThan(stop.lastIndex);
    const gone = await nomad.get('/v1/job/cache').catch((err: unknown) => err);
    expect(gone).toBeInstanceOf(NomadResponseError);
    expect((gone as NomadResponseError).status).toBe(404);
    expect((await nomad.get<JobListStub[]>('/v1/jobs')).body).toEqual([]);

    // A job no longer there (Terraform's destroy after it vanished): Nomad's Job.Deregister succeeds with no EvalID,
    // and its evaluations and deployments are [].
    const vanished = await nomad.delete<JobDeregisterResponse>('/v1/job/cache', deregisterQuery(true));
    expect([vanished.status, vanished.body]).toEqual([200, { EvalID: '' }]);
    expect((await nomad.get<unknown[]>('/v1/job/cache/evaluations')).body).toEqual([]);
    expect((await nomad.get<unknown[]>('/v1/job/cache/deployments')).body).toEqual([]);
  });
});
