// The alloc wire round trip: an AllocView through Nomad's Allocation and
// AllocationListStub (as JSON text, as the API carries them) comes back
// equal, with every optional field set and with none; and a log range
// through StreamFrames comes back byte for byte.
import { type JobSpec, parseJobspec } from '@csiplug/jobspec';
import type { AllocView } from '../service';
import {
  type AllocStubView,
  type NomadAllocation,
  deploymentStub,
  type NomadAllocationListStub,
  decodeAlloc,
  decodeAllocStub,
  decodeLogFrames,
  encodeAlloc,
  encodeAllocStub,
  encodeLogFrame,
} from './alloc-wire';

const JOB_HCL = `
job "web" {
  datacenters = ["dc1"]
  group "g" {
    count = 2
    volume "data" {
      type            = "csi"
      source          = "vol1"
      attachment_mode = "file-system"
      access_mode     = "single-node-writer"
    }
    task "main" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo hi; sleep 60"]
      }
    }
  }
}
`;

const throughJson = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

function bare(job: JobSpec): AllocView {
  return {
    id: '6d1c8f0e-2b1a-4c3d-9e8f-0a1b2c3d4e5f',
    jobId: 'web',
    group: 'g',
    index: 0,
    name: 'web.g[0]',
    job,
    desiredStatus: 'run',
    clientStatus: 'pending',
    createdAt: 1_733_325_000_123,
    tasks: {},
    volumes: {},
  };
}

function full(job: JobSpec): AllocView {
  return {
    ...bare(job),
    index: 1,
    name: 'web.g[1]',
    jobVersion: 3,
    desiredStatus: 'stop',
    clientStatus: 'failed',
    deploymentId: 'dep-1',
    deploymentStatus: { healthy: false, time: 1_733_325_100_456, reason: 'task main exited' },
    jobDeployment: {
      id: 'dep-1',
      jobId: 'web',
      jobVersion: 3,
      job,
      status: 'failed',
      description: 'failed allocs',
      createdAt: 1_733_325_000_000,
      updatedAt: 1_733_325_200_000,
      revertTo: { version: 2, job },
      revertOf: 1,
    },
    tasks: {
      main: {
        state: 'dead',
        failed: true,
        restarts: 2,
        startedAt: 1_733_325_001_000,
        finishedAt: 1_733_325_099_000,
        exitCode: 3,
        signal: 'SIGTERM',
        events: [
          { type: 'Started', message: 'Task started by client', time: 1_733_325_001_000 },
          { type: 'Terminated', message: 'Exit Code: 3', time: 1_733_325_099_000, failed: true, details: { exit_code: '3' } },
        ],
      },
      side: { state: 'running', failed: false, restarts: 0, exitCode: null, signal: null, events: [] },
    },
    volumes: { data: { name: 'data', volumeId: 'vol1', pluginId: 'hostpath', hostPath: '/srv/data', readOnly: true } },
  };
}

