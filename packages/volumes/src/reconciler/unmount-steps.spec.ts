// The unmount path's functions (unmount-steps.ts) against a host of their
// own: records in a map, every write the host is asked for logged with the
// steps the node plugin had been asked for by then, so each test reads as the
// order of calls and writes — unpublish, unstage only for the last user of a
// staging path, release, forget — with what is written for each, what a
// failed attempt counts and logs and when it is retried, a store that refuses
// writes, and the wait for a node plugin that is away.
import { DefaultTimeoutPolicy, MemoryLogger } from '@csiplug/core';
import { FakeClock, flushMicrotasks } from '@csiplug/core/testing';
import { KeyedMutex } from '@csiplug/csimanager';
import { FakeCSIManager, FakeMountTable } from '@csiplug/csimanager/testing';
import { PLUGIN, RO, RW, TIMEOUTS, stagingOf, targetOf, track } from '../../test/support/reconciler-node';
import { FakeClaimer } from '../testing/fake-claimer';
import { mountKey, type VolumeMountRecord } from './mount-record';
import { awaitPluginForUnmount, runAttemptDown, unmountVolumes, volumesToUnmount, type UnmountHost } from './unmount-steps';

/** A record of alloc `allocId` wanting volume vol1 (as `name`), with everything done unless `over` says otherwise. */
function rec(allocId: string, over: Partial<VolumeMountRecord> = {}): VolumeMountRecord {
  return {
    allocId,
    name: 'data',
    volumeId: 'vol1',
    externalId: 'ext-vol1',
    pluginId: PLUGIN,
    usage: RW,
    desired: 'unmounted',
    claimed: true,
    publishContext: { attached: 'yes' },
    staged: true,
    published: true,
    targetPath: targetOf(allocId),
    stagingPath: stagingOf(),
    attempts: 0,
    since: 0,
    ...over,
  };
}

const key = (allocId: string, name = 'data') => mountKey(allocId, name);

class Host implements UnmountHost {
  readonly clock = new FakeClock(0);
  readonly timeouts = new DefaultTimeoutPolicy(TIMEOUTS);
  readonly mounts = new FakeMountTable();
  readonly csi = new FakeCSIManager({ clock: this.clock, timeouts: this.timeouts, mounts: this.mounts });
  readonly claimer = new FakeClaimer();
  readonly log = new MemoryLogger();
  readonly records = new Map<string, VolumeMountRecord>();
  readonly verified = new Set<string>();
  readonly volumes = new Map([[key('a1'), { id: 'vol1', externalId: 'ext-vol1', pluginId: PLUGIN, secrets: { token: 's' } }]]);
  readonly queue = new KeyedMutex();
  readonly stopper = new AbortController();
  readonly stopping = this.stopper.signal;
  /** Calls to the node plugin, the claimer's releases and the host's writes, in order. */
  readonly events: string[] = [];
  readonly retries: [string, number][] = [];
  readonly away = new Set<string>();
  /** Writes refused before one goes through. */
  failWrites = 0;

  constructor(...records: VolumeMountRecord[]) {
    for (const r of records) this.records.set(key(r.allocId, r.name), r);
    this.claimer.add('vol1');
    this.csi.bringUp(PLUGIN);
    const vm = this.csi.managers.get(PLUGIN)!;
    for (const step of ['unpublishVolume', 'unstageVolume'] as const) {
      const call = vm[step].bind(vm) as (...args: unknown[]) => Promise<void>;
      vm[step] = ((...args: unknown[]) => {
        this.events.push(`${step} ${(args[0] as { id: string }).id}${step === 'unpublishVolume' ? ` ${String(args[1])}` : ''}`);
        return call(...args);
      }) as never;
    }
    const release = this.claimer.release.bind(this.claimer);
    this.claimer.release = (volumeId, allocId, options) => {
      this.events.push(`release ${volumeId} ${allocId}`);
      return release(volumeId, allocId, options);
    };
  }

  get vm() {
    return this.csi.managers.get(PLUGIN)!;
  }

