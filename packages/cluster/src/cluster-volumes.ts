// The cluster's volume catalog, in etcd: volumes/<id> holds a volume as the
// node that created or registered it saw it (the whole volume: the plugin's
// external id, its context, secrets, capabilities and accessible topology),
// so every node can register it in its own catalog and the scheduler knows
// where it may be used. A volume id is reserved once (compare: the key does
// not exist; `state: 'creating'`) before the plugin makes the volume, then
// `finish`ed by the node that reserved it (or `cancel`led); a grown volume
// `replace`s its record over the one read; a `remove` requires that no claim
// on it is held anywhere in the cluster (compare: claims/<id> absent or
// empty) and that the record is the one the caller had, in one transaction.
import { CsiplugError, type Logger, errorMessage } from '@csiplug/core';
import type { EtcdConnection } from './connect';

const VOLUMES = 'volumes/';
const CLAIMS = 'claims/';

export interface ClusterVolumeRecord<V = unknown> {
  id: string;
  pluginId: string;
  accessibleTopology?: Array<Record<string, string>>;
  /** The access and attachment modes it offers (for placement; the claim checks them again). */
  capabilities?: Array<{ accessMode: string; attachmentMode: string }>;
  /** The node that created or registered it. */
  origin: string;
  /**
   * `creating`: the id is reserved by `origin` while its plugin makes the
   * volume (no other node may make one under it; no node uses it yet).
   * Absent: the volume is there.
   */
  state?: 'creating';
  /** ms since the epoch. */
  createdAt: number;
  /** The volume as its origin's catalog holds it (opaque here: the agent's volume view). */
  volume: V;
}

/** The volume's id is taken in the cluster: EVOLUME_EXISTS, the code of the same clash on one node (the API answers 409). */
export class ClusterVolumeExistsError extends CsiplugError {
  constructor(id: string, origin: string) {
    super(
      'EVOLUME_EXISTS',
      `volume "${id}" exists in the cluster already (registered by node ${origin}); pick another id, or deregister it first`,
    );
  }
}

/** The volume a record carries names the record's id and plugin, and (once made) the plugin's id for it. */
function volumeOk(r: Partial<ClusterVolumeRecord<unknown>>): boolean {
  const v = r.volume as { id?: unknown; pluginId?: unknown; externalId?: unknown } | null | undefined;
  if (v === null || typeof v !== 'object' || v.id !== r.id || v.pluginId !== r.pluginId) return false;
  return r.state === 'creating' || (typeof v.externalId === 'string' && v.externalId !== '');
}

/** The plugin's id of the volume a record carries ('' while it is being made). */
export function externalIdOf(record: ClusterVolumeRecord<unknown>): string {
  return (record.volume as { externalId?: string }).externalId ?? '';
}

export class EtcdClusterVolumes<V = unknown> {
  constructor(
    private readonly conn: EtcdConnection,
    private readonly logger: Logger,
  ) {}

  /** Adds the volume (or its reservation); throws ClusterVolumeExistsError when the id is taken. Returns the key's revision. */
  async add(record: ClusterVolumeRecord<V>): Promise<string> {
    const key = VOLUMES + record.id;
    const res = await this.conn.kv
      .if(key, 'Create', '==', 0)
      .then(this.conn.kv.put(key).value(JSON.stringify(record)))
      .commit();
    if (!res.succeeded) throw new ClusterVolumeExistsError(record.id, (await this.get(record.id))?.origin ?? 'unknown');
    return res.header.revision;
  }

  /** Replaces the reservation `origin` holds with the volume as made; false when the key is not that reservation any more. */
  async finish(record: ClusterVolumeRecord<V>): Promise<boolean> {
    const key = VOLUMES + record.id;
    const kv = (await this.conn.kv.get(key).exec()).kvs[0];
    const held = kv ? this.parse(key, kv.value.toString()) : undefined;
    if (!kv || held?.state !== 'creating' || held.origin !== record.origin) return false;
    const { state: _state, ...made } = record;
    return (
      await this.conn.kv
        .if(key, 'Mod', '==', kv.mod_revision)
        .then(this.conn.kv.put(key).value(JSON.stringify(made)))
        .commit()
    ).succeeded;
  }

