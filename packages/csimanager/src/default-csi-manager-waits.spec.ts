// DefaultCSIManager's waits and lifecycle edges, over the real plugin
// registry with fake CSI clients and a fake clock (test/harness.ts): how
// long a waitForPlugin may take (phase limit, withinMs), what each wait
// records (PLUGIN_WAIT_SECONDS by type, phase and result), its stages'
// timeouts, start and waits after dispose, ready events (started,
// recovered, replaced), and what the manager does with registrations it
// cannot serve (unusable options, a client that cannot be made), a
// dispenser bound already, a failing resync, and listeners that throw.
import { type MetricDef, type MetricLabels, type Metrics, ShutdownError } from '@csiplug/core';
import { GrpcStatus } from '@csiplug/csi';
import { csiError } from '@csiplug/csi/testing';
import { FINGERPRINT_PERIOD, Harness, plugin } from '../test/harness';
import { CSIPluginWaitTimeoutError, PLUGIN_WAIT_SECONDS, PluginOptionsError, type PluginReady } from '.';

class RecordingMetrics implements Metrics {
  readonly observed: { name: string; value: number; labels: Record<string, string> }[] = [];
  count(): void {
    throw new Error('the CSI manager counts nothing');
  }
  observe<L extends string>(def: MetricDef<L>, value: number, labels: MetricLabels<L>): void {
    this.observed.push({ name: def.name, value, labels: { ...labels } });
  }
}

describe('CSI manager: waits, and what it records of them', () => {
  let h: Harness;
  let metrics: RecordingMetrics;
  const waits = () =>
    metrics.observed
      .filter((o) => o.name === PLUGIN_WAIT_SECONDS.name)
      .map((o) => [o.labels.type, o.labels.phase, o.labels.result, o.value]);

  beforeEach(async () => {
    metrics = new RecordingMetrics();
    h = new Harness({ metrics });
    await h.manager.start();
  });
  afterEach(async () => {
    await h.dispose();
  });

  it('a wait for a healthy plugin resolves at once with its info, and records `ready`', async () => {
    h.registry.register(plugin(0));
    await h.settle();
    const info = await h.manager.waitForPlugin('csi-node', 'my-plugin', 'prerun');
    expect(info).toEqual(h.manager.pluginInfo('csi-node', 'my-plugin'));
    await h.settle();
    expect(waits()).toEqual([['csi-node', 'prerun', 'ready', 0]]);
  });

  it('records how long a wait took, by type, phase and result: ready, timeout, aborted, error', async () => {
    const ready = h.manager.waitForPlugin('csi-controller', 'my-plugin', 'restore');
    await h.advance(2500);
    h.registry.register(plugin(0, 'csi-controller'));
    await h.settle();
    await ready;

    const timedOut = h.manager.waitForPlugin('csi-node', 'my-plugin', 'postrun').catch((e: unknown) => e);
    await h.advance(h.policy.pluginWait('postrun'));
    expect(await timedOut).toBeInstanceOf(CSIPluginWaitTimeoutError);

    const ac = new AbortController();
    const aborted = h.manager.waitForPlugin('csi-node', 'my-plugin', 'prerun', { signal: ac.signal }).catch((e: unknown) => e);
    await h.advance(500);
    ac.abort();
    await aborted;

    const shut = h.manager.waitForPlugin('csi-node', 'my-plugin', 'prerun').catch((e: unknown) => e);
    await h.manager.dispose();
    expect(await shut).toBeInstanceOf(ShutdownError);
    await h.settle();
    expect(waits()).toEqual([
      ['csi-controller', 'restore', 'ready', 2.5],
      ['csi-node', 'postrun', 'timeout', h.policy.pluginWait('postrun') / 1000],
      ['csi-node', 'prerun', 'aborted', 0.5],
      ['csi-node', 'prerun', 'error', 0],
    ]);
  });

  it('withinMs shortens a wait below its phase limit, never lengthens it, and 0 or less gives up at once', async () => {
    const short = h.manager.waitForPlugin('csi-node', 'my-plugin', 'restore', { withinMs: 1000 }).catch((e: unknown) => e);
    await h.advance(999);
    await h.advance(1);
    expect(await short).toMatchObject({ name: 'CSIPluginWaitTimeoutError', stage: 'register', waitedMs: 1000 });

    const phase = h.policy.pluginWait('prerun');
    let settled = false;
    const long = h.manager
      .waitForPlugin('csi-node', 'my-plugin', 'prerun', { withinMs: phase * 10 })
      .catch((e: unknown) => e)
      .finally(() => (settled = true));
    await h.advance(phase - 1);
    expect(settled).toBe(false);
    await h.advance(1);
    expect(await long).toMatchObject({ stage: 'register', waitedMs: phase, message: expect.stringContaining('(prerun limit)') });

    const none = h.manager.waitForPlugin('csi-node', 'my-plugin', 'prerun', { withinMs: -5 }).catch((e: unknown) => e);
    await h.advance(0);
    expect(await none).toMatchObject({ name: 'CSIPluginWaitTimeoutError', waitedMs: 0 });
  });

  it('the fingerprint stage gets what is left of the limit, not a fresh one', async () => {
    const wait = h.manager.waitForPlugin('csi-node', 'my-plugin', 'prerun', { withinMs: 10_000 }).catch((e: unknown) => e);
    await h.advance(4000);
    const reg = plugin(0);
    h.behaviour(reg).ready = false;
    h.registry.register(reg);
    await h.settle();
    let settled = false;
    void wait.finally(() => (settled = true));
    await h.advance(5999);
    expect(settled).toBe(false);
    await h.advance(1);
    expect(await wait).toMatchObject({
      stage: 'fingerprint',
      waitedMs: 10_000,
      message: expect.stringContaining('(last error: plugin "my-plugin" reports it is not ready (Probe ready=false))'),
    });
  });

  it('a plugin that was healthy and is down: the wait times out at its `healthy` stage', async () => {
    const reg = plugin(0);
    h.registry.register(reg);
    await h.settle();
    h.behaviour(reg).failures.set('Probe', csiError(GrpcStatus.UNAVAILABLE, 'Probe', 'connection refused'));
    await h.advance(FINGERPRINT_PERIOD);
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')?.healthy).toBe(false);
    const wait = h.manager.waitForPlugin('csi-node', 'my-plugin', 'postrun', { withinMs: 1000 }).catch((e: unknown) => e);
    await h.advance(1000);
    const err = await wait;
    expect(err).toMatchObject({ stage: 'healthy' });
    expect((err as Error).message).toMatch(/to be healthy again \(last error: .*connection refused\)/);
  });

  it('a wait is woken by its own plugin becoming healthy, not by another one', async () => {
    const mine = plugin(0);
    h.behaviour(mine).ready = false;
    h.registry.register(mine);
    const other = plugin(1, 'csi-node', { name: 'other' });
    h.registry.register(other);
    await h.settle();
    let info: unknown;
    void h.manager.waitForPlugin('csi-node', 'my-plugin', 'prerun').then((i) => (info = i));
    await h.manager.instanceOf('csi-node', 'other')!.fingerprint();
    await h.settle();
    expect(info).toBeUndefined();
    h.behaviour(mine).ready = true;
    await h.advance(FINGERPRINT_PERIOD);
    expect(info).toMatchObject({ name: 'my-plugin', healthy: true });
  });
});

