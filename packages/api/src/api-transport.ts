// ApiTransport: how the API client reaches the agent — the address, the
// token header, http or https (the agent's certificate checked against the
// system's CAs or a given one), the client's timeout, and every failure
// turned into an ApiError that says what to do. The typed calls (ApiClient,
// VolumeApiCalls) hold one and say only which route and which body.
import { type Clock, RealClock, formatGoDuration } from '@csiplug/core';
import { DEFAULT_PORT } from '@csiplug/jobspec';
import * as http from 'http';
import * as https from 'https';
import * as tls from 'tls';
import { ApiError, ApiErrorCode } from './api-error';
import { CallScope } from './call-scope';
import { ERROR_CODE_HEADER, TOKEN_HEADER } from './protocol';

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
  /** Sent as X-Nomad-Token. */
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
    throw new ApiError(
      0,
      ApiErrorCode.Invalid,
      `the agent address "${address}" must use http:// or https:// (https when the agent has a tls block)`,
    );
  }
  return url;
}

export class ApiTransport {
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
    if (!Number.isFinite(timeoutMs) || timeoutMs < 0)
      throw new ApiError(0, ApiErrorCode.Invalid, `the client timeout must be 0 (none) or more milliseconds (got ${timeoutMs})`);
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

  /** One request and its JSON answer's body. */
  async json<T>(
    method: string,
    path: string,
    options: { body?: unknown; signal?: AbortSignal; headers?: Record<string, string> } = {},
  ): Promise<T> {
    return (await this.call<T>(method, path, options)).body;
  }

  /** One request and its whole JSON answer, within the timeout (and until `signal` aborts). */
  async call<T>(
    method: string,
    path: string,
    /** headers: added to the request's own (e.g. Nomad's X-Nomad-CSI-Secrets). */
    options: { body?: unknown; okStatuses?: number[]; signal?: AbortSignal; headers?: Record<string, string> } = {},
  ): Promise<{ status: number; body: T }> {
    const payload = options.body !== undefined ? Buffer.from(JSON.stringify(options.body)) : undefined;
    const scope = new CallScope(this.clock, this.timeoutMs, options.signal);
    try {
      const res = await this.open(method, path, scope, payload, options.headers);
      const ok = options.okStatuses ?? [200];
      if (!ok.includes(res.statusCode ?? 0)) return await this.raise(res);
      const text = await readAll(res).catch((err: unknown) => {
        throw this.failure(err, method, path, scope);
      });
      try {
        return { status: res.statusCode!, body: JSON.parse(text) as T };
      } catch {
        throw new ApiError(
          res.statusCode ?? 0,
          ApiErrorCode.BadResponse,
          `${method} ${path}: the agent at ${this.address} answered with something that is not JSON`,
        );
      }
    } finally {
      scope.dispose();
    }
  }

  /** A request whose answer is read as it comes: the timeout covers only its start. Error statuses are thrown. */
  async stream(method: string, path: string, signal: AbortSignal | undefined): Promise<http.IncomingMessage> {
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
    // The agent's errors are its message as plain text and its code in a header; an answer without the code is
    // not the agent's (a proxy's page, another server): its first words are shown beside the status.
    const code = res.headers[ERROR_CODE_HEADER.toLowerCase()];
    if (typeof code === 'string' && code !== '' && text.trim() !== '') throw new ApiError(status, code, text.trim());
    let message = `the agent answered ${status} ${res.statusMessage ?? ''}`.trim();
    if (text.trim()) message = `${message}: ${text.trim().slice(0, 200)}`;
    throw new ApiError(status, ApiErrorCode.BadResponse, message);
  }

  private open(
    method: string,
    path: string,
    scope: CallScope,
    payload?: Buffer,
    extra: Record<string, string> = {},
  ): Promise<http.IncomingMessage> {
    const url = new URL(path, this.base);
    const headers: http.OutgoingHttpHeaders = { ...extra, Accept: 'application/json' };
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
        `no answer from the agent at ${this.address} within ${formatGoDuration(this.timeoutMs)} (${method} ${path}); it may still be working on it: raise -timeout, or set it to 0 to wait as long as it takes`,
        { cause: err },
      );
    }
    if (scope.aborted) return new ApiError(0, ClientErrorCode.Aborted, `${method} ${path} was aborted`, { cause: err });
    const tlsProblem = this.secure ? describeTlsFailure(e) : undefined;
    if (tlsProblem)
      return new ApiError(0, ClientErrorCode.Tls, `TLS with the agent at ${this.address} failed: ${tlsProblem}`, { cause: err });
    // A plain-HTTP request to an https agent is cut off before any answer.
    const httpsHint =
      !this.secure && (e.code === 'ECONNRESET' || e.code === 'EPIPE')
        ? '; if the agent serves https (a tls block), use an https:// address'
        : '';
    return new ApiError(
      0,
      ApiErrorCode.Connect,
      `cannot reach the csiplug agent at ${this.address}: ${e.message}; is it running? (set -address or CSIPLUG_ADDR)${httpsHint}`,
      { cause: err },
    );
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
  if (!text.includes('-----BEGIN CERTIFICATE-----'))
    throw new ApiError(0, ApiErrorCode.Invalid, 'the CA certificate is not PEM (no "-----BEGIN CERTIFICATE-----" in it)');
  try {
    tls.createSecureContext({ ca });
  } catch (err) {
    throw new ApiError(0, ApiErrorCode.Invalid, `the CA certificate cannot be used: ${(err as Error).message}`, { cause: err });
  }
}

export function enc(segment: string): string {
  return encodeURIComponent(segment);
}

export function query(params: Record<string, string | number | boolean | undefined>): string {
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
