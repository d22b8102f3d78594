// The live-mount check after a node plugin comes back (mount-checker.ts),
// driven through the real VolumeReconciler on the test node's fakes: the
// plugin crashes and recovers (or is replaced), the host's mount table and
// the stat of a path say whether a mount answers (ENOTCONN, ESTALE, a stat
// that hangs), the plugin's NodeGetVolumeStats says whether it is abnormal,
// and each stale-mount policy (remount, restart, keep) does what it says —
// and says so, in one event per finding.
import { CSIError, GrpcStatus } from '@csiplug/csi';
import {
  PLUGIN,
  PRERUN,
  RESTORE,
  TestNode,
  published,
  req,
  staged,
  stagingOf,
  targetOf,
  unpublished,
  unstaged,
} from '../../test/support/reconciler-node';
import { MountProbeHungError, MountProbeNotStartedError } from '@csiplug/csimanager';
import { MOUNT_STAT_LIMIT_MS, RETIRED_CHECK_GRACE_MS, STATS_AT_ONCE } from './mount-checker';

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
    expect(messageOf('plugin-back', 'a1')).toBe(
      `plugin hostpath is back (healthy again, alloc alloc-hostpath); checking volume "data" (vol1) at ${targetOf('a1')}`,
    );
    expect(messageOf('checked', 'a2')).toBe(`volume "data" (vol1) at ${targetOf('a2')} answers; kept as it is`);
    expect(node.checks[0]).toMatchObject({
      allocId: 'a1',
      name: 'data',
      volumeId: 'vol1',
      pluginId: PLUGIN,
      targetPath: targetOf('a1'),
      policy: 'remount',
      time: node.clock.now(),
    });
    expect(node.mounts.statted).toEqual([targetOf('a1'), targetOf('a2')]);
    expect(node.calls()).toEqual(calls);
  });

  test('an upgrade — a new instance under the same name — is a plugin back too, naming the one it replaced', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    node.csi.bringUp(PLUGIN, 'csi-node', { allocId: 'plugin-v2', socketPath: '/fake/plugins/plugin-v2/csi.sock' });
    await node.settle();
    expect(kinds()).toEqual(['plugin-back a1', 'checked a1']);
    expect(messageOf('plugin-back', 'a1')).toMatch(
      /^plugin hostpath is back \(a new instance, alloc plugin-v2, replacing alloc alloc-hostpath\)/,
    );
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
    // Unpublished and recorded so; the publish asked for again, recorded before it went out. The intent and
    // the target path stay recorded until the remount is reported (a next agent finishes it there).
    expect(node.record('a1')).toMatchObject({
      desired: 'mounted',
      claimed: true,
      staged: true,
      published: true,
      remounting: 'remount',
      targetPath: targetOf('a1'),
    });
    expect(node.reconciler.mounted('a1')).toEqual([]);
    expect(kinds()).toEqual(['plugin-back a1', 'stale a1']);
    expect(messageOf('stale', 'a1')).toBe(
      `volume "data" (vol1) at ${targetOf('a1')} is stale: ${targetOf('a1')} does not answer a stat (ENOTCONN); remounting it through plugin hostpath`,
    );
    publish.release();
    await node.settle();

    expect(kinds()).toEqual(['plugin-back a1', 'stale a1', 'remounted a1']);
    expect(messageOf('remounted', 'a1')).toBe(
      `volume "data" (vol1) staged and published again at ${targetOf('a1')} through plugin hostpath`,
    );
    expect(node.checks.at(-1)!.restartTasks).toBeUndefined();
    expect(node.calls().slice(2)).toEqual(['unpublish vol1 a1', 'stage vol1', 'publish vol1 a1']);
    expect(node.changes().slice(changes)).toEqual([unpublished('a1'), published('a1')]);
    expect(node.record('a1')).toMatchObject({
      desired: 'mounted',
      claimed: true,
      staged: true,
      published: true,
      targetPath: targetOf('a1'),
      stagingPath: stagingOf(),
    });
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
    expect(messageOf('stale', 'a2')).toBe(
      `volume "data" (vol1) at ${targetOf('a2')} is stale: its staging mount ${stagingOf()} is stale: ${stagingOf()} does not answer a stat (ESTALE); remounting it through plugin hostpath`,
    );
    expect(node.changes().slice(changes)).toEqual([
      unpublished('a1'),
      unpublished('a2'),
      unstaged(),
      staged(),
      published('a1'),
      published('a2'),
    ]);
    expect(node.mounted()).toEqual([targetOf('a1'), targetOf('a2'), stagingOf()].sort());
  });

  test('... unless an alloc whose policy is "keep" uses the staging mount: it stays, and its other users are reported stale, not "remounted" from it', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    await node.reconciler.mount(req('a2', { onStaleMount: 'keep' }), PRERUN);
    const changes = node.changes().length;
    await crashAndRecover(() => {
      node.mounts.failStat(targetOf('a1'), 'ENOTCONN');
      node.mounts.failStat(stagingOf(), 'ENOTCONN');
    });
    // Publishing a1 again from the still-stale staging mount would mend nothing: no step, and no "remounted".
    expect(kinds()).toEqual(['plugin-back a1', 'plugin-back a2', 'stale a1', 'stale a2']);
    expect(messageOf('stale', 'a1')).toMatch(
      /not remounted: its staging mount .* is stale \(.*ENOTCONN.*\) and is kept for alloc a2 \(on_stale_mount = "keep"\), so it cannot be staged again/,
    );
    expect(messageOf('stale', 'a2')).toMatch(/its staging mount .* is stale: .*ENOTCONN.*; kept as it is \(on_stale_mount = "keep"\)/);
    expect(node.changes().slice(changes)).toEqual([]);
    expect(
      node.logger.find('a staging mount is stale, but is kept for an alloc whose policy is "keep"; its other users stay stale', 'warn'),
    ).toHaveLength(1);
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
    expect(messageOf('stale', 'a1')).toMatch(
      /is stale: .* \(ENOTCONN\); kept as it is \(on_stale_mount = "keep"\): its tasks see a broken path until the alloc is restarted$/,
    );
    expect(node.calls()).toEqual(calls);
    expect(node.logger.find('a live volume mount is stale', 'warn')[0]!.fields).toMatchObject({ alloc_id: 'a1', policy: 'keep' });
  });

  test("a stat that hangs is stale after MOUNT_STAT_LIMIT_MS; while it still hangs the path is not stat'ed again", async () => {
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
    expect(messageOf('stale', 'a1')).toBe(
      `volume "data" (vol1) at ${targetOf('a1')} is stale: ${targetOf('a1')} did not answer a stat within 5s (the mount hangs); kept as it is (on_stale_mount = "keep"): its tasks see a broken path until the alloc is restarted`,
    );

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

  test('with GET_VOLUME_STATS, an abnormal condition of a mount that answers is reported, never remounted; an error reading it is only logged', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    await node.reconciler.mount(
      req('a2', { volumeId: 'vol2', usage: { readOnly: true, attachmentMode: 'file-system', accessMode: 'multi-node-reader-only' } }),
      PRERUN,
    );
    node.vm.volumeStats = true;
    node.vm.conditions.set(targetOf('a1'), { abnormal: true, message: "The volume isn't mounted", reported: true });
    const a2Target = node.record('a2')!.targetPath!;
    node.vm.conditions.set(
      a2Target,
      new CSIError({ grpcCode: GrpcStatus.UNIMPLEMENTED, method: 'NodeGetVolumeStats', endpoint: 'fake', details: '' }),
    );
    const changes = node.changes().length;
    const calls = node.calls().length;
    await crashAndRecover();
    expect(kinds()).toEqual(['plugin-back a1', 'plugin-back a2', 'abnormal a1', 'checked a2']);
    expect(messageOf('abnormal', 'a1')).toBe(
      `volume "data" (vol1) at ${targetOf('a1')} answers, but plugin hostpath reports the volume abnormal at ${targetOf('a1')}: The volume isn't mounted; kept as it is (a plugin's condition alone never unmounts a live mount: if the volume is broken, restart the alloc)`,
    );
    // The mount answers, so it is kept; its event says the plugin could not tell its condition, and why.
    expect(messageOf('checked', 'a2')).toMatch(
      new RegExp(
        `^volume "data" \\(vol2\\) at ${a2Target.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} answers; kept as it is \\(plugin hostpath could not tell its condition: .*UNIMPLEMENTED`,
      ),
    );
    expect(node.logger.find('could not read the volume condition; the mount itself answers, so it is kept', 'warn')).toHaveLength(1);
    expect(
      node.logger.find(
        'a node plugin reports a live volume mount abnormal; it answers every check of its own, so it is kept as it is',
        'warn',
      ),
    ).toHaveLength(1);
    expect(node.vm.conditionChecks).toEqual(['vol1 a1 target', 'vol2 a2 target']);
    // Nothing came down: no unpublish, no unstage, no record changed, and volume status says what the plugin said.
    expect(node.calls().slice(calls)).toEqual([]);
    expect(node.changes().slice(changes)).toEqual([]);
    expect(node.record('a1')).toMatchObject({ published: true, staged: true });
    expect(node.record('a1')!.remounting).toBeUndefined();
    expect(node.reconciler.mountChecks('a1')[0]).toMatchObject({
      state: 'abnormal',
      message: expect.stringMatching(/reports the volume abnormal/),
    });
    expect(node.reconciler.mountChecks('a2')[0]!.state).toBe('ok');
    // Every time it comes back: reported again, still never remounted.
    await crashAndRecover();
    expect(kinds().filter((k) => k === 'abnormal a1')).toHaveLength(2);
    expect(node.calls().slice(calls)).toEqual([]);
  });

  test('a stat that answers EIO or ENOENT proves nothing of the mount: a target still a mount point is kept; ENOENT of one no longer mounted is stale', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    await node.reconciler.mount(req('a2'), PRERUN);
    await node.reconciler.mount(req('a3'), PRERUN);
    const calls = node.calls().length;
    await crashAndRecover(() => {
      node.mounts.failStat(targetOf('a1'), 'EIO');
      node.mounts.failStat(targetOf('a2'), 'ENOENT');
      node.mounts.failStat(targetOf('a3'), 'ENOENT');
      node.mounts.unmark(targetOf('a3'));
    });
    expect(kinds().slice(3)).toEqual(['checked a1', 'checked a2', 'stale a3', 'remounted a3']);
    expect(messageOf('stale', 'a3')).toMatch(/is no longer a mount point; remounting/);
    expect(node.calls().slice(calls)).toEqual(['unpublish vol1 a3', 'stage vol1', 'publish vol1 a3']);
    expect(
      node.logger.find('could not stat a live mount for a reason that does not say it is dead; not taken as stale', 'warn'),
    ).toHaveLength(3);
  });

  test('a broken mount whose unpublish the plugin refuses as busy is reported and left as it is: not retried, not held "remounting", checked again when the plugin is back', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    const calls = node.calls().length;
    node.vm.failNext('unpublish', { error: new Error('NodeUnpublishVolume: umount: /t: target is busy.') });
    await crashAndRecover(() => node.mounts.failStat(targetOf('a1'), 'ENOTCONN'));
    expect(kinds()).toEqual(['plugin-back a1', 'stale a1', 'remount-busy a1']);
    expect(messageOf('remount-busy', 'a1')).toMatch(
      new RegExp(`is stale, but its target .* is in use \\(.*target is busy.*\\); left as it is, not forced`),
    );
    expect(node.calls().slice(calls)).toEqual(['unpublish vol1 a1']);
    expect(node.record('a1')).toMatchObject({ published: true, staged: true });
    expect(node.record('a1')!.remounting).toBeUndefined();
    expect(node.reconciler.mountChecks('a1')[0]!.state).toBe('busy');
    // No backoff retry: the backoff passes and nothing is asked of the plugin.
    await node.clock.advance(node.timeouts.unmountBackoff(1) * 4);
    await node.settle();
    expect(node.calls().slice(calls)).toEqual(['unpublish vol1 a1']);
    // The plugin back: looked at again; no longer busy, so remounted.
    await crashAndRecover();
    expect(kinds().slice(3)).toEqual(['plugin-back a1', 'stale a1', 'remounted a1']);
    expect(node.reconciler.mountChecks('a1')[0]!.state).toBe('ok');
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
    expect(messageOf('remount-failed', 'a1')).toBe(
      'volume "data" (vol1) is stale and could not be remounted: NodePublishVolume: device busy; trying again after a backoff and when plugin hostpath is next back',
    );
    expect(node.record('a1')).toMatchObject({ desired: 'mounted', published: true, remounting: 'remount' });
    expect(node.reconciler.mounted('a1')).toEqual([]);

    node.mounts.clearStat(targetOf('a1'));
    await node.clock.advance(node.timeouts.unmountBackoff(1));
    await node.settle();
    expect(kinds().slice(3)).toEqual(['stale a1', 'remounted a1']);
    expect(messageOf('stale', 'a1')).toMatch(/is stale: .*ENOTCONN/);
    expect(node.checks.at(-2)!.message).toMatch(/is stale: a remount of it was started and did not finish; remounting/);
    expect(node.record('a1')).toMatchObject({ published: true, targetPath: targetOf('a1') });
    expect(node.record('a1')!.remounting).toBeUndefined();
  });
});

