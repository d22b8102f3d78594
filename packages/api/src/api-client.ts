// A typed client for the agent's HTTP API: one method per route, ApiError
// for every failure (with the agent's status, message and code). The CLI
// talks to the agent only through this. It speaks http or https (verifying
// the agent's certificate against the system's CAs or a given one), and
// waits as long as a call takes unless given a timeout.
import { type Clock, type Disposable, RealClock, ValidationError, formatDuration } from '@csiplug/core';
import * as http from 'http';
import * as https from 'https';
import type { Readable } from 'stream';
import * as tls from 'tls';
import type { AgentEvent, AgentHealth, AllocView, RoutedAnswer, ExternalVolumeView, JobPlan, JobView, MountUsageView, NodeList, NodePurgeResult, NodeView, PluginView, RunJobResult, SnapshotView, VolumeDetachResult, VolumeView } from './service';
import type { JobDocument, VolumeSpecDocument } from '@csiplug/jobspec';
import { DEFAULT_PORT } from '@csiplug/jobspec';
import { ApiError, ApiErrorCode } from './api-error';
import { type AllocLogs, type AllocLogsQuery, LOG_OFFSET_HEADER, LOG_SIZE_HEADER, TOKEN_HEADER } from './protocol';

export const DEFAULT_ADDRESS = `http://127.0.0.1:${DEFAULT_PORT}`;

/** Codes of the failures only the client sees (besides ApiErrorCode.Connect and BadResponse). */
export const ClientErrorCode = Object.freeze({
  /** No answer within the client's timeout. */
  Timeout: 'ETIMEOUT',
  /** The caller's signal aborted the call. */
  Aborted: 'EABORTED',
  /** The TLS handshake failed: an untrusted or mismatched certificate, or an agent that does not speak TLS. */
  Tls: 'ETLS',
} as const);

export interface ApiClientOptions {
  /** `http://host:port` or `https://host:port`; a bare `host:port` means http. Default http://127.0.0.1:4747. */
  address?: string;
  /** Sent as X-Csiplug-Token. */
  token?: string;
  /**
   * Gives up on a call when the agent has not answered within this long
   * (ms): the whole answer for ordinary calls, its start for streams.
   * 0 or absent: waits as long as the operation takes (a `job stop` may
   * take minutes).
   */
  timeoutMs?: number;
  /** https only: the CA certificate(s), PEM, to verify the agent's certificate with instead of the system's. */
  caCert?: string | Buffer;
  /**
   * https only, and insecure: accept any certificate. Whoever can intercept
   * the connection then reads the token and can answer in the agent's name.
   */
  tlsSkipVerify?: boolean;
  /** Times `timeoutMs`. Default: the wall clock. */
  clock?: Clock;
}

export interface EventStreamOptions {
  /** Only these topics (default: all). */
  topics?: AgentEvent['topic'][];
  /** Ends the stream. */
  signal?: AbortSignal;
}

/** A task's log as raw bytes (plain=true): where they start, the file's size, and the bytes as they arrive. */
export interface AllocLogStream {
  offset: number;
  size: number;
  /** Destroy it to stop early. */
  stream: Readable;
}

/** Turns `host:port` into `http://host:port` and checks what it can. */
export function normaliseAddress(address: string): URL {
  const text = /^[a-z][a-z0-9+.-]*:\/\//i.test(address) ? address : `http://${address}`;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ApiError(0, ApiErrorCode.Invalid, `the agent address "${address}" is not a URL like http://127.0.0.1:${DEFAULT_PORT}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ApiError(0, ApiErrorCode.Invalid, `the agent address "${address}" must use http:// or https:// (https when the agent has a tls block)`);
  }
  return url;
}

export class ApiClient {
  readonly address: string;
  private readonly base: URL;
  private readonly secure: boolean;
  private readonly token: string | undefined;
  private readonly timeoutMs: number;
  private readonly clock: Clock;
  private readonly agent: http.Agent;

  constructor(options: ApiClientOptions = {}) {
    this.base = normaliseAddress(options.address ?? DEFAULT_ADDRESS);
    this.address = this.base.origin;
    this.secure = this.base.protocol === 'https:';
    this.token = options.token || undefined;
    const timeoutMs = options.timeoutMs ?? 0;
    if (!Number.isFinite(timeoutMs) || timeoutMs < 0) throw new ApiError(0, ApiErrorCode.Invalid, `the client timeout must be 0 (none) or more milliseconds (got ${timeoutMs})`);
    this.timeoutMs = timeoutMs;
    this.clock = options.clock ?? new RealClock();
    // An agent of our own: Node 20's global one gives every socket a 5 s idle
    // timeout, which cut off any call the agent took longer than 5 s to answer.
    // No keep-alive either: a pooled socket the server closes after its
    // keep-alive timeout would fail the next call.
    if (this.secure) {
      if (options.caCert !== undefined) checkPem(options.caCert);
      this.agent = new https.Agent({ keepAlive: false, ca: options.caCert, rejectUnauthorized: options.tlsSkipVerify !== true });
    } else {
      this.agent = new http.Agent({ keepAlive: false });
    }
  }

