// What cluster mode needs to know (the agent config's `cluster {}` block):
// where etcd is, the key prefix every csiplug key lives under, and this
// node's name, class and meta; how long its heartbeat lease lives and how
// long a node may be away before its work is given to others. Core's
// vocabulary (the agent config reader fills it in); re-exported here, where
// cluster mode's users name it.
export { DEFAULT_CLUSTER_TIMINGS, type ClusterOptions, type EtcdTls } from '@csiplug/core';
