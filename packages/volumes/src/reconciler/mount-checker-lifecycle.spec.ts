// MountChecker (mount-checker.ts) on a host of its own
// (test/support/mount-checker-host.ts): when it looks and when it stops.
// Checks asked for while one runs are merged into one follow-up that keeps
// its announcement; a retired plugin alloc is looked at once, after its
// grace; fresh() and forget() decide which records a look skips; a failed
// remount is tried again after a growing backoff, which a plugin back
// cancels; failures of the look itself, of the remount call and of the mount
// table are logged and kept from their mounts; the stat limit counts from a
// probe's (last) start; conditions are asked a few at a time; and once
// disposed it asks nothing more.
import { MountProbeNotStartedError } from '@csiplug/csimanager';
import type { VolumeCondition } from '@csiplug/csimanager';
import { ClaimError } from '../catalog/volume-claimer';
import { Harness, PLUGIN, keyOf, record, targetOf } from '../../test/support/mount-checker-host';
import { RemountBusyError } from './errors';
import { CONDITIONS_AT_ONCE, MOUNT_STAT_LIMIT_MS, RETIRED_CHECK_GRACE_MS } from './mount-checker';

let h: Harness;
beforeEach(() => (h = new Harness()));
afterEach(() => h.checker.dispose());

/** Stats of the targets that the test settles (`answer()`, `fail(err)`; `start()` calls the probe's onStarted again); other paths answer. */
function controlledStats() {
  const pending: { p: string; start: () => void; answer: () => void; fail: (err: unknown) => void }[] = [];
  h.mounts.stat = (p, options) =>
    new Promise<void>((answer, fail) => {
      h.mounts.statted.push(p);
      const start = () => options?.onStarted?.();
      start();
      if (p.startsWith('/mnt/target/')) pending.push({ p, start, answer, fail });
      else answer();
    });
  return pending;
}

describe('checks asked for while one runs', () => {
  test('are merged into one follow-up, which keeps the announcement of a plugin back', async () => {
    h.add(record('a1'));
    const release = h.mounts.hangStat(targetOf('a1'));
    h.ready();
    await h.settle();
    expect(h.kinds()).toEqual(['plugin-back a1']);
    // A restored mount, the plugin back again, another restored mount: one more look, announced.
    h.checker.restored(record('a1'));
    h.ready({ allocId: 'plugin-2' });
    h.checker.restored(record('a1'));
    release();
    await h.settle();
    expect(h.kinds()).toEqual(['plugin-back a1', 'checked a1', 'plugin-back a1', 'checked a1']);
    expect(h.events[2]!.message).toMatch(/^plugin fuse is back \(healthy again, alloc plugin-2\); checking/);
    expect(h.attachedCalls).toBe(2);
  });

  test('a restored mount is looked at only while its plugin serves; one looked at since the plugin was back is skipped', async () => {
    h.healthy = false;
    h.add(record('a1'));
    h.checker.restored(record('a1'));
    await h.settle();
    expect(h.attachedCalls).toBe(0);
    h.healthy = true;
    h.checker.restored(record('a1'));
    await h.settle();
    expect(h.kinds()).toEqual(['checked a1']);
    h.checker.restored(record('a1'));
    await h.settle();
    expect(h.attachedCalls).toBe(2);
    expect(h.kinds()).toEqual(['checked a1']);
  });

  test('a look that fails is logged, and the next one runs', async () => {
    h.add(record('a1'));
    h.attached = () => {
      throw new Error('records unreadable');
    };
    h.ready();
    await h.settle();
    expect(h.kinds()).toEqual([]);
    expect(
      h.log.find('checking the live mounts of a plugin failed; they are checked again when it is next back', 'error').map((l) => l.fields),
    ).toEqual([{ plugin_id: PLUGIN, error: 'records unreadable' }]);
    h.attached = (pluginId) => [...h.records].filter(([, r]) => r.pluginId === pluginId);
    h.ready();
    await h.settle();
    expect(h.kinds()).toEqual(['plugin-back a1', 'checked a1']);
  });
});