  /** The agent's health; an unhealthy agent answers 503 with the same body, returned here too. */
  async health(): Promise<AgentHealth> {
    const { body } = await this.call<AgentHealth>('GET', '/v1/agent/health', { okStatuses: [200, 503] });
    return body;
  }

  // Jobs ---------------------------------------------------------------------

  listJobs(): Promise<JobView[]> {
    return this.json('GET', '/v1/jobs');
  }

  getJob(id: string): Promise<JobView> {
    return this.json('GET', `/v1/job/${enc(id)}`);
  }

  jobAllocations(id: string): Promise<AllocView[]> {
    return this.json('GET', `/v1/job/${enc(id)}/allocations`);
  }

  /** Posts a job in its JSON form (jobToDocument of a parsed jobspec). */
  runJob(job: JobDocument): Promise<RunJobResult> {
    return this.json('POST', '/v1/jobs', { body: { Job: job } });
  }

  /** What running the job would change (POST /v1/job/:id/plan); nothing is done. */
  planJob(job: JobDocument): Promise<JobPlan> {
    const ids = Object.keys(job.job);
    if (ids.length !== 1) throw new ValidationError(`a jobspec must hold exactly one job block (found ${ids.length})`, 'job');
    return this.json('POST', `/v1/job/${enc(ids[0]!)}/plan`, { body: { Job: job, Diff: true } });
  }

  stopJob(id: string, options: { purge?: boolean } = {}): Promise<JobView> {
    return this.json('DELETE', `/v1/job/${enc(id)}${query({ purge: options.purge })}`);
  }

  // Allocs -------------------------------------------------------------------

  listAllocs(): Promise<AllocView[]> {
    return this.json('GET', '/v1/allocations');
  }

  getAlloc(id: string): Promise<AllocView> {
    return this.json('GET', `/v1/allocation/${enc(id)}`);
  }

  /** Part of a task's log as JSON: at most `limit` bytes (the agent's default 64 KiB, its maximum 4 MiB). */
  allocLogs(id: string, task: string, options: AllocLogsQuery = {}): Promise<AllocLogs> {
    return this.json('GET', logsPath(id, task, options, false));
  }

  /** A task's log as raw bytes, any amount, streamed as the agent reads the file (no `limit`: to its end). */
  async allocLogStream(id: string, task: string, options: AllocLogsQuery & { signal?: AbortSignal } = {}): Promise<AllocLogStream> {
    const res = await this.stream('GET', logsPath(id, task, options, true), options.signal);
    return { offset: Number(res.headers[LOG_OFFSET_HEADER.toLowerCase()] ?? 0), size: Number(res.headers[LOG_SIZE_HEADER.toLowerCase()] ?? 0), stream: res };
  }

  /** This node: drivers, the plugins' fingerprinted facts. */
  node(): Promise<NodeView> {
    return this.json('GET', '/v1/node/self');
  }

  /** This node, or every node of its cluster. */
  listNodes(): Promise<NodeList> {
    return this.json('GET', '/v1/nodes');
  }

  /** `node purge`: a down node of the cluster gone for good. */
  purgeNode(name: string): Promise<NodePurgeResult> {
    return this.json('PUT', `/v1/node/${encodeURIComponent(name)}/purge`, { body: {} });
  }

  // Plugins ------------------------------------------------------------------

  listPlugins(): Promise<PluginView[]> {
    return this.json('GET', '/v1/plugins?type=csi');
  }

  getPlugin(id: string): Promise<PluginView> {
    return this.json('GET', `/v1/plugin/csi/${enc(id)}`);
  }

  // Volumes ------------------------------------------------------------------

  listVolumes(options: { pluginId?: string } = {}): Promise<VolumeView[]> {
    return this.json('GET', `/v1/volumes${query({ type: 'csi', plugin_id: options.pluginId })}`);
  }

  getVolume(id: string): Promise<VolumeView> {
    return this.json('GET', `/v1/volume/csi/${enc(id)}`);
  }

