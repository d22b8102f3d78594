// A client for the OCI distribution API, the pull half: fetch a manifest
// (by tag or digest, verified) and stream a blob to a consumer. It answers
// the registry's 401 challenges (Bearer token flow with `token` or
// `access_token`, or Basic), keeps tokens per repository and credentials until they expire,
// follows blob redirects (dropping credentials off-origin), maps statuses to
// the package's errors and retries what may pass.
import { createHash } from 'node:crypto';
import { type Clock, type Disposable } from '@csiplug/core';
import { digestOf, parseDigest } from '../digest';
import { DigestMismatchError, ImageNotFoundError, RegistryAuthError, RegistryProtocolError, RegistryUnreachableError } from '../errors';
import type { Descriptor } from '../manifest';
import { MANIFEST_ACCEPT } from '../media-types';
import { registryApiHost, type RegistryReference } from '../reference';
import {
  basicAuthorization,
  parseWwwAuthenticate,
  resolveCredentials,
  type AuthChallenge,
  type AuthConfig,
  type Credentials,
} from './auth';
import { type RegistryHttp, type HttpResponse } from './http';
import { withRetries, type RetryPolicy } from './retry';

/** Manifests larger than this are refused (containerd's limit). */
export const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;
const MAX_TOKEN_BYTES = 1024 * 1024;
const MAX_REDIRECTS = 5;

export interface RegistryClientOptions {
  readonly clock: Clock;
  readonly http: RegistryHttp;
  readonly retry: RetryPolicy;
  /** A docker config.json to read credentials from when the task has none. */
  readonly dockerConfigPath?: string;
  readonly onRetry?: (what: string, err: unknown, attempt: number, delayMs: number) => void;
}

/** What every request of one pull carries. */
export interface PullContext {
  readonly signal?: AbortSignal;
  readonly activityTimeoutMs: number;
  readonly auth?: AuthConfig;
}

export interface FetchedManifest {
  readonly bytes: Buffer;
  readonly contentType?: string;
  /** The digest of the bytes (checked against the reference's digest and Docker-Content-Digest). */
  readonly digest: string;
}

interface CachedAuth {
  readonly header: string;
  readonly expiresAt: number;
  readonly source: string;
}

export class RegistryClient implements Disposable {
  private readonly authCache = new Map<string, CachedAuth>();

  constructor(private readonly options: RegistryClientOptions) {}

  /** The manifest (or index) `reference` (a tag or a digest) of `ref`'s repository. */
  async getManifest(ref: RegistryReference, reference: string, ctx: PullContext): Promise<FetchedManifest> {
    const what = `manifest ${ref.registry}/${ref.repository}${reference.includes(':') ? '@' : ':'}${reference}`;
    return withRetries(
      this.options.retry,
      this.options.clock,
      ctx.signal,
      async () => {
        const res = await this.get(ref, `/v2/${ref.repository}/manifests/${reference}`, { accept: MANIFEST_ACCEPT }, ctx, what);
        const bytes = await res.bytes(MAX_MANIFEST_BYTES);
        const contentType = headerValue(res.headers['content-type']);
        let digest: string;
        if (reference.includes(':')) {
          const wanted = parseDigest(reference);
          digest = digestOf(bytes, wanted.algorithm);
          if (digest !== wanted.value) throw new DigestMismatchError(`digest of ${what}`, wanted.value, digest);
        } else {
          digest = digestOf(bytes);
          const claimed = headerValue(res.headers['docker-content-digest']);
          if (claimed?.startsWith('sha256:') && claimed !== digest)
            throw new DigestMismatchError(`digest of ${what} (Docker-Content-Digest)`, claimed, digest);
        }
        return { bytes, ...(contentType !== undefined ? { contentType } : {}), digest };
      },
      (err, attempt, delay) => this.options.onRetry?.(what, err, attempt, delay),
    );
  }

