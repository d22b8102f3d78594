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
import { type AllocLogs, type AllocLogsQuery, DEFAULT_LOG_LIMIT, LOG_OFFSET_HEADER, LOG_SIZE_HEADER, MAX_JSON_LOG_LIMIT } from './protocol';
import type {
  AgentEvent,
  AgentHealth,
  AllocView,
  DeploymentView,
  JobListView,
  JobPlan,
  JobStopView,
  JobView,
  NodeList,
  NodePurgeResult,
  NodeView,
  PluginView,
  RunJobOptions,
  RunJobResult,
} from './service';
import { VolumeApiCalls } from './volume-api-calls';
import { type NomadAgentHealthResponse, decodeAgentHealth } from './wire/agent-wire';
import { type NomadEvents, decodeEvents, topicQueryValues } from './wire/event-wire';
import {
  type NomadNode,
  type NomadNodeListStub,
  type NomadNodePurgeResponse,
  decodeNode,
  decodeNodeList,
  decodeNodePurge,
} from './wire/node-wire';
import { type NomadCSIPlugin, type NomadCSIPluginListStub, decodePlugin } from './wire/plugin-wire';
import {
  type NomadAllocation,
  type NomadAllocationListStub,
  type AllocStubView,
  decodeAlloc,
  decodeAllocStub,
  decodeLogFrames,
  utf8Window,
} from './wire/alloc-wire';
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
  /** The agent's health; an unhealthy agent answers 500 with the same body (as Nomad's), returned here too. */
  async health(): Promise<AgentHealth> {
    const { body } = await this.transport.call<NomadAgentHealthResponse>('GET', '/v1/agent/health', { okStatuses: [200, 500] });
    return decodeAgentHealth(body);
  }

  // Jobs ---------------------------------------------------------------------

  /** The jobs without their specs (Nomad's JobListStub), each entry decoded on its own. */
  async listJobs(): Promise<JobListView[]> {
    const stubs = await this.transport.json<NomadJobListStub[]>('GET', '/v1/jobs');
    if (!Array.isArray(stubs)) throw badAnswer(this.address, 'the job list (GET /v1/jobs)', 'it is not a list');
    return stubs.map((stub, i) => decodeAnswer(this.address, `entry ${i} of the job list (GET /v1/jobs)`, () => decodeJobListStub(stub)));
  }

  async getJob(id: string): Promise<JobView> {
    const wire = await this.transport.json<NomadJobWithStatus>('GET', `/v1/job/${enc(id)}`);
    return decodeAnswer(this.address, `job "${id}" (GET /v1/job/${id})`, () => decodeJob(wire));
  }

  /** The job's latest deployment (GET /v1/job/:id/deployment, Nomad's Deployment); undefined when it has none. */
  async jobDeployment(id: string): Promise<DeploymentView | undefined> {
    const d = await this.transport.json<NomadDeployment | null>('GET', `/v1/job/${enc(id)}/deployment`);
    return d ? decodeAnswer(this.address, `job "${id}"'s deployment (GET /v1/job/${id}/deployment)`, () => decodeDeployment(d)) : undefined;
  }

  /** The job's allocs (Nomad's AllocationListStub): without their job (getAlloc or getJob has it). */
  async jobAllocations(id: string): Promise<AllocStubView[]> {
    const path = `/v1/job/${enc(id)}/allocations`;
    return (await this.transport.json<NomadAllocationListStub[]>('GET', path)).map((w) => this.decoded(path, w, decodeAllocStub));
  }

  /**
   * Registers a job in Nomad's JSON job format (jobToNomadJson of a parsed jobspec): POST /v1/jobs with Nomad's
   * JobRegisterRequest; `queue` places allocs that must wait for a held write claim (`?queue=true`, csiplug's own).
   */
  async runJob(job: NomadJob, options: RunJobOptions = {}): Promise<RunJobResult> {
    const path = `/v1/jobs${options.queue ? '?queue=true' : ''}`;
    const wire = await this.transport.json<NomadJobRegisterResponse>('POST', path, { body: { Job: job } });
    return decodeAnswer(this.address, `the run of job "${String(job.ID)}" (POST /v1/jobs)`, () => decodeJobRegisterResponse(wire));
  }

  /** What running the job (in Nomad's JSON job format) would change (POST /v1/job/:id/plan); nothing is done. */
  async planJob(job: NomadJob): Promise<JobPlan> {
    if (typeof job.ID !== 'string' || job.ID === '') throw new ValidationError('the job has no ID; give it one, like "web"', 'ID');
    const body = { Job: job, Diff: true };
    const wire = await this.transport.json<NomadJobPlanResponse>('POST', `/v1/job/${enc(job.ID)}/plan`, { body });
    return decodeAnswer(this.address, `the plan of job "${job.ID}" (POST /v1/job/${job.ID}/plan)`, () => decodeJobPlanResponse(wire));
  }

  /** Nomad's Parse Job (POST /v1/jobs/parse): the agent reads the HCL and answers the job in Nomad's JSON job format. */
  parseJob(jobHCL: string): Promise<NomadJob> {
    return this.transport.json('POST', '/v1/jobs/parse', { body: { JobHCL: jobHCL, Canonicalize: true } });
  }

  /**
   * Stops the job (DELETE /v1/job/:id). A job the agent does not have is a NotFound ApiError, as before Nomad's
   * deregister answered it with success; the stop done, what the answer says of it is read without failing the call.
   */
  async stopJob(id: string, options: { purge?: boolean } = {}): Promise<JobStopView> {
    const path = `/v1/job/${enc(id)}${query({ purge: options.purge })}`;
    const wire = await this.transport.json<NomadJobDeregisterResponse>('DELETE', path);
    let stopped: JobStopView | undefined;
    try {
      stopped = decodeJobDeregisterResponse(wire);
    } catch (err) {
      // The stop happened: an answer this client cannot read does not undo it, and is not reported as a failed stop.
      return { id, name: id, status: 'dead', version: 0, allocs: [], answerUnread: (err as Error).message };
    }
    if (!stopped) throw ApiError.notFound(`job "${id}" not found: the agent has no such job, so nothing was stopped`);
    return stopped;
  }

  // Allocs -------------------------------------------------------------------

  /** Every alloc of this node (Nomad's AllocationListStub): without their job, which a list does not carry (getAlloc has it). */
  async listAllocs(): Promise<AllocStubView[]> {
    return (await this.transport.json<NomadAllocationListStub[]>('GET', '/v1/allocations')).map((w) =>
      this.decoded('/v1/allocations', w, decodeAllocStub),
    );
  }

  /** One alloc (Nomad's Allocation). */
  async getAlloc(id: string): Promise<AllocView> {
    const path = `/v1/allocation/${enc(id)}`;
    return this.decoded(path, await this.transport.json<NomadAllocation>('GET', path), decodeAlloc);
  }

  /** An answer's decode; one it cannot read is the agent's bad answer (BadResponse), never a TypeError out of the decoder. */
  private decoded<W, V>(path: string, wire: W, decode: (w: W) => V): V {
    try {
      return decode(wire);
    } catch (err) {
      throw new ApiError(
        200,
        ApiErrorCode.BadResponse,
        `the answer of the agent at ${this.address} to GET ${path} is not what a csiplug agent of this version sends (${(err as Error).message}); is it a csiplug agent of this version?`,
        { cause: err },
      );
    }
  }

  /**
   * Part of a task's log as text: at most `limit` bytes (default 64 KiB, at most 4 MiB), read from Nomad's
   * StreamFrames; a character cut by the range is left to the next read (utf8Window).
   */
  async allocLogs(id: string, task: string, options: AllocLogsQuery = {}): Promise<AllocLogs> {
    const limit = options.limit ?? DEFAULT_LOG_LIMIT;
    if (limit > MAX_JSON_LOG_LIMIT) {
      throw new ApiError(
        400,
        ApiErrorCode.Invalid,
        `a log read as text takes at most ${MAX_JSON_LOG_LIMIT} bytes (${MAX_JSON_LOG_LIMIT / 1024 / 1024} MiB), not ${limit}; ask for less, or stream any amount as raw bytes`,
      );
    }
    const stream = options.stream ?? 'stdout';
    const res = await this.transport.stream('GET', logsPath(id, task, { ...options, limit }, false), undefined);
    const { start, size } = logHeaders(res);
    let text = '';
    try {
      res.setEncoding('utf8');
      for await (const chunk of res as AsyncIterable<string>) text += chunk;
    } catch (err) {
      throw new ApiError(0, ApiErrorCode.Connect, `the log of task "${task}" from ${this.address} broke off: ${(err as Error).message}`, {
        cause: err,
      });
    }
    let bytes: Buffer;
    try {
      bytes = decodeLogFrames(text);
    } catch {
      throw new ApiError(
        200,
        ApiErrorCode.BadResponse,
        `the log of task "${task}" from the agent at ${this.address} is not Nomad's log frames (one JSON object a line); is it a csiplug agent of this version?`,
      );
    }
    const { skip, keep } = utf8Window(bytes, start > 0, start + bytes.length < size);
    const offset = start + skip;
    return { allocId: id, task, stream, offset, nextOffset: offset + keep, size, data: bytes.subarray(skip, skip + keep).toString('utf8') };
  }

  /** A task's log as raw bytes (plain=true), any amount, streamed as the agent reads the file (no `limit`: to its end). */
  async allocLogStream(id: string, task: string, options: AllocLogsQuery & { signal?: AbortSignal } = {}): Promise<AllocLogStream> {
    const res = await this.transport.stream('GET', logsPath(id, task, options, true), options.signal);
    const { start, size } = logHeaders(res);
    return { offset: start, size, stream: res };
  }

  /** This node: drivers, the plugins' fingerprinted facts. */
  async node(): Promise<NodeView> {
    return decodeNode(await this.transport.json<NomadNode>('GET', '/v1/node/self'));
  }

  /** This node, or every node of its cluster. */
  async listNodes(): Promise<NodeList> {
    return decodeNodeList(await this.transport.json<NomadNodeListStub[]>('GET', '/v1/nodes'));
  }

  /** `node purge`: a down node of the cluster gone for good (by its name or ID). */
  async purgeNode(name: string): Promise<NodePurgeResult> {
    return decodeNodePurge(await this.transport.json<NomadNodePurgeResponse>('PUT', `/v1/node/${encodeURIComponent(name)}/purge`));
  }

  // Plugins ------------------------------------------------------------------

  /** Every plugin in full: Nomad's list has stubs, so each is then read on its own (one gone meanwhile is left out). */
  async listPlugins(): Promise<PluginView[]> {
    const stubs = await this.transport.json<NomadCSIPluginListStub[]>('GET', '/v1/plugins?type=csi');
    const plugins = await Promise.all(
      stubs.map((stub) =>
        this.getPlugin(stub.ID).catch((err: unknown) => {
          if (err instanceof ApiError && err.status === 404) return undefined;
          throw err;
        }),
      ),
    );
    return plugins.filter((p): p is PluginView => p !== undefined);
  }

  async getPlugin(id: string): Promise<PluginView> {
    return decodePlugin(await this.transport.json<NomadCSIPlugin>('GET', `/v1/plugin/csi/${enc(id)}`));
  }

  // Events -------------------------------------------------------------------

  /**
   * The event stream, one AgentEvent at a time (heartbeats skipped). Ends
   * when the agent closes it, when `signal` aborts, or when the loop breaks.
   */
  async *events(options: EventStreamOptions = {}): AsyncGenerator<AgentEvent, void, undefined> {
    if (options.signal?.aborted) return;
    const topics = options.topics?.length
      ? `?${topicQueryValues(options.topics)
          .map((t) => `topic=${enc(t)}`)
          .join('&')}`
      : '';
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
          yield* decodeEvents(JSON.parse(line) as NomadEvents);
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

/** An answer this client cannot read: said as the agent's (BadResponse), naming what and where. */
function badAnswer(address: string, what: string, why: string, cause?: unknown): ApiError {
  return new ApiError(
    200,
    ApiErrorCode.BadResponse,
    `the agent at ${address} answered ${what} in a shape this client cannot read (${why}); is the agent a csiplug of this version?`,
    { cause },
  );
}

/** `decode()`, its failure an ApiError (BadResponse) rather than a bare TypeError or ValidationError. */
function decodeAnswer<T>(address: string, what: string, decode: () => T): T {
  try {
    return decode();
  } catch (err) {
    throw badAnswer(address, what, (err as Error).message, err);
  }
}

/** Nomad's fs logs route; `limit` is csiplug's own. */
function logsPath(id: string, task: string, options: AllocLogsQuery, plain: boolean): string {
  const params = { task, type: options.stream ?? 'stdout', origin: options.origin, offset: options.offset, limit: options.limit, plain };
  return `/v1/client/fs/logs/${enc(id)}${query(params)}`;
}

/** csiplug's headers on a log answer: where its bytes start, and the file's size when read. */
function logHeaders(res: http.IncomingMessage): { start: number; size: number } {
  return {
    start: Number(res.headers[LOG_OFFSET_HEADER.toLowerCase()] ?? 0),
    size: Number(res.headers[LOG_SIZE_HEADER.toLowerCase()] ?? 0),
  };
}
