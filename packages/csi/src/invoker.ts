// The transport under CSIClient: one unary call to one RPC with a deadline
// and an AbortSignal. GrpcInvoker is the real one (one grpc-js channel per
// plugin socket); tests bind a fake to drive retries and errors by hand.
import type { Disposable } from '@csiplug/core';
import * as grpc from '@grpc/grpc-js';
import type { MethodDefinition } from '@grpc/proto-loader';
import { type CsiServiceKey, csiMethodDefinition } from './proto';

/** What a failed call rejects with: a gRPC status code and its message. */
export interface InvokeError {
  code: number;
  details?: string;
  message?: string;
}

export interface CsiInvoker extends Disposable {
  /** Sends one request; rejects with an InvokeError-shaped error on a non-OK status. */
  unary(service: CsiServiceKey, rpc: string, request: object, deadline: Date, signal?: AbortSignal): Promise<unknown>;
  /** Releases the connection. */
  dispose(): void;
}

/** Channel settings suited to a local plugin that may restart: reconnect fast, never wait for minutes. */
export const DEFAULT_CHANNEL_OPTIONS: Readonly<grpc.ChannelOptions> = Object.freeze({
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.min_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 1_000,
  // Retries are CSIClient's explicit job; the channel must not add its own.
  'grpc.enable_retries': 0,
});

export class GrpcInvoker implements CsiInvoker {
  private readonly client: grpc.Client;
  private readonly methods = new Map<string, MethodDefinition<object, object>>();

  constructor(target: string, channelOptions: grpc.ChannelOptions = {}) {
    this.client = new grpc.Client(target, grpc.credentials.createInsecure(), { ...DEFAULT_CHANNEL_OPTIONS, ...channelOptions });
  }

  unary(service: CsiServiceKey, rpc: string, request: object, deadline: Date, signal?: AbortSignal): Promise<unknown> {
    const key = service + '/' + rpc;
    let def = this.methods.get(key);
    if (!def) {
      def = csiMethodDefinition(service, rpc);
      this.methods.set(key, def);
    }
    const d = def;
    return new Promise((resolve, reject) => {
      let onAbort: (() => void) | undefined;
      const call = this.client.makeUnaryRequest(d.path, d.requestSerialize, d.responseDeserialize, request, { deadline }, (err, res) => {
        if (onAbort) signal!.removeEventListener('abort', onAbort);
        if (err) reject(err);
        else resolve(res);
      });
      if (signal) {
        onAbort = () => call.cancel();
        signal.addEventListener('abort', onAbort, { once: true });
      }
    });
  }

  dispose(): void {
    this.client.close();
  }
}
