// File modes of the state store on real files: whatever the umask, every
// file the store creates (db, -wal, -shm, the migration backup and its temp
// file) is 0600; files an older release left looser are tightened on open,
// chmod only, one log line each; nothing is chmod-ed through a symlink.
import { MemoryLogger } from '@csiplug/core';
import Database from 'better-sqlite3';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { backupPathFor, clientStateFiles, openClientState } from './client-state-db';
import { DB } from './db';
import { createPrivateFile, formatMode, tightenMode } from './file-modes';
import { CLIENT_STATE_SCHEMA_VERSION } from './layout';
import { backupTempPath, sqliteFiles } from './sqlite-store';
import { tempDir } from '../test/support/backends';

const modeOf = (f: string) => fs.lstatSync(f).mode & 0o7777;
const digest = (f: string) => crypto.createHash('sha256').update(fs.readFileSync(f)).digest('hex');
const json = (v: unknown) => Buffer.from(JSON.stringify(v));

/** Every entry of `dir` with its mode, as `name 0600` lines (sorted). */
function modesIn(dir: string): string[] {
  return fs
    .readdirSync(dir)
    .sort()
    .map((name) => `${name} ${formatMode(modeOf(path.join(dir, name)))}`);
}

/** The pre-versioned layout that migration 0→1 understands. */
function writeV0(file: string): void {
  const db = DB.open(file);
  db.update((tx) => {
    tx.createBucket('allocations').put('a1', json({ id: 'a1', job: 'web' }));
    tx.createBucket('dynamicplugins').put('registry_state', json({ plugins: {} }));
  });
  db.close();
}

