// The archive file as the agent (root) opens and reads it for a job:
// a layer too big to keep in memory is copied by a second read of the same
// handle; a path outside the agent's policy (a link out of an allowed dir
// among them) is refused before anything is read; a FIFO or a device is
// refused before it is opened (a FIFO's open would block forever); a file
// that is no tar says where it is wrong and never echoes its bytes; a file
// rewritten between the two reads, bad JSON and an archive gzipped whole
// are each said as the archive's, naming the file inside it.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, open as openFile, readFile, readdir, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { FakeClock } from '@csiplug/core/testing';
import {
  ArchiveLoader,
  ImageArchiveError,
  ImageArchiveRefusedError,
  ImageArchiveUnreadableError,
  TaskImages,
  readTar,
  type ArchivePathPolicy,
} from '../src';
import { ArchiveCatalog, ArchiveFile, copyMembers } from '../src/archive/archive-catalog';
import type { SharedWork } from '../src/shared-work';
import { readOciArchive } from '../src/archive/oci-archive';
import { nodePlatform } from '../src/platform';
import { buildTar, buildTestImage, type TestImage, type TestTarEntry } from '../src/testing';
import { run } from '../src/testing/run';
import { mountsUnderSync, unmountAndRemove } from './support/cleanup';

jest.setTimeout(120_000);

const SKOPEO = '/usr/bin/skopeo';
/** More than MAX_ARCHIVE_DOCUMENT_BYTES (4 MiB): not kept in memory by the first read, copied by the second. */
const BIG_BYTES = 5 * 1024 * 1024;
let work: string;
let image: TestImage;
let bigArchive: string;
let big: Buffer;
const services: TaskImages[] = [];

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'images-archive-file-'));
  big = randomBytes(BIG_BYTES);
  image = await buildTestImage(join(work, 'layout'), 'big', {
    layers: [{ files: { 'etc/base': 'base' } }, { files: { 'srv/big': big } }],
    created: '2026-01-01T00:00:00Z',
  });
  bigArchive = join(work, 'big.tar');
  await run(SKOPEO, ['--insecure-policy', 'copy', '--quiet', `oci:${join(work, 'layout')}:big`, `oci-archive:${bigArchive}`]);
});

afterAll(async () => {
  for (const s of services) s.dispose();
  if (work) {
    unmountAndRemove(work);
    expect(mountsUnderSync(work)).toEqual([]);
  }
});

function open(name: string, archivePathPolicy?: ArchivePathPolicy): TaskImages {
  const svc = new TaskImages({
    dataDir: join(work, name),
    docker: { pullActivityTimeout: 60_000, gc: { image: true, imageDelay: 180_000 } },
    clock: new FakeClock(),
    ...(archivePathPolicy ? { archivePathPolicy } : {}),
  });
  services.push(svc);
  return svc;
}

async function entriesOf(archive: string): Promise<TestTarEntry[]> {
  const out: TestTarEntry[] = [];
  for await (const e of readTar((await import('node:fs')).createReadStream(archive))) {
    const parts: Buffer[] = [];
    for await (const c of e.body) parts.push(c);
    out.push({ name: e.name, type: e.type, body: Buffer.concat(parts), mode: e.mode, ...(e.linkname ? { linkname: e.linkname } : {}) });
  }
  return out;
}

