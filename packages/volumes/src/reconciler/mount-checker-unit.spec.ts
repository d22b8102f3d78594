// MountChecker (mount-checker.ts) on a host of its own, without the
// reconciler (test/support/mount-checker-host.ts): what one look says of
// what it finds, word for word and field for field — a plugin started anew,
// records with no target or not published, a record not staged, a remount
// that took other users of a stale staging mount along, an abnormal or
// unreadable condition, a stale finding's log line — and how "keep" and a
// remount already under way decide who comes down with a stale staging mount;
// what a stat's errors say (and undo of an earlier hang), staging mounts told
// apart by usage, a remount intent of "restart", and a retry dropped on dispose.
import { MountProbeHungError, MountProbeNotStartedError } from '@csiplug/csimanager';
import { Harness, PLUGIN, STAGING, keyOf, record, targetOf } from '../../test/support/mount-checker-host';
import { MOUNT_STAT_LIMIT_MS } from './mount-checker';

let h: Harness;
beforeEach(() => (h = new Harness()));
afterEach(() => h.checker.dispose());

describe('what a look says', () => {
  test('a plugin started anew (not recovered, not replacing one) is announced by its alloc; every field of the events is set', async () => {
    h.add(record('a1'));
    h.ready({ cause: 'started', allocId: 'plugin-7' });
    await h.settle();
    expect(h.kinds()).toEqual(['plugin-back a1', 'checked a1']);
    expect(h.events[0]).toEqual({
      kind: 'plugin-back',
      allocId: 'a1',
      name: 'data',
      volumeId: 'vol1',
      pluginId: PLUGIN,
      targetPath: targetOf('a1'),
      policy: 'remount',
      message: `plugin fuse is back (alloc plugin-7); checking volume "data" (vol1) at ${targetOf('a1')}`,
      time: h.clock.now(),
    });
    expect(h.message('checked', 'a1')).toBe(`volume "data" (vol1) at ${targetOf('a1')} answers; kept as it is`);
    expect(h.events[1]).not.toHaveProperty('restartTasks');
  });

  test("a record with no target, or not published, is stale at once — not stat'ed — and remounted; its events name no target path", async () => {
    h.add(record('a1', { targetPath: undefined, published: false }), record('a2', { published: false }));
    h.ready();
    await h.settle();
    expect(h.kinds()).toEqual(['plugin-back a1', 'plugin-back a2', 'stale a1', 'stale a2', 'remounted a1', 'remounted a2']);
    expect(h.message('plugin-back', 'a1')).toBe(
      'plugin fuse is back (healthy again, alloc plugin-1); checking volume "data" (vol1) at its target',
    );
    expect(h.message('stale', 'a1')).toBe(
      'volume "data" (vol1) at its target is stale: it is not mounted (an earlier remount did not finish); remounting it through plugin fuse',
    );
    expect(h.message('stale', 'a2')).toBe(
      `volume "data" (vol1) at ${targetOf('a2')} is stale: it is not mounted (an earlier remount did not finish); remounting it through plugin fuse`,
    );
    expect(h.events.find((e) => e.allocId === 'a1')).not.toHaveProperty('targetPath');
    expect(h.mounts.statted).toEqual([STAGING]);
    expect(h.remounts).toEqual([`vol1 ${keyOf('a1')},${keyOf('a2')} restage=`]);
    expect(h.reported).toEqual([keyOf('a1'), keyOf('a2')]);
  });

  test('a stale target whose record is not staged has no staging mount looked at', async () => {
    h.add(record('a1', { staged: false }), record('a2', { volumeId: 'vol2', stagingPath: undefined }));
    h.mounts.failStat(targetOf('a1'), 'ENOTCONN');
    h.mounts.failStat(targetOf('a2'), 'ESTALE');
    h.mounts.failStat(STAGING, 'ENOTCONN');
    h.ready();
    await h.settle();
    expect(h.mounts.statted).toEqual([targetOf('a1'), targetOf('a2')]);
    expect(h.remounts).toEqual([`vol1 ${keyOf('a1')} restage=`, `vol2 ${keyOf('a2')} restage=`]);
    expect(h.message('stale', 'a2')).toBe(
      `volume "data" (vol2) at ${targetOf('a2')} is stale: ${targetOf('a2')} does not answer a stat (ESTALE); remounting it through plugin fuse`,
    );
  });

  test('a remount done with other users of the staging mount says so: each one is reported remounted, logged and handed back', async () => {
    h.add(record('a1'));
    const extra = record('a9', { targetPath: targetOf('a9') });
    h.mounts.failStat(targetOf('a1'), 'ESTALE');
    h.mounts.failStat(STAGING, 'ESTALE');
    h.remount = async (_v, keys) => ({ done: new Set([...keys, keyOf('a9')]), failed: new Map(), extra: new Map([[keyOf('a9'), extra]]) });
    h.ready();
    await h.settle();
    expect(h.kinds()).toEqual(['plugin-back a1', 'stale a1', 'remounted a1', 'remounted a9']);
    expect(h.remounts).toEqual([`vol1 ${keyOf('a1')} restage=vol1`]);
    expect(h.message('remounted', 'a1')).toBe(`volume "data" (vol1) staged and published again at ${targetOf('a1')} through plugin fuse`);
    expect(h.message('remounted', 'a9')).toBe(
      `volume "data" (vol1) staged and published again at ${targetOf('a9')} through plugin fuse (with the other users of its stale staging mount ${STAGING})`,
    );
    expect(h.reported).toEqual([keyOf('a1'), keyOf('a9')]);
    expect(h.log.find('a stale volume mount was remounted', 'info').map((l) => l.fields)).toEqual([
      { alloc_id: 'a1', volume: 'data', volume_id: 'vol1', plugin_id: PLUGIN, target: targetOf('a1') },
      { alloc_id: 'a9', volume: 'data', volume_id: 'vol1', plugin_id: PLUGIN, target: targetOf('a9') },
    ]);
  });

  test("an abnormal condition without a message names only where; the call is asked at the target with the checker's signal", async () => {
    h.add(record('a1'));
    h.condition = async () => ({ abnormal: true, message: '', reported: true });
    h.ready();
    await h.settle();
    expect(h.kinds()).toEqual(['plugin-back a1', 'abnormal a1']);
    expect(h.message('abnormal', 'a1')).toBe(
      `volume "data" (vol1) at ${targetOf('a1')} answers, but plugin fuse reports the volume abnormal at ${targetOf('a1')}; kept as it is (a plugin's condition alone never unmounts a live mount: if the volume is broken, restart the alloc)`,
    );
    expect(h.conditionCalls).toHaveLength(1);
    expect(h.conditionCalls[0]).toMatchObject({
      volume: { id: 'vol1', externalId: 'ext-vol1', pluginId: PLUGIN },
      allocId: 'a1',
      at: 'target',
      options: { hostPath: targetOf('a1') },
    });
    expect(h.conditionCalls[0]!.options.signal).toBeInstanceOf(AbortSignal);
    expect(h.conditionCalls[0]!.options.signal!.aborted).toBe(false);
    expect(
      h.log.find(
        'a node plugin reports a live volume mount abnormal; it answers every check of its own, so it is kept as it is',
        'warn',
      )[0]!.fields,
    ).toEqual({
      alloc_id: 'a1',
      volume: 'data',
      volume_id: 'vol1',
      plugin_id: PLUGIN,
      target: targetOf('a1'),
      condition: `plugin fuse reports the volume abnormal at ${targetOf('a1')}`,
    });
    // A condition that is not abnormal is no finding.
    h.condition = async () => ({ abnormal: false, message: 'fine', reported: true });
    h.ready();
    await h.settle();
    expect(h.kinds().slice(2)).toEqual(['plugin-back a1', 'checked a1']);
  });

  test('a condition that cannot be read is logged with the mount and said in its "checked" event', async () => {
    h.add(record('a1'));
    h.condition = async () => {
      throw new Error('NodeGetVolumeStats: deadline exceeded');
    };
    h.ready();
    await h.settle();
    expect(h.message('checked', 'a1')).toBe(
      `volume "data" (vol1) at ${targetOf('a1')} answers; kept as it is (plugin fuse could not tell its condition: NodeGetVolumeStats: deadline exceeded)`,
    );
    expect(h.log.find('could not read the volume condition; the mount itself answers, so it is kept', 'warn')[0]!.fields).toEqual({
      alloc_id: 'a1',
      volume_id: 'vol1',
      plugin_id: PLUGIN,
      path: targetOf('a1'),
      error: 'NodeGetVolumeStats: deadline exceeded',
    });
  });

  test('the stale finding is logged with the mount, its problem and its policy', async () => {
    h.add(record('a1', { onStaleMount: 'restart' }));
    h.mounts.failStat(targetOf('a1'), 'ENOTCONN');
    h.ready();
    await h.settle();
    expect(h.log.find('a live volume mount is stale', 'warn')[0]!.fields).toEqual({
      alloc_id: 'a1',
      volume: 'data',
      volume_id: 'vol1',
      plugin_id: PLUGIN,
      target: targetOf('a1'),
      problem: `${targetOf('a1')} does not answer a stat (ENOTCONN)`,
      policy: 'restart',
    });
    expect(h.events.at(-1)).toMatchObject({ kind: 'remounted', policy: 'restart', restartTasks: true });
  });
});

