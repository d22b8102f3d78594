// The SQLite store: bbolt's buckets as rows of one WITHOUT ROWID table keyed
// by (bucket, key), so BLOB keys sort in memcmp order and a cursor move is
// one indexed range query. The connection runs in WAL mode with
// locking_mode=EXCLUSIVE, so a read-write open holds the file's lock until
// close: that is what makes the store "exclusive" like bbolt's flock.
//
// Every file of the store is 0600 (file-modes.ts): the db file is created so
// before SQLite opens it, and SQLite gives the -wal, -shm and -journal the
// db file's mode.
import type { Logger } from '@csiplug/core';
import Database from 'better-sqlite3';
import * as fs from 'fs';
import * as path from 'path';
import {
  ErrBucketNotFound,
  ErrCorrupt,
  ErrDatabaseNotFound,
  ErrDatabaseReadOnly,
  ErrInvalid,
  ErrNoSpace,
  ErrTimeout,
  StateError,
} from './errors';
import { createPrivateFile, PRIVATE_FILE_MODE, tightenModes } from './file-modes';
import { type RangeOp, ROOT_BUCKET, type Store, type StoreEntry } from './store';

export interface SqliteStoreOptions {
  /** How long to wait for another holder to let go of the file, in ms; 0 fails at once. */
  timeout?: number;
  readOnly?: boolean;
  noSync?: boolean;
  /** Run `PRAGMA quick_check` right after taking the lock, before anything is written. */
  integrityCheck?: boolean;
  /** Told about each file of the store whose mode a read-write open tightened to 0600. */
  logger?: Logger;
}

/** The db file and the files SQLite keeps beside it (-wal, -shm, -journal), which hold the same data. */
export function sqliteFiles(file: string): string[] {
  return [file, `${file}-wal`, `${file}-shm`, `${file}-journal`];
}

/** The temp file a backup to `dest` is written to before it is renamed into place. */
export function backupTempPath(dest: string): string {
  return `${dest}.tmp`;
}

/**
 * Makes the store's files private before SQLite touches them: creates the db
 * file 0600 when it is missing, and tightens an existing one (and any -wal,
 * -shm or -journal an older release left) to 0600.
 */
function preparePrivateFiles(file: string, logger: Logger | undefined): void {
  if (createPrivateFile(file)) return;
  if (fs.lstatSync(file, { throwIfNoEntry: false })?.isSymbolicLink()) {
    logger?.warn('the state file is a symlink; the mode of its target is left as it is', { path: file, target: fs.readlinkSync(file) });
  }
  tightenModes(sqliteFiles(file), PRIVATE_FILE_MODE, logger);
}

/** Written into `meta` so a SQLite file that is not ours is never taken over. */
export const STORE_FORMAT = 'csiplug-bbolt/1';

const SCHEMA = `
CREATE TABLE meta (name TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE buckets (id INTEGER PRIMARY KEY AUTOINCREMENT, sequence INTEGER NOT NULL DEFAULT 0);
CREATE TABLE kv (
  bucket INTEGER NOT NULL,
  key BLOB NOT NULL,
  value BLOB,
  child INTEGER,
  PRIMARY KEY (bucket, key),
  CHECK ((value IS NULL) <> (child IS NULL))
) WITHOUT ROWID;
INSERT INTO buckets (id, sequence) VALUES (${ROOT_BUCKET}, 0);
INSERT INTO meta (name, value) VALUES ('format', '${STORE_FORMAT}'), ('txid', 0);
`;

/** A scanned row: key and value joined, the key's length, the nested bucket id. */
type Row = [Buffer, number, number | null];

/**
 * Transaction ids are handed out from reserved blocks: meta.txid is a
 * high-water mark no id has passed, rewritten once per block rather than on
 * every commit (one page less per commit), and set to the exact last id on a
 * clean close. After a crash ids resume past the mark: still increasing.
 */
const TXID_BLOCK = 1024;

const sleepCell = new Int32Array(new SharedArrayBuffer(4));
/** Blocks the thread: the lock wait of a synchronous open cannot yield. */
function sleepSync(ms: number): void {
  Atomics.wait(sleepCell, 0, 0, ms);
}

