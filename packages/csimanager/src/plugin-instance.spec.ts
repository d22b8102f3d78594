// One plugin instance on its own, with a fake CSI client and a fake clock:
// what a fingerprint round asks and what it learns (node and controller
// info), the health verdicts it reports (first verdict, changes only,
// recovery, stop), the rounds it joins or adds, and the bounds on each call
// (TimeoutPolicy deadline, the caller's signal, the instance's stop).
import { DefaultTimeoutPolicy, FixedHeartbeatStrategy, MemoryLogger, ShutdownError, TimeoutError } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import { GrpcStatus } from '@csiplug/csi';
import { FakeCSIClient, FakePluginBehaviour, csiError } from '@csiplug/csi/testing';
import type { RegisteredPlugin } from '@csiplug/registry';
import { PluginInstanceStoppedError } from './errors';
import type { PluginHealthChange } from './plugin-info';
import { PluginInstance } from './plugin-instance';

const PERIOD = 30_000;

function setup(type = 'csi-node') {
  const clock = new FakeClock();
  const logger = new MemoryLogger();
  const behaviour = new FakePluginBehaviour();
  const client = new FakeCSIClient('/plugins/alloc-1/csi.sock', behaviour);
  const registration: RegisteredPlugin = {
    type,
    name: 'nfs',
    version: 'v1',
    allocId: 'alloc-1',
    socketPath: '/plugins/alloc-1/csi.sock',
    options: {},
    restored: false,
  };
  const health: PluginHealthChange[] = [];
  const rounds: { first: boolean; recovered: boolean }[] = [];
  const inst = new PluginInstance(registration, type === 'csi-node' ? 'node' : 'controller', client, {
    clock,
    logger,
    timeouts: new DefaultTimeoutPolicy(),
    heartbeat: new FixedHeartbeatStrategy({ fingerprintInterval: PERIOD, interval: PERIOD }),
    onHealthChange: (c) => health.push(c),
    onFingerprinted: (i, round) => {
      expect(i).toBe(inst);
      rounds.push(round);
    },
  });
  /** Lets the round under way finish without moving time. */
  const settle = async () => {
    for (let i = 0; i < 5; i++) await clock.advance(0);
  };
  const count = (m: string) => behaviour.callsOf(m).length;
  const verdicts = () => health.map((c) => [c.healthy, c.previous, c.description]);
  return { clock, logger, behaviour, client, inst, health, rounds, settle, count, verdicts };
}

