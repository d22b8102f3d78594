// The volume reconciler's life around its mounts: start() reading the records
// back (once, and not after dispose), the plugin events it listens to (a node
// plugin ready, one that stops serving, and the same events of a controller
// plugin, which it ignores), retries of pending unmounts asked by the agent,
// dispose() ending its timers and listeners, and what its reads (list,
// pendingUnmounts, mounted, mountChecks) show. Same test node as
// volume-reconciler.spec.ts: the real reconciler over fakes.
import { PluginTypeCSIController } from '@csiplug/registry';
import { PLUGIN, PRERUN, RESTORE, TestNode, req, stagingOf, targetOf, track } from '../../test/support/reconciler-node';
import { VolumeReconciler } from './volume-reconciler';
import { MOUNT_CHECK_STATES } from './reconciler-service';

let node: TestNode;
afterEach(() => node?.dispose());

/** Mounts a1, then makes its unmount's first attempt fail at the unpublish: it stays pending, retried after the backoff. */
async function pendingUnmount(n: TestNode): Promise<void> {
  await n.reconciler.mount(req('a1'), PRERUN);
  n.vm.failNext('unpublish');
  const [outcome] = await n.reconciler.unmount('a1');
  expect(outcome!.error).toBeDefined();
  expect(n.reconciler.pendingUnmounts()).toHaveLength(1);
}

const unpublishes = (n: TestNode) => n.calls().filter((c) => c === 'unpublish vol1 a1').length;

describe('start', () => {
  test('a second start() is a no-op: a plugin going away under a live mount is told once', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    node.reconciler.start();
    node.csi.crash(PLUGIN);
    await node.settle();
    expect(node.aways.map((e) => `${e.kind} ${e.allocId}`)).toEqual(['plugin-away a1']);
  });

  test('start() after dispose() reads nothing back', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    const late = new VolumeReconciler(node.csi, node.claimer, node.store, node.mounts, node.clock, node.timeouts, node.logger);
    late.dispose();
    late.start();
    expect(late.list()).toEqual([]);
    expect(late.mounted('a1')).toEqual([]);
  });

  test('a record that cannot be read is reported with its key and error, and left in the store; the others are read', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    node.store.putCorrupt('a9/data', 'unexpected end of JSON input');
    const agent = node.restart();
    const said = node.logger.find('a volume mount record could not be read; it is left in the state untouched', 'error');
    expect(said).toHaveLength(1);
    expect(said[0]!.fields).toMatchObject({ component: 'volume-reconciler', key: 'a9/data', error: 'unexpected end of JSON input' });
    expect(agent.list().map((r) => r.allocId)).toEqual(['a1']);
    expect(node.store.list().failures).toEqual([{ key: 'a9/data', error: 'unexpected end of JSON input' }]);
  });

  test('resuming the unmounts left by the last agent says how many, and retries them at once', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a2'), PRERUN);
    await pendingUnmount(node);
    node.restart();
    expect(node.logger.find('resuming unmounts left by the last agent', 'info').map((l) => l.fields.count)).toEqual([1]);
    await node.settle();
    expect(node.reconciler.pendingUnmounts()).toEqual([]);
    expect(node.reconciler.list().map((r) => r.allocId)).toEqual(['a2']);
    // a2 still mounts the volume: only a1's target is taken down.
    expect(node.mounted()).toEqual([targetOf('a2'), stagingOf()].sort());
  });

  test('no pending unmount: nothing is said of resuming', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    node.restart();
    expect(node.logger.find('resuming unmounts left by the last agent')).toEqual([]);
  });
});

