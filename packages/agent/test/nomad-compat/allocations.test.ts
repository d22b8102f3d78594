// Nomad compatibility, allocations and their logs: a real agent runs a
// raw_exec job that prints lines, and a Nomad-style client (nomad-api.ts,
// no csiplug types) reads what a Nomad tool reads: the allocation list
// (api.AllocationListStub), one allocation (api.Allocation with its
// TaskStates, TaskEvents and Metrics), and the task's log through
// /v1/client/fs/logs as api.AllocFS.Logs asks for it for `nomad alloc
// logs` (StreamFrames with base64 Data), as python-nomad and curl ask for
// it (plain=true), and followed (follow=true, as `nomad alloc logs -f`):
// heartbeats, and open until the alloc is purged.
import type * as http from 'http';
import { AgentHarness, pollUntil } from '../support/agent-process';
import { NomadApi, type NomadResponseError } from './nomad-api';

jest.setTimeout(120_000);

/** api.TaskEvent (the fields read here). */
interface TaskEvent {
  Type: string;
  Time: number;
  DisplayMessage: string;
  Details?: Record<string, string>;
}

/** api.TaskState. */
interface TaskState {
  State: string;
  Failed: boolean;
  Restarts: number;
  StartedAt: string;
  FinishedAt: string;
  Events: TaskEvent[];
}

/** api.AllocDeploymentStatus. */
interface AllocDeploymentStatus {
  Healthy: boolean | null;
  Timestamp: string;
}

/** api.AllocationListStub (the fields read here). */
interface AllocationListStub {
  ID: string;
  Name: string;
  Namespace: string;
  NodeID: string;
  NodeName: string;
  JobID: string;
  JobType: string;
  JobVersion: number;
  TaskGroup: string;
  DesiredStatus: string;
  ClientStatus: string;
  TaskStates: Record<string, TaskState>;
  DeploymentStatus?: AllocDeploymentStatus;
  CreateTime: number;
  ModifyTime: number;
}

/** api.AllocationMetric (the fields `nomad alloc status -verbose` reads). */
interface AllocationMetric {
  NodesEvaluated: number;
  NodesFiltered: number;
  NodesAvailable: Record<string, number>;
  ClassFiltered: Record<string, number>;
  ConstraintFiltered: Record<string, number>;
  NodesExhausted: number;
  ClassExhausted: Record<string, number>;
  DimensionExhausted: Record<string, number>;
  QuotaExhausted: string[];
  ScoreMetaData: unknown[];
  AllocationTime: number;
  CoalescedFailures: number;
}

/** api.Allocation (the fields read here). */
interface Allocation extends Omit<AllocationListStub, 'JobType' | 'JobVersion'> {
  Metrics: AllocationMetric;
  Job: {
    ID: string;
    Name: string;
    Type: string;
    Version: number;
    TaskGroups: { Name: string; Tasks: { Name: string; Driver: string }[] }[];
  };
  DeploymentID?: string;
}

/** api.StreamFrame. */
interface StreamFrame {
  Offset?: number;
  Data?: string;
  File?: string;
  FileEvent?: string;
}

const PRINTER_HCL = `
job "printer" {
  group "app" {
    task "main" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "for i in 1 2 3; do echo \\"line $i\\"; done; echo oops >&2; exec sleep 3600"]
      }
      kill_timeout = "1s"
    }
  }
}`;

/** Writes a numbered line every 0.2 s, forever. */
const TICKER_HCL = `
job "ticker" {
  group "app" {
    task "main" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "i=0; while true; do i=$((i+1)); echo \\"tick $i\\"; sleep 0.2; done"]
      }
      kill_timeout = "1s"
    }
  }
}`;

/** The whole body of a streaming answer. */
async function readBody(res: http.IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of res as AsyncIterable<Buffer>) chunks.push(c);
  return Buffer.concat(chunks);
}

