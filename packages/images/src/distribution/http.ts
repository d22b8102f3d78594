// One HTTP/1.1 request to a registry over Node's own http/https, with the
// registry's TLS trust, keep-alive agents per origin, cancellation by
// AbortSignal and an activity watchdog on the injected Clock: a request
// that sees no bytes (headers or body) for `activityTimeoutMs` fails with
// ImagePullTimeoutError. Network and TLS failures become the package's
// errors here, in one place.
import { abortReason, type Clock, type Disposable } from '@csiplug/core';
import * as http from 'node:http';
import * as https from 'node:https';
import { createSecureContext } from 'node:tls';
import { ImagePullTimeoutError, RegistryTlsError, RegistryUnreachableError } from '../errors';
import { registryTls, registryTrustStamp } from './trust';

export interface HttpRequest {
  readonly url: URL;
  readonly headers: Readonly<Record<string, string>>;
  /** The registry (host[:port]) this is for, for errors and trust. */
  readonly registry: string;
  /** What is fetched, for errors ("manifest r.io/a:1"). */
  readonly what: string;
  readonly signal?: AbortSignal;
  readonly activityTimeoutMs: number;
}

export interface HttpResponse {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  /** The body, chunk by chunk; each chunk re-arms the activity watchdog. */
  chunks(): AsyncIterable<Buffer>;
  /** The whole body, refused past `limit` bytes. */
  bytes(limit: number): Promise<Buffer>;
  /** Drops the body (frees the socket). */
  discard(): void;
}

/** Error codes of Node's TLS layer that mean "the certificate is not trusted / not for this host". */
const TLS_CODES = /^(ERR_TLS_|ERR_SSL_|UNABLE_TO_|SELF_SIGNED_|DEPTH_ZERO_|CERT_|HOSTNAME_MISMATCH)/;

export class RegistryHttp implements Disposable {
  /** A keep-alive agent per origin, with the stamp of the certs.d files its TLS context was made from. */
  private readonly agents = new Map<string, { agent: http.Agent; stamp: string }>();

  constructor(
    private readonly clock: Clock,
    /** Docker's certs.d layout. */
    readonly certsDir: string,
    /** Registries (host[:port]) spoken to over plain http, as the operator listed them. */
    private readonly insecureRegistries: ReadonlySet<string>,
  ) {}

  /** The URL of a registry API path (`/v2/...`). */
  url(registry: string, apiHost: string, path: string): URL {
    return new URL(`${this.insecureRegistries.has(registry) ? 'http' : 'https'}://${apiHost}${path}`);
  }

  request(req: HttpRequest): Promise<HttpResponse> {
    const { url, signal } = req;
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    let agent: http.Agent;
    try {
      agent = this.agentFor(url, req.registry);
    } catch (err) {
      // The trust itself is unusable (a client key that does not parse): said as a TLS failure, before any timer starts.
      return Promise.reject(new RegistryTlsError(req.registry, this.certsDir, err));
    }
    return new Promise<HttpResponse>((resolve, reject) => {
      const isHttps = url.protocol === 'https:';
      const watchdog = new Watchdog(this.clock, req.activityTimeoutMs, () =>
        fail(new ImagePullTimeoutError(req.registry, req.what, req.activityTimeoutMs, 'activity')),
      );
      let settledError: Error | undefined;
      const fail = (err: Error) => {
        if (settledError) return;
        settledError = err;
        watchdog.dispose();
        outgoing.destroy(err);
        reject(err);
      };
      const onAbort = () => fail(abortReason(signal!));
      const outgoing = (isHttps ? https : http).request(url, {
        method: 'GET',
        headers: { 'user-agent': 'csiplug-images', ...req.headers },
        agent,
      });
      signal?.addEventListener('abort', onAbort, { once: true });
      const cleanup = () => {
        watchdog.dispose();
        signal?.removeEventListener('abort', onAbort);
      };
      outgoing.on('error', (err: NodeJS.ErrnoException) => {
        if (settledError) return;
        cleanup();
        settledError = this.translate(err, req);
        reject(settledError);
      });
      outgoing.on('response', (res) => {
        watchdog.touch();
        const response: HttpResponse = {
          status: res.statusCode ?? 0,
          headers: res.headers,
          chunks: () => this.readChunks(res, watchdog, req, cleanup, () => settledError),
          bytes: async (limit) => {
            const parts: Buffer[] = [];
            let total = 0;
            for await (const chunk of response.chunks()) {
              total += chunk.length;
              if (total > limit) {
                res.destroy();
                throw new RegistryUnreachableError(req.registry, `${req.what} is larger than ${limit} bytes, refused`);
              }
              parts.push(chunk);
            }
            return Buffer.concat(parts);
          },
          discard: () => {
            cleanup();
            res.resume();
          },
        };
        resolve(response);
      });
      outgoing.end();
    });
  }

