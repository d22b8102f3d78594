// The volume reconciler's mount at its edges: what a caller waiting for a
// plugin is told (onPluginWait, onRetry and their delays), a mount whose
// record is unmounted or forgotten under it, a reconciler disposed while a
// claim is out, what the catalog's answer leaves in the record (a volume
// without its own external id, no publish context, an expansion owed), a
// mount asked again while its unmount is pending, and a restore dropping its
// stale-mount policy when the store refuses the write. Same test node as
// volume-reconciler.spec.ts: the real reconciler over fakes.
import { AbortError } from '@csiplug/core';
import { CSIError, GrpcStatus } from '@csiplug/csi';
import { PLUGIN, PRERUN, RESTORE, TestNode, req, stagingOf, targetOf, track } from '../../test/support/reconciler-node';
import { ClaimError } from '../catalog/volume-claimer';
import { ReconcilerStoppedError, VolumeMountError } from './errors';
import type { MountRetry, PluginWaitNotice } from './reconciler-service';
import { PLUGIN_WAIT_NOTICE_MS } from './volume-reconciler';

let node: TestNode;
afterEach(() => node?.dispose());

describe('what a caller waiting for the plugin is told', () => {
  test('a wait that lasts is told after PLUGIN_WAIT_NOTICE_MS with what is left of the limit, then that the plugin is back', async () => {
    node = new TestNode({ pluginUp: false });
    const notices: PluginWaitNotice[] = [];
    const mounting = track(node.reconciler.mount(req('a1'), { ...PRERUN, onPluginWait: (n) => notices.push(n) }));
    await node.settle();
    await node.clock.advance(PLUGIN_WAIT_NOTICE_MS - 1);
    expect(notices).toEqual([]);
    await node.clock.advance(1);
    const notice = { name: 'data', volumeId: 'vol1', pluginId: PLUGIN, phase: 'prerun' };
    expect(notices).toEqual([{ ...notice, state: 'waiting', limitMs: 60_000 - PLUGIN_WAIT_NOTICE_MS }]);
    await node.clock.advance(5_000);
    node.csi.bringUp(PLUGIN);
    await mounting.promise;
    expect(notices).toEqual([
      { ...notice, state: 'waiting', limitMs: 60_000 - PLUGIN_WAIT_NOTICE_MS },
      { ...notice, state: 'back', limitMs: 0 },
    ]);
  });

  test('a plugin back within PLUGIN_WAIT_NOTICE_MS, or healthy from the start, is not told at all', async () => {
    node = new TestNode({ pluginUp: false });
    const notices: PluginWaitNotice[] = [];
    const mounting = track(node.reconciler.mount(req('a1'), { ...PRERUN, onPluginWait: (n) => notices.push(n) }));
    await node.settle();
    await node.clock.advance(PLUGIN_WAIT_NOTICE_MS - 1);
    node.csi.bringUp(PLUGIN);
    await mounting.promise;
    await node.clock.advance(PLUGIN_WAIT_NOTICE_MS);
    expect(notices).toEqual([]);

    // Healthy, but slow to answer the claim: still no notice.
    const claim = node.claimer.hangNext('claim');
    const second = track(node.reconciler.mount(req('a2'), { ...PRERUN, onPluginWait: (n) => notices.push(n) }));
    await claim.reached;
    await node.clock.advance(10 * PLUGIN_WAIT_NOTICE_MS);
    claim.release();
    await second.promise;
    expect(notices).toEqual([]);
  });

  test('a plugin crash mid-mount is told with what is left of the limit; an UNAVAILABLE step of a healthy plugin with the backoff', async () => {
    node = new TestNode();
    const retries: MountRetry[] = [];
    const publish = node.vm.hangNext('publish');
    const mounting = track(node.reconciler.mount(req('a1'), { ...PRERUN, onRetry: (r) => retries.push(r) }));
    await publish.reached;
    await node.clock.advance(10_000);
    node.csi.crash(PLUGIN);
    publish.release();
    await node.settle();
    expect(retries).toEqual([
      {
        name: 'data',
        volumeId: 'vol1',
        pluginId: PLUGIN,
        reason: 'plugin',
        attempt: 1,
        error: expect.stringContaining('hostpath'),
        delayMs: 50_000,
      },
    ]);
    node.csi.bringUp(PLUGIN);
    await mounting.promise;

    const unavailable = () =>
      new CSIError({ grpcCode: GrpcStatus.UNAVAILABLE, method: 'NodePublishVolume', endpoint: 'fake', details: 'connection refused' });
    node.vm.failNext('publish', { times: 2, error: unavailable() });
    const second = track(node.reconciler.mount(req('a2'), { ...PRERUN, onRetry: (r) => retries.push(r) }));
    await node.settle();
    expect(retries.slice(1)).toEqual([expect.objectContaining({ reason: 'plugin', attempt: 1, delayMs: node.timeouts.unmountBackoff(1) })]);
    await node.clock.advance(node.timeouts.unmountBackoff(1));
    await node.settle();
    expect(retries.slice(1).map((r) => [r.attempt, r.delayMs])).toEqual([
      [1, node.timeouts.unmountBackoff(1)],
      [2, node.timeouts.unmountBackoff(2)],
    ]);
    await node.clock.advance(node.timeouts.unmountBackoff(2));
    expect(await second.promise).toMatchObject({ targetPath: targetOf('a2') });
  });

  test('a claim refused for now is logged and told with its attempt and delay', async () => {
    node = new TestNode();
    node.claimer.refuseNext = 1;
    const retries: MountRetry[] = [];
    const mounting = track(node.reconciler.mount(req('a1'), { ...PRERUN, onRetry: (r) => retries.push(r) }));
    await node.settle();
    expect(retries).toEqual([
      {
        name: 'data',
        volumeId: 'vol1',
        pluginId: PLUGIN,
        reason: 'claim',
        attempt: 1,
        error: 'volume vol1 has no free write claim',
        delayMs: 1_000,
      },
    ]);
    expect(node.logger.find('volume claim refused for now; retrying', 'info')[0]!.fields).toMatchObject({
      alloc_id: 'a1',
      volume_id: 'vol1',
      attempt: 1,
      delay_ms: 1_000,
    });
    await node.clock.advance(1_000);
    expect(await mounting.promise).toMatchObject({ targetPath: targetOf('a1') });
  });

  test.each(['aborted', 'disposed'] as const)(
    'a claim refused for now as the mount is %s is not told, and the mount fails',
    async (how) => {
      node = new TestNode();
      const ac = new AbortController();
      const retries: MountRetry[] = [];
      node.claimer.claim = async () => {
        if (how === 'aborted') ac.abort(new AbortError('the alloc was stopped'));
        else node.reconciler.dispose();
        throw new ClaimError('volume vol1 has no free write claim', true);
      };
      const mounting = track(node.reconciler.mount(req('a1'), { ...PRERUN, signal: ac.signal, onRetry: (r) => retries.push(r) }));
      await node.settle();
      if (how === 'disposed') await node.clock.advance(1_000);
      expect(mounting.error).toBeInstanceOf(VolumeMountError);
      expect(retries).toEqual([]);
      expect(node.calls()).toEqual([]);
    },
  );
});

