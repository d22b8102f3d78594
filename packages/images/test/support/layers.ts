// Test support: layer blobs on disk (built with our tar writer or GNU tar,
// then gzip'd by node:zlib or zstd'd by /usr/bin/zstd), and a snapshot of a
// directory tree that two roots can be compared by.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { lstatSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { gzipSync } from 'node:zlib';
import type { LayerBlob } from '../../src';
import { buildTar, type TestTarEntry } from '../../src/testing';

export type Compression = 'none' | 'gzip' | 'zstd';

const MEDIA_TYPES: Record<Compression, string> = {
  none: 'application/vnd.oci.image.layer.v1.tar',
  gzip: 'application/vnd.oci.image.layer.v1.tar+gzip',
  zstd: 'application/vnd.oci.image.layer.v1.tar+zstd',
};

export function sha256(data: Buffer): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

/** Writes a layer blob for `tar` (entries or raw tar bytes) into `dir` and returns it with its true diff id. */
export function writeLayer(dir: string, name: string, tar: readonly TestTarEntry[] | Buffer, compression: Compression = 'gzip'): LayerBlob {
  const raw = Buffer.isBuffer(tar) ? tar : buildTar(tar);
  const blob =
    compression === 'gzip'
      ? gzipSync(raw)
      : compression === 'zstd'
        ? execFileSync('/usr/bin/zstd', ['-q', '-c', '-'], { input: raw, maxBuffer: 1 << 30 })
        : raw;
  const blobPath = path.join(dir, `${name}.blob`);
  writeFileSync(blobPath, blob);
  return { blobPath, mediaType: MEDIA_TYPES[compression], diffId: sha256(raw) };
}

/**
 * One line per path under `root`: type, mode, owner, and the content hash,
 * link target or device number. Directory mtimes are left out (deleting a
 * child changes them in every mode); other mtimes are in.
 */
export function snapshotTree(root: string): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    for (const name of readdirSync(path.join(root, rel)).sort()) {
      const r = rel ? `${rel}/${name}` : name;
      const p = path.join(root, r);
      const st = lstatSync(p);
      const head = `${r} ${(st.mode & 0o7777).toString(8)} ${st.uid}:${st.gid}`;
      if (st.isDirectory()) {
        out.push(`${head} dir`);
        walk(r);
      } else if (st.isSymbolicLink()) out.push(`${head} -> ${readlinkSync(p)}`);
      else if (st.isFile()) out.push(`${head} file ${sha256(readFileSync(p)).slice(7, 19)} mtime=${Math.floor(st.mtimeMs / 1000)}`);
      else
        out.push(`${head} ${st.isCharacterDevice() ? 'char' : st.isBlockDevice() ? 'block' : st.isFIFO() ? 'fifo' : 'other'} ${st.rdev}`);
    }
  };
  walk('');
  return out;
}
