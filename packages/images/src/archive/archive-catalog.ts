// One image archive file read as a tar, streaming, with the package's own
// strict tar reader — never extracted onto the host. The first read makes
// a catalog: every entry by its cleaned name (an absolute name, a `..`, a
// device, a name twice is refused naming the entry), each regular file's
// size and sha256 (and, asked for, the sha256 of its gunzipped content: a
// docker-archive layer's diff id), and the bodies of the small files
// (index.json, manifests, configs) kept in memory. A second read streams
// only the members the store lacks into the blob store, each verified
// again against the digest and size the first read found: an archive
// changed between the reads fails there, never stores a wrong blob. Links
// are names inside the archive (skopeo's docker-archive has
// `<id>/layer.tar -> ../<hex>.tar`): resolved inside it, never outside.
import { createHash } from 'node:crypto';
import { constants as fsc, promises as fsp, type Stats } from 'node:fs';
import * as path from 'node:path';
import { createGunzip } from 'node:zlib';
import { errorMessage } from '@csiplug/core';
import type { BlobStore } from '../store/blob-store';
import { readTar, type TarEntryType } from '../unpack/tar-reader';
import { TarFormatError } from '../unpack/errors';
import { detectCompression } from '../unpack/layer-stream';
import type { LayerCompression } from '../media-types';
import { ImageArchiveError, ImageArchiveUnreadableError } from './archive-errors';

/** Files up to this size are kept in memory by the first read (manifests, configs, index.json: registries cap manifests at 4 MiB). */
export const MAX_ARCHIVE_DOCUMENT_BYTES = 4 * 1024 * 1024;
/** At most this many bytes of small files kept in memory for one archive. */
const MAX_KEPT_BYTES = 64 * 1024 * 1024;
/** More entries than this is no image archive. */
const MAX_ENTRIES = 100_000;
const MAX_LINK_HOPS = 16;

export interface ArchiveMember {
  readonly name: string;
  readonly type: TarEntryType;
  readonly size: number;
  /** Where a link points (a symlink: relative to its dir; a hard link: from the archive's root). */
  readonly linkname: string;
  /** sha256 of a regular file's bytes. */
  readonly digest?: string;
  /** What the file's first bytes say it is compressed with. */
  readonly compression?: LayerCompression;
  /** sha256 of the gunzipped bytes of a gzip file, when the catalog was asked for them; undefined if they would not gunzip. */
  readonly gunzippedDigest?: string;
  /** Why the file would not gunzip. */
  readonly gunzipError?: string;
}

export interface CatalogOptions {
  /** Hash the gunzipped content of gzip files too (docker-archive layers, checked against diff ids). */
  readonly gunzipDigests?: boolean;
}

/** An archive file opened once: both reads go through this handle, so a file renamed over it meanwhile is not mixed in. */
export class ArchiveFile {
  private constructor(
    readonly archivePath: string,
    private readonly handle: fsp.FileHandle,
    readonly stats: Stats,
  ) {}

  static async open(archivePath: string): Promise<ArchiveFile> {
    let handle: fsp.FileHandle;
    try {
      handle = await fsp.open(archivePath, fsc.O_RDONLY);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      const detail =
        code === 'ENOENT'
          ? 'does not exist on this node'
          : code === 'EACCES' || code === 'EPERM'
            ? 'cannot be read by the agent (permission denied)'
            : `cannot be opened (${errorMessage(err)})`;
      throw new ImageArchiveUnreadableError(archivePath, detail, { cause: err });
    }
    try {
      const stats = await handle.stat();
      if (!stats.isFile()) throw new ImageArchiveUnreadableError(archivePath, 'is not a regular file');
      return new ArchiveFile(archivePath, handle, stats);
    } catch (err) {
      await handle.close().catch(() => undefined);
      throw err;
    }
  }

  /** Runs `read` over the archive's bytes from the start (a new stream each call, destroyed after: a read may stop early). */
  async read<T>(read: (bytes: AsyncIterable<Buffer>) => Promise<T>): Promise<T> {
    const stream = this.handle.createReadStream({ start: 0, autoClose: false, highWaterMark: 1 << 20 });
    try {
      return await read(stream);
    } finally {
      stream.destroy();
    }
  }

  async close(): Promise<void> {
    await this.handle.close().catch(() => undefined);
  }
}

