// The public face of the pull side: ImagePuller.pull(reference) resolves a
// reference to this node's image, fetches what the store lacks (verified)
// and records it. Docker's rules: an image present under a tag other than
// `latest` is not asked for again (no request at all) unless forcePull; a
// digest reference already present never goes to the network; pulls of one
// reference with the same credentials running at once share one pull (a
// pull that is already stopping is never joined: a new caller starts its
// own); blobs in the store are never fetched again; a layer that fails
// stops the others, and a pull that fails (a layer's error,
// image_pull_timeout) does so once its downloads have settled: no temp file
// outlives it, though it never waits more than STOPPED_PULL_SETTLE_MS on a
// download that ignores the stop (nor at all once disposed). Progress comes as
// throttled "Downloading image …" events and a final "pulled" event with
// the digest.
import { createHash } from 'node:crypto';
import { type Clock, type Disposable, type Logger, NullLogger, RealClock, abortReason, errorMessage, raceAbort } from '@csiplug/core';
import { RegistryClient, type PullContext } from './distribution/registry-client';
import type { AuthConfig } from './distribution/auth';
import { RegistryHttp } from './distribution/http';
import { DEFAULT_RETRY, type RetryPolicy } from './distribution/retry';
import { DEFAULT_CERTS_DIR } from './distribution/trust';
import { ImagePullTimeoutError, RegistryProtocolError, UnsupportedImageError } from './errors';
import { parseImageConfig, parseManifestOrIndex, type Descriptor, type ImageConfig, type LayerDescriptor, type Platform } from './manifest';
import { nodePlatform, selectPlatformManifest } from './platform';
import { parseImageReference, type RegistryReference } from './reference';
import { SharedWork } from './shared-work';
import { BlobStore } from './store/blob-store';
import { ImageIndex, type ImageRecord } from './store/image-index';

/** Nomad's docker driver defaults. */
export const DEFAULT_IMAGE_PULL_TIMEOUT_MS = 5 * 60_000;
export const DEFAULT_PULL_ACTIVITY_TIMEOUT_MS = 2 * 60_000;
const DEFAULT_PROGRESS_INTERVAL_MS = 2_000;
const DOWNLOAD_CONCURRENCY = 3;
/** How long a stopped pull waits for its downloads to remove their temp files before it fails anyway. */
const STOPPED_PULL_SETTLE_MS = 10_000;

export interface ImagePullerOptions {
  /** The store's directory (created 0700), e.g. <data_dir>/images. */
  readonly storeDir: string;
  readonly clock?: Clock;
  readonly logger?: Logger;
  /** Docker's certs.d layout; /etc/docker/certs.d by default. */
  readonly certsDir?: string;
  /** The agent's docker config.json (plugin "docker" { config { auth { config } } }). */
  readonly dockerConfigPath?: string;
  /** Registries (host[:port]) the operator listed as plain http. Never implied. */
  readonly insecureRegistries?: readonly string[];
  /** This node's platform; detected when not given. */
  readonly platform?: Platform;
  readonly retry?: RetryPolicy;
  /** image_pull_timeout when the task sets none. */
  readonly pullTimeoutMs?: number;
  /** pull_activity_timeout. */
  readonly activityTimeoutMs?: number;
  /** Least time between two "Downloading" events of one pull. */
  readonly progressIntervalMs?: number;
}

export interface PullOptions {
  /** The task's auth { username, password, server_address }. */
  readonly auth?: AuthConfig;
  readonly forcePull?: boolean;
  /** The task's image_pull_timeout. */
  readonly pullTimeoutMs?: number;
  readonly signal?: AbortSignal;
  readonly onProgress?: (event: PullEvent) => void;
}

export type PullEvent =
  | {
      readonly kind: 'downloading';
      readonly reference: string;
      readonly downloadedBytes: number;
      readonly totalBytes: number;
      readonly message: string;
    }
  | { readonly kind: 'pulled'; readonly reference: string; readonly digest: string; readonly fromStore: boolean; readonly message: string };

