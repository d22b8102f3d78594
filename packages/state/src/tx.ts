// bbolt's transaction core: Tx, Bucket and Cursor. They reference each
// other (a tx has buckets, a bucket its tx and cursors, a cursor its
// bucket), as bbolt's tx.go, bucket.go and cursor.go do within one Go
// package, so they live in one module: split over three files they formed
// an import cycle. bucket.ts and cursor.ts re-export their parts.
//
// A transaction: bbolt's Tx. It lives only inside the callback of
// db.view / db.update / db.batch; any use after that throws ErrTxClosed.
//
// A bucket: bbolt's Bucket, an ordered collection of keys whose values are
// byte strings or nested buckets. All checks and their order follow bbolt.
//
// A cursor: bbolt's Cursor over one bucket's keys in byte order. The
// position is a key, not a page slot, so deleting the current key and moving
// on never skips the next one; forward and backward moves read a few rows
// ahead, dropped as soon as the transaction writes.
import { type BucketDirectory } from './bucket-directory';
import {
  ErrBucketExists,
  ErrBucketNameRequired,
  ErrBucketNotFound,
  ErrIncompatibleValue,
  ErrKeyRequired,
  ErrTxClosed,
  ErrTxNotWritable,
} from './errors';
import { checkKeySize, describeKey, type Key, toBytes, toValue } from './keys';
import { type RangeOp, ROOT_BUCKET, type Store, type StoreEntry } from './store';

export class Tx {
  private closed = false;
  private readonly commitHandlers: (() => void)[] = [];
  private readonly root: Bucket;
  /** @internal Bumped by every write so cursors drop what they read ahead. */
  version = 0;

  /** @internal Transactions are made by DB. */
  constructor(
    /** @internal */ readonly store: Store,
    /** @internal */ readonly directory: BucketDirectory,
    /** Whether this transaction may write (db.update / db.batch). */
    readonly writable: boolean,
    /** bbolt's transaction id: the id this write will commit as, or the last committed id for a read. */
    readonly id: number,
  ) {
    this.root = new Bucket(this, ROOT_BUCKET);
  }

  /** The top-level bucket `name`, or undefined. */
  bucket(name: Key): Bucket | undefined {
    return this.root.bucket(name);
  }

  createBucket(name: Key): Bucket {
    return this.root.createBucket(name);
  }

  createBucketIfNotExists(name: Key): Bucket {
    return this.root.createBucketIfNotExists(name);
  }

  /** Deletes a top-level bucket and everything in it. */
  deleteBucket(name: Key): void {
    this.root.deleteBucket(name);
  }

  /** Calls `fn` for each top-level bucket, in name order. */
  forEach(fn: (name: Buffer, bucket: Bucket) => void): void {
    this.root.forEachBucketEntry(fn);
  }

  /** A cursor over the top-level bucket names (values are always null). */
  cursor(): Cursor {
    return this.root.cursor();
  }

  /** Runs `fn` after this transaction commits; never for a rollback. */
  onCommit(fn: () => void): void {
    this.assertOpen();
    this.commitHandlers.push(fn);
  }

  /** Problems found by an integrity and structure check (bbolt: Tx.Check); empty when sound. */
  check(): string[] {
    this.assertOpen();
    return this.store.check();
  }

  /** @internal */
  assertOpen(): void {
    if (this.closed) throw new ErrTxClosed();
  }

  /** @internal */
  get isClosed(): boolean {
    return this.closed;
  }

  /** @internal Ends the transaction's life and hands over its commit handlers. */
  close(): (() => void)[] {
    this.closed = true;
    return this.commitHandlers.splice(0);
  }
}

/** What bbolt's Stats gives that means something here: keys (nested ones counted) and buckets (this one included). */
export interface BucketStats {
  keyN: number;
  bucketN: number;
}

export class Bucket {
  private epoch: number;

  /** @internal Buckets are reached through a Tx. */
  constructor(
    private readonly transaction: Tx,
    /** @internal */ readonly id: number,
  ) {
    this.epoch = transaction.directory.epoch;
  }

  /** The transaction this bucket belongs to. */
  get tx(): Tx {
    return this.transaction;
  }

  get writable(): boolean {
    return this.transaction.writable;
  }

  private get store(): Store {
    return this.transaction.store;
  }

  /** A copy of the value at `key`; undefined when missing or when `key` names a nested bucket. */
  get(key: Key): Buffer | undefined {
    this.transaction.assertOpen();
    const entry = this.store.get(this.id, toBytes(key));
    return entry && entry.child === null ? entry.value! : undefined;
  }

  put(key: Key, value: Uint8Array): void {
    const k = this.beginWrite(key, 'key');
    const v = toValue(value);
    this.assertAlive();
    if (!this.store.put(this.id, k, v))
      throw new ErrIncompatibleValue(`cannot put ${JSON.stringify(describeKey(k))}: the key names a nested bucket`);
    this.transaction.version++;
  }