/** The cleaned name of an entry ('' for the archive's root), or an error naming it. */
export function memberName(archive: string, raw: string): string {
  const stripped = raw.replace(/^(\.\/)+/, '');
  if (stripped.startsWith('/'))
    throw new ImageArchiveError(archive, raw, 'an absolute name; an image archive names its files from its own root');
  const parts = stripped.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.includes('..')) throw new ImageArchiveError(archive, raw, 'a name with a ".." segment, which climbs out of the archive');
  return parts.join('/');
}

export class ArchiveCatalog {
  private constructor(
    readonly archive: string,
    private readonly members: ReadonlyMap<string, ArchiveMember>,
    private readonly kept: ReadonlyMap<string, Buffer>,
  ) {}

  /** The first read: every entry, checked; small bodies kept; each file hashed. */
  static async read(file: ArchiveFile, options: CatalogOptions = {}, signal?: AbortSignal): Promise<ArchiveCatalog> {
    const archive = file.archivePath;
    const members = new Map<string, ArchiveMember>();
    const kept = new Map<string, Buffer>();
    let keptBytes = 0;
    try {
      await file.read(async (bytes) => {
        for await (const entry of readTar(bytes, { maxEntryBytes: file.stats.size })) {
          signal?.throwIfAborted();
          const name = memberName(archive, entry.name);
          if (name === '') continue;
          const before = members.get(name);
          // A directory listed twice is harmless; a file or link twice leaves unclear which one is meant.
          if (before && (before.type !== 'directory' || entry.type !== 'directory'))
            throw new ImageArchiveError(archive, name, 'appears twice in the archive; which one is meant is unclear');
          if (members.size >= MAX_ENTRIES)
            throw new ImageArchiveError(archive, name, `more than ${MAX_ENTRIES} entries; no image archive has so many`);
          if (entry.type !== 'file' && entry.type !== 'directory' && entry.type !== 'symlink' && entry.type !== 'hardlink')
            throw new ImageArchiveError(archive, name, `a ${entry.type} entry; an image archive holds files, directories and links only`);
          if (entry.type !== 'file') {
            members.set(name, { name, type: entry.type, size: 0, linkname: entry.linkname });
            continue;
          }
          const keep = entry.size <= MAX_ARCHIVE_DOCUMENT_BYTES && keptBytes + entry.size <= MAX_KEPT_BYTES;
          const hashed = await hashBody(entry.body, keep, options.gunzipDigests === true);
          if (keep) {
            kept.set(name, hashed.bytes!);
            keptBytes += entry.size;
          }
          members.set(name, {
            name,
            type: 'file',
            size: entry.size,
            linkname: '',
            digest: hashed.digest,
            compression: hashed.compression,
            ...(hashed.gunzippedDigest !== undefined ? { gunzippedDigest: hashed.gunzippedDigest } : {}),
            ...(hashed.gunzipError !== undefined ? { gunzipError: hashed.gunzipError } : {}),
          });
        }
      });
    } catch (err) {
      throw asArchiveError(archive, err);
    }
    return new ArchiveCatalog(archive, members, kept);
  }

  /** The regular file `name` stands for, links inside the archive followed; an error when there is none. */
  resolve(name: string, what: string): ArchiveMember {
    let current = memberName(this.archive, name);
    for (let hop = 0; hop <= MAX_LINK_HOPS; hop++) {
      const m = this.members.get(current);
      if (!m) throw new ImageArchiveError(this.archive, current, `${what} names it, but the archive has no such file`);
      if (m.type === 'file') return m;
      if (m.type === 'directory') throw new ImageArchiveError(this.archive, current, `${what} names it, but it is a directory`);
      const target = m.type === 'symlink' ? path.posix.join(path.posix.dirname(current), m.linkname) : m.linkname;
      if (m.linkname.startsWith('/') || target === '..' || target.startsWith('../'))
        throw new ImageArchiveError(this.archive, current, `a link to ${JSON.stringify(m.linkname)}, outside the archive`);
      current = memberName(this.archive, target);
    }
    throw new ImageArchiveError(this.archive, name, `more than ${MAX_LINK_HOPS} links in a row (a loop?)`);
  }

