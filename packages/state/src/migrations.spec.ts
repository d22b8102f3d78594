// The migration machinery on real files: a synthetic pre-versioned (v0)
// store is backed up and migrated in one transaction; newer or unknown
// versions are refused; a failing step leaves the store as it was.
import { MemoryLogger } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { backupPathFor, openClientState } from './client-state-db';
import { DB } from './db';
import { ErrMigration, ErrSchemaVersion } from './errors';
import { CLIENT_STATE_MIGRATIONS, Migration, migrationPath } from './migrations';
import { tempDir, thrown } from '../test/support/backends';

const json = (v: unknown) => Buffer.from(JSON.stringify(v));
const digest = (f: string) => crypto.createHash('sha256').update(fs.readFileSync(f)).digest('hex');

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

  test('a pre-versioned (v0) store is backed up, then migrated to v1 in one transaction', () => {
    writeV0(file);
    const clock = new FakeClock(Date.UTC(2026, 4, 1));
    const logger = new MemoryLogger();
    const state = openClientState({ path: file, clock, logger });
    try {
      expect(state.schemaVersion).toBe(1);
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
        expect(JSON.parse(tx.bucket('meta')!.get('upgraded')!.toString())).toBe('2026-05-01T00:00:00.000Z');
      });
      expect(state.raw.check()).toEqual([]);
      expect(logger.find('backed up before migration')).toHaveLength(1);
      expect(logger.find('client state migrated')).toHaveLength(1);
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
    setVersion(file, 2);
    const before = digest(file);
    const err = thrown(() => openClientState({ path: file }));
    expect(err).toBeInstanceOf(ErrSchemaVersion);
    expect(err.message).toContain(file);
    expect(err.message).toMatch(/version 2, newer than this csiplug understands \(1\)/);
    expect(digest(file)).toBe(before);
    expect(readVersion(file)).toBe(2);
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
    const failing: Migration[] = [
      CLIENT_STATE_MIGRATIONS[0]!,
      {
        from: 1,
        description: 'explodes half-way',
        migrate(tx) {
          tx.createBucket('half-done');
          throw new Error('step 1→2 exploded');
        },
      },
    ];
    const err = thrown(() => openClientState({ path: file, schemaVersion: 2, migrations: failing }));
    expect(err).toBeInstanceOf(ErrMigration);
    expect(err.message).toContain('from client state schema 0 to 2 failed: step 1→2 exploded');
    expect(err.message).toContain(backupPathFor(file));
    // Still the v0 layout: step 0→1 was rolled back with the rest.
    const db = DB.open(file);
    db.view((tx) => {
      expect(tx.bucket('meta')).toBeUndefined();
      expect(tx.bucket('half-done')).toBeUndefined();
      expect(tx.bucket('allocations')!.get('a1')).toBeDefined();
    });
    db.close();
    expect(fs.existsSync(backupPathFor(file))).toBe(true);
  });

  test('several steps run in order to reach a later version', () => {
    openClientState({ path: file }).dispose();
    const ran: number[] = [];
    const steps: Migration[] = [
      ...CLIENT_STATE_MIGRATIONS,
      { from: 1, description: 'add x', migrate: (tx) => (ran.push(1), tx.createBucket('x')) },
      { from: 2, description: 'fill x', migrate: (tx) => (ran.push(2), tx.bucket('x')!.put('k', json(true))) },
    ];
    const state = openClientState({ path: file, schemaVersion: 3, migrations: steps });
    expect(state.schemaVersion).toBe(3);
    expect(ran).toEqual([1, 2]);
    expect(state.raw.view((tx) => tx.bucket('x')!.get('k')!.toString())).toBe('true');
    state.dispose();
    expect(readVersion(file)).toBe(3);
  });

  test('a gap in the registered steps is an error', () => {
    expect(() => migrationPath(0, 3, CLIENT_STATE_MIGRATIONS)).toThrow('no migration registered from client state schema 1 to 2');
    expect(migrationPath(0, 1, CLIENT_STATE_MIGRATIONS)).toHaveLength(1);
  });

  test('a malformed v0 task record fails the migration', () => {
    writeV0(file);
    const db = DB.open(file);
    db.update((tx) => tx.bucket('tasks')!.put('no-slash', json({})));
    db.close();
    expect(thrown(() => openClientState({ path: file })).code).toBe('ErrMigration');
  });
});