describe('"keep" and a remount already under way', () => {
  test('a "keep" mount whose remount an earlier agent started is remounted, and does not hold a stale staging mount for the others', async () => {
    h.add(record('a1', { onStaleMount: 'keep', remounting: 'remount' }), record('a2'));
    h.mounts.failStat(STAGING, 'ESTALE');
    h.ready();
    await h.settle();
    expect(h.kinds()).toEqual(['plugin-back a1', 'plugin-back a2', 'stale a1', 'stale a2', 'remounted a1', 'remounted a2']);
    expect(h.remounts).toEqual([`vol1 ${keyOf('a1')},${keyOf('a2')} restage=vol1`]);
    expect(h.message('stale', 'a1')).toBe(
      'volume "data" (vol1) at /mnt/target/a1 is stale: a remount of it was started and did not finish; remounting it through plugin fuse',
    );
    expect(h.message('stale', 'a2')).toBe(
      `volume "data" (vol1) at /mnt/target/a2 is stale: its staging mount ${STAGING} is stale: ${STAGING} does not answer a stat (ESTALE); remounting it through plugin fuse`,
    );
  });

  test('a stale staging mount held by a "keep" mount: the keeper says why it is stale, the others why they are not remounted', async () => {
    h.add(record('a1', { onStaleMount: 'keep' }), record('a2'), record('a3'));
    h.mounts.failStat(targetOf('a2'), 'ENOTCONN');
    h.mounts.failStat(STAGING, 'ENOTCONN');
    h.ready();
    await h.settle();
    expect(h.kinds().slice(3)).toEqual(['stale a1', 'stale a2', 'stale a3']);
    expect(h.remounts).toEqual([]);
    const stagingStale = `${STAGING} does not answer a stat (ENOTCONN)`;
    expect(h.message('stale', 'a1')).toBe(
      `volume "data" (vol1) at /mnt/target/a1 is stale: its staging mount ${STAGING} is stale: ${stagingStale}; kept as it is (on_stale_mount = "keep"): its tasks see a broken path until the alloc is restarted`,
    );
    expect(h.message('stale', 'a2')).toBe(
      `volume "data" (vol1) at /mnt/target/a2 is stale: /mnt/target/a2 does not answer a stat (ENOTCONN); not remounted: its staging mount ${STAGING} is stale (${stagingStale}) and is kept for alloc a1 (on_stale_mount = "keep"), so it cannot be staged again; its tasks see a broken path until the alloc is restarted`,
    );
    expect(h.message('stale', 'a3')).toBe(
      `volume "data" (vol1) at /mnt/target/a3 is stale: its staging mount ${STAGING} is stale: ${stagingStale}; not remounted: its staging mount ${STAGING} is stale (${stagingStale}) and is kept for alloc a1 (on_stale_mount = "keep"), so it cannot be staged again; its tasks see a broken path until the alloc is restarted`,
    );
    expect(
      h.log.find('a staging mount is stale, but is kept for an alloc whose policy is "keep"; its other users stay stale', 'warn')[0]!
        .fields,
    ).toEqual({ volume_id: 'vol1', staging_path: STAGING, problem: stagingStale, kept_for: ['a1'] });
    // Nothing failed: no retry is due.
    expect(h.clock.pendingTimers).toBe(0);
  });

  test('a "keep" mount whose own target is stale keeps its own problem when its staging mount is stale too', async () => {
    h.add(record('a1', { onStaleMount: 'keep' }));
    h.mounts.failStat(targetOf('a1'), 'ENOTCONN');
    h.mounts.failStat(STAGING, 'ESTALE');
    h.ready();
    await h.settle();
    expect(h.message('stale', 'a1')).toBe(
      'volume "data" (vol1) at /mnt/target/a1 is stale: /mnt/target/a1 does not answer a stat (ENOTCONN); kept as it is (on_stale_mount = "keep"): its tasks see a broken path until the alloc is restarted',
    );
  });
});

