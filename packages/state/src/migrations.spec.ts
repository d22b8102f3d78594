// The migration machinery on real files: a synthetic pre-versioned (v0)
// store and a schema-1 store are backed up and migrated in one transaction
// with every entry kept; newer or unknown versions are refused (a schema-1
// build refuses a schema-2 file); a failing step leaves the store as it was.
import { MemoryLogger } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import type { Bucket } from './bucket';
import { backupPathFor, openClientState } from './client-state-db';
import { DB } from './db';
import { ErrMigration, ErrSchemaVersion } from './errors';
import { CLIENT_STATE_SCHEMA_VERSION } from './layout';
import { CLIENT_STATE_MIGRATIONS, type Migration, migrateV0toV1, migrateV1toV2, migrationPath } from './migrations';
import { tempDir, thrown } from '../test/support/backends';

const json = (v: unknown) => Buffer.from(JSON.stringify(v));
const digest = (f: string) => crypto.createHash('sha256').update(fs.readFileSync(f)).digest('hex');
const CURRENT = CLIENT_STATE_SCHEMA_VERSION;

/** Writes the pre-versioned layout that migration 0→1 understands. */
function writeV0(file: string): void {
  const db = DB.open(file);
  db.update((tx) => {
    const allocs = tx.createBucket('allocations');
    allocs.put('a1', json({ id: 'a1', job: 'web' }));
    allocs.put('a2', json({ id: 'a2', job: 'db' }));
    const tasks = tx.createBucket('tasks');
    tasks.put('a1/web', json({ handle: { pid: 11 }, state: { state: 'running' } }));
    tasks.put('a2/db', json({ state: { state: 'dead' } }));
    tx.createBucket('dynamicplugins').put('registry_state', json({ plugins: {} }));
  });
  db.close();
}

