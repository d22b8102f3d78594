// The in-memory store: the same driver contract as the SQLite one, for tests
// and for `state { backend = "memory" }`. Writes are recorded in an undo log
// so a rollback (or a batch caller's savepoint) puts everything back.
import { ErrBucketNotFound } from './errors';
import { type RangeOp, ROOT_BUCKET, type Store, type StoreEntry } from './store';
import { SortedMap } from './sorted-map';

interface Slot {
  value: Buffer | null;
  child: number | null;
}

interface MemoryBucket {
  sequence: number;
  entries: SortedMap<Slot>;
}

function copy(b: Buffer): Buffer {
  return Buffer.from(b);
}

export class MemoryStore implements Store {
  readonly path = ':memory:';
  readonly readOnly = false;
  private readonly buckets = new Map<number, MemoryBucket>([[ROOT_BUCKET, { sequence: 0, entries: new SortedMap() }]]);
  private nextBucketId = ROOT_BUCKET + 1;
  private lastTxid = 0;
  private undo: (() => void)[] | undefined;
  private savepointMark: number | undefined;
  private closed = false;

  get txid(): number {
    return this.lastTxid;
  }

  begin(writable: boolean): void {
    this.undo = writable ? [] : undefined;
  }

  commit(txid: number): void {
    this.lastTxid = txid;
    this.undo = undefined;
    this.savepointMark = undefined;
  }

  rollback(): void {
    if (this.undo) this.undoTo(0);
    this.undo = undefined;
    this.savepointMark = undefined;
  }

  savepoint(): void {
    this.savepointMark = this.log().length;
  }

  releaseSavepoint(): void {
    this.savepointMark = undefined;
  }

  rollbackToSavepoint(): void {
    if (this.savepointMark === undefined) throw new Error('no savepoint to roll back to');
    this.undoTo(this.savepointMark);
  }

  get(bucket: number, key: Buffer): StoreEntry | undefined {
    const slot = this.bucketOf(bucket)?.entries.get(key);
    return slot ? { key: copy(key), value: slot.value && copy(slot.value), child: slot.child } : undefined;
  }

  range(bucket: number, op: RangeOp, from: Buffer | undefined, limit: number): StoreEntry[] {
    const entries = this.bucketOf(bucket)?.entries;
    if (!entries) return [];
    const out: StoreEntry[] = [];
    const emit = (i: number) => {
      const slot = entries.valueAt(i);
      out.push({ key: copy(entries.keyAt(i)), value: slot.value && copy(slot.value), child: slot.child });
    };
    if (op === 'first' || op === '>=' || op === '>') {
      let i = op === 'first' ? 0 : op === '>=' ? entries.lowerBound(from!) : entries.upperBound(from!);
      for (; i < entries.size && out.length < limit; i++) emit(i);
    } else {
      let i = op === 'last' ? entries.size - 1 : entries.lowerBound(from!) - 1;
      for (; i >= 0 && out.length < limit; i--) emit(i);
    }
    return out;
  }

  put(bucket: number, key: Buffer, value: Buffer): boolean {
    const b = this.mustBucket(bucket);
    const log = this.log();
    const k = copy(key);
    const old = b.entries.set(k, { value: copy(value), child: null });
    if (old && old.child !== null) {
      b.entries.set(k, old);
      return false;
    }
    log.push(() => (old ? b.entries.set(k, old) : b.entries.delete(k)));
    return true;
  }

  createBucket(parent: number, key: Buffer): number {
    const p = this.mustBucket(parent);
    const id = this.nextBucketId++;
    const k = copy(key);
    this.buckets.set(id, { sequence: 0, entries: new SortedMap() });
    p.entries.set(k, { value: null, child: id });
    this.log().push(() => {
      p.entries.delete(k);
      this.buckets.delete(id);
    });
    return id;
  }

  remove(bucket: number, key: Buffer): void {
    const b = this.bucketOf(bucket);
    const old = b?.entries.delete(key);
    if (b && old) this.log().push(() => b.entries.set(copy(key), old));
  }

  dropBucket(id: number): void {
    const b = this.buckets.get(id);
    if (!b) return;
    this.buckets.delete(id);
    this.log().push(() => this.buckets.set(id, b));
  }

  children(bucket: number): number[] {
    const out: number[] = [];
    const b = this.bucketOf(bucket);
    if (b) for (const [, slot] of b.entries.entries()) if (slot.child !== null) out.push(slot.child);
    return out;
  }

  count(bucket: number): number {
    return this.bucketOf(bucket)?.entries.size ?? 0;
  }

  exists(bucket: number): boolean {
    return this.buckets.has(bucket);
  }

  sequence(bucket: number): number {
    return this.mustBucket(bucket).sequence;
  }

  setSequence(bucket: number, value: number): void {
    const b = this.mustBucket(bucket);
    const old = b.sequence;
    b.sequence = value;
    this.log().push(() => (b.sequence = old));
  }

  check(): string[] {
    const problems: string[] = [];
    const seen = new Map<number, number>();
    for (const [id, b] of this.buckets) {
      for (const [key, slot] of b.entries.entries()) {
        if ((slot.child === null) === (slot.value === null))
          problems.push(`bucket ${id} key ${key.toString('hex')}: must hold a value or a bucket`);
        if (slot.child !== null) {
          if (!this.buckets.has(slot.child)) problems.push(`bucket ${id} key ${key.toString('hex')}: links missing bucket ${slot.child}`);
          seen.set(slot.child, (seen.get(slot.child) ?? 0) + 1);
        }
      }
    }
    for (const id of this.buckets.keys()) {
      if (id === ROOT_BUCKET) continue;
      const n = seen.get(id) ?? 0;
      if (n !== 1) problems.push(`bucket ${id}: linked ${n} times (expected once)`);
    }
    return problems;
  }

  close(): void {
    this.closed = true;
    this.buckets.clear();
  }

  private log(): (() => void)[] {
    if (!this.undo) throw new Error(this.closed ? 'store closed' : 'write outside a write transaction');
    return this.undo;
  }

  private undoTo(mark: number): void {
    const log = this.log();
    while (log.length > mark) log.pop()!();
  }

  private bucketOf(id: number): MemoryBucket | undefined {
    return this.buckets.get(id);
  }

  private mustBucket(id: number): MemoryBucket {
    const b = this.buckets.get(id);
    if (!b) throw new ErrBucketNotFound();
    return b;
  }
}
