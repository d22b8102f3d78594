// The check of a mount record found after an agent restart (restored-mounts.ts),
// on its own: which records are looked up in the mount table at all, what a
// live, gone or unreadable target gives, what is logged each time, and that
// a fault of the agent itself is read again rather than taken for "gone".
// The host is built here from the package's fakes (FakeMountTable, FakeClock,
// MemoryLogger); the reconciler drives the same functions in its own specs.
import { AbortError, MemoryLogger } from '@csiplug/core';
import { FakeClock, flushMicrotasks } from '@csiplug/core/testing';
import { FakeMountTable } from '@csiplug/csimanager/testing';
import type { VolumeMountRecord } from './mount-record';
import { keepRemounting, stillMounted, type RestoreHost } from './restored-mounts';

const TARGET = '/var/lib/csiplug/csi/node/hostpath/per-alloc/a1/vol1/rw-file-system-single-node-writer';
const STAGING = '/var/lib/csiplug/csi/node/hostpath/staging/vol1/rw-file-system-single-node-writer';
const KEY = 'a1/data';

function record(over: Partial<VolumeMountRecord> = {}): VolumeMountRecord {
  return {
    allocId: 'a1',
    name: 'data',
    volumeId: 'vol1',
    externalId: 'ext-vol1',
    pluginId: 'hostpath',
    usage: { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' },
    desired: 'mounted',
    claimed: true,
    staged: true,
    published: true,
    targetPath: TARGET,
    stagingPath: STAGING,
    attempts: 0,
    since: 0,
    ...over,
  };
}

interface TestHost extends RestoreHost {
  readonly mountTable: FakeMountTable;
  readonly clock: FakeClock;
  readonly log: MemoryLogger;
  readonly downs: Map<string, unknown>;
  /** The records the checker was told of. */
  readonly restored: VolumeMountRecord[];
  rec: VolumeMountRecord;
  away: boolean;
  halted: boolean;
}

function host(over: Partial<VolumeMountRecord> = {}): TestHost {
  const h: TestHost = {
    verified: new Set<string>(),
    downs: new Map<string, unknown>(),
    mountTable: new FakeMountTable(),
    clock: new FakeClock(),
    log: new MemoryLogger(),
    restored: [],
    checker: { restored: (r) => h.restored.push(r) },
    rec: record(over),
    away: false,
    halted: false,
    stopped: () => h.halted,
    pluginAway: () => h.away,
    wanted: (key) => {
      if (key !== KEY) throw new Error(`test bug: asked for ${key}`);
      if (h.rec.desired !== 'mounted') throw new AbortError('unmounted meanwhile');
      return h.rec;
    },
  };
  return h;
}

describe('stillMounted', () => {
  test.each([
    ['not published', { published: false }],
    ['without a target path', { targetPath: undefined }],
  ])('a record %s needs its steps: undefined, and the table is not read', async (_what, over) => {
    const h = host(over);
    h.mountTable.mark(TARGET);
    expect(await stillMounted(h, KEY, undefined)).toBeUndefined();
    expect(h.mountTable.reads).toBe(0);
    expect(h.verified.size).toBe(0);
  });

  test('an unmount attempt under way: undefined (the steps queue behind it), even for a verified record', async () => {
    const h = host();
    h.mountTable.mark(TARGET);
    h.verified.add(KEY);
    h.downs.set(KEY, Promise.resolve());
    expect(await stillMounted(h, KEY, undefined)).toBeUndefined();
    expect(h.mountTable.reads).toBe(0);
  });

  test('a record already verified in this run is mounted as it is, without reading the table or telling the checker', async () => {
    const h = host();
    h.verified.add(KEY);
    expect(await stillMounted(h, KEY, undefined)).toEqual({
      name: 'data',
      volumeId: 'vol1',
      pluginId: 'hostpath',
      targetPath: TARGET,
      stagingPath: STAGING,
      readOnly: false,
      restored: false,
      pluginAway: false,
    });
    expect(h.mountTable.reads).toBe(0);
    expect(h.restored).toEqual([]);
  });

  test.each([false, true])(
    'a live target (plugin away: %s) is verified, told to the checker, logged, and answered restored',
    async (away) => {
      const h = host();
      h.away = away;
      h.mountTable.mark(TARGET);
      const info = await stillMounted(h, KEY, undefined);
      expect(info).toMatchObject({ targetPath: TARGET, restored: true, pluginAway: away });
      expect([...h.verified]).toEqual([KEY]);
      expect(h.restored).toEqual([h.rec]);
      expect(h.log.find('volume still mounted after restore', 'info').map((l) => l.fields)).toEqual([
        { alloc_id: 'a1', volume: 'data', volume_id: 'vol1', target: TARGET, plugin_away: away },
      ]);
    },
  );

  test("a target that is gone: undefined, nothing verified or told, and the warning says what happens next (by default, 'mounting again')", async () => {
    const h = host();
    expect(await stillMounted(h, KEY, undefined)).toBeUndefined();
    expect(await stillMounted(h, KEY, undefined, 'waiting for its plugin')).toBeUndefined();
    expect(h.verified.size).toBe(0);
    expect(h.restored).toEqual([]);
    expect(h.log.records.filter((l) => l.level === 'warn').map((l) => [l.msg, l.fields])).toEqual([
      ['volume mount gone after restore; mounting again', { alloc_id: 'a1', volume: 'data', volume_id: 'vol1', plugin_id: 'hostpath' }],
      [
        'volume mount gone after restore; waiting for its plugin',
        { alloc_id: 'a1', volume: 'data', volume_id: 'vol1', plugin_id: 'hostpath' },
      ],
    ]);
  });

  test('a target whose check errors (ENOTCONN) is kept as mounted, maybe stale, with a warning naming it', async () => {
    const h = host();
    h.mountTable.failMountCheck(TARGET, 'ENOTCONN');
    expect(await stillMounted(h, KEY, undefined)).toMatchObject({ restored: true, targetPath: TARGET });
    expect([...h.verified]).toEqual([KEY]);
    const said = h.log.find('could not tell whether a restored volume mount is still in place', 'warn');
    expect(said.map((l) => l.fields)).toEqual([
      { alloc_id: 'a1', volume: 'data', volume_id: 'vol1', target: TARGET, error: expect.stringContaining('ENOTCONN') },
    ]);
  });

  test('a check that errors while the reconciler is stopped, or the mount is aborted, fails with its error', async () => {
    const h = host();
    h.mountTable.failMountCheck(TARGET, 'ENOTCONN');
    h.halted = true;
    await expect(stillMounted(h, KEY, undefined)).rejects.toThrow(/ENOTCONN/);
    h.halted = false;
    const ac = new AbortController();
    ac.abort(new AbortError('stop'));
    await expect(stillMounted(h, KEY, ac.signal)).rejects.toThrow(/ENOTCONN/);
    expect(h.verified.size).toBe(0);
    expect(h.log.find('could not tell whether')).toEqual([]);
  });

  test('a fault of the agent itself (EMFILE) is read again after a backoff, each time logged, never taken for gone', async () => {
    const h = host();
    h.mountTable.mark(TARGET);
    h.mountTable.failMountCheck(TARGET, 'EMFILE');
    let settled = false;
    const checking = stillMounted(h, KEY, undefined).finally(() => (settled = true));
    await flushMicrotasks();
    expect(h.log.find('cannot read the mount table for a fault of the agent itself; checking again', 'warn').map((l) => l.fields)).toEqual([
      { alloc_id: 'a1', volume_id: 'vol1', target: TARGET, attempt: 1, delay_ms: 250, error: expect.stringContaining('EMFILE') },
    ]);
    await h.clock.advance(250);
    await flushMicrotasks();
    expect(settled).toBe(false);
    expect(h.log.find('cannot read the mount table', 'warn').map((l) => [l.fields.attempt, l.fields.delay_ms])).toEqual([
      [1, 250],
      [2, 500],
    ]);
    h.mountTable.clearMountCheck(TARGET);
    await h.clock.advance(500);
    expect(await checking).toMatchObject({ restored: true });
    expect(h.mountTable.reads).toBe(3);
  });

  test('the record answered is the one wanted after the read (changed meanwhile), and unwanted meanwhile rejects', async () => {
    const h = host();
    h.mountTable.mark(TARGET);
    const release = h.mountTable.hangMountCheck(TARGET);
    const checking = stillMounted(h, KEY, undefined);
    await flushMicrotasks();
    h.rec = { ...h.rec, stagingPath: undefined };
    release();
    const info = await checking;
    expect(info).not.toHaveProperty('stagingPath');
    expect(h.restored).toEqual([h.rec]);

    const h2 = host();
    h2.mountTable.mark(TARGET);
    const release2 = h2.mountTable.hangMountCheck(TARGET);
    const checking2 = stillMounted(h2, KEY, undefined);
    await flushMicrotasks();
    h2.rec = { ...h2.rec, desired: 'unmounted' };
    release2();
    await expect(checking2).rejects.toThrow('unmounted meanwhile');
    expect(h2.restored).toEqual([]);
  });
});

describe('keepRemounting', () => {
  test.each([false, true])(
    'a remount left half done is verified, told to the checker and answered restored (plugin away: %s), with a warning',
    (away) => {
      const h = host({ remounting: 'remount', published: false });
      h.away = away;
      expect(keepRemounting(h, KEY)).toEqual({
        name: 'data',
        volumeId: 'vol1',
        pluginId: 'hostpath',
        targetPath: TARGET,
        stagingPath: STAGING,
        readOnly: false,
        restored: true,
        pluginAway: away,
      });
      expect([...h.verified]).toEqual([KEY]);
      expect(h.restored).toEqual([h.rec]);
      expect(h.mountTable.reads).toBe(0);
      expect(
        h.log.find('a remount of a stale volume mount did not finish before the last agent stopped', 'warn').map((l) => l.fields),
      ).toEqual([{ alloc_id: 'a1', volume: 'data', volume_id: 'vol1', target: TARGET, remounting: 'remount', plugin_away: away }]);
    },
  );
});