describe('plugin events', () => {
  test('a node plugin ready again retries its pending unmounts at once; a controller plugin of the same name does not', async () => {
    node = new TestNode();
    await pendingUnmount(node);
    node.csi.bringUp(PLUGIN, PluginTypeCSIController);
    await node.settle();
    expect(unpublishes(node)).toBe(1);
    expect(node.reconciler.pendingUnmounts()).toHaveLength(1);

    node.csi.crash(PLUGIN);
    node.csi.bringUp(PLUGIN);
    await node.settle();
    expect(unpublishes(node)).toBe(2);
    expect(node.reconciler.pendingUnmounts()).toEqual([]);
    expect(node.claimer.releases).toEqual(['vol1 a1']);
  });

  test('what a plugin away says carries its last error when the description does not', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    const info = node.csi.pluginInfo('csi-node', PLUGIN)!;
    node.csi.set({ ...info, healthy: false, description: 'probe failed', lastError: 'connection refused' });
    await node.settle();
    expect(node.aways).toHaveLength(1);
    expect(node.aways[0]).toMatchObject({
      kind: 'plugin-away',
      allocId: 'a1',
      name: 'data',
      volumeId: 'vol1',
      pluginId: PLUGIN,
      targetPath: targetOf('a1'),
      policy: 'remount',
      time: node.clock.now(),
    });
    expect(node.aways[0]!.message).toBe(
      `plugin ${PLUGIN} is away (probe failed: connection refused); volume "data" (vol1) stays mounted at ${targetOf('a1')} for the alloc's tasks, and is checked when the plugin is back`,
    );
    expect(node.logger.find('a node plugin with live mounts stopped serving', 'warn')[0]!.fields).toMatchObject({
      plugin_id: PLUGIN,
      mounts: 1,
      why: 'probe failed: connection refused',
    });
  });

  test('a plugin removed says only why (no last error)', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    node.csi.bringDown(PLUGIN);
    await node.settle();
    expect(node.aways.map((e) => e.message)).toEqual([
      `plugin ${PLUGIN} is away (stopped: plugin removed); volume "data" (vol1) stays mounted at ${targetOf('a1')} for the alloc's tasks, and is checked when the plugin is back`,
    ]);
  });

  test('only a node plugin that was serving and stops is told: not a controller of the same name, not an instance that was never healthy', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    node.csi.bringUp(PLUGIN, PluginTypeCSIController);
    node.csi.bringDown(PLUGIN);
    await node.settle();
    expect(node.aways).toHaveLength(1);
    // A controller of the same name going away, while the node plugin is away too.
    node.csi.bringDown(PLUGIN, PluginTypeCSIController);
    // A new node instance that registers unhealthy (it never served).
    const info = node.csi.bringUp(PLUGIN, 'csi-node', { healthy: false, allocId: 'plugin-2', description: 'not ready' });
    expect(info.healthy).toBe(false);
    await node.settle();
    expect(node.aways).toHaveLength(1);
  });

  test('an upgrade: the old instance going away while the new one serves tells nothing', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    node.csi.bringUp(PLUGIN, 'csi-node', { allocId: 'plugin-new', socketPath: '/fake/plugins/plugin-new/csi.sock' });
    await node.settle();
    expect(node.csi.healthChanges.some((c) => c.healthy === false)).toBe(true);
    expect(node.aways).toEqual([]);
    expect(node.reconciler.mountChecks('a1')[0]!.state).toBe('ok');
  });

  test("a plugin away is told only of live mounts through it: not a pending unmount, not one being unmounted, not another plugin's", async () => {
    node = new TestNode();
    node.claimer.add('vol9', 'other-plugin');
    node.csi.bringUp('other-plugin');
    await pendingUnmount(node);
    await node.reconciler.mount(req('a2'), PRERUN);
    await node.reconciler.mount(req('a3'), PRERUN);
    await node.reconciler.mount(req('a4', { volumeId: 'vol9' }), PRERUN);
    const unpublish = node.vm.hangNext('unpublish');
    const unmounting = track(node.reconciler.unmount('a3'));
    await unpublish.reached;
    node.csi.crash(PLUGIN);
    await node.settle();
    expect(node.aways.map((e) => `${e.allocId} ${e.volumeId}`)).toEqual(['a2 vol1']);
    unpublish.release();
    await node.settle();
    expect(unmounting.settled).toBe(true);
  });

  test('a plugin away with no live mount through it says nothing', async () => {
    node = new TestNode();
    node.csi.crash(PLUGIN);
    await node.settle();
    expect(node.aways).toEqual([]);
    expect(node.logger.find('a node plugin with live mounts stopped serving')).toEqual([]);
  });
});

