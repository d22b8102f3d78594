// When a new alloc counts as healthy, with a FakeClock: min_healthy_time of
// everything up (plugins included), started over by a restart, and failure
// by a dead task or the deadline.
import { FakeAgent, makeAlloc, makeJob } from '../test/support/deploy-fakes';
import { flushMicrotasks } from '@csiplug/core/testing';
import { DEFAULT_UPDATE } from '@csiplug/jobspec';
import { UnhealthyAllocError, readAllocHealth, watchAllocHealth } from './alloc-health';

describe('readAllocHealth', () => {
  const job = makeJob('p', { plugin: { plugin: 'hostpath' } });
  const group = job.groups[0]!;

  it('waits for every task to run, then for the plugin to be registered by this alloc and healthy', () => {
    const agent = new FakeAgent();
    const r = agent.add(makeAlloc(job, 'plugin', 0, { clientStatus: 'pending' }));
    const read = () => readAllocHealth(r.alloc, group, r.taskStates(), agent.plugins());
    expect(read()).toMatchObject({ status: 'waiting', reason: 'task "main" is pending' });
    r.run();
    expect(read()).toMatchObject({ status: 'waiting', reason: 'plugin "hostpath" (csi-controller) is not registered by this alloc yet' });
    agent.pluginHealthy('hostpath', 'another-alloc');
    expect(read().status).toBe('waiting');
    agent.pluginHealthy('hostpath', r.alloc.id);
    expect(read()).toMatchObject({ status: 'ready' });
    agent.pluginInstances = agent.pluginInstances.map((p) =>
      p.type === 'csi-node' ? { ...p, healthy: false, description: 'probe failed' } : p,
    );
    expect(read()).toMatchObject({ status: 'waiting', reason: 'plugin "hostpath" (csi-node) is not healthy yet: probe failed' });
  });

  it('fails for a dead task, naming its last event', () => {
    const agent = new FakeAgent();
    const r = agent.add(makeAlloc(job, 'plugin', 0));
    r.fail();
    expect(readAllocHealth(r.alloc, group, r.taskStates(), [])).toEqual({
      status: 'failed',
      reason: 'task "main" is dead (failed): Not Restarting (exceeded allowed attempts)',
      restarts: 0,
    });
  });
});

describe('watchAllocHealth', () => {
  const job = makeJob('web', { app: {} });
  const group = job.groups[0]!;
  const strategy = { ...DEFAULT_UPDATE, minHealthyTime: 10_000, healthyDeadline: 60_000 };

  function watch(agent: FakeAgent, r: ReturnType<FakeAgent['add']>, signal = new AbortController().signal) {
    let outcome: 'healthy' | Error | undefined;
    watchAllocHealth({
      alloc: r.alloc,
      strategy,
      clock: agent.clock,
      read: () => readAllocHealth(r.alloc, group, r.taskStates(), agent.plugins()),
      onChange: (l, d) => agent.onEvent((e) => e.allocId && l(e.allocId), d),
      signal,
    }).then(
      () => (outcome = 'healthy'),
      (err: Error) => (outcome = err),
    );
    return () => outcome;
  }

  it('is healthy once every task has run for min_healthy_time', async () => {
    const agent = new FakeAgent();
    const r = agent.add(makeAlloc(job, 'app', 0, { clientStatus: 'pending' }));
    const outcome = watch(agent, r);
    await agent.clock.advance(5_000);
    r.run();
    await agent.clock.advance(9_999);
    expect(outcome()).toBeUndefined();
    await agent.clock.advance(1);
    await flushMicrotasks();
    expect(outcome()).toBe('healthy');
    expect(agent.clock.pendingTimers).toBe(0);
  });

  it('starts min_healthy_time over when a task restarts in between', async () => {
    const agent = new FakeAgent();
    const r = agent.add(makeAlloc(job, 'app', 0, { clientStatus: 'pending' }));
    const outcome = watch(agent, r);
    r.run();
    await agent.clock.advance(6_000);
    // It crashed and was started again by its restart policy before anyone looked.
    r.tasks.main!.restarts = 1;
    agent.fire(r.alloc.id, 'Restarting');
    await agent.clock.advance(9_000);
    await flushMicrotasks();
    expect(outcome()).toBeUndefined();
    await agent.clock.advance(1_000);
    await flushMicrotasks();
    expect(outcome()).toBe('healthy');
  });

  it('is unhealthy at once when a task dies', async () => {
    const agent = new FakeAgent();
    const r = agent.add(makeAlloc(job, 'app', 0, { clientStatus: 'pending' }));
    const outcome = watch(agent, r);
    r.run();
    await agent.clock.advance(1_000);
    r.fail();
    await flushMicrotasks();
    expect(outcome()).toBeInstanceOf(UnhealthyAllocError);
    expect((outcome() as UnhealthyAllocError).why).toMatch(/task "main" is dead \(failed\)/);
    expect(agent.clock.pendingTimers).toBe(0);
  });

  it('is unhealthy when healthy_deadline passes first, saying what was missing', async () => {
    const agent = new FakeAgent();
    const r = agent.add(makeAlloc(job, 'app', 0, { clientStatus: 'pending' }));
    const outcome = watch(agent, r);
    await agent.clock.advance(60_000);
    await flushMicrotasks();
    expect((outcome() as UnhealthyAllocError).why).toBe('not healthy within healthy_deadline 1m (last: task "main" is pending)');
  });

  it('ends with the abort reason and leaves no timer behind', async () => {
    const agent = new FakeAgent();
    const r = agent.add(makeAlloc(job, 'app', 0));
    const controller = new AbortController();
    const outcome = watch(agent, r, controller.signal);
    const reason = new Error('cancelled');
    controller.abort(reason);
    await flushMicrotasks();
    expect(outcome()).toBe(reason);
    expect(agent.clock.pendingTimers).toBe(0);
  });
});