describe('a stale mount the claimer says may not come back up yet (a cluster node not settled since it joined)', () => {
  test('is not remounted — no call to the plugin — but reported with why, and remounted on the retry once it may', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    const calls = node.calls().length;
    node.claimer.remountRefused = 'volume "vol1": this agent does not hold node "n1" in the cluster yet';
    await crashAndRecover(() => node.mounts.failStat(targetOf('a1'), 'ENOTCONN'));
    expect(kinds()).toEqual(['plugin-back a1', 'stale a1', 'remount-failed a1']);
    expect(messageOf('remount-failed', 'a1')).toBe(
      'volume "data" (vol1) is stale and could not be remounted: volume "vol1": this agent does not hold node "n1" in the cluster yet; trying again after a backoff and when plugin hostpath is next back',
    );
    expect(node.calls().slice(calls)).toEqual([]);

    // Still stale when it may: the retry brings it back up through the plugin.
    node.claimer.remountRefused = undefined;
    await node.clock.advance(node.timeouts.unmountBackoff(1));
    await node.settle();
    expect(kinds().slice(3)).toEqual(['stale a1', 'remounted a1']);
    expect(node.calls().slice(calls)).toEqual(['unpublish vol1 a1', 'stage vol1', 'publish vol1 a1']);
  });
});