  stopped(): boolean {
    return this.stopping.aborted;
  }

  update(k: string, change: Partial<VolumeMountRecord>): VolumeMountRecord {
    this.events.push(`write ${k} ${JSON.stringify(change)}`);
    if (this.failWrites > 0) {
      this.failWrites--;
      throw new Error('store refused the write');
    }
    const next = { ...this.records.get(k)!, ...change };
    for (const f of Object.keys(change) as (keyof VolumeMountRecord)[]) if (change[f] === undefined) delete next[f];
    this.records.set(k, next);
    return next;
  }

  forget(k: string): void {
    this.events.push(`forget ${k}`);
    this.records.delete(k);
  }

  scheduleRetry(volumeId: string, delayMs: number): void {
    this.retries.push([volumeId, delayMs]);
  }

  attemptDown(k: string) {
    return runAttemptDown(this, k);
  }

  pluginAway(pluginId: string): boolean {
    return this.away.has(pluginId);
  }
}

describe('runAttemptDown', () => {
  test('unpublishes, unstages, releases and forgets, writing each step as soon as its call returns', async () => {
    const host = new Host(rec('a1'));
    host.mounts.mark(targetOf('a1'));
    host.mounts.mark(stagingOf());
    expect(await runAttemptDown(host, key('a1'))).toEqual({ name: 'data', volumeId: 'vol1', pluginId: PLUGIN });
    expect(host.events).toEqual([
      'unpublishVolume vol1 a1',
      `write a1/data {"published":false}`,
      'unstageVolume vol1',
      `write a1/data {"staged":false}`,
      'release vol1 a1',
      `write a1/data {"claimed":false}`,
      'forget a1/data',
    ]);
    expect(host.records.size).toBe(0);
    expect(host.vm.changes).toEqual([
      `unpublish vol1 a1 ${'rw-file-system-single-node-writer'}`,
      'unstage vol1 rw-file-system-single-node-writer',
    ]);
    // The volume as the catalog gave it (its secrets) with the record's ids.
    expect(host.vm.requests.map((r) => r.volume)).toEqual([
      { id: 'vol1', externalId: 'ext-vol1', pluginId: PLUGIN, secrets: { token: 's' } },
      { id: 'vol1', externalId: 'ext-vol1', pluginId: PLUGIN, secrets: { token: 's' } },
    ]);
    expect(host.vm.requests.map((r) => r.usage)).toEqual([RW, RW]);
    expect(host.retries).toEqual([]);
    expect(host.log.records).toEqual([
      {
        level: 'info',
        msg: 'volume unmounted and released',
        fields: { alloc_id: 'a1', volume: 'data', volume_id: 'vol1', attempts: 1 },
      },
    ]);
  });

  test('clears the target path, staging path and publish context with the flags they go with', async () => {
    const host = new Host(rec('a1'));
    const seen: VolumeMountRecord[] = [];
    const update = host.update.bind(host);
    host.update = (k, change) => {
      const next = update(k, change);
      seen.push({ ...next });
      return next;
    };
    await runAttemptDown(host, key('a1'));
    expect(seen[0]).not.toHaveProperty('targetPath');
    expect(seen[0]).toMatchObject({ published: false, staged: true, stagingPath: stagingOf(), claimed: true });
    expect(seen[1]).not.toHaveProperty('stagingPath');
    expect(seen[1]).toMatchObject({ staged: false, claimed: true, publishContext: { attached: 'yes' } });
    expect(seen[2]).not.toHaveProperty('publishContext');
    expect(seen[2]).toMatchObject({ claimed: false });
  });

  test('only the last user of a staging path unstages; another user just stops counting', async () => {
    const host = new Host(rec('a1'), rec('a2', { desired: 'mounted' }), rec('a3', { staged: false, published: false }));
    await runAttemptDown(host, key('a1'));
    expect(host.events.filter((e) => !e.startsWith('write'))).toEqual(['unpublishVolume vol1 a1', 'release vol1 a1', 'forget a1/data']);
    expect(host.events).toContain('write a1/data {"staged":false}');
    // Now a2 is the last user on it.
    host.records.set(key('a2'), rec('a2'));
    await runAttemptDown(host, key('a2'));
    expect(host.events.filter((e) => e.startsWith('unstage'))).toEqual(['unstageVolume vol1']);
  });

  test('users of other staging paths (another usage, another volume, not staged) do not keep the staging mount', async () => {
    const host = new Host(
      rec('a1'),
      rec('a2', { usage: RO }),
      rec('a3', { volumeId: 'vol2' }),
      rec('a4', { staged: false }),
      rec('a5', { pluginId: 'other' }),
    );
    await runAttemptDown(host, key('a1'));
    expect(host.events.filter((e) => e.startsWith('unstage'))).toEqual(['unstageVolume vol1']);
  });

  test('skips the steps the record has not done', async () => {
    const host = new Host(rec('a1', { published: false, staged: false }));
    await runAttemptDown(host, key('a1'));
    expect(host.events).toEqual(['release vol1 a1', 'write a1/data {"claimed":false}', 'forget a1/data']);

    const nothing = new Host(rec('a1', { published: false, staged: false, claimed: false }));
    await runAttemptDown(nothing, key('a1'));
    expect(nothing.events).toEqual(['forget a1/data']);
  });

  test('a record wanted mounted is left to its mount: no step, no write', async () => {
    const host = new Host(rec('a1', { desired: 'mounted' }));
    expect(await runAttemptDown(host, key('a1'))).toEqual({ name: 'data', volumeId: 'vol1', pluginId: PLUGIN });
    expect(host.events).toEqual([]);
    expect(host.records.get(key('a1'))).toEqual(rec('a1', { desired: 'mounted' }));
    expect(await runAttemptDown(host, key('nope'))).toBeUndefined();
  });

  test.each([
    ['unpublish', ['unpublishVolume vol1 a1', 'write a1/data {"published":false}']],
    ['unstage', ['unpublishVolume vol1 a1', 'write a1/data {"published":false}', 'unstageVolume vol1', 'write a1/data {"staged":false}']],
  ] as const)('a record wanted mounted again after its %s is left to its mount there', async (step, events) => {
    const host = new Host(rec('a1'));
    const update = host.update.bind(host);
    host.update = (k, change) => {
      const next = update(k, change);
      if ((step === 'unpublish' && change.published === false) || (step === 'unstage' && change.staged === false))
        host.records.set(k, { ...next, desired: 'mounted' });
      return next;
    };
    await runAttemptDown(host, key('a1'));
    expect(host.events).toEqual(events);
    expect(host.records.get(key('a1'))?.desired).toBe('mounted');
  });

  test('a record wanted mounted again after its release is kept', async () => {
    const host = new Host(rec('a1', { published: false, staged: false }));
    const update = host.update.bind(host);
    host.update = (k, change) => {
      const next = update(k, change);
      host.records.set(k, { ...next, desired: 'mounted' });
      return next;
    };
    await runAttemptDown(host, key('a1'));
    expect(host.events).toEqual(['release vol1 a1', 'write a1/data {"claimed":false}']);
    expect(host.records.has(key('a1'))).toBe(true);
  });

  test('a failed step stops the attempt, counts it, keeps the error and schedules a retry at the backoff of the count', async () => {
    const host = new Host(rec('a1', { attempts: 2, since: 0 }));
    host.vm.failNext('unstage');
    const outcome = await runAttemptDown(host, key('a1'));
    const message = 'unmount of volume "vol1" on plugin "hostpath" failed at NodeUnstageVolume: injected failure';
    expect(outcome).toMatchObject({ name: 'data', volumeId: 'vol1', pluginId: PLUGIN });
    expect((outcome!.error as Error).message).toBe(message);
    expect(host.events).toEqual([
      'unpublishVolume vol1 a1',
      'write a1/data {"published":false}',
      'unstageVolume vol1',
      `write a1/data {"attempts":3,"lastError":${JSON.stringify(message)}}`,
    ]);
    expect(host.records.get(key('a1'))).toMatchObject({
      desired: 'unmounted',
      staged: true,
      claimed: true,
      attempts: 3,
      lastError: message,
    });
    // The third failure waits 4s (1s doubling).
    expect(host.retries).toEqual([['vol1', 4_000]]);
    expect(host.log.records).toEqual([
      {
        level: 'warn',
        msg: 'unmount failed; retrying in the background',
        fields: { alloc_id: 'a1', volume_id: 'vol1', plugin_id: PLUGIN, attempts: 3, error: message },
      },
    ]);
  });

  test('failing past the postrun limit since it was wanted unmounted is logged as an error; up to it, a warning', async () => {
    const host = new Host(rec('a1', { since: 1_000 }));
    host.claimer.failReleases = 3;
    await host.clock.advance(31_000);
    await runAttemptDown(host, key('a1'));
    expect(host.log.records.map((r) => r.level)).toEqual(['warn']);
    await host.clock.advance(1);
    await runAttemptDown(host, key('a1'));
    expect(host.log.records.map((r) => [r.level, r.msg])).toEqual([
      ['warn', 'unmount failed; retrying in the background'],
      ['error', 'unmount still failing after 30s; still retrying'],
    ]);
    expect(host.log.records[1]!.fields).toEqual({
      alloc_id: 'a1',
      volume_id: 'vol1',
      plugin_id: PLUGIN,
      attempts: 2,
      error: 'controller plugin is not running, so volume "vol1" stays published for alloc a1',
    });
    expect(host.retries).toEqual([
      ['vol1', 1_000],
      ['vol1', 2_000],
    ]);
  });

  test('a store that refuses to count the failed attempt: counted in memory, logged, retried all the same', async () => {
    const host = new Host(rec('a1', { published: false, staged: false, attempts: 1 }));
    host.claimer.failReleases = 1;
    host.failWrites = 1;
    const outcome = await runAttemptDown(host, key('a1'));
    expect((outcome!.error as Error).message).toMatch(/^controller plugin is not running/);
    expect(host.records.get(key('a1'))).toMatchObject({
      attempts: 2,
      lastError: 'controller plugin is not running, so volume "vol1" stays published for alloc a1',
      claimed: true,
    });
    expect(host.log.records[0]).toEqual({
      level: 'error',
      msg: 'could not record a failed unmount attempt in the state; retrying anyway',
      fields: { alloc_id: 'a1', volume_id: 'vol1', error: 'store refused the write' },
    });
    expect(host.log.records[1]).toMatchObject({ level: 'warn', fields: { attempts: 2 } });
    expect(host.retries).toEqual([['vol1', 2_000]]);
  });

  test.each([
    ['wanted mounted again', true],
    ['gone', false],
  ])('a failure once the record is %s is only reported: no count, no retry', async (_, mountedAgain) => {
    const host = new Host(rec('a1'));
    const hang = host.vm.hangNext('unpublish');
    const attempt = track(runAttemptDown(host, key('a1')));
    await hang.reached;
    if (mountedAgain) host.records.set(key('a1'), rec('a1', { desired: 'mounted' }));
    else host.records.delete(key('a1'));
    // The plugin goes down under the call: it fails.
    host.csi.crash(PLUGIN);
    hang.release();
    await flushMicrotasks(50);
    expect((attempt.value?.error as Error).name).toBe('PluginInstanceNotFoundError');
    expect(host.records.get(key('a1'))).toEqual(mountedAgain ? rec('a1', { desired: 'mounted' }) : undefined);
    expect(host.events).toEqual(['unpublishVolume vol1 a1']);
    expect(host.retries).toEqual([]);
    expect(host.log.records).toEqual([]);
  });

  test('runs under the volume queue', async () => {
    const host = new Host(rec('a1'));
    let free!: () => void;
    const busy = host.queue.run('vol1', () => new Promise<void>((r) => (free = r)));
    const attempt = track(runAttemptDown(host, key('a1')));
    await flushMicrotasks(50);
    expect(host.events).toEqual([]);
    free();
    await busy;
    await attempt.promise;
    expect(host.events[0]).toBe('unpublishVolume vol1 a1');
  });
});