export interface PulledImage {
  /** The canonical reference pulled, e.g. `docker.io/library/busybox:1.36`. */
  readonly reference: string;
  /** The digest the reference resolved to in the registry (an index's, for a multi-platform image). */
  readonly repoDigest: string;
  /** The digest of this node's image manifest. */
  readonly manifestDigest: string;
  readonly configDigest: string;
  readonly config: ImageConfig;
  readonly layers: readonly LayerDescriptor[];
  /** rootfs.diff_ids: the uncompressed digest of each layer, in order. */
  readonly diffIds: readonly string[];
  /** True when the store answered without the registry. */
  readonly fromStore: boolean;
}

export class ImagePuller implements Disposable {
  /** Pulls under way, shared by callers of one reference with one set of credentials. */
  private readonly inflight: SharedWork<PullEvent, PulledImage>;
  /** Ends each bounded wait on stopped downloads now (dispose does not wait for them). */
  private readonly settleWaits = new Set<() => void>();
  private disposed = false;
  private readonly client: RegistryClient;

  private constructor(
    readonly blobs: BlobStore,
    readonly index: ImageIndex,
    private readonly http: RegistryHttp,
    private readonly options: ImagePullerOptions,
    private readonly clock: Clock,
    logger: Logger,
    private readonly platform: Platform,
  ) {
    this.inflight = new SharedWork(logger, 'pull');
    this.client = new RegistryClient({
      clock,
      http,
      retry: options.retry ?? DEFAULT_RETRY,
      ...(options.dockerConfigPath !== undefined ? { dockerConfigPath: options.dockerConfigPath } : {}),
      onRetry: (what, err, attempt, delayMs) =>
        logger.warn('retrying a registry request', { what, attempt, delayMs, error: errorMessage(err) }),
    });
  }

  /** Opens the store (cleaning a crash's leftovers) and its index. */
  static async open(options: ImagePullerOptions): Promise<ImagePuller> {
    const clock = options.clock ?? new RealClock();
    const blobs = await BlobStore.open(options.storeDir);
    const index = await ImageIndex.open(options.storeDir);
    const http = new RegistryHttp(clock, options.certsDir ?? DEFAULT_CERTS_DIR, new Set(options.insecureRegistries ?? []));
    return new ImagePuller(blobs, index, http, options, clock, options.logger ?? new NullLogger(), options.platform ?? nodePlatform());
  }

  /** Pulls `reference` (or takes it from the store, by the rules above). */
  pull(reference: string, options: PullOptions = {}): Promise<PulledImage> {
    const parsed = parseImageReference(reference);
    if (parsed.kind !== 'registry') {
      return Promise.reject(
        new UnsupportedImageError(
          `image ${reference}`,
          `loading ${parsed.kind} files is not done by the registry puller; use the archive loader`,
        ),
      );
    }
    // Shared only with callers using the same credentials: a caller with wrong ones must not get in on another's.
    const key = `${parsed.canonical} ${credentialsIdentity(options.auth)}`;
    // A pull already stopping (its callers gave up, or image_pull_timeout) is never joined: it can only fail.
    return this.inflight.run(
      key,
      options,
      (signal, emit, release) => this.pullOnce(parsed, options, signal, emit, release),
      parsed.canonical,
    );
  }

  /** The image a reference was pulled as, from the store only (no network). */
  async lookup(reference: string): Promise<PulledImage | undefined> {
    const parsed = parseImageReference(reference);
    // An archive's image is kept under its archive reference (archive-loader.ts).
    const record =
      parsed.kind === 'registry' && parsed.digest !== undefined ? this.index.findByDigest(parsed.digest) : this.index.get(parsed.canonical);
    return record ? this.fromStore(record, parsed.canonical) : undefined;
  }

