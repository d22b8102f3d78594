// Who may call the API: with an ACL token, a request that carries it (the
// agent's header, or Authorization: Bearer); without one, only root on this
// machine (root-only-access.ts), unless the operator said to serve anyone on
// a public address. The token is kept as its SHA-256 only and compared in
// constant time.
import { type Logger, errorMessage } from '@csiplug/core';
import { isLoopbackAddress } from '@csiplug/jobspec';
import { createHash, timingSafeEqual } from 'crypto';
import type * as http from 'http';
import type * as net from 'net';
import { ApiError, ApiErrorCode } from './api-error';
import { TOKEN_HEADER } from './protocol';
import { assertTokenlessAccess } from './root-only-access';

export interface TokenCheckOptions {
  bindAddr: string;
  insecureAllowPublic: boolean;
  /** Looks up the uid owning a connection's client socket. */
  peerUid: (socket: net.Socket) => number | undefined;
  logger: Logger;
}

export class TokenCheck {
  private tokenDigest: Buffer | undefined;
  /** The uid owning each connection's client socket, looked up once per connection. */
  private readonly peerUids = new WeakMap<net.Socket, number | undefined>();

  constructor(
    token: string | undefined,
    private readonly options: TokenCheckOptions,
  ) {
    this.tokenDigest = token !== undefined ? digest(token) : undefined;
  }

  /** Whether a token is required. */
  get enabled(): boolean {
    return this.tokenDigest !== undefined;
  }

  /** Sets the token (undefined: none); answers whether it changed. */
  set(token: string | undefined): boolean {
    const next = token !== undefined ? digest(token) : undefined;
    const changed =
      next === undefined || this.tokenDigest === undefined ? next !== this.tokenDigest : !timingSafeEqual(next, this.tokenDigest);
    this.tokenDigest = next;
    return changed;
  }

  /** Throws the 403 (or 503) a request gets when it may not call the API; `socket` is the TCP socket under its connection. */
  check(req: http.IncomingMessage, socket: net.Socket): void {
    if (this.tokenDigest === undefined) {
      this.checkTokenless(socket);
      return;
    }
    // The agent's own header first; `Authorization: Bearer` too, which is what a Prometheus scrape job
    // (authorization { credentials }) can send. Neither can be set by a cross-site page without a preflight, which is never granted.
    const header = req.headers[TOKEN_HEADER.toLowerCase()];
    const bearer = /^Bearer +(\S+)$/i.exec(typeof req.headers.authorization === 'string' ? req.headers.authorization : '')?.[1];
    const fromHeader = header !== undefined && header !== '';
    const given = fromHeader ? header : bearer;
    if (given === undefined) {
      throw new ApiError(
        403,
        ApiErrorCode.Forbidden,
        `this agent requires an ACL token: send it in the ${TOKEN_HEADER} header or as Authorization: Bearer (csiplug: -token or CSIPLUG_TOKEN)`,
      );
    }
    // Hashing first gives equal lengths, so the comparison time says nothing about the token.
    if (typeof given !== 'string' || !timingSafeEqual(digest(given), this.tokenDigest)) {
      throw new ApiError(403, ApiErrorCode.Forbidden, `the ACL token in ${fromHeader ? TOKEN_HEADER : 'Authorization'} is not valid`);
    }
  }

  /** No token to tell callers apart: only root on this machine, unless the operator said to serve anyone on a public address (INSECURE). */
  private checkTokenless(socket: net.Socket): void {
    if (this.options.insecureAllowPublic && !isLoopbackAddress(this.options.bindAddr)) return;
    if (!this.peerUids.has(socket)) {
      let uid: number | undefined;
      try {
        uid = this.options.peerUid(socket);
      } catch (err) {
        // Not remembered: the next request on this connection asks again (a file descriptor may be free by then).
        this.options.logger.warn('HTTP API: the owner of a connection could not be looked up; it is not served without a token', {
          err: errorMessage(err),
        });
        throw new ApiError(
          503,
          'EPEER_UNKNOWN',
          `the agent could not tell which user this connection comes from (${errorMessage(err)}), and without an ACL token it serves only root: retry, or set acl { token } and send it`,
        );
      }
      this.peerUids.set(socket, uid);
    }
    assertTokenlessAccess(this.peerUids.get(socket));
  }
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}
