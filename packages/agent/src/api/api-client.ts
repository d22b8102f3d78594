// A typed client for the agent's HTTP API: one method per route, ApiError
// for every failure (with the agent's status, message and code). The CLI
// talks to the agent only through this.
import * as http from 'http';
import type { AgentEvent, AgentHealth, AllocView, JobView, PluginView, RunJobResult, VolumeView } from '../service';
import type { JobDocument, VolumeSpecDocument } from '../spec';
import { DEFAULT_PORT } from '../spec';
import { ApiError, ApiErrorCode } from './api-error';
import { AllocLogs, TOKEN_HEADER } from './protocol';

export const DEFAULT_ADDRESS = `http://127.0.0.1:${DEFAULT_PORT}`;

export interface ApiClientOptions {
  /** `http://host:port`; a bare `host:port` means http. Default http://127.0.0.1:4747. */
  address?: string;
  /** Sent as X-Csiplug-Token. */
  token?: string;
  /** Gives up on a call after this long (ms). Default: waits as long as the agent takes. */
  timeoutMs?: number;
}

export interface EventStreamOptions {
  /** Only these topics (default: all). */
  topics?: AgentEvent['topic'][];
  /** Ends the stream. */
  signal?: AbortSignal;
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
  if (url.protocol !== 'http:') throw new ApiError(0, ApiErrorCode.Invalid, `the agent address "${address}" must use http:// (the API speaks plain HTTP on a loopback address)`);
  return url;
}

export class ApiClient {
  readonly address: string;
  private readonly base: URL;
  private readonly token: string | undefined;
  private readonly timeoutMs: number | undefined;

  constructor(options: ApiClientOptions = {}) {
    this.base = normaliseAddress(options.address ?? DEFAULT_ADDRESS);
    this.address = this.base.origin;
    this.token = options.token || undefined;
    this.timeoutMs = options.timeoutMs;
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

  allocLogs(id: string, task: string, options: { stream?: 'stdout' | 'stderr'; offset?: number } = {}): Promise<AllocLogs> {
    return this.json('GET', `/v1/allocation/${enc(id)}/logs/${enc(task)}${query({ stream: options.stream, offset: options.offset })}`);
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
  createVolume(spec: VolumeSpecDocument): Promise<VolumeView> {
    return this.json('PUT', `/v1/volume/csi/${enc(spec.id)}/create`, { body: { Volume: spec } });
  }

  async deregisterVolume(id: string, options: { force?: boolean } = {}): Promise<void> {
    await this.json('DELETE', `/v1/volume/csi/${enc(id)}${query({ force: options.force })}`);
  }

  async deleteVolume(id: string): Promise<void> {
    await this.json('DELETE', `/v1/volume/csi/${enc(id)}/delete`);
  }

  // Events -------------------------------------------------------------------

  /**
   * The event stream, one AgentEvent at a time (heartbeats skipped). Ends
   * when the agent closes it, when `signal` aborts, or when the loop breaks.
   */
  async *events(options: EventStreamOptions = {}): AsyncGenerator<AgentEvent, void, undefined> {
    if (options.signal?.aborted) return;
    const topics = options.topics?.length ? `?${options.topics.map((t) => `topic=${enc(t)}`).join('&')}` : '';
    const res = await this.open('GET', `/v1/event/stream${topics}`, undefined, options.signal);
    if (res.statusCode !== 200) {
      await this.raise(res);
      return;
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

  private async json<T>(method: string, path: string, options: { body?: unknown } = {}): Promise<T> {
    return (await this.call<T>(method, path, options)).body;
  }

  private async call<T>(method: string, path: string, options: { body?: unknown; okStatuses?: number[] } = {}): Promise<{ status: number; body: T }> {
    const payload = options.body !== undefined ? Buffer.from(JSON.stringify(options.body)) : undefined;
    const res = await this.open(method, path, payload);
    const ok = options.okStatuses ?? [200];
    if (!ok.includes(res.statusCode ?? 0)) return this.raise(res);
    const text = await readAll(res);
    try {
      return { status: res.statusCode!, body: JSON.parse(text) as T };
    } catch {
      throw new ApiError(res.statusCode ?? 0, ApiErrorCode.BadResponse, `${method} ${path}: the agent at ${this.address} answered with something that is not JSON`);
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

  private open(method: string, path: string, payload?: Buffer, signal?: AbortSignal): Promise<http.IncomingMessage> {
    const url = new URL(path, this.base);
    const headers: http.OutgoingHttpHeaders = { Accept: 'application/json' };
    if (this.token) headers[TOKEN_HEADER] = this.token;
    if (payload) {
      headers['Content-Type'] = 'application/json';
      headers['Content-Length'] = payload.length;
    }
    return new Promise((resolve, reject) => {
      let answered = false;
      const req = http.request(url, { method, headers, signal, ...(this.timeoutMs !== undefined ? { timeout: this.timeoutMs } : {}) }, (res) => {
        answered = true;
        resolve(res);
      });
      req.on('timeout', () => req.destroy(new Error(`no answer within ${this.timeoutMs} ms`)));
      req.on('error', (err: NodeJS.ErrnoException) => {
        // The agent may answer (say, 400 for an oversized body) before it has read everything we sent.
        if (answered) return;
        if (signal?.aborted) reject(new ApiError(0, 'EABORTED', `${method} ${path} was aborted`, { cause: err }));
        else reject(new ApiError(0, ApiErrorCode.Connect, `cannot reach the csiplug agent at ${this.address}: ${err.message}; is it running? (set -address or CSIPLUG_ADDR)`, { cause: err }));
      });
      req.end(payload);
    });
  }
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
  });
}