  /** An image's config by its digest, from the blob store only (whatever its tags name now); undefined when the blob is gone. */
  async configByDigest(configDigest: string): Promise<ImageConfig | undefined> {
    if (!(await this.blobs.has(configDigest))) return undefined;
    return parseImageConfig(await this.blobs.read(configDigest), this.blobs.dir, `image config ${configDigest} in the store`);
  }

  private async pullOnce(
    ref: RegistryReference,
    options: PullOptions,
    signal: AbortSignal,
    emit: (e: PullEvent) => void,
    onStopping: () => void,
  ): Promise<PulledImage> {
    const present = await this.presentLocally(ref, options.forcePull === true);
    if (present) {
      emit({
        kind: 'pulled',
        reference: ref.canonical,
        digest: present.repoDigest,
        fromStore: true,
        message: `Image ${ref.canonical} is present, digest ${present.repoDigest}`,
      });
      return present;
    }
    const timeoutMs = options.pullTimeoutMs ?? this.options.pullTimeoutMs ?? DEFAULT_IMAGE_PULL_TIMEOUT_MS;
    const overall = new AbortController();
    const onOuterAbort = () => overall.abort(abortReason(signal));
    overall.signal.addEventListener('abort', onStopping, { once: true });
    if (signal.aborted) onOuterAbort();
    signal.addEventListener('abort', onOuterAbort, { once: true });
    const timer = this.clock.setTimeout(
      () => overall.abort(new ImagePullTimeoutError(ref.registry, `image ${ref.canonical}`, timeoutMs, 'overall')),
      timeoutMs,
    );
    const ctx: PullContext = {
      signal: overall.signal,
      activityTimeoutMs: this.options.activityTimeoutMs ?? DEFAULT_PULL_ACTIVITY_TIMEOUT_MS,
      ...(options.auth ? { auth: options.auth } : {}),
    };
    const fetching = this.fetch(ref, ctx, emit);
    try {
      return await raceAbort(fetching, overall.signal);
    } catch (err) {
      // Stopped (image_pull_timeout, or no caller waits any more): the downloads stop on the signal, and the
      // pull fails once they have removed their temp files — never waiting past STOPPED_PULL_SETTLE_MS on a step
      // that ignores the signal (a hung disk), so the timeout still ends the pull.
      if (overall.signal.aborted) await this.settledWithin(fetching, STOPPED_PULL_SETTLE_MS);
      throw err;
    } finally {
      timer.dispose();
      signal.removeEventListener('abort', onOuterAbort);
    }
  }

  /** Resolves once `work` has settled, or after `ms` on this puller's clock, or at dispose, whichever comes first. */
  private settledWithin(work: Promise<unknown>, ms: number): Promise<void> {
    return new Promise((resolve) => {
      if (this.disposed) {
        resolve();
        return;
      }
      const done = () => {
        timer.dispose();
        this.settleWaits.delete(done);
        resolve();
      };
      const timer = this.clock.setTimeout(done, ms);
      this.settleWaits.add(done);
      work.then(done, done);
    });
  }

  /** The stored image, when the rules allow using it without asking the registry. */
  private async presentLocally(ref: RegistryReference, forcePull: boolean): Promise<PulledImage | undefined> {
    let record: ImageRecord | undefined;
    if (ref.digest !== undefined) record = this.index.findByDigest(ref.digest);
    else if (!forcePull && ref.tag !== 'latest') record = this.index.get(ref.canonical);
    if (!record) return undefined;
    return this.fromStore(record, ref.canonical);
  }

  /** The image from the store, or undefined when a blob it needs is gone. */
  private async fromStore(record: ImageRecord, reference: string): Promise<PulledImage | undefined> {
    for (const digest of [record.manifestDigest, record.configDigest, ...record.layers.map((l) => l.digest)]) {
      if (!(await this.blobs.has(digest))) return undefined;
    }
    const config = parseImageConfig(
      await this.blobs.read(record.configDigest),
      this.blobs.dir,
      `image config ${record.configDigest} in the store`,
    );
    return {
      reference,
      repoDigest: record.repoDigest,
      manifestDigest: record.manifestDigest,
      configDigest: record.configDigest,
      config,
      layers: record.layers,
      diffIds: config.diffIds,
      fromStore: true,
    };
  }