describe("probes that cannot start or wait for a slot say nothing of the mount (the agent's own limits are not a stale mount)", () => {
  const notStarted = (p: string) => new MountProbeNotStartedError(p, `could not stat ${p}: 4 probes in flight and 256 queued`);

  test('a probe that could not start is not stale: the mount is kept, with a warning', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    node.mounts.stat = async (p: string) => {
      throw notStarted(p);
    };
    const calls = node.calls();
    await crashAndRecover();
    expect(kinds()).toEqual(['plugin-back a1', 'checked a1']);
    expect(node.calls()).toEqual(calls);
    expect(
      node.logger.find('could not start a stat of a live mount; nothing is known of it, so it is not taken as stale', 'warn'),
    ).toHaveLength(1);
  });

  test("time spent queued for a probe slot does not count: the limit runs from the probe's start", async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1', { onStaleMount: 'keep' }), PRERUN);
    let start!: () => void;
    let answer!: () => void;
    node.mounts.stat = (_p, options) =>
      new Promise<void>((resolve) => {
        start = () => options?.onStarted?.();
        answer = resolve;
      });
    await crashAndRecover();
    // Queued (not started) far past the limit: no finding.
    await node.clock.advance(MOUNT_STAT_LIMIT_MS * 3);
    await node.settle();
    expect(kinds()).toEqual(['plugin-back a1']);
    start();
    await node.clock.advance(MOUNT_STAT_LIMIT_MS - 1);
    answer();
    await node.settle();
    expect(kinds()).toEqual(['plugin-back a1', 'checked a1']);
  });

  test('a path whose probe hung stays stale while later probes cannot start, and is well once a probe answers', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1', { onStaleMount: 'keep' }), PRERUN);
    const real = node.mounts.stat.bind(node.mounts);
    node.mounts.stat = async (p: string) => {
      throw new MountProbeHungError(p, `${p} did not answer a stat within 5000 ms (the mount hangs)`);
    };
    await crashAndRecover();
    expect(kinds()).toEqual(['plugin-back a1', 'stale a1']);
    node.mounts.stat = async (p: string) => {
      throw notStarted(p);
    };
    await crashAndRecover();
    expect(kinds().slice(2)).toEqual(['plugin-back a1', 'stale a1']);
    expect(node.checks.at(-1)!.message).toMatch(/an earlier stat of .* hung and no later one has answered/);
    node.mounts.stat = real;
    await crashAndRecover();
    expect(kinds().slice(4)).toEqual(['plugin-back a1', 'checked a1']);
  });

  test(`the targets are stat'ed together (the table batches them), at most ${STATS_AT_ONCE} at once`, async () => {
    node = new TestNode();
    const count = STATS_AT_ONCE + 3;
    for (let i = 1; i <= count; i++) await node.reconciler.mount(req(`a${i}`), PRERUN);
    let inFlight = 0;
    let peak = 0;
    const releases: (() => void)[] = [];
    node.mounts.stat = () =>
      new Promise<void>((resolve) => {
        peak = Math.max(peak, ++inFlight);
        releases.push(() => {
          inFlight--;
          resolve();
        });
      });
    await crashAndRecover();
    expect(peak).toBe(STATS_AT_ONCE);
    while (releases.length) {
      releases.splice(0).forEach((release) => release());
      await node.settle();
    }
    expect(peak).toBe(STATS_AT_ONCE);
    expect(kinds().filter((k) => k.startsWith('checked'))).toHaveLength(count);
  });
});

