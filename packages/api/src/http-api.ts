// The agent's HTTP API: Nomad-shaped paths over the AgentService, JSON in
// and out, an optional ACL token (X-Nomad-Token or Authorization: Bearer, else 403; without
// one, only root on this machine is served: root-only-access.ts), and the NDJSON
// event stream. Every body is read and validated in full before the service
// is called, so a refused request changes nothing. Errors are answered as
// Nomad answers them, the message as plain text, with csiplug's stable code
// in the X-Csiplug-Error-Code header; 400 (bad JSON, unknown fields,
// failed validation, body over the limit), 403, 404, 405 (with Allow), 409
// (conflicts such as a claimed volume) or 500; see statusForError.
//
//   method  path                                   body                      answer
//   GET     /v1/agent/health                                                 Nomad's AgentHealthResponse (500 when not ok)
//   GET     /v1/agent/self                                                   Nomad's AgentSelf (config, member, stats)
//   GET     /v1/status/leader, /v1/status/peers                              this agent's API host:port (it leads itself)
//   GET     /v1/node/:id  (or self)                                          Nomad's Node (this node: drivers, plugins' fingerprints)
//   GET     /v1/node/:id/allocations                                         Nomad's []Allocation (this node's allocs)
//   PUT     /v1/node/:id/purge                                               Nomad's NodePurgeResponse (cluster: a down node's claims released, its record removed)
//   GET     /v1/nodes[?prefix=P]                                             Nomad's []NodeListStub (this node, or every node of its cluster; 503 while etcd is away)
//   GET     /v1/jobs                                                         JobView[]
//   POST    /v1/jobs  (PUT too)                    Nomad's JobRegisterRequest { "Job": <Nomad JSON job> }  RunJobResult
//   POST    /v1/job/:id/plan  (PUT too)            Nomad's JobPlanRequest { "Job": …, "Diff": true }  JobPlan (what a run would change; nothing is done)
//   POST    /v1/jobs/parse                         Nomad's JobsParseRequest { "JobHCL": "…" }  the Job in Nomad's JSON job format
//   GET     /v1/job/:id                                                      JobView
//   DELETE  /v1/job/:id[?purge=true]                                         JobView (after its allocs stopped)
//   GET     /v1/job/:id/allocations                                          Nomad's AllocationListStub[] (wire/alloc-wire.ts)
//   GET     /v1/allocations                                                  Nomad's AllocationListStub[]
//   GET     /v1/allocation/:id                                               Nomad's Allocation
//   GET     /v1/client/fs/logs/:alloc_id?task=T&type=stdout|stderr[&origin=start|end&offset=N&plain=true&follow=true&limit=N]
//                                                                            Nomad's StreamFrames (one JSON object a line), or with
//                                                                            plain=true the raw bytes; only that range is read
//   GET     /v1/plugins[?type=csi&prefix=P]                                  Nomad's []CSIPluginListStub
//   GET     /v1/plugin/csi/:id                                               Nomad's CSIPlugin
//   GET     /v1/volumes[?type=csi&plugin_id=ID&node_id=N&prefix=P]           Nomad's []CSIVolumeListStub (wire/volume-wire.ts)
//   GET     /v1/volume/csi/:id                                               Nomad's CSIVolume (claims in ReadAllocs/WriteAllocs, Allocations)
//   PUT     /v1/volume/csi/:id  (POST too)         Nomad's CSIVolumeRegisterRequest { "Volumes": [CSIVolume] }  CSIVolumeRegisterResponse
//   PUT     /v1/volume/csi/:id/create  (POST too)  Nomad's CSIVolumeCreateRequest { "Volumes": [CSIVolume] }  CSIVolumeCreateResponse
//   DELETE  /v1/volume/csi/:id[?force=true]                                  null (deregistered)
//   DELETE  /v1/volume/csi/:id/delete                                        null (deleted through the plugin)
//   DELETE  /v1/volume/csi/:id/detach?node=NODE                              { "Csiplug": { "released" } } (claims of gone allocs unmounted, released)
//   GET     /v1/volume/csi/:id/usage                                         MountUsageView[] (NodeGetVolumeStats of each live mount here)
//   GET     /v1/allocation/:id/usage                                         MountUsageView[] (the same, for the alloc's volumes)
//   GET     /v1/volumes/external[?plugin_id=ID&per_page=N&next_token=T]      Nomad's CSIVolumeListExternalResponse (ListVolumes)
//   GET     /v1/volumes/snapshot[?plugin_id=ID&per_page=N&next_token=T]      Nomad's CSISnapshotListResponse (ListSnapshots)
//   PUT     /v1/volumes/snapshot  (POST too)  { "Snapshots": [{ "SourceVolumeID", "Name" }] }  Nomad's CSISnapshotCreateResponse
//   DELETE  /v1/volumes/snapshot?plugin_id=ID&snapshot_id=SNAP                null
//   GET     /v1/event/stream[?topic=Allocation:*&topic=Job:web]              NDJSON Nomad Events lines, `{}` heartbeats
//   GET     /v1/metrics[?format=json|prometheus]                             the agent's metrics: prom-client's JSON list, or Prometheus text
//   GET     /ui/                                                             the status page (static files; its data comes through the API above)
//
// The handlers are in routes/*.ts, one file per area; who may call is
// token-check.ts, what may reach a handler at all request-guard.ts.
// Every JSON read carries Nomad's X-Nomad-Index (which changes only when the
// answer does), X-Nomad-KnownLeader and X-Nomad-LastContact, and takes
// Nomad's blocking query, ?index=N&wait=5m (query-index.ts), except the
// reads that call a plugin or write their own response, which are answered
// at once (their routes say so: answersAtOnce). A held query ends at once
// when its client hangs up, when the API closes (answered with what there
// is) and when a token change leaves its caller without access (answered
// with that 403). Every successful write carries a new, higher X-Nomad-Index.
// Bodies may also be the bare document, without the envelope. Volume
// secrets are never sent back: their values read "[REDACTED]".
import { type Clock, CsiplugError, type Logger, RealClock, ValidationError, errorMessage, type AsyncDisposable } from '@csiplug/core';
import * as fs from 'fs';
import * as http from 'http';
import type { AddressInfo } from 'net';
import * as net from 'net';
import * as tls from 'tls';
import type { AgentService } from './service';
import { isLoopbackAddress, publicBindProblem } from '@csiplug/jobspec';
import { ApiError, ApiErrorCode, errorAnswer, statusForError } from './api-error';
import { ERROR_CODE_HEADER } from './protocol';
import { ConnectionGate, type ConnectionLimits, DEFAULT_CONNECTION_LIMITS } from './connection-gate';
import { EVENT_HEARTBEAT_MS, EventStream, EventStreamBudget, parseTopics } from './event-stream';
import { BodyTooLargeError, DEFAULT_MAX_BODY_BYTES, parseJsonBody, readBody } from './request-body';
import { RequestGuard, printable } from './request-guard';
import { connectionPeerUid } from './proc-net-tcp';
import { AnswerIndexes, SharedComputes, answerBlocking, answerKey, blockingParams, queryMetaHeaders } from './query-index';
import { TokenCheck } from './token-check';
import { Router } from './router';
import { STATUS_PAGE_HEADERS, StatusPage } from './status-page';
import type { HttpApiOptions } from './http-api-options';
import { oneOf } from './route-params';
import { addAllocRoutes } from './routes/alloc-routes';
import { addJobRoutes } from './routes/job-routes';
import { addNodeRoutes } from './routes/node-routes';
import { type Handler, Lookups, type RequestContext, WRITES_OWN_RESPONSE } from './routes/route-context';
import { addSnapshotRoutes } from './routes/snapshot-routes';
import { addVolumeRoutes } from './routes/volume-routes';

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
  private readonly tokens: TokenCheck;
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
  /** The X-Nomad-Index of each read's answer (query-index.ts). */
  private readonly answerIndexes: AnswerIndexes;
  /** The computes under way of held blocking queries, one per answer key (query-index.ts). */
  private readonly sharedComputes: SharedComputes;
  /** The reads in progress, each with what ends it early: the API closing, or a token change that leaves its caller out. */
  private readonly reads = new Map<http.IncomingMessage, AbortController>();

  constructor(
    private readonly service: AgentService,
    private readonly options: HttpApiOptions,
  ) {
    if (options.aclToken === '') throw new ValidationError('the ACL token may not be empty; leave it out to turn ACLs off', 'aclToken');
    this.tokens = new TokenCheck(options.aclToken, {
      bindAddr: options.bindAddr,
      insecureAllowPublic: options.insecureAllowPublic === true,
      peerUid: options.peerUid ?? connectionPeerUid,
      logger: options.logger,
    });
    this.maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.eventBudget = new EventStreamBudget(options.eventStreamsMaxBuffered);
    this.clock = options.clock ?? new RealClock();
    this.logger = options.logger;
    this.limits = { ...DEFAULT_CONNECTION_LIMITS, ...options.limits };
    this.page = options.statusPage ?? new StatusPage();
    this.answerIndexes = new AnswerIndexes(this.clock);
    this.sharedComputes = new SharedComputes();
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
    const changed = this.tokens.set(token);
    // An event stream was let in by the token of its time: a changed token ends it, and its client connects again with the new one.
    if (changed) for (const stream of [...this.streams]) stream.dispose();
    // A held read whose caller the new token leaves out ends with its 403, never with data.
    if (changed) {
      for (const [req, ended] of this.reads) {
        try {
          this.tokens.check(req, this.rawSockets.get(req.socket) ?? req.socket);
        } catch (err) {
          ended.abort(err);
        }
      }
    }
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
      token: this.tokens.enabled,
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
        if (!isLoopbackAddress(addr.address) && (!this.tokens.enabled || !this.secureContext)) {
          this.logger.warn(
            `INSECURE: the HTTP API listens on ${addr.address}, reachable from other machines, ${!this.tokens.enabled ? 'WITHOUT an ACL token' : 'WITHOUT TLS'} (acl { insecure_allow_public = true }); anyone who can reach it can run processes as this agent's user`,
            { address: addr.address },
          );
        }
        this.logger.info('HTTP API listening', {
          address: addr.address,
          port: addr.port,
          acl: this.tokens.enabled,
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
    // Held blocking queries (up to 5 minutes) are answered now with what there is: closing never waits on them.
    for (const ended of this.reads.values()) ended.abort();
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
      this.tokens.check(req, this.rawSockets.get(req.socket) ?? req.socket);
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
      // A read ends when its client hangs up, the API closes or a token change leaves its caller out (`ended`): its handler
      // sees that too, so a log streamed to a caller no longer let in stops there.
      const ended = new AbortController();
      const ctx: RequestContext = {
        req,
        res,
        signal: method === 'GET' ? AbortSignal.any([gone.signal, ended.signal]) : gone.signal,
        params: match.params,
        query: url.searchParams,
        json: () => (body ??= this.readJson(req)),
      };
      if (method === 'GET') {
        // A read: Nomad's query metadata, and a blocking query when ?index= asks for one (query-index.ts).
        const blocking = blockingParams(url.searchParams);
        this.reads.set(req, ended);
        try {
          const answer = await answerBlocking(
            {
              onEvent: (listener) => this.service.onEvent(listener),
              clock: this.clock,
              indexes: this.answerIndexes,
              shared: this.sharedComputes,
              key: answerKey(url.pathname, url.searchParams),
              blocking: match.options.answersAtOnce ? undefined : blocking,
              signal: ctx.signal,
            },
            async () => match.handler(ctx),
          );
          // A token change left this caller out while its query was held (or computed): its 403, not the data.
          if (ended.signal.aborted && ended.signal.reason instanceof ApiError) throw ended.signal.reason;
          if (this.closing) res.shouldKeepAlive = false;
          // A client that hung up while its query was held has nobody left to read the answer.
          if (answer && !res.destroyed) this.send(res, answer.reply.status ?? 200, answer.reply.body, queryMetaHeaders(answer.index));
        } finally {
          this.reads.delete(req);
        }
      } else {
        // A write takes its index before it starts: above every index given so far (query-index.ts says what a client may block on).
        const index = this.answerIndexes.next();
        const reply = await match.handler(ctx);
        if (reply)
          this.send(
            res,
            reply.status ?? 200,
            reply.body,
            reply.status === undefined || reply.status < 300 ? { 'X-Nomad-Index': String(index) } : {},
          );
      }
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

  private send(res: http.ServerResponse, status: number, body: unknown, extraHeaders: Record<string, string> = {}): void {
    const text = `${JSON.stringify(body)}\n`;
    res.writeHead(status, { ...JSON_HEADERS, ...extraHeaders, 'Content-Length': Buffer.byteLength(text) });
    res.end(text);
  }

  private fail(req: http.IncomingMessage, res: http.ServerResponse, method: string, path: string, err: unknown): void {
    const status = statusForError(err);
    if (status >= 500) this.logger.error('HTTP API request failed', { method, path, status, err });
    else this.logger.debug('HTTP API request refused', { method, path, status, error: errorAnswer(err).message });
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (err instanceof BodyTooLargeError) this.drain(req);
    // The client hung up; nobody is left to read the answer.
    if (res.destroyed || res.writableEnded) return;
    this.sendError(res, status, errorAnswer(err));
  }

  /** An error as Nomad answers one: the message as plain text (its Go client shows "Unexpected response code: 404 (message)"), the code in a header of csiplug's. */
  private sendError(res: http.ServerResponse, status: number, answer: { message: string; code: string }): void {
    res.writeHead(status, {
      'Content-Type': 'text/plain; charset=utf-8',
      'Cache-Control': 'no-store',
      'X-Content-Type-Options': 'nosniff',
      [ERROR_CODE_HEADER]: answer.code,
      'Content-Length': Buffer.byteLength(answer.message),
    });
    res.end(answer.message);
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
    const find = new Lookups(s);
    addNodeRoutes(r, s, () => this.url);
    addJobRoutes(r, s, find);
    addAllocRoutes(r, s, find, this.logger, this.clock);
    addVolumeRoutes(r, s, find);
    addSnapshotRoutes(r, s, find);

    r.add(
      'GET',
      '/v1/metrics',
      async ({ res, query }) => {
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
      },
      WRITES_OWN_RESPONSE,
    );
    r.add(
      'GET',
      '/v1/event/stream',
      ({ res, query, signal }) => {
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
      },
      WRITES_OWN_RESPONSE,
    );
  }

  /** What the open event streams hold unread now, in all (bounded by eventStreamsMaxBuffered plus one event). */
  get eventStreamsBuffered(): number {
    let total = 0;
    for (const stream of this.streams) total += stream.buffered;
    return total;
  }
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
