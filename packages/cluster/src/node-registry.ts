// The cluster's nodes, in etcd. Each agent keeps two keys:
//   nodes/<name>   what the node is (class, meta, drivers, plugins with
//                  their health, topology, max volumes); it stays when the
//                  node goes away, so a down node is still listed;
//   alive/<name>   bound to the node's lease, which the agent keeps alive.
// A node whose lease expired (its agent stopped renewing it for the TTL) has
// no alive key: it is down. An agent that stops on purpose lets its lease
// run out rather than revoking it: its tasks run on, and the next agent
// renews the node before anyone counts it down.
import { Clock, Logger, errorMessage, type AsyncDisposable } from '@csiplug/core';
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

export class EtcdNodeRegistry implements AsyncDisposable {
  private lease: Lease | undefined;
  private info: NodeInfo | undefined;
  private registeredAt: number | undefined;
  private disposed = false;
  /** The one loop that grants a new lease after one was lost (a lease that fails while it runs starts no second loop). */
  private regrant: Promise<void> | undefined;

  constructor(
    private readonly conn: EtcdConnection,
    private readonly ttlMs: number,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /** The lease's TTL in whole seconds, as etcd counts it. */
  get ttlSeconds(): number {
    return Math.max(1, Math.ceil(this.ttlMs / 1000));
  }

  /** Registers this node (or takes it over again after an agent restart) and keeps it alive. */
  async start(info: NodeInfo): Promise<void> {
    this.info = info;
    const existing = await this.record(info.name);
    this.registeredAt = existing?.registeredAt ?? this.clock.now();
    await this.write();
    await this.grant();
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
      try {
        const record = JSON.parse(text) as NodeRecord;
        nodes.push({ ...record, status: up.has(key.slice(NODES.length)) ? 'ready' : 'down' });
      } catch (err) {
        this.logger.warn('a node record in etcd cannot be read; it is left out', { key, error: errorMessage(err) });
      }
    }
    return nodes.sort((a, b) => a.name.localeCompare(b.name));
  }

  async get(name: string): Promise<ClusterNodeView | undefined> {
    return (await this.list()).find((n) => n.name === name);
  }

  /** Stops renewing the lease: the node counts as down once its TTL runs out, unless the next agent renews it first. */
  async dispose(): Promise<void> {
    this.disposed = true;
    this.lease?.release();
    this.lease = undefined;
    await this.regrant?.catch(() => undefined);
  }

  /** Ends the lease now: the node is down at once (the node leaves the cluster). */
  async leave(): Promise<void> {
    this.disposed = true;
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

  /** A new lease and the alive key under it; a lease lost (etcd away longer than the TTL) is granted again once etcd answers. */
  private async grant(): Promise<void> {
    const lease = this.conn.kv.lease(this.ttlSeconds, { autoKeepAlive: true });
    this.lease = lease;
    lease.on('lost', (err) => {
      if (this.disposed || this.lease !== lease) return;
      this.lease = undefined;
      if (this.regrant) return;
      this.logger.warn('the node lease in etcd was lost; granting a new one', { node: this.info?.name, error: errorMessage(err) });
      this.regrant = this.retryGrant().finally(() => (this.regrant = undefined));
    });
    try {
      await lease.put(ALIVE + this.info!.name).value(JSON.stringify({ since: this.clock.now() }));
    } catch (err) {
      // This lease is given up (its own 'lost' must not start a second retry); the caller tries a new one.
      if (this.lease === lease) this.lease = undefined;
      lease.release();
      throw err;
    }
  }

  private async retryGrant(): Promise<void> {
    for (let delay = 250; !this.disposed; delay = Math.min(delay * 2, 5_000)) {
      try {
        await this.grant();
        await this.write();
        this.logger.info('the node is registered in etcd again', { node: this.info?.name });
        return;
      } catch (err) {
        this.logger.debug('granting the node lease failed; trying again', { error: errorMessage(err), delay_ms: delay });
        await this.clock.sleep(delay);
      }
    }
  }
}
