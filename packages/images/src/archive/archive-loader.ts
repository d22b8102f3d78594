// Loads an image from an archive file on this node (`oci-archive:PATH[:REF]`,
// `docker-archive:PATH[:NAME:TAG]`) into the same store a pull fills: this
// replaces only the registry fetch — blobs go into the content-addressed
// BlobStore (each verified by digest and size), the image into the
// ImageIndex under the archive reference, and TaskImages unpacks, shares
// and collects it as a pulled image. The archive is read with the
// package's tar reader and never extracted by path (archive-catalog.ts);
// every check runs on the first read, before anything is stored, so a
// hostile or corrupt archive stores nothing. A load that fails later (the
// file changed between the reads, a full disk) leaves only whole, verified
// blobs, as a pull cut short does (the next load uses them), and no index
// entry names a blob that is not there.
//
// The archive is read at every load: the file is the truth (Nomad's docker
// driver loads its `load` archive at every start too), and blobs the store
// already has are not copied again, so a reload of an image whose manifest
// is stored copies nothing. force_pull and image_pull_timeout mean asking a
// registry again and bounding that; a local file has neither, so they do
// not apply here. Loads of one reference running at once share one read.
import { type Clock, type Logger, NullLogger, RealClock } from '@csiplug/core';
import { UnsupportedImageError } from '../errors';
import type { Platform } from '../manifest';
import { nodePlatform } from '../platform';
import type { PulledImage } from '../puller';
import { parseImageReference, type ArchiveReference } from '../reference';
import { SharedWork } from '../shared-work';
import type { BlobStore } from '../store/blob-store';
import type { ImageIndex } from '../store/image-index';
import { ImageArchiveUnreadableError } from './archive-errors';
import { ArchiveCatalog, ArchiveFile, copyMembers, type ArchivePathPolicy } from './archive-catalog';
import type { ArchiveImage } from './archive-image';
import { readDockerArchive } from './docker-archive';
import { readOciArchive } from './oci-archive';

export type ArchiveLoadEvent =
  | { readonly kind: 'loading'; readonly reference: string; readonly path: string; readonly message: string }
  | { readonly kind: 'loaded'; readonly reference: string; readonly digest: string; readonly fromStore: boolean; readonly message: string };

export interface ArchiveLoaderOptions {
  readonly clock?: Clock;
  readonly logger?: Logger;
  /** This node's platform (an OCI archive's index goes to it); detected when not given. */
  readonly platform?: Platform;
  /** Which archive paths this agent reads (the agent's allowed_host_paths); every path when not given. */
  readonly pathPolicy?: ArchivePathPolicy;
}

export interface ArchiveLoadOptions {
  readonly signal?: AbortSignal;
  readonly onProgress?: (event: ArchiveLoadEvent) => void;
}

export class ArchiveLoader {
  /** Loads under way, shared by the callers of one archive reference. */
  private readonly inflight: SharedWork<ArchiveLoadEvent, PulledImage>;
  private readonly clock: Clock;
  private readonly platform: Platform;
  private readonly pathPolicy: ArchivePathPolicy | undefined;

  constructor(
    readonly blobs: BlobStore,
    readonly index: ImageIndex,
    options: ArchiveLoaderOptions = {},
  ) {
    this.clock = options.clock ?? new RealClock();
    this.inflight = new SharedWork(options.logger ?? new NullLogger(), 'archive load');
    this.platform = options.platform ?? nodePlatform();
    this.pathPolicy = options.pathPolicy;
  }

  /** Stops every load under way (the image service stops): none writes to the store after. */
  dispose(): void {
    this.inflight.abortAll(new Error('the archive loader was disposed'));
  }

  /** Loads the image `reference` (an archive reference) names into the store. */
  load(reference: string, options: ArchiveLoadOptions = {}): Promise<PulledImage> {
    const parsed = parseImageReference(reference);
    if (parsed.kind === 'registry')
      return Promise.reject(new UnsupportedImageError(`image ${reference}`, 'a registry image is pulled, not loaded from an archive'));
    // A load already stopping (its callers gave up) is never joined: it can only fail.
    return this.inflight.run(parsed.canonical, options, (signal, emit) => this.loadOnce(parsed, signal, emit));
  }

  private async loadOnce(ref: ArchiveReference, signal: AbortSignal, emit: (e: ArchiveLoadEvent) => void): Promise<PulledImage> {
    // Let every caller of this tick join before the first event.
    await Promise.resolve();
    emit({ kind: 'loading', reference: ref.canonical, path: ref.path, message: `Loading image from ${ref.path}` });
    const file = await ArchiveFile.open(ref.path, this.pathPolicy ? { pathPolicy: this.pathPolicy } : {}).catch((err: unknown) => {
      throw missingWithReference(ref, err);
    });
    try {
      const catalog = await ArchiveCatalog.read(file, { gunzipDigests: ref.kind === 'docker-archive' }, signal);
      const image: ArchiveImage =
        ref.kind === 'oci-archive'
          ? readOciArchive(catalog, ref.inner, this.platform, ref.canonical)
          : readDockerArchive(catalog, ref.inner);
      // Layers first, the documents naming them last: a manifest in the store always has its blobs.
      const wanted = new Map<string, { digest: string; size: number }>();
      for (const b of image.layerBlobs) if (!(await this.blobs.has(b.digest))) wanted.set(b.member, b);
      const documents = [];
      for (const d of [...image.documents].reverse()) if (!(await this.blobs.has(d.digest))) documents.push(d);
      await copyMembers(file, catalog, wanted, this.blobs, signal);
      // Every caller gone (each released the store's shared lock as it left): nothing more is written, GC may be at work.
      signal.throwIfAborted();
      for (const d of documents) await this.blobs.putBytes(d.digest, d.bytes);
      signal.throwIfAborted();
      await this.index.put({
        reference: ref.canonical,
        manifestDigest: image.manifestDigest,
        manifestMediaType: image.manifestMediaType,
        repoDigest: image.repoDigest,
        configDigest: image.configDigest,
        layers: image.layers,
        pulledAt: this.clock.now(),
      });
      const fromStore = wanted.size === 0 && documents.length === 0;
      emit({
        kind: 'loaded',
        reference: ref.canonical,
        digest: image.repoDigest,
        fromStore,
        message: `Loaded image ${ref.canonical}, digest ${image.repoDigest}${fromStore ? ' (all of it in the store already)' : ''}`,
      });
      return {
        reference: ref.canonical,
        repoDigest: image.repoDigest,
        manifestDigest: image.manifestDigest,
        configDigest: image.configDigest,
        config: image.config,
        layers: image.layers,
        diffIds: image.config.diffIds,
        fromStore,
      };
    } finally {
      await file.close();
    }
  }
}

/** A missing archive whose reference has a second ':': the path may be meant to go on past it (skopeo's reading, and ours, ends it there). */
function missingWithReference(ref: ArchiveReference, err: unknown): unknown {
  const missing = err instanceof ImageArchiveUnreadableError && (err.cause as NodeJS.ErrnoException | undefined)?.code === 'ENOENT';
  if (!missing || ref.inner === undefined) return err;
  return new ImageArchiveUnreadableError(
    ref.path,
    `does not exist on this node (in ${ref.kind}:PATH:REFERENCE everything after the first ':' is read as the reference, here ${JSON.stringify(ref.inner)}: a path with a ':' in it cannot be named)`,
    { cause: err.cause },
  );
}