/** Frames as Go's json.Decoder reads them off the stream: one JSON value after another. */
function frames(body: Buffer): StreamFrame[] {
  return body
    .toString('utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as StreamFrame);
}

const dataOf = (fs: StreamFrame[]): string => Buffer.concat(fs.map((f) => Buffer.from(f.Data ?? '', 'base64'))).toString('utf8');

describe('Nomad compatibility: allocations and logs', () => {
  let h: AgentHarness;
  let nomad: NomadApi;
  let allocId: string;

  beforeAll(async () => {
    h = new AgentHarness();
    await h.start();
    nomad = new NomadApi(`http://127.0.0.1:${h.port}`);
    // As a Nomad tool runs a jobspec: parse it to Nomad's JSON, then register it.
    const parsed = await nomad.post<Record<string, unknown>>('/v1/jobs/parse', { JobHCL: PRINTER_HCL, Canonicalize: true });
    await nomad.put('/v1/jobs', { Job: parsed.body });
    const running = await pollUntil('the printer alloc running with its lines written', async () => {
      const { body } = await nomad.get<AllocationListStub[]>('/v1/job/printer/allocations');
      const a = body.find((x) => x.ClientStatus === 'running');
      if (!a) return undefined;
      const logs = await nomad.stream(`/v1/client/fs/logs/${a.ID}`, { task: 'main', type: 'stdout', plain: true });
      return (await readBody(logs)).toString('utf8').includes('line 3') ? a : undefined;
    });
    allocId = running.ID;
  });

  afterAll(async () => {
    await h.cleanup();
  });

  it('GET /v1/allocations answers []AllocationListStub with X-Nomad-Index', async () => {
    const answer = await nomad.get<AllocationListStub[]>('/v1/allocations');
    expect(answer.status).toBe(200);
    expect(answer.lastIndex).toBeGreaterThan(0);
    const stub = answer.body.find((a) => a.ID === allocId)!;
    expect(stub).toMatchObject({
      Name: 'printer.app[0]',
      Namespace: 'default',
      JobID: 'printer',
      JobType: 'service',
      JobVersion: 0,
      TaskGroup: 'app',
      DesiredStatus: 'run',
      ClientStatus: 'running',
    });
    expect(typeof stub.NodeID).toBe('string');
    expect(stub.NodeID).not.toBe('');
    expect(typeof stub.NodeName).toBe('string');
    expect(Number.isInteger(stub.CreateTime)).toBe(true);
    // The latest task event's time: the task has started since the alloc was made.
    expect(stub.ModifyTime).toBeGreaterThan(stub.CreateTime);
    // A list carries no job (its env, templates and secrets): not even in Csiplug.
    expect(JSON.stringify(answer.body)).not.toContain('/bin/sh');
    // Unix nanoseconds: a time after 2020 in ns is over 1.5e18.
    expect(stub.CreateTime).toBeGreaterThan(1.5e18);
    const main = stub.TaskStates.main!;
    expect(main.State).toBe('running');
    expect(main.Failed).toBe(false);
    expect(typeof main.Restarts).toBe('number');
    expect(Date.parse(main.StartedAt)).toBeGreaterThan(Date.UTC(2020, 0));
    expect(main.FinishedAt).toBe('0001-01-01T00:00:00Z');
    // The job's own list says the same.
    const ofJob = await nomad.get<AllocationListStub[]>('/v1/job/printer/allocations');
    expect(ofJob.lastIndex).toBeGreaterThan(0);
    expect(ofJob.body.map((a) => a.ID)).toContain(allocId);
  });

  it('GET /v1/allocation/:id answers the Allocation with its Job, TaskStates and TaskEvents', async () => {
    const answer = await nomad.get<Allocation>(`/v1/allocation/${allocId}`);
    expect(answer.lastIndex).toBeGreaterThan(0);
    const alloc = answer.body;
    expect(alloc).toMatchObject({ ID: allocId, Namespace: 'default', JobID: 'printer', TaskGroup: 'app', ClientStatus: 'running' });
    expect(alloc.Job).toMatchObject({ ID: 'printer', Type: 'service', Version: 0 });
    // What `nomad alloc status` and its -verbose read (a missing Metrics or Job.Version panics it).
    expect(Number.isInteger(alloc.ModifyTime)).toBe(true);
    expect(alloc.ModifyTime).toBeGreaterThanOrEqual(alloc.CreateTime);
    expect(alloc.Metrics).toMatchObject({ NodesEvaluated: 1, NodesFiltered: 0, NodesAvailable: { dc1: 1 }, NodesExhausted: 0 });
    expect(alloc.Metrics.QuotaExhausted).toEqual([]);
    expect(alloc.Job.TaskGroups[0]!.Tasks[0]).toMatchObject({ Name: 'main', Driver: 'raw_exec' });
    const events = alloc.TaskStates.main!.Events;
    expect(events.length).toBeGreaterThan(0);
    for (const e of events) {
      expect(typeof e.Type).toBe('string');
      expect(Number.isInteger(e.Time)).toBe(true);
      expect(e.Time).toBeGreaterThan(1.5e18);
      expect(typeof e.DisplayMessage).toBe('string');
    }
    expect(events.map((e) => e.Type)).toContain('Started');
    await expect(nomad.get(`/v1/allocation/no-such-alloc`)).rejects.toMatchObject({ status: 404 });
  });

  it('GET /v1/client/fs/logs/:alloc_id as api.AllocFS.Logs asks (`nomad alloc logs`): StreamFrames whose Data is the log, base64', async () => {
    // The parameters exactly as the Go client sets them (follow=false included).
    const res = await nomad.stream(`/v1/client/fs/logs/${allocId}`, {
      follow: false,
      task: 'main',
      type: 'stdout',
      origin: 'start',
      offset: 0,
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/json');
    const got = frames(await readBody(res));
    expect(got.length).toBeGreaterThan(0);
    expect(dataOf(got)).toBe('line 1\nline 2\nline 3\n');
    // Each frame's Offset is where its bytes end in the file.
    expect(got[got.length - 1]!.Offset).toBe(Buffer.byteLength('line 1\nline 2\nline 3\n'));
    // From the end, as `nomad alloc logs -tail -c 7` asks.
    const tail = frames(
      await readBody(await nomad.stream(`/v1/client/fs/logs/${allocId}`, { task: 'main', type: 'stdout', origin: 'end', offset: 7 })),
    );
    expect(dataOf(tail)).toBe('line 3\n');
    const stderr = frames(await readBody(await nomad.stream(`/v1/client/fs/logs/${allocId}`, { task: 'main', type: 'stderr' })));
    expect(dataOf(stderr)).toBe('oops\n');
    // As python-nomad asks (Python's bools: False), which Go's strconv.ParseBool reads: frames, not followed.
    const python = await nomad.stream(`/v1/client/fs/logs/${allocId}`, { task: 'main', type: 'stdout', follow: 'False', plain: 'False' });
    expect(python.headers['content-type']).toBe('application/json');
    expect(dataOf(frames(await readBody(python)))).toBe('line 1\nline 2\nline 3\n');
    // A negative offset from the start counts back from the end, as Nomad's client/fs_endpoint.go reads it.
    expect(
      dataOf(frames(await readBody(await nomad.stream(`/v1/client/fs/logs/${allocId}`, { task: 'main', type: 'stdout', offset: -7 })))),
    ).toBe('line 3\n');
  });

  it('plain=true answers the raw bytes, as python-nomad and curl read them', async () => {
    const res = await nomad.stream(`/v1/client/fs/logs/${allocId}`, {
      task: 'main',
      type: 'stdout',
      origin: 'start',
      offset: 7,
      plain: true,
    });
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    expect((await readBody(res)).toString('utf8')).toBe('line 2\nline 3\n');
  });

  it('follow=true, as `nomad alloc logs -f` asks: frames as the task writes them, heartbeats, open after the alloc stopped until it is purged', async () => {
    const parsed = await nomad.post<Record<string, unknown>>('/v1/jobs/parse', { JobHCL: TICKER_HCL, Canonicalize: true });
    await nomad.put('/v1/jobs', { Job: parsed.body });
    const ticker = await pollUntil('the ticker alloc running', async () => {
      const { body } = await nomad.get<AllocationListStub[]>('/v1/job/ticker/allocations');
      return body.find((x) => x.ClientStatus === 'running');
    });
    const query = { follow: true, task: 'main', type: 'stdout', origin: 'start', offset: 0 };
    const res = await nomad.stream(`/v1/client/fs/logs/${ticker.ID}`, query);
    let text = '';
    let heartbeats = 0;
    let ended = false;
    let cut = false;
    let pending = '';
    res.setEncoding('utf8');
    res.on('data', (c: string) => {
      pending += c;
      const lines = pending.split('\n');
      pending = lines.pop()!;
      for (const l of lines) {
        const frame = JSON.parse(l) as StreamFrame;
        // Nomad's heartbeat, which its FrameReader skips.
        if (Object.keys(frame).length === 0) heartbeats++;
        text += dataOf([frame]);
      }
    });
    res.on('end', () => (ended = res.complete));
    res.on('aborted', () => (cut = true));
    try {
      // What was there when the follow began, then lines the task wrote after it: the answer went on.
      const unfollowed = dataOf(
        frames(await readBody(await nomad.stream(`/v1/client/fs/logs/${ticker.ID}`, { task: 'main', type: 'stdout' }))),
      );
      const later = `tick ${unfollowed.split('\n').length + 3}\n`;
      await pollUntil(`the followed log to reach "${later.trim()}"`, () => (text.includes(later) ? true : undefined), 30_000);
      expect(ended).toBe(false);
      expect(text.startsWith('tick 1\ntick 2\n')).toBe(true);
      // Stopped: the task writes no more, and the answer stays open with heartbeats (a clean end makes Nomad's CLI read again, forever).
      await nomad.delete('/v1/job/ticker');
      await pollUntil('the ticker alloc stopped', async () => {
        const { body } = await nomad.get<Allocation>(`/v1/allocation/${ticker.ID}`);
        return body.ClientStatus === 'complete' || body.ClientStatus === 'failed' ? true : undefined;
      });
      const beatsBefore = heartbeats;
      await pollUntil('heartbeats after the alloc stopped', () => (heartbeats >= beatsBefore + 2 ? true : undefined), 30_000);
      expect(ended || cut).toBe(false);
      // Purged: nothing is left to read, and the answer ends cleanly.
      await nomad.delete('/v1/job/ticker', { purge: true });
      await pollUntil('the followed answer to end once the alloc is purged', () => (ended || cut ? true : undefined), 30_000);
      expect(cut).toBe(false);
    } finally {
      res.destroy();
    }
  });

  it("refuses what Nomad refuses, with Nomad's texts and status codes", async () => {
    const err = (query: Record<string, string>) =>
      nomad.stream(`/v1/client/fs/logs/${allocId}`, query).then(
        () => undefined,
        (e: unknown) => e as NomadResponseError,
      );
    expect(await err({ type: 'stdout' })).toMatchObject({ status: 400, text: expect.stringMatching(/^must provide task name/) });
    expect(await err({ task: 'main' })).toMatchObject({
      status: 400,
      text: expect.stringMatching(/^must provide log type \(stdout\/stderr\)/),
    });
    expect(await err({ task: 'nope', type: 'stdout' })).toMatchObject({
      status: 400,
      text: expect.stringMatching(/^unknown task name "nope"/),
    });
    const gone = await nomad.stream('/v1/client/fs/logs/no-such-alloc', { task: 'main', type: 'stdout' }).catch((e: unknown) => e);
    expect(gone).toMatchObject({ status: 404 });
  });
});
