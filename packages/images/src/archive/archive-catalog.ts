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
import { DigestMismatchError, ImageError } from '../errors';
import { ImageArchiveError, ImageArchiveRefusedError, ImageArchiveUnreadableError } from './archive-errors';

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

/**
 * Whether this agent reads an archive at `realPath` (its real path: no
 * link in it) for a job; a sentence saying which path and what to change
 * when not. The agent gives the runner's allowed_host_paths check
 * (image-policy.ts); without one every path is read (tests, tools).
 */
export type ArchivePathPolicy = (realPath: string) => string | undefined;

export interface ArchiveOpenOptions {
  readonly pathPolicy?: ArchivePathPolicy;
}

/** Bytes read from the archive at a time. */
const READ_CHUNK_BYTES = 1 << 20;

/**
 * An archive file opened once: both reads go through this handle, so a
 * file renamed over it meanwhile is not mixed in. The agent runs as root
 * and a job names the path: the path must be within the agent's policy,
 * checked on its real path before anything is opened and again on what was
 * opened (a link swapped in between is caught); it must be a regular file
 * before it is opened (a FIFO would block the open forever, a device
 * would be opened as root), and the file opened must be that file (dev
 * and inode compared). The open never blocks and never takes a terminal.
 */
export class ArchiveFile {
  private constructor(
    readonly archivePath: string,
    private readonly handle: fsp.FileHandle,
    readonly stats: Stats,
  ) {}

  static async open(archivePath: string, options: ArchiveOpenOptions = {}): Promise<ArchiveFile> {
    const policy = options.pathPolicy;
    if (!path.isAbsolute(archivePath))
      throw new ImageArchiveUnreadableError(archivePath, 'is not an absolute path; name the archive by its absolute path on this node');
    let real: string;
    try {
      real = await fsp.realpath(archivePath);
    } catch (err) {
      // A path the policy refuses is refused as such, existing or not: a job learns nothing of the host's files.
      const refusal = policy?.(path.resolve(archivePath));
      if (refusal !== undefined) throw new ImageArchiveRefusedError(archivePath, refusal);
      throw unreadable(archivePath, err);
    }
    const refusal = policy?.(real);
    // Named by the path as written when that is refused too: a refusal must not tell a job where a host link leads.
    if (refusal !== undefined) throw new ImageArchiveRefusedError(archivePath, policy!(path.resolve(archivePath)) ?? refusal);
    let before: Stats;
    try {
      before = await fsp.stat(real);
    } catch (err) {
      throw unreadable(archivePath, err);
    }
    if (!before.isFile()) throw new ImageArchiveUnreadableError(archivePath, `is ${fileKind(before)}, not a regular file`);
    let handle: fsp.FileHandle;
    try {
      // O_NONBLOCK: a FIFO swapped in after the stat does not hang the open; O_NOFOLLOW: nor does a link swapped in.
      handle = await fsp.open(real, fsc.O_RDONLY | fsc.O_NONBLOCK | fsc.O_NOCTTY | fsc.O_NOFOLLOW);
    } catch (err) {
      throw unreadable(archivePath, err);
    }
    try {
      const stats = await handle.stat();
      if (!stats.isFile() || stats.dev !== before.dev || stats.ino !== before.ino)
        throw new ImageArchiveUnreadableError(archivePath, 'was replaced while it was opened');
      if (policy) {
        // What was opened, by the kernel's word (a directory on the way swapped for a link is caught here);
        // unknown (no /proc) is refused, never taken for the path checked before the open.
        const opened = await fsp.readlink(`/proc/self/fd/${handle.fd}`).catch(() => undefined);
        if (opened === undefined)
          throw new ImageArchiveUnreadableError(
            archivePath,
            'was opened, but what was opened cannot be read back from /proc/self/fd to check it',
          );
        const refusedNow = policy(opened);
        if (refusedNow !== undefined) throw new ImageArchiveRefusedError(archivePath, refusedNow);
      }
      return new ArchiveFile(archivePath, handle, stats);
    } catch (err) {
      await handle.close().catch(() => undefined);
      throw err;
    }
  }

  /** Runs `read` over the archive's bytes from the start (positional reads: the handle stays open for the next read). */
  async read<T>(read: (bytes: AsyncIterable<Buffer>) => Promise<T>): Promise<T> {
    return read(this.bytes());
  }

  private async *bytes(): AsyncGenerator<Buffer> {
    let position = 0;
    for (;;) {
      const buf = Buffer.allocUnsafe(READ_CHUNK_BYTES);
      let bytesRead: number;
      try {
        ({ bytesRead } = await this.handle.read(buf, 0, buf.length, position));
      } catch (err) {
        throw new ImageArchiveUnreadableError(this.archivePath, `could not be read at byte ${position} (${errorMessage(err)})`, {
          cause: err,
        });
      }
      if (bytesRead === 0) return;
      position += bytesRead;
      yield bytesRead < buf.length ? buf.subarray(0, bytesRead) : buf;
    }
  }

