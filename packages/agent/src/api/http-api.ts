// The agent's HTTP API: Nomad-shaped paths over the AgentService, JSON in
// and out, an optional ACL token (X-Csiplug-Token, else 403), and the NDJSON
// event stream. Every body is read and validated in full before the service
// is called, so a refused request changes nothing. Errors are
// `{ "error": message, "code": code }` with 400 (bad JSON, unknown fields,
// failed validation, body over the limit), 403, 404, 405 (with Allow), 409
// (conflicts such as a claimed volume) or 500; see statusForError.
//
//   method  path                                   body                      answer
//   GET     /v1/agent/health                                                 AgentHealth (503 when not ok)
//   GET     /v1/jobs                                                         JobView[]
//   POST    /v1/jobs  (PUT too)                    { "Job": JobDocument }    RunJobResult
//   GET     /v1/job/:id                                                      JobView
//   DELETE  /v1/job/:id[?purge=true]                                         JobView (after its allocs stopped)
//   GET     /v1/job/:id/allocations                                          AllocView[]
//   GET     /v1/allocations                                                  AllocView[]
//   GET     /v1/allocation/:id                                               AllocView
//   GET     /v1/allocation/:id/logs/:task[?stream=stdout|stderr&offset=N]    AllocLogs
//   GET     /v1/plugins[?type=csi]                                           PluginView[]
//   GET     /v1/plugin/csi/:id                                               PluginView
//   GET     /v1/volumes[?type=csi&plugin_id=ID]                              VolumeView[]
//   GET     /v1/volume/csi/:id                                               VolumeView
//   PUT     /v1/volume/csi/:id  (POST too)         { "Volume": VolumeSpecDocument }  VolumeView (registered)
//   PUT     /v1/volume/csi/:id/create  (POST too)  { "Volume": VolumeSpecDocument }  VolumeView (created)
//   DELETE  /v1/volume/csi/:id[?force=true]                                  { "id" } (deregistered)
//   DELETE  /v1/volume/csi/:id/delete                                        { "id" } (deleted through the plugin)
//   GET     /v1/event/stream[?topic=Task&topic=Plugin,Volume]                NDJSON AgentEvent lines, `{}` heartbeats
//
// Bodies may also be the bare document, without the envelope. Volume
// secrets are never sent back: their values read "[REDACTED]".
import { Clock, CsiplugError, Disposable, Logger, RealClock, ValidationError } from '@csiplug/core';
import { createHash, timingSafeEqual } from 'crypto';
import * as http from 'http';
import type { AddressInfo } from 'net';
import * as net from 'net';
import type { AgentService, VolumeView } from '../service';
import { validateJob, validateVolumeSpec } from '../spec';
import { ApiError, ApiErrorCode, errorBody, statusForError } from './api-error';
import { EVENT_HEARTBEAT_MS, EventStream, parseTopics } from './event-stream';
import { AllocLogs, TOKEN_HEADER, VolumeDeleted } from './protocol';
import { BodyTooLargeError, DEFAULT_MAX_BODY_BYTES, parseJsonBody, readBody, unwrapEnvelope } from './request-body';
import { RouteParams, Router } from './router';

export interface HttpApiOptions {
  /** An IP address; the agent's config defaults it to 127.0.0.1. */
  bindAddr: string;
  /** 0 picks a free port; listen() says which. */
  port: number;
  /** When set, every request must carry it in X-Csiplug-Token. */
  aclToken?: string;
  /** Larger request bodies are refused with 400. Default 1 MiB. */
  maxBodyBytes?: number;
  logger: Logger;
  /** Drives the event stream's heartbeat. Default: the wall clock. */
  clock?: Clock;
  /** Default 10 s. */
  eventHeartbeatMs?: number;
}

/** What a route handler answers: a JSON body, or nothing when it wrote the response itself. */
type Reply = { status?: number; body: unknown } | undefined;

interface RequestContext {
  req: http.IncomingMessage;
  res: http.ServerResponse;
  params: RouteParams;
  query: URLSearchParams;
  /** The body parsed as JSON (read once, under the size limit). */
  json(): Promise<unknown>;
}

type Handler = (ctx: RequestContext) => Promise<Reply> | Reply;

/** How much of an oversized body is read (and dropped) before the connection is cut. */
const DRAIN_LIMIT = 64 * 1024 * 1024;

const JSON_HEADERS = {
  'Content-Type': 'application/json; charset=utf-8',
  'Cache-Control': 'no-store',
  'X-Content-Type-Options': 'nosniff',
};

