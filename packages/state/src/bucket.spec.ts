// Conformance: bbolt's bucket_test.go behaviours, run against both stores.
import { Bucket } from './bucket';
import { MAX_KEY_SIZE } from './keys';
import { BACKENDS, randomItems, thrown, u64, useBackend } from '../test/support/backends';

const b = (s: string) => Buffer.from(s);

describe.each(BACKENDS)('Bucket conformance (%s)', (kind) => {
  const h = useBackend(kind);

  test('nested buckets created and then rolled back are gone, cached or not (createBucketIfNotExists)', () => {
    h.db.update((tx) => {
      tx.createBucket('root').createBucketIfNotExists('kept').put('k', b('v'));
    });
    expect(() =>
      h.db.update((tx) => {
        const root = tx.bucket('root')!;
        root.createBucketIfNotExists('gone').put('x', b('y'));
        expect(root.createBucketIfNotExists('gone').get('x')).toEqual(b('y'));
        expect(thrown(() => root.createBucket('gone')).code).toBe('ErrBucketExists');
        throw new Error('roll back');
      }),
    ).toThrow('roll back');
    h.db.update((tx) => {
      const root = tx.bucket('root')!;
      expect(root.bucket('gone')).toBeUndefined();
      expect(root.createBucketIfNotExists('gone').get('x')).toBeUndefined();
      expect(root.createBucketIfNotExists('kept').get('k')).toEqual(b('v'));
      root.deleteBucket('kept');
      expect(root.createBucketIfNotExists('kept').get('k')).toBeUndefined();
    });
  });

  test('Get of a missing key returns undefined (TestBucket_Get_NonExistent)', () => {
    h.db.update((tx) => {
      expect(tx.createBucket('widgets').get('foo')).toBeUndefined();
    });
  });

  test('a value put in a transaction is readable in it (TestBucket_Get_FromNode)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      w.put('foo', b('bar'));
      expect(w.get('foo')).toEqual(b('bar'));
    });
  });

  test('Get of a nested bucket name returns undefined (TestBucket_Get_IncompatibleValue)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      w.createBucket('foo');
      expect(w.get('foo')).toBeUndefined();
    });
  });

  test('Get returns a copy that outlives the transaction and does not alias the store', () => {
    const got = h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      w.put('k', b('value'));
      return w.get('k')!;
    });
    got[0] = 0x58;
    expect(got.toString()).toBe('Xalue');
    expect(h.db.view((tx) => tx.bucket('widgets')!.get('k')!.toString())).toBe('value');
  });

  test('Put stores a value that a later transaction reads (TestBucket_Put)', () => {
    h.db.update((tx) => tx.createBucket('widgets').put('foo', b('bar')));
    expect(h.db.view((tx) => tx.bucket('widgets')!.get('foo'))).toEqual(b('bar'));
  });

  test('Put on an existing key overwrites it (TestBucket_Put_Repeat)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      w.put('foo', b('bar'));
      w.put('foo', b('baz'));
    });
    expect(h.db.view((tx) => tx.bucket('widgets')!.get('foo'))).toEqual(b('baz'));
  });

  test('Put of many keys of growing size (TestBucket_Put_Large)', () => {
    const count = 100;
    const factor = 200;
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      for (let i = 1; i < count; i++) w.put('0'.repeat(i * factor), Buffer.alloc((count - i) * factor, 'X'));
    });
    h.db.view((tx) => {
      const w = tx.bucket('widgets')!;
      for (let i = 1; i < count; i++) expect(w.get('0'.repeat(i * factor))?.equals(Buffer.alloc((count - i) * factor, 'X'))).toBe(true);
    });
  });

  test('Put on a nested bucket name fails with ErrIncompatibleValue (TestBucket_Put_IncompatibleValue)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      w.createBucket('foo');
      expect(thrown(() => w.put('foo', b('bar'))).code).toBe('ErrIncompatibleValue');
      expect(w.bucket('foo')).toBeInstanceOf(Bucket);
    });
  });

  test('Put after the transaction closed fails with ErrTxClosed (TestBucket_Put_Closed)', () => {
    const w = h.db.update((tx) => tx.createBucket('widgets'));
    expect(thrown(() => w.put('foo', b('bar'))).code).toBe('ErrTxClosed');
    expect(thrown(() => w.get('foo')).code).toBe('ErrTxClosed');
  });

  test('Put in a read-only transaction fails with ErrTxNotWritable (TestBucket_Put_ReadOnly)', () => {
    h.db.update((tx) => tx.createBucket('widgets'));
    h.db.view((tx) => {
      expect(thrown(() => tx.bucket('widgets')!.put('foo', b('bar'))).code).toBe('ErrTxNotWritable');
    });
  });

  test('Put with an empty key fails with ErrKeyRequired (TestBucket_Put_EmptyKey)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      expect(thrown(() => w.put('', b('bar'))).code).toBe('ErrKeyRequired');
      expect(thrown(() => w.put(new Uint8Array(0), b('bar'))).code).toBe('ErrKeyRequired');
    });
  });

  test('Put with a key over 32768 bytes fails with ErrKeyTooLarge (TestBucket_Put_KeyTooLarge)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      expect(thrown(() => w.put(Buffer.alloc(MAX_KEY_SIZE + 1), b('bar'))).code).toBe('ErrKeyTooLarge');
      w.put(Buffer.alloc(MAX_KEY_SIZE, 1), b('ok'));
      expect(w.get(Buffer.alloc(MAX_KEY_SIZE, 1))).toEqual(b('ok'));
    });
  });

  test('Put with a value over the limit fails with ErrValueTooLarge (TestBucket_Put_ValueTooLarge)', () => {
    // 2^31 bytes of untouched zero pages: only reserved, never written.
    const huge = new Uint8Array(2 ** 31);
    h.db.update((tx) => {
      expect(thrown(() => tx.createBucket('widgets').put('foo', huge)).code).toBe('ErrValueTooLarge');
    });
  });

  test('a zero-length value is a value, distinct from a nested bucket', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      w.put('empty', Buffer.alloc(0));
      w.createBucket('sub');
    });
    h.db.view((tx) => {
      const w = tx.bucket('widgets')!;
      expect(w.get('empty')).toEqual(Buffer.alloc(0));
      expect(w.get('sub')).toBeUndefined();
      const seen: [string, Buffer | null][] = [];
      w.forEach((k, v) => seen.push([k.toString(), v]));
      expect(seen).toEqual([
        ['empty', Buffer.alloc(0)],
        ['sub', null],
      ]);
    });
  });

  test('Delete removes a key (TestBucket_Delete)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      w.put('foo', b('bar'));
      w.delete('foo');
      expect(w.get('foo')).toBeUndefined();
      w.delete('never-there');
    });
  });

  test('Delete of many keys (TestBucket_Delete_Large)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      for (let i = 0; i < 100; i++) w.put(String(i), Buffer.alloc(1024, '*'));
    });
    h.db.update((tx) => {
      const w = tx.bucket('widgets')!;
      for (let i = 0; i < 100; i++) w.delete(String(i));
    });
    h.db.view((tx) => {
      const w = tx.bucket('widgets')!;
      for (let i = 0; i < 100; i++) expect(w.get(String(i))).toBeUndefined();
      expect(w.stats().keyN).toBe(0);
    });
  });

  test('Delete of a nested bucket name fails with ErrIncompatibleValue (TestBucket_Delete_Bucket)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      w.createBucket('foo');
      expect(thrown(() => w.delete('foo')).code).toBe('ErrIncompatibleValue');
    });
  });

  test('Delete in a read-only transaction fails with ErrTxNotWritable (TestBucket_Delete_ReadOnly)', () => {
    h.db.update((tx) => tx.createBucket('widgets').put('foo', b('bar')));
    h.db.view((tx) => expect(thrown(() => tx.bucket('widgets')!.delete('foo')).code).toBe('ErrTxNotWritable'));
  });

  test('Delete after the transaction closed fails with ErrTxClosed (TestBucket_Delete_Closed)', () => {
    const w = h.db.update((tx) => tx.createBucket('widgets'));
    expect(thrown(() => w.delete('foo')).code).toBe('ErrTxClosed');
  });

  test('nested buckets keep their own keys across commits (TestBucket_Nested)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      w.createBucket('foo');
      w.put('bar', b('0000'));
    });
    h.db.update((tx) => tx.bucket('widgets')!.put('bar', b('xxxx')));
    h.db.update((tx) => {
      const w = tx.bucket('widgets')!;
      for (let i = 0; i < 100; i++) w.bucket('foo')!.put(String(i), b(String(i)));
    });
    h.db.update((tx) => tx.bucket('widgets')!.put('baz', b('yyyy')));
    h.db.view((tx) => {
      const w = tx.bucket('widgets')!;
      expect(w.get('bar')).toEqual(b('xxxx'));
      expect(w.get('baz')).toEqual(b('yyyy'));
      for (let i = 0; i < 100; i++) expect(w.bucket('foo')!.get(String(i))).toEqual(b(String(i)));
    });
  });

  test('DeleteBucket removes a nested tree; re-creating it gives an empty bucket (TestBucket_DeleteBucket_Nested)', () => {
    h.db.update((tx) => {
      const foo = tx.createBucket('widgets').createBucket('foo');
      const bar = foo.createBucket('bar');
      bar.put('baz', b('bat'));
      bar.createBucket('deeper').put('x', b('y'));
    });
    const before = h.db.view((tx) => tx.bucket('widgets')!.stats());
    expect(before).toEqual({ keyN: 5, bucketN: 4 });
    h.db.update((tx) => tx.bucket('widgets')!.deleteBucket('foo'));
    h.db.update((tx) => {
      const w = tx.bucket('widgets')!;
      expect(w.bucket('foo')).toBeUndefined();
      const foo = w.createBucket('foo');
      expect(foo.bucket('bar')).toBeUndefined();
      expect(foo.stats()).toEqual({ keyN: 0, bucketN: 1 });
    });
    expect(h.db.check()).toEqual([]);
  });

  test('DeleteBucket of a large bucket (TestBucket_DeleteBucket_Large)', () => {
    h.db.update((tx) => {
      const foo = tx.createBucket('widgets').createBucket('foo');
      for (let i = 0; i < 1000; i++) foo.put(String(i), b(`${i}`.padEnd(100, '.')));
    });
    h.db.update((tx) => tx.bucket('widgets')!.deleteBucket('foo'));
    h.db.view((tx) => expect(tx.bucket('widgets')!.stats()).toEqual({ keyN: 0, bucketN: 1 }));
    expect(h.db.check()).toEqual([]);
  });

  test('a handle to a deleted bucket reads nothing and cannot write', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      const foo = w.createBucket('foo');
      foo.put('a', b('1'));
      w.deleteBucket('foo');
      expect(foo.get('a')).toBeUndefined();
      expect(thrown(() => foo.put('a', b('2'))).code).toBe('ErrBucketNotFound');
      expect(thrown(() => foo.createBucket('x')).code).toBe('ErrBucketNotFound');
    });
    expect(h.db.check()).toEqual([]);
  });

  test('Bucket on a value returns undefined (TestBucket_Bucket_IncompatibleValue)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      w.put('foo', b('bar'));
      expect(w.bucket('foo')).toBeUndefined();
    });
  });

  test('CreateBucket on a value fails with ErrIncompatibleValue (TestBucket_CreateBucket_IncompatibleValue)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      w.put('foo', b('bar'));
      expect(thrown(() => w.createBucket('foo')).code).toBe('ErrIncompatibleValue');
      expect(thrown(() => w.createBucketIfNotExists('foo')).code).toBe('ErrIncompatibleValue');
    });
  });

  test('DeleteBucket on a value fails with ErrIncompatibleValue (TestBucket_DeleteBucket_IncompatibleValue)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      w.put('foo', b('bar'));
      expect(thrown(() => w.deleteBucket('foo')).code).toBe('ErrIncompatibleValue');
      expect(w.get('foo')).toEqual(b('bar'));
    });
  });

  test('SetSequence and Sequence persist (TestBucket_Sequence)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('0');
      expect(w.sequence()).toBe(0);
      w.setSequence(1000);
      expect(w.sequence()).toBe(1000);
    });
    h.db.view((tx) => expect(tx.bucket('0')!.sequence()).toBe(1000));
  });

  test('NextSequence counts per bucket from 1 (TestBucket_NextSequence)', () => {
    h.db.update((tx) => {
      const widgets = tx.createBucket('widgets');
      const woojits = tx.createBucket('woojits');
      expect(widgets.nextSequence()).toBe(1);
      expect(widgets.nextSequence()).toBe(2);
      expect(woojits.nextSequence()).toBe(1);
    });
  });

  test('NextSequence persists across commits and rolls back with its transaction (TestBucket_NextSequence_Persist)', () => {
    h.db.update((tx) => tx.createBucket('widgets'));
    h.db.update((tx) => tx.bucket('widgets')!.nextSequence());
    expect(() =>
      h.db.update((tx) => {
        tx.bucket('widgets')!.nextSequence();
        throw new Error('abort');
      }),
    ).toThrow('abort');
    h.db.update((tx) => expect(tx.bucket('widgets')!.nextSequence()).toBe(2));
  });

  test('NextSequence in a read-only or closed transaction fails (TestBucket_NextSequence_ReadOnly/_Closed)', () => {
    const w = h.db.update((tx) => tx.createBucket('widgets'));
    h.db.view((tx) => expect(thrown(() => tx.bucket('widgets')!.nextSequence()).code).toBe('ErrTxNotWritable'));
    expect(thrown(() => w.nextSequence()).code).toBe('ErrTxClosed');
  });

  test('ForEach visits keys in order with null for nested buckets (TestBucket_ForEach)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      w.put('foo', b('0000'));
      w.put('baz', b('0001'));
      w.put('bar', b('0002'));
      w.createBucket('csubbucket');
    });
    const seen: [string, string | null][] = [];
    h.db.view((tx) => tx.bucket('widgets')!.forEach((k, v) => seen.push([k.toString(), v && v.toString()])));
    expect(seen).toEqual([
      ['bar', '0002'],
      ['baz', '0001'],
      ['csubbucket', null],
      ['foo', '0000'],
    ]);
  });

  test('ForEachBucket visits only nested buckets (TestBucket_ForEachBucket / _NoBuckets)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      w.put('foo', b('0000'));
      w.createBucket('zsubbucket');
      w.put('baz', b('0001'));
      w.createBucket('csubbucket');
      tx.createBucket('empty').put('k', b('v'));
    });
    const names: string[] = [];
    const none: string[] = [];
    h.db.view((tx) => {
      tx.bucket('widgets')!.forEachBucket((n) => names.push(n.toString()));
      tx.bucket('empty')!.forEachBucket((n) => none.push(n.toString()));
    });
    expect(names).toEqual(['csubbucket', 'zsubbucket']);
    expect(none).toEqual([]);
  });

  test('ForEach stops when the callback throws (TestBucket_ForEach_ShortCircuit)', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      for (const k of ['bar', 'baz', 'foo']) w.put(k, b('0000'));
    });
    let index = 0;
    const err = thrown(() =>
      h.db.view((tx) =>
        tx.bucket('widgets')!.forEach((k) => {
          index++;
          if (k.toString() === 'baz') throw new Error('marker');
        }),
      ),
    );
    expect(err.message).toBe('marker');
    expect(index).toBe(2);
  });

  test('ForEach after the transaction closed fails with ErrTxClosed (TestBucket_ForEach_Closed)', () => {
    const w = h.db.update((tx) => tx.createBucket('widgets'));
    expect(thrown(() => w.forEach(() => undefined)).code).toBe('ErrTxClosed');
  });

  test('Stats counts nested keys and buckets (TestBucket_Stats_Nested / _EmptyBucket)', () => {
    h.db.update((tx) => {
      const foo = tx.createBucket('foo');
      for (let i = 0; i < 100; i++) foo.put(String(i).padStart(2, '0'), b(String(i)));
      const bar = foo.createBucket('bar');
      for (let i = 0; i < 10; i++) bar.put(String(i), b(String(i)));
      const baz = bar.createBucket('baz');
      for (let i = 0; i < 10; i++) baz.put(String(i), b(String(i)));
      tx.createBucket('whozawhats');
    });
    h.db.view((tx) => {
      expect(tx.bucket('foo')!.stats()).toEqual({ keyN: 122, bucketN: 3 });
      expect(tx.bucket('whozawhats')!.stats()).toEqual({ keyN: 0, bucketN: 1 });
    });
  });

  test('Put of random items reads back every one (TestBucket_Put_Single / _Multiple)', () => {
    const items = randomItems(7, 300);
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      for (const it of items) w.put(it.key, it.value);
    });
    h.db.view((tx) => {
      const w = tx.bucket('widgets')!;
      for (const it of items) expect(w.get(it.key)).toEqual(it.value);
    });
  });

  test('Delete of random items removes exactly those (TestBucket_Delete_Quick)', () => {
    const items = randomItems(11, 200);
    h.db.update((tx) => {
      const w = tx.createBucket('widgets');
      for (const it of items) w.put(it.key, it.value);
    });
    for (let i = 0; i < items.length; i += 2) h.db.update((tx) => tx.bucket('widgets')!.delete(items[i]!.key));
    h.db.view((tx) => {
      const w = tx.bucket('widgets')!;
      items.forEach((it, i) => expect(w.get(it.key)).toEqual(i % 2 ? it.value : undefined));
      expect(w.stats().keyN).toBe(items.length / 2);
    });
  });

  test('string keys are UTF-8 and binary keys are taken as is', () => {
    h.db.update((tx) => {
      const w = tx.createBucket('wïdgets');
      w.put('ключ', b('1'));
      w.put(u64(7), b('2'));
    });
    h.db.view((tx) => {
      const w = tx.bucket(Buffer.from('wïdgets', 'utf8'))!;
      expect(w.get(Buffer.from('ключ', 'utf8'))).toEqual(b('1'));
      expect(w.get(new Uint8Array(u64(7)))).toEqual(b('2'));
    });
  });
});
