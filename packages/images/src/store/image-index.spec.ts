import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { digestOf } from '../digest';
import { ImageIndexCorruptError } from '../errors';
import { BlobStore } from './blob-store';
import { IMAGE_INDEX_FILE, ImageIndex, type ImageRecord } from './image-index';

const d = (s: string) => digestOf(Buffer.from(s));
const record = (reference: string): ImageRecord => ({
  reference,
  manifestDigest: d('m'),
  manifestMediaType: 'application/vnd.oci.image.manifest.v1+json',
  repoDigest: d('r'),
  configDigest: d('c'),
  layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: d('l'), size: 1, compression: 'gzip' }],
  pulledAt: 1,
});

describe('ImageIndex', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'images-index-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('persists records across a reopen, by reference and by digest, leaving no temp file', async () => {
    const index = await ImageIndex.open(dir);
    await Promise.all([index.put(record('r.io/a:1')), index.put(record('r.io/b:2'))]);
    const reopened = await ImageIndex.open(dir);
    expect(reopened.get('r.io/a:1')).toEqual(record('r.io/a:1'));
    expect(reopened.list()).toHaveLength(2);
    expect(reopened.findByDigest(d('r'))?.reference).toBeDefined();
    await reopened.delete('r.io/a:1');
    expect((await ImageIndex.open(dir)).get('r.io/a:1')).toBeUndefined();
    expect(readdirSync(dir)).toEqual([IMAGE_INDEX_FILE]);
  });

  it.each([
    ['{not json', 'not JSON'],
    ['[]', 'not a JSON object'],
    ['{"version":9,"images":{}}', 'version 9'],
    ['{"version":1,"images":{"r.io/a:1":{"reference":"r.io/a:1","manifestDigest":"sha256:zz"}}}', 'malformed'],
  ])('refuses a corrupt file %j naming it, and keeps the blobs', async (text, reason) => {
    const blobs = await BlobStore.open(dir);
    await blobs.putBytes(d('keep'), Buffer.from('keep'));
    writeFileSync(join(dir, IMAGE_INDEX_FILE), text);
    await expect(ImageIndex.open(dir)).rejects.toBeInstanceOf(ImageIndexCorruptError);
    await expect(ImageIndex.open(dir)).rejects.toThrow(join(dir, IMAGE_INDEX_FILE));
    await expect(ImageIndex.open(dir)).rejects.toThrow(reason);
    expect(await blobs.has(d('keep'))).toBe(true);
  });
});