  /** Removes `key`; a missing key is not an error, a nested bucket is (use deleteBucket). */
  delete(key: Key): void {
    this.transaction.assertOpen();
    if (!this.transaction.writable) throw new ErrTxNotWritable();
    const k = toBytes(key);
    const entry = this.store.get(this.id, k);
    if (!entry) return;
    if (entry.child !== null)
      throw new ErrIncompatibleValue(`cannot delete ${JSON.stringify(describeKey(k))} as a key: it is a nested bucket (use deleteBucket)`);
    this.store.remove(this.id, k);
    this.transaction.version++;
  }

  /** The nested bucket `name`, or undefined (also when `name` holds a value). */
  bucket(name: Key): Bucket | undefined {
    this.transaction.assertOpen();
    const k = toBytes(name);
    const directory = this.transaction.directory;
    const known = directory.get(this.id, k);
    if (known !== undefined) return new Bucket(this.transaction, known);
    const entry = this.store.get(this.id, k);
    if (!entry || entry.child === null) return undefined;
    directory.remember(this.id, k, entry.child);
    return new Bucket(this.transaction, entry.child);
  }

  createBucket(name: Key): Bucket {
    return this.makeBucket(name, false);
  }

  createBucketIfNotExists(name: Key): Bucket {
    return this.makeBucket(name, true);
  }

  private makeBucket(name: Key, existingIsFine: boolean): Bucket {
    const k = this.beginWrite(name, 'name');
    const directory = this.transaction.directory;
    // A bucket known to this transaction needs no lookup (the cache follows
    // deleteBucket and rollback, as for bucket()).
    const known = directory.get(this.id, k);
    if (known !== undefined) {
      if (existingIsFine) return new Bucket(this.transaction, known);
      throw new ErrBucketExists(describeKey(k));
    }
    const entry = this.store.get(this.id, k);
    if (entry) {
      if (entry.child === null)
        throw new ErrIncompatibleValue(`cannot create bucket ${JSON.stringify(describeKey(k))}: the key holds a value`);
      if (!existingIsFine) throw new ErrBucketExists(describeKey(k));
      directory.remember(this.id, k, entry.child);
      return new Bucket(this.transaction, entry.child);
    }
    const id = this.store.createBucket(this.id, k);
    directory.remember(this.id, k, id);
    this.transaction.version++;
    return new Bucket(this.transaction, id);
  }

  /** Deletes the nested bucket `name` with everything below it. */
  deleteBucket(name: Key): void {
    this.transaction.assertOpen();
    if (!this.transaction.writable) throw new ErrTxNotWritable();
    const k = toBytes(name);
    const entry = this.store.get(this.id, k);
    if (!entry) throw new ErrBucketNotFound(describeKey(k));
    if (entry.child === null)
      throw new ErrIncompatibleValue(`cannot delete bucket ${JSON.stringify(describeKey(k))}: the key holds a value`);
    this.dropTree(entry.child);
    this.store.remove(this.id, k);
    this.transaction.directory.invalidate();
    this.transaction.version++;
  }

  /** Calls `fn` for each key in order; `value` is null for a nested bucket. Throw to stop. */
  forEach(fn: (key: Buffer, value: Buffer | null) => void): void {
    const c = this.cursor();
    for (let e = c.first(); e; e = c.next()) fn(e[0], e[1]);
  }

  /** Calls `fn` with the name of each nested bucket, in order. */
  forEachBucket(fn: (name: Buffer) => void): void {
    const c = this.cursor();
    for (let e = c.first(); e; e = c.next()) if (c.isBucket()) fn(e[0]);
  }

  /** @internal Tx.forEach: each nested bucket with its handle. */
  forEachBucketEntry(fn: (name: Buffer, bucket: Bucket) => void): void {
    const c = this.cursor();
    for (let e = c.first(); e; e = c.next()) {
      const child = c.childId();
      if (child !== null) fn(e[0], new Bucket(this.transaction, child));
    }
  }

  cursor(): Cursor {
    this.transaction.assertOpen();
    return new Cursor(this);
  }

  /** The bucket's sequence number. */
  sequence(): number {
    this.transaction.assertOpen();
    return this.store.sequence(this.id);
  }

