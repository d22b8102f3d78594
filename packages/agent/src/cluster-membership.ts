// This agent as one node of a cluster (config `cluster { … }`): its
// connection to etcd, its node under a lease (registered in the background,
// so an etcd that is away never holds the agent's start, its tasks or its
// mounts), what it says of itself kept current as its plugins' health
// changes, and the cluster's nodes for `node status`.
import { EtcdNodeRegistry, EtcdVolumeClaims, connectEtcd, type ClusterNodeView, type ClusterOptions, type EtcdConnection, type NodeInfo } from '@csiplug/cluster';
import { Clock, Logger, errorMessage, type AsyncDisposable } from '@csiplug/core';

/** How long a burst of health changes is gathered before the node record is written again. */
const REFRESH_DELAY_MS = 1_000;

export class ClusterMembership implements AsyncDisposable {
  readonly conn: EtcdConnection;
  readonly claims: EtcdVolumeClaims;
  private readonly nodes: EtcdNodeRegistry;
  private disposed = false;
  private joined = false;
  private joining: Promise<void> | undefined;
  private refreshTimer: { dispose(): void } | undefined;

  constructor(
    readonly options: ClusterOptions,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {
    this.conn = connectEtcd(options.etcd);
    this.claims = new EtcdVolumeClaims(this.conn, () => clock.now());
    this.nodes = new EtcdNodeRegistry(this.conn, options.heartbeatTtlMs, clock, logger);
  }

  get nodeName(): string {
    return this.options.nodeName;
  }

  /** Registers the node, trying again until etcd answers; never throws (etcd away is logged, and waited for). */
  join(info: () => NodeInfo): void {
    this.joining ??= (async () => {
      for (let delay = 500; !this.disposed; delay = Math.min(delay * 2, 10_000)) {
        try {
          await this.nodes.start(info());
          this.joined = true;
          this.logger.info('joined the cluster', { node: this.options.nodeName, endpoints: this.options.etcd.endpoints });
          return;
        } catch (err) {
          this.logger.warn('etcd did not answer; the node joins the cluster once it does (tasks and mounts here are untouched)', { error: errorMessage(err), retry_ms: delay });
          await this.clock.sleep(delay).catch(() => undefined);
        }
      }
    })();
  }

  /** What the node says of itself changed (a plugin's health): written again, once per burst. */
  refresh(info: () => NodeInfo): void {
    if (this.disposed || this.refreshTimer) return;
    this.refreshTimer = this.clock.setTimeout(() => {
      this.refreshTimer = undefined;
      if (!this.joined || this.disposed) return;
      this.nodes.update(info()).catch((err: unknown) => this.logger.warn('the node record in etcd could not be updated; the next change writes it again', { error: errorMessage(err) }));
    }, REFRESH_DELAY_MS);
  }

  /** Every node of the cluster, ready or down. Throws when etcd does not answer. */
  list(): Promise<ClusterNodeView[]> {
    return this.nodes.list();
  }

  /** Lets the lease run out (the next agent renews the node) and closes the connection. */
  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    this.refreshTimer?.dispose();
    await this.nodes.dispose().catch(() => undefined);
    await this.joining?.catch(() => undefined);
    this.conn.close();
  }
}
