// Server helpers for writing CSI plugins (the hostpath plugin) and fake
// plugins in tests: serveCsi() replaces a stale socket, listens on the unix
// socket, and maps handler results and thrown CSIStatusErrors to gRPC
// statuses. Handlers are plain async functions; a missing one answers
// UNIMPLEMENTED.
import * as fs from 'node:fs/promises';
import * as net from 'node:net';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { type AsyncDisposable, CsiplugError, type Logger, NullLogger, errorMessage } from '@csiplug/core';
import { parseEndpoint } from './endpoint';
import { CSIStatusError } from './errors';
import type { ControllerHandlers } from './generated/csi/v1/Controller';
import type { IdentityHandlers } from './generated/csi/v1/Identity';
import type { NodeHandlers } from './generated/csi/v1/Node';
import { CSI_SERVICES, type CsiServiceKey, csiGrpcObject } from './proto';

/** What a handler sees besides the request. */
export interface CsiCallContext {
  /** The RPC name, e.g. "NodeStageVolume". */
  rpc: string;
  /** Aborts when the caller cancels or its deadline passes. */
  signal: AbortSignal;
  metadata: grpc.Metadata;
}

type AsyncUnary<H> =
  H extends grpc.handleUnaryCall<infer Req, infer Res> ? (request: Req, ctx: CsiCallContext) => Promise<Res> | Res : never;
type AsyncHandlers<H> = { [K in keyof H]?: AsyncUnary<H[K]> };

export type IdentityServerHandlers = AsyncHandlers<IdentityHandlers>;
export type ControllerServerHandlers = AsyncHandlers<ControllerHandlers>;
export type NodeServerHandlers = AsyncHandlers<NodeHandlers>;

export interface CsiServerHandlers {
  identity: IdentityServerHandlers;
  /** Omit to not serve the Controller service at all (every call UNIMPLEMENTED). */
  controller?: ControllerServerHandlers;
  node?: NodeServerHandlers;
}

export interface ServeCsiOptions {
  logger?: Logger;
  /** Runs before every handler (fault injection, counting); may throw a CSIStatusError. */
  beforeCall?: (rpc: string) => void | Promise<void>;
  /** How long dispose() waits for calls in flight before cutting them off (ms). */
  shutdownGraceMs?: number;
}

export interface CsiServer extends AsyncDisposable {
  readonly endpoint: string;
  readonly socketPath: string;
  /** Stops serving (graceful, then forced after the grace period) and removes the socket. Idempotent. */
  dispose(): Promise<void>;
}

export class EndpointInUseError extends CsiplugError {
  constructor(
    readonly socketPath: string,
    reason: string,
  ) {
    super('EENDPOINT_IN_USE', `cannot listen on ${socketPath}: ${reason}`);
  }
}

/**
 * Removes `socketPath` when it is a socket nobody listens on (left by a
 * crashed process). A live socket or a non-socket file is an error.
 */
export async function removeStaleSocket(socketPath: string): Promise<boolean> {
  let st;
  try {
    st = await fs.lstat(socketPath);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
  if (!st.isSocket()) throw new EndpointInUseError(socketPath, 'the path exists and is not a socket; refusing to replace it');
  const alive = await new Promise<boolean>((resolve) => {
    const s = net.connect(socketPath);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
  if (alive) throw new EndpointInUseError(socketPath, 'another process is listening there; stop it first');
  await fs.unlink(socketPath);
  return true;
}

function toStatus(err: unknown, rpc: string): Partial<grpc.StatusObject> {
  if (err instanceof CSIStatusError) return { code: err.grpcCode, details: err.message };
  return { code: grpc.status.INTERNAL, details: `${rpc} failed inside the plugin: ${errorMessage(err)}` };
}

function wrapService(
  key: CsiServiceKey,
  handlers: Record<string, ((req: unknown, ctx: CsiCallContext) => unknown) | undefined> | undefined,
  options: ServeCsiOptions,
  logger: Logger,
): grpc.UntypedServiceImplementation {
  const def = (csiGrpcObject().csi.v1 as unknown as Record<string, grpc.ServiceClientConstructor>)[CSI_SERVICES[key].split('.').pop()!]
    .service;
  const impl: grpc.UntypedServiceImplementation = {};
  for (const rpc of Object.keys(def)) {
    const handler = handlers?.[rpc];
    impl[rpc] = (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => {
      const ac = new AbortController();
      call.on('cancelled', () => ac.abort());
      const ctx: CsiCallContext = { rpc, signal: ac.signal, metadata: call.metadata };
      const run = async () => {
        if (options.beforeCall) await options.beforeCall(rpc);
        if (!handler) throw new CSIStatusError(grpc.status.UNIMPLEMENTED, `${rpc} is not implemented by this plugin`);
        return handler(call.request, ctx);
      };
      run().then(
        (res) => callback(null, res ?? {}),
        (err) => {
          if (!(err instanceof CSIStatusError)) logger.error('CSI handler failed', { rpc, err });
          callback(toStatus(err, rpc));
        },
      );
    };
  }
  return impl;
}

/**
 * Serves the CSI services on `endpoint` (unix:///path or /path). A stale
 * socket from an earlier crash is replaced; the parent directory is
 * created (0700) if missing.
 */
export async function serveCsi(endpoint: string, handlers: CsiServerHandlers, options: ServeCsiOptions = {}): Promise<CsiServer> {
  const parsed = parseEndpoint(endpoint);
  const logger = options.logger ?? new NullLogger();
  await fs.mkdir(path.dirname(parsed.socketPath), { recursive: true, mode: 0o700 });
  if (await removeStaleSocket(parsed.socketPath)) logger.warn('replaced a stale CSI socket', { socketPath: parsed.socketPath });

  const server = new grpc.Server();
  const v1 = csiGrpcObject().csi.v1;
  server.addService(v1.Identity.service, wrapService('identity', handlers.identity as never, options, logger));
  server.addService(v1.Controller.service, wrapService('controller', handlers.controller as never, options, logger));
  server.addService(v1.Node.service, wrapService('node', handlers.node as never, options, logger));
  await new Promise<void>((resolve, reject) => {
    server.bindAsync(parsed.target, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve()));
  });

  let disposing: Promise<void> | undefined;
  const grace = options.shutdownGraceMs ?? 2_000;
  return {
    endpoint,
    socketPath: parsed.socketPath,
    dispose() {
      disposing ??= (async () => {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(() => {
            server.forceShutdown();
            resolve();
          }, grace);
          timer.unref();
          server.tryShutdown(() => {
            clearTimeout(timer);
            resolve();
          });
        });
        await fs.rm(parsed.socketPath, { force: true });
      })();
      return disposing;
    },
  };
}
