// The cluster's nodes, in etcd. Each agent keeps two keys:
//   nodes/<name>   what the node is (class, meta, drivers, plugins with
//                  their health, topology, max volumes); it stays when the
//                  node goes away, so a down node is still listed;
//   alive/<name>   bound to the node's lease, which the agent keeps alive.
// A node whose lease expired (its agent stopped renewing it for the TTL) has
// no alive key: it is down. An agent that stops on purpose lets its lease
// run out rather than revoking it: its tasks run on, and an agent restarted
// on the same data dir within the TTL takes the node over (a new lease)
// before anyone counts it down. The alive key names the
// agent instance holding it (an id kept in its data dir: the node's
// identity, also written in its record): a restarted agent takes its node
// over; another machine with the same name is refused while that agent is
// alive, and after that while the record is another identity's and the name
// still holds claims or placements (node-identity.ts), since single-node
// claims go by node name.
import { type Clock, CsiplugError, type Logger, errorMessage, type AsyncDisposable } from '@csiplug/core';
import type { Lease } from 'etcd3';
import type { EtcdConnection } from './connect';
import { NodeNameHeldError, decideNodeJoin } from './node-identity';

export interface NodePluginInfo {
  id: string;
  /** csi-node or csi-controller. */
  type: string;
  healthy: boolean;
  topology?: Record<string, string>;
  maxVolumes?: number;
}

/** What a node says of itself. */
export interface NodeInfo {
  name: string;
  nodeClass: string;
  meta: Record<string, string>;
  /** Its datacenter; absent in a record of an agent from before datacenters: only jobs for every datacenter go there. */
  datacenter?: string;
  /** The task drivers that can run tasks there. */
  drivers: string[];
  plugins: NodePluginInfo[];
  /** The agent's API address, for agent-to-agent calls. */
  address?: string;
  /** The most allocs of one job the node runs (its limits { max_allocs_per_job }); absent: no limit known. */
  maxAllocsPerJob?: number;
  version: string;
}

export interface NodeRecord extends NodeInfo {
  /** The node's identity: the id kept in the data dir of the agent that holds the name (absent in a record written before identities: unknown). */
  identity?: string;
  /** ms since the epoch: first registered, and last written. */
  registeredAt: number;
  updatedAt: number;
}

export interface ClusterNodeView extends NodeRecord {
  status: 'ready' | 'down';
}

const NODES = 'nodes/';
const ALIVE = 'alive/';
/** Keys of other modules read to decide a join: a name with claims or placements is not taken from another identity. */
const CLAIMS = 'claims/';
const PLACEMENTS = 'placements/';

/** Another live agent holds this node name (its lease is alive, with another instance id). The API answers 409 (code _IN_USE). */
export class NodeNameInUseError extends CsiplugError {
  constructor(name: string, holder: string) {
    super(
      'ENODE_NAME_IN_USE',
      `node name "${name}" is in use by another live agent (instance ${holder}): two machines must not share a node name, since single-node claims would be shared between them; ` +
        `give each agent its own cluster.node_name (or node_id). If that agent is gone, its lease runs out within heartbeat_ttl and this node joins then`,
    );
  }
}

interface AliveValue {
  /** The agent instance (kept in its data dir) that holds the node name. */
  instance: string;
  since: number;
}

/** A node record as written by a node registry, or why it is not one (its name must be its key's). */
export function parseNodeRecord(text: string, name: string): NodeRecord | string {
  let r: Partial<NodeRecord> | null;
  try {
    r = JSON.parse(text) as Partial<NodeRecord> | null;
  } catch (err) {
    return errorMessage(err);
  }
  if (r === null || typeof r !== 'object') return 'not an object';
  if (r.name !== name) return `its name ${JSON.stringify(r.name)} is not its key's ("${name}")`;
  if (!Array.isArray(r.drivers) || !r.drivers.every((d) => typeof d === 'string')) return 'drivers is not a list of names';
  const pluginOk = (p: Partial<NodePluginInfo> | null) =>
    p !== null &&
    typeof p === 'object' &&
    typeof p.id === 'string' &&
    typeof p.type === 'string' &&
    typeof p.healthy === 'boolean' &&
    (p.maxVolumes === undefined || Number.isFinite(p.maxVolumes));
  if (!Array.isArray(r.plugins) || !r.plugins.every(pluginOk)) return 'plugins is not a list of plugins';
  if (r.identity !== undefined && !(typeof r.identity === 'string' && r.identity.length > 0)) return 'identity is not an id';
  if (r.datacenter !== undefined && !(typeof r.datacenter === 'string' && r.datacenter.length > 0)) return 'datacenter is not a name';
  if (r.maxAllocsPerJob !== undefined && !(Number.isInteger(r.maxAllocsPerJob) && r.maxAllocsPerJob > 0))
    return 'maxAllocsPerJob is not a positive whole number';
  return { nodeClass: '', meta: {}, version: '', registeredAt: 0, updatedAt: 0, ...r } as NodeRecord;
}

