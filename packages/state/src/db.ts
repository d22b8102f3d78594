// DB: bbolt's DB on a pluggable store (SQLite file or memory). view/update
// run a synchronous callback in one transaction; batch coalesces concurrent
// writers into one commit, each caller isolated by a savepoint.
import { type Clock, type Disposable, type Logger, RealClock } from '@csiplug/core';
import { type BatchCall, Batcher } from './batcher';
import { BucketDirectory } from './bucket-directory';
import { ErrBackupUnsupported, ErrDatabaseNotOpen, ErrDatabaseReadOnly, ErrTxAsync, ErrTxNested, ErrTxOpen } from './errors';
import { MemoryStore } from './memory-store';
import { SqliteStore } from './sqlite-store';
import { type Store } from './store';
import { Tx } from './tx';

export interface DBOptions {
  /** How long a second opener waits for the file's lock, in ms; 0 (the default) fails at once. */
  timeout?: number;
  /** Never create the file; every write fails with ErrDatabaseReadOnly. Several read-only opens may share a file. */
  readOnly?: boolean;
  /** Skip fsync on commit (synchronous=OFF): faster, but a crash may lose the latest commits. */
  noSync?: boolean;
  /** Run SQLite's quick_check when opening, before anything is written; failure throws ErrCorrupt. */
  integrityCheck?: boolean;
  /** Drives the batch delay; defaults to the wall clock. */
  clock?: Clock;
  /** bbolt's MaxBatchSize (1000). */
  maxBatchSize?: number;
  /** bbolt's MaxBatchDelay in ms (10). */
  maxBatchDelay?: number;
  /** Told about each file of the store whose mode a read-write open tightened to 0600. */
  logger?: Logger;
}

export type TxFn<T> = (tx: Tx) => T;

export const DEFAULT_MAX_BATCH_SIZE = 1000;
export const DEFAULT_MAX_BATCH_DELAY = 10;

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as PromiseLike<unknown>).then === 'function'
  );
}

/** The async callback is already reported as ErrTxAsync; its own later failure (usually ErrTxClosed) is that same mistake. */
function absorb(value: PromiseLike<unknown>): void {
  Promise.resolve(value).catch(() => undefined);
}

function runHandlers(handlers: (() => void)[]): void {
  const errors: unknown[] = [];
  for (const h of handlers) {
    try {
      h();
    } catch (err) {
      errors.push(err);
    }
  }
  if (errors.length === 1) throw errors[0];
  if (errors.length > 1) throw new AggregateError(errors, `${errors.length} onCommit handlers failed (the transaction is committed)`);
}

export class DB implements Disposable {
  private store: Store | undefined;
  private readonly filePath: string;
  private txOpen = false;
  private readonly directory = new BucketDirectory();
  private readonly batcher: Batcher<TxFn<unknown>>;

  private constructor(store: Store, options: DBOptions) {
    this.store = store;
    this.filePath = store.path;
    this.batcher = new Batcher(
      options.clock ?? new RealClock(),
      Math.max(1, options.maxBatchSize ?? DEFAULT_MAX_BATCH_SIZE),
      Math.max(0, options.maxBatchDelay ?? DEFAULT_MAX_BATCH_DELAY),
      (calls) => this.runBatch(calls),
    );
  }

  /**
   * Opens (creating unless readOnly) the SQLite-backed store at `path` and
   * holds it until close. Its files are 0600: created so, or tightened.
   */
  static open(path: string, options: DBOptions = {}): DB {
    return new DB(SqliteStore.open(path, options), options);
  }

  /** A store that lives in memory only; same semantics, nothing on disk. */
  static openMemory(options: Pick<DBOptions, 'clock' | 'maxBatchSize' | 'maxBatchDelay'> = {}): DB {
    return new DB(new MemoryStore(), options);
  }

  /** @internal A DB over any store (tests, alternative drivers). */
  static fromStore(store: Store, options: DBOptions = {}): DB {
    return new DB(store, options);
  }

  /** The file behind the DB (':memory:' for an in-memory one). */
  get path(): string {
    return this.filePath;
  }

  get readOnly(): boolean {
    return this.store?.readOnly ?? false;
  }

  get isOpen(): boolean {
    return this.store !== undefined;
  }

  /** Runs `fn` in a read-only transaction, always rolled back; returns what `fn` returns. */
  view<T>(fn: TxFn<T>): T {
    const store = this.begin('view');
    try {
      store.begin(false);
    } catch (err) {
      this.txOpen = false;
      throw err;
    }
    const tx = new Tx(store, this.directory, false, store.txid);
    try {
      const result = fn(tx);
      if (isThenable(result)) {
        absorb(result);
        throw new ErrTxAsync('view');
      }
      return result;
    } finally {
      tx.close();
      try {
        store.rollback();
      } finally {
        this.txOpen = false;
      }
    }
  }

