// The SQLite store on disk: persistence, read-only opens, the in-process
// lock, and files that are not (or no longer) a sound csiplug store.
import Database from 'better-sqlite3';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { DB } from './db';
import { isTransientFsError } from '@csiplug/core';
import { ErrBackupUnsupported, ErrCorrupt, ErrDatabaseNotFound, ErrInvalid, ErrTimeout, ErrTxOpen } from './errors';
import { tempDir, thrown } from '../test/support/backends';

const b = (s: string) => Buffer.from(s);
const digest = (file: string) => crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');

describe('SQLite store', () => {
  let dir: string;
  let file: string;
  const open: DB[] = [];
  const track = (db: DB) => (open.push(db), db);

  beforeEach(() => {
    dir = tempDir();
    file = path.join(dir, 'state.db');
  });
  afterEach(() => {
    for (const db of open.splice(0)) db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('data, sequences and transaction ids survive a reopen (TestOpen / TestDB_Open_InitialMmapSize-style reopen)', () => {
    const db = DB.open(file);
    db.update((tx) => {
      const w = tx.createBucket('widgets');
      w.put('foo', b('bar'));
      w.setSequence(41);
      w.createBucket('sub').put('deep', Buffer.alloc(0));
    });
    const id = db.update((tx) => tx.id);
    db.close();
    const again = track(DB.open(file));
    expect(again.path).toBe(file);
    again.view((tx) => {
      const w = tx.bucket('widgets')!;
      expect(w.get('foo')).toEqual(b('bar'));
      expect(w.sequence()).toBe(41);
      expect(w.bucket('sub')!.get('deep')).toEqual(Buffer.alloc(0));
      expect(tx.id).toBe(id);
    });
    expect(again.update((tx) => tx.bucket('widgets')!.nextSequence())).toBe(42);
  });

  test('a second read-write open in the same process fails with ErrTimeout after waiting', () => {
    const first = track(DB.open(file));
    const started = Date.now();
    const err = thrown(() => DB.open(file, { timeout: 150 }));
    expect(err).toBeInstanceOf(ErrTimeout);
    expect(err.code).toBe('ErrTimeout');
    expect(err.message).toContain(file);
    expect(err.message).toMatch(/another csiplug agent using the data dir/);
    expect(err.message).toContain(dir);
    // Waited rather than failing at once (lower bound only: no wall-clock ceiling is asserted).
    expect(Date.now() - started).toBeGreaterThanOrEqual(100);
    expect(thrown(() => DB.open(file, { readOnly: true })).code).toBe('ErrTimeout');
    first.close();
    track(DB.open(file)).view((tx) => expect(tx.bucket('x')).toBeUndefined());
  });

  test('readOnly never creates the file', () => {
    const err = thrown(() => DB.open(file, { readOnly: true }));
    expect(err).toBeInstanceOf(ErrDatabaseNotFound);
    expect(err.code).toBe('ESTATE_NOT_FOUND');
    expect(err.message).toContain(file);
    expect(isTransientFsError(err)).toBe(false);
    expect(fs.existsSync(file)).toBe(false);
  });

  test('close and backup from inside a transaction are refused with ErrTxOpen (ESTATE_BUSY, not a transient EBUSY); a memory DB has no backup', () => {
    const db = track(DB.open(file));
    const dest = path.join(dir, 'copy.db');
    const inside = db.update(() => [thrown(() => db.backup(dest)), thrown(() => db.close())]);
    for (const err of inside) {
      expect(err).toBeInstanceOf(ErrTxOpen);
      expect(err.code).toBe('ESTATE_BUSY');
      expect(err.message).toContain(file);
      expect(isTransientFsError(err)).toBe(false);
    }
    expect(inside[0]!.message).toMatch(/^cannot back up .* from inside a transaction/);
    expect(inside[1]!.message).toMatch(/^cannot close .* from inside a transaction/);
    db.backup(dest);
    expect(fs.existsSync(dest)).toBe(true);

    const memory = DB.openMemory();
    const err = thrown(() => memory.backup(dest));
    memory.close();
    expect(err).toBeInstanceOf(ErrBackupUnsupported);
    expect(err.code).toBe('ESTATE_UNSUPPORTED');
  });

  test('readOnly opens read, share the file, and refuse writes with ErrDatabaseReadOnly (TestDB_Open_ReadOnly)', async () => {
    const rw = DB.open(file);
    rw.update((tx) => tx.createBucket('widgets').put('foo', b('bar')));
    rw.close();
    const r1 = track(DB.open(file, { readOnly: true }));
    const r2 = track(DB.open(file, { readOnly: true }));
    expect(r1.readOnly).toBe(true);
    expect(r1.view((tx) => tx.bucket('widgets')!.get('foo'))).toEqual(b('bar'));
    expect(r2.view((tx) => tx.bucket('widgets')!.get('foo'))).toEqual(b('bar'));
    expect(thrown(() => r1.update(() => 1)).code).toBe('ErrDatabaseReadOnly');
    await expect(r1.batch(() => undefined)).rejects.toMatchObject({ code: 'ErrDatabaseReadOnly' });
    // Readers keep the writer out.
    expect(thrown(() => DB.open(file)).code).toBe('ErrTimeout');
    expect(r1.check()).toEqual([]);
  });

  test('a file that is not SQLite is refused with ErrInvalid naming it, and left untouched', () => {
    fs.writeFileSync(file, crypto.randomBytes(8192));
    const before = digest(file);
    const err = thrown(() => DB.open(file));
    expect(err).toBeInstanceOf(ErrInvalid);
    expect(err.message).toContain(file);
    expect(digest(file)).toBe(before);
    expect(fs.readdirSync(dir)).toEqual(['state.db']);
  });

  test('a SQLite file that is not a csiplug store is refused and left untouched', () => {
    const other = new Database(file);
    other.exec('CREATE TABLE t (x); INSERT INTO t VALUES (1)');
    other.close();
    const before = digest(file);
    const err = thrown(() => DB.open(file));
    expect(err).toBeInstanceOf(ErrInvalid);
    expect(err.message).toMatch(/not a csiplug state store/);
    expect(digest(file)).toBe(before);
  });

  test('integrityCheck refuses a garbled store with ErrCorrupt naming the file', () => {
    const db = DB.open(file);
    db.update((tx) => {
      const w = tx.createBucket('widgets');
      for (let i = 0; i < 2000; i++) w.put(String(i).padStart(6, '0'), Buffer.alloc(200, i % 256));
    });
    db.close();
    // Scribble over the middle of the file: interior b-tree pages.
    const fd = fs.openSync(file, 'r+');
    const size = fs.fstatSync(fd).size;
    fs.writeSync(fd, crypto.randomBytes(16384), 0, 16384, Math.floor(size / 2 / 4096) * 4096);
    fs.closeSync(fd);
    const before = digest(file);
    const err = thrown(() => DB.open(file, { integrityCheck: true }));
    expect(err).toBeInstanceOf(ErrCorrupt);
    expect(err.message).toContain(file);
    expect(digest(file)).toBe(before);
  });

  test('a fresh store checks clean, and the WAL is folded back on close', () => {
    const db = DB.open(file);
    db.update((tx) => tx.createBucket('w').put('k', b('v')));
    expect(fs.existsSync(`${file}-wal`)).toBe(true);
    expect(db.check()).toEqual([]);
    db.close();
    expect(fs.existsSync(`${file}-wal`)).toBe(false);
  });
});