export class EtcdNodeRegistry implements AsyncDisposable {
  /** The one lease this node is alive under; replaced only by register(). */
  private lease: Lease | undefined;
  /** That lease's id (the alive key is on it while this agent holds the name). */
  private leaseId: string | undefined;
  private info: NodeInfo | undefined;
  private registeredAt: number | undefined;
  private disposed = false;
  /** The one loop that registers again after a lease was lost. */
  private reregistering: Promise<void> | undefined;
  private readonly stop = new AbortController();

  constructor(
    private readonly conn: EtcdConnection,
    private readonly ttlMs: number,
    private readonly clock: Clock,
    private readonly logger: Logger,
    /** This agent's instance id (kept in its data dir): a restarted agent takes its node over; another machine with the same name is refused. */
    private readonly instanceId: string,
    /** The id was in the data dir before this start: a record and claims written before identities may be this node's own (decideNodeJoin). */
    private readonly adoptsUnknown = false,
  ) {}

  /** This agent joined under a record written before identities (adopted): claims naming no identity under its name are its own. */
  adoptedUnknown = false;

  /** The lease's TTL in whole seconds, as etcd counts it. */
  get ttlSeconds(): number {
    return Math.max(1, Math.ceil(this.ttlMs / 1000));
  }

  /**
   * Registers this node (or takes it over after this agent's restart) and
   * keeps it registered until dispose. One attempt: throws when etcd does not
   * answer, NodeNameInUseError when another live agent holds the name.
   */
  async start(info: NodeInfo): Promise<void> {
    this.info = info;
    await this.register();
  }

  /**
   * Writes what the node says of itself again (its plugins' health changed),
   * only while the name's alive key is on this agent's lease: an agent whose
   * name another machine holds now (its lease lost, perhaps not yet noticed)
   * never writes over that node's record — its identity there would be taken
   * for this one's at its next join. Not written then: its next registration
   * writes what it says now.
   */
  async update(info: NodeInfo): Promise<void> {
    this.info = info;
    if (this.leaseId === undefined || !this.holdsNode) return;
    await this.write(this.leaseId);
  }