describe('a remount never passes off a stale staging mount as mended (M1)', () => {
  test('a peer whose unpublish fails stays failed, and the stale staging mount is still staged again for the others', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    await node.reconciler.mount(req('a2'), PRERUN);
    const changes = node.changes().length;
    node.vm.failNext('unpublish', { error: new Error('device busy') });
    await crashAndRecover(() => {
      node.mounts.failStat(targetOf('a1'), 'ESTALE');
      node.mounts.failStat(targetOf('a2'), 'ESTALE');
      node.mounts.failStat(stagingOf(), 'ESTALE');
    });
    expect(kinds().slice(2)).toEqual(['stale a1', 'stale a2', 'remount-failed a1', 'remounted a2']);
    // a2 is published again from a staging mount staged again, never from the stale one.
    expect(node.changes().slice(changes)).toEqual([unpublished('a2'), unstaged(), staged(), published('a2')]);
  });

  test('another alloc that mounted the volume between the check and the remount comes down and up with the stale staging mount', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    const release = node.mounts.hangStat(targetOf('a1'));
    await crashAndRecover(() => node.mounts.failStat(stagingOf(), 'ESTALE'));
    // a3 arrives while a1's stat hangs: its stage is skipped (the stale staging "is a mount"), it is published from it.
    await node.reconciler.mount(req('a3'), PRERUN);
    const changes = node.changes().length;
    await node.clock.advance(MOUNT_STAT_LIMIT_MS);
    await node.settle();
    expect(kinds()).toEqual(['plugin-back a1', 'stale a1', 'remounted a1', 'remounted a3']);
    expect(messageOf('remounted', 'a3')).toMatch(/with the other users of its stale staging mount/);
    expect(node.changes().slice(changes)).toEqual([
      unpublished('a1'),
      unpublished('a3'),
      unstaged(),
      staged(),
      published('a1'),
      published('a3'),
    ]);
    release();
  });
});

