// The agent's HTTP API: Nomad-shaped paths over the AgentService, JSON in
// and out, an optional ACL token (X-Csiplug-Token or Authorization: Bearer, else 403; without
// one, only root on this machine is served: root-only-access.ts), and the NDJSON
// event stream. Every body is read and validated in full before the service
// is called, so a refused request changes nothing. Errors are
// `{ "error": message, "code": code }` with 400 (bad JSON, unknown fields,
// failed validation, body over the limit), 403, 404, 405 (with Allow), 409
// (conflicts such as a claimed volume) or 500; see statusForError.
//
//   method  path                                   body                      answer
//   GET     /v1/agent/health                                                 AgentHealth (503 when not ok)
//   GET     /v1/node/self                                                    NodeView (this node: drivers, plugins' fingerprints)
//   PUT     /v1/node/:name/purge                                             NodePurgeResult (cluster: a down node's claims released, its record removed)
//   GET     /v1/nodes                                                        NodeList (this node, or every node of its cluster; 503 while etcd is away)
//   GET     /v1/jobs                                                         JobView[]
//   POST    /v1/jobs  (PUT too)                    { "Job": JobDocument }    RunJobResult
//   POST    /v1/job/:id/plan  (PUT too)            { "Job": JobDocument, "Diff": true }  JobPlan (what a run would change; nothing is done)
//   GET     /v1/job/:id                                                      JobView
//   DELETE  /v1/job/:id[?purge=true]                                         JobView (after its allocs stopped)
//   GET     /v1/job/:id/allocations                                          AllocView[]
//   GET     /v1/allocations                                                  AllocView[]
//   GET     /v1/allocation/:id                                               AllocView
//   GET     /v1/allocation/:id/logs/:task[?stream=stdout|stderr&origin=start|end&offset=N&limit=N&plain=true]
//                                                                            AllocLogs (at most limit bytes, default 64 KiB, max 4 MiB),
//                                                                            or with plain=true the raw bytes, streamed
//   GET     /v1/plugins[?type=csi]                                           PluginView[]
//   GET     /v1/plugin/csi/:id                                               PluginView
//   GET     /v1/volumes[?type=csi&plugin_id=ID]                              VolumeView[]
//   GET     /v1/volume/csi/:id                                               VolumeView
//   PUT     /v1/volume/csi/:id  (POST too)         { "Volume": VolumeSpecDocument }  VolumeView (registered)
//   PUT     /v1/volume/csi/:id/create  (POST too)  { "Volume": VolumeSpecDocument }  VolumeView (created)
//   DELETE  /v1/volume/csi/:id[?force=true]                                  { "id" } (deregistered)
//   DELETE  /v1/volume/csi/:id/delete                                        { "id" } (deleted through the plugin)
//   DELETE  /v1/volume/csi/:id/detach?node=NODE                              VolumeDetachResult (claims of gone allocs unmounted, released)
//   GET     /v1/volume/csi/:id/usage                                         MountUsageView[] (NodeGetVolumeStats of each live mount here)
//   GET     /v1/allocation/:id/usage                                         MountUsageView[] (the same, for the alloc's volumes)
//   GET     /v1/volumes/external[?plugin_id=ID&per_page=N&next_token=T]      { "Volumes": ExternalVolumeView[], "NextToken" } (ListVolumes)
//   GET     /v1/volumes/snapshot[?plugin_id=ID&per_page=N&next_token=T]      { "Snapshots": SnapshotView[], "NextToken" } (ListSnapshots)
//   PUT     /v1/volumes/snapshot  (POST too)  { "Snapshots": [{ "SourceVolumeID", "Name" }] }  { "Snapshots": SnapshotView[] }
//   DELETE  /v1/volumes/snapshot?plugin_id=ID&snapshot_id=SNAP                { "Snapshots": [] }
//   GET     /v1/event/stream[?topic=Task&topic=Plugin,Volume]                NDJSON AgentEvent lines, `{}` heartbeats
//   GET     /v1/metrics[?format=json|prometheus]                             the agent's metrics: prom-client's JSON list, or Prometheus text
//   GET     /ui/                                                             the status page (static files; its data comes through the API above)
//
// Bodies may also be the bare document, without the envelope. Volume
// secrets are never sent back: their values read "[REDACTED]".
import { type Clock, CsiplugError, type Logger, RealClock, ValidationError, errorMessage, type AsyncDisposable } from '@csiplug/core';
import { createHash, timingSafeEqual } from 'crypto';
import * as fs from 'fs';
import * as http from 'http';
import type { AddressInfo } from 'net';
import * as net from 'net';
import * as tls from 'tls';
import type { AgentService } from './service';
import { isLoopbackAddress, publicBindProblem, validateJob, validateVolumeSpec } from '@csiplug/jobspec';
import { logLimit, readLogJson, sendLogBytes } from './alloc-logs';
import { ApiError, ApiErrorCode, errorBody, statusForError } from './api-error';
import { ConnectionGate, type ConnectionLimits, DEFAULT_CONNECTION_LIMITS } from './connection-gate';
import { EVENT_HEARTBEAT_MS, EventStream, EventStreamBudget, parseTopics } from './event-stream';
import { type AllocLogs, TOKEN_HEADER, type VolumeDeleted } from './protocol';
import { BodyTooLargeError, DEFAULT_MAX_BODY_BYTES, parseJsonBody, readBody, unwrapEnvelope } from './request-body';
import { RequestGuard, printable } from './request-guard';
import { connectionPeerUid } from './proc-net-tcp';
import { assertTokenlessAccess } from './root-only-access';
import { type RouteParams, Router } from './router';
import { STATUS_PAGE_HEADERS, StatusPage } from './status-page';
import type { HttpApiOptions } from './http-api-options';
import {
  MAX_SNAPSHOTS_PER_REQUEST,
  boolParam,
  csiTypeParam,
  intParam,
  isRecord,
  oneOf,
  redactSecrets,
  withoutDiffFlag,
} from './route-params';

