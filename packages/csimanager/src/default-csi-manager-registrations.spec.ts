// Which registry changes make DefaultCSIManager start a new plugin
// instance and which it keeps the serving one through: the same alloc
// re-registering with the same or with new info (version, options), the
// incoming instance in fingerprintAll, the resync timer on and off, and
// dispose (every instance stopped, no timer left). Over the real plugin registry
// with fake CSI clients and a fake clock (test/harness.ts).
import { FINGERPRINT_PERIOD, Harness, plugin } from '../test/harness';

describe('CSI manager: what a registration change does to the serving instance', () => {
  let h: Harness;
  const serving = () => h.manager.instanceOf('csi-node', 'my-plugin');
  const clients = () => h.factory.clients.length;

  beforeEach(async () => {
    h = new Harness();
    await h.manager.start();
    h.registry.register(plugin(0, 'csi-node', { options: { pluginType: 'node' } }));
    await h.settle();
  });
  afterEach(async () => {
    await h.dispose();
  });

  it('the same alloc re-registering with the same info keeps its instance and its client', async () => {
    const before = serving();
    const made = clients();
    h.registry.register(plugin(0, 'csi-node', { options: { pluginType: 'node' } }));
    await h.settle();
    expect(serving()).toBe(before);
    expect(clients()).toBe(made);
    expect(before!.isStopped).toBe(false);
    expect(h.health.map((e) => e.healthy)).toEqual([true]);
  });

  it.each([
    ['a new version', { version: 'v9' }],
    ['new options', { options: { pluginType: 'monolith' } }],
    ['no options', { options: {} }],
  ])('the same alloc re-registering with %s gets a new instance at once (its task restarted)', async (_what, over) => {
    const before = serving()!;
    h.registry.register(plugin(0, 'csi-node', over));
    await h.settle();
    expect(serving()).not.toBe(before);
    expect(before.isStopped).toBe(true);
    expect(h.manager.incomingOf('csi-node', 'my-plugin')).toBeUndefined();
    expect(h.manager.pluginInfo('csi-node', 'my-plugin')).toMatchObject({ allocId: 'alloc-0', healthy: true });
    expect(h.logger.find('plugin instance stopped', 'info').at(-1)!.fields).toMatchObject({ reason: 'replaced by alloc alloc-0' });
  });

  it('fingerprintAll runs a round on the incoming instance too', async () => {
    const next = plugin(1);
    h.behaviour(next).ready = false;
    h.registry.register(next);
    await h.settle();
    const probes = (r: { socketPath: string }) => h.behaviour(r).callsOf('Probe').length;
    const [servingBefore, incomingBefore] = [probes(plugin(0)), probes(next)];
    await h.manager.fingerprintAll();
    expect([probes(plugin(0)), probes(next)]).toEqual([servingBefore + 1, incomingBefore + 1]);
  });

  it('dispose stops every instance and says how many', async () => {
    h.registry.register(plugin(1, 'csi-controller'));
    await h.settle();
    const instances = [serving()!, h.manager.instanceOf('csi-controller', 'my-plugin')!];
    await h.manager.dispose();
    expect(instances.map((i) => i.isStopped)).toEqual([true, true]);
    expect(h.manager.plugins()).toEqual([]);
    expect(h.logger.find('CSI manager shut down', 'info')[0]!.fields).toMatchObject({ stopped: 2 });
  });
});

describe('CSI manager: the resync timer', () => {
  let h: Harness;
  afterEach(async () => {
    await h.dispose();
  });

  it('without resync, no timer of its own is armed: only the instances fingerprint on their period', async () => {
    h = new Harness({ resync: false });
    await h.manager.start();
    expect(h.clock.pendingTimers).toBe(0);
    expect(h.logger.find('CSI manager started', 'info')[0]!.fields).toMatchObject({ resync: false, plugins: 0 });
    h.registry.register(plugin(0));
    await h.settle();
    expect(h.clock.pendingTimers).toBe(1);
  });

  it('with resync, its timer is armed from start and comes back every period', async () => {
    h = new Harness();
    await h.manager.start();
    expect(h.clock.pendingTimers).toBe(1);
    expect(h.logger.find('CSI manager started', 'info')[0]!.fields).toMatchObject({ resync: true });
    await h.advance(FINGERPRINT_PERIOD);
    expect(h.clock.pendingTimers).toBe(1);
    await h.manager.dispose();
    expect(h.clock.pendingTimers).toBe(0);
  });
});