// Not `instanceof Error`: the native module's errors may come from another
// realm (a test runner's sandbox), where that check fails.
function sqliteCode(err: unknown): string | undefined {
  const code = typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined;
  return typeof code === 'string' ? code : undefined;
}

function isBusy(err: unknown): boolean {
  const code = sqliteCode(err);
  return code !== undefined && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED'));
}

/** Turns SQLite's errors about the file into ours; others pass through. */
export function mapSqliteError(err: unknown, file: string): unknown {
  if (err instanceof StateError) return err;
  const code = sqliteCode(err);
  if (!code) return err;
  if (code === 'SQLITE_NOTADB') return new ErrInvalid(file, 'the file is not a SQLite database', { cause: err });
  if (code.startsWith('SQLITE_CORRUPT')) return new ErrCorrupt(file, [String((err as { message?: unknown }).message)], { cause: err });
  if (code.startsWith('SQLITE_READONLY')) return new ErrDatabaseReadOnly(file);
  if (code === 'SQLITE_FULL') return new ErrNoSpace(file, { cause: err });
  return err;
}

export class SqliteStore implements Store {
  readonly readOnly: boolean;
  private lastTxid = 0;
  private txidMark = 0;
  private inTx = false;
  private readonly stmt: ReturnType<SqliteStore['prepareAll']>;

  private constructor(
    readonly path: string,
    private readonly conn: Database.Database,
    readOnly: boolean,
  ) {
    this.readOnly = readOnly;
    this.stmt = this.prepareAll();
  }

  /** Opens (and for a read-write open, creates) the store at `file`, waiting up to `timeout` for its lock. */
  static open(file: string, options: SqliteStoreOptions = {}): SqliteStore {
    const full = path.resolve(file);
    const readOnly = options.readOnly ?? false;
    const timeout = Math.max(0, options.timeout ?? 0);
    if (readOnly && !fs.existsSync(full)) {
      throw new ErrDatabaseNotFound(full);
    }
    // The wait is on a file lock held by another connection or process, so it
    // is measured on the wall clock: an injected fake clock could not move
    // while this synchronous open blocks.
    const deadline = Date.now() + timeout;
    // A read-only open never changes anything, modes included.
    if (!readOnly) preparePrivateFiles(full, options.logger);
    for (;;) {
      let conn: Database.Database | undefined;
      try {
        conn = new Database(full, { readonly: readOnly, fileMustExist: readOnly, timeout: 0 });
        const txid = SqliteStore.init(conn, full, readOnly, options);
        const store = new SqliteStore(full, conn, readOnly);
        store.lastTxid = txid;
        store.txidMark = txid;
        return store;
      } catch (err) {
        // A connection that failed half-way may hold a lock: always close it.
        try {
          conn?.close();
        } catch {
          // Closing a connection that never opened its file has nothing to release.
        }
        if (!isBusy(err)) throw mapSqliteError(err, full);
        const left = deadline - Date.now();
        if (left <= 0) throw new ErrTimeout(full, timeout, path.dirname(full));
        sleepSync(Math.min(20, left));
      }
    }
  }

