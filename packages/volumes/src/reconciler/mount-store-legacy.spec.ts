// adoptLegacyVolumeState (mount-store.ts) against a legacy state of the
// test's own (plain arrays and maps, any of its reads or writes made to fail)
// and a FakeMountStore: what each legacy field becomes in a record (defaults
// for fields an older agent left out), an empty alloc left alone, malformed
// entries and unreadable lists logged and left in place, nothing at all
// adopted quietly, and a clearing that fails after the records are written.
// Also StateMountStore.list's report of an entry that is not a record.
import { MemoryLogger } from '@csiplug/core';
import type { UsageOptions } from '@csiplug/csimanager';
import { FakeMountStore } from '../testing/fake-mount-store';
import { mountKey, type VolumeMountRecord } from './mount-record';
import { adoptLegacyVolumeState, StateMountStore, type LegacyVolumeState, type MountRecordBucket } from './mount-store';

const NOW = 1_000_000;
const RW: UsageOptions = { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' };

type Stub = NonNullable<ReturnType<LegacyVolumeState['getVolumeStubs']>>[string];
type Pending = ReturnType<LegacyVolumeState['listPendingUnmounts']>[number];
type Usage = ReturnType<LegacyVolumeState['listVolumeUsage']>[number];

class Legacy implements LegacyVolumeState {
  stubs = new Map<string, Record<string, Stub>>();
  usage: Usage[] = [];
  pending: Pending[] = [];
  readonly writes: string[] = [];
  /** Methods that throw when called. */
  readonly failing = new Set<keyof LegacyVolumeState>();

  private check(m: keyof LegacyVolumeState): void {
    if (this.failing.has(m)) throw new Error(`${m} failed`);
  }
  listAllocations() {
    this.check('listAllocations');
    return { allocs: [...this.stubs.keys()].map((allocId) => ({ allocId })) };
  }
  getVolumeStubs(allocId: string) {
    this.check('getVolumeStubs');
    return this.stubs.get(allocId);
  }
  putVolumeStubs(allocId: string, stubs: Record<string, Stub>) {
    this.check('putVolumeStubs');
    this.writes.push(`stubs ${allocId} ${JSON.stringify(stubs)}`);
    this.stubs.set(allocId, stubs);
  }
  listVolumeUsage() {
    this.check('listVolumeUsage');
    return this.usage;
  }
  putVolumeUsage(pluginId: string, volumeId: string, users: []) {
    this.check('putVolumeUsage');
    this.writes.push(`usage ${pluginId} ${volumeId} ${JSON.stringify(users)}`);
    this.usage = this.usage.filter((u) => !(u.pluginId === pluginId && u.volumeId === volumeId));
  }
  listPendingUnmounts() {
    this.check('listPendingUnmounts');
    return this.pending;
  }
  deletePendingUnmount(id: string) {
    this.check('deletePendingUnmount');
    this.writes.push(`pending ${id}`);
    this.pending = this.pending.filter((p) => p.id !== id);
  }
}

const stub = (over: Partial<Stub> = {}): Stub => ({
  name: 'data',
  volumeId: 'vol1',
  pluginId: 'hostpath',
  targetPath: '/t/a1',
  usage: RW,
  ...over,
});

const mounted = (over: Partial<VolumeMountRecord> = {}): VolumeMountRecord => ({
  allocId: 'a1',
  name: 'data',
  volumeId: 'vol1',
  externalId: 'vol1',
  pluginId: 'hostpath',
  usage: RW,
  desired: 'mounted',
  claimed: true,
  staged: false,
  published: true,
  targetPath: '/t/a1',
  attempts: 0,
  since: NOW,
  ...over,
});

let legacy: Legacy;
let store: FakeMountStore;
let log: MemoryLogger;
beforeEach(() => {
  legacy = new Legacy();
  store = new FakeMountStore();
  log = new MemoryLogger();
});

describe('adoptLegacyVolumeState', () => {
  test('a stub without staging path, external id or publish context: not staged, its external id the volume id, no optional fields', () => {
    legacy.stubs.set('a1', { data: stub() });
    expect(adoptLegacyVolumeState(legacy, store, NOW, log)).toBe(1);
    expect(store.snapshot()).toEqual({ [mountKey('a1', 'data')]: mounted() });
    expect(legacy.writes).toEqual(['stubs a1 {}']);
  });

  test('a staging user of the stub (same plugin, volume and alloc) makes it staged; one of another alloc, volume or plugin does not', () => {
    legacy.stubs.set('a1', { data: stub() });
    legacy.stubs.set('a2', { data: stub({ targetPath: '/t/a2' }) });
    legacy.stubs.set('a3', { data: stub({ targetPath: '/t/a3', pluginId: 'other' }) });
    legacy.usage = [
      { pluginId: 'hostpath', volumeId: 'vol1', users: [{ allocId: 'a1', usage: RW }] },
      { pluginId: 'hostpath', volumeId: 'vol2', users: [{ allocId: 'a2', usage: RW }] },
      { pluginId: 'hostpath', volumeId: 'vol1', users: [{ allocId: 'a3', usage: RW }] },
    ];
    expect(adoptLegacyVolumeState(legacy, store, NOW, log)).toBe(3);
    const records = store.snapshot();
    expect(records[mountKey('a1', 'data')]!.staged).toBe(true);
    expect(records[mountKey('a2', 'data')]!.staged).toBe(false);
    expect(records[mountKey('a3', 'data')]!.staged).toBe(false);
    // Dropped with a warning: users without a stub of theirs.
    expect(log.find('dropping a staging user', 'warn').map((r) => r.fields)).toEqual([
      { alloc_id: 'a2', volume_id: 'vol2', plugin_id: 'hostpath' },
      { alloc_id: 'a3', volume_id: 'vol1', plugin_id: 'hostpath' },
    ]);
    expect(legacy.usage).toEqual([]);
    expect(legacy.writes.filter((w) => w.startsWith('usage'))).toEqual([
      'usage hostpath vol1 []',
      'usage hostpath vol2 []',
      'usage hostpath vol1 []',
    ]);
  });

  test('the usage is carried over whole: fs type and mount flags', () => {
    const usage = { ...RW, mountOptions: { fsType: 'ext4', mountFlags: ['noatime'] } };
    const s = stub({ usage, stagingPath: '/s', publishContext: { a: 'b' } });
    legacy.stubs.set('a1', { data: s });
    adoptLegacyVolumeState(legacy, store, NOW, log);
    expect(store.snapshot()[mountKey('a1', 'data')]).toEqual(
      mounted({ usage, staged: true, stagingPath: '/s', publishContext: { a: 'b' } }),
    );
  });

  test('an alloc with no stubs (none, or an empty set) is left alone', () => {
    legacy.stubs.set('a1', {});
    legacy.stubs.set('a2', undefined as never);
    expect(adoptLegacyVolumeState(legacy, store, NOW, log)).toBe(0);
    expect(legacy.writes).toEqual([]);
    expect(store.writes).toEqual([]);
    expect(log.records).toEqual([]);
  });

  test('a pending unmount without name, external id, count, time or error: named after the volume, counted 0, since now', () => {
    legacy.pending = [
      { id: 'p1', allocId: 'a1', pluginId: 'hostpath', volumeId: 'vol1', usage: RW, attempts: undefined as never, since: 'x' as never },
      {
        id: 'p2',
        allocId: 'a2',
        pluginId: 'hostpath',
        volumeId: 'vol1',
        volumeName: 'data',
        externalId: 'ext',
        usage: RW,
        attempts: 2,
        since: 5,
        lastError: 'boom',
      },
    ];
    expect(adoptLegacyVolumeState(legacy, store, NOW, log)).toBe(2);
    const wanted = { desired: 'unmounted', claimed: true, staged: true, published: true } as const;
    expect(store.snapshot()).toEqual({
      [mountKey('a1', 'vol1')]: { ...mounted({ name: 'vol1', ...wanted }), targetPath: undefined },
      [mountKey('a2', 'data')]: {
        ...mounted({ allocId: 'a2', externalId: 'ext', attempts: 2, since: 5, lastError: 'boom', ...wanted }),
        targetPath: undefined,
      },
    });
    expect(Object.keys(store.snapshot()[mountKey('a1', 'vol1')]!)).not.toContain('lastError');
    expect(legacy.writes).toEqual(['pending p1', 'pending p2']);
    expect(log.find('adopted the volume state of an older agent', 'info').map((r) => r.fields)).toEqual([{ records: 2 }]);
  });

  test('a malformed pending unmount is logged, left in place, and does not stop the others', () => {
    legacy.pending = [
      { id: 'bad', allocId: 'a1', pluginId: 'hostpath', volumeId: 'vol1', usage: undefined as never, attempts: 0, since: 0 },
      { id: 'good', allocId: 'a2', pluginId: 'hostpath', volumeId: 'vol1', usage: RW, attempts: 0, since: 0 },
    ];
    expect(adoptLegacyVolumeState(legacy, store, NOW, log)).toBe(1);
    expect(legacy.pending.map((p) => p.id)).toEqual(['bad']);
    const [err] = log.find('a legacy pending unmount entry could not be adopted; left in the state untouched', 'error');
    expect(err!.fields.entry).toBe(JSON.stringify(legacy.pending[0]));
  });

  test('a malformed stub keeps its alloc whole: none of its stubs adopted, the alloc not cleared', () => {
    legacy.stubs.set('a1', { data: stub(), bad: stub({ name: 'bad', volumeId: 7 as never }) });
    expect(adoptLegacyVolumeState(legacy, store, NOW, log)).toBe(0);
    expect(store.writes).toEqual([]);
    expect(legacy.writes).toEqual([]);
    expect(log.find('a legacy mount stubs entry could not be adopted', 'error')[0]!.fields.error).toBe(
      'mount stub "bad" of alloc a1 is malformed',
    );
  });

  test('a long entry is logged cut to 200 characters', () => {
    legacy.pending = [{ id: 'x'.repeat(300), allocId: 'a1', pluginId: 5 as never, volumeId: 'vol1', usage: RW, attempts: 0, since: 0 }];
    adoptLegacyVolumeState(legacy, store, NOW, log);
    const [err] = log.find('a legacy pending unmount entry could not be adopted', 'error');
    expect(err!.fields.entry).toHaveLength(200);
    expect(err!.fields.error).toBe(`pending unmount ${'x'.repeat(300)} is malformed`);
  });

  test.each([
    ['listVolumeUsage', 'volume usage'],
    ['listAllocations', 'mount stubs'],
    ['listPendingUnmounts', 'pending unmount'],
  ] as const)('a list that cannot be read (%s) is logged and left; the others are adopted', (method, what) => {
    legacy.stubs.set('a1', { data: stub() });
    legacy.pending = [{ id: 'p1', allocId: 'a2', pluginId: 'hostpath', volumeId: 'vol1', usage: RW, attempts: 0, since: 0 }];
    legacy.failing.add(method);
    const written = adoptLegacyVolumeState(legacy, store, NOW, log);
    expect(log.find(`could not read the legacy ${what}; left in the state untouched`, 'error').map((r) => r.fields)).toEqual([
      { error: `${method} failed` },
    ]);
    expect(written).toBe(method === 'listVolumeUsage' ? 2 : 1);
  });

  test('nothing left by an older agent: nothing read from the store, written or logged', () => {
    const list = jest.spyOn(store, 'list');
    expect(adoptLegacyVolumeState(legacy, store, NOW, log)).toBe(0);
    expect(list).not.toHaveBeenCalled();
    expect(log.records).toEqual([]);
    expect(legacy.writes).toEqual([]);
  });

  test('a staging user alone (no stub, no pending unmount) is still dropped, cleared and logged', () => {
    legacy.usage = [{ pluginId: 'hostpath', volumeId: 'vol1', users: [{ allocId: 'a1', usage: RW }] }];
    expect(adoptLegacyVolumeState(legacy, store, NOW, log)).toBe(0);
    expect(legacy.writes).toEqual(['usage hostpath vol1 []']);
    expect(log.find('adopted the volume state of an older agent', 'info').map((r) => r.fields)).toEqual([{ records: 0 }]);
  });

  test('a clearing that fails after the records are written is a warning; the records stay and are counted', () => {
    legacy.stubs.set('a1', { data: stub() });
    legacy.failing.add('putVolumeStubs');
    expect(adoptLegacyVolumeState(legacy, store, NOW, log)).toBe(1);
    expect(store.snapshot()).toEqual({ [mountKey('a1', 'data')]: mounted() });
    expect(
      log.find('could not clear the legacy volume state after adopting it; it is looked at again next start', 'warn').map((r) => r.fields),
    ).toEqual([{ error: 'putVolumeStubs failed' }]);
    expect(log.find('adopted the volume state of an older agent', 'info').map((r) => r.fields)).toEqual([{ records: 1 }]);
  });
});

describe('StateMountStore', () => {
  test('lists the good records, reports the bucket failures and each entry that is not a record, saying so', () => {
    const good = mounted();
    const bucket: MountRecordBucket = {
      putVolumeMount: jest.fn(),
      deleteVolumeMount: jest.fn(),
      listVolumeMounts: <T>() => ({
        records: [
          { key: 'a1/data', record: good as T },
          { key: 'a1/odd', record: { allocId: 'a1' } as T },
        ],
        failures: [{ key: 'a1/torn', error: 'unexpected end of JSON input' }],
      }),
    };
    const s = new StateMountStore(bucket);
    expect(s.list()).toEqual({
      records: [good],
      failures: [
        { key: 'a1/torn', error: 'unexpected end of JSON input' },
        { key: 'a1/odd', error: 'not a volume mount record (a field is missing or has the wrong type)' },
      ],
    });
    s.put(good);
    s.delete('a1', 'a/b');
    expect(bucket.putVolumeMount).toHaveBeenCalledWith('a1/data', good);
    expect(bucket.deleteVolumeMount).toHaveBeenCalledWith('a1/a%2Fb');
  });
});