describe('state file modes', () => {
  let dir: string;
  let file: string;
  let umask: number;

  beforeEach(() => {
    dir = tempDir();
    file = path.join(dir, 'state.db');
    // With no umask SQLite's own default would leave 0644 files: anything tighter is the store's doing.
    umask = process.umask(0);
  });
  afterEach(() => {
    process.umask(umask);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('a new store is 0600 from its first byte: the db file and its -wal', () => {
    const db = DB.open(file);
    try {
      expect(modeOf(file)).toBe(0o600);
      db.update((tx) => tx.createBucket('secrets').put('k', Buffer.from('v')));
      expect(fs.existsSync(`${file}-wal`)).toBe(true);
      expect(modesIn(dir)).toEqual(['state.db 0600', 'state.db-wal 0600']);
    } finally {
      db.close();
    }
  });

  test('another SQLite connection on the file gives its -wal and -shm the db file’s 0600', () => {
    DB.open(file).close();
    // A connection without exclusive locking (the sqlite3 shell, a backup tool) keeps a -shm too.
    const conn = new Database(file);
    try {
      conn.pragma('wal_autocheckpoint = 0');
      conn.exec("UPDATE meta SET value = value WHERE name = 'txid'");
      expect(fs.existsSync(`${file}-shm`)).toBe(true);
      expect(modesIn(dir)).toEqual(['state.db 0600', 'state.db-shm 0600', 'state.db-wal 0600']);
    } finally {
      conn.close();
    }
  });

  test('a migration leaves the store and its backup 0600', () => {
    writeV0(file);
    const logger = new MemoryLogger();
    const state = openClientState({ path: file, logger });
    try {
      expect(state.schemaVersion).toBe(CLIENT_STATE_SCHEMA_VERSION);
      expect(logger.find('backed up before migration')).toHaveLength(1);
      // The backup was written to its temp file (gone now) and renamed: its mode is the temp file's.
      expect(fs.existsSync(backupTempPath(backupPathFor(file)))).toBe(false);
      expect(modesIn(dir)).toEqual(['state.db 0600', 'state.db-wal 0600', 'state.db.backup 0600']);
      expect(logger.find('tightened the mode')).toEqual([]);
    } finally {
      state.dispose();
    }
    // The backup is a sound store of its own.
    const backup = DB.open(backupPathFor(file), { readOnly: true });
    expect(backup.check()).toEqual([]);
    backup.close();
  });

  test('a store an older release left readable is tightened on open: chmod only, one log line per file', () => {
    const first = openClientState({ path: file });
    first.putAllocation('a1', { id: 'a1', secret: 's3cret' });
    first.dispose();
    const backup = backupPathFor(file);
    fs.copyFileSync(file, backup);
    fs.writeFileSync(backupTempPath(backup), 'half a backup');
    fs.chmodSync(file, 0o644);
    fs.chmodSync(backup, 0o644);
    fs.chmodSync(backupTempPath(backup), 0o640);
    const before = { backup: digest(backup), tmp: digest(backupTempPath(backup)) };

    const logger = new MemoryLogger();
    const state = openClientState({ path: file, logger });
    try {
      expect(state.getAllocation('a1')).toEqual({ id: 'a1', secret: 's3cret' });
      for (const f of clientStateFiles(file)) if (fs.existsSync(f)) expect(formatMode(modeOf(f))).toBe('0600');
      expect(digest(backup)).toBe(before.backup);
      expect(digest(backupTempPath(backup))).toBe(before.tmp);
      const lines = logger.find('tightened the mode').map((r) => r.fields);
      expect(lines).toEqual([
        { path: file, from: '0644', to: '0600' },
        { path: backup, from: '0644', to: '0600' },
        { path: backupTempPath(backup), from: '0640', to: '0600' },
      ]);
    } finally {
      state.dispose();
    }

    // Nothing left to do on the next open: no more lines.
    const quiet = new MemoryLogger();
    openClientState({ path: file, logger: quiet }).dispose();
    expect(quiet.find('tightened the mode')).toEqual([]);
  });

  test('a read-only open changes no mode', () => {
    DB.open(file).close();
    fs.chmodSync(file, 0o644);
    const db = DB.open(file, { readOnly: true });
    db.close();
    expect(modeOf(file)).toBe(0o644);
  });

  test('a symlink among the store’s files is never followed: its target keeps its mode', () => {
    const elsewhere = tempDir('csiplug-elsewhere-');
    try {
      const outside = path.join(elsewhere, 'not-ours');
      fs.writeFileSync(outside, 'someone else’s file');
      fs.chmodSync(outside, 0o644);
      fs.symlinkSync(outside, backupPathFor(file));
      fs.symlinkSync(outside, `${file}-shm`);

      const logger = new MemoryLogger();
      openClientState({ path: file, logger }).dispose();
      expect(modeOf(outside)).toBe(0o644);
      expect(fs.lstatSync(backupPathFor(file)).isSymbolicLink()).toBe(true);
      expect(logger.find('tightened the mode')).toEqual([]);
      expect(tightenMode(backupPathFor(file), 0o600)).toBeUndefined();

      // The state file itself behind a symlink: said in the log, the target left as it is.
      fs.rmSync(dir, { recursive: true, force: true });
      fs.mkdirSync(dir, { mode: 0o700 });
      const target = path.join(elsewhere, 'state.db');
      DB.open(target).close();
      fs.chmodSync(target, 0o644);
      fs.symlinkSync(target, file);
      const linked = new MemoryLogger();
      DB.open(file, { logger: linked }).close();
      expect(modeOf(target)).toBe(0o644);
      expect(linked.find('the state file is a symlink')).toHaveLength(1);
    } finally {
      fs.rmSync(elsewhere, { recursive: true, force: true });
    }
  });

  test('tightenMode clears bits and never sets one; other kinds and missing entries are left alone', () => {
    const f = path.join(dir, 'f');
    fs.writeFileSync(f, 'x');
    fs.chmodSync(f, 0o400);
    expect(tightenMode(f, 0o600)).toBeUndefined();
    expect(modeOf(f)).toBe(0o400);
    fs.chmodSync(f, 0o4755);
    expect(tightenMode(f, 0o600)).toEqual({ path: f, from: 0o4755, to: 0o600 });
    expect(tightenMode(f, 0o711, 'dir')).toBeUndefined();

    const d = path.join(dir, 'd');
    fs.mkdirSync(d, { mode: 0o777 });
    expect(tightenMode(d, 0o600)).toBeUndefined();
    expect(tightenMode(d, 0o711, 'dir')).toEqual({ path: d, from: 0o777, to: 0o711 });
    expect(modeOf(d)).toBe(0o711);
    expect(tightenMode(path.join(dir, 'missing'), 0o600)).toBeUndefined();
  });

  test('createPrivateFile makes an empty 0600 file, and never creates through a dangling symlink', () => {
    const f = path.join(dir, 'new');
    expect(createPrivateFile(f)).toBe(true);
    expect(modeOf(f)).toBe(0o600);
    expect(fs.statSync(f).size).toBe(0);
    expect(createPrivateFile(f)).toBe(false);

    const target = path.join(dir, 'target');
    fs.symlinkSync(target, path.join(dir, 'link'));
    expect(createPrivateFile(path.join(dir, 'link'))).toBe(false);
    expect(fs.existsSync(target)).toBe(false);
    expect(sqliteFiles(f)).toEqual([f, `${f}-wal`, `${f}-shm`, `${f}-journal`]);
  });
});