describe('which records a look skips', () => {
  test('generationOf counts the times the plugin was back; a mount fresh at the current one is skipped until the next', async () => {
    expect(h.checker.generationOf(PLUGIN)).toBe(0);
    h.add(record('a1'), record('a2'));
    h.checker.fresh(keyOf('a1'), 0);
    h.checker.restored(record('a2'));
    await h.settle();
    expect(h.kinds()).toEqual(['checked a2']);
    h.ready();
    await h.settle();
    expect(h.checker.generationOf(PLUGIN)).toBe(1);
    expect(h.kinds().slice(1)).toEqual(['plugin-back a1', 'plugin-back a2', 'checked a1', 'checked a2']);
    expect(h.checker.generationOf('other')).toBe(0);
  });

  test('a newer stamp is never overwritten by an older one; forget() has the record looked at again', async () => {
    h.ready();
    await h.settle();
    h.add(record('a1'));
    h.checker.fresh(keyOf('a1'), 1);
    h.checker.fresh(keyOf('a1'), 0);
    h.checker.restored(record('a1'));
    await h.settle();
    expect(h.kinds()).toEqual([]);
    h.checker.forget(keyOf('a1'));
    h.checker.restored(record('a1'));
    await h.settle();
    expect(h.kinds()).toEqual(['checked a1']);
  });
});

describe('a replaced plugin alloc that went away', () => {
  test('has every mount looked at once, RETIRED_CHECK_GRACE_MS after the last word of it', async () => {
    h.add(record('a1'));
    h.ready();
    await h.settle();
    const before = h.events.length;
    h.retired('plugin-0');
    await h.clock.advance(RETIRED_CHECK_GRACE_MS / 2);
    h.retired('plugin-00');
    await h.clock.advance(RETIRED_CHECK_GRACE_MS / 2);
    await h.settle();
    expect(h.events.length).toBe(before);
    await h.clock.advance(RETIRED_CHECK_GRACE_MS / 2 - 1);
    await h.settle();
    expect(h.events.length).toBe(before);
    await h.clock.advance(1);
    await h.settle();
    expect(h.kinds().slice(before)).toEqual(['plugin-back a1', 'checked a1']);
    expect(h.events[before]!.message).toBe(
      `plugin fuse: alloc plugin-00, which alloc plugin-1 replaced, went away (what it served may be stale); checking volume "data" (vol1) at ${targetOf('a1')}`,
    );
    expect(h.checker.generationOf(PLUGIN)).toBe(2);
    expect(h.clock.pendingTimers).toBe(0);
  });

  test('disposed before the grace: no look, no timer left', async () => {
    h.add(record('a1'));
    h.retired();
    expect(h.clock.pendingTimers).toBe(1);
    h.checker.dispose();
    expect(h.clock.pendingTimers).toBe(0);
    await h.clock.advance(RETIRED_CHECK_GRACE_MS);
    await h.settle();
    expect(h.kinds()).toEqual([]);
    expect(h.checker.generationOf(PLUGIN)).toBe(0);
  });
});

