// Layer application on real files as root: hostile archives stay inside the
// root, owners and modes (setuid after chown) land, devices only when
// allowed, gzip / zstd / plain layers, a GNU tar layer, and a diff id that
// does not match.
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  writeFileSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { MemoryLogger } from '@csiplug/core';
import { applyLayer, type ApplyLayerResult, type LayerBlob } from '../src';
import { type TestTarEntry } from '../src/testing';
import { unmountAndRemove } from './support/cleanup';
import { type Compression, writeLayer } from './support/layers';

let work: string;
let root: string;
let n = 0;

beforeEach(() => {
  work = mkdtempSync(path.join(tmpdir(), 'apply-layer-'));
  root = path.join(work, 'root');
  mkdirSync(root);
  // A decoy "host" next to the root: nothing may ever be written there.
  mkdirSync(path.join(work, 'host/etc'), { recursive: true });
  writeFileSync(path.join(work, 'host/etc/passwd'), 'host-secret\n');
});
afterEach(() => unmountAndRemove(work));

function layer(entries: readonly TestTarEntry[], compression: Compression = 'gzip'): LayerBlob {
  return writeLayer(work, `l${n++}`, entries, compression);
}

function apply(blob: LayerBlob, extra: { allowDevices?: boolean; logger?: MemoryLogger } = {}): Promise<ApplyLayerResult> {
  return applyLayer({ root, layer: blob, ...extra });
}

function hostUntouched(): void {
  expect(readFileSync(path.join(work, 'host/etc/passwd'), 'utf8')).toBe('host-secret\n');
  expect(readdirSync(path.join(work, 'host/etc'))).toEqual(['passwd']);
}

describe('hostile layers', () => {
  it('refuses an entry ../../etc/x, writing nothing outside', async () => {
    await expect(apply(layer([{ name: '../../etc/x', body: 'pwned' }]))).rejects.toMatchObject({ code: 'ELAYER_UNSAFE_ENTRY' });
    expect(existsSync(path.join(work, 'etc/x'))).toBe(false);
    hostUntouched();
  });

  it('puts an absolute entry path inside the root', async () => {
    await apply(layer([{ name: '/etc/abs', body: 'in root' }]));
    expect(readFileSync(path.join(root, 'etc/abs'), 'utf8')).toBe('in root');
    hostUntouched();
  });

  it('writes a -> / as it is, and a later a/etc/passwd lands inside the root', async () => {
    // The decoy host's path relative to the root, as an absolute link would name it on the host.
    await apply(
      layer([
        { name: 'a', type: 'symlink', linkname: '/' },
        { name: 'etc/', type: 'directory' },
        { name: 'a/etc/passwd', body: 'image passwd' },
      ]),
    );
    expect(readlinkSync(path.join(root, 'a'))).toBe('/');
    expect(readFileSync(path.join(root, 'etc/passwd'), 'utf8')).toBe('image passwd');
    hostUntouched();
  });

  it('keeps a chain of symlinks climbing with ".." inside the root', async () => {
    await apply(
      layer([
        { name: 'd1/d2/', type: 'directory' },
        { name: 'd1/d2/up', type: 'symlink', linkname: '../../../../host' },
        { name: 'hop', type: 'symlink', linkname: 'd1/d2/up/etc' },
        { name: 'hop/passwd', body: 'via chain' },
      ]),
    );
    expect(readFileSync(path.join(root, 'host/etc/passwd'), 'utf8')).toBe('via chain');
    hostUntouched();
  });

  it('re-resolves a parent that a later entry of the same layer turns into a symlink to the host', async () => {
    const hostEtc = path.join(work, 'host/etc');
    await apply(
      layer([
        { name: 'x/', type: 'directory' },
        { name: 'x/a', body: 'first' },
        // The dir x, already used as a parent, becomes a link whose target is the host's path: the kernel would follow it.
        { name: 'x', type: 'symlink', linkname: hostEtc },
        { name: 'x/passwd', body: 'pwned' },
      ]),
    );
    expect(readFileSync(path.join(root, hostEtc, 'passwd'), 'utf8')).toBe('pwned');
    hostUntouched();
  });

  it('replaces a symlink at an entry path instead of writing through it', async () => {
    symlinkSync(path.join(work, 'host/etc/passwd'), path.join(root, 'victim'));
    await apply(layer([{ name: 'victim', body: 'replaced' }]));
    expect(lstatSync(path.join(root, 'victim')).isFile()).toBe(true);
    expect(readFileSync(path.join(root, 'victim'), 'utf8')).toBe('replaced');
    hostUntouched();
  });

  it('unpacks top-level names starting with ".." (..data, ..2024_01) inside the root', async () => {
    await apply(
      layer([
        { name: '..2024_01/', type: 'directory' },
        { name: '..2024_01/key', body: 'v' },
        { name: '..data', type: 'symlink', linkname: '..2024_01' },
      ]),
    );
    expect(readFileSync(path.join(root, '..data/key'), 'utf8')).toBe('v');
    hostUntouched();
  });

  it('sets a dir time inside the root, never through a parent a later entry turned into a host symlink', async () => {
    const decoyVictim = path.join(work, 'host/victim');
    mkdirSync(decoyVictim);
    const decoyMtime = lstatSync(decoyVictim).mtimeMs;
    await apply(
      layer([
        { name: 'd/', type: 'directory' },
        { name: 'd/victim/', type: 'directory', mtime: 12345 },
        { name: 'd', type: 'symlink', linkname: path.join(work, 'host') },
      ]),
    );
    expect(readlinkSync(path.join(root, 'd'))).toBe(path.join(work, 'host'));
    expect(lstatSync(decoyVictim).mtimeMs).toBe(decoyMtime);
    expect(lstatSync(decoyVictim).mtimeMs).not.toBe(12345 * 1000);
    hostUntouched();
  });

  it('refuses a hard link to outside the root and one to a path not in the layers', async () => {
    await expect(apply(layer([{ name: 'hl', type: 'hardlink', linkname: '../host/etc/passwd' }]))).rejects.toThrow(/"hl".*climbs above/);
    // Through a symlink the target resolves inside the root, where nothing is: refused, not linked to the host file.
    await expect(
      apply(
        layer([
          { name: 'out', type: 'symlink', linkname: '/../host' },
          { name: 'hl2', type: 'hardlink', linkname: 'out/etc/passwd' },
        ]),
      ),
    ).rejects.toThrow(/"hl2".*not in this layer/);
    expect(existsSync(path.join(root, 'hl'))).toBe(false);
    expect(existsSync(path.join(root, 'hl2'))).toBe(false);
    hostUntouched();
  });

  it('refuses a whiteout that climbs out and a symlink loop', async () => {
    await expect(apply(layer([{ name: '../.wh.host' }]))).rejects.toThrow(/climbs above/);
    await expect(
      apply(
        layer([
          { name: 'l1', type: 'symlink', linkname: 'l2' },
          { name: 'l2', type: 'symlink', linkname: 'l1' },
          { name: 'l1/x', body: '' },
        ]),
      ),
    ).rejects.toThrow(/"l1\/x".*loop/);
    expect(existsSync(path.join(work, 'host'))).toBe(true);
    hostUntouched();
  });
});

