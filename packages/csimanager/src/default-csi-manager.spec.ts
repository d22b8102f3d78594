// DefaultCSIManager over the real plugin registry, with fake CSI clients
// and a fake clock: instance lifecycle (incl. create-before-destroy on a
// plugin upgrade), plugin waits, fingerprinting and health, DI binding.
import { AbortError, ShutdownError, ValidationError } from '@csiplug/core';
import type { CSIManager, PluginHealthChange, PluginInfo, PluginReady, PluginRetired, UsageOptions } from '.';
import { Harness, FINGERPRINT_PERIOD, plugin } from '../test/harness';
import { CSIPluginWaitTimeoutError, PluginInstanceNotFoundError, registerCsiManager, ICSIManager, IMountTable, ProcMountTable } from '.';
import { csiError } from '@csiplug/csi/testing';
import { GrpcStatus } from '@csiplug/csi';
import { container as rootContainer } from 'tsyringe';

describe('CSI manager: instance lifecycle (Nomad manager scenarios)', () => {
  let h: Harness;
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.dispose();
  });

  it('picks up a plugin registered before start, fingerprints it and reports it healthy', async () => {
    const reg = plugin(0, 'csi-controller');
    h.registry.register(reg);
    expect(h.manager.pluginInfo('csi-controller', 'my-plugin')).toBeUndefined();
    await h.manager.start();
    await h.settle();
    const info = h.manager.pluginInfo('csi-controller', 'my-plugin');
    expect(info).toMatchObject({
      type: 'csi-controller',
      name: 'my-plugin',
      allocId: 'alloc-0',
      healthy: true,
      fingerprinted: true,
      description: 'healthy',
      deployment: 'controller',
    });
    expect(info?.controller).toMatchObject({ supportsAttachDetach: true, supportsCreateDelete: true, supportsExpand: false });
    expect(h.health.map((e) => [e.name, e.healthy, e.previous])).toEqual([['my-plugin', true, undefined]]);
  });

  it('removes the instance on deregistration, disposes its client and reports it unhealthy once', async () => {
    const reg = plugin(0, 'csi-controller');
    h.registry.register(reg);
    await h.manager.start();
    await h.settle();
    h.registry.deregister(reg.type, reg.name, reg.allocId);
    expect(h.manager.pluginInfo(reg.type, reg.name)).toBeUndefined();
    expect(h.factory.clientsOf(reg.socketPath).every((c) => c.disposed)).toBe(true);
    expect(h.health.map((e) => e.healthy)).toEqual([true, false]);
    expect(h.health[1]!.description).toContain('deregistered');
    await h.advance(FINGERPRINT_PERIOD * 3);
    expect(h.health).toHaveLength(2);
  });

  it('a deregistration of another alloc leaves the active instance alone (interleaved register and deregister)', async () => {
    await h.manager.start();
    h.registry.register(plugin(0));
    h.registry.register(plugin(1));
    await h.settle();
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')?.allocId).toBe('alloc-1');
    h.registry.deregister('csi-node', 'my-plugin', 'alloc-0');
    await h.settle();
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')).toMatchObject({
      allocId: 'alloc-1',
      socketPath: '/var/data/plugins/alloc-1/csi.sock',
      healthy: true,
    });
  });

  it('waitForPlugin fails after its phase deadline, naming type, name, phase and advice', async () => {
    await h.manager.start();
    const wait = h.manager.waitForPlugin('csi-node', 'my-plugin', 'prerun');
    const failed = expect(wait).rejects.toThrow(CSIPluginWaitTimeoutError);
    await h.advance(59_999);
    await h.advance(1);
    await failed;
    const err = (await wait.catch((e: unknown) => e)) as CSIPluginWaitTimeoutError;
    expect(err.message).toMatch(
      /timed out after 1m.*\(prerun limit\).*"my-plugin" of type csi-node to register; check the plugin task's logs/,
    );
    expect(err).toMatchObject({ pluginType: 'csi-node', pluginName: 'my-plugin', phase: 'prerun', stage: 'register', code: 'ETIMEOUT' });
  });

  it('waitForPlugin succeeds when the plugin registers later, after its first fingerprint', async () => {
    await h.manager.start();
    let done = false;
    const wait = h.manager.waitForPlugin('csi-node', 'my-plugin', 'restore').then((i) => ((done = true), i));
    await h.advance(4 * 60_000);
    expect(done).toBe(false);
    const reg = plugin(0);
    const gate = h.behaviour(reg).gate('Probe');
    h.registry.register(reg);
    await h.settle();
    expect(done).toBe(false); // registered, but not fingerprinted yet
    gate.release();
    await h.settle();
    expect(done).toBe(true);
    expect(await wait).toMatchObject({ allocId: 'alloc-0', healthy: true, node: { nodeId: 'node-1' } });
  });

  it('waitForPlugin waits for the first successful fingerprint, woken by it, within the same deadline', async () => {
    const reg = plugin(0);
    h.behaviour(reg).ready = false;
    h.registry.register(reg);
    await h.manager.start();
    await h.settle();
    let done = false;
    const wait = h.manager.waitForPlugin('csi-node', 'my-plugin', 'restore').then((i) => ((done = true), i));
    await h.advance(FINGERPRINT_PERIOD);
    expect(done).toBe(false);
    h.behaviour(reg).ready = true;
    await h.advance(FINGERPRINT_PERIOD);
    expect(done).toBe(true);
    expect((await wait).healthy).toBe(true);

    // And when it never fingerprints, the error says so and carries the last error.
    const reg2 = plugin(0, 'csi-node', { name: 'other' });
    h.behaviour(reg2).failures.set('Probe', csiError(GrpcStatus.UNAVAILABLE, 'Probe', 'connection refused'));
    h.registry.register(reg2);
    const wait2 = h.manager.waitForPlugin('csi-node', 'other', 'prerun');
    const failed = expect(wait2).rejects.toThrow(/"other" of type csi-node to answer its first fingerprint \(last error: .*UNAVAILABLE/);
    await h.advance(60_000);
    await failed;
  });

  it('waitForPlugin gives up with an AbortError when its signal aborts, and rejects bad phases', async () => {
    await h.manager.start();
    const ac = new AbortController();
    const wait = h.manager.waitForPlugin('csi-node', 'my-plugin', 'postrun', { signal: ac.signal });
    ac.abort();
    await expect(wait).rejects.toBeInstanceOf(AbortError);
    await expect(h.manager.waitForPlugin('csi-node', 'my-plugin', 'later' as never)).rejects.toBeInstanceOf(ValidationError);
  });

  it('dispose rejects pending waits with ShutdownError', async () => {
    const reg = plugin(0);
    h.behaviour(reg).ready = false;
    h.registry.register(reg);
    await h.manager.start();
    await h.settle();
    const wait = h.manager.waitForPlugin('csi-node', 'my-plugin', 'prerun');
    await h.settle();
    await h.manager.dispose();
    await expect(wait).rejects.toBeInstanceOf(ShutdownError);
  });

  it('dispose rejects a wait still in its register stage (the plugin never registered) with ShutdownError, and lets go of the registry wait', async () => {
    await h.manager.start();
    let outcome: unknown = 'pending';
    h.manager.waitForPlugin('csi-node', 'my-plugin', 'restore').then(
      () => (outcome = 'resolved'),
      (err: unknown) => (outcome = err),
    );
    await h.settle();
    expect(outcome).toBe('pending');
    // The registry stays: only the manager goes away.
    await h.manager.dispose();
    await h.settle();
    expect(outcome).toBeInstanceOf(ShutdownError);
    expect((outcome as Error).message).toBe('the CSI manager shut down while waiting for a plugin');
    // Nothing left armed: neither the registry's deadline nor the manager's resync.
    expect(h.clock.pendingTimers).toBe(0);
  });

  it('runs the controller and node instances of a monolith side by side, and stops them independently', async () => {
    const ctrl = plugin(0, 'csi-controller', { options: { pluginType: 'monolith' } });
    const node = plugin(0, 'csi-node', { options: { pluginType: 'monolith' } });
    h.registry.register(ctrl);
    h.registry.register(node);
    await h.manager.start();
    await h.settle();
    expect(h.manager.plugins().map((p) => [p.type, p.name, p.deployment, p.healthy])).toEqual([
      ['csi-controller', 'my-plugin', 'monolith', true],
      ['csi-node', 'my-plugin', 'monolith', true],
    ]);
    h.registry.deregister('csi-controller', 'my-plugin', 'alloc-0');
    await h.settle();
    expect(h.manager.plugins().map((p) => p.type)).toEqual(['csi-node']);
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')?.healthy).toBe(true);
    expect(h.manager.plugins('csi-controller')).toEqual([]);
  });

  it('swaps instances on registry events alone when resync is off, disposing the old client', async () => {
    await h.dispose();
    h = new Harness({ resync: false });
    await h.manager.start();
    h.registry.register(plugin(0));
    await h.settle();
    h.registry.register(plugin(1));
    await h.settle();
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')).toMatchObject({
      allocId: 'alloc-1',
      socketPath: '/var/data/plugins/alloc-1/csi.sock',
      healthy: true,
    });
    expect(h.factory.clientsOf('/var/data/plugins/alloc-0/csi.sock').every((c) => c.disposed)).toBe(true);
    expect(h.factory.clientsOf('/var/data/plugins/alloc-1/csi.sock').some((c) => !c.disposed)).toBe(true);
    // Deregistering the active alloc promotes alloc-0 again.
    h.registry.deregister('csi-node', 'my-plugin', 'alloc-1');
    await h.settle();
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')?.allocId).toBe('alloc-0');
    expect(h.clock.pendingTimers).toBeGreaterThan(0); // the instance's fingerprint timer only
  });

  it('keeps the active alloc across an agent restart, and a replacement alloc takes over afterwards', async () => {
    await h.manager.start();
    h.registry.register(plugin(0));
    h.registry.register(plugin(1));
    await h.settle();
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')?.allocId).toBe('alloc-1');
    await h.restart();
    expect(h.registry.get('csi-node', 'my-plugin')?.restored).toBe(true);
    await h.manager.start();
    await h.settle();
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')).toMatchObject({ allocId: 'alloc-1', healthy: true });
    // The first successful fingerprint confirms the restored entry alive.
    expect(h.registry.get('csi-node', 'my-plugin')?.restored).toBe(false);
    h.registry.register(plugin(2));
    await h.settle();
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')?.allocId).toBe('alloc-2');
  });

  it('after an agent restart, a restored plugin that was down is fingerprinted at once when it re-registers', async () => {
    await h.manager.start();
    h.registry.register(plugin(0));
    await h.settle();
    await h.restart();
    // the plugin is not back yet: its restored entry's socket refuses calls
    const down = csiError(GrpcStatus.UNAVAILABLE, 'Probe');
    h.behaviour(plugin(0)).failures.set('Probe', down);
    await h.manager.start();
    await h.settle();
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')).toMatchObject({ healthy: false });
    let found = false;
    const wait = h.manager.waitForPlugin('csi-node', 'my-plugin', 'restore').then(() => (found = true));
    // it comes back and its supervisor re-registers it with the same info
    h.behaviour(plugin(0)).failures.delete('Probe');
    h.registry.register(plugin(0));
    await h.settle(); // no clock movement: not the periodic round
    expect(found).toBe(true);
    await wait;
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')).toMatchObject({ healthy: true });
  });

  it('a re-registration that lands while a failing round is under way gets a fresh round at once', async () => {
    await h.manager.start();
    h.registry.register(plugin(0));
    await h.settle();
    await h.restart();
    const b = h.behaviour(plugin(0));
    b.failures.set('Probe', csiError(GrpcStatus.UNAVAILABLE, 'Probe'));
    await h.manager.start();
    await h.settle();
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')?.healthy).toBe(false);
    // the periodic round asks the plugin while it is still down, and hangs there
    b.failures.delete('Probe');
    b.failNext('Probe', csiError(GrpcStatus.UNAVAILABLE, 'Probe'));
    const gate = b.gate('Probe');
    await h.advance(FINGERPRINT_PERIOD);
    await gate.reached;
    // the plugin is back and re-registers while that round is under way
    h.registry.register(plugin(0));
    gate.release();
    await h.settle(); // no clock movement
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')?.healthy).toBe(true);
  });

  it('replaces the instance when the same alloc re-registers with a new socket (plugin task restart)', async () => {
    await h.manager.start();
    h.registry.register(plugin(0));
    await h.settle();
    h.registry.register(plugin(0, 'csi-node', { socketPath: '/var/data/plugins/alloc-0/csi-2.sock' }));
    await h.settle();
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')?.socketPath).toBe('/var/data/plugins/alloc-0/csi-2.sock');
    expect(h.factory.clientsOf('/var/data/plugins/alloc-0/csi.sock').every((c) => c.disposed)).toBe(true);
  });

  it('resyncs on the heartbeat period: a registration it missed is picked up', async () => {
    await h.manager.start();
    // Simulate a missed event: register while the manager is not listening.
    const internals = h.manager as unknown as { subscriptions: { clear(): void } };
    internals.subscriptions.clear();
    h.registry.register(plugin(0));
    await h.settle();
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')).toBeUndefined();
    await h.advance(FINGERPRINT_PERIOD);
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')?.healthy).toBe(true);
    h.registry.deregister('csi-node', 'my-plugin', 'alloc-0');
    await h.advance(FINGERPRINT_PERIOD);
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')).toBeUndefined();
  });

  it('registers csi-node and csi-controller dispensers on the registry', async () => {
    await h.manager.start();
    h.registry.register(plugin(0));
    const client = h.registry.dispense<{ endpoint: string }>('csi-node', 'my-plugin');
    expect(client.endpoint).toBe('/var/data/plugins/alloc-0/csi.sock');
  });

  it('volumeManager throws a typed not-found error without a node instance', async () => {
    await h.manager.start();
    h.registry.register(plugin(0, 'csi-controller'));
    await h.settle();
    expect(() => h.manager.volumeManager('my-plugin')).toThrow(PluginInstanceNotFoundError);
    expect(() => h.manager.volumeManager('my-plugin')).toThrow(
      /plugin "my-plugin" of type csi-node not found: no instance is running for it; check that its plugin task is running/,
    );
  });
});