describe('a remount that fails', () => {
  test('is tried again after a backoff that grows with each failure, and starts over once one is done', async () => {
    h.add(record('a1'));
    h.mounts.failStat(targetOf('a1'), 'ENOTCONN');
    let fail = true;
    h.remount = async (_v, keys) =>
      fail
        ? { done: new Set(), failed: new Map(keys.map((k) => [k, new Error('device busy')])) }
        : { done: new Set(keys), failed: new Map() };
    const remounts = () => h.remounts.length;
    h.ready();
    await h.settle();
    expect(remounts()).toBe(1);
    expect(h.message('remount-failed', 'a1')).toBe(
      'volume "data" (vol1) is stale and could not be remounted: device busy; trying again after a backoff and when plugin fuse is next back',
    );
    expect(h.log.find('a stale volume mount could not be remounted', 'error').map((l) => l.fields)).toEqual([
      { alloc_id: 'a1', volume: 'data', volume_id: 'vol1', plugin_id: PLUGIN, error: 'device busy' },
    ]);
    await h.clock.advance(h.timeouts.unmountBackoff(1) - 1);
    expect(remounts()).toBe(1);
    await h.clock.advance(1);
    await h.settle();
    expect(remounts()).toBe(2);
    // The second failure waits longer.
    expect(h.timeouts.unmountBackoff(2)).toBeGreaterThan(h.timeouts.unmountBackoff(1));
    await h.clock.advance(h.timeouts.unmountBackoff(2) - 1);
    expect(remounts()).toBe(2);
    fail = false;
    await h.clock.advance(1);
    await h.settle();
    expect(remounts()).toBe(3);
    expect(h.kinds().at(-1)).toBe('remounted a1');
    expect(h.clock.pendingTimers).toBe(0);
    // Failing again later: the backoff starts over.
    fail = true;
    h.ready();
    await h.settle();
    expect(remounts()).toBe(4);
    await h.clock.advance(h.timeouts.unmountBackoff(1));
    await h.settle();
    expect(remounts()).toBe(5);
  });

  test('a plugin away when the backoff ends is not looked at then', async () => {
    h.add(record('a1'));
    h.mounts.failStat(targetOf('a1'), 'ENOTCONN');
    h.remount = async (_v, keys) => ({ done: new Set(), failed: new Map(keys.map((k) => [k, new Error('device busy')])) });
    h.ready();
    await h.settle();
    h.healthy = false;
    await h.clock.advance(h.timeouts.unmountBackoff(1));
    await h.settle();
    expect(h.remounts).toHaveLength(1);
  });

  test('the plugin back cancels the retry due: it looks itself', async () => {
    h.add(record('a1'));
    h.mounts.failStat(targetOf('a1'), 'ENOTCONN');
    let fail = true;
    h.remount = async (_v, keys) =>
      fail
        ? { done: new Set(), failed: new Map(keys.map((k) => [k, new Error('device busy')])) }
        : { done: new Set(keys), failed: new Map() };
    h.ready();
    await h.settle();
    fail = false;
    h.ready();
    await h.settle();
    expect(h.kinds().at(-1)).toBe('remounted a1');
    // A record attached since, never looked at: the cancelled retry does not look at it.
    h.add(record('a2'));
    await h.clock.advance(h.timeouts.unmountBackoff(1) * 2);
    await h.settle();
    expect(h.kinds().filter((k) => k.endsWith('a2'))).toEqual([]);
  });

  test('a remount call that throws fails every mount it was asked for', async () => {
    h.add(record('a1'), record('a2'));
    h.mounts.failStat(targetOf('a1'), 'ENOTCONN');
    h.mounts.failStat(targetOf('a2'), 'ENOTCONN');
    h.remount = async () => {
      throw new Error('queue closed');
    };
    h.ready();
    await h.settle();
    expect(h.kinds().slice(2)).toEqual(['stale a1', 'stale a2', 'remount-failed a1', 'remount-failed a2']);
    expect(h.message('remount-failed', 'a2')).toMatch(/could not be remounted: queue closed;/);
    expect(h.reported).toEqual([]);
    expect(h.clock.pendingTimers).toBe(1);
  });

  test('one not allowed yet (a retryable claim error) is logged as a wait, not an error', async () => {
    h.add(record('a1'), record('a2'));
    h.mounts.failStat(targetOf('a1'), 'ENOTCONN');
    h.mounts.failStat(targetOf('a2'), 'ENOTCONN');
    h.remount = async () => ({
      done: new Set(),
      failed: new Map<string, unknown>([
        [keyOf('a1'), new ClaimError('node n1 not settled yet', true)],
        [keyOf('a2'), new ClaimError('volume vol1 is gone', false)],
      ]),
    });
    h.ready();
    await h.settle();
    const text = 'a stale volume mount could not be remounted; trying again after a backoff and when its plugin is next back';
    expect(h.log.find(text, 'info').map((l) => l.fields['alloc_id'])).toEqual(['a1']);
    expect(h.log.find(text, 'error').map((l) => l.fields['alloc_id'])).toEqual(['a2']);
    expect(h.kinds().slice(4)).toEqual(['remount-failed a1', 'remount-failed a2']);
  });

  test('one refused as busy is reported and left: no retry, and not looked at again until the plugin is back', async () => {
    h.add(record('a1'));
    h.mounts.failStat(targetOf('a1'), 'ENOTCONN');
    const busy = new RemountBusyError(targetOf('a1'), new Error('target is busy'));
    h.remount = async () => ({ done: new Set(), failed: new Map([[keyOf('a1'), busy]]) });
    h.ready();
    await h.settle();
    expect(h.kinds()).toEqual(['plugin-back a1', 'stale a1', 'remount-busy a1']);
    expect(h.message('remount-busy', 'a1')).toBe(
      `volume "data" (vol1) is stale, but its target ${targetOf('a1')} is in use (${busy.message}); left as it is, not forced: stop what holds it (or restart the alloc), it is checked again when plugin fuse is next back`,
    );
    expect(h.log.find('a broken volume mount is in use and was not remounted; it is left as it is', 'warn')[0]!.fields).toEqual({
      alloc_id: 'a1',
      volume: 'data',
      volume_id: 'vol1',
      plugin_id: PLUGIN,
      target: targetOf('a1'),
      error: busy.message,
    });
    expect(h.log.find('a stale volume mount could not be remounted')).toEqual([]);
    expect(h.clock.pendingTimers).toBe(0);
    h.checker.restored(record('a1'));
    await h.settle();
    expect(h.remounts).toHaveLength(1);
  });

  test('busy and failed together: the failed one is tried again', async () => {
    h.add(record('a1'), record('a2'));
    h.mounts.failStat(targetOf('a1'), 'ENOTCONN');
    h.mounts.failStat(targetOf('a2'), 'ENOTCONN');
    h.remount = async () => ({
      done: new Set(),
      failed: new Map<string, unknown>([
        [keyOf('a1'), new RemountBusyError(targetOf('a1'), new Error('target is busy'))],
        [keyOf('a2'), new Error('device busy')],
      ]),
    });
    h.ready();
    await h.settle();
    expect(h.kinds().slice(4)).toEqual(['remount-busy a1', 'remount-failed a2']);
    await h.clock.advance(h.timeouts.unmountBackoff(1));
    await h.settle();
    expect(h.remounts.at(-1)).toBe(`vol1 ${keyOf('a2')} restage=`);
  });
});