describe('metadata', () => {
  it('sets owners, then modes (setuid/setgid/sticky survive chown), times, and links', async () => {
    await apply(
      layer([
        { name: 'bin/', type: 'directory', mode: 0o755, mtime: 1_500_000_000 },
        { name: 'bin/su', body: '#!/bin/sh\n', mode: 0o4755, uid: 1000, gid: 1001, mtime: 1_400_000_000 },
        { name: 'bin/sg', body: 'x', mode: 0o2711, uid: 5, gid: 6 },
        { name: 'tmp/', type: 'directory', mode: 0o1777 },
        { name: 'bin/su-link', type: 'hardlink', linkname: 'bin/su' },
        { name: 'bin/rel', type: 'symlink', linkname: 'su', uid: 7, gid: 8 },
      ]),
    );
    const su = lstatSync(path.join(root, 'bin/su'));
    expect({ mode: su.mode & 0o7777, uid: su.uid, gid: su.gid, mtime: su.mtimeMs / 1000 }).toEqual({
      mode: 0o4755,
      uid: 1000,
      gid: 1001,
      mtime: 1_400_000_000,
    });
    expect(lstatSync(path.join(root, 'bin/sg')).mode & 0o7777).toBe(0o2711);
    expect(lstatSync(path.join(root, 'tmp')).mode & 0o7777).toBe(0o1777);
    expect(lstatSync(path.join(root, 'bin')).mtimeMs / 1000).toBe(1_500_000_000);
    expect(lstatSync(path.join(root, 'bin/su-link')).ino).toBe(su.ino);
    const rel = lstatSync(path.join(root, 'bin/rel'));
    expect([rel.uid, rel.gid]).toEqual([7, 8]);
  });

  it('makes device nodes and fifos only when allowed, noting the skip otherwise', async () => {
    const entries: TestTarEntry[] = [
      { name: 'dev/', type: 'directory' },
      { name: 'dev/null', type: 'char', devmajor: 1, devminor: 3, mode: 0o666 },
      { name: 'dev/fifo', type: 'fifo', mode: 0o600 },
    ];
    const logger = new MemoryLogger();
    const skipped = await apply(layer(entries), { logger });
    expect(skipped.devices).toBe(2);
    expect(skipped.skipped.map((s) => s.name)).toEqual(['dev/null', 'dev/fifo']);
    expect(existsSync(path.join(root, 'dev/null'))).toBe(false);
    expect(logger.records.some((r) => r.msg === 'layer entry skipped')).toBe(true);

    const made = await apply(layer(entries), { allowDevices: true });
    expect(made.skipped).toEqual([]);
    const dev = lstatSync(path.join(root, 'dev/null'));
    expect(dev.isCharacterDevice()).toBe(true);
    expect(dev.rdev).toBe(lstatSync('/dev/null').rdev);
    expect(dev.mode & 0o7777).toBe(0o666);
    expect(lstatSync(path.join(root, 'dev/fifo')).isFIFO()).toBe(true);
  });

  it("refuses overlayfs's own xattrs from a layer", async () => {
    const result = await apply(layer([{ name: 'd/', type: 'directory', pax: { 'SCHILY.xattr.trusted.overlay.opaque': 'y' } }]));
    expect(result.skipped).toEqual([{ name: 'd/', reason: expect.stringContaining('trusted.overlay.opaque refused') }]);
  });

  it('notes xattrs it cannot set instead of failing', async () => {
    const result = await applyLayer({
      root,
      layer: layer([{ name: 'f', body: 'x', pax: { 'SCHILY.xattr.user.k': 'v' } }]),
      setfattrBin: path.join(work, 'no-setfattr'),
    });
    expect(result.skipped).toEqual([{ name: 'f', reason: expect.stringContaining('xattrs user.k not set') }]);
    expect(readFileSync(path.join(root, 'f'), 'utf8')).toBe('x');
  });
});

