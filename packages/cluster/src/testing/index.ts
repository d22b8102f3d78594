// @csiplug/cluster/testing: what tests of cluster mode use — a real etcd cluster on loopback.
export * from './etcd-cluster';