/** What a route handler answers: a JSON body, or nothing when it wrote the response itself. */
type Reply = { status?: number; body: unknown } | undefined;

interface RequestContext {
  req: http.IncomingMessage;
  res: http.ServerResponse;
  /** Aborted when the response is done or the client's connection is gone; streams end on it. */
  signal: AbortSignal;
  params: RouteParams;
  query: URLSearchParams;
  /** The body parsed as JSON (read once, under the size limit). */
  json(): Promise<unknown>;
}

type Handler = (ctx: RequestContext) => Promise<Reply> | Reply;

/** The HTTP API could not listen: it listens already, or its address is taken or not this machine's. */
export class HttpApiListenError extends CsiplugError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ELISTEN', message, options);
  }
}

/** The HTTP API refused to listen where anyone could reach it without a token or TLS. */
export class HttpApiInsecureError extends CsiplugError {
  constructor(message: string) {
    super('EINSECURE', message);
  }
}

/** How much of an oversized body is read (and dropped) before the connection is cut. */
const DRAIN_LIMIT = 64 * 1024 * 1024;

const DEFAULT_CLOSE_GRACE_MS = 10_000;

const JSON_HEADERS = {
  'Content-Type': 'application/json; charset=utf-8',
  'Cache-Control': 'no-store',
  'X-Content-Type-Options': 'nosniff',
};

export class HttpApi implements AsyncDisposable {
  private readonly router = new Router<Handler>();
  private readonly streams = new Set<EventStream>();
  /** What every open event stream together may hold unread. */
  private readonly eventBudget: EventStreamBudget;
  private tokenDigest: Buffer | undefined;
  private readonly maxBodyBytes: number;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly limits: ConnectionLimits;
  private readonly secureContext: tls.SecureContext | undefined;
  /** The listening socket: every connection is admitted (or refused) here before HTTP sees it. */
  private door: net.Server | undefined;
  /** Parses HTTP on the admitted connections; never listens itself. */
  private readonly http: http.Server;
  private gate: ConnectionGate | undefined;
  private guard: RequestGuard | undefined;
  private closing: Promise<void> | undefined;
  private inflight = 0;
  private readonly page: StatusPage;
  /** The TCP socket under each connection HTTP sees (itself, or under its TLS), for the peer's uid. */
  private readonly rawSockets = new WeakMap<net.Socket, net.Socket>();
  /** The uid owning each connection's client socket, looked up once per connection. */
  private readonly peerUids = new WeakMap<net.Socket, number | undefined>();

  constructor(
    private readonly service: AgentService,
    private readonly options: HttpApiOptions,
  ) {
    if (options.aclToken === '') throw new ValidationError('the ACL token may not be empty; leave it out to turn ACLs off', 'aclToken');
    this.tokenDigest = options.aclToken !== undefined ? digest(options.aclToken) : undefined;
    this.maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.eventBudget = new EventStreamBudget(options.eventStreamsMaxBuffered);
    this.clock = options.clock ?? new RealClock();
    this.logger = options.logger;
    this.limits = { ...DEFAULT_CONNECTION_LIMITS, ...options.limits };
    this.page = options.statusPage ?? new StatusPage();
    for (const [key, value] of Object.entries(this.limits)) {
      if (!Number.isSafeInteger(value) || value < 1)
        throw new ValidationError(`limits.${key} must be a whole number of at least 1 (got ${value})`, `limits.${key}`);
    }
    this.secureContext = options.tls ? loadSecureContext(options.tls) : undefined;
    this.http = http.createServer((req, res) => void this.handle(req, res));
    // This server never listens (the door hands it connections), so Node's
    // own header and request timers do not run: the gate closes connections
    // that never complete a request, and readJson bounds a trickled body.
    this.http.keepAliveTimeout = Math.min(5_000, this.limits.idleTimeoutMs);
    this.http.on('clientError', (err: NodeJS.ErrnoException, socket: net.Socket) => {
      // Malformed HTTP: answer 400 when the socket still takes it, then close.
      // Not while an answer is going out on this connection: bytes of our own would corrupt it.
      const answering =
        (socket as net.Socket & { _httpMessage?: unknown })._httpMessage !== undefined &&
        (socket as net.Socket & { _httpMessage?: unknown })._httpMessage !== null;
      if (socket.writable && !answering && err.code !== 'ECONNRESET')
        socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      else socket.destroy();
    });
    this.addRoutes();
  }

