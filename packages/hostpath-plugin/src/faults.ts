// Fault injection for the hostpath plugin, for the agent's fault suite
// (packages/agent/test/chaos, bench/chaos): the test-only switches that make
// it a faulty plugin on purpose. Nothing here runs unless a switch is set.
//
// - Start faults (read once, at start): never create the socket; create one
//   that does not speak gRPC; crash at start.
// - RPC faults, per RPC name: hang until the caller gives up; answer garbage
//   (a gRPC response whose message is not valid protobuf, sent as real HTTP/2
//   frames by a small proxy in front of the gRPC server); answer only after a
//   delay (the work is still done, after the caller may have given up); crash
//   when called; crash after N calls of any RPC; answer with the volume
//   condition abnormal (NodeGetVolumeStats, ControllerGetVolume) while the
//   volume is healthy, as a plugin that misjudges its mounts does
//   (csi-driver-host-path looks only under kubelet's pod directories);
//   answer UNIMPLEMENTED to an RPC the plugin advertises (democratic-csi's
//   local-hostpath does so for ListSnapshots).
// - A fault file (JSON: the RpcFaults fields, and `startFault`) whose RPC
//   faults replace those given as flags whenever it changes, so a test can
//   turn faults on and off in a running plugin; its start fault is read at
//   start, so it applies to the plugin the restart policy starts next.
// - Controller publish: the controller also advertises PUBLISH_UNPUBLISH_VOLUME
//   and keeps its attachments in <state-dir>/attachments.json, so the suite
//   exercises the catalog's controller steps and can count attachments left.
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as http2 from 'node:http2';
import * as net from 'node:net';
import * as path from 'node:path';
import { type Logger, ValidationError, errorMessage } from '@csiplug/core';
import {
  CSI_SERVICES,
  type CsiCallContext,
  type CsiServerHandlers,
  type CsiServiceKey,
  csiPackageDefinition,
  csiStatus,
  parseEndpoint,
  removeStaleSocket,
} from '@csiplug/csi';
import { HostPathPluginError } from './errors';
import type { VolumeStore } from './volume-store';

/** What the plugin does when it starts. */
export type StartFault = 'none' | 'no-socket' | 'not-grpc' | 'crash';
export const START_FAULTS: readonly StartFault[] = ['none', 'no-socket', 'not-grpc', 'crash'];

/** Faults of single RPCs (by name, e.g. "NodeStageVolume"); each list may be empty. */
export interface RpcFaults {
  /** Never answer until the caller cancels or its deadline passes. */
  hangRpcs: string[];
  /** Answer with a message the caller cannot decode (status OK, invalid protobuf). */
  garbageRpcs: string[];
  /** Answer `slowMs` late; the work is done even if the caller gave up meanwhile. */
  slowRpcs: string[];
  slowMs: number;
  /** Die by SIGKILL when called (the socket is left behind). */
  crashOnRpcs: string[];
  /** Serve this many calls (of any RPC), then die by SIGKILL on the next. 0 = never. */
  crashAfter: number;
  /** Answer as usual, but with the volume condition abnormal (whatever it is). */
  abnormalRpcs: string[];
  /** Answer UNIMPLEMENTED, whatever the plugin advertises (democratic-csi's local-hostpath does so for ListSnapshots). */
  unimplementedRpcs: string[];
}

/** What startPlugin throws after a crash on purpose when its `crash` hook (a test's) returns instead of killing the process. */
export class InjectedCrashError extends HostPathPluginError {
  constructor(message: string) {
    super('EINJECTED_CRASH', message);
  }
}

export const NO_RPC_FAULTS: Readonly<RpcFaults> = Object.freeze({
  hangRpcs: [],
  garbageRpcs: [],
  slowRpcs: [],
  slowMs: 0,
  crashOnRpcs: [],
  crashAfter: 0,
  abnormalRpcs: [],
  unimplementedRpcs: [],
});

const LIST_FIELDS = ['hangRpcs', 'garbageRpcs', 'slowRpcs', 'crashOnRpcs', 'abnormalRpcs', 'unimplementedRpcs'] as const;
const NUMBER_FIELDS = ['slowMs', 'crashAfter'] as const;
/** The fault file's field read only at start. */
const START_FIELD = 'startFault';

/** Every RPC name of the three CSI services. */
export function csiRpcNames(): string[] {
  const def = csiPackageDefinition();
  const names = new Set<string>();
  for (const svc of Object.values(CSI_SERVICES)) for (const rpc of Object.keys(def[svc] as object)) names.add(rpc);
  return [...names].sort();
}