/** What a schema-1 build left: the nested v1 layout, legacy volume entries, no `csi/mounts`, `meta/version` 1. */
const V1 = {
  registry: { plugins: { 'csi-node': { hostpath: [{ name: 'hostpath', allocId: 'p1', socketPath: '/x/csi.sock' }] } } },
  alloc: { id: 'a1', job: 'web' },
  stubs: { data: { name: 'data', volumeId: 'vol1', pluginId: 'hostpath', targetPath: '/t', usage: { readOnly: false } } },
  handle: { pid: 11 },
  taskState: { state: 'running' },
  users: [{ allocId: 'a1', usage: { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' } }],
  pending: { id: 'u1', allocId: 'a0', pluginId: 'hostpath', volumeId: 'vol0', attempts: 2, since: 1000, lastError: 'busy' },
  volume: { id: 'vol1', claims: ['a1'] },
};

function writeV1(file: string): void {
  const db = DB.open(file);
  db.update((tx) => {
    const meta = tx.createBucket('meta');
    meta.put('version', json(1));
    meta.put('upgraded', json('2025-01-01T00:00:00.000Z'));
    tx.createBucket('dynamicplugins').put('registry_state', json(V1.registry));
    const a1 = tx.createBucket('allocations').createBucket('a1');
    a1.put('alloc', json(V1.alloc));
    a1.put('volumes', json(V1.stubs));
    const web = a1.createBucket('task-web');
    web.put('handle', json(V1.handle));
    web.put('state', json(V1.taskState));
    const csi = tx.createBucket('csi');
    csi.createBucket('usage').createBucket('hostpath').put('vol1', json(V1.users));
    csi.createBucket('pending').put('u1', json(V1.pending));
    tx.createBucket('volumes').put('vol1', json(V1.volume));
  });
  db.close();
}

/** Every bucket and value of a store as `path → value` (`<bucket>` for a bucket), to compare whole trees. */
function dump(file: string, options: { readOnly?: boolean } = {}): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (where: string, bucket: Bucket): void => {
    out[where] = '<bucket>';
    bucket.forEach((k, v) => {
      const at = `${where}/${k.toString('utf8')}`;
      if (v === null) walk(at, bucket.bucket(k)!);
      else out[at] = v.toString('utf8');
    });
  };
  const db = DB.open(file, options);
  try {
    db.view((tx) => tx.forEach((name, bucket) => walk(name.toString('utf8'), bucket)));
  } finally {
    db.close();
  }
  return out;
}

/** The id of the last committed write transaction. */
function lastTxId(file: string): number {
  const db = DB.open(file);
  try {
    return db.view((tx) => tx.id);
  } finally {
    db.close();
  }
}

function readVersion(file: string): unknown {
  const db = DB.open(file);
  try {
    return db.view((tx) => {
      const raw = tx.bucket('meta')?.get('version');
      return raw ? JSON.parse(raw.toString()) : undefined;
    });
  } finally {
    db.close();
  }
}

function setVersion(file: string, version: unknown): void {
  const db = DB.open(file);
  db.update((tx) => tx.createBucketIfNotExists('meta').put('version', typeof version === 'string' ? Buffer.from(version) : json(version)));
  db.close();
}

describe('client state migrations', () => {
  let dir: string;
  let file: string;
  beforeEach(() => {
    dir = tempDir();
    file = path.join(dir, 'state.db');
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  test('a pre-versioned (v0) store is backed up, then migrated to the current version in one transaction', () => {
    writeV0(file);
    const txBefore = lastTxId(file);
    const clock = new FakeClock(Date.UTC(2026, 4, 1));
    const logger = new MemoryLogger();
    const state = openClientState({ path: file, clock, logger });
    try {
      expect(state.schemaVersion).toBe(CURRENT);
      expect(state.raw.view((tx) => tx.id)).toBe(txBefore + 1);
      expect(state.getAllocation('a1')).toEqual({ id: 'a1', job: 'web' });
      expect(state.getTaskHandle('a1', 'web')).toEqual({ pid: 11 });
      expect(state.getTaskState('a1', 'web')).toEqual({ state: 'running' });
      expect(state.getTaskHandle('a2', 'db')).toBeUndefined();
      expect(state.getTaskState('a2', 'db')).toEqual({ state: 'dead' });
      expect(state.getRegistryState()).toEqual({ plugins: {} });
      expect(state.listAllocations().failures).toEqual([]);
      state.raw.view((tx) => {
        expect(tx.bucket('tasks')).toBeUndefined();
        expect(tx.bucket('csi')!.bucket('pending')).toBeDefined();
        expect(tx.bucket('csi')!.bucket('mounts')).toBeDefined();
        expect(JSON.parse(tx.bucket('meta')!.get('version')!.toString())).toBe(CURRENT);
        expect(JSON.parse(tx.bucket('meta')!.get('upgraded')!.toString())).toBe('2026-05-01T00:00:00.000Z');
      });
      expect(state.raw.check()).toEqual([]);
      expect(logger.find('backed up before migration')).toHaveLength(1);
      // Every registered step, in order, in the one transaction.
      expect(logger.find('client state migrated').map((r) => r.fields.steps)).toEqual([CLIENT_STATE_MIGRATIONS.map((s) => s.description)]);
    } finally {
      state.dispose();
    }
    // The backup holds the store exactly as it was before.
    const backup = backupPathFor(file);
    expect(path.basename(backup)).toBe('state.db.backup');
    const old = DB.open(backup, { readOnly: true });
    try {
      old.view((tx) => {
        expect(tx.bucket('meta')).toBeUndefined();
        expect(JSON.parse(tx.bucket('allocations')!.get('a1')!.toString())).toEqual({ id: 'a1', job: 'web' });
        expect(tx.bucket('tasks')!.get('a1/web')).toBeDefined();
      });
    } finally {
      old.close();
    }
  });

  test('a store at the current version opens without a backup', () => {
    openClientState({ path: file }).dispose();
    openClientState({ path: file }).dispose();
    expect(fs.existsSync(backupPathFor(file))).toBe(false);
  });

  test('a newer schema version is refused, and the file left alone', () => {
    openClientState({ path: file }).dispose();
    setVersion(file, CURRENT + 1);
    const before = digest(file);
    const err = thrown(() => openClientState({ path: file }));
    expect(err).toBeInstanceOf(ErrSchemaVersion);
    expect(err.message).toContain(file);
    expect(err.message).toContain(`version ${CURRENT + 1}, newer than this csiplug understands (${CURRENT})`);
    expect(digest(file)).toBe(before);
    expect(readVersion(file)).toBe(CURRENT + 1);
    expect(fs.existsSync(backupPathFor(file))).toBe(false);
  });

  test('a schema-1 store is backed up, then migrated to 2 in one transaction: csi/mounts added, every v1 entry kept', () => {
    writeV1(file);
    const v1 = dump(file);
    const txBefore = lastTxId(file);
    const clock = new FakeClock(Date.UTC(2026, 10, 30));
    const logger = new MemoryLogger();
    // The real step list, brought to 2 whatever the current version is: this is the 1→2 step's test.
    const state = openClientState({ path: file, schemaVersion: 2, clock, logger });
    try {
      expect(state.schemaVersion).toBe(2);
      expect(state.raw.view((tx) => tx.id)).toBe(txBefore + 1);
      expect(logger.find('backed up before migration').map((r) => [r.fields.from, r.fields.to])).toEqual([[1, 2]]);
      expect(logger.find('client state migrated').map((r) => r.fields.steps)).toEqual([[migrateV1toV2.description]]);
      // Every v1 entry reads back through the store's own methods…
      expect(state.getRegistryState()).toEqual(V1.registry);
      expect(state.listAllocations()).toEqual({ allocs: [{ allocId: 'a1', alloc: V1.alloc }], failures: [] });
      expect(state.getVolumeStubs('a1')).toEqual(V1.stubs);
      expect(state.getTaskHandle('a1', 'web')).toEqual(V1.handle);
      expect(state.getTaskState('a1', 'web')).toEqual(V1.taskState);
      expect(state.listVolumeUsage()).toEqual([{ pluginId: 'hostpath', volumeId: 'vol1', users: V1.users }]);
      expect(state.listPendingUnmounts()).toEqual([V1.pending]);
      expect(state.listVolumes()).toEqual([V1.volume]);
      // …and csi/mounts is there, empty: the legacy entries are left for @csiplug/volumes to adopt.
      expect(state.raw.view((tx) => tx.bucket('csi')!.bucket('mounts'))).toBeDefined();
      expect(state.listVolumeMounts()).toEqual({ records: [], failures: [] });
      expect(state.raw.check()).toEqual([]);
    } finally {
      state.dispose();
    }
    // The whole tree: the v1 one, plus csi/mounts and the new meta entries, nothing else.
    expect(dump(file)).toEqual({ ...v1, 'csi/mounts': '<bucket>', 'meta/version': '2', 'meta/upgraded': '"2026-11-30T00:00:00.000Z"' });
    // The backup is the v1 store exactly.
    expect(dump(backupPathFor(file), { readOnly: true })).toEqual(v1);
    expect(v1['meta/version']).toBe('1');
    expect(v1['csi/mounts']).toBeUndefined();
  });

  test('a schema-1 store whose csi/mounts a schema-1 build already wrote keeps its records', () => {
    writeV1(file);
    const db = DB.open(file);
    db.update((tx) =>
      tx
        .bucket('csi')!
        .createBucket('mounts')
        .put('a1/data', json({ volumeId: 'vol1', targetPath: '/t' })),
    );
    db.close();
    const state = openClientState({ path: file, schemaVersion: 2 });
    try {
      expect(state.listVolumeMounts()).toEqual({
        records: [{ key: 'a1/data', record: { volumeId: 'vol1', targetPath: '/t' } }],
        failures: [],
      });
      expect(state.listPendingUnmounts()).toEqual([V1.pending]);
    } finally {
      state.dispose();
    }
    expect(readVersion(file)).toBe(2);
  });

  test('a schema-2 store is refused by a build that knows only schema 1, and left as it is', () => {
    const v2 = openClientState({ path: file, schemaVersion: 2 });
    v2.putAllocation('a1', { id: 'a1' });
    v2.putVolumeMount('a1/data', { volumeId: 'vol1' });
    v2.dispose();
    const before = digest(file);
    // What a schema-1 build runs: target 1, with the one step it had.
    const err = thrown(() => openClientState({ path: file, schemaVersion: 1, migrations: [migrateV0toV1] }));
    expect(err).toBeInstanceOf(ErrSchemaVersion);
    expect(err.message).toContain(file);
    expect(err.message).toContain('version 2, newer than this csiplug understands (1)');
    expect(digest(file)).toBe(before);
    expect(readVersion(file)).toBe(2);
    expect(fs.existsSync(backupPathFor(file))).toBe(false);
    // The build that wrote it still opens it, with its records.
    const again = openClientState({ path: file, schemaVersion: 2 });
    try {
      expect(again.getAllocation('a1')).toEqual({ id: 'a1' });
      expect(again.listVolumeMounts().records.map((r) => r.key)).toEqual(['a1/data']);
    } finally {
      again.dispose();
    }
  });

  test.each([['"abc"'], [-1], [1.5], ['not json']])('an unknown schema version %p is refused', (v) => {
    openClientState({ path: file }).dispose();
    setVersion(file, v);
    const err = thrown(() => openClientState({ path: file }));
    expect(err.code).toBe('ErrSchemaVersion');
    expect(err.message).toMatch(/unknown client state schema version/);
  });

  test('a failing step rolls everything back and leaves the backup', () => {
    writeV0(file);
    const v0 = dump(file);
    // Every real step, then one that fails after them.
    const failing: Migration[] = [
      ...CLIENT_STATE_MIGRATIONS,
      {
        from: CURRENT,
        description: 'explodes half-way',
        migrate(tx) {
          tx.createBucket('half-done');
          throw new Error(`step ${CURRENT}→${CURRENT + 1} exploded`);
        },
      },
    ];
    const err = thrown(() => openClientState({ path: file, schemaVersion: CURRENT + 1, migrations: failing }));
    expect(err).toBeInstanceOf(ErrMigration);
    expect(err.message).toContain(`from client state schema 0 to ${CURRENT + 1} failed: step ${CURRENT}→${CURRENT + 1} exploded`);
    expect(err.message).toContain(backupPathFor(file));
    // Still the v0 layout: the real steps (0→1 nesting, 1→2 csi/mounts) were rolled back with the rest.
    const db = DB.open(file);
    db.view((tx) => {
      expect(tx.bucket('meta')).toBeUndefined();
      expect(tx.bucket('half-done')).toBeUndefined();
      expect(tx.bucket('csi')).toBeUndefined();
      expect(tx.bucket('allocations')!.get('a1')).toBeDefined();
    });
    db.close();
    expect(dump(file)).toEqual(v0);
    expect(fs.existsSync(backupPathFor(file))).toBe(true);
  });

  test('several steps run in order to reach a later version', () => {
    openClientState({ path: file }).dispose();
    const ran: number[] = [];
    const steps: Migration[] = [
      ...CLIENT_STATE_MIGRATIONS,
      { from: CURRENT, description: 'add x', migrate: (tx) => (ran.push(CURRENT), tx.createBucket('x')) },
      { from: CURRENT + 1, description: 'fill x', migrate: (tx) => (ran.push(CURRENT + 1), tx.bucket('x')!.put('k', json(true))) },
    ];
    const state = openClientState({ path: file, schemaVersion: CURRENT + 2, migrations: steps });
    expect(state.schemaVersion).toBe(CURRENT + 2);
    expect(ran).toEqual([CURRENT, CURRENT + 1]);
    expect(state.raw.view((tx) => tx.bucket('x')!.get('k')!.toString())).toBe('true');
    state.dispose();
    expect(readVersion(file)).toBe(CURRENT + 2);
  });

  test('a gap in the registered steps is an error', () => {
    expect(() => migrationPath(0, CURRENT + 1, CLIENT_STATE_MIGRATIONS)).toThrow(
      `no migration registered from client state schema ${CURRENT} to ${CURRENT + 1}`,
    );
    expect(() => migrationPath(0, 2, [migrateV1toV2])).toThrow('no migration registered from client state schema 0 to 1');
    expect(() => migrationPath(0, 2, [migrateV0toV1])).toThrow('no migration registered from client state schema 1 to 2');
    expect(migrationPath(0, 1, CLIENT_STATE_MIGRATIONS)).toHaveLength(1);
  });

  test('the registered steps reach the current version one step at a time, in order', () => {
    expect(migrationPath(0, CURRENT, CLIENT_STATE_MIGRATIONS).map((s) => s.from)).toEqual([...Array(CURRENT).keys()]);
    expect(CLIENT_STATE_MIGRATIONS.map((s) => s.from)).toEqual([...Array(CURRENT).keys()]);
    expect(migrationPath(1, 2, CLIENT_STATE_MIGRATIONS)).toEqual([migrateV1toV2]);
  });

  test('a malformed v0 task record fails the migration', () => {
    writeV0(file);
    const db = DB.open(file);
    db.update((tx) => tx.bucket('tasks')!.put('no-slash', json({})));
    db.close();
    expect(thrown(() => openClientState({ path: file })).code).toBe('ErrMigration');
  });
});
