// Conformance: bbolt's tx_test.go and db_test.go behaviours, run against both stores.
import { FakeClock } from '@csiplug/core/testing';
import { Bucket } from './bucket';
import { DB } from './db';
import { type Tx } from './tx';
import { BACKENDS, thrown, useBackend } from '../test/support/backends';

const b = (s: string) => Buffer.from(s);

describe.each(BACKENDS)('Tx conformance (%s)', (kind) => {
  const h = useBackend(kind);

  test('Bucket of a missing top-level name returns undefined', () => {
    h.db.view((tx) => expect(tx.bucket('widgets')).toBeUndefined());
  });

  test('CreateBucket in a read-only transaction fails with ErrTxNotWritable (TestTx_CreateBucket_ErrTxNotWritable)', () => {
    h.db.view((tx) => expect(thrown(() => tx.createBucket('foo')).code).toBe('ErrTxNotWritable'));
  });

  test('CreateBucket after the transaction closed fails with ErrTxClosed (TestTx_CreateBucket_ErrTxClosed)', () => {
    const tx = h.db.update((t) => t);
    expect(thrown(() => tx.createBucket('foo')).code).toBe('ErrTxClosed');
    expect(thrown(() => tx.bucket('foo')).code).toBe('ErrTxClosed');
  });

  test('CreateBucket creates a bucket that later transactions see (TestTx_CreateBucket)', () => {
    h.db.update((tx) => expect(tx.createBucket('widgets')).toBeInstanceOf(Bucket));
    h.db.view((tx) => expect(tx.bucket('widgets')).toBeInstanceOf(Bucket));
  });

  test('CreateBucket of an existing name fails with ErrBucketExists (TestTx_CreateBucket_ErrBucketExists)', () => {
    h.db.update((tx) => tx.createBucket('widgets'));
    h.db.update((tx) => expect(thrown(() => tx.createBucket('widgets')).code).toBe('ErrBucketExists'));
    h.db.update((tx) => {
      tx.createBucket('other');
      expect(thrown(() => tx.createBucket('other')).code).toBe('ErrBucketExists');
    });
  });

  test('CreateBucket with an empty name fails with ErrBucketNameRequired (TestTx_CreateBucket_ErrBucketNameRequired)', () => {
    h.db.update((tx) => {
      expect(thrown(() => tx.createBucket('')).code).toBe('ErrBucketNameRequired');
      expect(thrown(() => tx.createBucketIfNotExists(Buffer.alloc(0))).code).toBe('ErrBucketNameRequired');
      expect(thrown(() => tx.bucket('w') ?? tx.createBucket('w').createBucket('')).code).toBe('ErrBucketNameRequired');
    });
  });

  test('CreateBucketIfNotExists returns the existing bucket (TestTx_CreateBucketIfNotExists)', () => {
    h.db.update((tx) => {
      tx.createBucketIfNotExists('widgets').put('foo', b('bar'));
      expect(tx.createBucketIfNotExists('widgets').get('foo')).toEqual(b('bar'));
    });
    h.db.update((tx) => expect(tx.createBucketIfNotExists('widgets').get('foo')).toEqual(b('bar')));
  });

  test('DeleteBucket removes a bucket; re-creating it gives an empty one (TestTx_DeleteBucket)', () => {
    h.db.update((tx) => tx.createBucket('widgets').put('foo', b('bar')));
    h.db.update((tx) => {
      tx.deleteBucket('widgets');
      expect(tx.bucket('widgets')).toBeUndefined();
    });
    h.db.update((tx) => expect(tx.createBucket('widgets').get('foo')).toBeUndefined());
  });

  test('DeleteBucket errors: closed, read-only, not found (TestTx_DeleteBucket_ErrTxClosed / _ReadOnly / _NotFound)', () => {
    const tx = h.db.update((t) => {
      t.createBucket('widgets');
      return t;
    });
    expect(thrown(() => tx.deleteBucket('widgets')).code).toBe('ErrTxClosed');
    h.db.view((t) => expect(thrown(() => t.deleteBucket('widgets')).code).toBe('ErrTxNotWritable'));
    h.db.update((t) => expect(thrown(() => t.deleteBucket('nope')).code).toBe('ErrBucketNotFound'));
  });

  test('ForEach and Cursor walk the top-level buckets in order (TestTx_ForEach / TestTx_Cursor)', () => {
    h.db.update((tx) => {
      tx.createBucket('widgets');
      tx.createBucket('woojits');
      tx.createBucket('foo');
    });
    h.db.view((tx) => {
      const names: string[] = [];
      tx.forEach((name, bucket) => {
        expect(bucket).toBeInstanceOf(Bucket);
        names.push(name.toString());
      });
      expect(names).toEqual(['foo', 'widgets', 'woojits']);
      const c = tx.cursor();
      expect(c.first()).toEqual([b('foo'), null]);
      expect(c.next()).toEqual([b('widgets'), null]);
      expect(c.next()).toEqual([b('woojits'), null]);
      expect(c.next()).toBeUndefined();
    });
  });

  test('OnCommit handlers run after commit and never on rollback (TestTx_OnCommit / _Rollback)', () => {
    const order: string[] = [];
    h.db.update((tx) => {
      tx.onCommit(() => order.push('one'));
      tx.onCommit(() => order.push(`two:${h.db.view((t) => String(t.bucket('a') !== undefined))}`));
      tx.createBucket('a');
      order.push('body');
    });
    expect(() =>
      h.db.update((tx) => {
        tx.onCommit(() => order.push('never'));
        throw new Error('rollback');
      }),
    ).toThrow('rollback');
    h.db.view((tx) => tx.onCommit(() => order.push('never-view')));
    expect(order).toEqual(['body', 'one', 'two:true']);
  });

  test('Update commits when fn returns and rolls back when it throws, with the error propagated (TestDB_Update / TestDB_Update_Panic)', () => {
    const boom = new Error('boom');
    expect(() =>
      h.db.update((tx) => {
        tx.createBucket('widgets').put('foo', b('bar'));
        throw boom;
      }),
    ).toThrow(boom);
    h.db.view((tx) => expect(tx.bucket('widgets')).toBeUndefined());
    expect(h.db.update((tx) => (tx.createBucket('widgets').put('foo', b('bar')), 42))).toBe(42);
    h.db.view((tx) => expect(tx.bucket('widgets')!.get('foo')).toEqual(b('bar')));
  });

  test('View is read-only and returns what fn returns (TestDB_View)', () => {
    h.db.update((tx) => tx.createBucket('widgets').put('foo', b('bar')));
    expect(h.db.view((tx) => tx.writable)).toBe(false);
    expect(h.db.view((tx) => tx.bucket('widgets')!.get('foo')!.toString())).toBe('bar');
  });

  test('transaction ids: each update takes the next id, a view sees the last committed one', () => {
    const first = h.db.update((tx) => tx.id);
    expect(h.db.view((tx) => tx.id)).toBe(first);
    const second = h.db.update((tx) => tx.id);
    expect(second).toBe(first + 1);
    expect(() =>
      h.db.update(() => {
        throw new Error('no');
      }),
    ).toThrow();
    expect(h.db.update((tx) => tx.id)).toBe(second + 1);
  });

  test('everything reached through a closed transaction fails with ErrTxClosed', () => {
    let saved: { tx: Tx; w: Bucket } | undefined;
    h.db.update((tx) => {
      saved = { tx, w: tx.createBucket('w') };
    });
    expect(thrown(() => saved!.tx.cursor()).code).toBe('ErrTxClosed');
    expect(thrown(() => saved!.tx.forEach(() => undefined)).code).toBe('ErrTxClosed');
    expect(thrown(() => saved!.tx.onCommit(() => undefined)).code).toBe('ErrTxClosed');
    expect(thrown(() => saved!.w.stats()).code).toBe('ErrTxClosed');
    expect(thrown(() => saved!.w.sequence()).code).toBe('ErrTxClosed');
  });

  test('a callback that returns a Promise is rejected and its transaction rolled back', () => {
    const err = thrown(() =>
      h.db.update((async (tx: Tx) => {
        tx.createBucket('async');
      }) as unknown as (tx: Tx) => void),
    );
    expect(err.code).toBe('ErrTxAsync');
    expect(err.message).toMatch(/cannot span an await/);
    h.db.view((tx) => expect(tx.bucket('async')).toBeUndefined());
    expect(thrown(() => h.db.view((async () => 1) as unknown as () => number)).code).toBe('ErrTxAsync');
  });

  test('update inside update or view is an error, not a savepoint', () => {
    expect(thrown(() => h.db.update(() => h.db.update(() => 1))).code).toBe('ErrTxNested');
    expect(thrown(() => h.db.view(() => h.db.update(() => 1))).code).toBe('ErrTxNested');
    h.db.update((tx) => tx.createBucket('still-works'));
    h.db.view((tx) => expect(tx.bucket('still-works')).toBeDefined());
  });

  test('a closed DB refuses transactions with ErrDatabaseNotOpen (TestDB_Update_Closed / TestDB_View_Closed)', async () => {
    const db = h.open();
    db.close();
    db.close();
    expect(thrown(() => db.update(() => 1)).code).toBe('ErrDatabaseNotOpen');
    expect(thrown(() => db.view(() => 1)).code).toBe('ErrDatabaseNotOpen');
    await expect(db.batch(() => undefined)).rejects.toMatchObject({ code: 'ErrDatabaseNotOpen' });
  });

  test('Batch commits every concurrent caller (TestDB_Batch)', async () => {
    h.db.update((tx) => tx.createBucket('widgets'));
    const n = 2000;
    await Promise.all(Array.from({ length: n }, (_, i) => h.db.batch((tx) => tx.bucket('widgets')!.put(String(i), b(String(i))))));
    h.db.view((tx) => {
      const w = tx.bucket('widgets')!;
      for (let i = 0; i < n; i++) if (!w.get(String(i))?.equals(b(String(i)))) throw new Error(`missing ${i}`);
    });
  });

  test('Batch: a throwing caller fails alone and the others commit (TestDB_Batch_Panic)', async () => {
    h.db.update((tx) => tx.createBucket('widgets'));
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, (_, i) =>
        h.db.batch((tx) => {
          const w = tx.bucket('widgets')!;
          w.put(String(i), b('x'));
          if (i === 3) {
            w.createBucket('half-done');
            throw new Error('caller 3 failed');
          }
        }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'rejected', ...Array(6).fill('fulfilled')]);
    expect((results[3] as PromiseRejectedResult).reason.message).toBe('caller 3 failed');
    h.db.view((tx) => {
      const w = tx.bucket('widgets')!;
      expect(w.get('3')).toBeUndefined();
      expect(w.bucket('half-done')).toBeUndefined();
      expect(w.stats().keyN).toBe(9);
    });
    expect(h.db.check()).toEqual([]);
  });

  test('Batch: async callbacks are rejected without harming the others', async () => {
    h.db.update((tx) => tx.createBucket('w'));
    const good = h.db.batch((tx) => tx.bucket('w')!.put('good', b('1')));
    const bad = h.db.batch((async (tx: Tx) => tx.bucket('w')!.put('bad', b('1'))) as unknown as (tx: Tx) => void);
    await expect(good).resolves.toBeUndefined();
    await expect(bad).rejects.toMatchObject({ code: 'ErrTxAsync' });
    h.db.view((tx) => expect(tx.bucket('w')!.get('bad')).toBeUndefined());
  });

  test('Batch waits for its delay, then runs everything in one transaction (TestDB_BatchTime)', async () => {
    const clock = new FakeClock();
    const db = h.open({ clock });
    db.update((tx) => tx.createBucket('w'));
    const ids: number[] = [];
    let settled = 0;
    const all = Promise.all(
      [1, 2, 3].map((i) =>
        db
          .batch((tx) => {
            ids.push(tx.id);
            tx.bucket('w')!.put(String(i), b('v'));
          })
          .then(() => settled++),
      ),
    );
    await clock.advance(9);
    expect(settled).toBe(0);
    expect(ids).toEqual([]);
    await clock.advance(1);
    await all;
    expect(settled).toBe(3);
    expect(new Set(ids).size).toBe(1);
  });

  test('Batch runs at once when it is full (TestDB_BatchFull)', async () => {
    const clock = new FakeClock();
    const db = h.open({ clock, maxBatchSize: 3 });
    db.update((tx) => tx.createBucket('w'));
    const ids: number[] = [];
    await Promise.all([1, 2, 3].map((i) => db.batch((tx) => (ids.push(tx.id), tx.bucket('w')!.put(String(i), b('v'))))));
    expect(ids).toHaveLength(3);
    expect(new Set(ids).size).toBe(1);
    expect(clock.pendingTimers).toBe(0);
  });

  test('close commits pending batch callers first', async () => {
    const clock = new FakeClock();
    const db = h.open({ clock });
    db.update((tx) => tx.createBucket('w'));
    // What the DB holds once the batch's commit is done (read from its onCommit, while the DB is still open).
    let atCommit: Buffer | undefined;
    const p = db.batch((tx) => {
      tx.bucket('w')!.put('k', b('v'));
      tx.onCommit(() => (atCommit = db.view((t) => t.bucket('w')!.get('k'))));
    });
    db.close();
    await expect(p).resolves.toBeUndefined();
    expect(atCommit).toEqual(b('v'));
    if (kind === 'sqlite') {
      // On disk too: the file opened again holds the write.
      const reopened = DB.open(db.path);
      try {
        reopened.view((tx) => expect(tx.bucket('w')!.get('k')).toEqual(b('v')));
      } finally {
        reopened.close();
      }
    }
  });

  test('onCommit handlers of batch callers run after the shared commit; a throwing handler fails only its caller', async () => {
    h.db.update((tx) => tx.createBucket('w'));
    const seen: string[] = [];
    const ok = h.db.batch((tx) => tx.onCommit(() => seen.push('ok')));
    const bad = h.db.batch((tx) => {
      tx.bucket('w')!.put('k', b('v'));
      tx.onCommit(() => {
        throw new Error('handler failed');
      });
    });
    const failed = h.db.batch((tx) => {
      tx.onCommit(() => seen.push('never'));
      throw new Error('caller failed');
    });
    await expect(ok).resolves.toBeUndefined();
    await expect(bad).rejects.toThrow('handler failed');
    await expect(failed).rejects.toThrow('caller failed');
    expect(seen).toEqual(['ok']);
    h.db.view((tx) => expect(tx.bucket('w')!.get('k')).toEqual(b('v')));
  });

  test('check() finds a sound store sound (TestDB_Consistency)', () => {
    for (let i = 0; i < 10; i++) {
      h.db.update((tx) => {
        const w = tx.createBucketIfNotExists('widgets');
        w.put('foo', b(String(i)));
        w.createBucketIfNotExists(`n${i % 3}`).put(String(i), b('x'));
        if (i % 4 === 3) w.deleteBucket(`n${i % 3}`);
      });
    }
    expect(h.db.check()).toEqual([]);
  });

  test('db.path names the file, or :memory:', () => {
    if (kind === 'memory') expect(h.db.path).toBe(':memory:');
    else expect(h.db.path).toMatch(/db-\d+\.db$/);
    const mem = DB.openMemory();
    expect(mem.path).toBe(':memory:');
    mem.close();
  });
});