/** Refuses a name that is no CSI RPC: a typo in a fault must not make a fault test pass without a fault. */
export function checkRpcNames(names: readonly string[], what: string): void {
  const known = csiRpcNames();
  const bad = names.filter((n) => !known.includes(n));
  if (bad.length)
    throw new ValidationError(`${what}: ${bad.map((b) => JSON.stringify(b)).join(', ')} is no CSI RPC; known: ${known.join(', ')}`, what);
}

/**
 * Reads a fault file's text: a JSON object with any of the RpcFaults fields
 * (missing ones are off). Unknown fields, wrong types and unknown RPC names
 * are refused with the file named.
 */
export function parseFaultFile(text: string, file: string): RpcFaults {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new ValidationError(`fault file ${file}: not JSON: ${errorMessage(err)}`, file);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc))
    throw new ValidationError(`fault file ${file}: must hold a JSON object`, file);
  const known: readonly string[] = [...LIST_FIELDS, ...NUMBER_FIELDS, START_FIELD];
  const unknown = Object.keys(doc).filter((k) => !known.includes(k));
  if (unknown.length)
    throw new ValidationError(`fault file ${file}: unknown field(s) ${unknown.join(', ')}; known: ${known.join(', ')}`, file);
  const out: RpcFaults = {
    ...NO_RPC_FAULTS,
    hangRpcs: [],
    garbageRpcs: [],
    slowRpcs: [],
    crashOnRpcs: [],
    abnormalRpcs: [],
    unimplementedRpcs: [],
  };
  const fields = doc as Record<string, unknown>;
  for (const key of LIST_FIELDS) {
    const v = fields[key];
    if (v === undefined) continue;
    if (!Array.isArray(v) || v.some((x) => typeof x !== 'string'))
      throw new ValidationError(`fault file ${file}: ${key} must be a list of RPC names`, file);
    checkRpcNames(v as string[], `fault file ${file}: ${key}`);
    out[key] = [...(v as string[])];
  }
  for (const key of NUMBER_FIELDS) {
    const v = fields[key];
    if (v === undefined) continue;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0)
      throw new ValidationError(`fault file ${file}: ${key} must be a non-negative integer`, file);
    out[key] = v;
  }
  const start = fields[START_FIELD];
  if (start !== undefined && !START_FAULTS.includes(start as StartFault))
    throw new ValidationError(`fault file ${file}: ${START_FIELD} must be one of ${START_FAULTS.join(', ')}`, file);
  return out;
}

/**
 * The start fault a fault file asks for (undefined when the file is absent or
 * names none). A file that cannot be read or is refused throws, naming it:
 * a plugin told to be faulty must not start healthy by mistake.
 */
export function readStartFault(file: string): StartFault | undefined {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new ValidationError(`fault file ${file} cannot be read: ${errorMessage(err)}`, file);
  }
  parseFaultFile(text, file);
  return (JSON.parse(text) as { startFault?: StartFault }).startFault;
}

/**
 * The RPC faults in force: those given at start, replaced by the fault
 * file's whenever the file exists (read again each time it changes). A file
 * that cannot be read or is refused keeps the faults of the last good read
 * and is logged once per change.
 */
export class FaultSource {
  private fileFaults: RpcFaults | undefined;
  private seen = '';

  constructor(
    private readonly given: RpcFaults,
    private readonly file: string | undefined,
    private readonly logger: Logger,
  ) {}

  /** Whether a fault file is watched (faults may change while running). */
  get dynamic(): boolean {
    return this.file !== undefined;
  }

  current(): RpcFaults {
    if (!this.file) return this.given;
    let stamp: string;
    try {
      const st = fs.statSync(this.file);
      stamp = `${st.mtimeMs}:${st.size}:${st.ino}`;
    } catch {
      stamp = 'absent';
    }
    if (stamp !== this.seen) {
      this.seen = stamp;
      if (stamp === 'absent') {
        this.fileFaults = undefined;
      } else {
        try {
          this.fileFaults = parseFaultFile(fs.readFileSync(this.file, 'utf8'), this.file);
          this.logger.warn('fault file read (fault switch)', { file: this.file, faults: this.fileFaults });
        } catch (err) {
          this.logger.error('fault file refused; keeping the faults in force', { file: this.file, error: errorMessage(err) });
        }
      }
    }
    return this.fileFaults ?? this.given;
  }
}