describe('unmountVolumes', () => {
  test("writes the alloc's volumes (those named, or all) wanted unmounted, then makes one attempt at each", async () => {
    const host = new Host(
      rec('a1', { desired: 'mounted', attempts: 4, lastError: 'old', since: 5 }),
      rec('a1', { name: 'logs', volumeId: 'vol2', desired: 'mounted', staged: false, published: false, claimed: false }),
      rec('a2', { desired: 'mounted' }),
    );
    host.verified.add(key('a1')).add(key('a1', 'logs')).add(key('a2'));
    await host.clock.advance(7_000);
    const outcomes = await unmountVolumes(host, 'a1', ['data'], {});
    expect(outcomes).toEqual([{ name: 'data', volumeId: 'vol1', pluginId: PLUGIN }]);
    // No plugin wait to speak of: none is said.
    expect(outcomes[0]).not.toHaveProperty('pluginWait');
    expect(host.events[0]).toBe('write a1/data {"desired":"unmounted","attempts":0,"since":7000}');
    expect(host.events[1]).toBe('unpublishVolume vol1 a1');
    expect(host.records.has(key('a1'))).toBe(false);
    expect(host.records.get(key('a1', 'logs'))?.desired).toBe('mounted');
    expect(host.records.get(key('a2'))?.desired).toBe('mounted');
    expect([...host.verified].sort()).toEqual([key('a1', 'logs'), key('a2')]);

    const all = await unmountVolumes(host, 'a1', undefined, {});
    expect(all).toEqual([{ name: 'logs', volumeId: 'vol2', pluginId: PLUGIN }]);
    expect(host.records.has(key('a1', 'logs'))).toBe(false);
    expect([...host.verified]).toEqual([key('a2')]);
    expect(host.records.get(key('a2'))?.desired).toBe('mounted');
    expect(await unmountVolumes(host, 'a9', undefined, {})).toEqual([]);
  });

  test('a record already wanted unmounted is not written again before its attempt', async () => {
    const host = new Host(rec('a1', { attempts: 3, since: 5 }));
    host.claimer.failReleases = 1;
    const [outcome] = await unmountVolumes(host, 'a1', undefined, {});
    expect(outcome!.error).toBeInstanceOf(Error);
    expect(host.events[0]).toBe('unpublishVolume vol1 a1');
    expect(host.records.get(key('a1'))).toMatchObject({ attempts: 4, since: 5 });
  });

  test('a store that refuses the write: wanted unmounted in memory, logged, retried later, the error reported, no step made', async () => {
    const host = new Host(rec('a1', { desired: 'mounted', attempts: 2, since: 5 }));
    host.failWrites = 1;
    await host.clock.advance(9_000);
    const outcomes = await unmountVolumes(host, 'a1', undefined, {});
    expect(outcomes).toEqual([{ name: 'data', volumeId: 'vol1', pluginId: PLUGIN, error: new Error('store refused the write') }]);
    expect(host.records.get(key('a1'))).toEqual(rec('a1', { desired: 'unmounted', attempts: 0, since: 9_000 }));
    expect(host.events).toEqual(['write a1/data {"desired":"unmounted","attempts":0,"since":9000}']);
    expect(host.retries).toEqual([['vol1', 1_000]]);
    expect(host.log.records).toEqual([
      {
        level: 'error',
        msg: 'could not record that a volume is to be unmounted; retrying in the background',
        fields: { alloc_id: 'a1', volume_id: 'vol1', error: 'store refused the write' },
      },
    ]);
  });

  test('waits for a node plugin that is away, and says how long it waited', async () => {
    const host = new Host(rec('a1', { desired: 'mounted' }));
    host.away.add(PLUGIN);
    host.csi.crash(PLUGIN);
    const unmounting = track(unmountVolumes(host, 'a1', undefined, {}));
    await host.clock.advance(12_000);
    expect(unmounting.settled).toBe(false);
    expect(host.events).toEqual([expect.stringMatching(/^write a1\/data /)]);
    host.csi.bringUp(PLUGIN);
    await flushMicrotasks(100);
    expect(unmounting.value).toEqual([
      { name: 'data', volumeId: 'vol1', pluginId: PLUGIN, pluginWait: { waitedMs: 12_000, healthy: true } },
    ]);
    expect(host.records.size).toBe(0);
  });

  test('an unmount whose plugin wait is called off stays pending, retried later, with the abort as its error', async () => {
    const host = new Host(rec('a1', { desired: 'mounted' }));
    host.away.add(PLUGIN);
    host.csi.crash(PLUGIN);
    const abort = new AbortController();
    const unmounting = track(unmountVolumes(host, 'a1', undefined, { signal: abort.signal }));
    await flushMicrotasks(20);
    abort.abort(new Error('agent going away'));
    await flushMicrotasks(50);
    expect(unmounting.value).toEqual([{ name: 'data', volumeId: 'vol1', pluginId: PLUGIN, error: new Error('agent going away') }]);
    expect(host.records.get(key('a1'))).toMatchObject({ desired: 'unmounted', published: true });
    expect(host.retries).toEqual([['vol1', 1_000]]);
  });

  test('a record finished meanwhile (no record left after the wait) answers as done', async () => {
    const host = new Host(rec('a1'));
    host.away.add(PLUGIN);
    host.csi.crash(PLUGIN);
    const unmounting = track(unmountVolumes(host, 'a1', undefined, {}));
    await flushMicrotasks(20);
    host.records.delete(key('a1'));
    host.csi.bringUp(PLUGIN);
    await flushMicrotasks(100);
    expect(unmounting.value).toEqual([{ name: 'data', volumeId: 'vol1', pluginId: PLUGIN, pluginWait: { waitedMs: 0, healthy: true } }]);
    expect(host.events).toEqual([]);
  });
});

