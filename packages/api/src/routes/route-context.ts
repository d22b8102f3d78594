// What every route handler gets and gives back: the request, its matched
// path parameters and query, its body read once as JSON, and the reply (a
// JSON body, or nothing when the handler wrote the response itself). Also
// the lookups most routes start with, each a 404 naming what is missing.
// The server (http-api.ts) builds the context; the routes files fill the table.
import type * as http from 'http';
import { ApiError } from '../api-error';
import type { RouteOptions, RouteParams, Router } from '../router';
import type { AgentService, AllocView, JobView, VolumeView } from '../service';

/** What a route handler answers: a JSON body, or nothing when it wrote the response itself. */
export type Reply = { status?: number; body: unknown } | undefined;

export interface RequestContext {
  req: http.IncomingMessage;
  res: http.ServerResponse;
  /** Aborted when the response is done or the client's connection is gone; streams end on it. */
  signal: AbortSignal;
  params: RouteParams;
  query: URLSearchParams;
  /** The body parsed as JSON (read once, under the size limit). */
  json(): Promise<unknown>;
}

export type Handler = (ctx: RequestContext) => Promise<Reply> | Reply;

export type RouteTable = Router<Handler>;

/** A read whose handler calls a plugin over gRPC (NodeGetVolumeStats, ListVolumes, ListSnapshots): a blocking query never holds it, so events never turn into plugin calls. */
export const CALLS_PLUGIN: RouteOptions = Object.freeze({ answersAtOnce: true });
/** A read whose handler writes its own response (a stream, raw bytes, text): answered once, never held. */
export const WRITES_OWN_RESPONSE: RouteOptions = Object.freeze({ answersAtOnce: true });
/** A read of the cluster's etcd (its node list): held, each agent event would be an etcd read, and other nodes' changes raise no event here. */
export const READS_CLUSTER: RouteOptions = Object.freeze({ answersAtOnce: true });

/** Adds one handler under several methods (Nomad takes PUT and POST alike for its writes). */
export function addEach(table: RouteTable, methods: readonly string[], pattern: string, handler: Handler): void {
  for (const method of methods) table.add(method, pattern, handler);
}

/** The job, alloc or volume a path names, or a 404 saying which is missing. */
export class Lookups {
  constructor(private readonly service: AgentService) {}

  job(id: string): JobView {
    const job = this.service.getJob(id);
    if (!job) throw ApiError.notFound(`job "${id}" not found`);
    return job;
  }

  alloc(id: string): AllocView {
    const alloc = this.service.getAlloc(id);
    if (!alloc) throw ApiError.notFound(`alloc "${id}" not found`);
    return alloc;
  }

  volume(id: string): VolumeView {
    const volume = this.service.getVolume(id);
    if (!volume) throw ApiError.notFound(`volume "${id}" not found`);
    return volume;
  }
}
