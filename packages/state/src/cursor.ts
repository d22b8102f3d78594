// A cursor: bbolt's Cursor over one bucket's keys in byte order. The
// position is a key, not a page slot, so deleting the current key and moving
// on never skips the next one; forward and backward moves read a few rows
// ahead, dropped as soon as the transaction writes.
import type { Bucket } from './bucket';
import { ErrIncompatibleValue, ErrTxNotWritable } from './errors';
import { Key, toBytes } from './keys';
import { RangeOp, StoreEntry } from './store';

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