describe('CSI manager: plugin upgrades (create-before-destroy)', () => {
  let h: Harness;
  let ready: PluginReady[];
  /** Health changes and ready events in the order they fired, each with what pluginInfo read at that moment. */
  let order: string[];
  const info = () => h.manager.pluginInfo('csi-node', 'my-plugin');
  const reading = () => `${info()?.allocId ?? 'none'}:${info()?.healthy ?? false}`;
  const usage: UsageOptions = { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' };

  beforeEach(async () => {
    h = new Harness();
    ready = [];
    order = [];
    h.manager.onDidChangeHealth((e: PluginHealthChange) => order.push(`health ${e.allocId} ${e.healthy} (reads ${reading()})`));
    h.manager.onDidBecomeReady((e) => {
      ready.push(e);
      order.push(`ready ${e.info.allocId} ${e.cause}${e.replaced ? ` replacing ${e.replaced.allocId}` : ''} (reads ${reading()})`);
    });
    await h.manager.start();
    h.registry.register(plugin(0));
    await h.settle();
    expect(info()).toMatchObject({ allocId: 'alloc-0', healthy: true });
    expect(order).toEqual(['health alloc-0 true (reads alloc-0:true)', 'ready alloc-0 started (reads alloc-0:true)']);
    order.length = 0;
    ready.length = 0;
  });
  afterEach(async () => {
    await h.dispose();
  });

  it('the serving instance serves until the new alloc answers its first healthy fingerprint; then they swap in one step, old stopped, new healthy, then ready', async () => {
    h.behaviour(plugin(1)).nodeId = 'node-new';
    const gate = h.behaviour(plugin(1)).gate('Probe');
    h.registry.register(plugin(1));
    await gate.reached;
    await h.settle();
    // The registry's active entry is alloc-1; the manager still serves through alloc-0.
    expect(h.registry.get('csi-node', 'my-plugin')?.allocId).toBe('alloc-1');
    expect(h.manager.incomingOf('csi-node', 'my-plugin')?.allocId).toBe('alloc-1');
    expect(info()).toMatchObject({ allocId: 'alloc-0', healthy: true });
    expect(h.manager.plugins().map((p) => p.allocId)).toEqual(['alloc-0']);
    expect(await h.manager.waitForPlugin('csi-node', 'my-plugin', 'prerun')).toMatchObject({ allocId: 'alloc-0', healthy: true });
    const vm = h.manager.volumeManager('my-plugin');
    expect(vm.externalNodeId).toBe('node-1');
    await vm.stageVolume({ id: 'vol-1', pluginId: 'my-plugin' }, usage);
    expect(h.behaviour(plugin(0)).callsOf('NodeStageVolume')).toHaveLength(1);
    expect(h.behaviour(plugin(1)).callsOf('NodeStageVolume')).toHaveLength(0);
    expect(h.factory.clientsOf(plugin(0).socketPath).some((c) => !c.disposed)).toBe(true);

    gate.release();
    await h.settle();
    expect(h.manager.incomingOf('csi-node', 'my-plugin')).toBeUndefined();
    expect(info()).toMatchObject({ allocId: 'alloc-1', healthy: true, fingerprinted: true });
    expect(vm.externalNodeId).toBe('node-new');
    expect(h.factory.clientsOf(plugin(0).socketPath).every((c) => c.disposed)).toBe(true);
    // Never a reading of 0 healthy: the old one's stop is told once the new one serves.
    expect(order).toEqual([
      'health alloc-0 false (reads alloc-1:true)',
      'health alloc-1 true (reads alloc-1:true)',
      'ready alloc-1 started replacing alloc-0 (reads alloc-1:true)',
    ]);
    expect(h.health.map((e) => [e.allocId, e.healthy, e.previous])).toEqual([
      ['alloc-0', true, undefined],
      ['alloc-0', false, true],
      ['alloc-1', true, undefined],
    ]);
    expect(h.health[1]!.description).toBe('stopped: replaced by alloc alloc-1, which is ready');
    expect(ready[0]!.replaced).toEqual({ allocId: 'alloc-0', socketPath: plugin(0).socketPath });
  });

  it('the serving alloc deregisters while the new one is not ready: the new one serves at once, and a wait pending then resolves with it once healthy', async () => {
    const gate = h.behaviour(plugin(1)).gate('Probe');
    h.registry.register(plugin(1));
    await gate.reached;
    h.registry.deregister('csi-node', 'my-plugin', 'alloc-0');
    await h.settle();
    expect(h.manager.incomingOf('csi-node', 'my-plugin')).toBeUndefined();
    expect(info()).toMatchObject({ allocId: 'alloc-1', healthy: false, fingerprinted: false });
    expect(h.factory.clientsOf(plugin(0).socketPath).every((c) => c.disposed)).toBe(true);
    expect(h.health.at(-1)).toMatchObject({
      allocId: 'alloc-0',
      healthy: false,
      description: 'stopped: alloc alloc-0 deregistered; alloc alloc-1 serves now',
    });
    let waited: PluginInfo | undefined;
    const wait = h.manager.waitForPlugin('csi-node', 'my-plugin', 'prerun').then((i) => (waited = i));
    await h.settle();
    expect(waited).toBeUndefined();
    gate.release();
    await h.settle();
    await wait;
    expect(waited).toMatchObject({ allocId: 'alloc-1', healthy: true });
    expect(order).toEqual([
      'health alloc-0 false (reads alloc-1:false)',
      'health alloc-1 true (reads alloc-1:true)',
      'ready alloc-1 started replacing alloc-0 (reads alloc-1:true)',
    ]);
  });

  it('a new alloc that fails its fingerprints: the old one keeps serving, the new one is fingerprinted on the normal rounds and warned about once; deregistered, it is dropped', async () => {
    const b = h.behaviour(plugin(1));
    b.failures.set('Probe', csiError(GrpcStatus.UNAVAILABLE, 'Probe', 'connection refused'));
    h.registry.register(plugin(1));
    await h.settle();
    await h.advance(FINGERPRINT_PERIOD);
    await h.advance(FINGERPRINT_PERIOD);
    expect(b.callsOf('Probe')).toHaveLength(3); // its first round, then one per period (the resync adds none)
    expect(info()).toMatchObject({ allocId: 'alloc-0', healthy: true });
    expect(h.manager.incomingOf('csi-node', 'my-plugin')?.info()).toMatchObject({
      allocId: 'alloc-1',
      healthy: false,
      lastError: expect.stringMatching(/connection refused/),
    });
    const warnings = h.logger.find('a new registration of the plugin is not healthy yet', 'warn');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.fields).toMatchObject({ allocId: 'alloc-1', serving: 'alloc-0' });
    // Its verdicts are not the plugin's: listeners hear nothing of it.
    expect(order).toEqual([]);

    h.registry.deregister('csi-node', 'my-plugin', 'alloc-1');
    await h.settle();
    expect(h.manager.incomingOf('csi-node', 'my-plugin')).toBeUndefined();
    expect(h.factory.clientsOf(plugin(1).socketPath).every((c) => c.disposed)).toBe(true);
    expect(info()).toMatchObject({ allocId: 'alloc-0', healthy: true });
    await h.advance(FINGERPRINT_PERIOD);
    expect(b.callsOf('Probe')).toHaveLength(3);
    expect(order).toEqual([]);
  });

  it('a new alloc that fails its first fingerprints takes over at its first healthy one, told as its first verdict', async () => {
    const b = h.behaviour(plugin(1));
    b.failures.set('Probe', csiError(GrpcStatus.UNAVAILABLE, 'Probe', 'connection refused'));
    h.registry.register(plugin(1));
    await h.settle();
    await h.advance(FINGERPRINT_PERIOD);
    expect(info()?.allocId).toBe('alloc-0');
    b.failures.delete('Probe');
    await h.advance(FINGERPRINT_PERIOD);
    expect(info()).toMatchObject({ allocId: 'alloc-1', healthy: true });
    expect(h.health.slice(1).map((e) => [e.allocId, e.healthy, e.previous])).toEqual([
      ['alloc-0', false, true],
      ['alloc-1', true, undefined],
    ]);
    expect(ready.map((e) => [e.info.allocId, e.cause, e.replaced?.allocId])).toEqual([['alloc-1', 'started', 'alloc-0']]);
  });

  it('the replaced alloc deregistering after the swap is told (onDidRetireInstance), once, naming it: what it served may be stale from now on', async () => {
    const retired: PluginRetired[] = [];
    h.manager.onDidRetireInstance((e) => retired.push(e));
    h.registry.register(plugin(1));
    await h.settle();
    expect(ready.map((e) => `${e.info.allocId} ${e.replaced?.allocId}`)).toEqual(['alloc-1 alloc-0']);
    // The swap alone retires nothing: the old alloc still runs (and serves its mounts).
    expect(retired).toEqual([]);
    h.registry.deregister('csi-node', 'my-plugin', 'alloc-0');
    await h.settle();
    expect(retired).toEqual([
      {
        info: expect.objectContaining({ allocId: 'alloc-1', healthy: true }),
        retired: { allocId: 'alloc-0', socketPath: plugin(0).socketPath },
        time: expect.any(Number),
      },
    ]);
    expect(info()).toMatchObject({ allocId: 'alloc-1', healthy: true });
    // Another alloc going away is not the predecessor.
    h.registry.register(plugin(2));
    h.registry.deregister('csi-node', 'my-plugin', 'alloc-2');
    await h.settle();
    expect(retired).toHaveLength(1);
  });

  it('a third registration while one is incoming: the newest replaces the incoming one, and replaces the serving one when ready', async () => {
    h.behaviour(plugin(1)).gate('Probe'); // never answers
    h.registry.register(plugin(1));
    await h.settle();
    expect(h.manager.incomingOf('csi-node', 'my-plugin')?.allocId).toBe('alloc-1');
    const gate = h.behaviour(plugin(2)).gate('Probe');
    h.registry.register(plugin(2));
    await gate.reached;
    expect(h.manager.incomingOf('csi-node', 'my-plugin')?.allocId).toBe('alloc-2');
    expect(h.factory.clientsOf(plugin(1).socketPath).every((c) => c.disposed)).toBe(true);
    expect(info()).toMatchObject({ allocId: 'alloc-0', healthy: true });
    gate.release();
    await h.settle();
    expect(info()).toMatchObject({ allocId: 'alloc-2', healthy: true });
    expect(order).toEqual([
      'health alloc-0 false (reads alloc-2:true)',
      'health alloc-2 true (reads alloc-2:true)',
      'ready alloc-2 started replacing alloc-0 (reads alloc-2:true)',
    ]);
  });

  it('a serving instance that is not healthy (crashed) is replaced by a new alloc at once: there is nothing to keep', async () => {
    h.behaviour(plugin(0)).failures.set('Probe', csiError(GrpcStatus.UNAVAILABLE, 'Probe', 'connection refused'));
    await h.manager.fingerprintAll();
    expect(info()).toMatchObject({ allocId: 'alloc-0', healthy: false });
    h.behaviour(plugin(1)).gate('Probe');
    h.registry.register(plugin(1));
    await h.settle();
    expect(h.manager.incomingOf('csi-node', 'my-plugin')).toBeUndefined();
    expect(info()).toMatchObject({ allocId: 'alloc-1', fingerprinted: false });
    expect(h.factory.clientsOf(plugin(0).socketPath).every((c) => c.disposed)).toBe(true);
  });

  it('after an agent restart, a restored instance not fingerprinted yet is replaced by a new alloc at once', async () => {
    await h.restart();
    h.behaviour(plugin(0)).gate('Probe'); // the restored plugin does not answer yet
    await h.manager.start();
    await h.settle();
    expect(info()).toMatchObject({ allocId: 'alloc-0', fingerprinted: false });
    h.registry.register(plugin(1));
    await h.settle();
    expect(h.manager.incomingOf('csi-node', 'my-plugin')).toBeUndefined();
    expect(info()).toMatchObject({ allocId: 'alloc-1', healthy: true });
  });

  it('the same alloc re-registering with a new socket (its task restarted) is replaced at once, not kept beside', async () => {
    const moved = plugin(0, 'csi-node', { socketPath: '/var/data/plugins/alloc-0/csi-2.sock' });
    h.behaviour(moved).gate('Probe');
    h.registry.register(moved);
    await h.settle();
    expect(h.manager.incomingOf('csi-node', 'my-plugin')).toBeUndefined();
    expect(info()).toMatchObject({ socketPath: moved.socketPath, fingerprinted: false });
    expect(h.factory.clientsOf(plugin(0).socketPath).every((c) => c.disposed)).toBe(true);
  });

  it('the serving alloc re-registering with a new socket while a new one is incoming: the serving instance follows it, the incoming one stays', async () => {
    const gate = h.behaviour(plugin(1)).gate('Probe');
    h.registry.register(plugin(1));
    await gate.reached;
    const moved = plugin(0, 'csi-node', { socketPath: '/var/data/plugins/alloc-0/csi-2.sock' });
    h.registry.register(moved); // not the active entry: alloc-1 is newer
    await h.settle();
    expect(info()).toMatchObject({ allocId: 'alloc-0', socketPath: moved.socketPath, healthy: true });
    expect(h.manager.incomingOf('csi-node', 'my-plugin')?.allocId).toBe('alloc-1');
    gate.release();
    await h.settle();
    expect(info()).toMatchObject({ allocId: 'alloc-1', healthy: true });
    expect(ready.at(-1)).toMatchObject({ info: { allocId: 'alloc-1' }, replaced: { allocId: 'alloc-0', socketPath: moved.socketPath } });
  });

  it('a newer alloc deregistered while incoming brings the serving one back as the active entry; the serving instance is kept', async () => {
    h.behaviour(plugin(1)).gate('Probe');
    h.registry.register(plugin(1));
    await h.settle();
    const served = h.manager.instanceOf('csi-node', 'my-plugin');
    h.registry.deregister('csi-node', 'my-plugin', 'alloc-1');
    await h.settle();
    expect(h.registry.get('csi-node', 'my-plugin')?.allocId).toBe('alloc-0');
    expect(h.manager.instanceOf('csi-node', 'my-plugin')).toBe(served);
    expect(h.manager.incomingOf('csi-node', 'my-plugin')).toBeUndefined();
    expect(order).toEqual([]);
  });

  it('a resync drops an incoming instance whose registration it missed the end of, and keeps the serving one', async () => {
    h.behaviour(plugin(1)).gate('Probe');
    h.registry.register(plugin(1));
    await h.settle();
    const internals = h.manager as unknown as { subscriptions: { clear(): void } };
    internals.subscriptions.clear();
    h.registry.deregister('csi-node', 'my-plugin', 'alloc-1');
    await h.settle();
    expect(h.manager.incomingOf('csi-node', 'my-plugin')?.allocId).toBe('alloc-1');
    await h.advance(FINGERPRINT_PERIOD);
    expect(h.manager.incomingOf('csi-node', 'my-plugin')).toBeUndefined();
    expect(h.factory.clientsOf(plugin(1).socketPath).every((c) => c.disposed)).toBe(true);
    expect(info()).toMatchObject({ allocId: 'alloc-0', healthy: true });
  });

  it('a wait pending while the serving instance is down resolves with the incoming one when it takes over', async () => {
    const gate = h.behaviour(plugin(1)).gate('Probe');
    h.registry.register(plugin(1));
    await gate.reached;
    // The serving plugin crashes; the new one has not answered yet: neither serves healthy.
    h.behaviour(plugin(0)).failures.set('Probe', csiError(GrpcStatus.UNAVAILABLE, 'Probe', 'connection refused'));
    await h.manager.instanceOf('csi-node', 'my-plugin')!.fingerprint();
    expect(info()).toMatchObject({ allocId: 'alloc-0', healthy: false });
    let waited: PluginInfo | undefined;
    const wait = h.manager.waitForPlugin('csi-node', 'my-plugin', 'prerun').then((i) => (waited = i));
    await h.settle();
    expect(waited).toBeUndefined();
    gate.release();
    await h.settle();
    await wait;
    expect(waited).toMatchObject({ allocId: 'alloc-1', healthy: true });
    expect(order).toEqual([
      'health alloc-0 false (reads alloc-0:false)',
      'health alloc-1 true (reads alloc-1:true)',
      'ready alloc-1 started replacing alloc-0 (reads alloc-1:true)',
    ]);
  });

  it('dispose stops the incoming instance too, and leaves no timer armed', async () => {
    const b = h.behaviour(plugin(1));
    b.failures.set('Probe', csiError(GrpcStatus.UNAVAILABLE, 'Probe', 'connection refused'));
    h.registry.register(plugin(1));
    await h.settle();
    expect(h.manager.incomingOf('csi-node', 'my-plugin')?.allocId).toBe('alloc-1');
    await h.manager.dispose();
    expect(h.factory.clientsOf(plugin(1).socketPath).every((c) => c.disposed)).toBe(true);
    expect(h.manager.incomingOf('csi-node', 'my-plugin')).toBeUndefined();
    expect(h.clock.pendingTimers).toBe(0);
  });
});