describe('CSI manager: lifecycle edges', () => {
  let h: Harness;
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.dispose();
  });

  it('start is done once; after dispose neither start nor a wait nor a volume manager is possible', async () => {
    const started = h.manager.start();
    expect(h.manager.start()).toBe(started);
    await started;
    expect(h.logger.find('CSI manager started', 'info')).toHaveLength(1);
    expect(h.manager.dispose()).toBe(h.manager.dispose());
    await h.manager.dispose();
    await expect(h.manager.start()).rejects.toThrow(new ShutdownError('the CSI manager is shut down; it cannot start again'));
    await expect(h.manager.waitForPlugin('csi-node', 'nfs', 'prerun')).rejects.toThrow(
      new ShutdownError('the CSI manager is shut down; cannot wait for plugin "nfs" of type csi-node'),
    );
    expect(() => h.manager.volumeManager('nfs')).toThrow(
      new ShutdownError('the CSI manager is shut down; no volume manager for plugin "nfs"'),
    );
    // A registration after dispose starts nothing.
    h.registry.register(plugin(0));
    await h.settle();
    expect(h.manager.plugins()).toEqual([]);
  });

  it('keeps a dispenser a deployment bound for a type, and still serves that type', async () => {
    const own = () => h.factory.createClient('/elsewhere.sock');
    h.registry.registerDispenser('csi-node', own);
    await h.manager.start();
    expect(h.logger.find('a plugin dispenser is registered already; keeping it', 'info').map((r) => r.fields.type)).toEqual(['csi-node']);
    h.registry.register(plugin(0));
    await h.settle();
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')?.healthy).toBe(true);
  });

  it('a resync that fails is logged and tried again on the next period', async () => {
    await h.manager.start();
    const list = h.registry.list.bind(h.registry);
    let fail = true;
    h.registry.list = (type: string) => {
      if (fail) throw new Error('state DB locked');
      return list(type);
    };
    await h.advance(FINGERPRINT_PERIOD);
    expect(h.logger.find('resync with the plugin registry failed; retrying on the next period', 'error')[0]!.fields).toMatchObject({
      error: 'state DB locked',
    });
    fail = false;
    // A registration the manager missed (its event lost) is picked up by the next resync.
    h.manager['onRegistryEvent'] = () => undefined;
    h.registry.register(plugin(0));
    await h.settle();
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')).toBeUndefined(); // the event really was missed
    await h.advance(FINGERPRINT_PERIOD);
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')?.allocId).toBe('alloc-0');
  });

  it('serves a registration with unusable mount options (logged), whose volume steps then fail naming the option', async () => {
    await h.manager.start();
    h.registry.register(plugin(0, 'csi-node', { options: { stagePublishBaseDir: 'relative' } }));
    await h.settle();
    expect(h.logger.find('plugin registration has unusable mount options', 'error')[0]!.fields).toMatchObject({
      type: 'csi-node',
      name: 'my-plugin',
      allocId: 'alloc-0',
      error: expect.stringContaining('option stagePublishBaseDir="relative" must be an absolute path'),
    });
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')).toMatchObject({ deployment: 'node', healthy: true });
    const vm = h.manager.volumeManager('my-plugin');
    const usage = { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' };
    await expect(vm.stageVolume({ id: 'v', pluginId: 'my-plugin' }, usage)).rejects.toBeInstanceOf(PluginOptionsError);

    h.registry.register(plugin(1, 'csi-controller', { options: { pluginType: 'edge' } }));
    await h.settle();
    expect(h.manager.pluginInfo('csi-controller', 'my-plugin')?.deployment).toBe('controller');
  });

  it('a registration whose client cannot be created gets no instance (logged); the one serving before it stops', async () => {
    await h.manager.start();
    h.registry.register(plugin(0));
    await h.settle();
    const create = h.factory.createClient.bind(h.factory);
    h.factory.createClient = (endpoint: string) => {
      if (endpoint.includes('alloc-0')) throw new Error('bad socket path');
      return create(endpoint);
    };
    h.registry.register(plugin(0, 'csi-node', { socketPath: '/var/data/plugins/alloc-0/new.sock' }));
    await h.settle();
    expect(h.logger.find('could not create a CSI client for a registration; no instance for it', 'error')[0]!.fields).toMatchObject({
      allocId: 'alloc-0',
      socketPath: '/var/data/plugins/alloc-0/new.sock',
      error: 'bad socket path',
    });
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')).toBeUndefined();
    expect(h.health.map((e) => e.healthy)).toEqual([true, false]);
  });

  it('a listener that throws is logged, and the other listeners still hear the event', async () => {
    h.manager.onDidChangeHealth(() => {
      throw new Error('listener bug');
    });
    const heard: boolean[] = [];
    h.manager.onDidChangeHealth((e) => heard.push(e.healthy));
    await h.manager.start();
    h.registry.register(plugin(0));
    await h.settle();
    expect(heard).toEqual([true]);
    expect(h.health).toHaveLength(1);
    expect(h.logger.find('a CSI manager event listener threw; the other listeners still ran', 'error')[0]!.fields).toMatchObject({
      error: 'listener bug',
    });
  });

  it('ready events: `started` for a new instance (naming the one stopped before it), `recovered` after unhealthy rounds', async () => {
    const ready: PluginReady[] = [];
    h.manager.onDidBecomeReady((e) => ready.push(e));
    await h.manager.start();
    const reg = plugin(0);
    h.registry.register(reg);
    await h.settle();
    expect(ready).toEqual([{ info: h.manager.pluginInfo('csi-node', 'my-plugin'), cause: 'started', time: h.clock.now() }]);

    h.behaviour(reg).ready = false;
    await h.advance(FINGERPRINT_PERIOD);
    await h.advance(FINGERPRINT_PERIOD);
    expect(ready).toHaveLength(1);
    h.behaviour(reg).ready = true;
    await h.advance(FINGERPRINT_PERIOD);
    expect(ready.map((e) => e.cause)).toEqual(['started', 'recovered']);
    expect(ready[1]!.replaced).toBeUndefined();

    // Gone, then a new alloc: its ready event names the one stopped before it.
    h.registry.deregister('csi-node', 'my-plugin', 'alloc-0');
    await h.settle();
    h.registry.register(plugin(1));
    await h.settle();
    expect(ready.at(-1)).toMatchObject({
      cause: 'started',
      info: { allocId: 'alloc-1' },
      replaced: { allocId: 'alloc-0', socketPath: '/var/data/plugins/alloc-0/csi.sock' },
    });
  });

  it('a restored plugin that cannot be confirmed alive is logged, and serves all the same', async () => {
    h.registry.confirmAlive = () => {
      throw new Error('state DB read-only');
    };
    await h.manager.start();
    h.registry.register(plugin(0));
    await h.settle();
    expect(h.logger.find('could not confirm a restored plugin alive in the registry', 'warn')[0]!.fields).toMatchObject({
      type: 'csi-node',
      name: 'my-plugin',
      error: 'state DB read-only',
    });
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')?.healthy).toBe(true);
  });

  it('lists plugins by type, then name; a type filter keeps only that type', async () => {
    await h.manager.start();
    for (const [i, type, name] of [
      [0, 'csi-node', 'zfs'],
      [1, 'csi-controller', 'nfs'],
      [2, 'csi-node', 'ceph'],
      [3, 'csi-node', 'nfs'],
    ] as const)
      h.registry.register(plugin(i, type, { name }));
    await h.settle();
    expect(h.manager.plugins().map((p) => `${p.type}/${p.name}`)).toEqual([
      'csi-controller/nfs',
      'csi-node/ceph',
      'csi-node/nfs',
      'csi-node/zfs',
    ]);
    expect(h.manager.plugins('csi-node').map((p) => p.name)).toEqual(['ceph', 'nfs', 'zfs']);
  });
});