  private async *readChunks(
    res: http.IncomingMessage,
    watchdog: Watchdog,
    req: HttpRequest,
    cleanup: () => void,
    failure: () => Error | undefined,
  ): AsyncIterable<Buffer> {
    try {
      for await (const chunk of res) {
        watchdog.touch();
        yield chunk as Buffer;
      }
      if (!res.complete) throw new RegistryUnreachableError(req.registry, `the connection closed before all of ${req.what} arrived`);
    } catch (err) {
      const reason = failure();
      if (reason) throw reason;
      if (err instanceof Error && 'code' in err) throw this.translate(err as NodeJS.ErrnoException, req);
      throw err;
    } finally {
      cleanup();
      if (!res.complete) res.destroy();
    }
  }

  private translate(err: NodeJS.ErrnoException, req: HttpRequest): Error {
    if (typeof err.code === 'string' && TLS_CODES.test(err.code)) return new RegistryTlsError(req.registry, this.certsDir, err);
    if (err instanceof RegistryUnreachableError || err instanceof ImagePullTimeoutError) return err;
    return new RegistryUnreachableError(req.registry, `${req.what}: ${err.code ?? ''} ${err.message}`.trim(), { cause: err });
  }

  private agentFor(url: URL, registry: string): http.Agent {
    const key = url.origin;
    const host = url.host === registry ? registry : url.host;
    const stamp = url.protocol === 'https:' ? registryTrustStamp(host, this.certsDir) : '';
    const cached = this.agents.get(key);
    if (cached?.stamp === stamp) return cached.agent;
    // Its trust changed on disk: new connections use the new one; the old agent's idle sockets close, busy ones finish.
    if (cached) for (const idle of Object.values(cached.agent.freeSockets)) for (const socket of idle ?? []) socket.destroy();
    // One TLS context per origin and trust, made here once: an Agent given the CAs themselves makes a new context for
    // every connection, parsing every system CA again (~100 ms of the event loop each on a loaded 2-core node, bench/images).
    const agent =
      url.protocol === 'https:'
        ? new https.Agent({ keepAlive: true, maxSockets: 8, secureContext: createSecureContext(registryTls(host, this.certsDir)) })
        : new http.Agent({ keepAlive: true, maxSockets: 8 });
    this.agents.set(key, { agent, stamp });
    return agent;
  }

  dispose(): void {
    for (const { agent } of this.agents.values()) agent.destroy();
    this.agents.clear();
  }
}

/** Fires `onIdle` when `touch` was not called for `ms`; one timer, re-armed lazily. */
class Watchdog implements Disposable {
  private last: number;
  private timer: Disposable | undefined;
  private disposed = false;

  constructor(
    private readonly clock: Clock,
    private readonly ms: number,
    private readonly onIdle: () => void,
  ) {
    this.last = clock.now();
    this.arm(ms);
  }

  touch(): void {
    this.last = this.clock.now();
  }

  private arm(delay: number): void {
    this.timer = this.clock.setTimeout(() => {
      if (this.disposed) return;
      const idle = this.clock.now() - this.last;
      if (idle >= this.ms) this.onIdle();
      else this.arm(this.ms - idle);
    }, delay);
  }

  dispose(): void {
    this.disposed = true;
    this.timer?.dispose();
  }
}
