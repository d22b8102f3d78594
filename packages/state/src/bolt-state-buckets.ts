// BoltStateBuckets: what every part of the client state's implementation
// shares — the DB underneath, the logger, and the small reads that more than
// one bucket family uses (an alloc's bucket and its keys, a list entry that
// cannot be decoded). The bucket families build on it in a chain
// (BoltAllocState, BoltVolumeState, then BoltClientStateDB), so the state
// keeps the one flat ClientStateDB surface its consumers use while each
// family's code lives in its own file.
import type { Logger } from '@csiplug/core';
import type { Bucket } from './bucket';
import type { DB } from './db';
import { decode, Layout } from './layout';
import type { Tx } from './tx';

export abstract class BoltStateBuckets {
  constructor(
    protected readonly db: DB,
    protected readonly logger: Logger,
  ) {}

  protected allocBucket(tx: Tx, allocId: string): Bucket {
    return tx.createBucketIfNotExists(Layout.allocations).createBucketIfNotExists(allocId);
  }

  protected readAllocKey<T>(allocId: string, key: string): T | undefined {
    return this.db.view((tx) => {
      const raw = tx.bucket(Layout.allocations)?.bucket(allocId)?.get(key);
      return raw && decode<T>(raw, `${Layout.allocations}/${allocId}/${key}`);
    });
  }

  /** Lists skip what they cannot decode, and say so in the log. */
  protected decodeOrSkip<T>(raw: Buffer | null, where: string): T | undefined {
    if (raw === null) {
      this.logger.warn('client state: unexpected nested bucket skipped', { where });
      return undefined;
    }
    try {
      return decode<T>(raw, where);
    } catch (err) {
      this.logger.warn('client state: undecodable record skipped', { where, err });
      return undefined;
    }
  }
}
