// The MountStore contract run against every store the reconciler is given in
// practice: the FakeMountStore its tests use, and StateMountStore over a real
// client state — a SQLite file in a temp dir and the in-memory twin.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openClientState, type BoltClientStateDB } from '@csiplug/state';
import { FakeMountStore } from '../testing/fake-mount-store';
import { bareMountRecord, describeMountStoreContract, type MountStoreContractSubject } from '../testing/mount-store-contract';
import { mountKey } from './mount-record';
import { StateMountStore } from './mount-store';

/** Puts bytes that are not JSON under csi/mounts/<key>, as a torn write would leave them. */
function plantUndecodable(db: BoltClientStateDB, key: string): void {
  db.raw.update((tx) =>
    tx.createBucketIfNotExists('csi').createBucketIfNotExists('mounts').put(key, Buffer.from('{"allocId":"alloc-2","name":"bro')),
  );
}

describeMountStoreContract('FakeMountStore', () => {
  const store = new FakeMountStore();
  return {
    store,
    plantUndecodable: (key) => store.putCorrupt(key),
    plantRaw: (key, value) => store.putRaw(key, value),
    // In memory, "reopening" is reading the same map again.
    reopen: () => store,
  };
});

describeMountStoreContract('StateMountStore over a SQLite client state', () => {
  const dir = mkdtempSync(join(tmpdir(), 'csiplug-mount-store-'));
  const file = join(dir, 'state.db');
  let db = openClientState({ path: file, noSync: true });
  return {
    store: new StateMountStore(db),
    plantUndecodable: (key) => plantUndecodable(db, key),
    plantRaw: (key, value) => db.putVolumeMount(key, value),
    reopen: () => {
      db.dispose();
      db = openClientState({ path: file, noSync: true });
      return new StateMountStore(db);
    },
    dispose: () => {
      db.dispose();
      rmSync(dir, { recursive: true, force: true });
    },
  } satisfies MountStoreContractSubject;
});

describeMountStoreContract('StateMountStore over the in-memory client state', () => {
  const db = openClientState({ memory: true });
  return {
    store: new StateMountStore(db),
    plantUndecodable: (key) => plantUndecodable(db, key),
    plantRaw: (key, value) => db.putVolumeMount(key, value),
    reopen: () => new StateMountStore(db),
    dispose: () => db.dispose(),
  };
});

describe('StateMountStore', () => {
  test('keeps each record in csi/mounts under mountKey(alloc, name), the escaped name after the alloc id', () => {
    const db = openClientState({ memory: true });
    try {
      const store = new StateMountStore(db);
      store.put(bareMountRecord('alloc-1', 'a/b'));
      expect(mountKey('alloc-1', 'a/b')).toBe('alloc-1/a%2Fb');
      expect(db.listVolumeMounts().records.map((r) => r.key)).toEqual(['alloc-1/a%2Fb']);
      expect(db.getVolumeMount('alloc-1/a%2Fb')).toEqual(bareMountRecord('alloc-1', 'a/b'));
      store.delete('alloc-1', 'a/b');
      expect(db.listVolumeMounts().records).toEqual([]);
    } finally {
      db.dispose();
    }
  });
});