describe('CSI manager: fingerprinting and health', () => {
  let h: Harness;
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.dispose();
  });

  it('fetches plugin capabilities and node info once; probes and reads node capabilities every round', async () => {
    const reg = plugin(0);
    const b = h.behaviour(reg);
    b.maxVolumesPerNode = 0;
    h.registry.register(reg);
    await h.manager.start();
    await h.settle();
    await h.advance(FINGERPRINT_PERIOD);
    await h.advance(FINGERPRINT_PERIOD);
    const count = (m: string) => b.callsOf(m).length;
    expect([count('Probe'), count('GetPluginCapabilities'), count('NodeGetCapabilities'), count('NodeGetInfo')]).toEqual([3, 1, 3, 1]);
    const info = h.manager.pluginInfo('csi-node', 'my-plugin')!;
    expect(info.node).toMatchObject({
      nodeId: 'node-1',
      maxVolumes: Infinity,
      topology: { zone: 'z1' },
      requiresStaging: true,
      supportsStats: false,
    });
    expect(info.pluginCapabilities?.controllerService).toBe(true);
    expect(h.health).toHaveLength(1); // changes only
  });

  it('reports max volumes when the plugin sets a limit', async () => {
    const reg = plugin(0);
    h.behaviour(reg).maxVolumesPerNode = 7;
    h.registry.register(reg);
    await h.manager.start();
    await h.settle();
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')?.node?.maxVolumes).toBe(7);
  });

  it('treats an empty node id as an error', async () => {
    const reg = plugin(0);
    h.behaviour(reg).nodeId = '';
    h.registry.register(reg);
    await h.manager.start();
    await h.settle();
    const info = h.manager.pluginInfo('csi-node', 'my-plugin')!;
    expect(info).toMatchObject({ healthy: false, fingerprinted: false });
    expect(info.lastError).toMatch(/empty node id/);
    expect(h.health.map((e) => e.healthy)).toEqual([false]);
  });

  it('skips node info when node capabilities fail', async () => {
    const reg = plugin(0);
    const b = h.behaviour(reg);
    b.failures.set('NodeGetCapabilities', csiError(GrpcStatus.INTERNAL, 'NodeGetCapabilities', 'boom'));
    h.registry.register(reg);
    await h.manager.start();
    await h.settle();
    expect(b.callsOf('NodeGetInfo')).toHaveLength(0);
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')?.lastError).toMatch(/boom/);
    b.failures.delete('NodeGetCapabilities');
    await h.advance(FINGERPRINT_PERIOD);
    expect(b.callsOf('NodeGetInfo')).toHaveLength(1);
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')?.healthy).toBe(true);
  });

  it('goes unhealthy when the probe says not ready, healthy again when it recovers; events on changes only', async () => {
    const reg = plugin(0);
    const b = h.behaviour(reg);
    h.registry.register(reg);
    await h.manager.start();
    await h.settle();
    const t0 = h.manager.pluginInfo('csi-node', 'my-plugin')!.updateTime;
    b.ready = false;
    await h.advance(FINGERPRINT_PERIOD);
    await h.advance(FINGERPRINT_PERIOD);
    const sick = h.manager.pluginInfo('csi-node', 'my-plugin')!;
    expect(sick).toMatchObject({ healthy: false, fingerprinted: true });
    expect(sick.lastError).toMatch(/not ready/);
    expect(sick.updateTime).toBe(t0 + FINGERPRINT_PERIOD);
    b.ready = true;
    await h.advance(FINGERPRINT_PERIOD);
    expect(h.health.map((e) => [e.healthy, e.previous])).toEqual([
      [true, undefined],
      [false, true],
      [true, false],
    ]);
  });

  it('bounds each fingerprint call by the TimeoutPolicy: a hung probe fails the round', async () => {
    const reg = plugin(0);
    const b = h.behaviour(reg);
    b.gate('Probe'); // never released
    h.registry.register(reg);
    await h.manager.start();
    await h.advance(4_999);
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')?.description).toBe('not fingerprinted yet');
    await h.advance(1);
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')?.lastError).toMatch(/Probe to plugin "my-plugin" got no answer within 5000 ms/);
    // The next round runs on schedule and succeeds.
    await h.advance(FINGERPRINT_PERIOD);
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')?.healthy).toBe(true);
  });

  it('dispose reports each healthy instance unhealthy once and stops all timers', async () => {
    h.registry.register(plugin(0));
    h.registry.register(plugin(0, 'csi-controller'));
    await h.manager.start();
    await h.settle();
    await h.manager.dispose();
    await h.manager.dispose();
    const seen = h.health.map((e) => `${e.type}:${e.healthy}`);
    expect(seen.slice(0, 2).sort()).toEqual(['csi-controller:true', 'csi-node:true']);
    expect(seen.slice(2).sort()).toEqual(['csi-controller:false', 'csi-node:false']);
    expect(h.clock.pendingTimers).toBe(0);
    expect(() => h.manager.volumeManager('my-plugin')).toThrow(ShutdownError);
  });
});

