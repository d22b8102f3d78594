// This agent as one node of a cluster (config `cluster { … }`): its
// connection to etcd, its node under a lease (registered in the background,
// so an etcd that is away never holds the agent's start, its tasks or its
// mounts), what it says of itself kept current as its plugins' health
// changes, and the cluster's nodes for `node status`.
import { CsiplugError, errorMessage, type AsyncDisposable, type Clock, type Logger } from '@csiplug/core';
import { randomUUID } from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { EtcdVolumeClaims } from './claims';
import { connectEtcd, type EtcdConnection } from './connect';
import { NodeNameHeldError } from './node-identity';
import { EtcdNodeRegistry, NodeNameInUseError, type ClusterNodeView, type NodeInfo, type NodeRecord } from './node-registry';
import type { ClusterOptions } from './options';

/** The node's identity file in the data dir cannot be read, or holds no identity: it is never replaced by a new one. */
export class NodeIdentityFileError extends CsiplugError {
  constructor(message: string, options?: { cause?: unknown }) {
    // The data dir's code: the file is one of the data dir's, and what to do is the same (fix or restore it).
    super('EDATADIR', message, options);
  }
}

/** How long a burst of health changes is gathered before the node record is written again. */
const REFRESH_DELAY_MS = 1_000;

/** How often the cluster's nodes are read for the views that must answer at once (plugin status across nodes). */
const NODES_READ_INTERVAL_MS = 2_000;

/**
 * The file in the data dir that names this agent instance to the cluster: the
 * node's identity (node-identity.ts in @csiplug/cluster), in its record and on
 * every claim it makes. A restarted agent takes its node over; another data
 * dir under the same name is another node.
 */
export const CLUSTER_INSTANCE_FILE = 'cluster-instance';

/**
 * This data dir's instance id, made on first use (0600, like the rest of the
 * data dir's files). Written to a temp file, synced and renamed, so a crash
 * never leaves a torn one; a file that is there but holds no id is an error
 * that names it — minting a new id over it would make this machine another
 * node, refused its own name while its old identity holds work.
 */
export function clusterInstanceId(dataDir: string): string {
  const file = path.join(dataDir, CLUSTER_INSTANCE_FILE);
  let text: string | undefined;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
      throw new NodeIdentityFileError(`cannot read this node's identity in ${file}: ${errorMessage(err)}`, { cause: err });
  }
  if (text !== undefined) {
    const id = text.trim();
    if (/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id)) return id;
    throw new NodeIdentityFileError(
      `${file} should hold this node's identity (a UUID) but holds ${JSON.stringify(text.slice(0, 80))}: restore it from a backup, ` +
        'or remove it to join as a new node (the old identity keeps its name until `csiplug node purge NODE`)',
    );
  }
  const id = randomUUID();
  const tmp = `${file}.tmp`;
  const fd = fs.openSync(tmp, 'w', 0o600);
  try {
    fs.writeSync(fd, `${id}\n`);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, file);
  const dir = fs.openSync(dataDir, 'r');
  try {
    fs.fsyncSync(dir);
  } finally {
    fs.closeSync(dir);
  }
  return id;
}

export class ClusterMembership implements AsyncDisposable {
  readonly conn: EtcdConnection;
  readonly claims: EtcdVolumeClaims;
  private readonly nodes: EtcdNodeRegistry;
  private readonly stop = new AbortController();
  private joined = false;
  private joining: Promise<void> | undefined;
  private refreshTimer: { dispose(): void } | undefined;
  /** The node said something new that is not in etcd yet. */
  private dirty = false;
  private onJoined: (() => void) | undefined;
  /** The cluster's nodes as last read (every NODES_READ_INTERVAL_MS while joined), and when. */
  private nodesSeen: { nodes: ClusterNodeView[]; at: number } | undefined;
  private nodesReader: { dispose(): void } | undefined;

  constructor(
    readonly options: ClusterOptions,
    /** This node's identity (clusterInstanceId). */
    readonly identity: string,
    private readonly clock: Clock,
    private readonly logger: Logger,
    /** The identity was in the data dir before this start: a node record and claims written before identities may be this node's (decideNodeJoin). */
    adoptsUnknown = false,
  ) {
    this.conn = connectEtcd(options.etcd);
    this.claims = new EtcdVolumeClaims(this.conn, () => clock.now(), identity);
    this.nodes = new EtcdNodeRegistry(this.conn, options.heartbeatTtlMs, clock, logger, identity, adoptsUnknown);
  }

