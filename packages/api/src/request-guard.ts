// The API's front-door checks, run on every request before routing, the
// token or the body: the agent starts processes as root, so a web page in a
// browser on this machine (cross-site request forgery), a page whose name
// rebinds to 127.0.0.1 (DNS rebinding), or a proxy-style request must never
// reach a handler, with or without an ACL token.
//
// A request passes only if:
//   - its target is origin-form (`/v1/jobs`), not absolute-form
//     (`http://x/v1/jobs`) or asterisk-form (`*`);
//   - its Host names this agent: the bound address, `localhost` or one of
//     the machine's own addresses when bound to a wildcard, each with the
//     bound port (a page served on another port of this machine is another
//     origin), or an allowed host (a proxy's name: any port);
//   - its Origin, when sent, is this agent's own origin (scheme, host, port)
//     or an allowed origin;
//   - its Sec-Fetch-Site, when sent, is not `cross-site`;
//   - a write (POST, PUT, PATCH, or any request with a body) from a browser
//     says `Content-Type: application/json`. Browsers may send text/plain,
//     form-urlencoded and multipart bodies (and bodies with no type at all)
//     cross-origin without asking first; a JSON content type forces a CORS
//     preflight, which this API never grants. A write is a browser's when it
//     carries `Origin` (every browser sends it on a cross-origin POST, PUT,
//     PATCH or DELETE, form or fetch, `null` from an opaque origin) or any
//     `Sec-Fetch-*` header (sent by current browsers on every request).
//     A write with neither, or one that carries the ACL token in
//     X-Nomad-Token or `Authorization: Bearer` (headers no page can send
//     cross-site without the preflight), may send any content type or none:
//     Nomad's Go client sends its bodies without one, and curl --data as
//     Nomad's API docs use it sends form-urlencoded.
import type { IncomingMessage } from 'http';
import * as net from 'net';
import * as os from 'os';
import { normaliseHost, parseHostHeader } from '@csiplug/jobspec';
import { ApiError, ApiErrorCode } from './api-error';
import { TOKEN_HEADER } from './protocol';

export interface RequestGuardOptions {
  /** The address the API is bound to (an IP; may be a wildcard). */
  bindAddr: string;
  /** The port actually bound. */
  port: number;
  /** Whether the API speaks TLS (the scheme of its own origin). */
  tls: boolean;
  /** Extra host names the Host header may carry (a proxy's or a DNS name of this machine). */
  allowedHosts?: readonly string[];
  /** Extra origins (`https://ui.example:8443`) whose pages may call the API. */
  allowedOrigins?: readonly string[];
}

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH']);
/** Headers the checks read, which a request may carry once only. */
const SINGLE_HEADERS = ['host', 'origin', 'content-type', 'sec-fetch-site'];

function forbidden(message: string): ApiError {
  return new ApiError(403, ApiErrorCode.Forbidden, message);
}

function isWildcard(addr: string): boolean {
  return addr === '0.0.0.0' || addr === '::';
}

function localAddresses(): string[] {
  const out: string[] = [];
  for (const list of Object.values(os.networkInterfaces())) for (const a of list ?? []) out.push(normaliseHost(a.address));
  return out;
}

export class RequestGuard {
  private readonly hosts: Set<string>;
  /** Names from http { allowed_hosts }: a proxy in front may use its own port. */
  private readonly proxyHosts: Set<string>;
  private readonly port: number;
  /** The port a Host header without one means: the scheme's default. */
  private readonly defaultPort: number;
  private readonly origins: Set<string>;
  private readonly extraOrigins: Set<string>;
  private readonly bindAddr: string;

  constructor(options: RequestGuardOptions) {
    this.bindAddr = normaliseHost(options.bindAddr);
    this.proxyHosts = new Set((options.allowedHosts ?? []).map(normaliseHost));
    this.hosts = new Set(['localhost', this.bindAddr, ...this.proxyHosts]);
    this.port = options.port;
    this.defaultPort = options.tls ? 443 : 80;
    // A wildcard bind answers on every address of the machine: each is a name of this agent.
    if (isWildcard(this.bindAddr)) for (const a of localAddresses()) this.hosts.add(a);
    const scheme = options.tls ? 'https' : 'http';
    // As a browser writes them: no port when it is the scheme's default.
    const own = [...this.hosts].map((h) => new URL(`${scheme}://${net.isIPv6(h) ? `[${h}]` : h}:${options.port}`).origin);
    this.extraOrigins = new Set((options.allowedOrigins ?? []).map((o) => o.toLowerCase()));
    this.origins = new Set([...own.map((o) => o.toLowerCase()), ...this.extraOrigins]);
  }

