// A full disk mid-pull: the store lives on a 4 MB tmpfs and the image has a
// 6 MB layer. The pull fails with ImageStoreFullError naming the blob and
// the dir, and leaves no temp file and nothing under the layer's digest.
// Needs root (mount); skipped otherwise.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ImagePuller, ImageStoreFullError } from '../src';
import { TestRegistry, buildTestImage } from '../src/testing';

jest.setTimeout(120_000);
const asRoot = process.getuid?.() === 0 ? it : it.skip;

let registry: TestRegistry | undefined;
let work: string;
let mountPoint: string | undefined;

afterAll(async () => {
  if (mountPoint) execFileSync('umount', [mountPoint]);
  await registry?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

asRoot('fails with a clear error and leaves nothing when the disk fills mid-blob', async () => {
  work = await mkdtemp(join(tmpdir(), 'images-full-test-'));
  registry = await TestRegistry.start();
  await buildTestImage(join(work, 'layout'), 'fat', { layers: [{ files: { fat: randomBytes(6_000_000) } }] });
  await registry.push({ layoutDir: join(work, 'layout'), tag: 'fat' }, 'team/fat:1');
  mountPoint = join(work, 'small');
  await mkdir(mountPoint);
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', mountPoint]);
  const storeDir = join(mountPoint, 'store');
  const puller = await ImagePuller.open({ storeDir, certsDir: registry.certsDir });
  try {
    const pull = puller.pull(`${registry.host}/team/fat:1`, { auth: { username: registry.username, password: registry.password } });
    await expect(pull).rejects.toBeInstanceOf(ImageStoreFullError);
    await expect(pull).rejects.toThrow(storeDir);
    const err = (await pull.catch((e: unknown) => e)) as ImageStoreFullError;
    expect(err.message).toContain(err.digest);
    expect(await puller.blobs.tempFiles()).toEqual([]);
    expect(await puller.blobs.has(err.digest)).toBe(false);
    expect(puller.index.list()).toEqual([]);
  } finally {
    puller.dispose();
  }
});