describe('an agent killed mid-remount leaves the next one the remount to finish (M2)', () => {
  async function killDuringUnstage(policy: 'remount' | 'restart') {
    node = new TestNode();
    await node.reconciler.mount(req('a1', { onStaleMount: policy }), PRERUN);
    const unstage = node.vm.hangNext('unstage');
    await crashAndRecover(() => {
      node.mounts.failStat(targetOf('a1'), 'ESTALE');
      node.mounts.failStat(stagingOf(), 'ESTALE');
    });
    await unstage.reached;
    // kill -9 here: the intent was written before the first step.
    expect(node.record('a1')).toMatchObject({ remounting: policy, published: false, staged: true, targetPath: targetOf('a1') });
  }

  test('restore keeps the alloc running (no plugin wait, no restore limit) and the checker unstages, stages and publishes again', async () => {
    await killDuringUnstage('remount');
    const agent = node.restart();
    const calls = node.calls().length;
    const waits = node.csi.waits.length;
    const events = node.checks.length;
    const info = await agent.mount(req('a1', { onStaleMount: 'remount' }), RESTORE);
    expect(info).toMatchObject({ restored: true, targetPath: targetOf('a1') });
    expect(node.csi.waits.length).toBe(waits);
    await node.settle();
    expect(node.calls().slice(calls)).toEqual(['unstage vol1', 'stage vol1', 'publish vol1 a1']);
    expect(node.checks.slice(events).map((e) => `${e.kind} ${e.allocId}`)).toEqual(['stale a1', 'remounted a1']);
    expect(node.checks.at(-2)!.message).toMatch(/a remount of it was started and did not finish/);
    expect(node.record('a1')!.remounting).toBeUndefined();
    expect(node.record('a1')).toMatchObject({ published: true, staged: true, targetPath: targetOf('a1') });
  });

  test('under "restart", the next agent still restarts the tasks once the remount is done', async () => {
    await killDuringUnstage('restart');
    const agent = node.restart();
    await agent.mount(req('a1', { onStaleMount: 'restart' }), RESTORE);
    await node.settle();
    expect(node.checks.at(-1)).toMatchObject({ kind: 'remounted', allocId: 'a1', restartTasks: true });
  });

  test('with the plugin away, the restore keeps the alloc past the restore limit, and the remount is finished when the plugin is back', async () => {
    await killDuringUnstage('remount');
    node.csi.bringDown(PLUGIN);
    const agent = node.restart();
    const info = await agent.mount(req('a1'), RESTORE);
    expect(info).toMatchObject({ restored: true, pluginAway: true });
    await node.clock.advance(2 * node.timeouts.pluginWait('restore'));
    await node.settle();
    expect(node.record('a1')).toMatchObject({ desired: 'mounted', remounting: 'remount' });
    node.csi.bringUp(PLUGIN);
    await node.settle();
    expect(node.checks.at(-1)).toMatchObject({ kind: 'remounted', allocId: 'a1' });
    expect(node.record('a1')!.remounting).toBeUndefined();
  });
});

