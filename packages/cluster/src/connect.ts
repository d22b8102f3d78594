// One etcd client per agent, scoped to the cluster's prefix: every key the
// cluster pieces read or write lives under it, so two clusters can share an
// etcd and a key can never be read outside its own cluster.
import { ValidationError, normaliseEndpoint } from '@csiplug/core';
import { BrokenCircuitError, ConstantBackoff, handleWhen, retry } from 'cockatiel';
import { Etcd3, isRecoverableError, type Namespace } from 'etcd3';
import * as fs from 'fs';
import type { ClusterOptions } from './options';

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

/** etcd away (no connection, no quorum, a deadline passed, every host's circuit open), as against a refusal. */
export function isEtcdAway(err: Error): boolean {
  return isRecoverableError(err) || err instanceof BrokenCircuitError || err.name === 'BrokenCircuitError';
}

// An endpoint's one form is core's vocabulary (the agent config reader
// refuses a bad one at load); re-exported here, where it was.
export { normaliseEndpoint };

export function connectEtcd(etcd: ClusterOptions['etcd']): EtcdConnection {
  if (etcd.endpoints.length === 0)
    throw new ValidationError('cluster.etcd.endpoints: at least one etcd endpoint is needed', 'cluster.etcd.endpoints');
  const hosts = etcd.endpoints.map(normaliseEndpoint);
  const secure = hosts.filter((h) => h.startsWith('https:')).length;
  if (secure !== 0 && secure !== hosts.length)
    throw new ValidationError(
      'cluster.etcd.endpoints: every endpoint is http://, or every one https:// (etcd3 cannot mix them)',
      'cluster.etcd.endpoints',
    );
  if (secure > 0 && !etcd.tls) throw new ValidationError('cluster.etcd: https:// endpoints need tls { ca = … }', 'cluster.etcd.tls');
  const credentials = etcd.tls
    ? {
        rootCertificate: read(etcd.tls.caFile, 'ca'),
        ...(etcd.tls.keyFile ? { privateKey: read(etcd.tls.keyFile, 'key') } : {}),
        ...(etcd.tls.certFile ? { certChain: read(etcd.tls.certFile, 'cert') } : {}),
      }
    : undefined;
  // dial_timeout bounds each single call, connecting included (etcd3 itself reads no dial timeout); streams
  // (watches, lease keep-alives) have none. A call that fails for want of etcd is tried once more on another
  // member, so the caller learns of an outage within two of them — never a promise that waits forever.
  const callTimeoutMs = etcd.dialTimeoutMs;
  const client = new Etcd3({
    hosts,
    defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + callTimeoutMs }),
    faultHandling: { global: retry(handleWhen(isRecoverableError), { maxAttempts: 1, backoff: new ConstantBackoff(100) }) },
    // gRPC's own reconnect backoff grows to two minutes: after etcd was away, the agent would keep
    // failing for that long after it is back. A member on the network is tried again within seconds.
    grpcOptions: { 'grpc.initial_reconnect_backoff_ms': 200, 'grpc.min_reconnect_backoff_ms': 200, 'grpc.max_reconnect_backoff_ms': 2_000 },
    ...(credentials ? { credentials } : {}),
  });
  return { client, kv: client.namespace(etcd.prefix), close: () => client.close() };
}
