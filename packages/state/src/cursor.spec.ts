// Conformance: bbolt's cursor_test.go behaviours, run against both stores.
import { BACKENDS, randomItems, thrown, u64, useBackend } from '../test/support/backends';

const b = (s: string) => Buffer.from(s);
const keyOf = (e: [Buffer, Buffer | null] | undefined) => e?.[0].toString();

describe.each(BACKENDS)('Cursor conformance (%s)', (kind) => {
  const h = useBackend(kind);

  test('a cursor returns the bucket that made it (TestCursor_Bucket)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      expect(w.cursor().bucket()).toBe(w);
    });
  });

  test('Seek goes to the key or the next one; past the end gives undefined; buckets have null values (TestCursor_Seek)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      w.put('foo', b('0001'));
      w.put('bar', b('0002'));
      w.put('baz', b('0003'));
      w.createBucket('bkt');
    });
    h.db.view((tx) => {
      const c = tx.bucket('widgets')!.cursor();
      expect(c.seek('bar')).toEqual([b('bar'), b('0002')]);
      expect(c.seek('bas')).toEqual([b('baz'), b('0003')]);
      expect(c.seek('')).toEqual([b('bar'), b('0002')]);
      expect(c.seek('zzz')).toBeUndefined();
      expect(c.seek('bkt')).toEqual([b('bkt'), null]);
    });
  });

  test('deleting the current key during a forward scan skips nothing (TestCursor_Delete)', () => {
    const count = 1000;
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      for (let i = 0; i < count; i++) w.put(u64(i), Buffer.alloc(100));
      w.createBucket('sub');
    });
    h.db.update((tx) => {
      const c = tx.bucket('widgets')!.cursor();
      const bound = u64(count / 2);
      let deleted = 0;
      for (let e = c.first(); e && Buffer.compare(e[0], bound) < 0; e = c.next()) {
        c.delete();
        deleted++;
      }
      expect(deleted).toBe(count / 2);
      c.seek('sub');
      expect(thrown(() => c.delete()).code).toBe('ErrIncompatibleValue');
    });
    h.db.view((tx) => expect(tx.bucket('widgets')!.stats().keyN).toBe(count / 2 + 1));
  });

  test('Seek among many keys always lands on the key or the next (TestCursor_Seek_Large)', () => {
    const count = 10000;
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      for (let i = 0; i < count; i += 100) for (let j = i; j < i + 100; j += 2) w.put(u64(j), Buffer.alloc(100));
    });
    h.db.view((tx) => {
      const c = tx.bucket('widgets')!.cursor();
      for (let i = 0; i < count; i++) {
        const e = c.seek(u64(i));
        if (i === count - 1) {
          expect(e).toBeUndefined();
          continue;
        }
        const num = Number(e![0].readBigUInt64BE());
        if (num !== (i % 2 === 0 ? i : i + 1)) throw new Error(`seek ${i} landed on ${num}`);
      }
    });
  });

  test('First and Last of an empty bucket give undefined (TestCursor_EmptyBucket / _EmptyBucketReverse)', () => {
    h.db.update((tx) => tx.createBucket('widgets'));
    h.db.view((tx) => {
      const c = tx.bucket('widgets')!.cursor();
      expect(c.first()).toBeUndefined();
      expect(c.last()).toBeUndefined();
      expect(c.next()).toBeUndefined();
      expect(c.prev()).toBeUndefined();
    });
  });

  test('iterates forward; Next past the end keeps giving undefined (TestCursor_Iterate_Leaf)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      w.put('baz', Buffer.alloc(0));
      w.put('foo', Buffer.from([0]));
      w.put('bar', Buffer.from([1]));
    });
    h.db.view((tx) => {
      const c = tx.bucket('widgets')!.cursor();
      expect(c.first()).toEqual([b('bar'), Buffer.from([1])]);
      expect(c.next()).toEqual([b('baz'), Buffer.alloc(0)]);
      expect(c.next()).toEqual([b('foo'), Buffer.from([0])]);
      expect(c.next()).toBeUndefined();
      expect(c.next()).toBeUndefined();
    });
  });

  test('iterates backward; Prev past the start keeps giving undefined (TestCursor_LeafRootReverse)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      w.put('baz', Buffer.alloc(0));
      w.put('foo', Buffer.from([0]));
      w.put('bar', Buffer.from([1]));
    });
    h.db.view((tx) => {
      const c = tx.bucket('widgets')!.cursor();
      expect(c.last()).toEqual([b('foo'), Buffer.from([0])]);
      expect(c.prev()).toEqual([b('baz'), Buffer.alloc(0)]);
      expect(c.prev()).toEqual([b('bar'), Buffer.from([1])]);
      expect(c.prev()).toBeUndefined();
      expect(c.prev()).toBeUndefined();
    });
  });

  test('First restarts a cursor (TestCursor_Restart)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      w.put('bar', Buffer.alloc(0));
      w.put('foo', Buffer.alloc(0));
    });
    h.db.view((tx) => {
      const c = tx.bucket('widgets')!.cursor();
      expect(keyOf(c.first())).toBe('bar');
      expect(keyOf(c.next())).toBe('foo');
      expect(keyOf(c.first())).toBe('bar');
      expect(keyOf(c.next())).toBe('foo');
    });
  });

  test('iteration after many deletes sees exactly the rest (TestCursor_First_EmptyPages / _Last_EmptyPages)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      for (let i = 0; i < 1000; i++) w.put(u64(i), Buffer.alloc(0));
    });
    h.db.update((tx) => {
      const w = tx.bucket('widgets')!;
      for (let i = 0; i < 600; i++) w.delete(u64(i));
      let n = 0;
      const c = w.cursor();
      for (let e = c.first(); e; e = c.next()) n++;
      expect(n).toBe(400);
    });
    h.db.update((tx) => {
      const w = tx.bucket('widgets')!;
      for (let i = 800; i < 1000; i++) w.delete(u64(i));
      let n = 0;
      const c = w.cursor();
      for (let e = c.last(); e; e = c.prev()) n++;
      expect(n).toBe(200);
    });
  });

  test('forward iteration returns random items in byte order (TestCursor_QuickCheck)', () => {
    const items = randomItems(3, 500);
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      for (const it of items) w.put(it.key, it.value);
    });
    items.sort((x, y) => Buffer.compare(x.key, y.key));
    h.db.view((tx) => {
      const c = tx.bucket('widgets')!.cursor();
      let i = 0;
      for (let e = c.first(); e; e = c.next(), i++) {
        if (!e[0].equals(items[i]!.key) || !e[1]!.equals(items[i]!.value)) throw new Error(`item ${i} out of order`);
      }
      expect(i).toBe(items.length);
    });
  });

  test('reverse iteration returns random items in reverse byte order (TestCursor_QuickCheck_Reverse)', () => {
    const items = randomItems(5, 500);
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      for (const it of items) w.put(it.key, it.value);
    });
    items.sort((x, y) => Buffer.compare(y.key, x.key));
    h.db.view((tx) => {
      const c = tx.bucket('widgets')!.cursor();
      let i = 0;
      for (let e = c.last(); e; e = c.prev(), i++) {
        if (!e[0].equals(items[i]!.key) || !e[1]!.equals(items[i]!.value)) throw new Error(`item ${i} out of order`);
      }
      expect(i).toBe(items.length);
    });
  });

  test('a cursor walks nested buckets with null values, both ways (TestCursor_QuickCheck_BucketsOnly / _Reverse)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      for (const n of ['foo', 'bar', 'baz']) w.createBucket(n);
    });
    h.db.view((tx) => {
      const c = tx.bucket('widgets')!.cursor();
      const fwd: (string | Buffer | null)[] = [];
      for (let e = c.first(); e; e = c.next()) fwd.push(e[0].toString(), e[1]);
      const back: string[] = [];
      for (let e = c.last(); e; e = c.prev()) back.push(e[0].toString());
      expect(fwd).toEqual(['bar', null, 'baz', null, 'foo', null]);
      expect(back).toEqual(['foo', 'baz', 'bar']);
    });
  });

  test('after running off either end a cursor turns back from the edge key (TestCursor_RepeatOperations)', () => {
    h.db.update((tx) => {
      const w = tx.createBucketIfNotExists('data');
      for (let i = 0; i < 1000; i++) w.put(String(i).padStart(5, '0'), b(String(i)));
    });
    const k = (i: number) => String(i).padStart(5, '0');
    h.db.view((tx) => {
      // NextPrevNext
      const c = tx.bucket('data')!.cursor();
      expect(keyOf(c.seek(k(0)))).toBe(k(0));
      for (let i = 1; i < 1000; i++) if (keyOf(c.next()) !== k(i)) throw new Error(`next ${i}`);
      for (let i = 0; i < 10; i++) expect(c.next()).toBeUndefined();
      for (let i = 998; i >= 0; i--) if (keyOf(c.prev()) !== k(i)) throw new Error(`prev ${i}`);
      for (let i = 0; i < 10; i++) expect(c.prev()).toBeUndefined();
      for (let i = 1; i < 1000; i++) if (keyOf(c.next()) !== k(i)) throw new Error(`next again ${i}`);
      // PrevNextPrev
      const d = tx.bucket('data')!.cursor();
      expect(keyOf(d.seek(k(998)))).toBe(k(998));
      for (let i = 997; i >= 0; i--) if (keyOf(d.prev()) !== k(i)) throw new Error(`prev ${i}`);
      for (let i = 0; i < 10; i++) expect(d.prev()).toBeUndefined();
      for (let i = 1; i < 1000; i++) if (keyOf(d.next()) !== k(i)) throw new Error(`next ${i}`);
      for (let i = 0; i < 10; i++) expect(d.next()).toBeUndefined();
      for (let i = 998; i >= 0; i--) if (keyOf(d.prev()) !== k(i)) throw new Error(`prev again ${i}`);
    });
  });

  test('Prev after a Seek past the end gives the last key', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('w');
      for (const k of ['a', 'b', 'c']) w.put(k, b(k));
    });
    h.db.view((tx) => {
      const c = tx.bucket('w')!.cursor();
      expect(c.seek('zzz')).toBeUndefined();
      expect(keyOf(c.prev())).toBe('c');
      expect(keyOf(c.seek('bb'))).toBe('c');
      expect(keyOf(c.prev())).toBe('b');
    });
  });

  test('keys sort byte-wise: memcmp order, shorter first on a common prefix', () => {
    const keys = [
      Buffer.from([0xff]),
      Buffer.from([0x00]),
      Buffer.from([0x00, 0x00]),
      Buffer.from([0x7f, 0x01]),
      Buffer.from([0x80]),
      b('a'),
      b('ab'),
      b('B'),
      Buffer.from([0x00, 0xff, 0x01]),
    ];
    h.db.update((tx) => {
      const w = tx.createBucket('w');
      for (const k of keys) w.put(k, k);
    });
    const got: string[] = [];
    h.db.view((tx) => tx.bucket('w')!.forEach((k) => got.push(k.toString('hex'))));
    expect(got).toEqual([...keys].sort(Buffer.compare).map((k) => k.toString('hex')));
    expect(got).toEqual(['00', '0000', '00ff01', '42', '61', '6162', '7f01', '80', 'ff']);
  });

  test('a cursor sees writes made earlier in its own transaction, even mid-scan', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('w');
      for (let i = 0; i < 50; i++) w.put(u64(i * 2), b('even'));
      const c = w.cursor();
      let e = c.first();
      for (let i = 0; i < 10; i++) e = c.next();
      expect(Number(e![0].readBigUInt64BE())).toBe(20);
      w.put(u64(21), b('odd'));
      expect(c.next()).toEqual([u64(21), b('odd')]);
      expect(Number(c.next()![0].readBigUInt64BE())).toBe(22);
    });
  });

  test('Delete through a cursor in a read-only transaction fails with ErrTxNotWritable', () => {
    h.db.update((tx) => tx.createBucket('w').put('a', b('1')));
    h.db.view((tx) => {
      const c = tx.bucket('w')!.cursor();
      c.first();
      expect(thrown(() => c.delete()).code).toBe('ErrTxNotWritable');
    });
  });

  test('a cursor used after its transaction closed fails with ErrTxClosed', () => {
    h.db.update((tx) => tx.createBucket('w').put('a', b('1')));
    const c = h.db.view((tx) => tx.bucket('w')!.cursor());
    expect(thrown(() => c.first()).code).toBe('ErrTxClosed');
    expect(thrown(() => c.next()).code).toBe('ErrTxClosed');
  });
});
