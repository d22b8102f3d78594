// What cluster mode needs to know (the agent config's `cluster {}` block):
// where etcd is, the key prefix every csiplug key lives under, and this
// node's name, class and meta; how long its heartbeat lease lives and how
// long a node may be away before its work is given to others. The agent
// config reader fills it in; @csiplug/cluster runs on it.
export interface EtcdTls {
  /** PEM files. */
  caFile: string;
  certFile?: string;
  keyFile?: string;
}

export interface ClusterOptions {
  etcd: {
    /** Client URLs of the etcd members, e.g. http://10.0.0.1:2379. */
    endpoints: string[];
    /** Every key of this cluster starts with it (several clusters may share one etcd). */
    prefix: string;
    /** How long a connection attempt may take (ms). */
    dialTimeoutMs: number;
    tls?: EtcdTls;
  };
  /** This node's id in the cluster: unique among the agents sharing the prefix. */
  nodeName: string;
  nodeClass: string;
  meta: Record<string, string>;
  /** This node's datacenter (the agent config's `datacenter`): jobs with `datacenters` are placed only where one matches. */
  datacenter?: string;
  /** The TTL of the node's lease (ms): a node whose agent stops renewing it for this long is down. */
  heartbeatTtlMs: number;
  /** How long a down node keeps its work before it is given to others (Nomad's max_client_disconnect), ms. */
  disconnectGraceMs: number;
  /** This agent's API address as other agents reach it (scheme, host, port); absent: its bind address, unless that is a wildcard. */
  advertise?: string;
}

export const DEFAULT_CLUSTER_TIMINGS = Object.freeze({
  dialTimeoutMs: 5_000,
  heartbeatTtlMs: 10_000,
  disconnectGraceMs: 60_000,
  prefix: 'csiplug/',
});