describe('registerCsiManager', () => {
  it('binds ICSIManager, IMountTable and the config with bindDefault', async () => {
    const c = rootContainer.createChildContainer();
    const h = new Harness();
    try {
      const { IClock, ILogger, ITimeoutPolicy, IHeartbeatStrategy } = await import('@csiplug/core');
      const { IPluginRegistry } = await import('@csiplug/registry');
      const { ICSIClientFactory } = await import('@csiplug/csi');
      const { IClientStateDB, bindStateStores } = await import('@csiplug/state');
      c.register(IClock, { useValue: h.clock });
      c.register(ILogger, { useValue: h.logger });
      c.register(ITimeoutPolicy, { useValue: h.policy });
      c.register(IHeartbeatStrategy, { useValue: h.heartbeat });
      c.register(IPluginRegistry, { useValue: h.registry });
      c.register(ICSIClientFactory, { useValue: h.factory });
      c.register(IClientStateDB, { useValue: h.db });
      bindStateStores(c);
      registerCsiManager(c, { dataDir: h.dataDir });
      expect(c.resolve(IMountTable)).toBeInstanceOf(ProcMountTable);
      const m = c.resolve<CSIManager>(ICSIManager);
      expect(c.resolve(ICSIManager)).toBe(m);
      h.registry.register(plugin(0));
      await m.start();
      await h.settle();
      expect(m.pluginInfo('csi-node', 'my-plugin')?.healthy).toBe(true);
      await m.dispose();
    } finally {
      await h.dispose();
    }
  });
});