  setSequence(value: number): void {
    this.transaction.assertOpen();
    if (!this.transaction.writable) throw new ErrTxNotWritable();
    if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`a sequence is a non-negative safe integer, got ${value}`);
    this.store.setSequence(this.id, value);
  }

  /** Increments the sequence and returns the new value (the first call returns 1). */
  nextSequence(): number {
    this.transaction.assertOpen();
    if (!this.transaction.writable) throw new ErrTxNotWritable();
    const next = this.store.sequence(this.id) + 1;
    this.store.setSequence(this.id, next);
    return next;
  }

  stats(): BucketStats {
    this.transaction.assertOpen();
    const walk = (id: number): BucketStats => {
      const s = { keyN: this.store.count(id), bucketN: 1 };
      for (const child of this.store.children(id)) {
        const c = walk(child);
        s.keyN += c.keyN;
        s.bucketN += c.bucketN;
      }
      return s;
    };
    return walk(this.id);
  }

  /** The checks bbolt makes, in bbolt's order, before a key is written. */
  private beginWrite(key: Key, what: 'key' | 'name'): Buffer {
    this.transaction.assertOpen();
    if (!this.transaction.writable) throw new ErrTxNotWritable();
    const k = toBytes(key);
    if (k.length === 0) throw what === 'key' ? new ErrKeyRequired() : new ErrBucketNameRequired();
    checkKeySize(k);
    return k;
  }

  /** A handle kept across a bucket deletion may point at nothing: check before writing. */
  private assertAlive(): void {
    const epoch = this.transaction.directory.epoch;
    if (this.epoch === epoch) return;
    if (!this.store.exists(this.id)) throw new ErrBucketNotFound();
    this.epoch = epoch;
  }

  private dropTree(id: number): void {
    for (const child of this.store.children(id)) this.dropTree(child);
    this.store.dropBucket(id);
  }
}

/** A key and its value; the value is null for a nested bucket. */
export type CursorEntry = [key: Buffer, value: Buffer | null];

const FIRST_BATCH = 16;
const MOVE_BATCH = 256;

export class Cursor {
  /** The key the cursor is at (or, after a seek past the end, the key sought). */
  private pos: Buffer | undefined;
  private current: StoreEntry | undefined;
  private ahead: StoreEntry[] = [];
  private aheadAt = 0;
  private aheadAscending = true;
  private aheadVersion = -1;

  /** @internal Use bucket.cursor() or tx.cursor(). */
  constructor(private readonly owner: Bucket) {}

  /** The bucket this cursor walks. */
  bucket(): Bucket {
    return this.owner;
  }

  first(): CursorEntry | undefined {
    return this.load('first', undefined, FIRST_BATCH);
  }

  last(): CursorEntry | undefined {
    return this.load('last', undefined, FIRST_BATCH);
  }

  /** The next key, or undefined at the end (the cursor then stays on the last key). */
  next(): CursorEntry | undefined {
    return this.move(true);
  }

  /** The previous key, or undefined at the start (the cursor then stays on the first key). */
  prev(): CursorEntry | undefined {
    return this.move(false);
  }

  /** The first key >= `key`, or undefined when none follows. */
  seek(key: Key): CursorEntry | undefined {
    const k = toBytes(key);
    const found = this.load('>=', k, 1);
    if (!found) this.pos = Buffer.from(k);
    return found;
  }

  /** Deletes the key under the cursor; a nested bucket cannot be deleted this way. */
  delete(): void {
    const tx = this.owner.tx;
    tx.assertOpen();
    if (!tx.writable) throw new ErrTxNotWritable();
    if (!this.pos) return;
    const entry = tx.store.get(this.owner.id, this.pos);
    if (!entry) return;
    if (entry.child !== null) throw new ErrIncompatibleValue('cannot delete a nested bucket through a cursor (use deleteBucket)');
    tx.store.remove(this.owner.id, this.pos);
    tx.version++;
  }

  /** @internal Whether the current key is a nested bucket. */
  isBucket(): boolean {
    return this.current !== undefined && this.current.child !== null;
  }

  /** @internal The nested bucket id at the current key, or null. */
  childId(): number | null {
    return this.current?.child ?? null;
  }

  private move(ascending: boolean): CursorEntry | undefined {
    const tx = this.owner.tx;
    tx.assertOpen();
    if (this.pos === undefined) return ascending ? this.first() : this.last();
    if (this.aheadAscending === ascending && this.aheadVersion === tx.version && this.aheadAt + 1 < this.ahead.length) {
      this.aheadAt++;
      return this.at(this.ahead[this.aheadAt]!);
    }
    return this.load(ascending ? '>' : '<', this.pos, MOVE_BATCH);
  }

  private load(op: RangeOp, from: Buffer | undefined, limit: number): CursorEntry | undefined {
    const tx = this.owner.tx;
    tx.assertOpen();
    const rows = tx.store.range(this.owner.id, op, from, limit);
    this.ahead = rows;
    this.aheadAt = 0;
    this.aheadAscending = op !== 'last' && op !== '<';
    this.aheadVersion = tx.version;
    if (rows.length === 0) {
      // bbolt keeps its place at either end: the next move in the other direction resumes from here.
      this.current = undefined;
      return undefined;
    }
    return this.at(rows[0]!);
  }

  private at(entry: StoreEntry): CursorEntry {
    this.pos = entry.key;
    this.current = entry;
    return [entry.key, entry.child !== null ? null : entry.value];
  }
}