  /** The bytes of a small file (a JSON document), links followed. */
  document(name: string, what: string): Buffer {
    const m = this.resolve(name, what);
    const bytes = this.kept.get(m.name);
    if (bytes) return bytes;
    throw new ImageArchiveError(
      this.archive,
      m.name,
      `${what} is ${m.size} bytes, more than csiplug reads as a document (${MAX_ARCHIVE_DOCUMENT_BYTES} bytes, 64 MiB of small files in all)`,
    );
  }

  has(name: string): boolean {
    return this.members.has(memberName(this.archive, name));
  }

  /** Whether a small file's bytes are in memory (a small blob is stored from them, with no second read). */
  keptBody(name: string): Buffer | undefined {
    return this.kept.get(name);
  }
}

/**
 * The second read: each member named in `wanted` (by its resolved name)
 * streamed into the store as the blob the catalog found, verified on the way.
 * Members kept in memory are written from memory. Throws if one is missing
 * now (the file changed since the first read).
 */
export async function copyMembers(
  file: ArchiveFile,
  catalog: ArchiveCatalog,
  wanted: ReadonlyMap<string, { readonly digest: string; readonly size: number }>,
  blobs: BlobStore,
  signal?: AbortSignal,
): Promise<void> {
  const left = new Map(wanted);
  for (const [name, blob] of [...left]) {
    const bytes = catalog.keptBody(name);
    if (!bytes) continue;
    await blobs.putBytes(blob.digest, bytes);
    left.delete(name);
  }
  if (left.size === 0) return;
  try {
    await file.read(async (bytes) => {
      for await (const entry of readTar(bytes, { maxEntryBytes: file.stats.size })) {
        signal?.throwIfAborted();
        const name = memberName(file.archivePath, entry.name);
        const blob = left.get(name);
        if (!blob || entry.type !== 'file') continue;
        await blobs.write(blob.digest, blob.size, entry.body);
        left.delete(name);
        if (left.size === 0) return;
      }
    });
  } catch (err) {
    throw asArchiveError(file.archivePath, err);
  }
  if (left.size === 0) return;
  const [missing] = left.keys();
  throw new ImageArchiveError(
    file.archivePath,
    missing!,
    'was there at the first read of the archive and is gone now: the file changed while it was loaded',
  );
}

interface HashedBody {
  digest: string;
  compression: LayerCompression;
  bytes?: Buffer;
  gunzippedDigest?: string;
  gunzipError?: string;
}

/** Reads a body once: its sha256, its compression, its bytes when kept, and its gunzipped sha256 when asked. */
async function hashBody(body: AsyncIterable<Buffer>, keep: boolean, gunzip: boolean): Promise<HashedBody> {
  const raw = createHash('sha256');
  const parts: Buffer[] = [];
  let compression: LayerCompression | undefined;
  let gz: ReturnType<typeof createGunzip> | undefined;
  let gzError: Error | undefined;
  const plain = createHash('sha256');
  for await (const chunk of body) {
    if (compression === undefined) {
      compression = detectCompression(chunk);
      if (compression === 'gzip' && gunzip) {
        gz = createGunzip();
        gz.on('data', (d: Buffer) => plain.update(d));
        gz.on('error', (err) => (gzError ??= err));
      }
    }
    raw.update(chunk);
    if (keep) parts.push(chunk);
    if (gz && !gzError && !gz.write(chunk)) {
      await new Promise<void>((resolve) => {
        const done = () => {
          gz!.off('drain', done).off('error', done);
          resolve();
        };
        gz!.once('drain', done).once('error', done);
      });
    }
  }
  const out: HashedBody = { digest: `sha256:${raw.digest('hex')}`, compression: compression ?? 'none' };
  if (keep) out.bytes = Buffer.concat(parts);
  if (gz) {
    if (!gzError) {
      await new Promise<void>((resolve) => {
        gz!.once('end', resolve).once('error', () => resolve());
        gz!.end();
      });
    }
    if (gzError) out.gunzipError = gzError.message;
    else out.gunzippedDigest = `sha256:${plain.digest('hex')}`;
  }
  return out;
}

function asArchiveError(archive: string, err: unknown): unknown {
  if (err instanceof TarFormatError) {
    const detail = /\(byte \d+ of the uncompressed tar\): (.*?); the layer blob/s.exec(err.message)?.[1] ?? err.message;
    return new ImageArchiveError(archive, err.entryName, `the archive is not a well-formed tar at byte ${err.offset}: ${detail}`, {
      cause: err,
    });
  }
  return err;
}