describe("a plugin that bounces during a mount's steps has the mount looked at again (M3)", () => {
  test('a remount whose publish straddles a second bounce is checked by the follow-up run', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1', { onStaleMount: 'keep' }), PRERUN);
    await node.reconciler.mount(req('a2'), PRERUN);
    const publish = node.vm.hangNext('publish');
    await crashAndRecover(() => node.mounts.failStat(targetOf('a2'), 'ENOTCONN'));
    await publish.reached;
    node.mounts.clearStat(targetOf('a2'));
    // The plugin dies and comes back while the publish is under way (served by the dying process).
    await crashAndRecover();
    publish.release();
    await node.settle();
    const after = kinds().slice(kinds().indexOf('remounted a2') + 1);
    expect(after).toContain('checked a2');
  });
});

describe('a record with a value this agent does not know (L4)', () => {
  test('an unknown on_stale_mount (from a newer agent) is read as "remount" with a warning; the record is kept, never dropped', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    node.store.put({ ...node.record('a1')!, onStaleMount: 'migrate' as never });
    const agent = node.restart();
    expect(
      node.logger.find('a volume mount record holds values this agent does not know (from a newer agent?); read with defaults', 'warn')[0]!
        .fields,
    ).toMatchObject({ alloc_id: 'a1', fields: 'onStaleMount "migrate" (read as "remount")' });
    expect(agent.list('a1')).toHaveLength(1);
    const info = await agent.mount(req('a1'), RESTORE);
    expect(info).toMatchObject({ restored: true });
    expect(node.claimer.claims).toHaveLength(1);
    node.mounts.failStat(targetOf('a1'), 'ENOTCONN');
    await crashAndRecover();
    expect(node.checks.at(-1)).toMatchObject({ kind: 'remounted', allocId: 'a1', policy: 'remount' });
  });
});

