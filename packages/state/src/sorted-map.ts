// An ordered map from byte keys to values, kept as sorted arrays: binary
// search for lookups, splice for changes. Keys are compared as latin1
// strings — one code unit per byte, so JS string order is memcmp order
// (shorter first on a common prefix) without a native call per comparison.

export class SortedMap<V> {
  private readonly order: string[] = [];
  private readonly keys: Buffer[] = [];
  private readonly values: V[] = [];

  get size(): number {
    return this.keys.length;
  }

  /** Index of the first key >= `key`. */
  lowerBound(key: Buffer): number {
    return this.search(key.toString('latin1'));
  }

  /** Index of the first key > `key`. */
  upperBound(key: Buffer): number {
    const k = key.toString('latin1');
    const i = this.search(k);
    return i < this.order.length && this.order[i] === k ? i + 1 : i;
  }

  get(key: Buffer): V | undefined {
    const k = key.toString('latin1');
    const i = this.search(k);
    return this.order[i] === k ? this.values[i] : undefined;
  }

  /** Sets `key`; returns the value it replaced. */
  set(key: Buffer, value: V): V | undefined {
    const k = key.toString('latin1');
    const i = this.search(k);
    if (this.order[i] === k) {
      const old = this.values[i];
      this.values[i] = value;
      return old;
    }
    this.order.splice(i, 0, k);
    this.keys.splice(i, 0, key);
    this.values.splice(i, 0, value);
    return undefined;
  }

  /** Removes `key`; returns the value it held. */
  delete(key: Buffer): V | undefined {
    const k = key.toString('latin1');
    const i = this.search(k);
    if (this.order[i] !== k) return undefined;
    const old = this.values[i];
    this.order.splice(i, 1);
    this.keys.splice(i, 1);
    this.values.splice(i, 1);
    return old;
  }

  keyAt(i: number): Buffer {
    return this.keys[i]!;
  }

  valueAt(i: number): V {
    return this.values[i]!;
  }

  *entries(): IterableIterator<[Buffer, V]> {
    for (let i = 0; i < this.keys.length; i++) yield [this.keys[i]!, this.values[i]!];
  }

  private search(k: string): number {
    const order = this.order;
    let hi = order.length;
    // Appends in key order are the common case: check the end first.
    if (hi === 0 || order[hi - 1]! < k) return hi;
    let lo = 0;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (order[mid]! < k) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
