// One etcd client per agent, scoped to the cluster's prefix: every key the
// cluster pieces read or write lives under it, so two clusters can share an
// etcd and a key can never be read outside its own cluster.
import { ValidationError } from '@csiplug/core';
import { Etcd3, type Namespace } from 'etcd3';
import * as fs from 'fs';
import type { ClusterOptions } from './options';

/** How long one etcd call may take by default (ms). */
export const DEFAULT_CALL_TIMEOUT_MS = 5_000;

export interface EtcdConnection {
  /** The client's view of the cluster's prefix. */
  readonly kv: Namespace;
  readonly client: Etcd3;
  close(): void;
}

function read(file: string, what: string): Buffer {
  try {
    return fs.readFileSync(file);
  } catch (err) {
    throw new ValidationError(`cluster.etcd.tls.${what}: cannot read ${file}: ${(err as Error).message}`, `cluster.etcd.tls.${what}`);
  }
}

export function connectEtcd(etcd: ClusterOptions['etcd'] & { callTimeoutMs?: number }): EtcdConnection {
  if (etcd.endpoints.length === 0) throw new ValidationError('cluster.etcd.endpoints: at least one etcd endpoint is needed', 'cluster.etcd.endpoints');
  const credentials = etcd.tls
    ? {
        rootCertificate: read(etcd.tls.caFile, 'ca'),
        ...(etcd.tls.keyFile ? { privateKey: read(etcd.tls.keyFile, 'key') } : {}),
        ...(etcd.tls.certFile ? { certChain: read(etcd.tls.certFile, 'cert') } : {}),
      }
    : undefined;
  // Every single call has a deadline (streams — watches, lease keep-alives — do not): with etcd away a
  // caller gets an error it can act on, never a promise that waits forever.
  const callTimeoutMs = etcd.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  const client = new Etcd3({
    hosts: etcd.endpoints,
    dialTimeout: etcd.dialTimeoutMs,
    defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + callTimeoutMs }),
    // gRPC's own reconnect backoff grows to two minutes: after etcd was away, the agent would keep
    // failing for that long after it is back. A member on the network is tried again within seconds.
    grpcOptions: { 'grpc.initial_reconnect_backoff_ms': 200, 'grpc.min_reconnect_backoff_ms': 200, 'grpc.max_reconnect_backoff_ms': 2_000 },
    ...(credentials ? { credentials } : {}),
  });
  return { client, kv: client.namespace(etcd.prefix), close: () => client.close() };
}
