// Which decompressor a layer gets, and the media types refused before any byte is read.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { gzipSync } from 'node:zlib';
import { LayerCompressionError } from './errors';
import { detectCompression, openLayer } from './layer-stream';

describe('detectCompression', () => {
  it('tells gzip, zstd and plain tar by their first bytes', () => {
    expect(detectCompression(gzipSync(Buffer.from('x')))).toBe('gzip');
    expect(detectCompression(Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0]))).toBe('zstd');
    expect(detectCompression(Buffer.from('etc/passwd\0'))).toBe('none');
    expect(detectCompression(Buffer.alloc(0))).toBe('none');
  });
});

describe('openLayer', () => {
  let dir: string;
  beforeAll(() => (dir = mkdtempSync(path.join(tmpdir(), 'layer-stream-'))));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('refuses a media type that is not a layer', async () => {
    const p = path.join(dir, 'cfg');
    writeFileSync(p, '{}');
    await expect(openLayer(p, 'application/vnd.oci.image.config.v1+json')).rejects.toThrow(LayerCompressionError);
  });

  it('hashes the uncompressed bytes, whatever the media type claims', async () => {
    const p = path.join(dir, 'g');
    writeFileSync(p, gzipSync(Buffer.from('hello')));
    const layer = await openLayer(p, 'application/vnd.oci.image.layer.v1.tar');
    expect(layer.compression).toBe('gzip');
    expect(await layer.finish()).toBe('sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824');
  });

  it('says to install zstd when the binary is missing', async () => {
    const p = path.join(dir, 'z');
    writeFileSync(p, Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0]));
    const layer = await openLayer(p, 'application/vnd.oci.image.layer.v1.tar+zstd', path.join(dir, 'no-zstd'));
    await expect(layer.finish()).rejects.toThrow(/install Debian's zstd/);
  });
});
