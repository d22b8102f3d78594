// The storage driver behind DB: a tiny interface over "buckets of ordered
// byte keys" with one implementation on SQLite and one in memory. Tx, Bucket
// and Cursor hold all of bbolt's semantics and run unchanged on either.

/** One key of a bucket: a value, or (child !== null) a nested bucket. */
export interface StoreEntry {
  key: Buffer;
  /** null for a nested bucket. */
  value: Buffer | null;
  /** The nested bucket's id, or null for a value. */
  child: number | null;
}

/** How `range` walks: `>=`/`>` ascend from `from`; `<` descends; `first`/`last` start at an end. */
export type RangeOp = 'first' | 'last' | '>=' | '>' | '<';

/** The id of the root bucket, whose keys are the top-level bucket names. */
export const ROOT_BUCKET = 0;

export interface Store {
  /** The file behind the store, or ':memory:'. */
  readonly path: string;
  readonly readOnly: boolean;

  /** The id of the last committed write transaction. */
  readonly txid: number;

  begin(writable: boolean): void;
  /** Commits a write transaction and records `txid` as its id. */
  commit(txid: number): void;
  rollback(): void;
  savepoint(): void;
  releaseSavepoint(): void;
  rollbackToSavepoint(): void;

  get(bucket: number, key: Buffer): StoreEntry | undefined;
  /** Up to `limit` entries from `from` in the direction `op` implies. */
  range(bucket: number, op: RangeOp, from: Buffer | undefined, limit: number): StoreEntry[];
  /** Stores a value; returns false (and changes nothing) when `key` names a nested bucket. */
  put(bucket: number, key: Buffer, value: Buffer): boolean;
  /** Adds a nested bucket under `key` (which must be free) and returns its id. */
  createBucket(parent: number, key: Buffer): number;
  /** Removes `key` from `bucket` (a value or the link to a nested bucket). */
  remove(bucket: number, key: Buffer): void;
  /** Removes a bucket's own keys and its record; not recursive. */
  dropBucket(id: number): void;
  /** The ids of a bucket's direct nested buckets. */
  children(bucket: number): number[];
  /** How many keys a bucket holds directly. */
  count(bucket: number): number;
  /** Whether the bucket record exists (it goes when the bucket is deleted). */
  exists(bucket: number): boolean;
  sequence(bucket: number): number;
  setSequence(bucket: number, value: number): void;

  /** Problems found by an integrity and structure check; empty when sound. */
  check(): string[];
  /** Writes a consistent copy of the store to `dest` (a file store only). */
  backup?(dest: string): void;
  close(): void;
}
