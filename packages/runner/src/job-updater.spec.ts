// The job updater and its rollouts over a fake agent and a FakeClock: what
// a run does to the allocs and in which order, how a deployment ends, the
// revert, a cancel by a newer run, a resume after a restart, and a run that
// cannot be saved.
import { flushMicrotasks } from '@csiplug/core/testing';
import { FakeAgent, makeAlloc, makeJob, type FakeAlloc } from '../test/support/deploy-fakes';
import type { JobSpec } from '@csiplug/jobspec';
import { JobUpdater } from './job-updater';

const open = () => undefined;
const FAST = { min_healthy_time: '1s', healthy_deadline: '30s' };

/** Lets every pending continuation run, with time moved by `ms`. */
async function settle(agent: FakeAgent, ms = 0): Promise<void> {
  await flushMicrotasks(50);
  if (ms) await agent.clock.advance(ms);
  await flushMicrotasks(50);
}

function newest(agent: FakeAgent, jobId: string): FakeAlloc {
  const placed = agent.placed(jobId);
  return placed[placed.length - 1]!;
}

/** Starts a job from nothing and makes its allocs healthy; returns them. */
async function running(agent: FakeAgent, updater: JobUpdater<FakeAlloc>, job: JobSpec, plugin?: string): Promise<FakeAlloc[]> {
  await updater.run(job, open);
  const allocs = agent.allocsOf(job.id);
  for (const r of allocs) {
    r.run();
    if (plugin) agent.pluginHealthy(plugin, r.alloc.id);
  }
  await settle(agent, 1_000);
  expect(updater.view(job.id)!.deployment!.status).toBe('successful');
  agent.timeline.length = 0;
  agent.events.length = 0;
  return allocs;
}