  private async fetch(ref: RegistryReference, ctx: PullContext, emit: (e: PullEvent) => void): Promise<PulledImage> {
    const top = await this.client.getManifest(ref, ref.digest ?? ref.tag!, ctx);
    const what = `manifest of ${ref.canonical}`;
    let parsed = parseManifestOrIndex(top.bytes, top.contentType, ref.registry, what);
    let manifestBytes = top.bytes;
    let manifestDigest = top.digest;
    if (parsed.kind === 'index') {
      await this.blobs.putBytes(top.digest, top.bytes);
      const chosen: Descriptor = selectPlatformManifest(parsed.index.manifests, this.platform, ref.canonical);
      const platformManifest = await this.client.getManifest(ref, chosen.digest, ctx);
      if (platformManifest.bytes.length !== chosen.size) {
        throw new RegistryProtocolError(
          ref.registry,
          `manifest ${chosen.digest} is ${platformManifest.bytes.length} bytes, the index says ${chosen.size}`,
        );
      }
      parsed = parseManifestOrIndex(
        platformManifest.bytes,
        platformManifest.contentType,
        ref.registry,
        `manifest ${chosen.digest} of ${ref.canonical}`,
      );
      if (parsed.kind !== 'manifest')
        throw new RegistryProtocolError(ref.registry, `index entry ${chosen.digest} of ${ref.canonical} is an index again`);
      manifestBytes = platformManifest.bytes;
      manifestDigest = platformManifest.digest;
    }
    const manifest = parsed.manifest;
    await this.blobs.putBytes(manifestDigest, manifestBytes);

    if (!(await this.blobs.has(manifest.config.digest))) await this.download(ref, manifest.config, ctx);
    const config = parseImageConfig(
      await this.blobs.read(manifest.config.digest),
      ref.registry,
      `image config ${manifest.config.digest} of ${ref.canonical}`,
    );
    if (config.diffIds.length !== manifest.layers.length) {
      throw new RegistryProtocolError(
        ref.registry,
        `image ${ref.canonical}: the config lists ${config.diffIds.length} diff_ids for ${manifest.layers.length} layers`,
      );
    }

    await this.downloadLayers(ref, manifest.layers, ctx, emit);

    const record: ImageRecord = {
      reference: ref.canonical,
      manifestDigest,
      manifestMediaType: manifest.mediaType,
      repoDigest: top.digest,
      configDigest: manifest.config.digest,
      layers: manifest.layers,
      pulledAt: this.clock.now(),
    };
    await this.index.put(record);
    emit({
      kind: 'pulled',
      reference: ref.canonical,
      digest: top.digest,
      fromStore: false,
      message: `Pulled image ${ref.canonical}, digest ${top.digest}`,
    });
    return {
      reference: ref.canonical,
      repoDigest: top.digest,
      manifestDigest,
      configDigest: manifest.config.digest,
      config,
      layers: manifest.layers,
      diffIds: config.diffIds,
      fromStore: false,
    };
  }