  /**
   * Changes the ACL token (a config reload): every request from now on needs
   * the new one; undefined turns ACLs off. Refused (ValidationError, nothing
   * changed) where the bind address needs a token, as at start.
   */
  setAclToken(token: string | undefined): void {
    if (token === '') throw new ValidationError('the ACL token may not be empty; leave it out to turn ACLs off', 'aclToken');
    const problem = publicBindProblem(this.options.bindAddr, {
      token: token !== undefined,
      tls: this.secureContext !== undefined,
      insecureAllowPublic: this.options.insecureAllowPublic === true,
    });
    if (problem) throw new ValidationError(problem, 'acl');
    const next = token !== undefined ? digest(token) : undefined;
    const changed =
      next === undefined || this.tokenDigest === undefined ? next !== this.tokenDigest : !timingSafeEqual(next, this.tokenDigest);
    this.tokenDigest = next;
    // An event stream was let in by the token of its time: a changed token ends it, and its client connects again with the new one.
    if (changed) for (const stream of [...this.streams]) stream.dispose();
  }

  /** Starts listening; resolves with the address and port actually bound. */
  listen(): Promise<{ address: string; port: number }> {
    if (this.door || this.closing)
      return Promise.reject(
        new HttpApiListenError(
          'the HTTP API server is already listening (or was closed); a server listens once: start another server to listen again',
        ),
      );
    const { bindAddr, port } = this.options;
    const problem = publicBindProblem(bindAddr, {
      token: this.tokenDigest !== undefined,
      tls: this.secureContext !== undefined,
      insecureAllowPublic: this.options.insecureAllowPublic === true,
    });
    if (problem) return Promise.reject(new HttpApiInsecureError(`the HTTP API will not listen: bind_addr ${problem}`));
    const door = net.createServer({ pauseOnConnect: false }, (socket) => this.admit(socket));
    this.door = door;
    return new Promise((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException) => {
        this.door = undefined;
        reject(
          new HttpApiListenError(`the HTTP API cannot listen on ${bindAddr}:${port}: ${err.message}; pick another bind_addr or port`, {
            cause: err,
          }),
        );
      };
      door.once('error', onError);
      door.listen(port, bindAddr, () => {
        door.off('error', onError);
        // EMFILE/ENFILE on accept land here: log them, never crash; the gate keeps floods small.
        door.on('error', (err) => this.logger.error('HTTP API server error', { err }));
        const addr = door.address() as AddressInfo;
        this.gate = new ConnectionGate(this.limits, this.clock, this.logger);
        this.guard = new RequestGuard({
          bindAddr: addr.address,
          port: addr.port,
          tls: this.secureContext !== undefined,
          allowedHosts: this.options.allowedHosts,
          allowedOrigins: this.options.allowedOrigins,
        });
        if (!isLoopbackAddress(addr.address) && (this.tokenDigest === undefined || !this.secureContext)) {
          this.logger.warn(
            `INSECURE: the HTTP API listens on ${addr.address}, reachable from other machines, ${this.tokenDigest === undefined ? 'WITHOUT an ACL token' : 'WITHOUT TLS'} (acl { insecure_allow_public = true }); anyone who can reach it can run processes as this agent's user`,
            { address: addr.address },
          );
        }
        this.logger.info('HTTP API listening', {
          address: addr.address,
          port: addr.port,
          acl: this.tokenDigest !== undefined,
          tls: this.secureContext !== undefined,
          ...this.limits,
        });
        resolve({ address: addr.address, port: addr.port });
      });
    });
  }

  /** `http://host:port` (https with TLS) once listening. */
  get url(): string | undefined {
    const addr = this.door?.address() as AddressInfo | null | undefined;
    if (!addr) return undefined;
    const host = addr.family === 'IPv6' || net.isIPv6(addr.address) ? `[${addr.address}]` : addr.address;
    return `${this.secureContext ? 'https' : 'http'}://${host}:${addr.port}`;
  }

  /** Open connections (for tests and status). */
  get connections(): number {
    return this.gate?.size ?? 0;
  }

  /**
   * Stops listening, ends every event stream and idle connection, lets
   * requests in progress finish for up to closeGraceMs, then cuts what is
   * left; resolves once the listening socket is closed. Never hangs on a
   * client. Idempotent: later calls return the same promise.
   */
  dispose(): Promise<void> {
    this.closing ??= this.doClose();
    return this.closing;
  }

  private async doClose(): Promise<void> {
    const door = this.door;
    for (const stream of [...this.streams]) stream.dispose();
    if (!door) return;
    const closed = new Promise<void>((resolve) => door.close(() => resolve()));
    this.gate?.closeIdle();
    if (this.inflight > 0) {
      const grace = this.options.closeGraceMs ?? DEFAULT_CLOSE_GRACE_MS;
      await new Promise<void>((resolve) => {
        const timer = this.clock.setTimeout(() => {
          this.logger.warn('HTTP API closing: cutting requests still in progress after the grace period', {
            inflight: this.inflight,
            grace_ms: grace,
          });
          resolve();
        }, grace);
        this.idleWaiter = () => {
          timer.dispose();
          resolve();
        };
      });
      this.idleWaiter = undefined;
    }
    this.gate?.closeIdle(true);
    await closed;
    this.logger.info('HTTP API closed');
  }

  private idleWaiter: (() => void) | undefined;

  /** A new TCP connection: the gate decides; admitted ones go to HTTP (through TLS when configured). */
  private admit(raw: net.Socket): void {
    raw.on('error', (err) => this.logger.debug('HTTP API connection error', { err: errorMessage(err) }));
    if (this.closing || !this.gate) {
      raw.destroy();
      return;
    }
    let socket: net.Socket = raw;
    if (this.secureContext) {
      const secure = new tls.TLSSocket(raw, { isServer: true, secureContext: this.secureContext, ALPNProtocols: ['http/1.1'] });
      secure.on('error', (err) => {
        this.logger.debug('HTTP API TLS connection error', { err: errorMessage(err) });
        secure.destroy();
      });
      socket = secure;
    }
    if (this.gate.admit(socket, raw) === 'refused') return;
    this.rawSockets.set(socket, raw);
    this.http.emit('connection', socket);
  }

  // -------------------------------------------------------------------------

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    this.inflight++;
    const socket = req.socket;
    this.gate?.requestStarted(socket);
    // A pipelined request queued behind another never gets 'close' on its
    // response when the connection drops: the socket's own close ends it too.
    const gone = new AbortController();
    const onSocketClose = () => gone.abort();
    socket.once('close', onSocketClose);
    res.once('close', () => {
      socket.off('close', onSocketClose);
      gone.abort();
      this.gate?.requestEnded(socket);
    });
    const method = req.method ?? 'GET';
    let path = printable(req.url ?? '/');
    try {
      // Before anything else, token or not: where the request comes from and what it carries.
      if (!this.guard) throw new ApiError(503, 'ENOT_LISTENING', 'the HTTP API is not listening');
      this.guard.check(req);
      if (this.closing) {
        // Shutting down: nothing new starts, even on a kept-alive connection.
        res.shouldKeepAlive = false;
        throw new ApiError(503, 'ESHUTDOWN', 'the agent is shutting down; retry against the next agent');
      }
      // Origin-form only (the guard saw to it): "//x" never becomes a host.
      const url = new URL(`http://localhost${req.url ?? '/'}`);
      path = url.pathname;
      if (this.gate?.isOverflow(socket)) {
        // Past the connection cap: only the agent's own health answers, then the connection closes.
        res.shouldKeepAlive = false;
        if (!(method === 'GET' && url.pathname === '/v1/agent/health')) {
          throw new ApiError(
            503,
            'ETOO_MANY_CONNECTIONS',
            `the HTTP API holds its limit of ${this.limits.maxConnections} connections (${this.limits.maxConnectionsPerClient} per client); retry shortly`,
          );
        }
      }
      if (this.page.owns(url.pathname)) {
        this.servePage(method, url.pathname, res);
        return;
      }
      this.checkToken(req);
      const match = this.router.match(method, url.pathname);
      if (match.kind === 'none') throw ApiError.notFound(`no such API path: ${method} ${url.pathname}`);
      if (match.kind === 'method') {
        res.setHeader('Allow', match.allowed.join(', '));
        throw new ApiError(
          405,
          ApiErrorCode.MethodNotAllowed,
          `${method} is not allowed on ${url.pathname} (allowed: ${match.allowed.join(', ')})`,
        );
      }
      let body: Promise<unknown> | undefined;
      const ctx: RequestContext = {
        req,
        res,
        signal: gone.signal,
        params: match.params,
        query: url.searchParams,
        json: () => (body ??= this.readJson(req)),
      };
      const reply = await match.handler(ctx);
      if (reply) this.send(res, reply.status ?? 200, reply.body);
      this.logger.debug('HTTP API request', { method, path, status: res.statusCode });
    } catch (err) {
      this.fail(req, res, method, path, err);
    } finally {
      this.inflight--;
      if (this.closing && this.inflight === 0) {
        this.gate?.closeIdle();
        this.idleWaiter?.();
      }
    }
  }

  /** The body as JSON; a body still arriving after the idle timeout is cut off with its connection, so a trickle cannot hold one. */
  private async readJson(req: http.IncomingMessage): Promise<unknown> {
    const ms = this.limits.idleTimeoutMs;
    const timer = this.clock.setTimeout(
      () => req.destroy(new ApiError(408, 'EBODY_TIMEOUT', `the request body did not arrive within ${ms} ms`)),
      ms,
    );
    try {
      return parseJsonBody(await readBody(req, this.maxBodyBytes));
    } finally {
      timer.dispose();
    }
  }

  private checkToken(req: http.IncomingMessage): void {
    if (this.tokenDigest === undefined) {
      // No token to tell callers apart: only root on this machine, unless the operator said to serve anyone on a public address (INSECURE).
      if (this.options.insecureAllowPublic === true && !isLoopbackAddress(this.options.bindAddr)) return;
      const socket = this.rawSockets.get(req.socket) ?? req.socket;
      if (!this.peerUids.has(socket)) {
        let uid: number | undefined;
        try {
          uid = (this.options.peerUid ?? connectionPeerUid)(socket);
        } catch (err) {
          // Not remembered: the next request on this connection asks again (a file descriptor may be free by then).
          this.logger.warn('HTTP API: the owner of a connection could not be looked up; it is not served without a token', {
            err: errorMessage(err),
          });
          throw new ApiError(
            503,
            'EPEER_UNKNOWN',
            `the agent could not tell which user this connection comes from (${errorMessage(err)}), and without an ACL token it serves only root: retry, or set acl { token } and send it`,
          );
        }
        this.peerUids.set(socket, uid);
      }
      assertTokenlessAccess(this.peerUids.get(socket));
      return;
    }
    // The agent's own header first; `Authorization: Bearer` too, which is what a Prometheus scrape job
    // (authorization { credentials }) can send. Neither can be set by a cross-site page without a preflight, which is never granted.
    const header = req.headers[TOKEN_HEADER.toLowerCase()];
    const bearer = /^Bearer +(\S+)$/i.exec(typeof req.headers.authorization === 'string' ? req.headers.authorization : '')?.[1];
    const fromHeader = header !== undefined && header !== '';
    const given = fromHeader ? header : bearer;
    if (given === undefined) {
      throw new ApiError(
        403,
        ApiErrorCode.Forbidden,
        `this agent requires an ACL token: send it in the ${TOKEN_HEADER} header or as Authorization: Bearer (csiplug: -token or CSIPLUG_TOKEN)`,
      );
    }
    // Hashing first gives equal lengths, so the comparison time says nothing about the token.
    if (typeof given !== 'string' || !timingSafeEqual(digest(given), this.tokenDigest)) {
      throw new ApiError(403, ApiErrorCode.Forbidden, `the ACL token in ${fromHeader ? TOKEN_HEADER : 'Authorization'} is not valid`);
    }
  }

  /** A file of the status page; everything under /ui/ that is not one is a 404. */
  private servePage(method: string, pathname: string, res: http.ServerResponse): void {
    if (method !== 'GET' && method !== 'HEAD') {
      res.setHeader('Allow', 'GET, HEAD');
      throw new ApiError(405, ApiErrorCode.MethodNotAllowed, `${method} is not allowed on ${pathname} (allowed: GET, HEAD)`);
    }
    if (pathname === '/ui') {
      // Relative, so that the page also works behind a proxy that serves the agent under a path prefix.
      res.writeHead(301, { Location: 'ui/', 'Content-Length': 0, 'Cache-Control': 'no-cache' });
      res.end();
      return;
    }
    if (!this.page.available)
      throw new ApiError(
        500,
        'ESTATUS_PAGE_MISSING',
        'the status page is not available: its files are missing from this install of @csiplug/api',
      );
    const file = this.page.file(pathname);
    if (!file) throw ApiError.notFound(`the status page has no file ${pathname}`);
    res.writeHead(200, { ...STATUS_PAGE_HEADERS, 'Content-Type': file.contentType, 'Content-Length': file.body.length });
    res.end(method === 'HEAD' ? undefined : file.body);
  }

  private send(res: http.ServerResponse, status: number, body: unknown): void {
    const text = `${JSON.stringify(body)}\n`;
    res.writeHead(status, { ...JSON_HEADERS, 'Content-Length': Buffer.byteLength(text) });
    res.end(text);
  }

  private fail(req: http.IncomingMessage, res: http.ServerResponse, method: string, path: string, err: unknown): void {
    const status = statusForError(err);
    if (status >= 500) this.logger.error('HTTP API request failed', { method, path, status, err });
    else this.logger.debug('HTTP API request refused', { method, path, status, error: errorBody(err).error });
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (err instanceof BodyTooLargeError) this.drain(req);
    // The client hung up; nobody is left to read the answer.
    if (res.destroyed || res.writableEnded) return;
    this.send(res, status, errorBody(err));
  }

  /**
   * Reads and drops the rest of an oversized body. Closing the connection
   * with the body unread would make the kernel reset it, and the client
   * could lose the 400 before reading it. A client that keeps sending past
   * DRAIN_LIMIT is cut off.
   */
  private drain(req: http.IncomingMessage): void {
    let seen = 0;
    req.on('data', (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > DRAIN_LIMIT) req.destroy();
    });
    req.resume();
  }

  // -------------------------------------------------------------------------

  private addRoutes(): void {
    const s = this.service;
    const r = this.router;

    r.add('GET', '/v1/agent/health', () => {
      const health = s.health();
      return { status: health.ok ? 200 : 503, body: health };
    });

    r.add('GET', '/v1/jobs', () => ({ body: s.listJobs() }));
    const runJob: Handler = async (ctx) => {
      const job = validateJob(unwrapEnvelope(await ctx.json(), 'Job'));
      return { body: await s.runJob(job) };
    };
    r.add('POST', '/v1/jobs', runJob);
    r.add('PUT', '/v1/jobs', runJob);
    const planJob: Handler = async (ctx) => {
      const job = validateJob(unwrapEnvelope(withoutDiffFlag(await ctx.json()), 'Job'));
      if (job.id !== ctx.params.id)
        throw ApiError.badRequest(`the job id in the path ("${ctx.params.id}") does not match the id in the body ("${job.id}")`);
      return { body: s.planJob(job) };
    };
    r.add('POST', '/v1/job/:id/plan', planJob);
    r.add('PUT', '/v1/job/:id/plan', planJob);
    r.add('GET', '/v1/job/:id', ({ params }) => ({ body: this.job(params.id!) }));
    r.add('GET', '/v1/job/:id/allocations', ({ params }) => {
      const job = this.job(params.id!);
      return { body: s.listAllocs().filter((a) => a.jobId === job.id) };
    });
    r.add('DELETE', '/v1/job/:id', async ({ params, query }) => {
      const purge = boolParam(query, 'purge');
      const job = this.job(params.id!);
      return { body: await s.stopJob(job.id, { purge }) };
    });

    r.add('GET', '/v1/allocations', () => ({ body: s.listAllocs() }));
    r.add('GET', '/v1/allocation/:id', ({ params }) => ({ body: this.alloc(params.id!) }));
    r.add('GET', '/v1/allocation/:id/usage', async ({ params }) => ({ body: await s.volumeUsage({ allocId: this.alloc(params.id!).id }) }));
    r.add('GET', '/v1/allocation/:id/logs/:task', async ({ params, query, res, signal }) => {
      // Nomad's fs logs parameters; only the range asked for is read (see alloc-logs.ts), whatever the file's size.
      const stream = oneOf(query, 'stream', ['stdout', 'stderr'] as const, 'stdout');
      const origin = oneOf(query, 'origin', ['start', 'end'] as const, 'start');
      const offset = intParam(query, 'offset', 0);
      const plain = boolParam(query, 'plain');
      const limit = logLimit(query.get('limit') ? intParam(query, 'limit', 0) : undefined, plain);
      const alloc = this.alloc(params.id!);
      const task = params.task!;
      const known =
        Object.hasOwn(alloc.tasks, task) || alloc.job.groups.some((g) => g.name === alloc.group && g.tasks.some((t) => t.name === task));
      if (!known)
        throw ApiError.notFound(`alloc ${alloc.id} has no task "${task}" (tasks: ${Object.keys(alloc.tasks).join(', ') || 'none'})`);
      const slice = await s.allocLogs(alloc.id, task, stream, { offset, origin, limit });
      if (!plain) return { body: (await readLogJson(alloc.id, task, stream, slice)) satisfies AllocLogs };
      try {
        await sendLogBytes(res, slice, signal);
      } catch (err) {
        // The reader hung up before the end: nobody is left to tell. A failed file read is the agent's error.
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'ERR_STREAM_PREMATURE_CLOSE' && code !== 'ABORT_ERR') throw err;
        this.logger.debug('log stream closed by the client before its end', { allocId: alloc.id, task, stream });
      }
      return undefined;
    });

    r.add('GET', '/v1/node/self', () => ({ body: s.node() }));
    r.add('GET', '/v1/nodes', async () => ({ body: await s.listNodes() }));
    // Nomad's PUT /v1/node/:node_id/purge (here by node name): a down node gone for good.
    const purgeNode = async ({ params }: { params: Record<string, string | undefined> }) => ({ body: await s.purgeNode(params.name!) });
    r.add('PUT', '/v1/node/:name/purge', purgeNode);
    r.add('POST', '/v1/node/:name/purge', purgeNode);
    // Cluster mode, agent to agent (@csiplug/cluster's routed controllers): a CSI call made on this node's own controller of the plugin.
    r.add('POST', '/v1/cluster/csi/:plugin/:service/:rpc', async (ctx) => {
      const body = await ctx.json();
      const request = (body as { request?: unknown } | null)?.request;
      return { body: await s.answerRoutedCall(ctx.params.plugin!, ctx.params.service!, ctx.params.rpc!, request, ctx.signal) };
    });
    r.add('GET', '/v1/plugins', ({ query }) => {
      csiTypeParam(query);
      return { body: s.listPlugins() };
    });
    r.add('GET', '/v1/plugin/csi/:id', ({ params }) => {
      const plugin = s.getPlugin(params.id!);
      if (!plugin) throw ApiError.notFound(`plugin "${params.id}" not found`);
      return { body: plugin };
    });

    r.add('GET', '/v1/volumes', ({ query }) => {
      csiTypeParam(query);
      const pluginId = query.get('plugin_id');
      const volumes = s.listVolumes().filter((v) => !pluginId || v.pluginId === pluginId);
      return { body: volumes.map(redactSecrets) };
    });
    r.add('GET', '/v1/volume/csi/:id', ({ params }) => ({ body: redactSecrets(this.volume(params.id!)) }));
    const writeVolume =
      (how: 'register' | 'create'): Handler =>
      async (ctx) => {
        const spec = validateVolumeSpec(unwrapEnvelope(await ctx.json(), 'Volume'));
        if (spec.id !== ctx.params.id) {
          throw ApiError.badRequest(`the volume id in the path ("${ctx.params.id}") does not match the id in the body ("${spec.id}")`);
        }
        // forwarded: another agent of the cluster routed the create here (its node has no healthy controller); it goes no further.
        return {
          body: redactSecrets(
            how === 'register'
              ? await s.registerVolume(spec)
              : await s.createVolume(spec, { forwarded: boolParam(ctx.query, 'forwarded') }),
          ),
        };
      };
    r.add('PUT', '/v1/volume/csi/:id', writeVolume('register'));
    r.add('POST', '/v1/volume/csi/:id', writeVolume('register'));
    r.add('PUT', '/v1/volume/csi/:id/create', writeVolume('create'));
    r.add('POST', '/v1/volume/csi/:id/create', writeVolume('create'));
    r.add('DELETE', '/v1/volume/csi/:id', async ({ params, query }) => {
      const force = boolParam(query, 'force');
      const volume = this.volume(params.id!);
      await s.deregisterVolume(volume.id, { force });
      return { body: { id: volume.id } satisfies VolumeDeleted };
    });
    r.add('DELETE', '/v1/volume/csi/:id/detach', async ({ params, query }) => {
      const node = query.get('node');
      if (!node) throw ApiError.badRequest('query parameter node is required: the node to detach the volume from');
      return { body: await s.detachVolume(this.volume(params.id!).id, node) };
    });
    r.add('GET', '/v1/volume/csi/:id/usage', async ({ params }) => ({
      body: await s.volumeUsage({ volumeId: this.volume(params.id!).id }),
    }));
    const pageOf = (query: URLSearchParams) => ({
      ...(query.get('plugin_id') ? { pluginId: query.get('plugin_id')! } : {}),
      ...(query.get('per_page') ? { perPage: intParam(query, 'per_page', 0) } : {}),
      ...(query.get('next_token') ? { nextToken: query.get('next_token')! } : {}),
    });
    r.add('GET', '/v1/volumes/external', async ({ query }) => {
      const page = await s.listExternalVolumes(pageOf(query));
      return { body: { Volumes: page.items, NextToken: page.nextToken ?? '' } };
    });
    r.add('GET', '/v1/volumes/snapshot', async ({ query }) => {
      const page = await s.listSnapshots(pageOf(query));
      return { body: { Snapshots: page.items, NextToken: page.nextToken ?? '' } };
    });
    const createSnapshots: Handler = async (ctx) => {
      const body = await ctx.json();
      const list = isRecord(body) && Array.isArray(body['Snapshots']) ? (body['Snapshots'] as unknown[]) : [body];
      if (list.length === 0)
        throw ApiError.badRequest('no snapshot to create: give { "Snapshots": [{ "SourceVolumeID": "…", "Name": "…" }] }');
      // Each is a full copy of a volume on the plugin's side: a handful per request, all checked before any is taken.
      if (list.length > MAX_SNAPSHOTS_PER_REQUEST)
        throw ApiError.badRequest(`at most ${MAX_SNAPSHOTS_PER_REQUEST} snapshots per request, got ${list.length}`);
      const wanted = list.map((item, i) => {
        if (!isRecord(item) || typeof item['SourceVolumeID'] !== 'string' || item['SourceVolumeID'] === '')
          throw ApiError.badRequest(`Snapshots[${i}].SourceVolumeID is required: the id of the volume to snapshot`);
        const name = item['Name'];
        if (name !== undefined && typeof name !== 'string') throw ApiError.badRequest(`Snapshots[${i}].Name must be a string`);
        return { volumeId: this.volume(item['SourceVolumeID']).id, name: name || undefined };
      });
      const made = [];
      for (const w of wanted) made.push(await s.createSnapshot(w.volumeId, w.name));
      return { body: { Snapshots: made } };
    };
    r.add('PUT', '/v1/volumes/snapshot', createSnapshots);
    r.add('POST', '/v1/volumes/snapshot', createSnapshots);
    r.add('DELETE', '/v1/volumes/snapshot', async ({ query }) => {
      const pluginId = query.get('plugin_id');
      const snapshotId = query.get('snapshot_id');
      if (!pluginId || !snapshotId) throw ApiError.badRequest('query parameters plugin_id and snapshot_id are required');
      await s.deleteSnapshot(pluginId, snapshotId);
      return { body: { Snapshots: [] } };
    });
    r.add('DELETE', '/v1/volume/csi/:id/delete', async ({ params, query }) => {
      const volume = this.volume(params.id!);
      // forwarded: another agent of the cluster routed the delete here (its node has no controller); it goes no further.
      await s.deleteVolume(volume.id, { forwarded: boolParam(query, 'forwarded') });
      return { body: { id: volume.id } satisfies VolumeDeleted };
    });

    r.add('GET', '/v1/metrics', async ({ res, query }) => {
      const metrics = this.options.metrics;
      if (!metrics) throw ApiError.notFound('this API serves no metrics (no metrics source was given)');
      if (oneOf(query, 'format', ['json', 'prometheus'], 'json') === 'json') return { body: await metrics.json() };
      const text = await metrics.prometheus();
      res.writeHead(200, {
        'Content-Type': metrics.contentType,
        'Cache-Control': 'no-store',
        'X-Content-Type-Options': 'nosniff',
        'Content-Length': Buffer.byteLength(text),
      });
      res.end(text);
      return undefined;
    });
    r.add('GET', '/v1/event/stream', ({ res, query, signal }) => {
      const topics = parseTopics(query.getAll('topic'));
      const stream = new EventStream(
        s,
        res,
        topics,
        this.clock,
        this.logger,
        this.options.eventHeartbeatMs ?? EVENT_HEARTBEAT_MS,
        signal,
        this.eventBudget,
      );
      this.streams.add(stream);
      void stream.done.then(() => this.streams.delete(stream));
      return undefined;
    });
  }

  /** What the open event streams hold unread now, in all (bounded by eventStreamsMaxBuffered plus one event). */
  get eventStreamsBuffered(): number {
    let total = 0;
    for (const stream of this.streams) total += stream.buffered;
    return total;
  }

  private job(id: string) {
    const job = this.service.getJob(id);
    if (!job) throw ApiError.notFound(`job "${id}" not found`);
    return job;
  }

  private alloc(id: string) {
    const alloc = this.service.getAlloc(id);
    if (!alloc) throw ApiError.notFound(`alloc "${id}" not found`);
    return alloc;
  }

  private volume(id: string) {
    const volume = this.service.getVolume(id);
    if (!volume) throw ApiError.notFound(`volume "${id}" not found`);
    return volume;
  }
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

function loadSecureContext(files: { certFile: string; keyFile: string }): tls.SecureContext {
  const read = (file: string, what: string): Buffer => {
    try {
      return fs.readFileSync(file);
    } catch (err) {
      throw new ValidationError(
        `cannot read the TLS ${what} ${file}: ${errorMessage(err)}`,
        `tls.${what === 'certificate' ? 'cert_file' : 'key_file'}`,
      );
    }
  };
  const cert = read(files.certFile, 'certificate');
  const key = read(files.keyFile, 'key');
  try {
    return tls.createSecureContext({ cert, key, minVersion: 'TLSv1.2' });
  } catch (err) {
    throw new ValidationError(
      `the TLS certificate ${files.certFile} and key ${files.keyFile} do not make a usable pair: ${errorMessage(err)}`,
      'tls',
    );
  }
}