describe('what a stat says', () => {
  test('an error that does not prove the mount dead is logged with the mount, and clears a hang seen before', async () => {
    h.add(record('a1', { onStaleMount: 'keep' }));
    h.mounts.stat = async (p) => {
      throw new MountProbeHungError(p, `${p} did not answer a stat within 5000 ms (the mount hangs)`);
    };
    h.ready();
    await h.settle();
    expect(h.kinds()).toEqual(['plugin-back a1', 'stale a1']);
    // EIO answers: the hang is over, and EIO says nothing of the mount.
    h.mounts.stat = async (p) => {
      throw Object.assign(new Error(`EIO: stat '${p}' failed`), { code: 'EIO' });
    };
    h.ready();
    await h.settle();
    expect(h.kinds().slice(2)).toEqual(['plugin-back a1', 'checked a1']);
    expect(
      h.log.find('could not stat a live mount for a reason that does not say it is dead; not taken as stale', 'warn')[0]!.fields,
    ).toEqual({ alloc_id: 'a1', volume_id: 'vol1', target: targetOf('a1'), error: `EIO: stat '${targetOf('a1')}' failed` });
    // A probe that cannot start now finds no earlier hang to repeat.
    h.mounts.stat = async (p) => {
      throw new MountProbeNotStartedError(p, 'probe slots full');
    };
    h.ready();
    await h.settle();
    expect(h.kinds().slice(4)).toEqual(['plugin-back a1', 'checked a1']);
    expect(
      h.log.find('could not start a stat of a live mount; nothing is known of it, so it is not taken as stale', 'warn')[0]!.fields,
    ).toEqual({ alloc_id: 'a1', volume_id: 'vol1', target: targetOf('a1'), error: 'probe slots full' });
  });

  test("a stale staging mount whose stat hung is stat'ed afresh once it was staged again", async () => {
    h.add(record('a1'));
    h.mounts.failStat(targetOf('a1'), 'ENOTCONN');
    const release = h.mounts.hangStat(STAGING);
    h.ready();
    await h.settle();
    await h.clock.advance(MOUNT_STAT_LIMIT_MS);
    await h.settle();
    expect(h.message('stale', 'a1')).toMatch(/^volume "data" \(vol1\) at \/mnt\/target\/a1 is stale: \/mnt\/target\/a1 does not answer/);
    expect(h.remounts).toEqual([`vol1 ${keyOf('a1')} restage=vol1`]);
    // Stale again (the old stat of the staging path still hangs): the new staging mount is stat'ed, not taken as hanging.
    h.mounts.clearStat(STAGING);
    const stats = h.mounts.statted.length;
    h.ready();
    await h.settle();
    expect(h.mounts.statted.slice(stats)).toEqual([targetOf('a1'), STAGING]);
    expect(h.remounts).toEqual([`vol1 ${keyOf('a1')} restage=vol1`, `vol1 ${keyOf('a1')} restage=`]);
    release();
  });

  test('staging mounts are told apart by usage: a stale one brings down only its own users', async () => {
    const RO = { readOnly: true, attachmentMode: 'file-system', accessMode: 'multi-node-reader-only' } as const;
    h.add(record('a1'), record('a2', { usage: RO, stagingPath: '/mnt/staging/vol1-ro' }));
    h.mounts.failStat(targetOf('a1'), 'ESTALE');
    h.mounts.failStat(STAGING, 'ESTALE');
    h.ready();
    await h.settle();
    expect(h.kinds().slice(2)).toEqual(['stale a1', 'checked a2', 'remounted a1']);
    expect(h.remounts).toEqual([`vol1 ${keyOf('a1')} restage=vol1`]);
  });
});

