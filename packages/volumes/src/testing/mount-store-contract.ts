// The MountStore contract as jest tests: what the volume reconciler relies on
// from any store of its records, so that its tests can use FakeMountStore
// and the agent can be trusted with StateMountStore. A deployment binding its
// own IMountStore runs the same suite:
//   describeMountStoreContract('MyStore', () => ({ store, plantUndecodable, plantRaw, reopen }));
//
// Jest's functions come from @jest/globals, loaded when the suite is
// described rather than when this file is imported: the testing entry (with
// FakeMountStore) must load outside jest too.
import type * as JestGlobals from '@jest/globals';
import type { VolumeMountRecord } from '../reconciler/mount-record';
import type { MountStore } from '../reconciler/mount-store';

/** A store under test, with ways to reach beneath it. */
export interface MountStoreContractSubject {
  /** A fresh, empty store for one test. */
  readonly store: MountStore;
  /** Stores, beneath the store, an entry under `key` that cannot be decoded (truncated JSON, say). */
  plantUndecodable(key: string): void;
  /** Stores `value` under `key` beneath the store, as another writer might have (it need not be a record). */
  plantRaw(key: string, value: unknown): void;
  /** A store over what has been written so far (an agent restart); the test uses only that store after it. */
  reopen(): MountStore;
  /** Releases what the subject holds (a state file, a temp dir), after each test. */
  dispose?(): void;
}

/** A record with every field set, optional ones included. */
export function fullMountRecord(allocId: string, name: string, change: Partial<VolumeMountRecord> = {}): VolumeMountRecord {
  return {
    allocId,
    name,
    volumeId: 'vol1',
    externalId: 'ext-vol1',
    pluginId: 'hostpath',
    usage: {
      readOnly: false,
      attachmentMode: 'file-system',
      accessMode: 'single-node-writer',
      mountOptions: { fsType: 'ext4', mountFlags: ['noatime', 'nodev'] },
    },
    desired: 'mounted',
    claimed: true,
    publishContext: { attached: 'yes', device: '/dev/xvdf' },
    staged: true,
    published: true,
    targetPath: `/var/lib/csiplug/csi/node/hostpath/per-alloc/${allocId}/vol1/rw-file-system-single-node-writer`,
    stagingPath: '/var/lib/csiplug/csi/node/hostpath/staging/vol1/rw-file-system-single-node-writer',
    onStaleMount: 'restart',
    remounting: 'restart',
    attempts: 2,
    lastError: 'NodePublishVolume: deadline exceeded',
    since: Date.UTC(2026, 0, 1),
    ...change,
  };
}

/** A record with only the required fields (nothing done yet). */
export function bareMountRecord(allocId: string, name: string, change: Partial<VolumeMountRecord> = {}): VolumeMountRecord {
  return {
    allocId,
    name,
    volumeId: 'vol2',
    externalId: 'vol2',
    pluginId: 'hostpath',
    usage: { readOnly: true, attachmentMode: 'file-system', accessMode: 'multi-node-reader-only' },
    desired: 'mounted',
    claimed: false,
    staged: false,
    published: false,
    attempts: 0,
    since: Date.UTC(2026, 0, 2),
    ...change,
  };
}