/** What a prepare of `ref` throws, with the store left empty (no index entry, no blob). */
async function refusal(ref: string, policy?: ArchivePathPolicy): Promise<Error> {
  const svc = open(`store-${services.length}`, policy);
  const err = await svc.prepare({ taskDir: join(work, `task-${services.length}`, 'image'), ref }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(Error);
  const { puller } = await svc.open();
  expect(puller.index.list()).toEqual([]);
  expect(await readdir(join(svc.storeDir, 'blobs', 'sha256'))).toEqual([]);
  return err as Error;
}

it('loads an image whose layer is bigger than the in-memory limit: the second read copies it from the same handle', async () => {
  const svc = open('store-big');
  const root = await svc.prepare({ taskDir: join(work, 'big-alloc', 'image'), ref: `oci-archive:${bigArchive}` });
  expect((await readFile(join(root.rootfs, 'srv/big'))).equals(big)).toBe(true);
  expect(root.digest).toBe(image.manifestDigest);
  await svc.release(join(work, 'big-alloc', 'image'));
});

it('refuses a path the policy does not allow, and a link from an allowed dir to a file outside it, reading nothing', async () => {
  const allowedDir = join(work, 'allowed');
  execFileSync('mkdir', ['-p', allowedDir]);
  const policy: ArchivePathPolicy = (real) =>
    real.startsWith(`${allowedDir}/`) ? undefined : `${real} is not within allowed_host_paths (${allowedDir}): add it`;
  const outside = await refusal(`oci-archive:${bigArchive}`, policy);
  expect(outside).toBeInstanceOf(ImageArchiveRefusedError);
  expect(outside.message).toBe(`image archive ${bigArchive}: ${bigArchive} is not within allowed_host_paths (${allowedDir}): add it`);

  const link = join(allowedDir, 'link.tar');
  await symlink(bigArchive, link);
  const linked = await refusal(`oci-archive:${link}`, policy);
  expect(linked).toBeInstanceOf(ImageArchiveRefusedError);
  expect(linked.message).toContain(`${bigArchive} is not within allowed_host_paths`);

  // A link outside the list to a host file is refused by the path as written: the refusal does not say where it leads.
  const hostLink = join(work, 'host-link.tar');
  await symlink('/etc/hostname', hostLink);
  const named = await refusal(`oci-archive:${hostLink}`, policy);
  expect(named).toBeInstanceOf(ImageArchiveRefusedError);
  expect(named.message).toBe(`image archive ${hostLink}: ${hostLink} is not within allowed_host_paths (${allowedDir}): add it`);

  // A missing path outside is refused as such: a job learns nothing of what exists there.
  const missing = await refusal(`oci-archive:/nonexistent-dir/x.tar`, policy);
  expect(missing).toBeInstanceOf(ImageArchiveRefusedError);
});

it('refuses a FIFO and a device before opening them (a FIFO is not waited on)', async () => {
  const fifo = join(work, 'pipe.tar');
  execFileSync('mkfifo', [fifo]);
  const err = await refusal(`oci-archive:${fifo}`);
  expect(err).toBeInstanceOf(ImageArchiveUnreadableError);
  expect(err.message).toMatch(/pipe\.tar is a FIFO \(named pipe\), not a regular file/);
  const dev = await refusal('docker-archive:/dev/zero');
  expect(dev.message).toMatch(/\/dev\/zero is a device, not a regular file/);
});

it('a file that is no tar: says at which byte, never what the file holds', async () => {
  const secret = join(work, 'shadow');
  const content = 'root:$6$SECRETHASHxyz:19000:0:99999:7:::\n'.repeat(20);
  await writeFile(secret, content);
  const err = await refusal(`oci-archive:${secret}`);
  expect(err).toBeInstanceOf(ImageArchiveError);
  expect(err.message).toMatch(
    /shadow: \(the archive\): the archive is not a well-formed tar at byte 0: the 512-byte header there is not a tar header/,
  );
  expect(err.message).not.toContain('root:');
  expect(err.message).not.toContain('SECRET');
  expect(String((err as { cause?: Error }).cause?.message ?? '')).not.toContain('SECRET');
});

it('an archive gzipped as a whole: says to decompress it first', async () => {
  const gz = join(work, 'big.tar.gz');
  await writeFile(gz, gzipSync(await readFile(bigArchive)));
  const err = await refusal(`oci-archive:${gz}`);
  expect(err.message).toMatch(/is gzip-compressed as a whole .*; decompress it first \(gunzip\)/);
});

it('bad JSON in index.json, oci-layout or manifest.json: an archive error naming the file', async () => {
  const entries = await entriesOf(bigArchive);
  for (const member of ['index.json', 'oci-layout']) {
    const file = join(work, `bad-${member}.tar`);
    await writeFile(file, buildTar(entries.map((e) => (e.name === member ? { ...e, body: '{"manifests": [' } : e))));
    const err = await refusal(`oci-archive:${file}`);
    expect(err).toBeInstanceOf(ImageArchiveError);
    expect(err.message).toMatch(new RegExp(`bad-${member}\\.tar: ${member}: (index\\.json )?is not (valid )?JSON \\(`));
  }
  const docker = join(work, 'bad-manifest.tar');
  await writeFile(docker, buildTar([{ name: 'manifest.json', body: '[{"Config": ' }]));
  const err = await refusal(`docker-archive:${docker}`);
  expect(err).toBeInstanceOf(ImageArchiveError);
  expect(err.message).toMatch(/bad-manifest\.tar: manifest\.json: is not valid JSON \(/);
});

it('a file rewritten between the two reads: the copy fails naming the archive and the member, nothing stored under its digest', async () => {
  const file = join(work, 'changing.tar');
  await writeFile(file, await readFile(bigArchive));
  const svc = open('store-changing');
  const { puller } = await svc.open();
  const archive = await ArchiveFile.open(file);
  try {
    const catalog = await ArchiveCatalog.read(archive);
    const img = readOciArchive(catalog, undefined, nodePlatform(), `oci-archive:${file}`);
    const layer = img.layerBlobs.at(-1)!;
    // The same bytes' place in the file, rewritten in place (the handle sees it): one byte of the big layer flipped.
    const bytes = await readFile(file);
    const head = bytes.indexOf(Buffer.from(layer.member));
    const at = head + 512 + 1000;
    const fh = await openFile(file, 'r+');
    await fh.write(Buffer.from([bytes[at]! ^ 0xff]), 0, 1, at);
    await fh.close();
    const err = (await copyMembers(archive, catalog, new Map([[layer.member, layer]]), puller.blobs).catch((e: unknown) => e)) as Error;
    expect(err).toBeInstanceOf(ImageArchiveError);
    expect(err.message).toContain(`image archive ${file}: ${layer.member}: changed since it was checked at the first read`);
    expect(err.message).not.toContain('push the image again');
    expect(await puller.blobs.has(layer.digest)).toBe(false);
    expect(await puller.blobs.tempFiles()).toEqual([]);
  } finally {
    await archive.close();
  }
});

it('a load every caller gave up on mid-copy stops within a chunk and writes no blob or index entry after', async () => {
  const svc = open('store-abort');
  const { puller } = await svc.open();
  const controller = new AbortController();
  // The blob store as the loader sees it: the caller gives up as the big layer's copy (the last member copied) begins.
  const blobs = Object.create(puller.blobs) as typeof puller.blobs;
  blobs.write = (digest, size, chunks, onProgress) => {
    if (size >= BIG_BYTES) controller.abort(new Error('the task was stopped'));
    return puller.blobs.write(digest, size, chunks, onProgress);
  };
  const loader = new ArchiveLoader(blobs, puller.index);
  const ref = `oci-archive:${bigArchive}`;
  const waiting = loader.load(ref, { signal: controller.signal });
  // The shared load itself (the caller's promise ends at the abort; the load runs on until it sees it).
  const shared = (loader as unknown as { inflight: SharedWork<unknown, unknown> }).inflight.running(ref)!;
  await expect(waiting).rejects.toThrow('the task was stopped');
  await expect(shared).rejects.toThrow('the task was stopped');
  expect(puller.index.get(ref)).toBeUndefined();
  expect(await puller.blobs.has(image.manifestDigest)).toBe(false);
  expect(await puller.blobs.tempFiles()).toEqual([]);
});