  /** Every node the cluster has seen, ready or down, by name. */
  async list(): Promise<ClusterNodeView[]> {
    const [records, alive] = await Promise.all([this.conn.kv.getAll().prefix(NODES).strings(), this.conn.kv.getAll().prefix(ALIVE).keys()]);
    const up = new Set(alive.map((k) => k.slice(ALIVE.length)));
    const nodes: ClusterNodeView[] = [];
    for (const [key, text] of Object.entries(records)) {
      const name = key.slice(NODES.length);
      const record = parseNodeRecord(text, name);
      if (typeof record === 'string') {
        this.logger.warn('a node record in etcd cannot be read; it is left out', { key, error: record });
        continue;
      }
      nodes.push({ ...record, status: up.has(name) ? 'ready' : 'down' });
    }
    return nodes.sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Whether the node `name` holds a live lease now (its alive key is there). Throws when etcd does not answer. */
  isAlive(name: string): Promise<boolean> {
    return this.conn.kv.get(ALIVE + name).exists();
  }

  async get(name: string): Promise<ClusterNodeView | undefined> {
    return (await this.list()).find((n) => n.name === name);
  }

  /**
   * `node purge`: removes the node's record, only while its alive key is
   * absent (a live node is never purged). Returns the record removed, 'alive'
   * when the node is up, undefined when the name has no record.
   */
  async purgeRecord(name: string): Promise<NodeRecord | 'alive' | undefined> {
    const kv = (await this.conn.kv.get(NODES + name).exec()).kvs[0];
    if (!kv) return undefined;
    const res = await this.conn.kv
      .if(ALIVE + name, 'Create', '==', 0)
      .and(NODES + name, 'Mod', '==', kv.mod_revision)
      .then(this.conn.kv.delete().key(NODES + name))
      .commit();
    if (!res.succeeded) return (await this.conn.kv.get(ALIVE + name).exists()) ? 'alive' : this.purgeRecord(name);
    const record = parseNodeRecord(kv.value.toString(), name);
    return typeof record === 'string' ? ({ name } as NodeRecord) : record;
  }

  /** Stops renewing the lease: the node counts as down once its TTL runs out, unless the next agent renews it first. */
  async dispose(): Promise<void> {
    this.disposed = true;
    this.stop.abort();
    this.lease?.release();
    this.lease = undefined;
    await this.reregistering?.catch(() => undefined);
  }

  /** Ends the lease now: the node is down at once (the node leaves the cluster). */
  async leave(): Promise<void> {
    this.disposed = true;
    this.stop.abort();
    const lease = this.lease;
    this.lease = undefined;
    await lease?.revoke();
  }

  private async record(name: string): Promise<NodeRecord | undefined> {
    const text = await this.conn.kv.get(NODES + name).string();
    if (text === null) return undefined;
    try {
      return JSON.parse(text) as NodeRecord;
    } catch {
      return undefined;
    }
  }

  /** The node record, if the name's alive key is on lease `leaseId` (this agent's); false when it is not. */
  private async write(leaseId: string): Promise<boolean> {
    const info = this.info!;
    const record: NodeRecord = {
      ...info,
      identity: this.instanceId,
      registeredAt: this.registeredAt ?? this.clock.now(),
      updatedAt: this.clock.now(),
    };
    const res = await this.conn.kv
      .if(ALIVE + info.name, 'Lease', '==', leaseId)
      .then(this.conn.kv.put(NODES + info.name).value(JSON.stringify(record)))
      .commit();
    return res.succeeded;
  }

  /**
   * One registration: the alive key under a new lease — created only if no
   * one holds it, or taken over if this instance held it (the lease of this
   * agent's last run) — then the node record. The lease becomes this node's
   * only once all of that is written; the previous one is released.
   */
  private async register(): Promise<void> {
    if (this.disposed) throw new Error('the node registry is disposed');
    const name = this.info!.name;
    const before = await this.record(name);
    // Another identity's record (a name taken over) is not this node's history.
    this.registeredAt ??=
      (before?.identity === this.instanceId || before?.identity === undefined ? before?.registeredAt : undefined) ?? this.clock.now();
    const lease = this.conn.kv.lease(this.ttlSeconds, { autoKeepAlive: true });
    let id: string;
    try {
      id = await lease.grant();
      await this.holdName(name, id);
      // The record only once the name is this agent's: a refused machine never writes over the node it is not.
      if (!(await this.write(id))) throw new Error(`the alive key of node "${name}" left this agent's lease while it joined; trying again`);
      if (lease.revoked()) throw new Error('the node lease was lost while the node registered');
    } catch (err) {
      lease.release();
      throw err;
    }
    if (this.disposed) {
      lease.release();
      return;
    }
    const previous = this.lease;
    this.lease = lease;
    this.leaseId = id;
    this.refusal = undefined;
    previous?.release();
    lease.on('lost', (err) => this.lost(lease, err));
    this.onRegistered?.();
  }

  /**
   * The alive key, under lease `id`, as decideNodeJoin says: created if no
   * one holds it and the name is free for this identity — only while the
   * node record is still the one read, so a record written meanwhile is
   * decided on again — or taken over, only as it was read, if this instance
   * held it (the lease of this agent's last run). Throws NodeNameInUseError
   * when another live instance holds it, NodeNameHeldError when the record is
   * another identity's and the name still holds claims or placements.
   */
  private async holdName(name: string, id: string): Promise<void> {
    const key = ALIVE + name;
    const value = JSON.stringify({ instance: this.instanceId, since: this.clock.now() } satisfies AliveValue);
    for (let attempt = 1; attempt <= 3; attempt++) {
      const [aliveRes, recordRes] = await Promise.all([this.conn.kv.get(key).exec(), this.conn.kv.get(NODES + name).exec()]);
      const held = aliveRes.kvs[0];
      const recordKv = recordRes.kvs[0];
      let aliveHolder: string | undefined;
      if (held) {
        try {
          aliveHolder = (JSON.parse(held.value.toString()) as AliveValue).instance ?? '';
        } catch {
          aliveHolder = '';
        }
      }
      const record = recordKv ? parseNodeRecord(recordKv.value.toString(), name) : undefined;
      // A record no one can read names no identity: unknown, as one written before identities.
      const recordView =
        record === undefined
          ? undefined
          : typeof record === 'string'
            ? {}
            : record.identity === undefined
              ? {}
              : { identity: record.identity };
      const work = held ? { claims: 0, unknownClaims: 0, unreadableClaims: 0, placements: 0 } : await this.workUnder(name);
      // A claims key no one can read may hold the name's claims only if the name has a node (a record): one with none (never
      // used, or purged) has nothing `node purge` could release, and one bad key anywhere would keep every new node out. Its
      // volume is safe either way: no one can claim a volume whose claims cannot be read.
      const unknownClaims = work.unknownClaims + (recordKv ? work.unreadableClaims : 0);
      const decision = decideNodeJoin({
        name,
        identity: this.instanceId,
        aliveHolder,
        record: recordView,
        foreignClaims: work.claims,
        unknownClaims,
        adoptsUnknown: this.adoptsUnknown,
        placements: work.placements,
      });
      if (decision.kind === 'refuse-live') {
        this.refusal = new NodeNameInUseError(name, decision.holder);
        throw this.refusal;
      }
      if (decision.kind === 'refuse-held') {
        this.refusal = new NodeNameHeldError(name, decision.holder, this.instanceId, decision.claims, decision.placements);
        throw this.refusal;
      }
      const txn =
        decision.kind === 'take-over'
          ? this.conn.kv.if(key, 'Mod', '==', held!.mod_revision)
          : this.conn.kv
              .if(key, 'Create', '==', 0)
              .and(NODES + name, recordKv ? 'Mod' : 'Create', '==', recordKv ? recordKv.mod_revision : 0);
      const done = await txn.then(this.conn.kv.put(key).value(value).lease(id)).commit();
      if (done.succeeded) {
        if (decision.kind === 'join' && recordView !== undefined && recordView.identity === undefined && this.adoptsUnknown) {
          this.adoptedUnknown = true;
          this.logger.warn(
            "joined under a node record written before node identities: taken as this agent's own (its id was in its data dir before this start); claims naming no identity under the name are its own",
            { node: name, identity: this.instanceId },
          );
        }
        return;
      }
    }
    throw new Error(`the alive key or the record of node "${name}" kept changing while this agent joined under it; trying again`);
  }

  /** Claims under the name that are not this identity's, the claims keys no one can read (their holders are unknown), and the slots placed on it. */
  private async workUnder(name: string): Promise<{ claims: number; unknownClaims: number; unreadableClaims: number; placements: number }> {
    const [claimKvs, placementKvs] = await Promise.all([
      this.conn.kv.getAll().prefix(CLAIMS).strings(),
      this.conn.kv.getAll().prefix(PLACEMENTS).strings(),
    ]);
    let claims = 0;
    let unknownClaims = 0;
    let unreadableClaims = 0;
    for (const text of Object.values(claimKvs)) {
      try {
        const list = (JSON.parse(text) as { claims?: unknown }).claims;
        if (!Array.isArray(list)) throw new Error('not a list of claims');
        for (const c of list as Array<{ nodeId?: unknown; nodeIdentity?: unknown } | null>) {
          if (c?.nodeId !== name || c.nodeIdentity === this.instanceId) continue;
          if (c.nodeIdentity === undefined) unknownClaims += 1;
          else claims += 1;
        }
      } catch {
        unreadableClaims += 1;
      }
    }
    let placements = 0;
    for (const text of Object.values(placementKvs)) {
      try {
        if ((JSON.parse(text) as { node?: unknown } | null)?.node === name) placements += 1;
      } catch {
        // Not one csiplug wrote: the jobs pass deletes it and places its slot again.
      }
    }
    return { claims, unknownClaims, unreadableClaims, placements };
  }

  /** Why the last attempt to register was refused (another live agent holds the name, or another identity's node still holds work under it); cleared once this one registers. */
  refusal: NodeNameInUseError | NodeNameHeldError | undefined;

  /** Whether this agent holds its node now (a current lease): only then may it claim, release or sweep as that node. */
  get holdsNode(): boolean {
    return this.lease !== undefined && !this.lease.revoked() && !this.disposed;
  }

  /** Called after every registration (the first, and each after a lost lease). */
  onRegistered: (() => void) | undefined;

  private lost(lease: Lease, err: Error): void {
    if (this.disposed || this.lease !== lease) return;
    this.lease = undefined;
    if (this.reregistering) return;
    this.logger.warn('the node lease in etcd was lost; registering the node again', { node: this.info?.name, error: errorMessage(err) });
    this.reregistering = this.registerAgain().finally(() => (this.reregistering = undefined));
  }

  private async registerAgain(): Promise<void> {
    for (let delay = 250; !this.disposed; delay = Math.min(delay * 2, 5_000)) {
      try {
        await this.register();
        this.logger.info('the node is registered in etcd again', { node: this.info?.name });
        return;
      } catch (err) {
        if (this.disposed) return;
        this.logger[err instanceof NodeNameInUseError || err instanceof NodeNameHeldError ? 'error' : 'debug'](
          'registering the node again failed; trying again',
          { error: errorMessage(err), delay_ms: delay },
        );
        await this.clock.sleep(delay, this.stop.signal).catch(() => undefined);
      }
    }
  }
}