export interface FaultOptions {
  logger: Logger;
  /** Dies on purpose (the CLI: SIGKILL). */
  crash: () => void;
}

type AnyHandler = (req: unknown, ctx: CsiCallContext) => unknown;

/**
 * Wraps every RPC of the services the plugin serves with the RPC faults in
 * force at each call. A service the plugin does not serve stays unserved;
 * an RPC it has no handler for still answers UNIMPLEMENTED (after its fault).
 */
export function withFaults(handlers: CsiServerHandlers, source: FaultSource, options: FaultOptions): CsiServerHandlers {
  const { logger, crash } = options;
  let calls = 0;
  const wrap =
    (rpc: string, handler: AnyHandler | undefined): AnyHandler =>
    async (req, ctx) => {
      const faults = source.current();
      calls++;
      if ((faults.crashAfter > 0 && calls > faults.crashAfter) || faults.crashOnRpcs.includes(rpc)) {
        logger.warn('crashing on purpose (fault switch)', { rpc, calls });
        crash();
        throw csiStatus.unavailable(`${rpc}: the plugin crashed on purpose (fault switch)`);
      }
      if (faults.hangRpcs.includes(rpc)) {
        // Said, so a test knows the call reached the plugin and is held here.
        logger.warn('hanging on purpose until the caller gives up (fault switch)', { rpc });
        return new Promise((_resolve, reject) => {
          if (ctx.signal.aborted) reject(csiStatus.aborted(`${rpc} was hung on purpose (fault switch)`));
          ctx.signal.addEventListener('abort', () => reject(csiStatus.aborted(`${rpc} was hung on purpose (fault switch)`)), {
            once: true,
          });
        });
      }
      if (faults.slowRpcs.includes(rpc) && faults.slowMs > 0) {
        logger.warn('answering late on purpose (fault switch)', { rpc, ms: faults.slowMs });
        // Not cut short by the caller: a slow plugin does its work after the caller gave up.
        await new Promise((r) => setTimeout(r, faults.slowMs));
      }
      if (!handler) throw csiStatus.unimplemented(`${rpc} is not implemented by this plugin`);
      if (faults.unimplementedRpcs.includes(rpc)) {
        logger.warn('answering UNIMPLEMENTED on purpose (fault switch)', { rpc });
        throw csiStatus.unimplemented(`${rpc} is not implemented by this plugin (fault switch)`);
      }
      const answer = await handler(req, ctx);
      if (faults.abnormalRpcs.includes(rpc) && typeof answer === 'object' && answer !== null) {
        logger.warn('reporting the volume condition abnormal on purpose (fault switch)', { rpc });
        const volumeCondition = {
          abnormal: true,
          message: "The volume isn't mounted (fault switch: reported abnormal whatever its state)",
        };
        // ControllerGetVolume keeps it in its status (a field at the top would not be sent: no such field in its response).
        if (rpc === 'ControllerGetVolume')
          return { ...answer, status: { ...((answer as { status?: object }).status ?? {}), volumeCondition } };
        return { ...answer, volumeCondition };
      }
      return answer;
    };
  const def = csiPackageDefinition();
  const out: Partial<Record<CsiServiceKey, Record<string, AnyHandler>>> = {};
  for (const svc of Object.keys(CSI_SERVICES) as CsiServiceKey[]) {
    const given = (handlers as unknown as Record<CsiServiceKey, Record<string, AnyHandler | undefined> | undefined>)[svc];
    if (!given) continue;
    const wrapped: Record<string, AnyHandler> = {};
    for (const rpc of Object.keys(def[CSI_SERVICES[svc]] as object)) wrapped[rpc] = wrap(rpc, given[rpc]);
    out[svc] = wrapped;
  }
  return out as unknown as CsiServerHandlers;
}

// ---- controller publish -------------------------------------------------------

/** The controller's attachments (volume id → node ids), kept in one JSON file written atomically. */
export class AttachmentStore {
  readonly file: string;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(stateDir: string) {
    this.file = path.join(stateDir, 'attachments.json');
  }

  read(): Record<string, string[]> {
    try {
      return JSON.parse(fs.readFileSync(this.file, 'utf8')) as Record<string, string[]>;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
      throw new ValidationError(`attachments file ${this.file} cannot be read: ${errorMessage(err)}`, this.file);
    }
  }

