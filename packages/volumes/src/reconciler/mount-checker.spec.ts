// The live-mount check after a node plugin comes back (mount-checker.ts),
// driven through the real VolumeReconciler on the test node's fakes: the
// plugin crashes and recovers (or is replaced), the host's mount table and
// the stat of a path say whether a mount answers (ENOTCONN, ESTALE, a stat
// that hangs), the plugin's NodeGetVolumeStats says whether it is abnormal,
// and each stale-mount policy (remount, restart, keep) does what it says —
// and says so, in one event per finding.
import { CSIError, GrpcStatus } from '@csiplug/csi';
import { PLUGIN, PRERUN, RESTORE, TestNode, published, req, staged, stagingOf, targetOf, unpublished, unstaged } from '../../test/support/reconciler-node';
import { MOUNT_STAT_LIMIT_MS } from './mount-checker';

let node: TestNode;
afterEach(() => node?.dispose());

/** The events said of live mounts so far, as `<kind> <alloc>`. */
const kinds = () => node.checks.map((e) => `${e.kind} ${e.allocId}`);
const messageOf = (kind: string, allocId: string) => node.checks.find((e) => e.kind === kind && e.allocId === allocId)?.message;

/** The node plugin crashes (its registration stays, it fails its fingerprint) and comes back. */
async function crashAndRecover(between?: () => void): Promise<void> {
  node.csi.crash(PLUGIN);
  between?.();
  node.csi.bringUp(PLUGIN);
  await node.settle();
}

describe('a plugin that comes back has its live mounts checked', () => {
  test('every mount published through it is checked; one that answers is kept, and both findings are said', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    await node.reconciler.mount(req('a2'), PRERUN);
    const calls = node.calls();
    await crashAndRecover();
    expect(kinds()).toEqual(['plugin-back a1', 'plugin-back a2', 'checked a1', 'checked a2']);
    expect(messageOf('plugin-back', 'a1')).toBe(`plugin hostpath is back (healthy again, alloc alloc-hostpath); checking volume "data" (vol1) at ${targetOf('a1')}`);
    expect(messageOf('checked', 'a2')).toBe(`volume "data" (vol1) at ${targetOf('a2')} answers; kept as it is`);
    expect(node.checks[0]).toMatchObject({ allocId: 'a1', name: 'data', volumeId: 'vol1', pluginId: PLUGIN, targetPath: targetOf('a1'), policy: 'remount', time: node.clock.now() });
    expect(node.mounts.statted).toEqual([targetOf('a1'), targetOf('a2')]);
    expect(node.calls()).toEqual(calls);
  });

  test('an upgrade — a new instance under the same name — is a plugin back too, naming the one it replaced', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    node.csi.bringUp(PLUGIN, 'csi-node', { allocId: 'plugin-v2', socketPath: '/fake/plugins/plugin-v2/csi.sock' });
    await node.settle();
    expect(kinds()).toEqual(['plugin-back a1', 'checked a1']);
    expect(messageOf('plugin-back', 'a1')).toMatch(/^plugin hostpath is back \(a new instance, alloc plugin-v2, replacing alloc alloc-hostpath\)/);
  });

  test('mounts not attached to a live alloc in this run (not yet restored after an agent restart) and mounts being unmounted are not checked', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    await node.reconciler.mount(req('a2'), PRERUN);
    const agent = node.restart();
    const unpublish = node.vm.hangNext('unpublish');
    void agent.unmount('a2');
    await unpublish.reached;
    await crashAndRecover();
    expect(kinds()).toEqual([]);
    unpublish.release();
  });

  test('after an agent restart a live mount restored while its plugin serves is checked at once, with no "plugin back"', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    const agent = node.restart();
    node.mounts.failStat(targetOf('a1'), 'ENOTCONN');
    const info = await agent.mount(req('a1'), RESTORE);
    expect(info).toMatchObject({ restored: true, pluginAway: false });
    await node.settle();
    expect(kinds()).toEqual(['stale a1', 'remounted a1']);
    expect(node.calls().slice(2)).toEqual(['unpublish vol1 a1', 'stage vol1', 'publish vol1 a1']);
  });
});