  /** Takes the lock, checks the file, creates the schema on a new file; returns the last txid. */
  private static init(conn: Database.Database, file: string, readOnly: boolean, options: SqliteStoreOptions): number {
    if (readOnly) {
      // Shared access: the read transaction taken here stays open until close,
      // which keeps writers out (and the data still) while readers share the file.
      conn.exec('BEGIN');
      conn.prepare('SELECT count(*) FROM sqlite_master').get();
      if (options.integrityCheck) SqliteStore.quickCheck(conn, file);
      return SqliteStore.readFormat(conn, file);
    }
    conn.pragma('locking_mode = EXCLUSIVE');
    const mode = String(conn.pragma('journal_mode', { simple: true }));
    if (mode !== 'wal') {
      // A new file, or one of ours copied out of WAL mode (a backup made by
      // VACUUM INTO). Anything else is refused before a byte is changed.
      const pages = Number(conn.pragma('page_count', { simple: true }));
      if (pages > 0) SqliteStore.readFormat(conn, file);
      const set = String(conn.pragma('journal_mode = WAL', { simple: true }));
      if (set !== 'wal') throw new StateError('EWAL', `could not put ${file} in WAL mode (got ${set})`);
    }
    conn.pragma(`synchronous = ${options.noSync ? 'OFF' : 'FULL'}`);
    conn.exec('BEGIN IMMEDIATE');
    try {
      if (options.integrityCheck) SqliteStore.quickCheck(conn, file);
      const tables = conn.prepare('SELECT count(*) AS n FROM sqlite_master').get() as { n: number };
      if (tables.n === 0) conn.exec(SCHEMA);
      const txid = SqliteStore.readFormat(conn, file);
      conn.exec('COMMIT');
      return txid;
    } catch (err) {
      if (conn.inTransaction) conn.exec('ROLLBACK');
      throw err;
    }
  }

  private static quickCheck(conn: Database.Database, file: string): void {
    const rows = conn.prepare('PRAGMA quick_check').pluck().all() as string[];
    if (rows.length !== 1 || rows[0] !== 'ok') throw new ErrCorrupt(file, rows.map(String));
  }

  private static readFormat(conn: Database.Database, file: string): number {
    const hasMeta = conn
      .prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name IN ('meta', 'buckets', 'kv')")
      .get() as { n: number };
    if (hasMeta.n !== 3) throw new ErrInvalid(file, 'a SQLite database that is not a csiplug state store');
    const rows = conn.prepare("SELECT name, value FROM meta WHERE name IN ('format', 'txid')").all() as { name: string; value: unknown }[];
    const meta = new Map(rows.map((r) => [r.name, r.value]));
    if (meta.get('format') !== STORE_FORMAT) {
      throw new ErrInvalid(file, `unknown store format ${JSON.stringify(meta.get('format'))} (expected ${STORE_FORMAT})`);
    }
    return Number(meta.get('txid') ?? 0);
  }

  private prepareAll() {
    const c = this.conn;
    const raw = (sql: string) => c.prepare(sql).raw(true);
    // Key and value come back as one blob, split by the key's length: half
    // the Buffer allocations per row, which is most of the cost of a scan.
    const cols = "SELECT CAST(key || ifnull(value, x'') AS BLOB), length(key), child FROM kv WHERE bucket = ?";
    return {
      begin: c.prepare('BEGIN'),
      beginImmediate: c.prepare('BEGIN IMMEDIATE'),
      commit: c.prepare('COMMIT'),
      rollback: c.prepare('ROLLBACK'),
      savepoint: c.prepare('SAVEPOINT batch_call'),
      release: c.prepare('RELEASE batch_call'),
      rollbackTo: c.prepare('ROLLBACK TO batch_call'),
      setTxid: this.readOnly ? undefined : c.prepare("UPDATE meta SET value = ? WHERE name = 'txid'"),
      get: raw('SELECT value, child FROM kv WHERE bucket = ? AND key = ?'),
      first: raw(`${cols} ORDER BY key LIMIT ?`),
      last: raw(`${cols} ORDER BY key DESC LIMIT ?`),
      ge: raw(`${cols} AND key >= ? ORDER BY key LIMIT ?`),
      gt: raw(`${cols} AND key > ? ORDER BY key LIMIT ?`),
      lt: raw(`${cols} AND key < ? ORDER BY key DESC LIMIT ?`),
      put: this.readOnly
        ? undefined
        : c.prepare(
            'INSERT INTO kv (bucket, key, value, child) VALUES (?, ?, ?, NULL) ' +
              'ON CONFLICT (bucket, key) DO UPDATE SET value = excluded.value WHERE child IS NULL',
          ),
      newBucket: this.readOnly ? undefined : c.prepare('INSERT INTO buckets (sequence) VALUES (0)'),
      link: this.readOnly ? undefined : c.prepare('INSERT INTO kv (bucket, key, value, child) VALUES (?, ?, NULL, ?)'),
      remove: this.readOnly ? undefined : c.prepare('DELETE FROM kv WHERE bucket = ? AND key = ?'),
      clear: this.readOnly ? undefined : c.prepare('DELETE FROM kv WHERE bucket = ?'),
      dropBucket: this.readOnly ? undefined : c.prepare('DELETE FROM buckets WHERE id = ?'),
      children: c.prepare('SELECT child FROM kv WHERE bucket = ? AND child IS NOT NULL').pluck(),
      count: c.prepare('SELECT count(*) FROM kv WHERE bucket = ?').pluck(),
      sequence: c.prepare('SELECT sequence FROM buckets WHERE id = ?').pluck(),
      setSequence: this.readOnly ? undefined : c.prepare('UPDATE buckets SET sequence = ? WHERE id = ?'),
    };
  }