  /** Whether a claim under this node's name is this node's: its identity, or none when this agent adopted a record written before identities. */
  ownsClaim(claim: { nodeId: string; nodeIdentity?: string }): boolean {
    if (claim.nodeId !== this.nodeName) return false;
    return claim.nodeIdentity === this.identity || (claim.nodeIdentity === undefined && this.nodes.adoptedUnknown);
  }

  get nodeName(): string {
    return this.options.nodeName;
  }

  get disposed(): boolean {
    return this.stop.signal.aborted;
  }

  /** Why this agent was refused its node name at the last attempt to join (another live agent holds it, or another identity's node still holds work under it). */
  get refusal(): NodeNameInUseError | NodeNameHeldError | undefined {
    return this.nodes.refusal;
  }

  /** Whether the node `name` holds a live lease now. Throws when etcd does not answer. */
  nodeAlive(name: string): Promise<boolean> {
    return this.nodes.isAlive(name);
  }

  /** `node purge`: the node's record removed, only while it is down; 'alive' when it is up. */
  purgeRecord(name: string): Promise<NodeRecord | 'alive' | undefined> {
    return this.nodes.purgeRecord(name);
  }

  /** Whether this agent holds its node now (joined, its lease current). */
  get holdsNode(): boolean {
    return this.nodes.holdsNode;
  }

  /**
   * Registers the node, trying again until etcd answers (and until the name
   * is free, when another live agent holds it); never throws. `then` runs
   * after every registration — the first and each after a lost lease — (the
   * agent settles the node there: passes until one is whole, then its claims
   * asserted in etcd).
   */
  join(info: () => NodeInfo, then?: () => void): void {
    this.onJoined = then;
    this.nodes.onRegistered = () => {
      if (this.joined) this.onJoined?.();
    };
    this.joining ??= (async () => {
      for (let delay = 500; !this.disposed; delay = Math.min(delay * 2, 10_000)) {
        try {
          await this.nodes.start(info());
          if (this.disposed) return;
          this.joined = true;
          this.logger.info('joined the cluster', { node: this.options.nodeName, endpoints: this.options.etcd.endpoints });
          this.readNodes();
          this.nodesReader = this.clock.setInterval(() => this.readNodes(), NODES_READ_INTERVAL_MS);
          if (this.dirty) this.refresh(info);
          this.onJoined?.();
          return;
        } catch (err) {
          if (this.disposed) return;
          if (err instanceof NodeNameInUseError || err instanceof NodeNameHeldError) this.logger.error(err.message, { retry_ms: delay });
          else
            this.logger.warn('etcd did not answer; the node joins the cluster once it does (tasks and mounts here are untouched)', {
              error: errorMessage(err),
              retry_ms: delay,
            });
          await this.clock.sleep(delay, this.stop.signal).catch(() => undefined);
        }
      }
    })();
  }

  /** What the node says of itself changed (a plugin's health): written again, once per burst, until it is written. */
  refresh(info: () => NodeInfo, delay = REFRESH_DELAY_MS): void {
    this.dirty = true;
    if (this.disposed || this.refreshTimer || !this.joined) return;
    this.refreshTimer = this.clock.setTimeout(() => {
      this.refreshTimer = undefined;
      if (this.disposed) return;
      this.dirty = false;
      this.nodes.update(info()).catch((err: unknown) => {
        this.logger.warn('the node record in etcd could not be updated; trying again', { error: errorMessage(err) });
        this.refresh(info, 5_000);
      });
    }, delay);
  }

  /** The nodes as last read (undefined before the first read): for views that may not wait on etcd. */
  get lastSeenNodes(): { nodes: ClusterNodeView[]; at: number } | undefined {
    return this.nodesSeen;
  }

  private reading = false;
  private readNodes(): void {
    if (this.reading || this.disposed) return;
    this.reading = true;
    this.nodes
      .list()
      .then((nodes) => (this.nodesSeen = { nodes, at: this.clock.now() }))
      .catch(() => undefined) // etcd away: the last view stands, with its time
      .finally(() => (this.reading = false));
  }

  /** Every node of the cluster, ready or down (and the view that must answer at once is brought up to it). Throws when etcd does not answer. */
  async list(): Promise<ClusterNodeView[]> {
    const nodes = await this.nodes.list();
    this.nodesSeen = { nodes, at: this.clock.now() };
    return nodes;
  }

  /** Lets the lease run out (the next agent renews the node) and closes the connection; never waits on etcd. */
  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.stop.abort();
    this.refreshTimer?.dispose();
    this.nodesReader?.dispose();
    // Closed first: a join or a re-registration in flight fails at once rather than being waited for.
    this.conn.close();
    await this.nodes.dispose().catch(() => undefined);
    await this.joining?.catch(() => undefined);
  }
}