  /** Applies `change` to the attachments and writes them (temp file, fsync, rename), one change at a time. */
  update(change: (current: Record<string, string[]>) => void): Promise<void> {
    const run = this.queue.then(async () => {
      const current = this.read();
      change(current);
      for (const [k, v] of Object.entries(current)) if (!v.length) delete current[k];
      const tmp = `${this.file}.${process.pid}.tmp`;
      const fh = await fsp.open(tmp, 'w', 0o600);
      try {
        await fh.writeFile(JSON.stringify(current));
        await fh.sync();
      } finally {
        await fh.close();
      }
      await fsp.rename(tmp, this.file);
    });
    this.queue = run.catch(() => undefined);
    return run;
  }
}

/** The publish context ControllerPublishVolume answers with. */
export const ATTACHED_TO_KEY = 'hostpath.csiplug.io/attached-to';

/**
 * Adds ControllerPublishVolume and ControllerUnpublishVolume to a plugin
 * that serves the controller service, and PUBLISH_UNPUBLISH_VOLUME to its
 * capabilities. Publish records (volume, node) and is idempotent; unpublish
 * of anything not recorded succeeds, as the CSI spec allows.
 */
export function withControllerPublish(handlers: CsiServerHandlers, store: VolumeStore, attachments: AttachmentStore): CsiServerHandlers {
  const controller = handlers.controller;
  if (!controller) return handlers;
  const caps = controller.ControllerGetCapabilities;
  return {
    ...handlers,
    controller: {
      ...controller,
      ControllerGetCapabilities: async (req, ctx) => {
        const base = caps ? await caps(req, ctx) : { capabilities: [] };
        return { capabilities: [...(base.capabilities ?? []), { rpc: { type: 'PUBLISH_UNPUBLISH_VOLUME' as const } }] };
      },
      ControllerPublishVolume: async (req) => {
        const rpc = 'ControllerPublishVolume';
        if (!req.volumeId) throw csiStatus.invalidArgument(`${rpc}: volume_id is required`);
        if (!req.nodeId) throw csiStatus.invalidArgument(`${rpc}: node_id is required`);
        if (!req.volumeCapability) throw csiStatus.invalidArgument(`${rpc}: volume_capability is required`);
        if (!(await store.get(req.volumeId))) throw csiStatus.notFound(`${rpc}: volume "${req.volumeId}" does not exist`);
        await attachments.update((a) => {
          const nodes = a[req.volumeId] ?? [];
          if (!nodes.includes(req.nodeId)) nodes.push(req.nodeId);
          a[req.volumeId] = nodes;
        });
        return { publishContext: { [ATTACHED_TO_KEY]: req.nodeId } };
      },
      ControllerUnpublishVolume: async (req) => {
        const rpc = 'ControllerUnpublishVolume';
        if (!req.volumeId) throw csiStatus.invalidArgument(`${rpc}: volume_id is required`);
        // No node id: unpublish from every node, as the CSI spec says.
        await attachments.update((a) => {
          a[req.volumeId] = req.nodeId ? (a[req.volumeId] ?? []).filter((n) => n !== req.nodeId) : [];
        });
        return {};
      },
    },
  };
}

// ---- sockets that are not a working gRPC server --------------------------------

/** What a start fault leaves listening (or not); dispose() stops it and removes its socket. */
export interface FaultyListener {
  dispose(): Promise<void>;
}

/** The socket path of a unix endpoint ("unix:///path" or "/path"). */
function socketPathOf(endpoint: string): string {
  return parseEndpoint(endpoint).socketPath;
}

function listen(server: net.Server, socketPath: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

function closer(server: net.Server, socketPath: string, sockets: Set<net.Socket>): () => Promise<void> {
  let closing: Promise<void> | undefined;
  return () =>
    (closing ??= (async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
      await fsp.rm(socketPath, { force: true });
    })());
}

/** A unix socket that answers every connection with text that is not HTTP/2, then hangs up. */
export async function serveNotGrpc(endpoint: string): Promise<FaultyListener> {
  const socketPath = socketPathOf(endpoint);
  await fsp.mkdir(path.dirname(socketPath), { recursive: true, mode: 0o700 });
  await removeStaleSocket(socketPath);
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
    s.end('HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n\r\nthis is not a gRPC server (hostpath fault switch)\n');
  });
  await listen(server, socketPath);
  return { dispose: closer(server, socketPath, sockets) };
}

/** The bytes of a gRPC message frame whose payload no protobuf message decodes (wire type 7 does not exist). */
export const GARBAGE_MESSAGE = Buffer.concat([Buffer.from([0, 0, 0, 0, 8]), Buffer.from([0x0f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff])]);