  /** Adds an existing volume (external_id set) to the catalog. */
  registerVolume(spec: VolumeSpecDocument): Promise<VolumeView> {
    return this.json('PUT', `/v1/volume/csi/${enc(spec.id)}`, { body: { Volume: spec } });
  }

  /** Creates the volume through its plugin, then registers it. */
  createVolume(spec: VolumeSpecDocument, options: { forwarded?: boolean } = {}): Promise<VolumeView> {
    return this.json('PUT', `/v1/volume/csi/${enc(spec.id)}/create${query({ forwarded: options.forwarded })}`, { body: { Volume: spec } });
  }

  async deregisterVolume(id: string, options: { force?: boolean } = {}): Promise<void> {
    await this.json('DELETE', `/v1/volume/csi/${enc(id)}${query({ force: options.force })}`);
  }

  /** NodeGetVolumeStats of each live mount of the volume on the agent's node. */
  volumeUsage(id: string): Promise<MountUsageView[]> {
    return this.json('GET', `/v1/volume/csi/${enc(id)}/usage`);
  }

  /** NodeGetVolumeStats of each volume the alloc has mounted. */
  allocUsage(id: string): Promise<MountUsageView[]> {
    return this.json('GET', `/v1/allocation/${enc(id)}/usage`);
  }

  /** Unpublishes the volume from a node whose allocs that claim it are gone. */
  detachVolume(id: string, node: string): Promise<VolumeDetachResult> {
    return this.json('DELETE', `/v1/volume/csi/${enc(id)}/detach${query({ node })}`);
  }

  /** The plugin's own volumes, one page (ListVolumes). */
  listExternalVolumes(options: { pluginId?: string; perPage?: number; nextToken?: string } = {}): Promise<{ Volumes: ExternalVolumeView[]; NextToken: string }> {
    return this.json('GET', `/v1/volumes/external${query({ plugin_id: options.pluginId, per_page: options.perPage, next_token: options.nextToken })}`);
  }

  listSnapshots(options: { pluginId?: string; perPage?: number; nextToken?: string } = {}): Promise<{ Snapshots: SnapshotView[]; NextToken: string }> {
    return this.json('GET', `/v1/volumes/snapshot${query({ plugin_id: options.pluginId, per_page: options.perPage, next_token: options.nextToken })}`);
  }

  async createSnapshot(volumeId: string, name?: string): Promise<SnapshotView> {
    const r = await this.json<{ Snapshots: SnapshotView[] }>('PUT', '/v1/volumes/snapshot', { body: { Snapshots: [{ SourceVolumeID: volumeId, ...(name ? { Name: name } : {}) }] } });
    return r.Snapshots[0]!;
  }

  async deleteSnapshot(pluginId: string, snapshotId: string): Promise<void> {
    await this.json('DELETE', `/v1/volumes/snapshot${query({ plugin_id: pluginId, snapshot_id: snapshotId })}`);
  }

  /** Cluster mode, agent to agent: one CSI call made on the other node's own controller of the plugin (cluster-controllers.ts). */
  routedCsiCall(plugin: string, service: 'identity' | 'controller', rpc: string, request: unknown, signal?: AbortSignal): Promise<RoutedAnswer> {
    return this.json('POST', `/v1/cluster/csi/${enc(plugin)}/${enc(service)}/${enc(rpc)}`, { body: { request }, ...(signal ? { signal } : {}) });
  }

  async deleteVolume(id: string, options: { forwarded?: boolean } = {}): Promise<void> {
    await this.json('DELETE', `/v1/volume/csi/${enc(id)}/delete${query({ forwarded: options.forwarded })}`);
  }

  // Events -------------------------------------------------------------------

  /**
   * The event stream, one AgentEvent at a time (heartbeats skipped). Ends
   * when the agent closes it, when `signal` aborts, or when the loop breaks.
   */
  async *events(options: EventStreamOptions = {}): AsyncGenerator<AgentEvent, void, undefined> {
    if (options.signal?.aborted) return;
    const topics = options.topics?.length ? `?${options.topics.map((t) => `topic=${enc(t)}`).join('&')}` : '';
    let res: http.IncomingMessage;
    try {
      res = await this.stream('GET', `/v1/event/stream${topics}`, options.signal);
    } catch (err) {
      if (options.signal?.aborted && err instanceof ApiError && err.code === ClientErrorCode.Aborted) return;
      throw err;
    }
    res.setEncoding('utf8');
    let pending = '';
    try {
      for await (const chunk of res as AsyncIterable<string>) {
        pending += chunk;
        let nl: number;
        while ((nl = pending.indexOf('\n')) >= 0) {
          const line = pending.slice(0, nl).trim();
          pending = pending.slice(nl + 1);
          if (line === '' || line === '{}') continue;
          yield JSON.parse(line) as AgentEvent;
        }
      }
    } catch (err) {
      if (options.signal?.aborted) return;
      throw new ApiError(0, ApiErrorCode.Connect, `the event stream from ${this.address} broke: ${(err as Error).message}`, { cause: err });
    } finally {
      res.destroy();
    }
  }