  private async downloadLayers(
    ref: RegistryReference,
    layers: readonly LayerDescriptor[],
    ctx: PullContext,
    emit: (e: PullEvent) => void,
  ): Promise<void> {
    const unique = [...new Map(layers.map((l) => [l.digest, l])).values()];
    const totalBytes = unique.reduce((n, l) => n + l.size, 0);
    const missing: LayerDescriptor[] = [];
    let doneBytes = 0;
    for (const l of unique) {
      if (await this.blobs.has(l.digest)) doneBytes += l.size;
      else missing.push(l);
    }
    const inFlight = new Map<string, number>();
    const interval = this.options.progressIntervalMs ?? DEFAULT_PROGRESS_INTERVAL_MS;
    let lastEmit = -Infinity;
    const report = (force: boolean) => {
      const now = this.clock.now();
      if (!force && now - lastEmit < interval) return;
      lastEmit = now;
      let downloaded = doneBytes;
      for (const n of inFlight.values()) downloaded += n;
      emit({
        kind: 'downloading',
        reference: ref.canonical,
        downloadedBytes: downloaded,
        totalBytes,
        message: `Downloading image ${ref.canonical}: ${formatMegabytes(downloaded)} of ${formatMegabytes(totalBytes)} MB`,
      });
    };
    if (missing.length === 0) return;
    report(true);
    // One layer failing fails the pull: the other downloads are stopped, and the pull fails only once
    // they have settled (their temp files removed), so nothing goes on writing into the store after it.
    const stopOnFirstFailure = new AbortController();
    const onPullAbort = () => stopOnFirstFailure.abort(ctx.signal?.reason);
    if (ctx.signal?.aborted) onPullAbort();
    ctx.signal?.addEventListener('abort', onPullAbort, { once: true });
    const layersCtx: PullContext = { ...ctx, signal: stopOnFirstFailure.signal };
    const queue = [...missing];
    let failure: { error: unknown } | undefined;
    let onFailure!: () => void;
    const failed = new Promise<void>((resolve) => (onFailure = resolve));
    const worker = async () => {
      for (let layer = queue.shift(); layer && !failure; layer = queue.shift()) {
        const current = layer;
        try {
          await this.download(ref, current, layersCtx, (n) => {
            inFlight.set(current.digest, n);
            report(false);
          });
        } catch (error) {
          failure ??= { error };
          onFailure();
          stopOnFirstFailure.abort(failure.error);
          return;
        }
        inFlight.delete(current.digest);
        doneBytes += current.size;
      }
    };
    const workers = Promise.all(Array.from({ length: Math.min(DOWNLOAD_CONCURRENCY, missing.length) }, worker));
    try {
      await Promise.race([workers, failed]);
      // The stopped downloads get the same bound as a stopped pull: one stuck in a write that ignores the stop
      // (a hung disk) must not hide this failure behind image_pull_timeout.
      if (failure) await this.settledWithin(workers, STOPPED_PULL_SETTLE_MS);
    } finally {
      ctx.signal?.removeEventListener('abort', onPullAbort);
    }
    if (failure) throw failure.error;
    report(true);
  }

  private async download(ref: RegistryReference, desc: Descriptor, ctx: PullContext, onBytes?: (n: number) => void): Promise<void> {
    await this.client.fetchBlob(ref, desc, ctx, async (chunks) => {
      onBytes?.(0);
      await this.blobs.write(desc.digest, desc.size, chunks, onBytes);
    });
  }

  dispose(): void {
    this.disposed = true;
    this.inflight.abortAll(new Error('the image puller was disposed'));
    // Shutdown does not wait for stopped downloads: the store removes leftover temp files when next opened.
    for (const done of [...this.settleWaits]) done();
    this.client.dispose();
    this.http.dispose();
  }
}

/** Which credentials a pull uses, as a digest (never the secret itself): pulls share only with equal ones. */
function credentialsIdentity(auth: AuthConfig | undefined): string {
  if (!auth) return 'agent-credentials';
  const hash = createHash('sha256').update(JSON.stringify([auth.username ?? null, auth.password ?? null, auth.server_address ?? null]));
  return `auth-${hash.digest('hex').slice(0, 32)}`;
}

/** "45", "1.2", "0.3": MB (10^6 bytes) with one decimal below 10. */
export function formatMegabytes(bytes: number): string {
  const mb = bytes / 1_000_000;
  return mb >= 10 ? String(Math.round(mb)) : (Math.round(mb * 10) / 10).toFixed(1);
}
