// A typed client for the agent's HTTP API: one method per route, ApiError
// for every failure (with the agent's status, message and code). The CLI
// talks to the agent only through this. It speaks http or https (verifying
// the agent's certificate against the system's CAs or a given one), and
// waits as long as a call takes unless given a timeout. The HTTP plumbing is
// ApiTransport (api-transport.ts); the volume, snapshot and routed CSI calls
// are in VolumeApiCalls (volume-api-calls.ts), which this class extends so
// that callers keep one flat client.
import { ValidationError } from '@csiplug/core';
import type { NomadJob } from '@csiplug/jobspec';
import type * as http from 'http';
import type { Readable } from 'stream';
import { ApiError, ApiErrorCode } from './api-error';
import { ClientErrorCode, enc, query } from './api-transport';
import { type AllocLogs, type AllocLogsQuery, LOG_OFFSET_HEADER, LOG_SIZE_HEADER } from './protocol';
import type {
  AgentEvent,
  AgentHealth,
  AllocView,
  DeploymentView,
  JobPlan,
  JobView,
  NodeList,
  NodePurgeResult,
  NodeView,
  PluginView,
  RunJobOptions,
  RunJobResult,
} from './service';
import { VolumeApiCalls } from './volume-api-calls';
import {
  decodeDeployment,
  decodeJob,
  decodeJobDeregisterResponse,
  decodeJobListStub,
  decodeJobPlanResponse,
  decodeJobRegisterResponse,
  type NomadDeployment,
  type NomadJobDeregisterResponse,
  type NomadJobListStub,
  type NomadJobPlanResponse,
  type NomadJobRegisterResponse,
  type NomadJobWithStatus,
} from './wire/job-wire';

export { ClientErrorCode, DEFAULT_ADDRESS, normaliseAddress, type ApiClientOptions } from './api-transport';

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

export class ApiClient extends VolumeApiCalls {
  /** The agent's health; an unhealthy agent answers 503 with the same body, returned here too. */
  async health(): Promise<AgentHealth> {
    const { body } = await this.transport.call<AgentHealth>('GET', '/v1/agent/health', { okStatuses: [200, 503] });
    return body;
  }

  // Jobs ---------------------------------------------------------------------

  async listJobs(): Promise<JobView[]> {
    return (await this.transport.json<NomadJobListStub[]>('GET', '/v1/jobs')).map(decodeJobListStub);
  }

  async getJob(id: string): Promise<JobView> {
    return decodeJob(await this.transport.json<NomadJobWithStatus>('GET', `/v1/job/${enc(id)}`));
  }

  /** The job's latest deployment (GET /v1/job/:id/deployment, Nomad's Deployment); undefined when it has none. */
  async jobDeployment(id: string): Promise<DeploymentView | undefined> {
    const d = await this.transport.json<NomadDeployment | null>('GET', `/v1/job/${enc(id)}/deployment`);
    return d ? decodeDeployment(d) : undefined;
  }

  jobAllocations(id: string): Promise<AllocView[]> {
    return this.transport.json('GET', `/v1/job/${enc(id)}/allocations`);
  }

  /**
   * Registers a job in Nomad's JSON job format (jobToNomadJson of a parsed jobspec): POST /v1/jobs with Nomad's
   * JobRegisterRequest; `queue` places allocs that must wait for a held write claim (`?queue=true`, csiplug's own).
   */
  async runJob(job: NomadJob, options: RunJobOptions = {}): Promise<RunJobResult> {
    const path = `/v1/jobs${options.queue ? '?queue=true' : ''}`;
    return decodeJobRegisterResponse(await this.transport.json<NomadJobRegisterResponse>('POST', path, { body: { Job: job } }));
  }

  /** What running the job (in Nomad's JSON job format) would change (POST /v1/job/:id/plan); nothing is done. */
  async planJob(job: NomadJob): Promise<JobPlan> {
    if (typeof job.ID !== 'string' || job.ID === '') throw new ValidationError('the job has no ID; give it one, like "web"', 'ID');
    const body = { Job: job, Diff: true };
    return decodeJobPlanResponse(await this.transport.json<NomadJobPlanResponse>('POST', `/v1/job/${enc(job.ID)}/plan`, { body }));
  }

  /** Nomad's Parse Job (POST /v1/jobs/parse): the agent reads the HCL and answers the job in Nomad's JSON job format. */
  parseJob(jobHCL: string): Promise<NomadJob> {
    return this.transport.json('POST', '/v1/jobs/parse', { body: { JobHCL: jobHCL, Canonicalize: true } });
  }

  async stopJob(id: string, options: { purge?: boolean } = {}): Promise<JobView> {
    const path = `/v1/job/${enc(id)}${query({ purge: options.purge })}`;
    return decodeJobDeregisterResponse(await this.transport.json<NomadJobDeregisterResponse>('DELETE', path));
  }

  // Allocs -------------------------------------------------------------------

  listAllocs(): Promise<AllocView[]> {
    return this.transport.json('GET', '/v1/allocations');
  }

  getAlloc(id: string): Promise<AllocView> {
    return this.transport.json('GET', `/v1/allocation/${enc(id)}`);
  }

  /** Part of a task's log as JSON: at most `limit` bytes (the agent's default 64 KiB, its maximum 4 MiB). */
  allocLogs(id: string, task: string, options: AllocLogsQuery = {}): Promise<AllocLogs> {
    return this.transport.json('GET', logsPath(id, task, options, false));
  }

  /** A task's log as raw bytes, any amount, streamed as the agent reads the file (no `limit`: to its end). */
  async allocLogStream(id: string, task: string, options: AllocLogsQuery & { signal?: AbortSignal } = {}): Promise<AllocLogStream> {
    const res = await this.transport.stream('GET', logsPath(id, task, options, true), options.signal);
    return {
      offset: Number(res.headers[LOG_OFFSET_HEADER.toLowerCase()] ?? 0),
      size: Number(res.headers[LOG_SIZE_HEADER.toLowerCase()] ?? 0),
      stream: res,
    };
  }

  /** This node: drivers, the plugins' fingerprinted facts. */
  node(): Promise<NodeView> {
    return this.transport.json('GET', '/v1/node/self');
  }

  /** This node, or every node of its cluster. */
  listNodes(): Promise<NodeList> {
    return this.transport.json('GET', '/v1/nodes');
  }

  /** `node purge`: a down node of the cluster gone for good. */
  purgeNode(name: string): Promise<NodePurgeResult> {
    return this.transport.json('PUT', `/v1/node/${encodeURIComponent(name)}/purge`, { body: {} });
  }

  // Plugins ------------------------------------------------------------------

  listPlugins(): Promise<PluginView[]> {
    return this.transport.json('GET', '/v1/plugins?type=csi');
  }

  getPlugin(id: string): Promise<PluginView> {
    return this.transport.json('GET', `/v1/plugin/csi/${enc(id)}`);
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
      res = await this.transport.stream('GET', `/v1/event/stream${topics}`, options.signal);
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
}

function logsPath(id: string, task: string, options: AllocLogsQuery, plain: boolean): string {
  return `/v1/allocation/${enc(id)}/logs/${enc(task)}${query({ stream: options.stream, origin: options.origin, offset: options.offset, limit: options.limit, plain })}`;
}