describe('a stale mount', () => {
  test('a target that does not answer a stat (ENOTCONN) is remounted at the same path through the plugin, its record written step by step, with no new claim', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    const changes = node.changes().length;
    const publish = node.vm.hangNext('publish');
    await crashAndRecover(() => node.mounts.failStat(targetOf('a1'), 'ENOTCONN'));
    await publish.reached;
    // Unpublished and recorded so; the publish asked for again, recorded before it went out.
    expect(node.record('a1')).toMatchObject({ desired: 'mounted', claimed: true, staged: true, published: true });
    expect(node.record('a1')!.targetPath).toBeUndefined();
    expect(kinds()).toEqual(['plugin-back a1', 'stale a1']);
    expect(messageOf('stale', 'a1')).toBe(`volume "data" (vol1) at ${targetOf('a1')} is stale: ${targetOf('a1')} does not answer a stat (ENOTCONN); remounting it through plugin hostpath`);
    publish.release();
    await node.settle();

    expect(kinds()).toEqual(['plugin-back a1', 'stale a1', 'remounted a1']);
    expect(messageOf('remounted', 'a1')).toBe(`volume "data" (vol1) staged and published again at ${targetOf('a1')} through plugin hostpath`);
    expect(node.checks.at(-1)!.restartTasks).toBeUndefined();
    expect(node.calls().slice(2)).toEqual(['unpublish vol1 a1', 'stage vol1', 'publish vol1 a1']);
    expect(node.changes().slice(changes)).toEqual([unpublished('a1'), published('a1')]);
    expect(node.record('a1')).toMatchObject({ desired: 'mounted', claimed: true, staged: true, published: true, targetPath: targetOf('a1'), stagingPath: stagingOf() });
    expect(node.claimer.claims).toHaveLength(1);
    expect(node.claimer.releases).toEqual([]);
    expect(node.logger.find('a live volume mount is stale', 'warn')).toHaveLength(1);
  });

  test('a stale staging mount comes down with every user of it: all unpublished, unstaged once, staged once, all published again', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    await node.reconciler.mount(req('a2'), PRERUN);
    const changes = node.changes().length;
    await crashAndRecover(() => {
      node.mounts.failStat(targetOf('a1'), 'ESTALE');
      node.mounts.failStat(stagingOf(), 'ESTALE');
    });
    expect(kinds()).toEqual(['plugin-back a1', 'plugin-back a2', 'stale a1', 'stale a2', 'remounted a1', 'remounted a2']);
    // a2's own target answered; its staging mount did not.
    expect(messageOf('stale', 'a2')).toBe(`volume "data" (vol1) at ${targetOf('a2')} is stale: its staging mount ${stagingOf()} is stale: ${stagingOf()} does not answer a stat (ESTALE); remounting it through plugin hostpath`);
    expect(node.changes().slice(changes)).toEqual([unpublished('a1'), unpublished('a2'), unstaged(), staged(), published('a1'), published('a2')]);
    expect(node.mounted()).toEqual([targetOf('a1'), targetOf('a2'), stagingOf()].sort());
  });

  test('... unless an alloc whose policy is "keep" uses the staging mount: it stays, the others are published again from it', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    await node.reconciler.mount(req('a2', { onStaleMount: 'keep' }), PRERUN);
    const changes = node.changes().length;
    await crashAndRecover(() => {
      node.mounts.failStat(targetOf('a1'), 'EIO');
      node.mounts.failStat(stagingOf(), 'EIO');
    });
    expect(kinds()).toEqual(['plugin-back a1', 'plugin-back a2', 'stale a1', 'checked a2', 'remounted a1']);
    expect(node.changes().slice(changes)).toEqual([unpublished('a1'), published('a1')]);
    expect(node.logger.find('a staging mount is stale, but is kept for an alloc whose policy is "keep"; the others are published again from it', 'warn')).toHaveLength(1);
  });

  test('policy "restart": remounted, and the event asks for the alloc\'s tasks to restart', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1', { onStaleMount: 'restart' }), PRERUN);
    expect(node.record('a1')!.onStaleMount).toBe('restart');
    await crashAndRecover(() => node.mounts.failStat(targetOf('a1'), 'ENOTCONN'));
    expect(kinds()).toEqual(['plugin-back a1', 'stale a1', 'remounted a1']);
    expect(messageOf('stale', 'a1')).toMatch(/; remounting it through plugin hostpath, then restarting the alloc's tasks$/);
    expect(node.checks.at(-1)).toMatchObject({ kind: 'remounted', policy: 'restart', restartTasks: true });
    expect(messageOf('remounted', 'a1')).toMatch(/; restarting the alloc's tasks so they see it$/);
  });

  test('policy "keep": reported and logged, nothing else', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1', { onStaleMount: 'keep' }), PRERUN);
    const calls = node.calls();
    await crashAndRecover(() => node.mounts.failStat(targetOf('a1'), 'ENOTCONN'));
    expect(kinds()).toEqual(['plugin-back a1', 'stale a1']);
    expect(messageOf('stale', 'a1')).toMatch(/is stale: .* \(ENOTCONN\); kept as it is \(on_stale_mount = "keep"\): its tasks see a broken path until the alloc is restarted$/);
    expect(node.calls()).toEqual(calls);
    expect(node.logger.find('a live volume mount is stale', 'warn')[0]!.fields).toMatchObject({ alloc_id: 'a1', policy: 'keep' });
  });

  test('a stat that hangs is stale after MOUNT_STAT_LIMIT_MS; while it still hangs the path is not stat\'ed again', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1', { onStaleMount: 'keep' }), PRERUN);
    const release = node.mounts.hangStat(targetOf('a1'));
    await crashAndRecover();
    expect(kinds()).toEqual(['plugin-back a1']);
    await node.clock.advance(MOUNT_STAT_LIMIT_MS - 1);
    await node.settle();
    expect(kinds()).toEqual(['plugin-back a1']);
    await node.clock.advance(1);
    await node.settle();
    expect(messageOf('stale', 'a1')).toBe(`volume "data" (vol1) at ${targetOf('a1')} is stale: ${targetOf('a1')} did not answer a stat within 5s (the mount hangs); kept as it is (on_stale_mount = "keep"): its tasks see a broken path until the alloc is restarted`);

    // The plugin comes back again: the first stat still hangs, so no second one is made (the staging path is stat'ed, as the target is stale).
    const stats = node.mounts.statted.length;
    await crashAndRecover();
    expect(node.mounts.statted.slice(stats)).toEqual([stagingOf()]);
    expect(node.checks.at(-1)!.message).toMatch(/is stale: a stat of .* from an earlier check has not returned \(the mount hangs\)/);

    // Once it answers, the next look finds the mount well.
    release();
    await node.settle();
    await crashAndRecover();
    expect(node.checks.at(-1)).toMatchObject({ kind: 'checked', allocId: 'a1' });
  });

  test('a target that is no longer a mount point is stale and mounted again', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    await crashAndRecover(() => node.mounts.unmark(targetOf('a1')));
    expect(messageOf('stale', 'a1')).toMatch(/is stale: .* is no longer a mount point; remounting/);
    expect(kinds()).toEqual(['plugin-back a1', 'stale a1', 'remounted a1']);
    expect(node.mounted()).toEqual([targetOf('a1'), stagingOf()].sort());
  });

  test('with GET_VOLUME_STATS, an abnormal volume condition is stale; an error reading it is only logged', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    await node.reconciler.mount(req('a2', { volumeId: 'vol2', usage: { readOnly: true, attachmentMode: 'file-system', accessMode: 'multi-node-reader-only' } }), PRERUN);
    node.vm.volumeStats = true;
    node.vm.conditions.set(targetOf('a1'), { abnormal: true, message: 'the target no longer shows the backing directory', reported: true });
    const a2Target = node.record('a2')!.targetPath!;
    node.vm.conditions.set(a2Target, new CSIError({ grpcCode: GrpcStatus.UNIMPLEMENTED, method: 'NodeGetVolumeStats', endpoint: 'fake', details: '' }));
    await crashAndRecover();
    expect(messageOf('stale', 'a1')).toBe(`volume "data" (vol1) at ${targetOf('a1')} is stale: plugin hostpath reports the volume abnormal at ${targetOf('a1')}: the target no longer shows the backing directory; remounting it through plugin hostpath`);
    expect(messageOf('checked', 'a2')).toBeDefined();
    expect(node.logger.find('could not read the volume condition; the mount itself answers, so it is not taken as stale', 'warn')).toHaveLength(1);
    // The staging mount of the stale target was asked about too; it is well, so it stays.
    expect(node.vm.conditionChecks).toEqual(['vol1 a1 target', 'vol2 a2 target', 'vol1 staging']);
    expect(node.changes().slice(-2)).toEqual([unpublished('a1'), published('a1')]);
  });

  test('a mount its alloc unmounts while it is being remounted is left to that unmount: no remount, no failure reported', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    const unpublish = node.vm.hangNext('unpublish');
    await crashAndRecover(() => node.mounts.failStat(targetOf('a1'), 'ENOTCONN'));
    await unpublish.reached;
    const unmounting = node.reconciler.unmount('a1');
    await node.settle();
    unpublish.release();
    expect(await unmounting).toEqual([{ name: 'data', volumeId: 'vol1', pluginId: PLUGIN }]);
    await node.settle();
    expect(kinds()).toEqual(['plugin-back a1', 'stale a1']);
    expect(node.calls().slice(2)).toEqual(['unpublish vol1 a1', 'unstage vol1']);
    expect(node.mounted()).toEqual([]);
    expect(node.claimer.releases).toEqual(['vol1 a1']);
  });

  test('a remount that fails is reported, and tried again after a backoff until it is done', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    node.vm.failNext('publish', { error: new Error('NodePublishVolume: device busy') });
    await crashAndRecover(() => node.mounts.failStat(targetOf('a1'), 'ENOTCONN'));
    expect(kinds()).toEqual(['plugin-back a1', 'stale a1', 'remount-failed a1']);
    expect(messageOf('remount-failed', 'a1')).toBe('volume "data" (vol1) is stale and could not be remounted: NodePublishVolume: device busy; trying again after a backoff and when plugin hostpath is next back');
    expect(node.record('a1')).toMatchObject({ desired: 'mounted', published: true });
    expect(node.record('a1')!.targetPath).toBeUndefined();
    expect(node.reconciler.mounted('a1')).toEqual([]);

    node.mounts.clearStat(targetOf('a1'));
    await node.clock.advance(node.timeouts.unmountBackoff(1));
    await node.settle();
    expect(kinds().slice(3)).toEqual(['stale a1', 'remounted a1']);
    expect(messageOf('stale', 'a1')).toMatch(/is stale: .*ENOTCONN/);
    expect(node.checks.at(-2)!.message).toMatch(/is stale: it is not mounted \(an earlier remount did not finish\); remounting/);
    expect(node.record('a1')).toMatchObject({ published: true, targetPath: targetOf('a1') });
  });
});