  get txid(): number {
    return this.lastTxid;
  }

  begin(writable: boolean): void {
    // A read-only store keeps one read transaction open for its lifetime.
    if (this.readOnly) return;
    (writable ? this.stmt.beginImmediate : this.stmt.begin).run();
    this.inTx = true;
  }

  commit(txid: number): void {
    if (this.readOnly) return;
    try {
      const mark = txid > this.txidMark ? txid + TXID_BLOCK - 1 : this.txidMark;
      if (mark !== this.txidMark) this.stmt.setTxid!.run(mark);
      this.stmt.commit.run();
      this.inTx = false;
      this.lastTxid = txid;
      this.txidMark = mark;
    } catch (err) {
      this.rollback();
      throw mapSqliteError(err, this.path);
    }
  }

  rollback(): void {
    if (this.readOnly || !this.inTx) return;
    this.inTx = false;
    if (this.conn.inTransaction) this.stmt.rollback.run();
  }

  savepoint(): void {
    this.stmt.savepoint.run();
  }

  releaseSavepoint(): void {
    this.stmt.release.run();
  }

  rollbackToSavepoint(): void {
    this.stmt.rollbackTo.run();
  }

  get(bucket: number, key: Buffer): StoreEntry | undefined {
    const row = this.stmt.get.get(bucket, key) as [Buffer | null, number | null] | undefined;
    return row ? { key, value: row[0], child: row[1] } : undefined;
  }

  range(bucket: number, op: RangeOp, from: Buffer | undefined, limit: number): StoreEntry[] {
    let rows: Row[];
    switch (op) {
      case 'first':
        rows = this.stmt.first.all(bucket, limit) as Row[];
        break;
      case 'last':
        rows = this.stmt.last.all(bucket, limit) as Row[];
        break;
      case '>=':
        rows = this.stmt.ge.all(bucket, from, limit) as Row[];
        break;
      case '>':
        rows = this.stmt.gt.all(bucket, from, limit) as Row[];
        break;
      case '<':
        rows = this.stmt.lt.all(bucket, from, limit) as Row[];
        break;
    }
    const out = new Array<StoreEntry>(rows.length);
    for (let i = 0; i < rows.length; i++) {
      const [both, keyLength, child] = rows[i]!;
      out[i] = { key: both.subarray(0, keyLength), value: child === null ? both.subarray(keyLength) : null, child };
    }
    return out;
  }

  put(bucket: number, key: Buffer, value: Buffer): boolean {
    try {
      return this.writable().put!.run(bucket, key, value).changes === 1;
    } catch (err) {
      throw mapSqliteError(err, this.path);
    }
  }

  createBucket(parent: number, key: Buffer): number {
    const s = this.writable();
    // Checked first: a failed link would leave the new bucket row behind.
    if (s.sequence.get(parent) === undefined) throw new ErrBucketNotFound();
    try {
      const id = Number(s.newBucket!.run().lastInsertRowid);
      s.link!.run(parent, key, id);
      return id;
    } catch (err) {
      throw mapSqliteError(err, this.path);
    }
  }

  remove(bucket: number, key: Buffer): void {
    this.writable().remove!.run(bucket, key);
  }