describe('compression and digests', () => {
  it.each<Compression>(['none', 'gzip', 'zstd'])('unpacks a %s layer', async (compression) => {
    const result = await apply(layer([{ name: 'hello', body: 'world' }], compression));
    expect(result.compression).toBe(compression);
    expect(readFileSync(path.join(root, 'hello'), 'utf8')).toBe('world');
  });

  it('fails on a diff id that does not match the uncompressed bytes', async () => {
    const blob = layer([{ name: 'f', body: 'content' }]);
    const wrong = `sha256:${'0'.repeat(64)}`;
    await expect(apply({ ...blob, diffId: wrong })).rejects.toMatchObject({
      code: 'ELAYER_DIFF_ID_MISMATCH',
      expected: wrong,
      actual: blob.diffId,
    });
  });

  it('counts padding after the end marker in the diff id, as the registry digests it', async () => {
    const { buildTar } = await import('../src/testing');
    const raw = Buffer.concat([buildTar([{ name: 'p', body: 'q' }]), Buffer.alloc(8192)]);
    const blob = writeLayer(work, 'padded', raw, 'gzip');
    await expect(apply(blob)).resolves.toMatchObject({ entries: 1 });
  });

  it('fails clearly on a corrupt gzip stream and an unknown media type', async () => {
    const blob = layer([{ name: 'f', body: 'y'.repeat(100_000) }]);
    const bytes = readFileSync(blob.blobPath);
    bytes.fill(0x41, 20, Math.min(150, bytes.length - 10));
    writeFileSync(blob.blobPath, bytes);
    await expect(apply(blob)).rejects.toMatchObject({ code: 'ELAYER_COMPRESSION' });
    await expect(apply({ ...blob, mediaType: 'application/vnd.oci.image.config.v1+json' })).rejects.toThrow(/not an image layer/);
  });

  it('unpacks a layer GNU tar made from a real tree', async () => {
    const src = path.join(work, 'src');
    mkdirSync(path.join(src, 'usr/bin'), { recursive: true });
    writeFileSync(path.join(src, 'usr/bin/tool'), 'binary');
    execFileSync('/usr/bin/chown', ['123:456', path.join(src, 'usr/bin/tool')]);
    execFileSync('/usr/bin/chmod', ['4750', path.join(src, 'usr/bin/tool')]);
    symlinkSync('usr/bin', path.join(src, 'bin'));
    const tar = execFileSync('/usr/bin/tar', ['--format=pax', '--numeric-owner', '-C', src, '-cf', '-', '.'], { maxBuffer: 1 << 26 });
    await apply(writeLayer(work, 'gnu', tar, 'zstd'));
    const tool = lstatSync(path.join(root, 'usr/bin/tool'));
    expect([tool.mode & 0o7777, tool.uid, tool.gid]).toEqual([0o4750, 123, 456]);
    expect(readlinkSync(path.join(root, 'bin'))).toBe('usr/bin');
  });
});
