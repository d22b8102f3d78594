// A transaction: bbolt's Tx. It lives only inside the callback of
// db.view / db.update / db.batch; any use after that throws ErrTxClosed.
import { Bucket } from './bucket';
import { BucketDirectory } from './bucket-directory';
import { Cursor } from './cursor';
import { ErrTxClosed } from './errors';
import { Key } from './keys';
import { ROOT_BUCKET, Store } from './store';

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