  dropBucket(id: number): void {
    const s = this.writable();
    s.clear!.run(id);
    s.dropBucket!.run(id);
  }

  children(bucket: number): number[] {
    return this.stmt.children.all(bucket) as number[];
  }

  count(bucket: number): number {
    return Number(this.stmt.count.get(bucket));
  }

  exists(bucket: number): boolean {
    return this.stmt.sequence.get(bucket) !== undefined;
  }

  sequence(bucket: number): number {
    const seq = this.stmt.sequence.get(bucket) as number | undefined;
    if (seq === undefined) throw new ErrBucketNotFound();
    return seq;
  }

  setSequence(bucket: number, value: number): void {
    if (this.writable().setSequence!.run(value, bucket).changes !== 1) throw new ErrBucketNotFound();
  }

  check(): string[] {
    const c = this.conn;
    const problems = (c.prepare('PRAGMA integrity_check').pluck().all() as string[]).filter((r) => r !== 'ok');
    if (problems.length) return problems;
    const orphans = c.prepare('SELECT DISTINCT bucket FROM kv WHERE bucket NOT IN (SELECT id FROM buckets)').pluck().all() as number[];
    for (const id of orphans) problems.push(`keys of bucket ${id}, which does not exist`);
    const dangling = c
      .prepare('SELECT bucket, hex(key) AS k, child FROM kv WHERE child IS NOT NULL AND child NOT IN (SELECT id FROM buckets)')
      .all() as {
      bucket: number;
      k: string;
      child: number;
    }[];
    for (const r of dangling) problems.push(`bucket ${r.bucket} key ${r.k}: links missing bucket ${r.child}`);
    const links = c
      .prepare(
        `SELECT b.id AS id, count(k.child) AS n FROM buckets b LEFT JOIN kv k ON k.child = b.id WHERE b.id <> ${ROOT_BUCKET} GROUP BY b.id HAVING count(k.child) <> 1`,
      )
      .all() as { id: number; n: number }[];
    for (const r of links) problems.push(`bucket ${r.id}: linked ${r.n} times (expected once)`);
    return problems;
  }

  backup(dest: string): void {
    // VACUUM INTO writes a consistent, compact copy (WAL content included);
    // a temp name plus rename means a crash never leaves half a backup.
    // One fixed temp name: a leftover of a crashed run is replaced, not kept.
    // The copy holds what the store holds: it is created 0600 before VACUUM
    // INTO fills it (which takes an existing file as long as it is empty).
    const tmp = backupTempPath(dest);
    fs.rmSync(tmp, { force: true });
    try {
      if (!createPrivateFile(tmp)) {
        throw new StateError(
          'EBACKUP',
          `cannot back up to ${dest}: ${tmp} reappeared right after it was removed; is another process writing beside the store?`,
        );
      }
      this.conn.prepare('VACUUM INTO ?').run(tmp);
      fsyncPath(tmp);
      fs.renameSync(tmp, dest);
      // The rename is durable only once the directory is: the migration that
      // follows commits durably, and must not outlive its backup.
      fsyncPath(path.dirname(dest));
    } catch (err) {
      fs.rmSync(tmp, { force: true });
      throw err;
    }
  }

  close(): void {
    if (!this.conn.open) return;
    try {
      if (this.conn.inTransaction) this.conn.exec('ROLLBACK');
      if (!this.readOnly && this.txidMark !== this.lastTxid) {
        // Leave the exact last id behind so the next open continues from it.
        this.stmt.beginImmediate.run();
        this.stmt.setTxid!.run(this.lastTxid);
        this.stmt.commit.run();
      }
    } finally {
      // Even when that write fails (harmless: ids resume past the stored
      // mark), the connection — and with it the exclusive lock — goes; the
      // error still reaches the caller. Closing rolls back what is open.
      this.conn.close();
    }
  }

  private writable() {
    if (this.readOnly) throw new ErrDatabaseReadOnly(this.path);
    return this.stmt;
  }
}

function fsyncPath(p: string): void {
  const fd = fs.openSync(p, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