describe("allocs on Nomad's wire", () => {
  let job: JobSpec;
  beforeAll(async () => {
    job = await parseJobspec(JOB_HCL, 'web.nomad.hcl');
  });

  it.each([
    ['every optional field set', full],
    ['no optional field set', bare],
  ])('an Allocation round-trips with %s', (_name, make) => {
    const view = make(job);
    // A version left out is 0 (as the Alloc record reads it): Nomad's Job.Version is always there.
    const read = { ...view, jobVersion: view.jobVersion ?? 0 };
    expect(decodeAlloc(throughJson(encodeAlloc(view, { id: 'node-1', name: 'host-a' })))).toEqual(read);
    expect(decodeAlloc(throughJson(encodeAlloc(view)))).toEqual(read);
  });

  it.each([
    ['every optional field set', full],
    ['no optional field set', bare],
  ])('an AllocationListStub round-trips with %s', (_name, make) => {
    const view = make(job);
    // A list carries no job, nor the deployment's copies of it: the rest comes back.
    const { job: _job, jobDeployment, ...rest } = view;
    const read: AllocStubView = { ...rest, jobVersion: view.jobVersion ?? 0 };
    if (jobDeployment) read.jobDeployment = deploymentStub(jobDeployment);
    expect(decodeAllocStub(throughJson(encodeAllocStub(view, { id: 'node-1', name: 'host-a' })))).toEqual(read);
  });

  it("answers in Nomad's field names, types and units", () => {
    const view = full(job);
    const wire: NomadAllocation = throughJson(encodeAlloc(view, { id: 'node-1', name: 'host-a' }));
    expect(wire).toMatchObject({
      ID: view.id,
      Namespace: 'default',
      Name: 'web.g[1]',
      NodeID: 'node-1',
      NodeName: 'host-a',
      JobID: 'web',
      Job: { ID: 'web', Version: 3, Type: 'service' },
      TaskGroup: 'g',
      DesiredStatus: 'stop',
      ClientStatus: 'failed',
      DeploymentID: 'dep-1',
      DeploymentStatus: { Healthy: false, Timestamp: '2024-12-04T15:11:40.456Z' },
      CreateTime: 1_733_325_000_123_000_000,
    });
    expect(wire.TaskStates.main).toMatchObject({
      State: 'dead',
      Failed: true,
      Restarts: 2,
      StartedAt: '2024-12-04T15:10:01.000Z',
      FinishedAt: '2024-12-04T15:11:39.000Z',
      Events: [
        { Type: 'Started', Time: 1_733_325_001_000_000_000, DisplayMessage: 'Task started by client' },
        { Type: 'Terminated', FailsTask: true, Details: { exit_code: '3' } },
      ],
    });
    // A task never started: Go's zero time, as Nomad sends it.
    expect(wire.TaskStates.side).toMatchObject({ StartedAt: '0001-01-01T00:00:00Z', FinishedAt: '0001-01-01T00:00:00Z' });
    const stub: NomadAllocationListStub = throughJson(encodeAllocStub(view));
    expect(stub).toMatchObject({ JobType: 'service', JobVersion: 3, TaskGroup: 'g' });
    expect(stub).not.toHaveProperty('Job');
    expect(stub).not.toHaveProperty('DeploymentID');
    // No job in a list (its templates, env and secrets): not in Csiplug, not in the deployment's copies.
    expect(stub.Csiplug).not.toHaveProperty('job');
    expect(stub.Csiplug.jobDeployment).toEqual({
      id: 'dep-1',
      jobId: 'web',
      jobVersion: 3,
      status: 'failed',
      description: 'failed allocs',
      createdAt: 1_733_325_000_000,
      updatedAt: 1_733_325_200_000,
      revertTo: { version: 2 },
      revertOf: 1,
    });
    expect(JSON.stringify(stub)).not.toContain('echo hi');
  });

  it('always sends the job version, ModifyTime and an honest Metrics (what `nomad alloc status` reads)', () => {
    const view = bare(job);
    const wire: NomadAllocation = throughJson(encodeAlloc(view, { id: 'node-1', name: 'host-a', datacenter: 'east' }));
    expect(wire.Job.Version).toBe(0);
    expect(throughJson(encodeAllocStub(view)).JobVersion).toBe(0);
    // No task event: ModifyTime is CreateTime; else the latest event's time.
    expect(wire.ModifyTime).toBe(wire.CreateTime);
    expect(throughJson(encodeAlloc(full(job))).ModifyTime).toBe(1_733_325_099_000_000_000);
    expect(wire.Metrics).toMatchObject({ NodesEvaluated: 1, NodesFiltered: 0, NodesAvailable: { east: 1 }, NodesExhausted: 0 });
    expect(throughJson(encodeAlloc(view)).Metrics.NodesAvailable).toEqual({ dc1: 1 });
  });

  it('reads an answer leniently, and says which answer is not one from a csiplug agent', () => {
    const wire = throughJson(encodeAlloc(full(job)));
    // A newer agent's field the job reader does not know is not a reason to refuse the answer.
    const newer = { ...wire, Job: { ...wire.Job, NodePool: 'default', SomethingNew: { a: 1 } } } as NomadAllocation;
    expect(decodeAlloc(newer).job).toEqual(job);
    const { Csiplug: _c, ...bareWire } = wire;
    expect(() => decodeAlloc(bareWire as unknown as NomadAllocation)).toThrow(
      /has no Csiplug field: the answer is not from a csiplug agent/,
    );
    const stub = throughJson(encodeAllocStub(full(job)));
    const { Csiplug: _s, ...bareStub } = stub;
    expect(() => decodeAllocStub(bareStub as unknown as NomadAllocationListStub)).toThrow(/has no Csiplug field/);
  });

  it('a log range goes through StreamFrames byte for byte, each frame ending at its Offset', () => {
    const chunks = [Buffer.from('héllo\n'), Buffer.from([0xff, 0x00, 0xe2]), Buffer.from([0x82, 0xac])];
    let end = 10;
    const text = chunks.map((c) => encodeLogFrame(c, (end += c.length))).join('');
    const frames = text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { Offset: number; Data: string });
    expect(frames.map((f) => f.Offset)).toEqual([17, 20, 22]);
    // A heartbeat frame ({}) carries nothing.
    expect(decodeLogFrames(`${text}{}\n`)).toEqual(Buffer.concat(chunks));
    expect(decodeLogFrames('')).toEqual(Buffer.alloc(0));
  });
});