function byKey(records: VolumeMountRecord[]): VolumeMountRecord[] {
  const key = (r: VolumeMountRecord) => `${r.allocId}\0${r.name}`;
  return [...records].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

/** Registers the MountStore contract's tests, in a describe block named after `name`; `make` gives a fresh subject per test. */
export function describeMountStoreContract(name: string, make: () => MountStoreContractSubject): void {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { afterEach, beforeEach, describe, expect, test } = require('@jest/globals') as typeof JestGlobals;

  describe(`${name} keeps the MountStore contract`, () => {
    let subject: MountStoreContractSubject;
    let store: MountStore;

    beforeEach(() => {
      subject = make();
      store = subject.store;
    });
    afterEach(() => subject.dispose?.());

    test('an empty store lists nothing and reports nothing', () => {
      expect(store.list()).toEqual({ records: [], failures: [] });
    });

    test('put then list gives every record back as written, optional fields included, also after a reopen', () => {
      const full = fullMountRecord('alloc-1', 'data');
      const bare = bareMountRecord('alloc-2', 'logs');
      store.put(full);
      store.put(bare);
      expect(byKey(store.list().records)).toEqual([full, bare]);
      expect(store.list().failures).toEqual([]);
      const reopened = subject.reopen();
      expect(byKey(reopened.list().records)).toEqual([full, bare]);
    });

    test('a listed record is a copy, and so is what was put: changing either later changes nothing stored', () => {
      const record = fullMountRecord('alloc-1', 'data');
      store.put(record);
      record.published = false;
      record.usage.mountOptions!.mountFlags!.push('ro');
      const listed = store.list().records[0]!;
      expect(listed).toEqual(fullMountRecord('alloc-1', 'data'));
      listed.desired = 'unmounted';
      listed.publishContext!.device = '/dev/other';
      expect(store.list().records).toEqual([fullMountRecord('alloc-1', 'data')]);
    });

    test('put replaces the record of the same (alloc, name), and only that one', () => {
      store.put(fullMountRecord('alloc-1', 'data'));
      store.put(fullMountRecord('alloc-1', 'logs'));
      store.put(fullMountRecord('alloc-2', 'data'));
      // The replacement drops optional fields the old record had: the stored record is exactly the new one.
      const replacement = bareMountRecord('alloc-1', 'data', {
        desired: 'unmounted',
        attempts: 3,
        lastError: 'NodeUnpublishVolume: plugin not found',
      });
      store.put(replacement);
      expect(byKey(store.list().records)).toEqual([replacement, fullMountRecord('alloc-1', 'logs'), fullMountRecord('alloc-2', 'data')]);
      expect(byKey(subject.reopen().list().records)).toEqual([
        replacement,
        fullMountRecord('alloc-1', 'logs'),
        fullMountRecord('alloc-2', 'data'),
      ]);
    });

    test('delete removes the record of (alloc, name) only; deleting one that is not there is not an error', () => {
      store.put(fullMountRecord('alloc-1', 'data'));
      store.put(fullMountRecord('alloc-1', 'logs'));
      store.put(fullMountRecord('alloc-2', 'data'));
      store.delete('alloc-1', 'data');
      expect(byKey(store.list().records)).toEqual([fullMountRecord('alloc-1', 'logs'), fullMountRecord('alloc-2', 'data')]);
      expect(() => store.delete('alloc-1', 'data')).not.toThrow();
      expect(() => store.delete('alloc-never', 'nothing')).not.toThrow();
      expect(byKey(subject.reopen().list().records)).toEqual([fullMountRecord('alloc-1', 'logs'), fullMountRecord('alloc-2', 'data')]);
    });

    test('names with "/", "%", unicode and spaces are distinct keys that round-trip', () => {
      // Pairs that a naive "alloc/name" key would merge: ("x", "y/z") vs ("x/y", "z"), and "a/b" vs its escaped form "a%2Fb".
      const keys: [string, string][] = [
        ['x', 'y/z'],
        ['x/y', 'z'],
        ['alloc-1', 'a/b'],
        ['alloc-1', 'a%2Fb'],
        ['alloc-1', 'données'],
        ['alloc-1', '卷 🗄️'],
        ['alloc-1', 'données '],
        ['alloc-1', '.'],
      ];
      keys.forEach(([allocId, name], i) => store.put(bareMountRecord(allocId, name, { attempts: i })));
      const listed = store.list().records;
      expect(listed).toHaveLength(keys.length);
      for (const [i, [allocId, name]] of keys.entries()) {
        expect(listed.filter((r) => r.allocId === allocId && r.name === name)).toEqual([bareMountRecord(allocId, name, { attempts: i })]);
      }
      store.delete('alloc-1', 'a/b');
      store.delete('x/y', 'z');
      const left = subject
        .reopen()
        .list()
        .records.map((r) => [r.allocId, r.name]);
      expect(left.sort()).toEqual(keys.filter(([a, n]) => !(a === 'alloc-1' && n === 'a/b') && !(a === 'x/y' && n === 'z')).sort());
    });

    test('an entry that cannot be decoded, and one that is not a record, are reported as failures while the good ones are listed', () => {
      store.put(fullMountRecord('alloc-1', 'data'));
      store.put(bareMountRecord('alloc-3', 'logs'));
      subject.plantUndecodable('alloc-2/broken');
      subject.plantRaw('alloc-2/half', { allocId: 'alloc-2', name: 'half', desired: 'mounted' });
      subject.plantRaw('alloc-2/wrong-type', { ...bareMountRecord('alloc-2', 'wrong-type'), published: 'yes' });
      const { records, failures } = store.list();
      expect(byKey(records)).toEqual([fullMountRecord('alloc-1', 'data'), bareMountRecord('alloc-3', 'logs')]);
      expect(failures.map((f) => f.key).sort()).toEqual(['alloc-2/broken', 'alloc-2/half', 'alloc-2/wrong-type']);
      for (const f of failures) expect(f.error).toEqual(expect.stringMatching(/\S/));
      // A failure is reported again next time (nothing is dropped), and writes to other keys still work.
      store.put(bareMountRecord('alloc-4', 'data'));
      const again = store.list();
      expect(again.failures.map((f) => f.key).sort()).toEqual(['alloc-2/broken', 'alloc-2/half', 'alloc-2/wrong-type']);
      expect(again.records).toHaveLength(3);
    });
  });
}
