// An etcd client URL in the one form the etcd client takes. The agent config
// reader refuses a bad endpoint at load, naming it; cluster mode normalises
// the endpoints it connects to with the same function.
import { ValidationError } from '../errors';

/**
 * An endpoint as the client needs it: scheme, host and port, nothing else
 * (etcd3 hands `host:port/` to gRPC as it is, and a trailing slash breaks
 * every call). Throws ValidationError for anything else.
 */
export function normaliseEndpoint(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new ValidationError(`"${url}" is not an etcd client URL like "http://10.0.0.1:2379"`, 'cluster.etcd.endpoints');
  }
  if (
    (u.protocol !== 'http:' && u.protocol !== 'https:') ||
    !u.hostname ||
    (u.pathname !== '/' && u.pathname !== '') ||
    u.search ||
    u.hash ||
    u.username ||
    u.password
  ) {
    throw new ValidationError(
      `"${url}" is not an etcd client URL like "http://10.0.0.1:2379" (scheme, host and port only)`,
      'cluster.etcd.endpoints',
    );
  }
  // No port named: etcd's client port (a URL's own default, 80 or 443, is never etcd's).
  const port = u.port || '2379';
  return `${u.protocol}//${u.hostname}:${port}`;
}
