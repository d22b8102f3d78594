// Who may reach the agent's HTTP API: the rules the config checks when it
// is read and the API checks again when it listens and on every request
// (one definition for both, so they cannot drift).
import * as net from 'net';

/** Whether an IP address is a loopback address (only this machine reaches it). */
export function isLoopbackAddress(address: string): boolean {
  const a = address.toLowerCase();
  return a === '::1' || a.startsWith('127.') || a.startsWith('::ffff:127.');
}

/**
 * Why the API may not serve `bindAddr` as configured, or undefined when it
 * may: a non-loopback address needs an ACL token and TLS, unless the
 * operator said `insecure_allow_public`.
 */
export function publicBindProblem(
  bindAddr: string,
  opts: { token: boolean; tls: boolean; insecureAllowPublic: boolean },
): string | undefined {
  if (net.isIP(bindAddr) === 0)
    return `${bindAddr} is not an IP address; bind to one (127.0.0.1 unless the API must be reachable from elsewhere)`;
  if (isLoopbackAddress(bindAddr) || opts.insecureAllowPublic) return undefined;
  const missing = [!opts.token && 'an ACL token (acl { token })', !opts.tls && 'TLS (tls { cert_file, key_file })'].filter(Boolean);
  if (missing.length === 0) return undefined;
  return (
    `${bindAddr} is reachable from other machines, and the API starts processes as this agent's user: ` +
    `it needs ${missing.join(' and ')}; or bind to 127.0.0.1, or set acl { insecure_allow_public = true } to serve it anyway`
  );
}

/** `[::1]` → `::1`, lower case. */
export function normaliseHost(host: string): string {
  const h = host.toLowerCase();
  return h.startsWith('[') && h.endsWith(']') ? h.slice(1, -1) : h;
}

/** Splits a Host header (`name`, `name:port`, `[v6]`, `[v6]:port`) into its name and port. */
export function parseHostHeader(value: string): { host: string; port?: number } | undefined {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:[\]\s/@]+)(?::(\d{1,5}))?$/.exec(value);
  if (!m) return undefined;
  const port = m[2] !== undefined ? Number(m[2]) : undefined;
  if (port !== undefined && port > 65535) return undefined;
  return { host: normaliseHost(m[1]!), ...(port !== undefined ? { port } : {}) };
}

/** Checks an allowed_hosts entry: a bare host name or IP, no scheme, port or path. */
export function validAllowedHost(entry: string): boolean {
  const parsed = parseHostHeader(entry);
  return (
    parsed !== undefined &&
    parsed.port === undefined &&
    (net.isIP(parsed.host) !== 0 || /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/.test(parsed.host))
  );
}

/** Checks an allowed_origins entry: exactly `scheme://host[:port]`, as a browser sends it. */
export function validAllowedOrigin(entry: string): boolean {
  try {
    const url = new URL(entry);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.origin === entry;
  } catch {
    return false;
  }
}
