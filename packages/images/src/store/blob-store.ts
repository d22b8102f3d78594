// A content-addressed blob store in one directory (0700):
// blobs/<algorithm>/<hex>. A blob is streamed into a temp file in the same
// directory, its digest and size checked on the way, fsynced, then renamed
// into place and the directory fsynced: a kill -9 at any point leaves either
// no file under the digest or the whole, verified blob. Temp files a crash
// left behind are removed when the store opens. A full disk gives an error
// naming the blob and the directory, and leaves nothing.
import { randomBytes } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import { chmod, mkdir, open, readFile, readdir, rename, rm, stat, unlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { DigestVerifier, parseDigest, type Digest, type DigestAlgorithm } from '../digest';
import { ImageStoreError, ImageStoreFullError } from '../errors';

const ALGORITHMS: readonly DigestAlgorithm[] = ['sha256', 'sha512'];
const TEMP_PREFIX = '.partial-';

export interface BlobWriteProgress {
  (bytesSoFar: number): void;
}

export class BlobStore {
  private constructor(
    /** The store's root directory. */
    readonly dir: string,
  ) {}

  /** Opens (creating, 0700) the store in `dir` and removes leftover temp files. */
  static async open(dir: string): Promise<BlobStore> {
    try {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      await chmod(dir, 0o700);
      for (const alg of ALGORITHMS) {
        const algDir = join(dir, 'blobs', alg);
        await mkdir(algDir, { recursive: true, mode: 0o700 });
        for (const name of await readdir(algDir)) {
          if (name.startsWith(TEMP_PREFIX)) await rm(join(algDir, name), { force: true });
        }
      }
    } catch (err) {
      throw new ImageStoreError(dir, 'open the image store', err);
    }
    return new BlobStore(dir);
  }

  /** Where blob `digest` lives (whether or not it is there). */
  path(digest: string): string {
    const d = parseDigest(digest);
    return join(this.dir, 'blobs', d.algorithm, d.hex);
  }

  async has(digest: string): Promise<boolean> {
    return (await this.size(digest)) !== undefined;
  }

  /** The blob's size in bytes, or undefined when it is not in the store. */
  async size(digest: string): Promise<number | undefined> {
    try {
      const st = await stat(this.path(digest));
      return st.isFile() ? st.size : undefined;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw new ImageStoreError(this.path(digest), 'stat', err);
    }
  }

  /** The blob's bytes (for manifests and configs; layers are read as files). */
  async read(digest: string): Promise<Buffer> {
    try {
      return await readFile(this.path(digest));
    } catch (err) {
      throw new ImageStoreError(this.path(digest), 'read', err);
    }
  }

  async remove(digest: string): Promise<void> {
    try {
      await rm(this.path(digest), { force: true });
    } catch (err) {
      throw new ImageStoreError(this.path(digest), 'remove', err);
    }
  }

  /** The temp files now in the store (a crash's leftovers before open; writes in flight after). */
  async tempFiles(): Promise<string[]> {
    const out: string[] = [];
    for (const alg of ALGORITHMS) {
      const algDir = join(this.dir, 'blobs', alg);
      for (const name of await readdir(algDir).catch(() => [] as string[])) if (name.startsWith(TEMP_PREFIX)) out.push(join(algDir, name));
    }
    return out;
  }

  /** Stores bytes held in memory, verified against `digest`. */
  async putBytes(digest: string, bytes: Uint8Array): Promise<string> {
    return this.write(
      digest,
      bytes.length,
      (async function* () {
        yield Buffer.from(bytes);
      })(),
    );
  }

  /**
   * Streams `chunks` into the store as blob `digest` of `size` bytes. The
   * blob appears under its digest only once complete and verified; on any
   * failure (mismatch, a broken stream, a full disk) the temp file is
   * removed and the error thrown. Returns the blob's path.
   */
  async write(digest: string, size: number, chunks: AsyncIterable<Uint8Array>, onProgress?: BlobWriteProgress): Promise<string> {
    const d = parseDigest(digest);
    const finalPath = this.path(d.value);
    const algDir = join(this.dir, 'blobs', d.algorithm);
    const tempPath = join(algDir, `${TEMP_PREFIX}${d.hex}-${randomBytes(6).toString('hex')}`);
    const verifier = new DigestVerifier(d, size, `blob ${d.value}`);
    let fh: FileHandle | undefined;
    try {
      fh = await open(tempPath, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL, 0o600);
      for await (const chunk of chunks) {
        verifier.update(chunk);
        await writeAll(fh, chunk);
        onProgress?.(verifier.bytesReceived);
      }
      verifier.verify();
      await fh.sync();
      await fh.close();
      fh = undefined;
      await rename(tempPath, finalPath);
      await syncDir(algDir);
      return finalPath;
    } catch (err) {
      await fh?.close().catch(() => undefined);
      await unlink(tempPath).catch(() => undefined);
      throw this.translate(err, d, tempPath);
    }
  }

  private translate(err: unknown, d: Digest, tempPath: string): unknown {
    const code = (err as NodeJS.ErrnoException | undefined)?.code;
    if (code === 'ENOSPC' || code === 'EDQUOT') return new ImageStoreFullError(d.value, this.dir, { cause: err });
    if (typeof code === 'string' && code.startsWith('E') && (err as NodeJS.ErrnoException).syscall !== undefined) {
      return new ImageStoreError(tempPath, `write blob ${d.value} into`, err);
    }
    return err;
  }
}

async function writeAll(fh: FileHandle, chunk: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < chunk.length) {
    const { bytesWritten } = await fh.write(chunk, offset, chunk.length - offset);
    offset += bytesWritten;
  }
}

/** fsyncs a directory so a rename in it survives a power cut. */
export async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, fsConstants.O_RDONLY | fsConstants.O_DIRECTORY);
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
