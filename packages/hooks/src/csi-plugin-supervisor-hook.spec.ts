import { BackoffHeartbeatStrategy, DefaultTimeoutPolicy, MemoryLogger } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import { FakeCSIClientFactory } from '@csiplug/csi/testing';
import {
  DynamicPluginRegistry,
  PluginDispenserTable,
  type PluginRegistry,
  StateRegistryStore,
  type RegistryStateRecord,
} from '@csiplug/registry';
import { type ClientStateDB, openClientState } from '@csiplug/state';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { CSIPluginSupervisorHook, TASK_EVENT_PLUGIN_HEALTHY, TASK_EVENT_PLUGIN_UNHEALTHY } from './csi-plugin-supervisor-hook';
import type { CSIPluginConfig } from './hook';
import { pluginSocketPath } from './paths';
import { taskContext } from './testing/task-context';

describe('csi_plugin_supervisor', () => {
  let dataDir: string;
  let clock: FakeClock;
  let state: ClientStateDB;
  let registry: PluginRegistry;
  let clients: FakeCSIClientFactory;
  let logger: MemoryLogger;

  const config = (over: Partial<CSIPluginConfig> = {}): CSIPluginConfig => ({
    id: 'hostpath',
    type: 'monolith',
    mountDir: '/csi',
    stagePublishBaseDir: '/local/csi',
    healthTimeout: 30_000,
    ...over,
  });

  const makeRegistry = () =>
    new DynamicPluginRegistry(new StateRegistryStore(state), clock, logger, new DefaultTimeoutPolicy(), new PluginDispenserTable(), {});

  const hook = (c = config()) =>
    new CSIPluginSupervisorHook(
      c,
      dataDir,
      registry,
      clients,
      clock,
      new BackoffHeartbeatStrategy({ jitter: 0 }),
      new DefaultTimeoutPolicy(),
      logger,
    );

  const touchSocket = (allocId = 'alloc-1') => fs.writeFileSync(pluginSocketPath(dataDir, allocId), '');

  /** Advances the fake clock in small steps until `done()` or `maxMs` passed. */
  const advanceUntil = async (done: () => boolean, maxMs: number, step = 5) => {
    for (let t = 0; t <= maxMs && !done(); t += step) await clock.advance(step);
  };

  beforeEach(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-hooks-'));
    clock = new FakeClock(0);
    logger = new MemoryLogger();
    state = openClientState({ memory: true });
    registry = makeRegistry();
    clients = new FakeCSIClientFactory();
  });

  afterEach(() => {
    registry.dispose();
    state.dispose();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('prestart makes the socket and mount dirs 0700 and points the task at its socket', async () => {
    const ctx = taskContext();
    const result = await hook().prestart(ctx);
    const socketDir = path.join(dataDir, 'plugins', 'alloc-1');
    const mountRoot = path.join(dataDir, 'csi', 'monolith', 'hostpath');
    expect(fs.statSync(socketDir).mode & 0o777).toBe(0o700);
    expect(fs.statSync(mountRoot).mode & 0o777).toBe(0o700);
    expect(result.env).toEqual({ CSI_ENDPOINT: `unix://${socketDir}/csi.sock`, CSIPLUG_CSI_MOUNT_DIR: mountRoot });
  });

  it('prestart leaves a CSI_ENDPOINT the task sets itself', async () => {
    const result = await hook().prestart(taskContext({ task: { env: { CSI_ENDPOINT: 'unix:///elsewhere.sock' } } }));
    expect(result.env?.CSI_ENDPOINT).toBeUndefined();
  });

  it('waits for a socket that appears late, then registers controller and node for a monolith', async () => {
    const h = hook();
    const ctx = taskContext();
    await h.prestart(ctx);
    let finished = false;
    const post = h.poststart(ctx).then(() => (finished = true));
    await new Promise((r) => setTimeout(r, 30));
    expect(finished).toBe(false);
    expect(clients.clients).toHaveLength(0);
    clients.behaviourOf(`unix://${pluginSocketPath(dataDir, 'alloc-1')}`).vendorVersion = '1.2.3';
    touchSocket();
    await post;
    expect(registry.get('csi-node', 'hostpath')).toMatchObject({
      allocId: 'alloc-1',
      version: '1.2.3',
      socketPath: pluginSocketPath(dataDir, 'alloc-1'),
    });
    expect(registry.get('csi-controller', 'hostpath')).toMatchObject({ allocId: 'alloc-1' });
    expect(ctx.events.map((e) => e.type)).toEqual([TASK_EVENT_PLUGIN_HEALTHY]);
    expect(ctx.restarts).toEqual([]);
    await h.stop(ctx);
  });

  it('probes fast at first and registers once a failing probe succeeds', async () => {
    let calls = 0;
    clients.probe = () => (++calls < 4 ? new Error('connect ECONNREFUSED') : { ready: true });
    const h = hook(config({ type: 'node' }));
    const ctx = taskContext();
    await h.prestart(ctx);
    touchSocket();
    let finished = false;
    const post = h.poststart(ctx).then(() => (finished = true));
    await advanceUntil(() => finished, 1000, 1);
    await post;
    // at once, then after 5, 10 and 20 ms: well before Nomad's 5 s period
    expect(clock.now()).toBeLessThanOrEqual(40);
    expect(calls).toBe(4);
    expect(registry.get('csi-node', 'hostpath')).toBeDefined();
    expect(registry.get('csi-controller', 'hostpath')).toBeUndefined();
    await h.stop(ctx);
  });

  it('a probe answering not-ready counts as unhealthy', async () => {
    // What the registry held when each probe came in: nothing until a probe said ready.
    const registeredAtProbe: boolean[] = [];
    clients.probe = () => {
      registeredAtProbe.push(registry.get('csi-controller', 'hostpath') !== undefined);
      return { ready: registeredAtProbe.length > 2 };
    };
    const h = hook(config({ type: 'controller' }));
    const ctx = taskContext();
    await h.prestart(ctx);
    touchSocket();
    let finished = false;
    const post = h.poststart(ctx).then(() => (finished = true));
    await advanceUntil(() => finished, 1000, 1);
    await post;
    expect(registeredAtProbe).toEqual([false, false, false]);
    expect(registry.get('csi-controller', 'hostpath')).toMatchObject({ allocId: 'alloc-1' });
    expect(ctx.events.map((e) => e.type)).toEqual([TASK_EVENT_PLUGIN_HEALTHY]);
    await h.stop(ctx);
  });

  it('a plugin that only ever answers not-ready is restarted by the health timeout, the reason naming it', async () => {
    clients.probe = () => ({ ready: false });
    const h = hook(config({ healthTimeout: 1_000 }));
    const ctx = taskContext();
    await h.prestart(ctx);
    touchSocket();
    let finished = false;
    const post = h.poststart(ctx).then(() => (finished = true));
    await advanceUntil(() => finished, 2_000, 50);
    await post;
    expect(ctx.events.map((e) => e.type)).toEqual([TASK_EVENT_PLUGIN_UNHEALTHY]);
    expect(ctx.events[0]!.message).toMatch(/not healthy within 1s \(last: probe answered not ready\)/);
    expect(ctx.restarts).toHaveLength(1);
    expect(registry.list('csi-node')).toEqual([]);
    expect(registry.list('csi-controller')).toEqual([]);
  });

  it('asks for a restart when the plugin is not healthy by the health timeout, and registers nothing', async () => {
    clients.probe = () => new Error('connect ECONNREFUSED');
    const h = hook(config({ healthTimeout: 10_000 }));
    const ctx = taskContext();
    await h.prestart(ctx);
    touchSocket();
    let finished = false;
    const post = h.poststart(ctx).then(() => (finished = true));
    await advanceUntil(() => finished, 11_000, 250);
    await post;
    expect(ctx.events.map((e) => e.type)).toEqual([TASK_EVENT_PLUGIN_UNHEALTHY]);
    expect(ctx.events[0]!.message).toMatch(/not healthy within 10s.*ECONNREFUSED/);
    expect(ctx.restarts).toHaveLength(1);
    expect(registry.list('csi-node')).toEqual([]);
    expect(registry.list('csi-controller')).toEqual([]);
  });

  it('asks for a restart when the socket never appears', async () => {
    const h = hook(config({ healthTimeout: 5_000 }));
    const ctx = taskContext();
    await h.prestart(ctx);
    const post = h.poststart(ctx);
    await clock.advance(5_000);
    await post;
    expect(ctx.events[0]).toMatchObject({ type: TASK_EVENT_PLUGIN_UNHEALTHY });
    expect(ctx.events[0]!.message).toMatch(/csi\.sock did not appear within 5s/);
    // The reason leads the task's events, down to "restart attempts exhausted" when the policy gives up.
    expect(ctx.restarts).toEqual([
      expect.stringMatching(/^plugin hostpath did not become healthy within 5s: socket \S+csi\.sock did not appear within 5s$/),
    ]);
    expect(clients.clients).toHaveLength(0);
  });

  it('steady-state health flaps emit one event per change', async () => {
    const h = hook(config({ type: 'node' }));
    const ctx = taskContext();
    await h.prestart(ctx);
    touchSocket();
    await h.poststart(ctx);
    const answers = [true, false, false, true, true, false];
    for (const ready of answers) {
      clients.probe = () => (ready ? { ready: true } : new Error('plugin crashed'));
      await clock.advance(30_000);
    }
    expect(ctx.events.map((e) => e.type)).toEqual([
      TASK_EVENT_PLUGIN_HEALTHY, // startup
      TASK_EVENT_PLUGIN_UNHEALTHY,
      TASK_EVENT_PLUGIN_HEALTHY,
      TASK_EVENT_PLUGIN_UNHEALTHY,
    ]);
    expect(ctx.events[1]!.message).toMatch(/plugin crashed/);
    await h.stop(ctx);
    const probes = clients.totalProbes;
    await clock.advance(120_000);
    expect(clients.totalProbes).toBe(probes);
  });

  it('stop of a monolith removes both registrations, disposes the client and removes the socket dir', async () => {
    const h = hook();
    const ctx = taskContext();
    await h.prestart(ctx);
    touchSocket();
    await h.poststart(ctx);
    expect(h.registrations).toHaveLength(2);
    await h.stop(ctx);
    expect(registry.allocPlugins('alloc-1')).toEqual([]);
    expect(clients.clients[0]!.disposed).toBe(true);
    expect(fs.existsSync(path.join(dataDir, 'plugins', 'alloc-1'))).toBe(false);
    // stop is idempotent
    await h.stop(ctx);
  });

  it('detach (the agent stops, the task runs on) stops probing but keeps the registrations', async () => {
    const h = hook();
    const ctx = taskContext();
    await h.prestart(ctx);
    touchSocket();
    await h.poststart(ctx);
    h.detach();
    const probes = clients.totalProbes;
    await clock.advance(120_000);
    expect(clients.totalProbes).toBe(probes);
    expect(clients.clients[0]!.disposed).toBe(true);
    expect(registry.allocPlugins('alloc-1')).toHaveLength(2);
    expect(fs.existsSync(pluginSocketPath(dataDir, 'alloc-1'))).toBe(true);
  });

  it('exited deregisters too, and a restarted task registers again', async () => {
    const h = hook();
    const ctx = taskContext();
    await h.prestart(ctx);
    touchSocket();
    await h.poststart(ctx);
    await h.exited(ctx);
    expect(registry.allocPlugins('alloc-1')).toEqual([]);
    await h.prestart(ctx);
    touchSocket();
    await h.poststart(ctx);
    expect(registry.allocPlugins('alloc-1')).toHaveLength(2);
    await h.stop(ctx);
  });

  it('a failed second registration rolls back the first and asks for a restart', async () => {
    const h = hook();
    const ctx = taskContext();
    await h.prestart(ctx);
    touchSocket();
    const realPut = state.putRegistryState.bind(state);
    let puts = 0;
    state.putRegistryState = (s) => {
      if (++puts === 2) throw new Error('disk full');
      realPut(s);
    };
    await h.poststart(ctx);
    state.putRegistryState = realPut;
    expect(registry.allocPlugins('alloc-1')).toEqual([]);
    expect(state.getRegistryState<RegistryStateRecord>()?.plugins['csi-controller']?.hostpath ?? []).toEqual([]);
    expect(ctx.events.map((e) => e.type)).toEqual([TASK_EVENT_PLUGIN_HEALTHY, TASK_EVENT_PLUGIN_UNHEALTHY]);
    expect(ctx.events[1]!.message).toMatch(/failed to register plugin: hostpath.*disk full/);
    expect(ctx.restarts).toHaveLength(1);
  });

  it('stop during startup ends quietly: no restart, nothing registered', async () => {
    clients.probe = () => new Error('not yet');
    const h = hook();
    const ctx = taskContext();
    await h.prestart(ctx);
    touchSocket();
    const post = h.poststart(ctx);
    await clock.advance(50);
    await h.stop(ctx);
    await clock.advance(60_000);
    await post;
    expect(ctx.restarts).toEqual([]);
    expect(registry.allocPlugins('alloc-1')).toEqual([]);
  });

  it('a restored plugin whose task ends before it re-registered is still deregistered, both entries', async () => {
    const first = hook();
    const ctx1 = taskContext();
    await first.prestart(ctx1);
    touchSocket();
    await first.poststart(ctx1);
    first.detach(); // agent restart: the registrations stay
    registry.dispose();
    registry = makeRegistry();
    expect(registry.allocPlugins('alloc-1')).toHaveLength(2);
    const restored = hook();
    const ctx = taskContext({ kind: 'restore' });
    await restored.prestart(ctx);
    await restored.exited(ctx); // the task had died while the agent was away
    expect(registry.allocPlugins('alloc-1')).toEqual([]);
  });

  it('restore: the running plugin is probed and re-registered in its old place', async () => {
    // before the agent restart: alloc-1 then alloc-2 registered; alloc-2 active
    const first = hook(config({ type: 'node' }));
    const ctx1 = taskContext();
    await first.prestart(ctx1);
    touchSocket();
    await first.poststart(ctx1);
    registry.register({ type: 'csi-node', name: 'hostpath', allocId: 'alloc-2', socketPath: '/x/csi.sock', version: '1' });
    // agent restart: a new registry over the same state
    registry.dispose();
    registry = makeRegistry();
    expect(registry.registrations('csi-node', 'hostpath').map((r) => [r.allocId, r.restored])).toEqual([
      ['alloc-2', true],
      ['alloc-1', true],
    ]);
    const restored = hook(config({ type: 'node' }));
    const ctx = taskContext({ kind: 'restore' });
    await restored.prestart(ctx);
    await restored.poststart(ctx);
    expect(registry.registrations('csi-node', 'hostpath').map((r) => [r.allocId, r.restored])).toEqual([
      ['alloc-2', true],
      ['alloc-1', false],
    ]);
    await restored.stop(ctx);
  });
});
