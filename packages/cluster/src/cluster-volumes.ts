// The cluster's volume catalog, in etcd: volumes/<id> holds a volume as the
// node that created or registered it saw it (the plugin's external id, its
// context and accessible topology), so every node can register it in its
// own catalog and the scheduler knows where it may be used. A volume id is
// created once (compare: the key does not exist); a delete requires that no
// claim on it is held anywhere in the cluster (compare: claims/<id> absent
// or empty, in the same transaction).
import { ValidationError, type Logger, errorMessage } from '@csiplug/core';
import type { EtcdConnection } from './connect';

const VOLUMES = 'volumes/';
const CLAIMS = 'claims/';

export interface ClusterVolumeRecord<V = unknown> {
  id: string;
  pluginId: string;
  accessibleTopology?: Array<Record<string, string>>;
  /** The node that created or registered it. */
  origin: string;
  /** ms since the epoch. */
  createdAt: number;
  /** The volume as its origin's catalog holds it (opaque here: the agent's volume view). */
  volume: V;
}

export class ClusterVolumeExistsError extends ValidationError {
  /** An API's answer: a conflict with what exists. */
  readonly httpStatus = 409;
  constructor(id: string, origin: string) {
    super(`volume "${id}" exists in the cluster already (registered by node ${origin}); pick another id, or deregister it first`, 'id');
  }
}

export class EtcdClusterVolumes<V = unknown> {
  constructor(
    private readonly conn: EtcdConnection,
    private readonly logger: Logger,
  ) {}

  /** Adds the volume; throws ClusterVolumeExistsError when the id is taken. */
  async add(record: ClusterVolumeRecord<V>): Promise<void> {
    const key = VOLUMES + record.id;
    const res = await this.conn.kv.if(key, 'Create', '==', 0).then(this.conn.kv.put(key).value(JSON.stringify(record))).commit();
    if (!res.succeeded) throw new ClusterVolumeExistsError(record.id, (await this.get(record.id))?.origin ?? 'unknown');
  }

  /** Writes the volume's record again (its capacity grew); only over a record that exists. */
  async update(record: ClusterVolumeRecord<V>): Promise<void> {
    const key = VOLUMES + record.id;
    await this.conn.kv.if(key, 'Create', '>', 0).then(this.conn.kv.put(key).value(JSON.stringify(record))).commit();
  }

  async get(id: string): Promise<ClusterVolumeRecord<V> | undefined> {
    const text = await this.conn.kv.get(VOLUMES + id).string();
    if (text === null) return undefined;
    try {
      return JSON.parse(text) as ClusterVolumeRecord<V>;
    } catch (err) {
      this.logger.warn('a volume record in etcd cannot be read; it is left out', { volume_id: id, error: errorMessage(err) });
      return undefined;
    }
  }

  async list(): Promise<ClusterVolumeRecord<V>[]> {
    const all = await this.conn.kv.getAll().prefix(VOLUMES).strings();
    const out: ClusterVolumeRecord<V>[] = [];
    for (const [key, text] of Object.entries(all)) {
      try {
        out.push(JSON.parse(text) as ClusterVolumeRecord<V>);
      } catch (err) {
        this.logger.warn('a volume record in etcd cannot be read; it is left out', { key, error: errorMessage(err) });
      }
    }
    return out.sort((a, b) => a.id.localeCompare(b.id));
  }

  /**
   * Removes the volume, only while no claim on it is held anywhere (a claims
   * key that is absent, or as read and empty). False: it is claimed.
   */
  async remove(id: string): Promise<boolean> {
    for (let attempt = 0; attempt < 8; attempt++) {
      const claims = (await this.conn.kv.get(CLAIMS + id).exec()).kvs[0];
      if (claims) {
        let held = true;
        try {
          held = (JSON.parse(claims.value.toString()) as { claims: unknown[] }).claims.length > 0;
        } catch {
          held = true;
        }
        if (held) return false;
      }
      const txn = claims ? this.conn.kv.if(CLAIMS + id, 'Mod', '==', claims.mod_revision) : this.conn.kv.if(CLAIMS + id, 'Create', '==', 0);
      const res = await txn.then(this.conn.kv.delete().key(VOLUMES + id)).commit();
      if (res.succeeded) return true;
    }
    return false;
  }

  /** Calls `onChange` on every change of a volume record. */
  async watch(onChange: () => void): Promise<{ close(): Promise<void> }> {
    const w = await this.conn.kv.watch().prefix(VOLUMES).create();
    w.on('data', () => onChange());
    w.on('error', () => undefined);
    return { close: () => w.cancel().catch(() => undefined) };
  }
}
