// The job routes' Nomad shapes survive the way back: each answer decoded
// from its JSON text is the view it was encoded from, for the repo's example
// jobspecs, with every optional field set and with none set; and the Nomad
// fields a Nomad tool reads hold what the view says.
import { parseJobspec, type JobPlan, type JobSpec } from '@csiplug/jobspec';
import * as fs from 'fs';
import * as path from 'path';
import type { JobView, RunJobResult } from '../service';
import {
  decodeDeployment,
  decodeJob,
  decodeJobDeregisterResponse,
  decodeJobListStub,
  decodeJobPlanResponse,
  decodeJobRegisterResponse,
  encodeDeployment,
  encodeJob,
  encodeJobDeregisterResponse,
  encodeJobListStub,
  encodeJobPlanResponse,
  encodeJobRegisterResponse,
} from './job-wire';

const ROOT = path.resolve(__dirname, '../../../..');
const JOB_FILES = [
  ...['examples/hostpath-plugin.nomad.hcl', 'examples/hostpath-plugin-image.nomad.hcl', 'examples/workload.nomad.hcl'],
  ...fs
    .readdirSync(path.join(ROOT, 'packages/jobspec/test/fixtures/nomad-json'))
    .filter((f) => f.endsWith('.nomad.hcl'))
    .map((f) => `packages/jobspec/test/fixtures/nomad-json/${f}`),
];

/** Through JSON text, as the wire carries it. */
const wire = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

const readSpec = async (file: string): Promise<JobSpec> =>
  parseJobspec(fs.readFileSync(path.join(ROOT, file), 'utf8'), path.basename(file));

function fullView(job: JobSpec): JobView {
  const group = job.groups[0]!.name;
  return {
    id: job.id,
    name: job.name,
    status: 'running',
    version: 3,
    job,
    submittedAt: 1_700_000_000_123,
    deployment: {
      id: 'd-1',
      jobVersion: 3,
      status: 'failed',
      description: 'Failed due to unhealthy allocations',
      createdAt: 1_700_000_000_123,
      updatedAt: 1_700_000_001_456,
      revertTo: 1,
      revertOf: 2,
      groups: [{ name: group, desired: 2, placed: 2, healthy: 1, unhealthy: 1 }],
    },
    cluster: {
      type: 'service',
      version: 3,
      stopped: false,
      placements: [{ slot: `${group}/0`, group, index: 0, node: 'n1', jobVersion: 3, movedFrom: 'n2' }],
      pending: [{ group, count: 1, slots: [`${group}/1`], reasons: { n1: 'no room' } }],
      readAt: 1_700_000_002_000,
    },
    allocs: [
      { id: 'a-1', name: `${job.id}.${group}[0]`, group, jobVersion: 3, clientStatus: 'running', desiredStatus: 'run', healthy: true },
      { id: 'a-2', name: `${job.id}.${group}[1]`, group, jobVersion: 2, clientStatus: 'failed', desiredStatus: 'stop', healthy: false },
      { id: 'a-3', name: `${job.id}.${group}[1]`, group, jobVersion: 3, clientStatus: 'pending', desiredStatus: 'run' },
      { id: 'a-4', name: `${job.id}.${group}[2]`, group, jobVersion: 1, clientStatus: 'complete', desiredStatus: 'stop' },
    ],
    volumeUnmountsPending: [
      { allocId: 'a-2', name: 'data', volumeId: 'vol-1', pluginId: 'hostpath', pluginAway: true, lastError: 'plugin gone' },
    ],
  };
}

function bareView(job: JobSpec): JobView {
  return { id: job.id, name: job.name, status: 'dead', version: 0, job, allocs: [] };
}

const fullPlan: JobPlan = {
  jobId: 'web',
  changed: true,
  version: { from: 1, to: 2 },
  fields: [{ field: 'datacenters', kind: 'changed', old: '["a"]', new: '["b"]', effect: 'in-place' }],
  groups: [
    {
      name: 'app',
      change: 'edited',
      count: { from: 2, to: 3 },
      fields: [
        { field: 'task "t" env.FOO', kind: 'added', new: '"1"', effect: 'destructive' },
        { field: 'task "t" env.BAR', kind: 'removed', old: '"2"', effect: 'destructive' },
        { field: 'update max_parallel', kind: 'changed', old: '1', new: '2', effect: 'in-place' },
      ],
      updates: { create: 1, destroy: 1, 'create/destroy': 1, 'in-place': 1, ignore: 1 },
      allocs: [
        { update: 'create', index: 2, name: 'web.app[2]', replaces: 'a-9', reason: 'count grew' },
        { update: 'destroy', index: 1, name: 'web.app[1]', allocId: 'a-8', version: 1, keeps: 'a-7', reason: 'duplicate' },
        {
          update: 'create/destroy',
          index: 0,
          name: 'web.app[0]',
          allocId: 'a-1',
          version: 0,
          reason: 'env changed',
          changes: [{ field: 'task "t" env.FOO', kind: 'changed', old: '"0"', new: '"1"', effect: 'destructive' }],
        },
      ],
      order: { kind: 'stop-before-start', reason: 'a single-writer volume' },
      update: { maxParallel: 2, minHealthyTime: 10_000, healthyDeadline: 300_000, autoRevert: true },
    },
    {
      name: 'old',
      change: 'removed',
      count: { from: 1, to: 0 },
      fields: [],
      updates: { create: 0, destroy: 1, 'create/destroy': 0, 'in-place': 0, ignore: 0 },
      allocs: [{ update: 'destroy', index: 0, name: 'web.old[0]', allocId: 'a-5', version: 1, reason: 'group removed' }],
    },
  ],
  underway: { deploymentId: 'd-2', jobVersion: 2 },
};