  /**
   * Streams blob `desc` to `consume`, which must verify what it reads (the
   * blob store does). A failure inside `consume` that may pass (a reset
   * connection) retries the whole blob; others fail the fetch.
   */
  async fetchBlob(
    ref: RegistryReference,
    desc: Descriptor,
    ctx: PullContext,
    consume: (chunks: AsyncIterable<Buffer>) => Promise<void>,
  ): Promise<void> {
    const what = `blob ${desc.digest} of ${ref.registry}/${ref.repository}`;
    await withRetries(
      this.options.retry,
      this.options.clock,
      ctx.signal,
      async () => {
        const res = await this.get(ref, `/v2/${ref.repository}/blobs/${desc.digest}`, {}, ctx, what);
        await consume(res.chunks());
      },
      (err, attempt, delay) => this.options.onRetry?.(what, err, attempt, delay),
    );
  }

  /** GET with auth and redirects; a non-2xx is turned into the matching error. */
  private async get(
    ref: RegistryReference,
    path: string,
    headers: Record<string, string>,
    ctx: PullContext,
    what: string,
  ): Promise<HttpResponse> {
    const http = this.options.http;
    const origin = http.url(ref.registry, registryApiHost(ref.registry), path);
    const scopeKey = this.authKey(ref, ctx);
    let url = origin;
    let triedFreshAuth = false;
    for (let redirects = 0; ;) {
      const sameOrigin = url.origin === origin.origin;
      const cached = sameOrigin ? this.cachedAuth(scopeKey) : undefined;
      const res = await http.request({
        url,
        headers: { ...headers, ...(cached ? { authorization: cached.header } : {}) },
        registry: ref.registry,
        what,
        activityTimeoutMs: ctx.activityTimeoutMs,
        ...(ctx.signal ? { signal: ctx.signal } : {}),
      });
      const status = res.status;
      if (status >= 200 && status < 300) return res;
      res.discard();
      if (status >= 300 && status < 400 && res.headers.location) {
        if (++redirects > MAX_REDIRECTS) throw new RegistryProtocolError(ref.registry, `more than ${MAX_REDIRECTS} redirects for ${what}`);
        url = new URL(res.headers.location, url);
        if (url.protocol !== 'https:' && url.protocol !== origin.protocol) {
          throw new RegistryProtocolError(ref.registry, `${what} redirected to ${url.protocol} (not followed: it would leave TLS)`);
        }
        continue;
      }
      if (status === 401 && sameOrigin) {
        if (triedFreshAuth) {
          throw new RegistryAuthError(ref.registry, cached?.source ?? 'none (anonymous)', `401 Unauthorized for ${what}`);
        }
        triedFreshAuth = true;
        await this.authenticate(ref, res, ctx, what);
        continue;
      }
      if (status === 403) {
        throw new RegistryAuthError(
          ref.registry,
          cached?.source ?? 'none (anonymous)',
          `403 Forbidden for ${what}: these credentials may not pull from ${ref.repository}`,
        );
      }
      if (status === 404) throw new ImageNotFoundError(ref.registry, what);
      if (status === 429 || status >= 500) throw new RegistryUnreachableError(ref.registry, `HTTP ${status} for ${what}`);
      throw new RegistryProtocolError(ref.registry, `HTTP ${status} for ${what}`);
    }
  }

  /**
   * A cached token or Basic header answers for the credentials that got it,
   * never for a pull with other ones: a task with a wrong password must get
   * the registry's 401, not another task's token for the same repository.
   */
  private authKey(ref: RegistryReference, ctx: PullContext): string {
    let identity: string;
    try {
      const creds = resolveCredentials(ref.registry, ctx.auth, this.options.dockerConfigPath);
      identity = creds ? createHash('sha256').update(`${creds.source}\0${creds.username}\0${creds.password}`).digest('hex') : 'anonymous';
    } catch {
      // A docker config this client cannot read: authenticate() says why when the registry asks.
      identity = 'unresolved';
    }
    return `${ref.registry}/${ref.repository} ${identity}`;
  }

  private cachedAuth(key: string): CachedAuth | undefined {
    const hit = this.authCache.get(key);
    if (hit && hit.expiresAt > this.options.clock.now()) return hit;
    if (hit) this.authCache.delete(key);
    return undefined;
  }

