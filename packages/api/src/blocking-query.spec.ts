// Blocking queries held by the HTTP API (query-index.ts, http-api.ts) at
// their edges: events during the first look, clients gone before the wait,
// shutdown and token changes, reads that call plugins, shared computes,
// Nomad's wait limits, and the index writes answer with. A real server on
// 127.0.0.1:0, the in-memory service and a fake clock for the waits.
import { Emitter } from '@csiplug/core';
import { FakeClock, flushMicrotasks } from '@csiplug/core/testing';
import * as http from 'http';
import type { HttpApi } from './http-api';
import { AnswerIndexes, DEFAULT_QUERY_WAIT_MS, MAX_QUERY_WAIT_MS, SharedComputes, answerBlocking, blockingParams } from './query-index';
import type { AgentEvent, JobView } from './service';
import { FakeAgentService, nomadJob, raw, startApi, volumeBody } from './testing';

type Answer = Awaited<ReturnType<typeof raw>>;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(cond: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (cond()) return;
    await sleep(10);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Whether `p` settles within a short real-time window (the fake clock never moves on its own). */
async function settlesSoon<T>(p: Promise<T>, ms = 1000): Promise<boolean> {
  return Promise.race([p.then(() => true), sleep(ms).then(() => false)]);
}

const indexOf = (r: { headers: Record<string, unknown> }) => Number(r.headers['x-nomad-index']);

describe('blocking queries at their edges', () => {
  let fake: FakeAgentService;
  let clock: FakeClock;
  let api: HttpApi;
  let url: string;

  beforeEach(async () => {
    fake = new FakeAgentService();
    clock = new FakeClock();
    ({ api, url } = await startApi(fake, { clock }));
  });

  afterEach(async () => {
    jest.restoreAllMocks();
    // A held query left over would make closing wait for it: closing ends them at once.
    await api.dispose();
  });

  const runJob = async (id: string) => {
    const r = await raw(url, 'POST', '/v1/jobs', { body: JSON.stringify({ Job: nomadJob(id) }) });
    expect(r.status).toBe(200);
    return r;
  };

  it('sees an event that lands while the first answer is computed: it looks again rather than wait', async () => {
    const seen = indexOf(await raw(url, 'GET', '/v1/jobs'));
    const listJobs = fake.listJobs.bind(fake);
    const before = listJobs();
    await runJob('web');
    // The held query's first look reads the jobs as they were; the change's event comes during that look.
    jest.spyOn(fake, 'listJobs').mockImplementationOnce((): JobView[] => {
      fake.emit({ topic: 'Job', type: 'JobRegistered', message: 'job web registered', jobId: 'web' });
      return before;
    });
    const held = raw(url, 'GET', `/v1/jobs?index=${seen}&wait=5m`);
    expect(await settlesSoon(held)).toBe(true);
    const r = await held;
    expect(indexOf(r)).toBeGreaterThan(seen);
    expect((r.json as unknown as { ID: string }[]).map((j) => j.ID)).toEqual(['web']);
  });

  it('ends a held query whose client hung up during its first look, and never looks again', async () => {
    // Every held route of the server computes at once (the one that awaits, /v1/nodes, answers at once): the wait itself is
    // driven here with a compute that takes its time, as a route reading from somewhere would.
    const events = new Emitter<AgentEvent>();
    const gone = new AbortController();
    let release: () => void = () => undefined;
    const released = new Promise<void>((r) => (release = r));
    let looks = 0;
    const indexes = new AnswerIndexes(clock);
    const answer = answerBlocking(
      {
        onEvent: events.event,
        clock,
        indexes,
        shared: new SharedComputes(),
        key: '/v1/x?',
        blocking: { minIndex: indexes.next(), waitMs: DEFAULT_QUERY_WAIT_MS },
        signal: gone.signal,
      },
      async () => {
        looks++;
        if (looks === 1) await released;
        return { body: ['first look'] };
      },
    );
    await until(() => looks === 1, 'the first look to start');
    gone.abort();
    release();
    // It ends with the look under way, whose answer it then is.
    expect(await settlesSoon(answer)).toBe(true);
    expect((await answer)?.reply.body).toEqual(['first look']);
    events.fire({ index: 1, time: 0, topic: 'Node', type: 'Noise', message: 'an event after the client left' });
    await sleep(50);
    expect(looks).toBe(1);
  });

  it('answers held queries at once when the API closes, so closing never waits on them', async () => {
    const seen = indexOf(await raw(url, 'GET', '/v1/jobs'));
    const held = raw(url, 'GET', `/v1/jobs?index=${seen}&wait=10m`);
    await sleep(100);
    // The grace period runs on the fake clock, which nobody advances: only ending the held query lets closing finish.
    expect(await settlesSoon(api.dispose())).toBe(true);
    const r = await held;
    expect(r.status).toBe(200);
    expect(indexOf(r)).toBe(seen);
    expect(r.json).toEqual([]);
  });

  it('ends a held query with a 403, never with data, when a token change leaves its caller out', async () => {
    await api.dispose();
    ({ api, url } = await startApi(fake, { clock, aclToken: 'old-token' }));
    const headers = { 'X-Nomad-Token': 'old-token' };
    const seen = indexOf(await raw(url, 'GET', '/v1/jobs', { headers }));
    const held = raw(url, 'GET', `/v1/jobs?index=${seen}&wait=5m`, { headers });
    await sleep(100);
    api.setAclToken('new-token');
    expect(await settlesSoon(held)).toBe(true);
    const r = await held;
    expect(r.status).toBe(403);
    expect(r.json).toBeUndefined();
    expect(r.error).toMatch(/the ACL token in X-Nomad-Token is not valid/);
  });

  it('stops a plain log stream when a token change leaves its caller out, rather than sending the rest', async () => {
    await api.dispose();
    ({ api, url } = await startApi(fake, { clock, aclToken: 'old-token' }));
    const headers = { 'X-Nomad-Token': 'old-token' };
    const run = await raw(url, 'POST', '/v1/jobs', { body: JSON.stringify({ Job: nomadJob('web') }), headers });
    const allocId = (run.json as unknown as { Csiplug: { allocIds: string[] } }).Csiplug.allocIds[0]!;
    const total = 32 * 1024 * 1024;
    fake.logs.set(`${allocId}/main/stdout`, Buffer.alloc(total, 'x'));
    const got = await new Promise<{ bytes: number; complete: boolean }>((resolve) => {
      const req = http.get(new URL(`/v1/client/fs/logs/${allocId}?task=main&type=stdout&plain=true`, url), { headers }, (res) => {
        let bytes = 0;
        let changed = false;
        res.on('data', (c: Buffer) => {
          bytes += c.length;
          if (changed) return;
          // The reader stops; the token changes; then it reads on.
          changed = true;
          res.pause();
          api.setAclToken('new-token');
          setTimeout(() => res.resume(), 200);
        });
        res.on('close', () => resolve({ bytes, complete: res.complete }));
      });
      req.on('error', () => undefined);
    });
    expect(got.complete).toBe(false);
    expect(got.bytes).toBeLessThan(total);
  });

  it('answers reads that call a plugin at once, with an index, whatever index and wait ask', async () => {
    expect((await raw(url, 'PUT', '/v1/volume/csi/vol1', { body: JSON.stringify(volumeBody('vol1')) })).status).toBe(200);
    for (const path of ['/v1/volumes/external', '/v1/volumes/snapshot', '/v1/volume/csi/vol1/usage']) {
      const first = await raw(url, 'GET', path);
      expect(first.status).toBe(200);
      const held = raw(url, 'GET', `${path}?index=${indexOf(first) + 1000}&wait=5m`);
      expect(await settlesSoon(held)).toBe(true);
      const r = await held;
      expect(r.status).toBe(200);
      expect(indexOf(r)).toBe(indexOf(first));
    }
  });

  it('shares one compute per event among identical held queries', async () => {
    const seen = indexOf(await raw(url, 'GET', '/v1/jobs'));
    const looks = jest.spyOn(fake, 'listJobs');
    const held = [1, 2, 3].map(() => raw(url, 'GET', `/v1/jobs?index=${seen}&wait=5m`));
    await until(() => looks.mock.calls.length === 3, 'the three first looks');
    await sleep(50);
    fake.emit({ topic: 'Node', type: 'Noise', message: 'nothing the jobs list shows' });
    await sleep(100);
    expect(looks.mock.calls.length).toBe(4);
    await runJob('web');
    for (const r of await Promise.all(held)) expect(indexOf(r)).toBeGreaterThan(seen);
  });

  it("holds a query up to Nomad's 5 minute maximum, then answers it", async () => {
    const seen = indexOf(await raw(url, 'GET', '/v1/jobs'));
    let answered: Answer | undefined;
    const held = raw(url, 'GET', `/v1/jobs?index=${seen}&wait=20m`).then((r) => (answered = r));
    await sleep(100);
    await clock.advance(MAX_QUERY_WAIT_MS - 1);
    await flushMicrotasks();
    await sleep(50);
    expect(answered).toBeUndefined();
    // Plus Nomad's jitter of up to a sixteenth of the wait.
    await clock.advance(MAX_QUERY_WAIT_MS / 16 + 1);
    expect(indexOf(await held)).toBe(seen);
  });

  it("takes Nomad's wait: a Go duration, 5m when absent or 0, at most 5m, plus up to wait/16 of jitter", async () => {
    const most = (below: number) => Math.max(0, below - 1);
    expect(MAX_QUERY_WAIT_MS).toBe(5 * 60_000);
    expect(blockingParams(new URLSearchParams('index=5&wait=16m'), most)).toEqual({ minIndex: 5, waitMs: MAX_QUERY_WAIT_MS + 18_749 });
    expect(blockingParams(new URLSearchParams('index=5'), most)?.waitMs).toBe(DEFAULT_QUERY_WAIT_MS + 18_749);
    expect(blockingParams(new URLSearchParams('index=5&wait=0s'), () => 0)?.waitMs).toBe(DEFAULT_QUERY_WAIT_MS);
    expect(blockingParams(new URLSearchParams('index=5&wait=1m30s'), () => 0)?.waitMs).toBe(90_000);
    // No index: no blocking; a wait that is no duration is refused all the same, as Nomad's parseWait refuses it.
    expect(blockingParams(new URLSearchParams('index=0&wait=5m'))).toBeUndefined();
    expect(() => blockingParams(new URLSearchParams('wait=bad'))).toThrow(/query parameter wait must be a Go duration/);
    for (const wait of ['1d', '5', 'soon', '1 m']) {
      const r = await raw(url, 'GET', `/v1/jobs?index=5&wait=${encodeURIComponent(wait)}`);
      expect(r.status).toBe(400);
      expect(r.error).toMatch(/query parameter wait must be a Go duration such as "30s"/);
    }
  });

  it('answers every successful write with a new, higher index; a read blocked on it shows the write at once', async () => {
    const read = indexOf(await raw(url, 'GET', '/v1/jobs'));
    const run = await runJob('web');
    const runIndex = indexOf(run);
    expect(runIndex).toBeGreaterThan(read);
    const after = raw(url, 'GET', `/v1/jobs?index=${runIndex}&wait=5m`);
    expect(await settlesSoon(after)).toBe(true);
    expect(((await after).json as unknown as { ID: string }[]).map((j) => j.ID)).toEqual(['web']);

    let last = runIndex;
    const writes: Array<[string, string, string?]> = [
      ['PUT', '/v1/volume/csi/vol1', JSON.stringify(volumeBody('vol1'))],
      ['PUT', '/v1/volumes/snapshot', JSON.stringify({ Snapshots: [{ SourceVolumeID: 'vol1', Name: 's1' }] })],
      ['DELETE', '/v1/job/web'],
      ['DELETE', '/v1/volume/csi/vol1'],
    ];
    for (const [method, path, body] of writes) {
      const r = await raw(url, method, path, body !== undefined ? { body } : {});
      expect(r.status).toBe(200);
      expect(indexOf(r)).toBeGreaterThan(last);
      last = indexOf(r);
    }
    // A refused write carries none.
    const refused = await raw(url, 'PUT', '/v1/jobs', { body: JSON.stringify({ Job: { ID: '' } }) });
    expect(refused.status).toBe(400);
    expect(refused.headers['x-nomad-index']).toBeUndefined();
  });

  it("keeps a digest of each answer key, not the client's own path and query", () => {
    const indexes = new AnswerIndexes(new FakeClock());
    const long = 'x'.repeat(8000);
    for (let i = 0; i < 1100; i++) indexes.indexOf(`/v1/jobs?filter=${long}${i}`, i);
    expect(indexes.keptKeyChars).toBeLessThanOrEqual(1024 * 44);
  });
});