describe('retries and dispose', () => {
  test("retryUnmountsNow retries the plugin's pending unmounts at once, not another plugin's", async () => {
    node = new TestNode();
    await pendingUnmount(node);
    node.reconciler.retryUnmountsNow('other-plugin');
    await node.settle();
    expect(unpublishes(node)).toBe(1);
    node.reconciler.retryUnmountsNow(PLUGIN);
    await node.settle();
    expect(unpublishes(node)).toBe(2);
    expect(node.reconciler.pendingUnmounts()).toEqual([]);
    expect(node.mounted()).toEqual([]);
  });

  test('a retry asked now replaces the one pending: the old backoff does not fire an extra attempt', async () => {
    node = new TestNode();
    await pendingUnmount(node);
    node.vm.failNext('unpublish');
    node.reconciler.retryUnmountsNow(PLUGIN);
    await node.settle();
    expect(unpublishes(node)).toBe(2);
    // The first backoff (1s) was replaced; the next is the second one's (2s).
    await node.clock.advance(node.timeouts.unmountBackoff(2) - 1);
    await node.settle();
    expect(unpublishes(node)).toBe(2);
    expect(node.reconciler.pendingUnmounts()).toHaveLength(1);
    await node.clock.advance(1);
    await node.settle();
    expect(unpublishes(node)).toBe(3);
    expect(node.reconciler.pendingUnmounts()).toEqual([]);
  });

  test("a volume's retry timer retries only that volume's pending unmounts", async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    await node.reconciler.mount(req('a3', { volumeId: 'vol2' }), PRERUN);
    node.vm.failNext('unpublish');
    await node.reconciler.unmount('a1');
    await node.clock.advance(500);
    node.vm.failNext('unpublish');
    await node.reconciler.unmount('a3');
    const tries = (alloc: string, vol: string) => node.calls().filter((c) => c === `unpublish ${vol} ${alloc}`).length;
    await node.clock.advance(500);
    await node.settle();
    expect([tries('a1', 'vol1'), tries('a3', 'vol2')]).toEqual([2, 1]);
    await node.clock.advance(500);
    await node.settle();
    expect([tries('a1', 'vol1'), tries('a3', 'vol2')]).toEqual([2, 2]);
    expect(node.reconciler.pendingUnmounts()).toEqual([]);
  });

  test('a retry timer left when dispose() is called never runs', async () => {
    node = new TestNode();
    await pendingUnmount(node);
    node.reconciler.dispose();
    await node.clock.advance(60_000);
    await node.settle();
    expect(unpublishes(node)).toBe(1);
    expect(node.record('a1')).toMatchObject({ desired: 'unmounted', published: true });
  });

  test('a retry asked of a disposed reconciler does nothing', async () => {
    node = new TestNode();
    await pendingUnmount(node);
    node.reconciler.dispose();
    node.reconciler.retryUnmountsNow(PLUGIN);
    await node.clock.advance(60_000);
    await node.settle();
    expect(unpublishes(node)).toBe(1);
  });

  test('after dispose() a plugin going away or coming back is not acted on', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    node.reconciler.dispose();
    node.csi.crash(PLUGIN);
    node.csi.bringUp(PLUGIN);
    await node.settle();
    expect(node.aways).toEqual([]);
    expect(node.checks).toEqual([]);
  });
});