const barePlan: JobPlan = { jobId: 'web', changed: false, version: { to: 0 }, fields: [], groups: [] };

describe('job wire', () => {
  describe.each(JOB_FILES)('%s', (file) => {
    it('survives Job and JobListStub, with every optional field set and with none', async () => {
      const spec = await readSpec(file);
      for (const view of [fullView(spec), bareView(spec)]) {
        const { job: _spec, ...withoutSpec } = view;
        expect(decodeJob(wire(encodeJob(view)))).toEqual(view);
        expect(decodeJobListStub(wire(encodeJobListStub(view)))).toEqual({ ...withoutSpec, groups: spec.groups.map((g) => g.name) });
        expect(decodeJobDeregisterResponse(wire(encodeJobDeregisterResponse(view)))).toEqual(withoutSpec);
      }
    });
  });

  it('survives Deployment, with every optional field set and with none', async () => {
    const full = fullView(await readSpec('examples/workload.nomad.hcl')).deployment!;
    const { revertTo: _to, revertOf: _of, ...bare } = full;
    for (const d of [full, { ...bare, groups: [] }]) expect(decodeDeployment(wire(encodeDeployment('web', d)))).toEqual(d);
    expect(encodeDeployment('web', full)).toMatchObject({
      JobID: 'web',
      JobVersion: 3,
      Status: 'failed',
      CreateTime: 1_700_000_000_123_000_000,
      TaskGroups: { [full.groups[0]!.name]: { DesiredTotal: 2, PlacedAllocs: 2, HealthyAllocs: 1, UnhealthyAllocs: 1 } },
    });
  });

  it("answers Nomad's Job fields: the spec, Status, Stop, Version", async () => {
    const spec = await readSpec('examples/workload.nomad.hcl');
    const job = wire(encodeJob(fullView(spec)));
    expect(job).toMatchObject({ ID: spec.id, Name: spec.name, Type: 'service', Status: 'running', Stop: false, Version: 3 });
    expect(job.TaskGroups.map((g) => g.Name)).toEqual(spec.groups.map((g) => g.name));
    const stopped = { ...bareView(spec), allocs: [{ ...fullView(spec).allocs[3]! }] };
    expect(encodeJob(stopped).Stop).toBe(true);
    expect(encodeJob(bareView(spec)).Stop).toBe(false);
  });

  it('always sends SubmitTime in Unix ns (nomad job status dereferences it), 0 only where no submit time is known', async () => {
    const spec = await readSpec('examples/workload.nomad.hcl');
    expect(wire(encodeJob(fullView(spec))).SubmitTime).toBe(1_700_000_000_123_000_000);
    expect(wire(encodeJobListStub(fullView(spec))).SubmitTime).toBe(1_700_000_000_123_000_000);
    expect(wire(encodeJob(bareView(spec))).SubmitTime).toBe(0);
  });

  it("keeps the spec out of a JobListStub and a JobDeregisterResponse (its env, templates and auth), as Nomad's list does", async () => {
    const spec = await readSpec('packages/jobspec/test/fixtures/nomad-json/templates.nomad.hcl');
    const specText = JSON.stringify(encodeJob(bareView(spec)).TaskGroups);
    expect(specText.length).toBeGreaterThan(100);
    for (const answer of [encodeJobListStub(fullView(spec)), encodeJobDeregisterResponse(fullView(spec))]) {
      expect(JSON.stringify(answer)).not.toContain('"TaskGroups"');
    }
    expect(decodeJobDeregisterResponse(wire(encodeJobDeregisterResponse(undefined)))).toBeUndefined();
  });

  it('reads a Job answer leniently: fields this reader does not know or support are passed over, not refused', async () => {
    const spec = await readSpec('examples/workload.nomad.hcl');
    const answer = { ...wire(encodeJob(fullView(spec))), SomeNewerField: { A: 1 }, Meta: { owner: 'ops' } };
    expect(decodeJob(answer)).toEqual(fullView(spec));
    // Nor is it checked as a registration is: a value run would refuse is read as far as it goes.
    const odd = { ...answer, TaskGroups: answer.TaskGroups.map((g) => ({ ...g, Count: -1 })) };
    expect(decodeJob(odd).job.groups.map((g) => g.name)).toEqual(spec.groups.map((g) => g.name));
  });

  it("counts a JobListStub's JobSummary by client status, every group of the spec listed", async () => {
    const spec = await readSpec('examples/workload.nomad.hcl');
    const stub = encodeJobListStub(fullView(spec));
    const group = spec.groups[0]!.name;
    expect(stub.JobSummary.JobID).toBe(spec.id);
    expect(stub.JobSummary.Summary[group]).toEqual({ Queued: 0, Complete: 1, Failed: 1, Running: 1, Starting: 1, Lost: 0, Unknown: 0 });
    expect(Object.keys(encodeJobListStub(bareView(spec)).JobSummary.Summary)).toEqual(spec.groups.map((g) => g.name));
  });

  it('survives JobPlanResponse, with every optional field set and with none', () => {
    expect(decodeJobPlanResponse(wire(encodeJobPlanResponse(fullPlan)))).toEqual(fullPlan);
    expect(decodeJobPlanResponse(wire(encodeJobPlanResponse(barePlan)))).toEqual(barePlan);
  });

  it("answers a plan's Diff and Annotations as Nomad's scheduler names them", () => {
    const answer = encodeJobPlanResponse(fullPlan);
    expect(answer.Diff.Type).toBe('Edited');
    expect(answer.Diff.TaskGroups[0]).toMatchObject({
      Type: 'Edited',
      Name: 'app',
      Updates: { create: 1, destroy: 1, 'create/destroy update': 1, 'in-place update': 1, ignore: 1 },
    });
    expect(answer.Diff.TaskGroups[0]!.Fields![0]).toEqual({
      Type: 'Added',
      Name: 'task "t" env.FOO',
      Old: '',
      New: '"1"',
      Annotations: ['forces create/destroy update'],
    });
    expect(answer.Diff.TaskGroups[1]!.Type).toBe('Deleted');
    expect(answer.Annotations.DesiredTGUpdates.app).toEqual({
      Ignore: 1,
      Place: 1,
      Migrate: 0,
      Stop: 1,
      InPlaceUpdate: 1,
      DestructiveUpdate: 1,
      Canary: 0,
      Preemptions: 0,
    });
    expect(encodeJobPlanResponse({ ...barePlan, version: { to: 0 } }).Diff.Type).toBe('Added');
    expect(encodeJobPlanResponse({ ...barePlan, version: { from: 0, to: 0 } }).Diff.Type).toBe('None');
  });

  it('answers a plan that starts a stopped job again as Edited, with Stop true → false (nomad job plan exits 1)', () => {
    const restart: JobPlan = {
      ...barePlan,
      version: { from: 1, to: 1 },
      groups: [
        {
          name: 'app',
          change: 'none',
          count: { from: 1, to: 1 },
          fields: [],
          updates: { create: 1, destroy: 0, 'create/destroy': 0, 'in-place': 0, ignore: 0 },
          allocs: [{ update: 'create', index: 0, name: 'web.app[0]', reason: 'the job is stopped' }],
        },
      ],
    };
    expect(encodeJobPlanResponse(restart).Diff.Type).toBe('None');
    const answer = encodeJobPlanResponse(restart, { stopped: true });
    expect(answer.Diff.Type).toBe('Edited');
    expect(answer.Diff.Fields).toEqual([{ Type: 'Edited', Name: 'Stop', Old: 'true', New: 'false', Annotations: null }]);
    expect(decodeJobPlanResponse(wire(answer))).toEqual(restart);
    // A stopped job whose plan places nothing is not started again: None.
    expect(encodeJobPlanResponse({ ...barePlan, version: { from: 1, to: 1 } }, { stopped: true }).Diff.Type).toBe('None');
  });

  it('survives JobRegisterResponse, EvalID empty (csiplug has no evaluations)', () => {
    const full: RunJobResult = {
      jobId: 'web',
      allocIds: ['a-1'],
      replaced: true,
      unchanged: false,
      version: 2,
      deploymentId: 'd-2',
      plan: fullPlan,
      cluster: fullView({ id: 'web', name: 'web', groups: [{ name: 'app' }] } as unknown as JobSpec).cluster!,
    };
    const bare: RunJobResult = { jobId: 'web', allocIds: [], replaced: false, unchanged: true, version: 0, plan: barePlan };
    for (const result of [full, bare]) expect(decodeJobRegisterResponse(wire(encodeJobRegisterResponse(result)))).toEqual(result);
    expect(encodeJobRegisterResponse(bare)).toMatchObject({ EvalID: '', Warnings: '' });
  });
});