describe('PluginInstance', () => {
  it('before its first round: not healthy, not fingerprinted, nothing learnt', () => {
    const { inst, clock } = setup();
    expect(inst.info()).toStrictEqual({
      type: 'csi-node',
      name: 'nfs',
      allocId: 'alloc-1',
      socketPath: '/plugins/alloc-1/csi.sock',
      version: 'v1',
      deployment: 'node',
      healthy: false,
      fingerprinted: false,
      description: 'not fingerprinted yet',
      updateTime: clock.now(),
    });
    expect(Object.isFrozen(inst.info())).toBe(true);
    expect([inst.isHealthy, inst.hasFingerprinted, inst.isStopped, inst.nodeId]).toEqual([false, false, false, undefined]);
  });

  it("a node plugin's first round probes, then learns plugin capabilities, node capabilities and node info; reported as the first verdict", async () => {
    const s = setup();
    s.behaviour.maxVolumesPerNode = 12;
    s.behaviour.answers.set('NodeGetCapabilities', () => ({
      capabilities: ['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'EXPAND_VOLUME', 'VOLUME_CONDITION'].map((type) => ({ rpc: { type } })),
    }));
    await s.clock.advance(1000);
    s.inst.start();
    await s.settle();
    expect(s.behaviour.calls.map((c) => c.method)).toEqual(['Probe', 'GetPluginCapabilities', 'NodeGetCapabilities', 'NodeGetInfo']);
    expect([s.inst.isHealthy, s.inst.hasFingerprinted, s.inst.nodeId]).toEqual([true, true, 'node-1']);
    const info = s.inst.info();
    expect(info).toMatchObject({ healthy: true, fingerprinted: true, description: 'healthy', updateTime: s.clock.now() });
    expect(info.lastError).toBeUndefined();
    expect(info.pluginCapabilities).toMatchObject({ controllerService: true });
    expect(info.node).toMatchObject({
      nodeId: 'node-1',
      maxVolumes: 12,
      topology: { zone: 'z1' },
      requiresStaging: true,
      supportsStats: true,
      supportsExpand: true,
      supportsCondition: true,
      capabilities: expect.objectContaining({ stageUnstageVolume: true, getVolumeStats: true, expandVolume: true, volumeCondition: true }),
    });
    expect(info.controller).toBeUndefined();
    // A snapshot shared by every listener: none of its parts can be changed.
    expect([info, info.pluginCapabilities, info.node, info.node!.capabilities].map((o) => Object.isFrozen(o))).toEqual([
      true,
      true,
      true,
      true,
    ]);
    expect(s.health).toEqual([
      {
        type: 'csi-node',
        name: 'nfs',
        allocId: 'alloc-1',
        healthy: true,
        previous: undefined,
        description: 'healthy',
        info: s.inst.info(),
        time: s.clock.now(),
      },
    ]);
    expect(s.rounds).toEqual([{ first: true, recovered: false }]);
    expect(s.logger.find('plugin became healthy', 'info')).toHaveLength(1);
  });

  it('later rounds probe and read node capabilities again, but not plugin capabilities nor node info; no health event without a change', async () => {
    const s = setup();
    s.inst.start();
    await s.settle();
    await s.clock.advance(PERIOD);
    await s.settle();
    await s.clock.advance(PERIOD);
    await s.settle();
    expect([s.count('Probe'), s.count('GetPluginCapabilities'), s.count('NodeGetCapabilities'), s.count('NodeGetInfo')]).toEqual([
      3, 1, 3, 1,
    ]);
    expect(s.rounds).toEqual([
      { first: true, recovered: false },
      { first: false, recovered: false },
      { first: false, recovered: false },
    ]);
    expect(s.health).toHaveLength(1);
  });

  it('a node that sets no volume limit (0, or not a number) has no limit; no topology segments means no topology', async () => {
    const s = setup();
    s.behaviour.topology = {};
    s.behaviour.answers.set('NodeGetInfo', () => ({ nodeId: 'n', maxVolumesPerNode: 'lots', accessibleTopology: { segments: {} } }));
    s.inst.start();
    await s.settle();
    expect(s.inst.info().node).toMatchObject({ nodeId: 'n', maxVolumes: Infinity });
    expect(s.inst.info().node).not.toHaveProperty('topology');

    const t = setup();
    t.behaviour.answers.set('NodeGetInfo', () => ({ nodeId: 'n', maxVolumesPerNode: '0', accessibleTopology: null }));
    t.inst.start();
    await t.settle();
    expect(t.inst.info().node).toMatchObject({ maxVolumes: Infinity });
    expect(t.inst.info().node).not.toHaveProperty('topology');
  });

  it("a controller plugin's round reads controller capabilities instead: no node info", async () => {
    const s = setup('csi-controller');
    s.behaviour.controllerCaps = ['PUBLISH_UNPUBLISH_VOLUME', 'EXPAND_VOLUME', 'LIST_VOLUMES', 'GET_CAPACITY', 'CLONE_VOLUME'];
    s.inst.start();
    await s.settle();
    expect(s.behaviour.calls.map((c) => c.method)).toEqual(['Probe', 'GetPluginCapabilities', 'ControllerGetCapabilities']);
    const info = s.inst.info();
    expect(info.deployment).toBe('controller');
    expect(info.node).toBeUndefined();
    expect(info.controller).toMatchObject({
      supportsAttachDetach: true,
      supportsCreateDelete: false,
      supportsExpand: true,
      supportsListVolumes: true,
      supportsGetCapacity: true,
      supportsSnapshots: false,
      supportsClone: true,
      supportsReadOnlyAttach: false,
      supportsCondition: false,
      capabilities: expect.objectContaining({ publishUnpublishVolume: true, expandVolume: true }),
    });
    expect([Object.isFrozen(info.controller), Object.isFrozen(info.controller!.capabilities)]).toEqual([true, true]);
    expect(s.health.map((c) => c.healthy)).toEqual([true]);
  });

  it('goes unhealthy on a failed round, keeps its last error, and reports the recovery as one', async () => {
    const s = setup();
    s.inst.start();
    await s.settle();
    s.behaviour.ready = false;
    await s.clock.advance(PERIOD);
    await s.settle();
    const failed = 'plugin "nfs" reports it is not ready (Probe ready=false)';
    expect(s.inst.info()).toMatchObject({
      healthy: false,
      fingerprinted: true,
      description: `fingerprint failed: ${failed}`,
      lastError: failed,
    });
    expect(s.health.at(-1)).toMatchObject({ healthy: false, previous: true, lastError: failed, time: s.clock.now() });
    expect(s.logger.find('fingerprint failed', 'warn')[0]!.fields).toMatchObject({ error: failed });
    expect(s.logger.find('plugin became unhealthy', 'warn')).toHaveLength(1);

    s.behaviour.ready = true;
    await s.clock.advance(PERIOD);
    await s.settle();
    expect(s.verdicts()).toEqual([
      [true, undefined, 'healthy'],
      [false, true, `fingerprint failed: ${failed}`],
      [true, false, 'healthy'],
    ]);
    // The last error stays, for whoever wonders what happened.
    expect(s.health.at(-1)!.lastError).toBe(failed);
    expect(s.inst.info()).toMatchObject({ healthy: true, description: 'healthy', lastError: failed });
    expect(s.rounds).toEqual([
      { first: true, recovered: false },
      { first: false, recovered: true },
    ]);
  });

  it('a first round that fails is the first verdict; the first success after it is `first`, not `recovered`', async () => {
    const s = setup();
    s.behaviour.failNext('Probe', csiError(GrpcStatus.UNAVAILABLE, 'Probe', 'connection refused'));
    s.inst.start();
    await s.settle();
    expect(s.health).toHaveLength(1);
    expect(s.health[0]).toMatchObject({ healthy: false, previous: undefined });
    expect(s.health[0]!.lastError).toMatch(/connection refused/);
    expect([s.inst.isHealthy, s.inst.hasFingerprinted]).toEqual([false, false]);
    await s.clock.advance(PERIOD);
    await s.settle();
    expect(s.verdicts().map(([healthy, previous]) => [healthy, previous])).toEqual([
      [false, undefined],
      [true, false],
    ]);
    expect(s.rounds).toEqual([{ first: true, recovered: false }]);
  });

  it('an unchanged failure tells nobody and keeps its update time; a different one updates the info only', async () => {
    const s = setup();
    s.behaviour.failures.set('Probe', csiError(GrpcStatus.INTERNAL, 'Probe', 'broken'));
    s.inst.start();
    await s.settle();
    const t0 = s.inst.info().updateTime;
    await s.clock.advance(PERIOD);
    await s.settle();
    expect(s.inst.info().updateTime).toBe(t0);
    s.behaviour.failures.set('Probe', csiError(GrpcStatus.INTERNAL, 'Probe', 'still broken'));
    await s.clock.advance(PERIOD);
    await s.settle();
    expect(s.inst.info().updateTime).toBe(t0 + 2 * PERIOD);
    expect(s.inst.info().lastError).toMatch(/still broken/);
    expect(s.health).toHaveLength(1);
  });

  it('an empty node id fails the round, and node info is asked again next round', async () => {
    const s = setup();
    s.behaviour.nodeId = '';
    s.inst.start();
    await s.settle();
    expect(s.inst.info().lastError).toBe('plugin "nfs" returned an empty node id from NodeGetInfo; a node plugin must name its node');
    expect(s.inst.info().node).toBeUndefined();
    s.behaviour.nodeId = 'node-9';
    await s.clock.advance(PERIOD);
    await s.settle();
    expect(s.count('NodeGetInfo')).toBe(2);
    expect(s.inst.nodeId).toBe('node-9');
  });

  it('start runs one round at once and one per period; a second start adds none', async () => {
    const s = setup();
    s.inst.start();
    s.inst.start();
    await s.settle();
    expect(s.count('Probe')).toBe(1);
    await s.clock.advance(PERIOD - 1);
    await s.settle();
    expect(s.count('Probe')).toBe(1);
    await s.clock.advance(1);
    await s.settle();
    expect(s.count('Probe')).toBe(2);
    expect(s.clock.pendingTimers).toBe(1);
  });

  it('fingerprint joins the round under way', async () => {
    const s = setup();
    const gate = s.behaviour.gate('Probe');
    const a = s.inst.fingerprint();
    const b = s.inst.fingerprint();
    await gate.reached;
    gate.release();
    await Promise.all([a, b]);
    expect(s.count('Probe')).toBe(1);
    await s.inst.fingerprint();
    expect(s.count('Probe')).toBe(2);
  });

  it('fingerprintAfterNews: a round now if none runs; after one under way, another only if it ended unhealthy', async () => {
    const s = setup();
    await s.inst.fingerprintAfterNews();
    expect(s.count('Probe')).toBe(1);

    // A round under way that ends healthy: nothing more.
    let gate = s.behaviour.gate('Probe');
    let round = s.inst.fingerprint();
    await gate.reached;
    let news = s.inst.fingerprintAfterNews();
    expect(s.inst.fingerprintAfterNews()).toBe(news);
    gate.release();
    await round;
    await news;
    expect(s.count('Probe')).toBe(2);

    // One that ends unhealthy: one more round at once.
    s.behaviour.failNext('Probe', csiError(GrpcStatus.UNAVAILABLE, 'Probe', 'restarting'));
    gate = s.behaviour.gate('Probe');
    round = s.inst.fingerprint();
    await gate.reached;
    news = s.inst.fingerprintAfterNews();
    gate.release();
    await round;
    await news;
    expect(s.count('Probe')).toBe(4);
    expect(s.inst.isHealthy).toBe(true);
  });

  it('stop disposes the client, reports a healthy instance unhealthy once, and ends its rounds', async () => {
    const s = setup();
    s.inst.start();
    await s.settle();
    s.inst.stop('alloc alloc-1 deregistered');
    s.inst.stop('again');
    expect([s.inst.isStopped, s.inst.isHealthy, s.client.disposed]).toEqual([true, false, true]);
    expect(s.verdicts()).toEqual([
      [true, undefined, 'healthy'],
      [false, true, 'stopped: alloc alloc-1 deregistered'],
    ]);
    expect(s.clock.pendingTimers).toBe(0);
    await s.inst.fingerprint();
    await s.inst.fingerprintAfterNews();
    s.inst.start();
    await s.clock.advance(PERIOD);
    expect(s.count('Probe')).toBe(1);
  });

  it('stopping an unhealthy instance tells nothing more; a client that fails to dispose is logged', async () => {
    const s = setup();
    s.behaviour.ready = false;
    s.inst.start();
    await s.settle();
    s.client.dispose = () => {
      throw new Error('socket stuck');
    };
    s.inst.dispose();
    expect(s.inst.isStopped).toBe(true);
    expect(s.health.map((c) => c.healthy)).toEqual([false]);
    expect(s.logger.find('disposing the CSI client failed', 'warn')[0]!.fields).toMatchObject({ error: 'socket stuck' });
  });

  it('a round cut short by a stop reports nothing', async () => {
    const s = setup();
    const gate = s.behaviour.gate('NodeGetInfo');
    s.inst.start();
    await gate.reached;
    s.inst.stop('replaced');
    gate.release();
    await s.inst.settled();
    await s.settle();
    expect(s.health).toEqual([]);
    expect(s.rounds).toEqual([]);
    expect(s.inst.info()).toMatchObject({ fingerprinted: false, description: 'not fingerprinted yet' });
    expect(s.clock.pendingTimers).toBe(0); // no next round scheduled
  });

  it('a round stopped as soon as it starts reports nothing', async () => {
    const s = setup();
    s.inst.start();
    s.inst.stop('replaced');
    await s.inst.settled();
    await s.settle();
    expect(s.health).toEqual([]);
    expect(s.rounds).toEqual([]);
  });

  describe('nodeCapabilities and the bounds on each call', () => {
    it('asks NodeGetCapabilities once when no round has, then answers from what it knows', async () => {
      const s = setup();
      expect((await s.inst.nodeCapabilities()).stageUnstageVolume).toBe(true);
      expect((await s.inst.nodeCapabilities()).stageUnstageVolume).toBe(true);
      expect(s.count('NodeGetCapabilities')).toBe(1);
      expect(s.count('Probe')).toBe(0);
    });

    it("a call that gets no answer fails at the policy's deadline, naming the call and the plugin", async () => {
      const s = setup();
      s.behaviour.gate('NodeGetCapabilities');
      const caps = s.inst.nodeCapabilities().catch((e: unknown) => e);
      const limit = new DefaultTimeoutPolicy().csiCall();
      await s.clock.advance(limit - 1);
      await s.clock.advance(1);
      const err = await caps;
      expect(err).toBeInstanceOf(TimeoutError);
      expect(err).toMatchObject({
        message: `NodeGetCapabilities to plugin "nfs" got no answer within ${limit} ms; the plugin may be hung`,
        timeoutMs: limit,
      });
      expect(s.clock.pendingTimers).toBe(0);
    });

    it("a call ends with the caller's abort, or with the instance's stop; the deadline timer goes with it", async () => {
      const s = setup();
      s.behaviour.gate('NodeGetCapabilities');
      const ac = new AbortController();
      const reason = new Error('the caller gave up');
      const asked = s.inst.nodeCapabilities(ac.signal);
      ac.abort(reason);
      await expect(asked).rejects.toBe(reason);
      expect(s.clock.pendingTimers).toBe(0);

      const pre = new AbortController();
      pre.abort(reason);
      await expect(s.inst.nodeCapabilities(pre.signal)).rejects.toBe(reason);

      s.behaviour.gate('NodeGetCapabilities');
      const pending = s.inst.nodeCapabilities();
      s.inst.stop('alloc deregistered');
      const err = await pending.catch((e: unknown) => e);
      expect(err).toBeInstanceOf(PluginInstanceStoppedError);
      expect(err).toBeInstanceOf(ShutdownError);
      expect((err as Error).message).toBe('plugin "nfs" of type csi-node (alloc alloc-1) stopped: alloc deregistered');
      await expect(s.inst.nodeCapabilities()).rejects.toBeInstanceOf(PluginInstanceStoppedError);
      expect(s.clock.pendingTimers).toBe(0);
    });

    it("a hung probe fails the round at the policy's probe deadline", async () => {
      const s = setup();
      s.behaviour.gate('Probe');
      s.inst.start();
      const limit = new DefaultTimeoutPolicy().probe();
      await s.clock.advance(limit - 1);
      await s.settle();
      expect(s.health).toEqual([]);
      await s.clock.advance(1);
      await s.settle();
      expect(s.inst.info().lastError).toBe(`Probe to plugin "nfs" got no answer within ${limit} ms; the plugin may be hung`);
    });
  });
});
