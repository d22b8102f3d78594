// Helpers for tests of the HTTP API: documents, a request with nothing done
// for us, and a server on 127.0.0.1:0 over any AgentService.
import { MemoryLogger } from '@csiplug/core';
import type { NomadJob, VolumeSpecDocument } from '@csiplug/jobspec';
import * as http from 'http';
import type { AgentService } from '..';
import { ERROR_CODE_HEADER, HttpApi, type HttpApiOptions } from '..';
import { volumeDocumentToNomad, type NomadCSIVolumeWriteRequest } from '../wire/volume-wire';

/**
 * A job the API accepts, in Nomad's JSON job format as a Nomad client sends
 * one (the fields it sets; the reader fills in the rest): job `id`, one group
 * `app` of `count` claiming vol1. `extra` joins the group's fields, unknown
 * ones included (a test of the API's refusals sends them).
 */
export function nomadJob(id = 'web', count = 1, extra: Record<string, unknown> = {}): NomadJob {
  const group = {
    Name: 'app',
    Count: count,
    Volumes: { data: { Type: 'csi', Source: 'vol1', AccessMode: 'single-node-writer' } },
    Tasks: [
      {
        Name: 'main',
        Driver: 'raw_exec',
        Config: { command: '/bin/sleep', args: ['100'] },
        VolumeMounts: [{ Volume: 'data', Destination: 'data' }],
      },
    ],
  };
  return { ID: id, TaskGroups: [{ ...group, ...extra }] } as unknown as NomadJob;
}

/** A volume spec the API accepts, registered by the hostpath plugin; `extra` joins (or replaces) its fields, as nomadJob's does. */
export function volumeDoc(id = 'vol1', extra: Record<string, unknown> = {}): VolumeSpecDocument {
  const spec: VolumeSpecDocument = {
    id,
    type: 'csi',
    plugin_id: 'hostpath',
    external_id: `ext-${id}`,
    capability: [{ access_mode: 'single-node-writer', attachment_mode: 'file-system' }],
  };
  return { ...spec, ...extra };
}

/** volumeDoc's volume as a register or create body on Nomad's wire (CSIVolumeRegisterRequest), as a raw request sends it. */
export function volumeBody(id = 'vol1', extra: Record<string, unknown> = {}): NomadCSIVolumeWriteRequest {
  return { Volumes: [volumeDocumentToNomad(volumeDoc(id, extra))] };
}

/** A JSON object (or array) the API answered, its fields unchecked: a test asserts what it reads. */
export type JsonAnswer = { readonly [field: string]: unknown };

interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  /** The body as JSON when it is an object or array (every answer of the API's); undefined when it is not JSON. */
  json: JsonAnswer | undefined;
  /** An error answer's message: its body, plain text as Nomad answers; undefined on a success or a body that is not plain text. */
  error: string | undefined;
  /** An error answer's code (the X-Csiplug-Error-Code header). */
  code: string | undefined;
}

/** A request with nothing done for us: any body, any headers. */
export function raw(
  url: string,
  method: string,
  path: string,
  options: {
    body?: string | Buffer;
    headers?: http.OutgoingHttpHeaders;
    chunked?: boolean;
    agent?: http.Agent;
    /** Send no Content-Type on a write, as Nomad's Go client does (else application/json unless the headers give one). */
    noContentType?: boolean;
  } = {},
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const headers = { ...(options.headers ?? {}) };
    // What the API's own client sends; a test that means otherwise says so in its headers.
    const writes = options.body !== undefined || ['POST', 'PUT', 'PATCH'].includes(method);
    if (writes && !options.noContentType && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type'))
      headers['Content-Type'] = 'application/json';
    if (options.body !== undefined && !options.chunked) headers['Content-Length'] = Buffer.byteLength(options.body);
    const req = http.request(new URL(path, url), { method, headers, ...(options.agent ? { agent: options.agent } : {}) }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: JsonAnswer | undefined;
        try {
          const parsed: unknown = JSON.parse(text);
          json = typeof parsed === 'object' && parsed !== null ? (parsed as JsonAnswer) : undefined;
        } catch {
          json = undefined;
        }
        const plain = /^text\/plain\b/.test(res.headers['content-type'] ?? '');
        const error = res.statusCode! >= 400 && plain ? text : undefined;
        const code = res.headers[ERROR_CODE_HEADER.toLowerCase()];
        resolve({ status: res.statusCode!, headers: res.headers, text, json, error, code: typeof code === 'string' ? code : undefined });
      });
    });
    req.on('error', (err) => {
      // An early answer (oversized body) may be followed by a reset while we still write.
      if (!(req as unknown as { res?: unknown }).res) reject(err);
    });
    if (options.body !== undefined && options.chunked) {
      const buf = Buffer.from(options.body);
      const step = 64 * 1024;
      for (let i = 0; i < buf.length; i += step) req.write(buf.subarray(i, i + step));
      req.end();
    } else {
      req.end(options.body);
    }
  });
}

export async function startApi(
  fake: AgentService,
  options: Partial<HttpApiOptions> = {},
): Promise<{ api: HttpApi; url: string; logger: MemoryLogger }> {
  const logger = new MemoryLogger();
  const api = new HttpApi(fake, { bindAddr: '127.0.0.1', port: 0, logger, ...options });
  const { address, port } = await api.listen();
  return { api, url: `http://${address}:${port}`, logger };
}