  // -------------------------------------------------------------------------

  private async json<T>(method: string, path: string, options: { body?: unknown; signal?: AbortSignal } = {}): Promise<T> {
    return (await this.call<T>(method, path, options)).body;
  }

  /** One request and its whole JSON answer, within the timeout (and until `signal` aborts). */
  private async call<T>(method: string, path: string, options: { body?: unknown; okStatuses?: number[]; signal?: AbortSignal } = {}): Promise<{ status: number; body: T }> {
    const payload = options.body !== undefined ? Buffer.from(JSON.stringify(options.body)) : undefined;
    const scope = new CallScope(this.clock, this.timeoutMs, options.signal);
    try {
      const res = await this.open(method, path, scope, payload);
      const ok = options.okStatuses ?? [200];
      if (!ok.includes(res.statusCode ?? 0)) return await this.raise(res);
      const text = await readAll(res).catch((err: unknown) => {
        throw this.failure(err, method, path, scope);
      });
      try {
        return { status: res.statusCode!, body: JSON.parse(text) as T };
      } catch {
        throw new ApiError(res.statusCode ?? 0, ApiErrorCode.BadResponse, `${method} ${path}: the agent at ${this.address} answered with something that is not JSON`);
      }
    } finally {
      scope.dispose();
    }
  }

  /** A request whose answer is read as it comes: the timeout covers only its start. Error statuses are thrown. */
  private async stream(method: string, path: string, signal: AbortSignal | undefined): Promise<http.IncomingMessage> {
    const scope = new CallScope(this.clock, this.timeoutMs, signal);
    try {
      const res = await this.open(method, path, scope);
      if (res.statusCode !== 200) await this.raise(res);
      scope.stopTimer();
      // The caller's signal still ends the stream; the scope lets go of it when the answer is over.
      res.once('close', () => scope.dispose());
      return res;
    } catch (err) {
      scope.dispose();
      throw err;
    }
  }

  /** Reads an error response and throws it as an ApiError. */
  private async raise(res: http.IncomingMessage): Promise<never> {
    const status = res.statusCode ?? 0;
    const text = await readAll(res).catch(() => '');
    let message = `the agent answered ${status} ${res.statusMessage ?? ''}`.trim();
    let code: string = ApiErrorCode.BadResponse;
    try {
      const body = JSON.parse(text) as { error?: unknown; code?: unknown };
      if (typeof body.error === 'string') message = body.error;
      if (typeof body.code === 'string') code = body.code;
    } catch {
      if (text.trim()) message = `${message}: ${text.trim().slice(0, 200)}`;
    }
    throw new ApiError(status, code, message);
  }

  private open(method: string, path: string, scope: CallScope, payload?: Buffer): Promise<http.IncomingMessage> {
    const url = new URL(path, this.base);
    const headers: http.OutgoingHttpHeaders = { Accept: 'application/json' };
    if (this.token) headers[TOKEN_HEADER] = this.token;
    if (payload) {
      headers['Content-Type'] = 'application/json';
      headers['Content-Length'] = payload.length;
    }
    const request = this.secure ? https.request : http.request;
    return new Promise((resolve, reject) => {
      let answered = false;
      const req = request(url, { method, headers, agent: this.agent, signal: scope.signal }, (res) => {
        answered = true;
        resolve(res);
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        // The agent may answer (say, 400 for an oversized body) before it has read everything we sent.
        if (answered) return;
        reject(this.failure(err, method, path, scope));
      });
      req.end(payload);
    });
  }

  /** The ApiError for a call that got no (whole) answer: out of time, aborted, a TLS failure, or no agent there. */
  private failure(err: unknown, method: string, path: string, scope: CallScope): ApiError {
    if (err instanceof ApiError) return err;
    const e = err as NodeJS.ErrnoException;
    if (scope.timedOut) {
      return new ApiError(
        0,
        ClientErrorCode.Timeout,
        `no answer from the agent at ${this.address} within ${formatDuration(this.timeoutMs)} (${method} ${path}); it may still be working on it: raise -timeout, or set it to 0 to wait as long as it takes`,
        { cause: err },
      );
    }
    if (scope.aborted) return new ApiError(0, ClientErrorCode.Aborted, `${method} ${path} was aborted`, { cause: err });
    const tlsProblem = this.secure ? describeTlsFailure(e) : undefined;
    if (tlsProblem) return new ApiError(0, ClientErrorCode.Tls, `TLS with the agent at ${this.address} failed: ${tlsProblem}`, { cause: err });
    // A plain-HTTP request to an https agent is cut off before any answer.
    const httpsHint = !this.secure && (e.code === 'ECONNRESET' || e.code === 'EPIPE') ? '; if the agent serves https (a tls block), use an https:// address' : '';
    return new ApiError(0, ApiErrorCode.Connect, `cannot reach the csiplug agent at ${this.address}: ${e.message}; is it running? (set -address or CSIPLUG_ADDR)${httpsHint}`, { cause: err });
  }
}