  /** Runs `fn` in a write transaction: committed (and durable) when `fn` returns, rolled back when it throws. */
  update<T>(fn: TxFn<T>): T {
    const store = this.begin('update');
    if (store.readOnly) {
      this.txOpen = false;
      throw new ErrDatabaseReadOnly(store.path);
    }
    let handlers: (() => void)[];
    let result: T;
    try {
      store.begin(true);
      const tx = new Tx(store, this.directory, true, store.txid + 1);
      try {
        result = fn(tx);
        if (isThenable(result)) {
          absorb(result);
          throw new ErrTxAsync('update');
        }
      } catch (err) {
        tx.close();
        this.directory.invalidate();
        store.rollback();
        throw err;
      }
      handlers = tx.close();
      try {
        store.commit(tx.id);
      } catch (err) {
        // The store rolled back: anything the directory learned in this transaction may be gone.
        this.directory.invalidate();
        throw err;
      }
    } finally {
      this.txOpen = false;
    }
    runHandlers(handlers);
    return result;
  }

  /**
   * Runs `fn` in a write transaction shared with other concurrent callers
   * (up to maxBatchSize callers or maxBatchDelay ms). A caller whose `fn`
   * throws is rolled back alone and its promise rejects; the others commit.
   */
  batch(fn: TxFn<void>): Promise<void> {
    if (!this.store) return Promise.reject(new ErrDatabaseNotOpen());
    if (this.store.readOnly) return Promise.reject(new ErrDatabaseReadOnly(this.store.path));
    return this.batcher.add(fn);
  }

  /** Problems found by an integrity and structure check; empty when sound. */
  check(): string[] {
    return this.view((tx) => tx.check());
  }

  /** Writes a consistent copy (0600) of the file to `dest` (outside any transaction). Not available in memory. */
  backup(dest: string): void {
    const store = this.store;
    if (!store) throw new ErrDatabaseNotOpen();
    if (this.txOpen) throw new ErrTxOpen('back up', store.path);
    if (!store.backup) throw new ErrBackupUnsupported(store.path);
    store.backup(dest);
  }

  /**
   * Commits what batch callers are waiting for, then releases the file.
   * Closing twice is harmless. `close` mirrors bbolt's DB.Close (this class
   * keeps bbolt's API); `dispose()`, the codebase's teardown verb, is the same.
   */
  close(): void {
    if (!this.store) return;
    if (this.txOpen) throw new ErrTxOpen('close', this.store.path);
    this.batcher.flush();
    const store = this.store;
    this.store = undefined;
    store.close();
  }

  dispose(): void {
    this.close();
  }

  private begin(kind: 'view' | 'update'): Store {
    if (!this.store) throw new ErrDatabaseNotOpen();
    if (this.txOpen) throw new ErrTxNested(kind);
    this.txOpen = true;
    return this.store;
  }

  private runBatch(calls: BatchCall<TxFn<unknown>>[]): void {
    const store = this.store;
    if (!store) {
      for (const c of calls) c.reject(new ErrDatabaseNotOpen());
      return;
    }
    // Timers and microtasks never fire inside a synchronous transaction, so none is open here.
    this.txOpen = true;
    const failures = new Map<number, unknown>();
    const handlers = new Map<number, (() => void)[]>();
    let commitError: unknown;
    let committed = false;
    try {
      store.begin(true);
      const id = store.txid + 1;
      calls.forEach((call, i) => {
        store.savepoint();
        const tx = new Tx(store, this.directory, true, id);
        try {
          const result = call.fn(tx);
          if (isThenable(result)) {
            absorb(result);
            throw new ErrTxAsync('batch');
          }
          handlers.set(i, tx.close());
        } catch (err) {
          tx.close();
          failures.set(i, err);
          this.directory.invalidate();
          store.rollbackToSavepoint();
        }
        store.releaseSavepoint();
      });
      if (failures.size < calls.length) {
        store.commit(id);
        committed = true;
      } else {
        store.rollback();
      }
    } catch (err) {
      commitError = err;
      this.directory.invalidate();
      try {
        store.rollback();
      } catch {
        // The commit error says what went wrong; a failed rollback adds nothing.
      }
    } finally {
      this.txOpen = false;
    }
    calls.forEach((call, i) => {
      if (failures.has(i)) return call.reject(failures.get(i));
      if (commitError !== undefined) return call.reject(commitError);
      try {
        // The commit stands; a throwing onCommit handler fails only its own caller's promise.
        if (committed) runHandlers(handlers.get(i) ?? []);
        call.resolve();
      } catch (err) {
        call.reject(err);
      }
    });
  }
}
