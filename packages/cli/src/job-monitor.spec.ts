// job run's watch, driven directly against a real HttpApi over the fake
// service: what the CLI tests cannot reach in reasonable time (an agent that
// never comes back, a failure the deployment is slow to judge) with short
// waits, and the default bound of the watch.
import { MemoryLogger } from '@csiplug/core';
import { ApiClient, HttpApi } from '@csiplug/api';
import { planJob } from '@csiplug/jobspec';
import type { RunJobResult } from '@csiplug/api';
import { validateJob } from '@csiplug/jobspec';
import { FakeAgentService, fakeUuid } from '@csiplug/api/testing';
import { MONITOR_MARGIN_MS, MonitorLostError, defaultMonitorTimeout, monitorRun, type RunMonitorOptions } from './job-monitor';

const DEPLOYMENT = 'd0d0d0d0-1111-4222-8333-444455556666';
const SPEC = validateJob({
  job: {
    web: {
      group: { app: { count: 1, task: { main: { driver: 'raw_exec', config: { command: '/bin/false' }, restart: { attempts: 0 } } } } },
    },
  },
});

describe('monitorRun', () => {
  let fake: FakeAgentService;
  let api: HttpApi;
  let client: ApiClient;
  let out: string[];
  let notes: string[];

  beforeEach(async () => {
    fake = new FakeAgentService();
    api = new HttpApi(fake, { bindAddr: '127.0.0.1', port: 0, logger: new MemoryLogger() });
    const { address, port } = await api.listen();
    client = new ApiClient({ address: `http://${address}:${port}` });
    out = [];
    notes = [];
  });

  afterEach(async () => {
    await api.dispose();
  });

  /** Runs SPEC on the fake and makes it a deployment, as the agent's run would. */
  async function submit(): Promise<RunJobResult> {
    const result = await fake.runJob(SPEC);
    const now = Date.now();
    fake.jobs.get('web')!.deployment = {
      id: DEPLOYMENT,
      jobVersion: 0,
      status: 'running',
      description: 'Deployment is running',
      createdAt: now,
      updatedAt: now,
      groups: [],
    };
    for (const id of result.allocIds) fake.allocs.get(id)!.deploymentId = DEPLOYMENT;
    return { ...result, deploymentId: DEPLOYMENT };
  }

  const options = (result: RunJobResult, extra: Partial<RunMonitorOptions> = {}): RunMonitorOptions => ({
    client,
    result,
    out: (line) => out.push(line),
    note: (line) => notes.push(line),
    verbose: false,
    timeoutMs: 0,
    pollMs: 5,
    ...extra,
  });

  it('ends on a failed allocation when the deployment is slow to say so, naming the failure', async () => {
    const result = await submit();
    const alloc = fake.allocs.get(fakeUuid(1))!;
    alloc.clientStatus = 'failed';
    const main = alloc.tasks.main!;
    main.state = 'dead';
    main.events.push({
      type: 'Not Restarting',
      message: 'Exceeded allowed attempts 0 in interval 30m and mode is "fail"; task exited: exit code 1',
      time: Date.now(),
      failed: true,
    });
    const verdict = await monitorRun(options(result, { failureGraceMs: 20 }));
    expect(verdict).toEqual({ kind: 'failed', reason: 'an allocation failed' });
    const short = fakeUuid(1).slice(0, 8);
    expect(out).toContain('==> An allocation of deployment "d0d0d0d0" failed');
    expect(out).toContain(
      `    Allocation "${short}" (web.app[0]) failed: task "main": Not Restarting: Exceeded allowed attempts 0 in interval 30m and mode is "fail"; task exited: exit code 1`,
    );
    expect(out.filter((l) => l.includes('status changed: "pending" -> "failed"'))).toHaveLength(1);
  });

  it('gives the health verdict as the reason when no task event says what failed (a deadline passed)', async () => {
    const result = await submit();
    const alloc = fake.allocs.get(fakeUuid(1))!;
    const reason = 'not healthy within healthy_deadline 20s (last: plugin "hostpath" (csi-node) is not healthy yet: probe failed)';
    alloc.deploymentStatus = { healthy: false, time: Date.now(), reason };
    Object.assign(fake.jobs.get('web')!.deployment!, {
      status: 'failed',
      description: 'Failed due to unhealthy allocations - auto_revert is off for group "app": the rollout stops here',
    });
    expect(await monitorRun(options(result))).toEqual({
      kind: 'failed',
      reason: 'Failed due to unhealthy allocations - auto_revert is off for group "app": the rollout stops here',
    });
    const short = fakeUuid(1).slice(0, 8);
    expect(out).toContain(`    Allocation "${short}" (web.app[0]) failed: ${reason}`);
    expect(out).toContain(`    See 'csiplug alloc status ${short}' and 'csiplug alloc logs -stderr ${short} main'`);
  });

  it('gives up on an agent that does not come back, saying the job was submitted and where to look', async () => {
    const result = await submit();
    await api.dispose();
    const watch = monitorRun(options(result, { retryDelaysMs: [5, 5] }));
    await expect(watch).rejects.toBeInstanceOf(MonitorLostError);
    await expect(watch).rejects.toThrow(
      new RegExp(
        `^lost the agent at ${client.address} while watching deployment "d0d0d0d0" \\(no answer for 10ms: cannot reach the csiplug agent at .*\\)\\. ` +
          `Job "web" was submitted \\(version 0\\) and its deployment goes on while the agent runs: see 'csiplug job status web' once it answers$`,
      ),
    );
    expect(notes).toEqual([expect.stringMatching(/^ {4}\(the agent at .* does not answer: .*; asking again for up to 10ms\)$/)]);
  });

  it('fails at once on an error that is not the agent being away', async () => {
    const result = await submit();
    fake.nextError = new Error('the state cannot be read');
    await expect(monitorRun(options(result))).rejects.toThrow(/the state cannot be read/);
    expect(notes).toEqual([]);
  });

  it('says so when the job is purged while watched', async () => {
    const result = await submit();
    fake.jobs.delete('web');
    expect(await monitorRun(options(result))).toEqual({ kind: 'failed', reason: 'the job was purged' });
    expect(out).toEqual(['==> Job "web" is gone: it was stopped and purged while it was being watched']);
  });
});

describe('defaultMonitorTimeout', () => {
  it('allows healthy_deadline for each round of max_parallel replacements of the slowest group, plus a margin', () => {
    const spec = validateJob({
      job: {
        web: {
          group: {
            wide: {
              count: 3,
              update: { max_parallel: 2, healthy_deadline: '1m' },
              task: { t: { driver: 'raw_exec', config: { command: 'x' } } },
            },
            one: { count: 1, update: { healthy_deadline: '90s' }, task: { t: { driver: 'raw_exec', config: { command: 'x' } } } },
          },
        },
      },
    });
    // wide: two rounds (2 + 1) of 1m; one: one round of 90s.
    expect(defaultMonitorTimeout(spec, planJob(spec, []))).toBe(2 * 60_000 + MONITOR_MARGIN_MS);
  });
});