  private async authenticate(ref: RegistryReference, res: HttpResponse, ctx: PullContext, what: string): Promise<void> {
    const challenges = parseWwwAuthenticate(headerValue(res.headers['www-authenticate']) ?? '');
    const creds = resolveCredentials(ref.registry, ctx.auth, this.options.dockerConfigPath);
    const source = creds?.source ?? 'none (anonymous)';
    const key = this.authKey(ref, ctx);
    const bearer = challenges.find((c) => c.scheme === 'bearer' && c.params.realm);
    if (bearer) {
      const token = await this.fetchToken(ref, bearer, creds, ctx, what);
      this.authCache.set(key, { header: `Bearer ${token.token}`, expiresAt: token.expiresAt, source });
      return;
    }
    if (challenges.some((c) => c.scheme === 'basic')) {
      if (!creds) throw new RegistryAuthError(ref.registry, source, `it asks for a username and password (Basic) to read ${what}`);
      this.authCache.set(key, { header: basicAuthorization(creds), expiresAt: Number.MAX_SAFE_INTEGER, source });
      return;
    }
    throw new RegistryAuthError(ref.registry, source, `401 for ${what} with no Bearer or Basic challenge this client can answer`);
  }

  private async fetchToken(
    ref: RegistryReference,
    challenge: AuthChallenge,
    creds: Credentials | undefined,
    ctx: PullContext,
    what: string,
  ): Promise<{ token: string; expiresAt: number }> {
    let realm: URL;
    try {
      realm = new URL(challenge.params.realm!);
    } catch {
      throw new RegistryProtocolError(ref.registry, `the Bearer realm ${JSON.stringify(challenge.params.realm)} is not a URL`);
    }
    if (realm.protocol !== 'https:' && realm.protocol !== 'http:')
      throw new RegistryProtocolError(ref.registry, `the Bearer realm ${realm.href} is not http(s)`);
    if (challenge.params.service) realm.searchParams.set('service', challenge.params.service);
    realm.searchParams.set('scope', challenge.params.scope ?? `repository:${ref.repository}:pull`);
    if (creds) realm.searchParams.set('account', creds.username);
    const source = creds?.source ?? 'none (anonymous)';
    const res = await this.options.http.request({
      url: realm,
      headers: { accept: 'application/json', ...(creds ? { authorization: basicAuthorization(creds) } : {}) },
      registry: ref.registry,
      what: `a token from ${realm.origin}${realm.pathname}`,
      activityTimeoutMs: ctx.activityTimeoutMs,
      ...(ctx.signal ? { signal: ctx.signal } : {}),
    });
    if (res.status === 401 || res.status === 403) {
      res.discard();
      throw new RegistryAuthError(
        ref.registry,
        source,
        `the token service ${realm.origin}${realm.pathname} answered ${res.status} for ${what}`,
      );
    }
    if (res.status === 429 || res.status >= 500) {
      res.discard();
      throw new RegistryUnreachableError(ref.registry, `the token service ${realm.origin}${realm.pathname} answered HTTP ${res.status}`);
    }
    if (res.status < 200 || res.status >= 300) {
      res.discard();
      throw new RegistryProtocolError(ref.registry, `the token service ${realm.origin}${realm.pathname} answered HTTP ${res.status}`);
    }
    let body: { token?: unknown; access_token?: unknown; expires_in?: unknown };
    try {
      body = JSON.parse((await res.bytes(MAX_TOKEN_BYTES)).toString('utf8')) as typeof body;
    } catch {
      throw new RegistryProtocolError(ref.registry, `the token service ${realm.origin}${realm.pathname} did not answer JSON`);
    }
    const token =
      typeof body.token === 'string' && body.token ? body.token : typeof body.access_token === 'string' ? body.access_token : '';
    if (!token) throw new RegistryProtocolError(ref.registry, `the token service ${realm.origin}${realm.pathname} answered no token`);
    // Docker's default lifetime is 60s; renew a little early.
    const lifetimeS = typeof body.expires_in === 'number' && body.expires_in > 0 ? body.expires_in : 60;
    return { token, expiresAt: this.options.clock.now() + Math.max(1, lifetimeS - 5) * 1000 };
  }

  dispose(): void {
    this.authCache.clear();
  }
}

function headerValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v.join(', ') : v;
}