describe('awaitPluginForUnmount', () => {
  test('nothing to wait for: no record, nothing mounted on the node, or a plugin that is not away', async () => {
    const host = new Host(rec('a1', { published: false, staged: false }), rec('a2'));
    host.away.add(PLUGIN);
    host.csi.crash(PLUGIN);
    expect(await awaitPluginForUnmount(host, key('a1'), undefined)).toBeUndefined();
    expect(await awaitPluginForUnmount(host, key('a9'), undefined)).toBeUndefined();
    host.away.clear();
    expect(await awaitPluginForUnmount(host, key('a2'), undefined)).toBeUndefined();
    expect(host.csi.waits).toEqual([]);
    expect(host.log.records).toEqual([]);
  });

  test.each([
    ['published only', { staged: false }],
    ['staged only', { published: false }],
  ])('a record %s waits for its plugin', async (_, over) => {
    const host = new Host(rec('a1', over));
    host.away.add(PLUGIN);
    host.csi.crash(PLUGIN);
    const wait = track(awaitPluginForUnmount(host, key('a1'), undefined));
    await flushMicrotasks(20);
    expect(wait.settled).toBe(false);
    expect(host.csi.waits).toEqual([{ type: 'csi-node', name: PLUGIN, phase: 'postrun' }]);
    expect(host.log.records).toEqual([
      {
        level: 'info',
        msg: 'the node plugin is not healthy; the unmount waits for it (postrun limit)',
        fields: { alloc_id: 'a1', volume_id: 'vol1', plugin_id: PLUGIN, limit_ms: 30_000 },
      },
    ]);
    host.csi.bringUp(PLUGIN);
    await flushMicrotasks(20);
    expect(wait.value).toEqual({ waitedMs: 0, healthy: true });
  });

  test('a plugin nothing runs here any more (pluginExpected says no) is not waited for; one that may come back is', async () => {
    const host = new Host(rec('a1'));
    host.away.add(PLUGIN);
    host.csi.crash(PLUGIN);
    expect(await awaitPluginForUnmount(host, key('a1'), undefined, () => false)).toEqual({ waitedMs: 0, healthy: false, gone: true });
    expect(host.csi.waits).toEqual([]);
    const wait = track(awaitPluginForUnmount(host, key('a1'), undefined, (id) => id === PLUGIN));
    await flushMicrotasks(20);
    expect(wait.settled).toBe(false);
    expect(host.csi.waits).toEqual([{ type: 'csi-node', name: PLUGIN, phase: 'postrun' }]);
    host.csi.bringUp(PLUGIN);
    await flushMicrotasks(20);
    expect(wait.value).toEqual({ waitedMs: 0, healthy: true });
  });

  test('past the postrun limit: unmounts anyway, saying so', async () => {
    const host = new Host(rec('a1'));
    host.away.add(PLUGIN);
    host.csi.crash(PLUGIN);
    const wait = track(awaitPluginForUnmount(host, key('a1'), undefined));
    await host.clock.advance(29_999);
    expect(wait.settled).toBe(false);
    await host.clock.advance(1);
    expect(wait.value).toEqual({ waitedMs: 30_000, healthy: false });
    expect(host.log.records[1]).toMatchObject({
      level: 'warn',
      msg: 'the node plugin was not healthy within 30s (the postrun limit); unmounting anyway, retried in the background if it fails',
      fields: { alloc_id: 'a1', volume_id: 'vol1', plugin_id: PLUGIN },
    });
    expect(host.log.records[1]!.fields.error).toMatch(/timed out after 30s/);
  });

  test("ended by the caller's signal, or by the reconciler stopping: the wait rejects", async () => {
    const host = new Host(rec('a1'));
    host.away.add(PLUGIN);
    host.csi.crash(PLUGIN);
    const abort = new AbortController();
    const bySignal = track(awaitPluginForUnmount(host, key('a1'), abort.signal));
    const byStop = track(awaitPluginForUnmount(host, key('a1'), undefined));
    abort.abort(new Error('called off'));
    await flushMicrotasks(20);
    expect(bySignal.error).toEqual(new Error('called off'));
    expect(byStop.settled).toBe(false);
    host.stopper.abort(new Error('disposed'));
    await flushMicrotasks(20);
    expect(byStop.error).toEqual(new Error('disposed'));
    // A caller's signal still open does not keep the wait past the reconciler's stop.
    const other = new Host(rec('a1'));
    other.away.add(PLUGIN);
    other.csi.crash(PLUGIN);
    const open = track(awaitPluginForUnmount(other, key('a1'), new AbortController().signal));
    other.stopper.abort(new Error('disposed'));
    await flushMicrotasks(20);
    expect(open.error).toEqual(new Error('disposed'));
    expect(other.log.find('unmounting anyway')).toEqual([]);
  });

  test('a CSI manager shutting down rejects the wait', async () => {
    const host = new Host(rec('a1'));
    host.away.add(PLUGIN);
    host.csi.crash(PLUGIN);
    const wait = track(awaitPluginForUnmount(host, key('a1'), undefined));
    await flushMicrotasks(20);
    await host.csi.dispose();
    await flushMicrotasks(20);
    expect((wait.error as Error).name).toBe('ShutdownError');
    expect(host.log.find('unmounting anyway')).toEqual([]);
  });
});

describe('volumesToUnmount', () => {
  test('the volumes of records wanted unmounted, each once, of one plugin when asked', () => {
    const records = new Map(
      [rec('a1'), rec('a2'), rec('a3', { volumeId: 'vol2', pluginId: 'other' }), rec('a4', { volumeId: 'vol3', desired: 'mounted' })].map(
        (r) => [key(r.allocId), r],
      ),
    );
    expect(volumesToUnmount(records)).toEqual(['vol1', 'vol2']);
    expect(volumesToUnmount(records, PLUGIN)).toEqual(['vol1']);
    expect(volumesToUnmount(records, 'other')).toEqual(['vol2']);
    expect(volumesToUnmount(records, 'none')).toEqual([]);
  });
});