describe('the mount table', () => {
  test('a read that fails for a reason of its own is logged, and the mount is not taken as stale', async () => {
    h.add(record('a1'));
    h.mounts.failMountCheck(targetOf('a1'), 'EACCES');
    h.ready();
    await h.settle();
    expect(h.kinds()).toEqual(['plugin-back a1', 'checked a1']);
    const [line] = h.log.find('could not read the mount table to check a live mount; not taken as stale', 'warn');
    expect(line!.fields).toMatchObject({ alloc_id: 'a1', volume_id: 'vol1', target: targetOf('a1') });
    expect(line!.fields['error']).toMatch(/EACCES/);
  });

  test("a fault of the agent's own is read again after a delay, with a warning", async () => {
    h.add(record('a1'));
    h.mounts.failMountCheck(targetOf('a1'), 'EMFILE');
    h.ready();
    await h.settle();
    const [fault] = h.log.find('cannot read the mount table for a fault of the agent itself; checking again', 'warn');
    expect(fault!.fields).toMatchObject({ target: targetOf('a1'), attempt: 1 });
    expect(fault!.fields['delay_ms']).toBeGreaterThan(0);
    expect(fault!.fields['error']).toMatch(/EMFILE/);
    expect(h.kinds()).toEqual(['plugin-back a1']);
    h.mounts.clearMountCheck(targetOf('a1'));
    await h.clock.advance(fault!.fields['delay_ms'] as number);
    await h.settle();
    expect(h.kinds()).toEqual(['plugin-back a1', 'checked a1']);
  });

  test('disposed while it waits to read again: nothing more is logged or asked', async () => {
    h.add(record('a1'));
    h.mounts.failMountCheck(targetOf('a1'), 'EMFILE');
    h.ready();
    await h.settle();
    h.checker.dispose();
    await h.settle();
    expect(h.log.find('could not read the mount table to check a live mount')).toEqual([]);
    expect(h.kinds().filter((k) => k.startsWith('stale'))).toEqual([]);
    expect(h.conditionCalls).toEqual([]);
    expect(h.clock.pendingTimers).toBe(0);
  });
});

describe('the stat limit', () => {
  test("counts from the probe's last start: a stat the table started again is not hung at the first start's limit", async () => {
    h.add(record('a1', { onStaleMount: 'keep' }));
    const stats = controlledStats();
    h.ready();
    await h.settle();
    await h.clock.advance(MOUNT_STAT_LIMIT_MS - 1000);
    stats[0]!.start();
    await h.clock.advance(1000);
    await h.settle();
    expect(h.kinds()).toEqual(['plugin-back a1']);
    await h.clock.advance(MOUNT_STAT_LIMIT_MS - 1000);
    await h.settle();
    expect(h.kinds()).toEqual(['plugin-back a1', 'stale a1']);
    expect(h.message('stale', 'a1')).toMatch(/did not answer a stat within 5s \(the mount hangs\)/);
  });

  test('an onStarted after the answer starts no timer', async () => {
    h.add(record('a1'));
    const stats = controlledStats();
    h.ready();
    await h.settle();
    stats[0]!.answer();
    await h.settle();
    expect(h.kinds()).toEqual(['plugin-back a1', 'checked a1']);
    stats[0]!.start();
    expect(h.clock.pendingTimers).toBe(0);
  });

  test('a path that hung stays hung while later probes cannot start, even once that stat gave up unstarted', async () => {
    h.add(record('a1', { onStaleMount: 'keep' }));
    const stats = controlledStats();
    h.ready();
    await h.settle();
    await h.clock.advance(MOUNT_STAT_LIMIT_MS);
    await h.settle();
    expect(h.kinds()).toEqual(['plugin-back a1', 'stale a1']);
    stats[0]!.fail(new MountProbeNotStartedError(targetOf('a1'), 'probe slots full'));
    await h.settle();
    h.mounts.stat = async (p) => {
      throw new MountProbeNotStartedError(p, 'probe slots full');
    };
    h.ready();
    await h.settle();
    expect(h.kinds().slice(2)).toEqual(['plugin-back a1', 'stale a1']);
    expect(h.events.at(-1)!.message).toMatch(/is stale: an earlier stat of \/mnt\/target\/a1 hung and no later one has answered;/);
  });

  test('a remount done drops what an old stat of its paths still hangs on', async () => {
    h.add(record('a1'));
    const release = h.mounts.hangStat(targetOf('a1'));
    h.ready();
    await h.settle();
    await h.clock.advance(MOUNT_STAT_LIMIT_MS);
    await h.settle();
    expect(h.kinds()).toEqual(['plugin-back a1', 'stale a1', 'remounted a1']);
    // The old stat still hangs; the mount made again is stat'ed afresh and answers.
    h.mounts.clearStat(targetOf('a1'));
    const stats = h.mounts.statted.length;
    h.ready();
    await h.settle();
    expect(h.mounts.statted.slice(stats)).toEqual([targetOf('a1')]);
    expect(h.kinds().slice(3)).toEqual(['plugin-back a1', 'checked a1']);
    release();
  });
});

