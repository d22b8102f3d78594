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
// agent instance holding it (an id kept in its data dir): a restarted agent
// takes its node over; another machine with the same name is refused, since
// single-node claims go by node name.
import { Clock, CsiplugError, Logger, errorMessage, type AsyncDisposable } from '@csiplug/core';
import type { Lease } from 'etcd3';
import type { EtcdConnection } from './connect';

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
  /** ms since the epoch: first registered, and last written. */
  registeredAt: number;
  updatedAt: number;
}

export interface ClusterNodeView extends NodeRecord {
  status: 'ready' | 'down';
}

const NODES = 'nodes/';
const ALIVE = 'alive/';

/** Another live agent holds this node name (its lease is alive, with another instance id). */
export class NodeNameInUseError extends CsiplugError {
  /** An API's answer to a request this refused machine cannot serve (a conflict). */
  readonly httpStatus = 409;
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
    p !== null && typeof p === 'object' && typeof p.id === 'string' && typeof p.type === 'string' && typeof p.healthy === 'boolean' && (p.maxVolumes === undefined || Number.isFinite(p.maxVolumes));
  if (!Array.isArray(r.plugins) || !r.plugins.every(pluginOk)) return 'plugins is not a list of plugins';
  if (r.maxAllocsPerJob !== undefined && !(Number.isInteger(r.maxAllocsPerJob) && r.maxAllocsPerJob > 0)) return 'maxAllocsPerJob is not a positive whole number';
  return { nodeClass: '', meta: {}, version: '', registeredAt: 0, updatedAt: 0, ...r } as NodeRecord;
}

export class EtcdNodeRegistry implements AsyncDisposable {
  /** The one lease this node is alive under; replaced only by register(). */
  private lease: Lease | undefined;
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
  ) {}

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

  /** Writes what the node says of itself again (its plugins' health changed). */
  async update(info: NodeInfo): Promise<void> {
    this.info = info;
    await this.write();
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

  async get(name: string): Promise<ClusterNodeView | undefined> {
    return (await this.list()).find((n) => n.name === name);
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

  private async write(): Promise<void> {
    const info = this.info!;
    const record: NodeRecord = { ...info, registeredAt: this.registeredAt ?? this.clock.now(), updatedAt: this.clock.now() };
    await this.conn.kv.put(NODES + info.name).value(JSON.stringify(record));
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
    this.registeredAt ??= (await this.record(name))?.registeredAt ?? this.clock.now();
    const lease = this.conn.kv.lease(this.ttlSeconds, { autoKeepAlive: true });
    try {
      const id = await lease.grant();
      await this.holdName(name, id);
      // The record only once the name is this agent's: a refused machine never writes over the node it is not.
      await this.write();
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
    this.refusedBy = undefined;
    previous?.release();
    lease.on('lost', (err) => this.lost(lease, err));
    this.onRegistered?.();
  }

  /**
   * The alive key, under lease `id`: created if no one holds it, or taken
   * over — only as it was read, so a key another machine created meanwhile is
   * never written over — if this instance held it (the lease of this agent's
   * last run). Throws NodeNameInUseError when another live instance holds it.
   */
  private async holdName(name: string, id: string): Promise<void> {
    const key = ALIVE + name;
    const value = JSON.stringify({ instance: this.instanceId, since: this.clock.now() } satisfies AliveValue);
    for (let attempt = 1; attempt <= 3; attempt++) {
      const created = await this.conn.kv.if(key, 'Create', '==', 0).then(this.conn.kv.put(key).value(value).lease(id)).commit();
      if (created.succeeded) return;
      const held = (await this.conn.kv.get(key).exec()).kvs[0];
      if (!held) continue; // it expired in between: create it
      let instance = '';
      try {
        instance = (JSON.parse(held.value.toString()) as AliveValue).instance ?? '';
      } catch {
        instance = '';
      }
      if (instance !== this.instanceId) {
        this.refusedBy = instance || 'unknown';
        throw new NodeNameInUseError(name, this.refusedBy);
      }
      const taken = await this.conn.kv.if(key, 'Mod', '==', held.mod_revision).then(this.conn.kv.put(key).value(value).lease(id)).commit();
      if (taken.succeeded) return;
    }
    throw new Error(`the alive key of node "${name}" kept changing while this agent took it over; trying again`);
  }

  /** The instance that held this node's name at the last attempt to register, when another live agent did (cleared once this one registers). */
  refusedBy: string | undefined;

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
        this.logger[err instanceof NodeNameInUseError ? 'error' : 'debug']('registering the node again failed; trying again', { error: errorMessage(err), delay_ms: delay });
        await this.clock.sleep(delay, this.stop.signal).catch(() => undefined);
      }
    }
  }
}