describe('a mount whose record changes under it', () => {
  test("unmounted while its publish is out: the mount fails naming that, and the unmount's one attempt undoes it", async () => {
    node = new TestNode();
    const publish = node.vm.hangNext('publish');
    const mounting = track(node.reconciler.mount(req('a1'), PRERUN));
    await publish.reached;
    const unmounting = track(node.reconciler.unmount('a1'));
    await node.settle();
    expect(node.record('a1')).toMatchObject({ desired: 'unmounted', published: true });
    publish.release();
    await node.settle();
    expect(mounting.error).toBeInstanceOf(VolumeMountError);
    const cause = (mounting.error as VolumeMountError).cause;
    expect(cause).toBeInstanceOf(AbortError);
    expect((cause as Error).message).toBe('volume "data" of alloc a1 was unmounted while it was being mounted');
    expect(unmounting.value).toEqual([{ name: 'data', volumeId: 'vol1', pluginId: PLUGIN }]);
    expect(node.calls()).toEqual(['stage vol1', 'publish vol1 a1', 'unpublish vol1 a1', 'unstage vol1']);
    expect(node.claimer.releases).toEqual(['vol1 a1']);
    expect(node.store.list().records).toEqual([]);
    expect(node.mounted()).toEqual([]);
  });

  test('unmounted and forgotten while it waits for its plugin: the mount fails naming that, nothing is claimed', async () => {
    node = new TestNode({ pluginUp: false });
    const mounting = track(node.reconciler.mount(req('a1'), PRERUN));
    await node.settle();
    expect(node.record('a1')).toMatchObject({ desired: 'mounted', claimed: false });
    const unmounting = track(node.reconciler.unmount('a1'));
    await node.settle();
    expect(unmounting.settled).toBe(true);
    expect(node.record('a1')).toBeUndefined();
    node.csi.bringUp(PLUGIN);
    await node.settle();
    expect(mounting.error).toBeInstanceOf(VolumeMountError);
    expect(((mounting.error as VolumeMountError).cause as Error).message).toBe(
      'the volume was unmounted and forgotten while it was being mounted',
    );
    expect(node.claimer.claims).toEqual([]);
    expect(node.calls()).toEqual([]);
    expect(node.store.list().records).toEqual([]);
  });

  test('disposed while its claim is out: no node step is asked, and the mount fails with ReconcilerStoppedError', async () => {
    node = new TestNode();
    const claim = node.claimer.hangNext('claim');
    const mounting = track(node.reconciler.mount(req('a1'), PRERUN));
    await claim.reached;
    node.reconciler.dispose();
    claim.release();
    await node.settle();
    expect(mounting.error).toBeInstanceOf(VolumeMountError);
    expect((mounting.error as VolumeMountError).cause).toBeInstanceOf(ReconcilerStoppedError);
    expect(node.calls()).toEqual([]);
    expect(node.mounted()).toEqual([]);
  });

  test('unmounted while its stage is out: the publish is never asked, and the unmount unstages', async () => {
    node = new TestNode();
    const stage = node.vm.hangNext('stage');
    const mounting = track(node.reconciler.mount(req('a1'), PRERUN));
    await stage.reached;
    const unmounting = track(node.reconciler.unmount('a1'));
    await node.settle();
    stage.release();
    await node.settle();
    expect(((mounting.error as VolumeMountError).cause as Error).message).toBe(
      'volume "data" of alloc a1 was unmounted while it was being mounted',
    );
    expect(unmounting.value).toEqual([{ name: 'data', volumeId: 'vol1', pluginId: PLUGIN }]);
    expect(node.calls()).toEqual(['stage vol1', 'unstage vol1']);
    expect(node.mounted()).toEqual([]);
    expect(node.store.list().records).toEqual([]);
  });

  test('disposed while it waits for its plugin: the plugin back, nothing is claimed and the mount fails with ReconcilerStoppedError', async () => {
    node = new TestNode({ pluginUp: false });
    const mounting = track(node.reconciler.mount(req('a1'), PRERUN));
    await node.settle();
    node.reconciler.dispose();
    node.csi.bringUp(PLUGIN);
    await node.settle();
    expect((mounting.error as VolumeMountError).cause).toBeInstanceOf(ReconcilerStoppedError);
    expect(node.claimer.claims).toEqual([]);
    expect(node.calls()).toEqual([]);
  });

  test('forgotten and mounted again: its last finding is gone with it (ok, no message)', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    node.csi.crash(PLUGIN);
    node.csi.bringUp(PLUGIN);
    await node.settle();
    expect(node.reconciler.mountChecks('a1')[0]).toMatchObject({ state: 'ok', message: expect.any(String) });
    await node.reconciler.unmount('a1');
    expect(node.record('a1')).toBeUndefined();
    await node.reconciler.mount(req('a1'), PRERUN);
    expect(node.reconciler.mountChecks('a1')).toEqual([{ allocId: 'a1', name: 'data', volumeId: 'vol1', pluginId: PLUGIN, state: 'ok' }]);
  });

  test("asked again while its unmount is pending: wanted mounted again, the unmount's attempts and error cleared, since now, the new policy kept", async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    node.vm.failNext('unpublish');
    await node.reconciler.unmount('a1');
    expect(node.record('a1')).toMatchObject({ desired: 'unmounted', attempts: 1, lastError: expect.any(String) });
    await node.clock.advance(300);
    const info = await node.reconciler.mount(req('a1', { onStaleMount: 'keep' }), PRERUN);
    expect(info.targetPath).toBe(targetOf('a1'));
    const record = node.record('a1')!;
    expect(record).toMatchObject({ desired: 'mounted', attempts: 0, since: node.clock.now(), onStaleMount: 'keep' });
    expect(record).not.toHaveProperty('lastError');
    // The retry timer finds nothing to unmount.
    await node.clock.advance(60_000);
    await node.settle();
    expect(node.reconciler.pendingUnmounts()).toEqual([]);
    expect(node.mounted()).toEqual([targetOf('a1'), stagingOf()].sort());
  });
});