describe('conditions', () => {
  test(`are asked ${CONDITIONS_AT_ONCE} at a time, every mount that answered once`, async () => {
    const count = CONDITIONS_AT_ONCE + 3;
    for (let i = 1; i <= count; i++) h.add(record(`a${i}`));
    let inFlight = 0;
    let peak = 0;
    const answers: (() => void)[] = [];
    h.condition = () =>
      new Promise<VolumeCondition | undefined>((resolve) => {
        peak = Math.max(peak, ++inFlight);
        answers.push(() => {
          inFlight--;
          resolve(undefined);
        });
      });
    h.ready();
    await h.settle();
    expect(peak).toBe(CONDITIONS_AT_ONCE);
    while (answers.length) {
      answers.splice(0).forEach((a) => a());
      await h.settle();
    }
    expect(h.conditionCalls.map((c) => c.allocId)).toEqual(Array.from({ length: count }, (_, i) => `a${i + 1}`));
    expect(h.kinds().filter((k) => k.startsWith('checked'))).toHaveLength(count);
  });

  test('disposed while they are asked: no more are asked, a late failure is not logged, and nothing is remounted or retried', async () => {
    for (let i = 1; i <= CONDITIONS_AT_ONCE + 2; i++) h.add(record(`a${i}`));
    const fails: (() => void)[] = [];
    h.condition = () => new Promise<VolumeCondition | undefined>((_resolve, reject) => fails.push(() => reject(new Error('aborted'))));
    h.ready();
    await h.settle();
    expect(h.conditionCalls).toHaveLength(CONDITIONS_AT_ONCE);
    expect(h.conditionCalls.every((c) => c.options.signal === h.conditionCalls[0]!.options.signal)).toBe(true);
    h.checker.dispose();
    expect(h.conditionCalls[0]!.options.signal!.aborted).toBe(true);
    fails.forEach((f) => f());
    await h.settle();
    expect(h.conditionCalls).toHaveLength(CONDITIONS_AT_ONCE);
    expect(h.log.find('could not read the volume condition')).toEqual([]);
    expect(h.remounts).toEqual([]);
    expect(h.clock.pendingTimers).toBe(0);
  });
});

describe('once disposed', () => {
  test('a stale mount found as it is disposed is not remounted, and a plugin back asks nothing', async () => {
    h.add(record('a1'));
    const stats = controlledStats();
    h.ready();
    await h.settle();
    h.checker.dispose();
    stats[0]!.fail(Object.assign(new Error('ENOTCONN: stat failed'), { code: 'ENOTCONN' }));
    await h.settle();
    expect(h.remounts).toEqual([]);
    const calls = h.attachedCalls;
    h.ready();
    h.checker.restored(record('a1'));
    await h.settle();
    expect(h.attachedCalls).toBe(calls);
    expect(h.clock.pendingTimers).toBe(0);
  });

  test('a remount that fails as it is disposed schedules no retry', async () => {
    h.add(record('a1'));
    h.mounts.failStat(targetOf('a1'), 'ENOTCONN');
    h.remount = async (_v, keys) => {
      h.checker.dispose();
      return { done: new Set(), failed: new Map(keys.map((k) => [k, new Error('aborted')])) };
    };
    h.ready();
    await h.settle();
    expect(h.remounts).toHaveLength(1);
    expect(h.clock.pendingTimers).toBe(0);
  });
});