  async close(): Promise<void> {
    await this.handle.close().catch(() => undefined);
  }
}

function unreadable(archivePath: string, err: unknown): ImageArchiveUnreadableError {
  const code = (err as NodeJS.ErrnoException).code;
  const detail =
    code === 'ENOENT'
      ? 'does not exist on this node'
      : code === 'EACCES' || code === 'EPERM'
        ? 'cannot be read by the agent (permission denied)'
        : `cannot be opened (${errorMessage(err)})`;
  return new ImageArchiveUnreadableError(archivePath, detail, { cause: err });
}

function fileKind(st: Stats): string {
  if (st.isFIFO()) return 'a FIFO (named pipe)';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  if (st.isDirectory()) return 'a directory';
  if (st.isSocket()) return 'a socket';
  return 'not a file';
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
        for await (const entry of readTar(notCompressedWhole(archive, bytes), { maxEntryBytes: file.stats.size })) {
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
          const hashed = await hashBody(abortable(entry.body, signal), keep, options.gunzipDigests === true);
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
  let current: string | undefined;
  try {
    await file.read(async (bytes) => {
      for await (const entry of readTar(bytes, { maxEntryBytes: file.stats.size })) {
        signal?.throwIfAborted();
        const name = memberName(file.archivePath, entry.name);
        const blob = left.get(name);
        if (!blob || entry.type !== 'file') continue;
        current = name;
        await blobs.write(blob.digest, blob.size, abortable(entry.body, signal));
        current = undefined;
        left.delete(name);
        if (left.size === 0) return;
      }
    });
  } catch (err) {
    if (signal?.aborted) throw err;
    throw copyError(file.archivePath, current, err);
  }
  if (left.size === 0) return;
  const [missing] = left.keys();
  throw new ImageArchiveError(
    file.archivePath,
    missing!,
    'was there at the first read of the archive and is gone now: the file changed while it was loaded',
  );
}

/** A failure of the second read said as the archive's: content changed since the first read, or the read itself failing. */
function copyError(archive: string, member: string | undefined, err: unknown): unknown {
  if (err instanceof DigestMismatchError)
    return new ImageArchiveError(
      archive,
      member ?? '(the archive)',
      `changed since it was checked at the first read of the archive (${err.expected} expected, ${err.got} read now): the file was rewritten while it was loaded`,
      {
        cause: err,
        remedy: 'nothing of it was stored under its digest: let whatever writes the archive finish, then start the task again',
      },
    );
  const asArchive = asArchiveError(archive, err);
  // The store's own errors (a full disk) and the archive's say what they are; anything else is named as this archive's.
  if (asArchive instanceof ImageError) return asArchive;
  return new ImageArchiveError(archive, member ?? '(the archive)', `copying it into the image store failed: ${errorMessage(err)}`, {
    cause: err,
    remedy: 'start the task again; if it fails the same way, the agent log has the cause',
  });
}

/** The chunks of `body`, stopping at the first one after `signal` fires (a cancelled load stops within a chunk). */
async function* abortable(body: AsyncIterable<Buffer>, signal: AbortSignal | undefined): AsyncGenerator<Buffer> {
  for await (const chunk of body) {
    signal?.throwIfAborted();
    yield chunk;
  }
}

/** The archive's bytes, refused at byte 0 when the whole archive is gzip or zstd compressed (an image archive is a plain tar). */
async function* notCompressedWhole(archive: string, bytes: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  let first = true;
  for await (const chunk of bytes) {
    if (first) {
      first = false;
      const compression = detectCompression(chunk);
      if (compression !== 'none')
        throw new ImageArchiveError(
          archive,
          '(the archive)',
          `is ${compression}-compressed as a whole (byte 0 is ${compression}'s magic number); an image archive is a plain tar`,
          { remedy: `decompress it first (${compression === 'gzip' ? 'gunzip' : 'zstd -d'}) and name the .tar in config.image` },
        );
    }
    yield chunk;
  }
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
    // A header whose checksum fails is no tar header: its "name" is whatever bytes the file has there (a host file's content), never said.
    const notAHeader = detail === 'header checksum mismatch';
    return new ImageArchiveError(
      archive,
      notAHeader ? '(the archive)' : err.entryName,
      `the archive is not a well-formed tar at byte ${err.offset}: ${notAHeader ? `the ${TAR_HEADER_BYTES}-byte header there is not a tar header (its checksum does not add up)` : detail}`,
      // The cause's message carries the name: not kept.
      notAHeader ? {} : { cause: err },
    );
  }
  return err;
}

const TAR_HEADER_BYTES = 512;