describe('a failed mount undone', () => {
  test("its undo failing too is logged with the alloc, volume and the undo's error; the mount fails with its own cause", async () => {
    node = new TestNode();
    node.vm.failNext('publish', { error: new Error('publish broke') });
    node.vm.failNext('unstage', { error: new Error('unstage broke') });
    const err = await node.reconciler.mount(req('a1'), PRERUN).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VolumeMountError);
    expect((err as VolumeMountError).message).toBe('volume "data" (vol1) on plugin hostpath: publish broke');
    expect(node.logger.find('could not undo a failed mount; retrying in the background', 'error').map((l) => l.fields)).toEqual([
      expect.objectContaining({ alloc_id: 'a1', volume_id: 'vol1', error: expect.stringContaining('unstage broke') }),
    ]);
    expect(node.reconciler.pendingUnmounts()).toEqual([
      expect.objectContaining({ allocId: 'a1', desired: 'unmounted', staged: true, published: false }),
    ]);
  });

  test("the write that would start the undo refused: logged with the alloc, volume and the write's error; the record keeps what was done", async () => {
    node = new TestNode();
    const stage = node.vm.hangNext('stage', { after: true });
    const mounting = node.reconciler.mount(req('a1'), PRERUN);
    await stage.reached;
    node.store.failWrites = 2;
    stage.release();
    await expect(mounting).rejects.toBeInstanceOf(VolumeMountError);
    expect(
      node.logger
        .find('could not record that a failed mount is to be undone; it is undone when its alloc unmounts', 'error')
        .map((l) => l.fields),
    ).toEqual([expect.objectContaining({ alloc_id: 'a1', volume_id: 'vol1', error: 'fake mount store: write refused (put a1/data)' })]);
    expect(node.record('a1')).toMatchObject({ desired: 'mounted', claimed: true, staged: true });
    // Nothing is undone that the store does not know is being undone: the
    // staging mount stays, and no unstage was asked.
    expect(node.calls()).toEqual(['stage vol1']);
    expect(node.mounted()).toEqual([expect.stringContaining('vol1')]);
  });

  test('an undo that succeeds logs nothing, and the record is gone before the mount rejects', async () => {
    node = new TestNode();
    node.vm.failNext('publish', { error: new Error('publish broke') });
    await expect(node.reconciler.mount(req('a1'), PRERUN)).rejects.toThrow('publish broke');
    expect(node.logger.find('could not undo a failed mount')).toEqual([]);
    expect(node.store.list().records).toEqual([]);
    expect(node.claimer.releases).toEqual(['vol1 a1']);
  });
});