describe('a remount intent from an earlier agent', () => {
  test('"restart" restarts the tasks though the policy is "remount"', async () => {
    h.add(record('a1', { remounting: 'restart' }));
    h.ready();
    await h.settle();
    expect(h.message('stale', 'a1')).toBe(
      `volume "data" (vol1) at ${targetOf('a1')} is stale: a remount of it was started and did not finish; remounting it through plugin fuse, then restarting the alloc's tasks`,
    );
    expect(h.events.at(-1)).toMatchObject({ kind: 'remounted', policy: 'remount', restartTasks: true });
    expect(h.message('remounted', 'a1')).toBe(
      `volume "data" (vol1) staged and published again at ${targetOf('a1')} through plugin fuse; restarting the alloc's tasks so they see it`,
    );
  });
});

describe('dispose', () => {
  test('with a retry due, the retry is dropped', async () => {
    h.add(record('a1'));
    h.mounts.failStat(targetOf('a1'), 'ENOTCONN');
    h.remount = async (_v, keys) => ({ done: new Set(), failed: new Map(keys.map((k) => [k, new Error('device busy')])) });
    h.ready();
    await h.settle();
    expect(h.clock.pendingTimers).toBe(1);
    h.checker.dispose();
    expect(h.clock.pendingTimers).toBe(0);
  });
});