  /** Throws a 400/403 ApiError that says what was refused; returns when the request may go on. */
  check(req: IncomingMessage): void {
    const target = req.url ?? '';
    if (!target.startsWith('/') || target.startsWith('//')) {
      throw forbidden(
        `the request target must be a path like /v1/jobs (origin-form); "${printable(target)}" is refused (absolute and asterisk forms are not served)`,
      );
    }

    // One of each: Node keeps the first of a repeated header, a proxy or a later check might read another.
    for (const name of SINGLE_HEADERS) {
      let seen = 0;
      for (let i = 0; i < req.rawHeaders.length; i += 2) if (req.rawHeaders[i]!.toLowerCase() === name) seen++;
      if (seen > 1) throw forbidden(`the request carries ${name} ${seen} times; send it once`);
    }

    const hostHeader = req.headers.host;
    if (hostHeader === undefined || hostHeader === '') throw forbidden('the request has no Host header; send the address you connected to');
    const host = parseHostHeader(hostHeader);
    if (!host || !this.hosts.has(host.host)) {
      throw forbidden(
        `the Host header "${printable(hostHeader)}" does not name this agent (accepted: ${[...this.hosts].sort().join(', ')}); ` +
          'to reach it under another name, add the name to http { allowed_hosts } in the agent config',
      );
    }
    const hostPort = host.port ?? this.defaultPort;
    if (hostPort !== this.port && !this.proxyHosts.has(host.host)) {
      throw forbidden(
        `the Host header "${printable(hostHeader)}" names port ${hostPort}, but this agent listens on ${this.port}: ` +
          `send the address you connected to (${host.host}:${this.port}); behind a proxy, add the proxy's name to http { allowed_hosts }`,
      );
    }

    const origin = req.headers.origin;
    if (origin !== undefined && !this.origins.has(origin.toLowerCase())) {
      throw forbidden(
        `cross-origin requests are refused: Origin "${printable(origin)}" is not this agent's own origin; ` +
          'to let a page of another origin call the API, add it to http { allowed_origins } in the agent config',
      );
    }

    // A browser says where the request comes from; only an origin the config allows may come from another site.
    const site = req.headers['sec-fetch-site']?.toLowerCase();
    if (site?.split(',').some((v) => v.trim() === 'cross-site') && !(origin !== undefined && this.extraOrigins.has(origin.toLowerCase()))) {
      throw forbidden('cross-site requests are refused (Sec-Fetch-Site: cross-site)');
    }

    const method = (req.method ?? 'GET').toUpperCase();
    const hasBody =
      (req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0') ||
      req.headers['transfer-encoding'] !== undefined;
    if ((WRITE_METHODS.has(method) || hasBody) && isFromBrowser(req) && !carriesToken(req)) {
      const type = req.headers['content-type'];
      if (!isJsonType(type)) {
        throw forbidden(
          `${method} requests must send a JSON body with Content-Type: application/json (got ${type ? `"${printable(type)}"` : 'none'}); ` +
            'a request from a browser (it carries Origin or Sec-Fetch-*) may send no other, so that no web page of another site can send one here',
        );
      }
    }
  }
}

/** Whether a request says it comes from a browser: an Origin (even `null`) or any Sec-Fetch-* header. */
function isFromBrowser(req: IncomingMessage): boolean {
  if (req.headers.origin !== undefined) return true;
  return Object.keys(req.headers).some((name) => name.startsWith('sec-fetch-'));
}

/**
 * Whether a request carries an ACL token (valid or not: the token check
 * decides that later) in a header no page can set cross-site without a CORS
 * preflight: X-Nomad-Token, or `Authorization: Bearer`. Not Basic: a browser
 * attaches remembered Basic credentials by itself.
 */
function carriesToken(req: IncomingMessage): boolean {
  const token = req.headers[TOKEN_HEADER.toLowerCase()];
  if (typeof token === 'string' && token !== '') return true;
  const auth = req.headers.authorization;
  return typeof auth === 'string' && /^Bearer +\S+$/i.test(auth);
}

/** `application/json`, with or without parameters such as `; charset=utf-8`. */
function isJsonType(value: string | undefined): boolean {
  if (!value) return false;
  const [type = '', ...params] = value.split(';').map((s) => s.trim().toLowerCase());
  if (type !== 'application/json') return false;
  return params.every((p) => p === '' || p === 'charset=utf-8' || p === 'charset="utf-8"');
}

/** A header value or request target fit for a message or log line: control characters escaped, at most 200 characters. */
export function printable(value: string): string {
  const short = value.length > 200 ? `${value.slice(0, 200)}…` : value;
  // eslint-disable-next-line no-control-regex
  return short.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}