describe('create-before-destroy: the replaced plugin alloc going away is when its mounts go stale (H3)', () => {
  test('after the swap, the old alloc deregistering has every mount through the plugin checked again (after a short grace)', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    node.csi.bringUp(PLUGIN, 'csi-node', { allocId: 'plugin-v2', socketPath: '/fake/plugins/plugin-v2/csi.sock' });
    await node.settle();
    // Checked while the old process still serves: it answers.
    expect(kinds()).toEqual(['plugin-back a1', 'checked a1']);
    // The rollout stops the old alloc: its FUSE daemon dies with it.
    node.mounts.failStat(targetOf('a1'), 'ENOTCONN');
    node.csi.retire(PLUGIN, 'alloc-hostpath');
    await node.settle();
    expect(kinds()).toEqual(['plugin-back a1', 'checked a1']);
    await node.clock.advance(RETIRED_CHECK_GRACE_MS);
    await node.settle();
    expect(kinds()).toEqual(['plugin-back a1', 'checked a1', 'plugin-back a1', 'stale a1', 'remounted a1']);
    expect(node.checks[2]!.message).toMatch(/^plugin hostpath: alloc alloc-hostpath, which alloc plugin-v2 replaced, went away/);
  });
});

describe('the last check result of each live mount, for volume status (M4)', () => {
  test('plugin-away while its plugin is gone, stale when found so (policy keep), remounting while a remount is not done, ok once it answers', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1', { onStaleMount: 'keep' }), PRERUN);
    await node.reconciler.mount(req('a2'), PRERUN);
    const states = () => node.reconciler.mountChecks().map((c) => `${c.allocId} ${c.state}`);
    expect(states()).toEqual(['a1 ok', 'a2 ok']);
    node.csi.crash(PLUGIN);
    expect(states()).toEqual(['a1 plugin-away', 'a2 plugin-away']);
    node.mounts.failStat(targetOf('a1'), 'ENOTCONN');
    node.mounts.failStat(targetOf('a2'), 'ENOTCONN');
    node.vm.failNext('publish', { error: new Error('device busy') });
    node.csi.bringUp(PLUGIN);
    await node.settle();
    expect(states()).toEqual(['a1 stale', 'a2 remounting']);
    expect(node.reconciler.mountChecks('a1')[0]).toMatchObject({
      message: expect.stringMatching(/is stale: .*ENOTCONN/),
      time: node.clock.now(),
    });
    node.mounts.clearStat(targetOf('a1'));
    node.mounts.clearStat(targetOf('a2'));
    await node.clock.advance(node.timeouts.unmountBackoff(1));
    await node.settle();
    expect(states()).toEqual(['a1 stale', 'a2 ok']);
    await crashAndRecover();
    expect(states()).toEqual(['a1 ok', 'a2 ok']);
  });
});

describe('a plugin upgrade that moved its mount dir (L7)', () => {
  test('the condition is not asked at the new paths for a mount made at the old ones: a healthy mount is not called stale', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    // The mount was made under the old mount dir; the current registration puts volumes under ROOT.
    const oldTarget = `/var/lib/csiplug/csi/node/old-dir/per-alloc/a1/vol1/rw-file-system-single-node-writer`;
    node.mounts.mark(oldTarget);
    node.store.put({ ...node.record('a1')!, targetPath: oldTarget });
    const agent = node.restart();
    node.vm.volumeStats = true;
    // Asked at the new path, the plugin knows no volume there.
    node.vm.conditions.set(targetOf('a1'), { abnormal: true, message: 'NodeGetVolumeStats: NOT_FOUND', reported: true });
    const events = node.checks.length;
    expect(await agent.mount(req('a1'), RESTORE)).toMatchObject({ restored: true, targetPath: oldTarget });
    await node.settle();
    await crashAndRecover();
    expect(kinds().slice(events)).toEqual(['checked a1', 'plugin-back a1', 'checked a1']);
    expect(node.calls().filter((c) => c.startsWith('publish') || c.startsWith('unpublish'))).toEqual(['publish vol1 a1']);
  });
});
