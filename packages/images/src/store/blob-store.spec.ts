import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { digestOf } from '../digest';
import { DigestMismatchError } from '../errors';
import { BlobStore } from './blob-store';

async function* chunksOf(...parts: string[]): AsyncIterable<Buffer> {
  for (const p of parts) yield Buffer.from(p);
}

async function* breaksAfter(part: string): AsyncIterable<Buffer> {
  yield Buffer.from(part);
  throw new Error('connection reset');
}

describe('BlobStore', () => {
  let dir: string;
  beforeEach(() => (dir = join(mkdtempSync(join(tmpdir(), 'images-blobs-')), 'store')));
  afterEach(() => rmSync(join(dir, '..'), { recursive: true, force: true }));

  it('creates its dir 0700 and stores a verified blob under its digest', async () => {
    const store = await BlobStore.open(dir);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    const digest = digestOf(Buffer.from('hello world'));
    const path = await store.write(digest, 11, chunksOf('hello ', 'world'));
    expect(path).toBe(store.path(digest));
    expect(await store.size(digest)).toBe(11);
    expect((await store.read(digest)).toString()).toBe('hello world');
    await store.remove(digest);
    expect(await store.has(digest)).toBe(false);
  });

  it('leaves nothing for a mismatch, an oversize or a broken stream', async () => {
    const store = await BlobStore.open(dir);
    const digest = digestOf(Buffer.from('hello world'));
    await expect(store.write(digest, 11, chunksOf('hello WORLD'))).rejects.toBeInstanceOf(DigestMismatchError);
    await expect(store.write(digest, 5, chunksOf('hello world'))).rejects.toBeInstanceOf(DigestMismatchError);
    await expect(store.write(digest, 11, breaksAfter('hello'))).rejects.toThrow('connection reset');
    expect(await store.has(digest)).toBe(false);
    expect(await store.tempFiles()).toEqual([]);
  });

  it('refuses a digest that is not one (no path traversal)', async () => {
    const store = await BlobStore.open(dir);
    expect(() => store.path('sha256:../../etc/passwd')).toThrow(/invalid digest/);
  });
});