/**
 * A call's deadline and the caller's signal, as the one AbortSignal the
 * request is made with. The deadline runs on the injected clock.
 */
class CallScope implements Disposable {
  private readonly controller = new AbortController();
  private timer: Disposable | undefined;
  private readonly detach: (() => void) | undefined;
  timedOut = false;

  constructor(clock: Clock, timeoutMs: number, private readonly callerSignal?: AbortSignal) {
    if (timeoutMs > 0) {
      this.timer = clock.setTimeout(() => {
        this.timedOut = true;
        this.controller.abort();
      }, timeoutMs);
    }
    if (callerSignal) {
      const onAbort = () => this.controller.abort();
      if (callerSignal.aborted) onAbort();
      callerSignal.addEventListener('abort', onAbort, { once: true });
      this.detach = () => callerSignal.removeEventListener('abort', onAbort);
    }
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get aborted(): boolean {
    return this.callerSignal?.aborted === true;
  }

  /** The answer has started: from here on only the caller's signal ends the call. */
  stopTimer(): void {
    this.timer?.dispose();
    this.timer = undefined;
  }

  dispose(): void {
    this.stopTimer();
    this.detach?.();
  }
}

// OpenSSL's certificate verification codes (CERT_HAS_EXPIRED,
// DEPTH_ZERO_SELF_SIGNED_CERT, UNABLE_TO_VERIFY_LEAF_SIGNATURE…) and Node's
// host name check.
const CERT_CODE = /CERT|UNABLE_TO_|SELF_SIGNED|HOSTNAME|ERR_TLS_CERT_ALTNAME_INVALID/;

/** What went wrong in a failed TLS connection, in words that say what to do; undefined when it is not TLS. */
function describeTlsFailure(err: NodeJS.ErrnoException): string | undefined {
  const code = err.code ?? '';
  if (CERT_CODE.test(code)) {
    return `the agent's certificate is not trusted: ${err.message} (${code}); give the CA that signed it with -ca-cert FILE (or CSIPLUG_CACERT), or skip the check with -tls-skip-verify (insecure)`;
  }
  if (code === 'EPROTO' || code.startsWith('ERR_SSL_') || /SSL routines|wrong version number/i.test(err.message)) {
    return `${err.message}; does the agent serve https (a tls block with cert_file and key_file)? If not, use an http:// address`;
  }
  return undefined;
}

/** Refuses a CA option that holds no PEM certificate (Node would quietly trust nothing, and every call would fail later). */
function checkPem(ca: string | Buffer): void {
  const text = typeof ca === 'string' ? ca : ca.toString('utf8');
  if (!text.includes('-----BEGIN CERTIFICATE-----')) throw new ApiError(0, ApiErrorCode.Invalid, 'the CA certificate is not PEM (no "-----BEGIN CERTIFICATE-----" in it)');
  try {
    tls.createSecureContext({ ca });
  } catch (err) {
    throw new ApiError(0, ApiErrorCode.Invalid, `the CA certificate cannot be used: ${(err as Error).message}`, { cause: err });
  }
}

function logsPath(id: string, task: string, options: AllocLogsQuery, plain: boolean): string {
  return `/v1/allocation/${enc(id)}/logs/${enc(task)}${query({ stream: options.stream, origin: options.origin, offset: options.offset, limit: options.limit, plain })}`;
}

function enc(segment: string): string {
  return encodeURIComponent(segment);
}

function query(params: Record<string, string | number | boolean | undefined>): string {
  const parts = Object.entries(params)
    .filter(([, v]) => v !== undefined && v !== false)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`);
  return parts.length ? `?${parts.join('&')}` : '';
}

function readAll(res: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', reject);
    // A response cut short (the call aborted, the socket reset) may close without 'error' or 'end'.
    res.on('close', () => {
      if (!res.complete) reject(new Error('the answer was cut off before its end'));
    });
  });
}
