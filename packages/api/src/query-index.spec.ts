// Nomad's query metadata and blocking queries (query-index.ts), over a real
// server on 127.0.0.1:0, the in-memory service and a fake clock for the wait.
import { FakeClock, flushMicrotasks } from '@csiplug/core/testing';
import * as http from 'http';
import type { HttpApi } from './http-api';
import { AnswerIndexes } from './query-index';
import { FakeAgentService, nomadJob, raw, startApi } from './testing';

describe("Nomad's X-Nomad-Index and blocking queries", () => {
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
    await api.dispose();
  });

  const indexOf = (r: { headers: Record<string, unknown> }) => Number(r.headers['x-nomad-index']);
  const runJob = async (id: string) =>
    expect((await raw(url, 'POST', '/v1/jobs', { body: JSON.stringify({ Job: nomadJob(id) }) })).status).toBe(200);

  it('answers every read with an index that changes only when its answer does, and the leader headers', async () => {
    const first = await raw(url, 'GET', '/v1/jobs');
    expect(first.headers['x-nomad-knownleader']).toBe('true');
    expect(first.headers['x-nomad-lastcontact']).toBe('0');
    expect(indexOf(first)).toBeGreaterThan(0);
    expect(indexOf(await raw(url, 'GET', '/v1/jobs'))).toBe(indexOf(first));
    const volumes = indexOf(await raw(url, 'GET', '/v1/volumes'));
    await runJob('web');
    const after = await raw(url, 'GET', '/v1/jobs');
    expect(indexOf(after)).toBeGreaterThan(indexOf(first));
    // Another answer the run did not change keeps its index; the blocking query's own parameters are not part of it.
    expect(indexOf(await raw(url, 'GET', '/v1/volumes'))).toBe(volumes);
    expect(indexOf(await raw(url, 'GET', `/v1/jobs?index=1&wait=1s`))).toBe(indexOf(after));
    // Writes and errors carry none.
    expect((await raw(url, 'GET', '/v1/job/nope')).headers['x-nomad-index']).toBeUndefined();
  });

  it('starts above every index an earlier run gave, so a client never sees it go back across a restart', () => {
    const before = new FakeClock(Date.UTC(2026, 0, 1));
    const earlier = new AnswerIndexes(before);
    let last = 0;
    for (let i = 0; i < 500; i++) last = earlier.indexOf(`/v1/jobs?`, i);
    const restarted = new AnswerIndexes(new FakeClock(Date.UTC(2026, 0, 1) + 1));
    expect(restarted.indexOf('/v1/jobs?', 0)).toBeGreaterThan(last);
    expect(Number.isSafeInteger(last)).toBe(true);
  });

  it('holds a query with ?index= until its answer changes, then answers it with the new index', async () => {
    const seen = indexOf(await raw(url, 'GET', '/v1/jobs'));
    let answered: Awaited<ReturnType<typeof raw>> | undefined;
    const waiting = raw(url, 'GET', `/v1/jobs?index=${seen}&wait=5m`).then((r) => (answered = r));
    // An event that changes nothing this answer shows does not end the wait.
    await raw(url, 'GET', '/v1/volumes');
    fake.emit({ topic: 'Node', type: 'Noise', message: 'nothing the jobs list shows' });
    await new Promise((r) => setTimeout(r, 200));
    expect(answered).toBeUndefined();
    await runJob('web');
    const r = await waiting;
    expect(r.status).toBe(200);
    expect(indexOf(r)).toBeGreaterThan(seen);
    expect((r.json as unknown as { ID: string }[]).map((j) => j.ID)).toEqual(['web']);
  });

  it('answers a held query when its wait is over, with the unchanged answer and index', async () => {
    const seen = indexOf(await raw(url, 'GET', '/v1/jobs'));
    let answered = false;
    const waiting = raw(url, 'GET', `/v1/jobs?index=${seen}&wait=30s`).then((r) => {
      answered = true;
      return r;
    });
    await new Promise((r) => setTimeout(r, 100));
    await clock.advance(29_000);
    await flushMicrotasks();
    expect(answered).toBe(false);
    // Plus Nomad's jitter of up to a sixteenth of the wait.
    await clock.advance(1_000 + 30_000 / 16);
    const r = await waiting;
    expect(r.status).toBe(200);
    expect(indexOf(r)).toBe(seen);
  });

  it('lets a held query go when its client hangs up: nothing is left in progress', async () => {
    const seen = indexOf(await raw(url, 'GET', '/v1/jobs'));
    const agent = new http.Agent();
    const hungUp = raw(url, 'GET', `/v1/jobs?index=${seen}&wait=5m`, { agent }).catch(() => 'hung up');
    await new Promise((r) => setTimeout(r, 100));
    agent.destroy();
    expect(await hungUp).toBe('hung up');
    // With a request still in progress, closing would wait out its grace period on the fake clock, which nobody advances.
    await api.dispose();
  });

  it('answers at once when the index asked for is already passed, and refuses a bad index or wait', async () => {
    const seen = indexOf(await raw(url, 'GET', '/v1/jobs'));
    expect(indexOf(await raw(url, 'GET', `/v1/jobs?index=${seen - 1}&wait=5m`))).toBe(seen);
    const bad = await raw(url, 'GET', '/v1/jobs?index=soon');
    expect(bad.status).toBe(400);
    expect(bad.error).toMatch(/query parameter index must be a whole number/);
    const badWait = await raw(url, 'GET', `/v1/jobs?index=${seen}&wait=forever`);
    expect(badWait.status).toBe(400);
    expect(badWait.error).toMatch(/query parameter wait must be a Go duration such as "30s"/);
  });
});