  /** Writes a made volume's record again (its capacity grew), over the record as it was read; false when it changed meanwhile or is not made. */
  async replace(record: ClusterVolumeRecord<V>): Promise<boolean> {
    const key = VOLUMES + record.id;
    const kv = (await this.conn.kv.get(key).exec()).kvs[0];
    const held = kv ? this.parse(key, kv.value.toString()) : undefined;
    if (!kv || !held || held.state === 'creating') return false;
    return (
      await this.conn.kv
        .if(key, 'Mod', '==', kv.mod_revision)
        .then(this.conn.kv.put(key).value(JSON.stringify(record)))
        .commit()
    ).succeeded;
  }

  /** Gives up the reservation `origin` holds (its create failed); a volume that is there is never removed by this. */
  async cancel(id: string, origin: string): Promise<void> {
    const key = VOLUMES + id;
    const kv = (await this.conn.kv.get(key).exec()).kvs[0];
    const held = kv ? this.parse(key, kv.value.toString()) : undefined;
    if (!kv || held?.state !== 'creating' || held.origin !== origin) return;
    await this.conn.kv.if(key, 'Mod', '==', kv.mod_revision).then(this.conn.kv.delete().key(key)).commit();
  }

  async get(id: string): Promise<ClusterVolumeRecord<V> | undefined> {
    const text = await this.conn.kv.get(VOLUMES + id).string();
    return text === null ? undefined : this.parse(VOLUMES + id, text);
  }

  async list(): Promise<ClusterVolumeRecord<V>[]> {
    const all = await this.conn.kv.getAll().prefix(VOLUMES).strings();
    return Object.entries(all)
      .flatMap(([key, text]) => this.parse(key, text) ?? [])
      .sort((a, b) => a.id.localeCompare(b.id));
  }

  /** Each bad record said once (every pass reads every record). */
  private readonly said = new Set<string>();
  private warnOnce(key: string, message: string): void {
    if (this.said.has(`${key}\u0000${message}`)) return;
    if (this.said.size >= 10_000) this.said.clear();
    this.said.add(`${key}\u0000${message}`);
    this.logger.warn(message, { key });
  }

  /** A record as this module writes it (its id its key's), or undefined, logged once. */
  private parse(key: string, text: string): ClusterVolumeRecord<V> | undefined {
    let r: Partial<ClusterVolumeRecord<V>> | null;
    try {
      r = JSON.parse(text) as Partial<ClusterVolumeRecord<V>> | null;
    } catch (err) {
      this.warnOnce(key, `a volume record in etcd cannot be read; it is left out: ${errorMessage(err)}`);
      return undefined;
    }
    const segmentsOk = (t: unknown) =>
      t !== null && typeof t === 'object' && Object.values(t as object).every((v) => typeof v === 'string');
    const ok =
      r !== null &&
      typeof r === 'object' &&
      r.id === key.slice(VOLUMES.length) &&
      typeof r.pluginId === 'string' &&
      r.pluginId !== '' &&
      typeof r.origin === 'string' &&
      (r.state === undefined || r.state === 'creating') &&
      (r.accessibleTopology === undefined || (Array.isArray(r.accessibleTopology) && r.accessibleTopology.every(segmentsOk))) &&
      (r.capabilities === undefined ||
        (Array.isArray(r.capabilities) &&
          r.capabilities.every(
            (c) => c !== null && typeof c === 'object' && typeof c.accessMode === 'string' && typeof c.attachmentMode === 'string',
          ))) &&
      volumeOk(r as Partial<ClusterVolumeRecord<V>>);
    if (!ok) {
      this.warnOnce(key, 'a volume record in etcd is not one csiplug wrote; it is left out');
      return undefined;
    }
    return r as ClusterVolumeRecord<V>;
  }

  /**
   * Removes the volume, only while no claim on it is held anywhere (a claims
   * key that is absent, or as read and empty) and only while it is the one
   * `same` accepts (a node removes the cluster's record of the volume it
   * had, never another one under the same id). False: it is claimed, or not
   * that volume.
   */
  async remove(id: string, same: (record: ClusterVolumeRecord<V>) => boolean = () => true): Promise<boolean> {
    for (let attempt = 0; attempt < 8; attempt++) {
      const held = (await this.conn.kv.get(VOLUMES + id).exec()).kvs[0];
      if (!held) return true;
      const record = this.parse(VOLUMES + id, held.value.toString());
      if (record && !same(record)) return false;
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
      const res = await txn
        .and(VOLUMES + id, 'Mod', '==', held.mod_revision)
        .then(this.conn.kv.delete().key(VOLUMES + id))
        .commit();
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