describe('JobUpdater', () => {
  let agent: FakeAgent;
  let updater: JobUpdater<FakeAlloc>;

  beforeEach(() => {
    agent = new FakeAgent();
    updater = new JobUpdater(agent);
  });

  it('runs a new job: its allocs are placed at once and the deployment succeeds once they are healthy', async () => {
    const job = makeJob('web', { app: { count: 2, update: FAST } });
    const result = await updater.run(job, open);
    expect(result).toMatchObject({ jobId: 'web', replaced: false, unchanged: false, version: 0 });
    expect(result.allocIds).toHaveLength(2);
    expect(agent.timeline).toEqual(['place web.app[0] v0', 'place web.app[1] v0']);
    // One write, before anything started: both new allocs.
    expect(agent.writes).toEqual([['web.app[0]', 'web.app[1]']]);
    expect(updater.view('web')!.deployment).toMatchObject({
      status: 'running',
      jobVersion: 0,
      groups: [{ name: 'app', desired: 2, placed: 2, healthy: 0 }],
    });
    for (const r of agent.allocsOf('web')) r.run();
    await settle(agent, 1_000);
    expect(updater.view('web')!.deployment).toMatchObject({
      status: 'successful',
      description: 'Deployment completed successfully',
      groups: [{ placed: 2, healthy: 2, unhealthy: 0 }],
    });
    expect(agent.eventTypes()).toEqual([
      'Deployment started',
      'Job registered',
      'Deployment alloc healthy',
      'Deployment alloc healthy',
      'Deployment successful',
    ]);
  });

  it('leaves an unchanged job alone: no alloc touched, nothing written, the version kept', async () => {
    const job = makeJob('web', { app: { count: 2, update: FAST } });
    const before = await running(agent, updater, job);
    const writes = agent.writes.length;
    const result = await updater.run(makeJob('web', { app: { count: 2, update: FAST } }), open);
    expect(result).toMatchObject({ allocIds: [], unchanged: true, version: 0 });
    expect(agent.timeline).toEqual([]);
    expect(agent.writes).toHaveLength(writes);
    expect(agent.live('web')).toEqual(before.map((r) => `${r.alloc.name} v0`));
    expect(agent.eventTypes()).toEqual(['Job unchanged']);
  });

  it('replaces a plugin alloc create-before-destroy: the old one stops only once the new one is registered healthy', async () => {
    const [old] = await running(agent, updater, makeJob('plug', { plugin: { plugin: 'hostpath', update: FAST } }), 'hostpath');
    const result = await updater.run(makeJob('plug', { plugin: { plugin: 'hostpath', update: FAST, env: { LOG: 'debug' } } }), open);
    expect(result).toMatchObject({ version: 1, allocIds: [expect.any(String)] });
    const fresh = agent.allocs.get(result.allocIds[0]!)!;
    expect(agent.timeline).toEqual(['place plug.plugin[0] v1']);
    fresh.run();
    await settle(agent, 5_000);
    // Its task runs, but its plugin has not registered: the old one keeps serving.
    expect(agent.timeline).toEqual(['place plug.plugin[0] v1']);
    expect(old!.alloc.desiredStatus).toBe('run');
    agent.pluginHealthy('hostpath', fresh.alloc.id);
    await settle(agent, 1_000);
    expect(agent.timeline).toEqual(['place plug.plugin[0] v1', 'stop plug.plugin[0] v0', 'stopped plug.plugin[0] v0']);
    expect(updater.view('plug')).toMatchObject({ version: 1, deployment: { status: 'successful', jobVersion: 1 } });
  });

  it('stops a single-writer workload (and waits for its unmount) before its replacement starts', async () => {
    const [old] = await running(agent, updater, makeJob('work', { app: { volume: { source: 'v1' }, update: FAST } }));
    let release!: () => void;
    old!.stopGate = new Promise((r) => (release = r));
    const result = await updater.run(makeJob('work', { app: { volume: { source: 'v1' }, update: FAST, env: { A: '1' } } }), open);
    // Nothing could be placed at once: the old alloc must let go of the volume first.
    expect(result.allocIds).toEqual([]);
    await settle(agent, 5_000);
    expect(agent.timeline).toEqual(['stop work.app[0] v0']);
    release();
    await settle(agent);
    expect(agent.timeline).toEqual(['stop work.app[0] v0', 'stopped work.app[0] v0', 'place work.app[0] v1']);
    newest(agent, 'work').run();
    await settle(agent, 1_000);
    expect(updater.view('work')!.deployment!.status).toBe('successful');
  });

  it('replaces at most max_parallel allocs at once, starting the next as one is healthy', async () => {
    await running(agent, updater, makeJob('web', { app: { count: 3, update: { ...FAST, max_parallel: 2 } } }));
    await updater.run(makeJob('web', { app: { count: 3, update: { ...FAST, max_parallel: 2 }, env: { A: '1' } } }), open);
    await settle(agent);
    expect(agent.timeline).toEqual([
      'stop web.app[0] v0',
      'stop web.app[1] v0',
      'stopped web.app[0] v0',
      'stopped web.app[1] v0',
      'place web.app[0] v1',
      'place web.app[1] v1',
    ]);
    agent
      .placed('web')
      .find((r) => r.alloc.index === 0 && r.alloc.jobVersion === 1)!
      .run();
    await settle(agent, 1_000);
    expect(agent.timeline.slice(6)).toEqual(['stop web.app[2] v0', 'stopped web.app[2] v0', 'place web.app[2] v1']);
    for (const r of agent.placed('web').filter((x) => x.alloc.jobVersion === 1)) r.run();
    await settle(agent, 1_000);
    expect(agent.live('web')).toEqual(['web.app[0] v1', 'web.app[1] v1', 'web.app[2] v1']);
    expect(updater.view('web')!.deployment).toMatchObject({ status: 'successful', groups: [{ desired: 3, placed: 3, healthy: 3 }] });
  });

  it('reverts a plugin version that never becomes healthy: the old alloc never stopped, the revert a new version, in place', async () => {
    const v0 = makeJob('plug', { plugin: { plugin: 'hostpath', update: { ...FAST, auto_revert: true } } });
    const [old] = await running(agent, updater, v0, 'hostpath');
    const bad = makeJob('plug', { plugin: { plugin: 'hostpath', update: { ...FAST, auto_revert: true }, env: { BROKEN: '1' } } });
    const result = await updater.run(bad, open);
    const fresh = agent.allocs.get(result.allocIds[0]!)!;
    fresh.fail();
    await settle(agent);
    expect(old!.alloc).toMatchObject({ desiredStatus: 'run', jobVersion: 2, job: v0 });
    expect(agent.live('plug')).toEqual(['plug.plugin[0] v2']);
    expect(fresh.alloc.deploymentStatus).toMatchObject({ healthy: false });
    expect(agent.timeline).toEqual(['place plug.plugin[0] v1', 'stop plug.plugin[0] v1', 'stopped plug.plugin[0] v1']);
    const failed = agent.events.find((e) => e.type === 'Deployment failed')!;
    expect(failed.message).toMatch(
      /deployment \w{8} of version 1 failed: alloc plug.plugin\[0\] \(\w{8}\) is unhealthy: task "main" is dead \(failed\).*; rolling back to job version 0$/,
    );
    const reverted = agent.events.find((e) => e.type === 'Job reverted')!;
    expect(reverted.message).toMatch(
      /^job plug: version 1 did not become healthy \(.*\); reverted to version 0, which runs again as version 2$/,
    );
    expect(updater.view('plug')).toMatchObject({ version: 2, job: v0 });
    // The failed deployment is the latest: the revert needed no alloc placed.
    expect(updater.view('plug')!.deployment).toMatchObject({
      jobVersion: 1,
      status: 'failed',
      description: 'Failed due to unhealthy allocations - rolling back to job version 0',
    });
  });

  it('reverts a deadline that passes: an alloc already replaced goes back too', async () => {
    const update = { ...FAST, auto_revert: true, healthy_deadline: '20s' };
    await running(agent, updater, makeJob('web', { app: { count: 2, update } }));
    await updater.run(makeJob('web', { app: { count: 2, update, env: { V: '1' } } }), open);
    await settle(agent);
    newest(agent, 'web').run(); // index 0 comes up healthy
    await settle(agent, 1_000);
    await settle(agent); // index 1 is placed and never runs
    expect(agent.live('web')).toEqual(['web.app[0] v1', 'web.app[1] v1']);
    await settle(agent, 20_000);
    expect(agent.eventTypes()).toContain('Job reverted');
    // The revert (version 2, version 0's spec) replaces both again, as a deployment of its own.
    expect(updater.view('web')).toMatchObject({ version: 2, deployment: { jobVersion: 2, status: 'running', revertOf: 1 } });
    for (const r of agent.placed('web').filter((x) => x.alloc.jobVersion === 2)) r.run();
    await settle(agent, 1_000);
    for (const r of agent.placed('web').filter((x) => x.alloc.jobVersion === 2)) r.run();
    await settle(agent, 1_000);
    expect(agent.live('web')).toEqual(['web.app[0] v2', 'web.app[1] v2']);
    expect(updater.view('web')!.deployment!.status).toBe('successful');
  });

  it('without auto_revert, stops the rollout where it failed: old allocs keep running, a failed plugin alloc gives way', async () => {
    const [old] = await running(agent, updater, makeJob('plug', { plugin: { plugin: 'hostpath', update: FAST } }), 'hostpath');
    const result = await updater.run(makeJob('plug', { plugin: { plugin: 'hostpath', update: FAST, env: { X: '1' } } }), open);
    const fresh = agent.allocs.get(result.allocIds[0]!)!;
    fresh.run(); // runs, but its plugin never becomes healthy
    await settle(agent, 30_000);
    expect(agent.live('plug')).toEqual(['plug.plugin[0] v0']);
    expect(old!.alloc.desiredStatus).toBe('run');
    expect(fresh.alloc.desiredStatus).toBe('stop');
    expect(updater.view('plug')).toMatchObject({ version: 1, deployment: { status: 'failed' } });
    expect(updater.view('plug')!.deployment!.description).toBe(
      'Failed due to unhealthy allocations - auto_revert is off for group "plugin": the rollout stops here and the old allocs still running are left running',
    );
    expect(agent.eventTypes()).not.toContain('Job reverted');
  });

  it('a newer run cancels the rollout under way, its unproven new alloc giving way, and starts its own', async () => {
    await running(agent, updater, makeJob('plug', { plugin: { plugin: 'hostpath', update: FAST } }), 'hostpath');
    const first = await updater.run(makeJob('plug', { plugin: { plugin: 'hostpath', update: FAST, env: { X: '1' } } }), open);
    const second = await updater.run(makeJob('plug', { plugin: { plugin: 'hostpath', update: FAST, env: { X: '2' } } }), open);
    expect(second.version).toBe(2);
    expect(agent.allocs.get(first.allocIds[0]!)!.alloc.desiredStatus).toBe('stop');
    expect(agent.eventTypes().filter((t) => t.startsWith('Deployment'))).toEqual([
      'Deployment started',
      'Deployment alloc stopped',
      'Deployment cancelled',
      'Deployment started',
    ]);
    expect(agent.live('plug')).toEqual(['plug.plugin[0] v0', 'plug.plugin[0] v2']);
  });

  it('a job stop cancels the rollout first, then runs', async () => {
    await running(agent, updater, makeJob('web', { app: { update: FAST } }));
    await updater.run(makeJob('web', { app: { update: FAST, env: { A: '1' } } }), open);
    const stopped = await updater.exclusive('web', 'Cancelled because job is stopped', async () => {
      for (const r of agent.allocsOf('web')) await r.stop();
      return updater.view('web')!.deployment!.status;
    });
    expect(stopped).toBe('cancelled');
    await settle(agent, 60_000);
    expect(agent.live('web')).toEqual([]);
  });

  it('updates a count in place and stops the highest index, with no deployment', async () => {
    await running(agent, updater, makeJob('web', { app: { count: 3, update: FAST } }));
    const result = await updater.run(makeJob('web', { app: { count: 2, update: FAST } }), open);
    await settle(agent);
    expect(result).toMatchObject({ version: 1, allocIds: [] });
    expect(result.deploymentId).toBeUndefined();
    expect(agent.timeline).toEqual(['stop web.app[2] v0', 'stopped web.app[2] v0']);
    expect(agent.live('web')).toEqual(['web.app[0] v1', 'web.app[1] v1']);
  });

  it('refuses a run it cannot save: nothing started or stopped, nothing changed in memory', async () => {
    await running(agent, updater, makeJob('web', { app: { count: 2, update: FAST } }));
    agent.failSave = new Error('no space left on device');
    const bigger = makeJob('web', { app: { count: 3, update: FAST } });
    await expect(updater.run(bigger, open)).rejects.toThrow('no space left on device');
    await settle(agent, 60_000);
    expect(agent.timeline).toEqual([]);
    expect(agent.live('web')).toEqual(['web.app[0] v0', 'web.app[1] v0']);
    expect(updater.view('web')).toMatchObject({ version: 0, deployment: { status: 'successful', jobVersion: 0 } });
    // The same run once the disk has room again.
    expect((await updater.run(bigger, open)).version).toBe(1);
  });

  it('refuses a stop-before-start run it cannot save: the old alloc is not stopped, nothing is placed', async () => {
    const [old] = await running(agent, updater, makeJob('work', { app: { volume: { source: 'v1' }, update: FAST } }));
    agent.failSave = new Error('no space left on device');
    await expect(updater.run(makeJob('work', { app: { volume: { source: 'v1' }, update: FAST, env: { A: '1' } } }), open)).rejects.toThrow(
      'no space left on device',
    );
    await settle(agent, 60_000);
    expect(agent.timeline).toEqual([]);
    expect(old!.alloc.desiredStatus).toBe('run');
    expect(agent.live('work')).toEqual(['work.app[0] v0']);
    expect(updater.view('work')).toMatchObject({ version: 0, deployment: { status: 'successful', jobVersion: 0 } });
  });

  it("writes the stop of what a run destroys in the run's one write: a count decrease, a removed group", async () => {
    const before = await running(agent, updater, makeJob('web', { app: { count: 3, update: FAST }, side: { update: FAST } }));
    const [, , third] = before.filter((r) => r.alloc.group === 'app').sort((a, b) => a.alloc.index - b.alloc.index);
    const side = before.find((r) => r.alloc.group === 'side')!;
    agent.writes.length = 0;
    await updater.run(makeJob('web', { app: { count: 2, update: FAST } }), open);
    // One write: the version on the allocs kept, the stop of the others. An agent killed right after it finishes their teardown.
    expect(agent.writes[0]!.sort()).toEqual(['web.app[0]', 'web.app[1]', 'web.app[2] (stop)', 'web.side[0] (stop)']);
    expect(agent.records.get(third!.alloc.id)).toMatchObject({ desiredStatus: 'stop' });
    expect(agent.records.get(side.alloc.id)).toMatchObject({ desiredStatus: 'stop' });
    await settle(agent);
    expect(agent.live('web')).toEqual(['web.app[0] v1', 'web.app[1] v1']);
  });

  it('a job stop while a failing deployment gives way is not undone by auto_revert', async () => {
    const update = { ...FAST, auto_revert: true, healthy_deadline: '20s' };
    await running(agent, updater, makeJob('plug', { plugin: { plugin: 'hostpath', update } }), 'hostpath');
    const result = await updater.run(makeJob('plug', { plugin: { plugin: 'hostpath', update, env: { X: '1' } } }), open);
    const fresh = agent.allocs.get(result.allocIds[0]!)!;
    let release!: () => void;
    fresh.stopGate = new Promise((r) => (release = r));
    fresh.run(); // runs, its plugin never healthy
    await settle(agent, 20_000); // the deadline passes: the deployment fails, the unproven alloc is being stopped
    expect(agent.timeline).toContain('stop plug.plugin[0] v1');
    const stopped = updater.exclusive('plug', 'Cancelled because job is stopped', async () => {
      for (const r of agent.allocsOf('plug')) await r.stop();
    });
    release();
    await stopped;
    await settle(agent, 60_000);
    expect(agent.live('plug')).toEqual([]);
    expect(agent.eventTypes()).toContain('Deployment failed');
    expect(agent.eventTypes()).not.toContain('Job reverted');
  });

  it("a retry of the failing version while it gives way wins over its auto_revert: one rollout, the retry's", async () => {
    const update = { ...FAST, auto_revert: true, healthy_deadline: '20s' };
    await running(agent, updater, makeJob('plug', { plugin: { plugin: 'hostpath', update } }), 'hostpath');
    const v1 = () => makeJob('plug', { plugin: { plugin: 'hostpath', update, env: { X: '1' } } });
    const first = await updater.run(v1(), open);
    const fresh = agent.allocs.get(first.allocIds[0]!)!;
    let release!: () => void;
    fresh.stopGate = new Promise((r) => (release = r));
    fresh.run();
    await settle(agent, 20_000);
    const retry = updater.run(v1(), open);
    release();
    const second = await retry;
    await settle(agent);
    expect(second).toMatchObject({ version: 1, unchanged: false });
    expect(second.deploymentId).not.toBe(first.deploymentId);
    expect(agent.eventTypes()).not.toContain('Job reverted');
    const retried = agent.allocs.get(second.allocIds[0]!)!;
    expect(retried.alloc.desiredStatus).toBe('run');
    expect(updater.view('plug')).toMatchObject({ version: 1, deployment: { id: second.deploymentId, status: 'running' } });
    retried.run();
    agent.pluginHealthy('hostpath', retried.alloc.id);
    await settle(agent, 1_000);
    expect(agent.live('plug')).toEqual(['plug.plugin[0] v1']);
    expect(updater.view('plug')!.deployment).toMatchObject({ id: second.deploymentId, status: 'successful' });
  });

  it('running the same file again mid-rollout changes nothing and leaves the rollout going; the plan says so', async () => {
    await running(agent, updater, makeJob('plug', { plugin: { plugin: 'hostpath', update: FAST } }), 'hostpath');
    const v1 = () => makeJob('plug', { plugin: { plugin: 'hostpath', update: FAST, env: { X: '1' } } });
    const first = await updater.run(v1(), open);
    const fresh = agent.allocs.get(first.allocIds[0]!)!;
    fresh.run();
    await settle(agent);
    const plan = updater.plan(v1());
    expect(plan).toMatchObject({ changed: false, underway: { deploymentId: first.deploymentId, jobVersion: 1 } });
    expect(plan.groups.every((g) => g.updates.create + g.updates.destroy + g.updates['create/destroy'] === 0)).toBe(true);
    const again = await updater.run(v1(), open);
    expect(again).toMatchObject({ unchanged: true, version: 1, deploymentId: first.deploymentId, allocIds: [] });
    expect(fresh.alloc.desiredStatus).toBe('run');
    expect(agent.timeline).toEqual(['place plug.plugin[0] v1']);
    agent.pluginHealthy('hostpath', fresh.alloc.id);
    await settle(agent, 1_000);
    expect(updater.view('plug')!.deployment).toMatchObject({ id: first.deploymentId, status: 'successful' });
    expect(agent.live('plug')).toEqual(['plug.plugin[0] v1']);
  });

  it('judges each alloc of a plugin group of count 2 by its own registration: the deployment succeeds', async () => {
    const job = makeJob('plug', { plugin: { count: 2, plugin: 'hostpath', update: FAST } });
    await updater.run(job, open);
    const [a, b] = agent.allocsOf('plug');
    a!.run();
    b!.run();
    agent.pluginHealthy('hostpath', a!.alloc.id);
    agent.pluginHealthy('hostpath', b!.alloc.id); // the manager now serves b's instance only; a's registration stays
    await settle(agent, 1_000);
    expect(updater.view('plug')!.deployment).toMatchObject({ status: 'successful', groups: [{ healthy: 2 }] });
  });

  it("renaming a plugin group is create-before-destroy: the old group stops once the new one's plugin is healthy", async () => {
    const [old] = await running(agent, updater, makeJob('plug', { plugin: { plugin: 'hostpath', update: FAST } }), 'hostpath');
    const result = await updater.run(makeJob('plug', { node: { plugin: 'hostpath', update: FAST } }), open);
    const fresh = agent.allocs.get(result.allocIds[0]!)!;
    fresh.run();
    await settle(agent, 5_000);
    expect(old!.alloc.desiredStatus).toBe('run');
    expect(agent.timeline).toEqual(['place plug.node[0] v1']);
    agent.pluginHealthy('hostpath', fresh.alloc.id);
    await settle(agent, 1_000);
    expect(agent.timeline).toEqual(['place plug.node[0] v1', 'stop plug.plugin[0] v0', 'stopped plug.plugin[0] v0']);
    expect(agent.live('plug')).toEqual(['plug.node[0] v1']);
  });

  it('a renamed plugin group whose new plugin never becomes healthy gives way: the old group runs on', async () => {
    const [old] = await running(agent, updater, makeJob('plug', { plugin: { plugin: 'hostpath', update: FAST } }), 'hostpath');
    const result = await updater.run(makeJob('plug', { node: { plugin: 'hostpath', update: FAST } }), open);
    agent.allocs.get(result.allocIds[0]!)!.run();
    await settle(agent, 30_000);
    expect(updater.view('plug')!.deployment!.status).toBe('failed');
    expect(old!.alloc.desiredStatus).toBe('run');
    expect(agent.live('plug')).toEqual(['plug.plugin[0] v0']);
  });

  it('keeps the stopped allocs of the last KEPT_VERSIONS versions only: older ones that hold nothing are removed on a run', async () => {
    await running(agent, updater, makeJob('web', { app: { update: FAST } }));
    for (let v = 1; v <= 8; v++) {
      await updater.run(makeJob('web', { app: { update: FAST, env: { V: String(v) } } }), open);
      await settle(agent);
      newest(agent, 'web').run();
      await settle(agent, 1_000);
    }
    expect(agent.live('web')).toEqual(['web.app[0] v8']);
    // The run of v8 kept the 5 newest versions it found (3..7, stopped) and placed v8; 0..2 went, each once its teardown was done.
    expect(
      agent
        .allocsOf('web')
        .map((r) => r.alloc.jobVersion)
        .sort(),
    ).toEqual([3, 4, 5, 6, 7, 8]);
    expect(agent.timeline.filter((t) => t.startsWith('forget')).sort()).toEqual([
      'forget web.app[0] v0',
      'forget web.app[0] v1',
      'forget web.app[0] v2',
    ]);
    expect(updater.view('web')).toMatchObject({ version: 8, deployment: { status: 'successful', jobVersion: 8 } });
  });

  it('never removes an old stopped alloc that may still hold something', async () => {
    const versions = Array.from({ length: 7 }, (_, v) => makeJob('web', { app: { update: FAST, env: { V: String(v) } } }));
    // v0's stop is under way (its task not known dead); v1..v5 are stopped and done; v6 runs.
    const hanging = agent.add(
      makeAlloc(versions[0]!, 'app', 0, { jobVersion: 0, desiredStatus: 'stop', clientStatus: 'running', createdAt: 1 }),
    );
    const done = agent.add(
      makeAlloc(versions[1]!, 'app', 0, { jobVersion: 1, desiredStatus: 'stop', clientStatus: 'complete', createdAt: 2 }),
    );
    for (const t of Object.values(done.tasks)) t.state = 'dead';
    for (let v = 2; v <= 5; v++) {
      const r = agent.add(
        makeAlloc(versions[v]!, 'app', 0, { jobVersion: v, desiredStatus: 'stop', clientStatus: 'complete', createdAt: v + 1 }),
      );
      for (const t of Object.values(r.tasks)) t.state = 'dead';
    }
    agent.add(makeAlloc(versions[6]!, 'app', 0, { jobVersion: 6, createdAt: 8 }));
    await updater.run(makeJob('web', { app: { update: FAST, env: { V: '7' } } }), open);
    expect(agent.allocs.has(hanging.alloc.id)).toBe(true);
    expect(agent.allocs.has(done.alloc.id)).toBe(false);
  });

  describe('across an agent restart', () => {
    it('a detached rollout stays running in the records, and the next agent resumes it: the new alloc is proven before the old one stops', async () => {
      const [old] = await running(agent, updater, makeJob('plug', { plugin: { plugin: 'hostpath', update: FAST } }), 'hostpath');
      const result = await updater.run(makeJob('plug', { plugin: { plugin: 'hostpath', update: FAST, env: { X: '1' } } }), open);
      const fresh = agent.allocs.get(result.allocIds[0]!)!;
      await updater.dispose({ stopTasks: false });
      await settle(agent, 60_000);
      expect(fresh.alloc.jobDeployment!.status).toBe('running');
      expect(agent.live('plug')).toEqual(['plug.plugin[0] v0', 'plug.plugin[0] v1']);

      // The next agent: same allocs (as restored from the records), a new updater.
      const next = new JobUpdater(agent);
      agent.timeline.length = 0;
      next.resume();
      await settle(agent, 5_000);
      expect(agent.eventTypes()).toContain('Deployment resumed');
      expect(agent.timeline).toEqual([]);
      fresh.run();
      agent.pluginHealthy('hostpath', fresh.alloc.id);
      await settle(agent, 1_000);
      expect(agent.timeline).toEqual(['stop plug.plugin[0] v0', 'stopped plug.plugin[0] v0']);
      expect(old!.alloc.desiredStatus).toBe('stop');
      expect(next.view('plug')!.deployment).toMatchObject({ id: result.deploymentId, status: 'successful' });
    });

    it('a new alloc that died while no agent watched fails the resumed deployment, and auto_revert reverts it', async () => {
      const update = { ...FAST, auto_revert: true };
      const [old] = await running(agent, updater, makeJob('plug', { plugin: { plugin: 'hostpath', update } }), 'hostpath');
      const result = await updater.run(makeJob('plug', { plugin: { plugin: 'hostpath', update, env: { X: '1' } } }), open);
      await updater.dispose({ stopTasks: false });
      const fresh = agent.allocs.get(result.allocIds[0]!)!;
      fresh.fail(); // while the agent is away
      const next = new JobUpdater(agent);
      next.resume();
      await settle(agent);
      expect(agent.eventTypes()).toEqual(expect.arrayContaining(['Deployment resumed', 'Deployment failed', 'Job reverted']));
      expect(agent.events.find((e) => e.type === 'Deployment failed')!.message).toMatch(
        /is unhealthy: it was failed before the agent restarted; rolling back to job version 0$/,
      );
      // Nothing new was placed for the dead alloc; the old plugin runs on, as version 2.
      expect(
        agent
          .allocsOf('plug')
          .filter((r) => r.alloc.jobVersion === 1)
          .map((r) => r.alloc.id),
      ).toEqual([result.allocIds[0]]);
      expect(agent.allocsOf('plug')).toHaveLength(2);
      expect(old!.alloc).toMatchObject({ desiredStatus: 'run', jobVersion: 2 });
      expect(agent.live('plug')).toEqual(['plug.plugin[0] v2']);
    });

    it('a stop-before-start cut between the stop and the start places the new alloc on resume', async () => {
      await running(agent, updater, makeJob('work', { app: { volume: { source: 'v1' }, update: FAST } }));
      await updater.run(makeJob('work', { app: { volume: { source: 'v1' }, update: FAST, env: { A: '1' } } }), open);
      await updater.dispose({ stopTasks: false }); // detached as the old alloc is being stopped
      await settle(agent);
      expect(agent.live('work')).toEqual([]);
      const next = new JobUpdater(agent);
      next.resume();
      await settle(agent);
      expect(agent.live('work')).toEqual(['work.app[0] v1']);
      newest(agent, 'work').run();
      await settle(agent, 1_000);
      expect(next.view('work')!.deployment!.status).toBe('successful');
    });

    it('a stop-before-start whose stop the agent going away cut short places nothing: the rollout detaches, its deployment left running for the next agent', async () => {
      const [old] = await running(agent, updater, makeJob('work', { app: { volume: { source: 'v1' }, update: FAST } }));
      old!.stopCutShort = true;
      const result = await updater.run(makeJob('work', { app: { volume: { source: 'v1' }, update: FAST, env: { A: '1' } } }), open);
      await settle(agent, 1_000);
      expect(agent.timeline).toEqual(['stop work.app[0] v0']);
      expect(agent.placed('work').filter((r) => r.alloc.jobVersion === 1)).toEqual([]);
      expect(updater.view('work')!.deployment).toMatchObject({ id: result.deploymentId, status: 'running' });
      expect(agent.eventTypes()).not.toContain('Deployment failed');
    });

    it("a run made after the restart and before the resume (a cluster node's first pass) keeps its own rollout: nothing is resumed over it", async () => {
      await running(agent, updater, makeJob('plug', { plugin: { plugin: 'hostpath', update: FAST } }), 'hostpath');
      await updater.run(makeJob('plug', { plugin: { plugin: 'hostpath', update: FAST, env: { X: '1' } } }), open);
      await updater.dispose({ stopTasks: false });
      const next = new JobUpdater(agent);
      // The next agent runs a newer share first (its own deployment under way), then resumes what the last agent left.
      const newer = await next.run(makeJob('plug', { plugin: { plugin: 'hostpath', update: FAST, env: { X: '2' } } }), open);
      agent.timeline.length = 0;
      next.resume();
      await settle(agent, 5_000);
      expect(agent.eventTypes()).not.toContain('Deployment resumed');
      expect(next.view('plug')!.deployment).toMatchObject({ id: newer.deploymentId, status: 'running' });
    });

    it('a running deployment of a version the job has moved past is settled as cancelled, not resumed', async () => {
      const [old] = await running(agent, updater, makeJob('plug', { plugin: { plugin: 'hostpath', update: FAST } }), 'hostpath');
      const result = await updater.run(makeJob('plug', { plugin: { plugin: 'hostpath', update: FAST, env: { X: '1' } } }), open);
      await updater.dispose({ stopTasks: false });
      // A later in-place run made version 2 while the deployment's end was never saved.
      const v2 = makeJob('plug', { plugin: { plugin: 'hostpath', update: { ...FAST, max_parallel: 2 }, env: { X: '1' } } });
      for (const r of agent.allocsOf('plug')) if (r.alloc.jobVersion === 1) Object.assign(r.alloc, { job: v2, jobVersion: 2 });
      const next = new JobUpdater(agent);
      agent.timeline.length = 0;
      next.resume();
      await settle(agent, 60_000);
      expect(agent.eventTypes()).not.toContain('Deployment resumed');
      expect(next.view('plug')!.deployment).toMatchObject({ id: result.deploymentId, status: 'cancelled' });
      expect(agent.timeline).toEqual([]);
      expect(old!.alloc.desiredStatus).toBe('run');
    });

    it('an agent that stops its tasks on exit cancels its rollouts: nothing is resumed', async () => {
      await running(agent, updater, makeJob('web', { app: { update: FAST } }));
      await updater.run(makeJob('web', { app: { update: FAST, env: { A: '1' } } }), open);
      await updater.dispose({ stopTasks: true });
      expect(updater.view('web')!.deployment).toMatchObject({
        status: 'cancelled',
        description: 'Cancelled because the agent stopped every task on exit',
      });
      const next = new JobUpdater(agent);
      next.resume();
      await settle(agent);
      expect(agent.eventTypes()).not.toContain('Deployment resumed');
    });
  });
});