describe("what the catalog's answer leaves in the record", () => {
  test('a volume without an external id of its own is asked of the plugin by its id', async () => {
    node = new TestNode();
    node.claimer.volumes.set('vol3', { id: 'vol3', externalId: '', pluginId: PLUGIN });
    await node.reconciler.mount(req('a1', { volumeId: 'vol3' }), PRERUN);
    expect(node.record('a1')).toMatchObject({ volumeId: 'vol3', externalId: 'vol3', published: true });
    expect(node.vm.requests.map((r) => `${r.step} ${r.volume.externalId}`)).toEqual(['stage vol3', 'publish vol3']);
  });

  test('no publish context from the claim: the steps get an empty one and the record keeps none', async () => {
    node = new TestNode();
    node.claimer.publishContext = undefined;
    await node.reconciler.mount(req('a1'), PRERUN);
    expect(node.record('a1')).not.toHaveProperty('publishContext');
    expect(node.vm.requests.map((r) => r.publishContext)).toEqual([{}, {}]);
  });

  test('a volume the catalog says is owed a node expansion is expanded after the publish; none owed, none made', async () => {
    node = new TestNode();
    node.vm.nodeExpand = true;
    await node.reconciler.mount(req('a1'), PRERUN);
    expect(node.vm.expansions).toEqual([]);
    expect(node.record('a1')).not.toHaveProperty('expandTo');
    node.claimer.volumes.set('vol2', { id: 'vol2', externalId: 'ext-vol2', pluginId: PLUGIN, nodeExpandTo: 7_000 });
    await node.reconciler.mount(req('a2', { volumeId: 'vol2' }), PRERUN);
    expect(node.vm.expansions).toEqual(['vol2 a2 7000']);
    expect(node.record('a2')).not.toHaveProperty('expandTo');
  });

  test('an owed expansion that fails never fails the mount: still owed, and warned of', async () => {
    node = new TestNode();
    node.claimer.volumes.set('vol2', { id: 'vol2', externalId: 'ext-vol2', pluginId: PLUGIN, nodeExpandTo: 7_000 });
    node.vm.expandVolume = () => Promise.reject(new Error('resize2fs failed'));
    const info = await node.reconciler.mount(req('a2', { volumeId: 'vol2' }), PRERUN);
    expect(info).toMatchObject({ volumeId: 'vol2', targetPath: targetOf('a2', undefined, 'vol2') });
    expect(node.record('a2')).toMatchObject({ published: true, expandTo: 7_000 });
    expect(node.logger.find('node-side expansion failed; it is made after the next publish', 'warn')).toHaveLength(1);
  });

  test("the larger of the record's owed expansion and the catalog's is made", async () => {
    node = new TestNode();
    node.vm.nodeExpand = true;
    await node.reconciler.mount(req('a1'), PRERUN);
    await node.reconciler.expandMounted('vol1', 9_000, { online: false });
    expect(node.record('a1')!.expandTo).toBe(9_000);
    node.claimer.volumes.set('vol1', { id: 'vol1', externalId: 'ext-vol1', pluginId: PLUGIN, nodeExpandTo: 7_000 });
    node.mounts.points.delete(targetOf('a1'));
    const agent = node.restart();
    await agent.mount(req('a1'), RESTORE);
    expect(node.vm.expansions).toEqual(['vol1 a1 9000']);
  });
});

describe('a restore and its stale-mount policy', () => {
  test('a restore dropping its policy while the store refuses the write: the record in memory holds no policy at all', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1', { onStaleMount: 'keep' }), PRERUN);
    const agent = node.restart();
    node.store.failWrites = 1;
    expect(await agent.mount(req('a1'), RESTORE)).toMatchObject({ restored: true });
    expect(node.record('a1')!.onStaleMount).toBe('keep');
    expect(agent.list('a1')[0]).not.toHaveProperty('onStaleMount');
    expect(node.logger.find('could not record a changed stale-mount policy', 'warn')[0]!.fields).toMatchObject({
      alloc_id: 'a1',
      volume_id: 'vol1',
      error: 'fake mount store: write refused (put a1/data)',
    });
  });

  test('a restore asking the same policy writes nothing', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1', { onStaleMount: 'restart' }), PRERUN);
    const agent = node.restart();
    const writes = node.store.writes.length;
    expect(await agent.mount(req('a1', { onStaleMount: 'restart' }), RESTORE)).toMatchObject({ restored: true });
    expect(node.store.writes).toHaveLength(writes);
  });
});