export class HttpApi implements Disposable {
  private readonly router = new Router<Handler>();
  private readonly streams = new Set<EventStream>();
  private readonly tokenDigest: Buffer | undefined;
  private readonly maxBodyBytes: number;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private server: http.Server | undefined;
  private closing: Promise<void> | undefined;
  private inflight = 0;

  constructor(
    private readonly service: AgentService,
    private readonly options: HttpApiOptions,
  ) {
    if (options.aclToken === '') throw new ValidationError('the ACL token may not be empty; leave it out to turn ACLs off', 'aclToken');
    this.tokenDigest = options.aclToken !== undefined ? digest(options.aclToken) : undefined;
    this.maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    this.clock = options.clock ?? new RealClock();
    this.logger = options.logger;
    this.addRoutes();
  }

  /** Starts listening; resolves with the address and port actually bound. */
  listen(): Promise<{ address: string; port: number }> {
    if (this.server || this.closing) return Promise.reject(new CsiplugError('ELISTEN', 'the HTTP API is already listening (or was closed); make a new HttpApi'));
    const { bindAddr, port } = this.options;
    const server = http.createServer((req, res) => void this.handle(req, res));
    this.server = server;
    return new Promise((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException) => {
        this.server = undefined;
        reject(new CsiplugError('ELISTEN', `the HTTP API cannot listen on ${bindAddr}:${port}: ${err.message}; pick another bind_addr or port`, { cause: err }));
      };
      server.once('error', onError);
      server.listen(port, bindAddr, () => {
        server.off('error', onError);
        server.on('error', (err) => this.logger.error('HTTP API server error', { err }));
        const addr = server.address() as AddressInfo;
        if (this.tokenDigest === undefined && !isLoopback(addr.address)) {
          this.logger.warn('the HTTP API listens on a non-loopback address without an ACL token; anyone who can reach it can run jobs', { address: addr.address });
        }
        this.logger.info('HTTP API listening', { address: addr.address, port: addr.port, acl: this.tokenDigest !== undefined });
        resolve({ address: addr.address, port: addr.port });
      });
    });
  }

  /** `http://host:port` once listening. */
  get url(): string | undefined {
    const addr = this.server?.address() as AddressInfo | null | undefined;
    if (!addr) return undefined;
    const host = addr.family === 'IPv6' || net.isIPv6(addr.address) ? `[${addr.address}]` : addr.address;
    return `http://${host}:${addr.port}`;
  }

  /** Stops listening, ends every event stream, and resolves once all connections are closed. */
  close(): Promise<void> {
    this.closing ??= this.doClose();
    return this.closing;
  }

  dispose(): void {
    this.close().catch((err: unknown) => this.logger.error('closing the HTTP API failed', { err }));
  }

  private async doClose(): Promise<void> {
    const server = this.server;
    for (const stream of [...this.streams]) stream.dispose();
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      // Idle keep-alive sockets would hold close() open; busy ones close when their request ends.
      server.closeIdleConnections();
    });
    this.logger.info('HTTP API closed');
  }

  // -------------------------------------------------------------------------

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    this.inflight++;
    const method = req.method ?? 'GET';
    let path = req.url ?? '/';
    try {
      // Origin-form ("/v1/jobs") is appended to a base, so "//x" stays a path and never becomes a host.
      const target = req.url ?? '/';
      const url = new URL(target.startsWith('/') ? `http://localhost${target}` : target);
      path = url.pathname;
      this.checkToken(req);
      const match = this.router.match(method, url.pathname);
      if (match.kind === 'none') throw ApiError.notFound(`no such API path: ${method} ${url.pathname}`);
      if (match.kind === 'method') {
        res.setHeader('Allow', match.allowed.join(', '));
        throw new ApiError(405, ApiErrorCode.MethodNotAllowed, `${method} is not allowed on ${url.pathname} (allowed: ${match.allowed.join(', ')})`);
      }
      let body: Promise<unknown> | undefined;
      const ctx: RequestContext = {
        req,
        res,
        params: match.params,
        query: url.searchParams,
        json: () => (body ??= readBody(req, this.maxBodyBytes).then(parseJsonBody)),
      };
      const reply = await match.handler(ctx);
      if (reply) this.send(res, reply.status ?? 200, reply.body);
      this.logger.debug('HTTP API request', { method, path, status: res.statusCode });
    } catch (err) {
      this.fail(req, res, method, path, err);
    } finally {
      this.inflight--;
      if (this.closing && this.inflight === 0) this.server?.closeIdleConnections();
    }
  }

  private checkToken(req: http.IncomingMessage): void {
    if (this.tokenDigest === undefined) return;
    const given = req.headers[TOKEN_HEADER.toLowerCase()];
    if (given === undefined || given === '') {
      throw new ApiError(403, ApiErrorCode.Forbidden, `this agent requires an ACL token: send it in the ${TOKEN_HEADER} header (csiplug: -token or CSIPLUG_TOKEN)`);
    }
    // Hashing first gives equal lengths, so the comparison time says nothing about the token.
    if (typeof given !== 'string' || !timingSafeEqual(digest(given), this.tokenDigest)) {
      throw new ApiError(403, ApiErrorCode.Forbidden, `the ACL token in ${TOKEN_HEADER} is not valid`);
    }
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
    r.add('GET', '/v1/allocation/:id/logs/:task', async ({ params, query }) => {
      const stream = oneOf(query, 'stream', ['stdout', 'stderr'] as const, 'stdout');
      const offset = intParam(query, 'offset', 0);
      const alloc = this.alloc(params.id!);
      const task = params.task!;
      const known = alloc.tasks[task] !== undefined || alloc.job.groups.some((g) => g.name === alloc.group && g.tasks.some((t) => t.name === task));
      if (!known) throw ApiError.notFound(`alloc ${alloc.id} has no task "${task}" (tasks: ${Object.keys(alloc.tasks).join(', ') || 'none'})`);
      const data = await s.allocLogs(alloc.id, task, stream, { offset });
      return { body: { allocId: alloc.id, task, stream, offset, nextOffset: offset + Buffer.byteLength(data), data } satisfies AllocLogs };
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
        return { body: redactSecrets(how === 'register' ? await s.registerVolume(spec) : await s.createVolume(spec)) };
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
    r.add('DELETE', '/v1/volume/csi/:id/delete', async ({ params }) => {
      const volume = this.volume(params.id!);
      await s.deleteVolume(volume.id);
      return { body: { id: volume.id } satisfies VolumeDeleted };
    });

    r.add('GET', '/v1/event/stream', ({ res, query }) => {
      const topics = parseTopics(query.getAll('topic'));
      const stream = new EventStream(s, res, topics, this.clock, this.logger, this.options.eventHeartbeatMs ?? EVENT_HEARTBEAT_MS);
      this.streams.add(stream);
      void stream.done.then(() => this.streams.delete(stream));
      return undefined;
    });
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

export const REDACTED = '[REDACTED]';

/** A volume as the API shows it: secret values replaced, keys kept. */
export function redactSecrets(volume: VolumeView): VolumeView {
  const secrets = volume.secrets ?? {};
  if (Object.keys(secrets).length === 0) return volume;
  return { ...volume, secrets: Object.fromEntries(Object.keys(secrets).map((k) => [k, REDACTED])) };
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

function isLoopback(address: string): boolean {
  return address === '::1' || address.startsWith('127.') || address === '::ffff:127.0.0.1';
}

/** `?x`, `?x=true|1` → true; `?x=false|0` or absent → false; anything else is a 400. */
function boolParam(query: URLSearchParams, name: string): boolean {
  const v = query.get(name);
  if (v === null || v === 'false' || v === '0') return false;
  if (v === '' || v === 'true' || v === '1') return true;
  throw ApiError.badRequest(`query parameter ${name} must be true or false (got "${v}")`);
}

function intParam(query: URLSearchParams, name: string, dflt: number): number {
  const v = query.get(name);
  if (v === null || v === '') return dflt;
  if (!/^\d+$/.test(v) || !Number.isSafeInteger(Number(v))) throw ApiError.badRequest(`query parameter ${name} must be a whole number of at least 0 (got "${v}")`);
  return Number(v);
}

function oneOf<T extends string>(query: URLSearchParams, name: string, allowed: readonly T[], dflt: T): T {
  const v = query.get(name);
  if (v === null || v === '') return dflt;
  if (!(allowed as readonly string[]).includes(v)) throw ApiError.badRequest(`query parameter ${name} must be one of ${allowed.join(', ')} (got "${v}")`);
  return v as T;
}

/** Nomad's list endpoints take `?type=csi`; csi is the only type here. */
function csiTypeParam(query: URLSearchParams): void {
  const type = query.get('type');
  if (type !== null && type !== '' && type !== 'csi') throw ApiError.badRequest(`query parameter type must be csi, the only plugin type (got "${type}")`);
}
