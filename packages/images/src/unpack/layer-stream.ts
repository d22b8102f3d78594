// Opens a layer blob on disk as its uncompressed tar bytes, hashing them on
// the way so the caller can check the diff id (sha256 of the uncompressed
// tar, from the image config's rootfs.diff_ids) once the tar is read.
//
// Compression: the media type must be one of the OCI or Docker layer types;
// which decompressor runs is decided by the blob's first bytes, as Docker's
// archive.DecompressStream does, so a blob whose media type and content
// disagree still unpacks (and is still checked against its diff id).
// gzip runs in node:zlib. zstd: Node 20's zlib has none, and we spawn
// Debian's /usr/bin/zstd -dc rather than add the pure-JS fzstd package:
// no new dependency to vet, native speed (fzstd is several times slower and
// would run on the agent's event loop thread), and the decompressor runs in
// its own process, so a hostile frame costs that process, not the agent.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { constants as fsc, promises as fsp } from 'node:fs';
import { type Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { layerCompression, type LayerCompression } from '../media-types';
import { LayerCompressionError } from './errors';

export const ZSTD_BIN = '/usr/bin/zstd';
/**
 * Output chunk of gunzip: zlib's 16 KiB default made every 16 KiB of a file
 * one write on the thread pool and one hash update; 256 KiB cuts those
 * sixteen-fold for large files (bench/images/profile.js).
 */
const GUNZIP_CHUNK_BYTES = 256 * 1024;

/** The compression the blob's first bytes show (gzip 1f 8b, zstd 28 b5 2f fd). */
export function detectCompression(head: Buffer): LayerCompression {
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) return 'gzip';
  if (head.length >= 4 && head.readUInt32LE(0) === 0xfd2fb528) return 'zstd';
  return 'none';
}

export interface OpenedLayer {
  /** The uncompressed tar. */
  readonly tar: AsyncIterable<Buffer>;
  readonly compression: LayerCompression;
  /**
   * Reads whatever the tar reader left (padding after the end marker) and
   * returns "sha256:<hex>" of the whole uncompressed stream. Rejects when
   * decompression failed.
   */
  finish(): Promise<string>;
  /** Stops reading and releases the file and any zstd process. */
  destroy(): void;
}

/** Opens `blobPath` (a layer of `mediaType`) for reading as an uncompressed tar. */
export async function openLayer(blobPath: string, mediaType: string, zstdBin = ZSTD_BIN): Promise<OpenedLayer> {
  // The media type must be a layer this agent takes (foreign layers and unknown types are refused, naming the blob); the first bytes choose the decompressor, as Docker does.
  try {
    layerCompression(mediaType, blobPath);
  } catch (err) {
    throw new LayerCompressionError(blobPath, 'its media type is not an image layer this agent unpacks', err);
  }
  const handle = await fsp.open(blobPath, fsc.O_RDONLY | fsc.O_NOFOLLOW);
  let compression: LayerCompression;
  try {
    const head = Buffer.alloc(4);
    const { bytesRead } = await handle.read(head, 0, 4, 0);
    compression = detectCompression(head.subarray(0, bytesRead));
  } catch (err) {
    await handle.close();
    throw err;
  }
  const file = handle.createReadStream({ start: 0, highWaterMark: 1 << 20 });
  let plain: Readable;
  let processDone: Promise<void> = Promise.resolve();
  let killZstd = (): void => {};
  if (compression === 'gzip') {
    plain = file.pipe(createGunzip({ chunkSize: GUNZIP_CHUNK_BYTES }));
    file.on('error', (err) => plain.destroy(err));
  } else if (compression === 'zstd') {
    const child = spawn(zstdBin, ['-dc', '-q'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-2000)));
    file.pipe(child.stdin);
    child.stdin.on('error', () => {}); // EPIPE when zstd quits early; its exit status says why
    plain = child.stdout;
    killZstd = () => child.kill('SIGKILL');
    processDone = new Promise((resolve, reject) => {
      child.on('error', (err) => reject(new LayerCompressionError(blobPath, `cannot run ${zstdBin} (install Debian's zstd package)`, err)));
      child.on('close', (code, signal) => {
        if (code === 0) resolve();
        else reject(new LayerCompressionError(blobPath, `zstd failed (${signal ?? `exit ${code}`}): ${stderr.trim() || 'no message'}`));
      });
    });
    processDone.catch(() => {}); // observed in finish(); a destroyed layer may never ask
  } else {
    plain = file;
  }
  const hash = createHash('sha256');
  let failed: unknown;
  plain.on('error', (err) => (failed ??= err));
  const iterator = plain[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const tar: AsyncIterable<Buffer> = {
    [Symbol.asyncIterator]: () => ({
      next: async () => {
        try {
          const r = await iterator.next();
          if (!r.done) hash.update(r.value);
          return r;
        } catch (err) {
          throw new LayerCompressionError(blobPath, `the ${compression} stream is corrupt`, err);
        }
      },
    }),
  };
  return {
    tar,
    compression,
    finish: async () => {
      try {
        for (;;) {
          const r = await iterator.next();
          if (r.done) break;
          hash.update(r.value);
        }
      } catch (err) {
        throw new LayerCompressionError(blobPath, `the ${compression} stream is corrupt`, err);
      }
      if (failed) throw new LayerCompressionError(blobPath, `the ${compression} stream is corrupt`, failed);
      await processDone;
      await handle.close().catch(() => {});
      return `sha256:${hash.digest('hex')}`;
    },
    destroy: () => {
      killZstd();
      plain.destroy();
      file.destroy();
      void handle.close().catch(() => {});
    },
  };
}