describe('reads', () => {
  test("list() is every record, list(alloc) one alloc's, as copies the caller cannot change", async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    await node.reconciler.mount(req('a2', { name: 'logs', volumeId: 'vol2' }), PRERUN);
    expect(node.reconciler.list().map((r) => `${r.allocId} ${r.name}`)).toEqual(['a1 data', 'a2 logs']);
    expect(node.reconciler.list('a2').map((r) => `${r.allocId} ${r.name}`)).toEqual(['a2 logs']);
    expect(node.reconciler.list('a3')).toEqual([]);
    const copy = node.reconciler.list('a1')[0]!;
    copy.desired = 'unmounted';
    copy.usage.readOnly = true;
    expect(node.reconciler.list('a1')[0]).toMatchObject({ desired: 'mounted', usage: { readOnly: false } });
    expect(node.reconciler.pendingUnmounts()).toEqual([]);
  });

  test('mounted() leaves out a record mid-remount, whatever its flags; mountChecks() shows it as remounting, published or not', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    await node.reconciler.mount(req('a2'), PRERUN);
    await node.reconciler.mount(req('a3'), PRERUN);
    node.csi.bringDown(PLUGIN);
    node.store.put({ ...node.record('a2')!, remounting: 'remount' });
    node.store.put({ ...node.record('a3')!, remounting: 'remount', published: false });
    const agent = node.restart();
    for (const alloc of ['a1', 'a2', 'a3'])
      expect(await agent.mount(req(alloc), RESTORE)).toMatchObject({ restored: true, pluginAway: true, targetPath: targetOf(alloc) });
    expect(agent.mounted('a1').map((m) => m.name)).toEqual(['data']);
    expect(agent.mounted('a2')).toEqual([]);
    expect(agent.mounted('a3')).toEqual([]);
    expect(agent.mountChecks().map((c) => `${c.allocId} ${c.state}`)).toEqual(['a1 plugin-away', 'a2 remounting', 'a3 remounting']);
    expect(agent.mountChecks('a2')).toEqual([{ allocId: 'a2', name: 'data', volumeId: 'vol1', pluginId: PLUGIN, state: 'remounting' }]);
  });

  test('mountChecks(): ok with no message before any check; after a check its sentence and time; a pending unmount is not shown', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    await node.reconciler.mount(req('a2'), PRERUN);
    expect(node.reconciler.mountChecks('a1')).toEqual([{ allocId: 'a1', name: 'data', volumeId: 'vol1', pluginId: PLUGIN, state: 'ok' }]);
    node.csi.crash(PLUGIN);
    await node.settle();
    const away = node.reconciler.mountChecks('a1')[0]!;
    expect(away).toEqual({
      allocId: 'a1',
      name: 'data',
      volumeId: 'vol1',
      pluginId: PLUGIN,
      state: 'plugin-away',
      message: node.aways[0]!.message,
      time: node.aways[0]!.time,
    });
    node.csi.bringUp(PLUGIN);
    await node.settle();
    expect(node.reconciler.mountChecks('a1')[0]).toMatchObject({ state: 'ok', message: expect.any(String) });
    await node.reconciler.unmount('a2');
    expect(node.reconciler.mountChecks().map((c) => c.allocId)).toEqual(['a1']);
  });

  test('MOUNT_CHECK_STATES names every state mountChecks() can show, once each', () => {
    expect([...MOUNT_CHECK_STATES].sort()).toEqual(['abnormal', 'busy', 'ok', 'plugin-away', 'remounting', 'stale']);
  });
});

describe('a finished remount', () => {
  /** A restored mount found stale (ENOTCONN) while its plugin was away, remounted once the plugin is back. */
  async function staleRestored(): Promise<void> {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    node.csi.bringDown(PLUGIN);
    const agent = node.restart();
    node.mounts.failMountCheck(targetOf('a1'), 'ENOTCONN');
    node.mounts.failStat(targetOf('a1'), 'ENOTCONN');
    await agent.mount(req('a1'), RESTORE);
    node.mounts.clearMountCheck(targetOf('a1'));
  }

  test('its intent is cleared from the record once it is reported', async () => {
    await staleRestored();
    node.csi.bringUp(PLUGIN);
    await node.settle();
    expect(node.checks.map((e) => e.kind)).toEqual(['plugin-back', 'stale', 'remounted']);
    expect(node.record('a1')).not.toHaveProperty('remounting');
    expect(node.reconciler.mounted('a1').map((m) => m.targetPath)).toEqual([targetOf('a1')]);
  });

  test('a store refusing to clear its intent: logged, and the intent left for a next agent (more remounting than needed, never less)', async () => {
    await staleRestored();
    const put = node.store.put.bind(node.store);
    let refused = 0;
    node.store.put = (record) => {
      if (record.remounting === undefined && node.record('a1')?.remounting !== undefined && refused === 0) {
        refused++;
        throw new Error('fake mount store: write refused (put a1/data)');
      }
      put(record);
    };
    node.csi.bringUp(PLUGIN);
    await node.settle();
    expect(refused).toBe(1);
    expect(node.checks.map((e) => e.kind)).toEqual(['plugin-back', 'stale', 'remounted']);
    const said = node.logger.find('could not clear a finished remount from its record; a next agent does it again', 'error');
    expect(said.map((l) => l.fields)).toEqual([
      expect.objectContaining({ alloc_id: 'a1', volume_id: 'vol1', error: 'fake mount store: write refused (put a1/data)' }),
    ]);
    expect(node.record('a1')!.remounting).toBeDefined();
  });
});
