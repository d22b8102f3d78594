// A bucket: bbolt's Bucket, an ordered collection of keys whose values are
// byte strings or nested buckets. All checks and their order follow bbolt.
import { Cursor } from './cursor';
import { ErrBucketExists, ErrBucketNameRequired, ErrBucketNotFound, ErrIncompatibleValue, ErrKeyRequired, ErrTxNotWritable } from './errors';
import { checkKeySize, describeKey, Key, toBytes, toValue } from './keys';
import { Store } from './store';
import type { Tx } from './tx';

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
    if (!this.store.put(this.id, k, v)) throw new ErrIncompatibleValue(`cannot put ${JSON.stringify(describeKey(k))}: the key names a nested bucket`);
    this.transaction.version++;
  }

  /** Removes `key`; a missing key is not an error, a nested bucket is (use deleteBucket). */
  delete(key: Key): void {
    this.transaction.assertOpen();
    if (!this.transaction.writable) throw new ErrTxNotWritable();
    const k = toBytes(key);
    const entry = this.store.get(this.id, k);
    if (!entry) return;
    if (entry.child !== null) throw new ErrIncompatibleValue(`cannot delete ${JSON.stringify(describeKey(k))} as a key: it is a nested bucket (use deleteBucket)`);
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
      if (entry.child === null) throw new ErrIncompatibleValue(`cannot create bucket ${JSON.stringify(describeKey(k))}: the key holds a value`);
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
    if (entry.child === null) throw new ErrIncompatibleValue(`cannot delete bucket ${JSON.stringify(describeKey(k))}: the key holds a value`);
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