function plainHeaders(headers: http2.IncomingHttpHeaders): http2.OutgoingHttpHeaders {
  const out: http2.OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(headers)) if (!k.startsWith(':') && v !== undefined) out[k] = v;
  return out;
}

/**
 * A plain HTTP/2 proxy on `endpoint` in front of the plugin's gRPC server on
 * `innerSocketPath`: every call is passed through, except those `garbage`
 * picks, which are answered at once with status OK and GARBAGE_MESSAGE — a
 * well-formed gRPC response whose message the caller cannot decode.
 */
export async function serveGarbageProxy(
  endpoint: string,
  innerSocketPath: string,
  garbage: (rpc: string) => boolean,
  logger: Logger,
): Promise<FaultyListener> {
  const socketPath = socketPathOf(endpoint);
  await fsp.mkdir(path.dirname(socketPath), { recursive: true, mode: 0o700 });
  await removeStaleSocket(socketPath);
  let upstream: http2.ClientHttp2Session | undefined;
  const session = (): http2.ClientHttp2Session => {
    if (!upstream || upstream.closed || upstream.destroyed) {
      upstream = http2.connect('http://localhost', { createConnection: () => net.connect(innerSocketPath) });
      upstream.on('error', (err) => logger.warn('fault proxy: the inner gRPC server failed', { error: errorMessage(err) }));
    }
    return upstream;
  };
  const server = http2.createServer();
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (s) => {
    sessions.add(s);
    s.on('close', () => sessions.delete(s));
    s.on('error', () => undefined);
  });
  server.on('stream', (stream, headers) => {
    stream.on('error', () => undefined);
    const rpc =
      String(headers[':path'] ?? '')
        .split('/')
        .pop() ?? '';
    if (garbage(rpc)) {
      logger.warn('answering garbage on purpose (fault switch)', { rpc });
      stream.resume();
      const answer = () => {
        if (stream.destroyed || stream.headersSent) return;
        stream.respond({ ':status': 200, 'content-type': 'application/grpc+proto' }, { waitForTrailers: true });
        stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
        stream.end(GARBAGE_MESSAGE);
      };
      if (stream.readableEnded) answer();
      else stream.once('end', answer);
      return;
    }
    let up: http2.ClientHttp2Stream;
    try {
      up = session().request({ ':method': 'POST', ':path': String(headers[':path']), ...plainHeaders(headers) });
    } catch (err) {
      stream.respond(
        {
          ':status': 200,
          'content-type': 'application/grpc+proto',
          'grpc-status': '14',
          'grpc-message': `fault proxy: ${errorMessage(err)}`,
        },
        { endStream: true },
      );
      return;
    }
    let trailers: http2.OutgoingHttpHeaders = { 'grpc-status': '14', 'grpc-message': 'fault proxy: the inner gRPC server sent no status' };
    up.on('response', (h, flags) => {
      if (stream.destroyed) return;
      const endStream = (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) !== 0;
      stream.respond(
        { ':status': Number(h[':status'] ?? 200), ...plainHeaders(h) },
        endStream ? { endStream: true } : { waitForTrailers: true },
      );
      if (!endStream) stream.once('wantTrailers', () => stream.sendTrailers(trailers));
    });
    up.on('trailers', (t) => (trailers = plainHeaders(t)));
    up.on('data', (d: Buffer) => {
      if (!stream.destroyed && !stream.writableEnded && stream.headersSent) stream.write(d);
    });
    up.on('end', () => {
      if (!stream.destroyed && !stream.writableEnded && stream.headersSent) stream.end();
    });
    up.on('error', (err) => {
      if (stream.destroyed) return;
      if (!stream.headersSent)
        stream.respond(
          {
            ':status': 200,
            'content-type': 'application/grpc+proto',
            'grpc-status': '14',
            'grpc-message': `fault proxy: ${errorMessage(err)}`,
          },
          { endStream: true },
        );
      else stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    });
    stream.on('close', () => {
      if (!up.closed) up.close(http2.constants.NGHTTP2_CANCEL);
    });
    stream.pipe(up);
  });
  await listen(server as unknown as net.Server, socketPath);
  let closing: Promise<void> | undefined;
  return {
    dispose: () =>
      (closing ??= (async () => {
        for (const s of sessions) s.destroy();
        upstream?.destroy();
        await new Promise<void>((r) => server.close(() => r()));
        await fsp.rm(socketPath, { force: true });
      })()),
  };
}
