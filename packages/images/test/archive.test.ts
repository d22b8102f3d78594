// Images loaded from archive files, with no registry: skopeo (Debian's)
// writes an oci-archive and a docker-archive of an image umoci built; the
// agent's image service (TaskImages) makes a task's root from each, as from
// a pull — the layers unpacked once and shared with the same image pulled
// from a real registry, a reload copying nothing — and a corrupt or hostile
// archive (an altered byte, a missing blob, two images and no reference,
// an entry climbing out, a link out of the archive) fails naming the file
// and what is wrong, leaving nothing in the store.
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, readdir, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeClock } from '@csiplug/core/testing';
import {
  ImageArchiveError,
  ImageArchiveReferenceError,
  ImageArchiveUnreadableError,
  TaskImages,
  nodePlatform,
  readTar,
  type ImageEvent,
} from '../src';
import { TestRegistry, buildTar, buildTestImage, buildTestImageIndex, type TestImage, type TestTarEntry } from '../src/testing';
import { run } from '../src/testing/run';
import { mountsUnderSync, unmountAndRemove } from './support/cleanup';

jest.setTimeout(120_000);

const SKOPEO = '/usr/bin/skopeo';
let work: string;
let image: TestImage;
let ociArchive: string;
let dockerArchive: string;
const services: TaskImages[] = [];

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'images-archive-'));
  const layout = join(work, 'layout');
  image = await buildTestImage(layout, 'app', {
    layers: [
      { files: { 'etc/base': 'base', 'etc/passwd': 'root:x:0:0::/root:/bin/sh\n' } },
      { files: { 'srv/app': 'app', 'srv/run.sh': '#!/bin/sh\n' }, modes: { 'srv/run.sh': 0o755 } },
    ],
    workingDir: '/srv',
    created: '2026-01-01T00:00:00Z',
  });
  ociArchive = join(work, 'app-oci.tar');
  dockerArchive = join(work, 'app-docker.tar');
  await run(SKOPEO, ['--insecure-policy', 'copy', '--quiet', `oci:${layout}:app`, `oci-archive:${ociArchive}:v1`]);
  await run(SKOPEO, ['--insecure-policy', 'copy', '--quiet', `oci:${layout}:app`, `docker-archive:${dockerArchive}:team/app:v1`]);
});

afterAll(async () => {
  for (const s of services) s.dispose();
  if (work) {
    unmountAndRemove(work);
    expect(mountsUnderSync(work)).toEqual([]);
  }
});

function open(name: string, certsDir?: string): TaskImages {
  const svc = new TaskImages({
    dataDir: join(work, name),
    docker: { pullActivityTimeout: 60_000, gc: { image: true, imageDelay: 180_000 } },
    clock: new FakeClock(),
    ...(certsDir ? { certsDir } : {}),
  });
  services.push(svc);
  return svc;
}

/** Every file under the store whose name says it is a temp (a blob's .partial-, the index's .tmp, a layer's staging). */
async function leftovers(svc: TaskImages): Promise<string[]> {
  const { puller, layers } = await svc.open();
  const out = await puller.blobs.tempFiles();
  for (const n of await readdir(layers.layersDir)) if (!/^[0-9a-f]{64}$/.test(n)) out.push(n);
  for (const n of await readdir(svc.storeDir)) if (n.endsWith('.tmp')) out.push(n);
  return out;
}

/** The archive's entries as a test tar writer takes them. */
async function entriesOf(archive: string): Promise<TestTarEntry[]> {
  const out: TestTarEntry[] = [];
  for await (const e of readTar((await import('node:fs')).createReadStream(archive))) {
    const parts: Buffer[] = [];
    for await (const c of e.body) parts.push(c);
    out.push({ name: e.name, type: e.type, body: Buffer.concat(parts), mode: e.mode, ...(e.linkname ? { linkname: e.linkname } : {}) });
  }
  return out;
}

async function writeArchive(name: string, entries: readonly TestTarEntry[]): Promise<string> {
  const file = join(work, name);
  await writeFile(file, buildTar(entries));
  return file;
}

it('makes a task root from an oci-archive and from a docker-archive, says "Loading"/"Loaded", and a reload copies no blob', async () => {
  const svc = open('store-a');
  const events: ImageEvent[] = [];
  const ociRoot = await svc.prepare({
    taskDir: join(work, 'a-alloc', 'oci'),
    ref: `oci-archive:${ociArchive}:v1`,
    onEvent: (e) => events.push(e),
  });
  expect(await readFile(join(ociRoot.rootfs, 'srv/app'), 'utf8')).toBe('app');
  expect(await readFile(join(ociRoot.rootfs, 'etc/base'), 'utf8')).toBe('base');
  expect((await stat(join(ociRoot.rootfs, 'srv/run.sh'))).mode & 0o777).toBe(0o755);
  expect(ociRoot.config.workingDir).toBe('/srv');
  // skopeo keeps an OCI image's manifest as umoci wrote it: the digest is the layout's.
  expect(ociRoot.digest).toBe(image.manifestDigest);
  expect(events).toEqual([
    { kind: 'loading', reference: `oci-archive:${ociArchive}:v1`, path: ociArchive, message: `Loading image from ${ociArchive}` },
    expect.objectContaining({ kind: 'loaded', digest: image.manifestDigest, fromStore: false }),
  ]);
  const record = JSON.parse(await readFile(join(work, 'a-alloc', 'oci', 'image.json'), 'utf8'));
  expect(record).toMatchObject({ reference: `oci-archive:${ociArchive}:v1`, manifestDigest: image.manifestDigest });

  // The root in place (a task restarted, an agent restarted after kill -9): taken as it is, said as a load, the archive not read.
  const reusedEvents: ImageEvent[] = [];
  const reused = await svc.prepare({
    taskDir: join(work, 'a-alloc', 'oci'),
    ref: `oci-archive:${ociArchive}:v1`,
    onEvent: (e) => reusedEvents.push(e),
  });
  expect(reused.reused).toBe(true);
  expect(reusedEvents).toEqual([expect.objectContaining({ kind: 'loaded', digest: image.manifestDigest, fromStore: true })]);

  const dockerRoot = await svc.prepare({ taskDir: join(work, 'a-alloc', 'docker'), ref: `docker-archive:${dockerArchive}:team/app:v1` });
  expect(await readFile(join(dockerRoot.rootfs, 'srv/app'), 'utf8')).toBe('app');
  expect(dockerRoot.config.workingDir).toBe('/srv');
  // The same layers (diff ids) whatever the archive: each unpacked once.
  const { puller, layers } = await svc.open();
  expect(await layers.list()).toHaveLength(2);

  // A reload of an image the store has: the archive is read, nothing copied (the blobs' files are the same ones).
  const blobDir = join(svc.storeDir, 'blobs', 'sha256');
  const before = new Map<string, number>();
  for (const n of await readdir(blobDir)) before.set(n, (await stat(join(blobDir, n))).ino);
  for (const [i, ref] of [`oci-archive:${ociArchive}:v1`, `docker-archive:${dockerArchive}`].entries()) {
    const again: ImageEvent[] = [];
    await svc.prepare({ taskDir: join(work, 'a-alloc', `again-${i}`), ref, onEvent: (e) => again.push(e) });
    expect(again.at(-1)).toMatchObject({ kind: 'loaded', fromStore: true });
  }
  const after = new Map<string, number>();
  for (const n of await readdir(blobDir)) after.set(n, (await stat(join(blobDir, n))).ino);
  expect(after).toEqual(before);
  expect(puller.index.get(`oci-archive:${ociArchive}:v1`)?.manifestDigest).toBe(image.manifestDigest);
  for (const d of await readdir(join(work, 'a-alloc'))) await svc.release(join(work, 'a-alloc', d));
  expect(await leftovers(svc)).toEqual([]);
});

it('shares the layers of an archive with the same image pulled from a registry: stored once', async () => {
  const registry = await TestRegistry.start();
  try {
    await registry.push({ layoutDir: image.layoutDir, tag: image.tag }, 'team/app:v1');
    const svc = open('store-b', registry.certsDir);
    const pulled = await svc.prepare({
      taskDir: join(work, 'b-alloc', 'pulled'),
      ref: `${registry.host}/team/app:v1`,
      auth: { username: registry.username, password: registry.password },
    });
    const loaded = await svc.prepare({ taskDir: join(work, 'b-alloc', 'loaded'), ref: `oci-archive:${ociArchive}` });
    const docker = await svc.prepare({ taskDir: join(work, 'b-alloc', 'docker'), ref: `docker-archive:${dockerArchive}` });
    expect(loaded.digest).toBe(pulled.digest);
    const { puller, layers } = await svc.open();
    expect(await layers.list()).toHaveLength(2);
    // The oci-archive's blobs are the registry's (skopeo copied them as they are): no blob twice.
    const record = puller.index.get(`${registry.host}/team/app:v1`)!;
    expect(puller.index.get(`oci-archive:${ociArchive}`)!.layers).toEqual(record.layers);
    expect(docker.config.diffIds).toEqual(pulled.config.diffIds);
    // GC of the pulled image keeps the chains and blobs the archives' images stand on; theirs, at last, removes them.
    for (const d of ['pulled', 'loaded', 'docker']) await svc.release(join(work, 'b-alloc', d));
    expect(await svc.removeImage(`${registry.host}/team/app:v1`)).toBe(true);
    expect(await layers.list()).toHaveLength(2);
    for (const l of record.layers) expect(await puller.blobs.has(l.digest)).toBe(true);
    const events: ImageEvent[] = [];
    const again = await svc.prepare({
      taskDir: join(work, 'b-alloc', 'again'),
      ref: `oci-archive:${ociArchive}`,
      onEvent: (e) => events.push(e),
    });
    expect(await readFile(join(again.rootfs, 'srv/app'), 'utf8')).toBe('app');
    expect(events.at(-1)).toMatchObject({ kind: 'loaded', fromStore: true });
    await svc.release(join(work, 'b-alloc', 'again'));
    expect(await svc.removeImage(`oci-archive:${ociArchive}`)).toBe(true);
    expect(await svc.removeImage(`docker-archive:${dockerArchive}`)).toBe(true);
    expect(await layers.list()).toEqual([]);
    expect(puller.index.list()).toEqual([]);
  } finally {
    await registry.stop();
  }
});

it('loads a docker-archive whose layers are gzipped (newer Docker): the uncompressed digest checked against diff_ids', async () => {
  const entries = await entriesOf(dockerArchive);
  const manifest = JSON.parse(entries.find((e) => e.name === 'manifest.json')!.body!.toString());
  const layers = manifest[0].Layers as string[];
  const gz = (await import('node:zlib')).gzipSync;
  const file = await writeArchive('gzipped.tar', [
    ...entries
      .filter((e) => e.name !== 'manifest.json')
      .map((e) => (layers.includes(e.name) ? { ...e, name: `${e.name}.gz`, body: gz(e.body as Buffer) } : e)),
    { name: 'manifest.json', body: JSON.stringify([{ ...manifest[0], Layers: layers.map((l) => `${l}.gz`) }]) },
  ]);
  const svc = open('store-gz');
  const root = await svc.prepare({ taskDir: join(work, 'gz-alloc', 'image'), ref: `docker-archive:${file}:team/app:v1` });
  expect(await readFile(join(root.rootfs, 'srv/app'), 'utf8')).toBe('app');
  const { puller } = await svc.open();
  expect(puller.index.get(`docker-archive:${file}:team/app:v1`)!.layers.map((l) => l.mediaType)).toEqual([
    'application/vnd.oci.image.layer.v1.tar+gzip',
    'application/vnd.oci.image.layer.v1.tar+gzip',
  ]);
  await svc.release(join(work, 'gz-alloc', 'image'));
});

it("goes from an oci-archive's image index to this node's platform, as a pull does", async () => {
  const layout = join(work, 'multi-layout');
  const mine = nodePlatform();
  const other = mine.architecture === 'amd64' ? 'arm64' : 'amd64';
  const here = await buildTestImage(layout, 'here', {
    layers: [{ files: { 'etc/arch': mine.architecture } }],
    architecture: mine.architecture,
  });
  await buildTestImage(layout, 'there', { layers: [{ files: { 'etc/arch': other } }], architecture: other });
  const index = await buildTestImageIndex(layout, 'multi', [
    { tag: 'there', platform: { os: 'linux', architecture: other } },
    { tag: 'here', platform: { ...mine } },
  ]);
  const file = join(work, 'multi.tar');
  await run(SKOPEO, ['--insecure-policy', 'copy', '--all', '--quiet', `oci:${layout}:multi`, `oci-archive:${file}:multi`]);
  const svc = open('store-multi');
  const root = await svc.prepare({ taskDir: join(work, 'multi-alloc', 'image'), ref: `oci-archive:${file}` });
  expect(await readFile(join(root.rootfs, 'etc/arch'), 'utf8')).toBe(mine.architecture);
  // The reference resolved to the index (the repo digest), the root stands on this platform's manifest.
  expect(root.digest).toBe(index.manifestDigest);
  const { puller } = await svc.open();
  expect(puller.index.get(`oci-archive:${file}`)).toMatchObject({ repoDigest: index.manifestDigest, manifestDigest: here.manifestDigest });
  await svc.release(join(work, 'multi-alloc', 'image'));
});

describe('a corrupt or hostile archive fails naming the file and what is wrong, and leaves nothing in the store', () => {
  const layerName = async () => {
    const index = JSON.parse((await entriesOf(ociArchive)).find((e) => e.name === 'index.json')!.body!.toString());
    const manifest = JSON.parse(
      (await entriesOf(ociArchive)).find((e) => e.name === `blobs/sha256/${index.manifests[0].digest.slice(7)}`)!.body!.toString(),
    );
    return `blobs/sha256/${manifest.layers[1].digest.slice(7)}`;
  };

  async function expectRefused(ref: string, error: new (...a: never[]) => Error, message: RegExp): Promise<void> {
    const svc = open(`store-bad-${services.length}`);
    const taskDir = join(work, `bad-${services.length}`, 'image');
    const err = await svc.prepare({ taskDir, ref }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(error);
    expect((err as Error).message).toMatch(message);
    const { puller } = await svc.open();
    expect(puller.index.list()).toEqual([]);
    expect(await readdir(join(svc.storeDir, 'blobs', 'sha256'))).toEqual([]);
    expect(await leftovers(svc)).toEqual([]);
    expect(existsSync(join(taskDir, 'rootfs'))).toBe(false);
  }

  it('an altered byte in a layer', async () => {
    const layer = await layerName();
    const entries = (await entriesOf(ociArchive)).map((e) => {
      if (e.name !== layer) return e;
      const body = Buffer.from(e.body as Buffer);
      body[body.length - 5] ^= 0xff;
      return { ...e, body };
    });
    const file = await writeArchive('altered.tar', entries);
    await expectRefused(
      `oci-archive:${file}`,
      ImageArchiveError,
      new RegExp(`${file}: ${layer}: .*says digest sha256:\\w+, the file in the archive hashes to sha256:`),
    );
  });

  it('a blob the manifest names and the archive lacks', async () => {
    const layer = await layerName();
    const file = await writeArchive(
      'missing.tar',
      (await entriesOf(ociArchive)).filter((e) => e.name !== layer),
    );
    await expectRefused(
      `oci-archive:${file}`,
      ImageArchiveError,
      new RegExp(`${layer}: manifest sha256:\\w+'s layer 1 names it, but the archive has no such file`),
    );
  });

  it('two images and no reference; a reference it does not hold', async () => {
    const entries = (await entriesOf(ociArchive)).map((e) => {
      if (e.name !== 'index.json') return e;
      const index = JSON.parse(e.body!.toString());
      const second = { ...index.manifests[0], annotations: { 'org.opencontainers.image.ref.name': 'v2' } };
      return { ...e, body: JSON.stringify({ ...index, manifests: [...index.manifests, second] }) };
    });
    const file = await writeArchive('two.tar', entries);
    await expectRefused(
      `oci-archive:${file}`,
      ImageArchiveReferenceError,
      /holds 2 images and the reference names none \(it holds "v1", "v2"\)/,
    );
    await expectRefused(`oci-archive:${file}:v3`, ImageArchiveReferenceError, /holds no image named "v3" .*it holds "v1", "v2"/);
  });

  it('an entry climbing out with "..", a layer that is a link out of the archive, a docker layer altered, a file twice, a huge declared size, a missing file', async () => {
    const entries = await entriesOf(dockerArchive);
    const climbing = await writeArchive('climb.tar', [...entries, { name: '../../etc/evil', body: 'x' }]);
    await expectRefused(`docker-archive:${climbing}`, ImageArchiveError, /\.\.\/\.\.\/etc\/evil: a name with a "\.\." segment/);

    const manifest = JSON.parse(entries.find((e) => e.name === 'manifest.json')!.body!.toString());
    const linked = await writeArchive('link-out.tar', [
      ...entries.filter((e) => e.name !== 'manifest.json'),
      { name: 'evil.tar', type: 'symlink', linkname: '../../../etc/passwd' },
      { name: 'manifest.json', body: JSON.stringify([{ ...manifest[0], Layers: [manifest[0].Layers[0], 'evil.tar'] }]) },
    ]);
    await expectRefused(
      `docker-archive:${linked}`,
      ImageArchiveError,
      /evil\.tar: a link to "\.\.\/\.\.\/\.\.\/etc\/passwd", outside the archive/,
    );

    const top = manifest[0].Layers[1] as string;
    const altered = await writeArchive(
      'docker-altered.tar',
      entries.map((e) => {
        if (e.name !== top) return e;
        const body = Buffer.from(e.body as Buffer);
        body[600] ^= 0xff;
        return { ...e, body };
      }),
    );
    await expectRefused(
      `docker-archive:${altered}`,
      ImageArchiveError,
      new RegExp(`${top}: layer 1 hashes to sha256:\\w+ uncompressed, but the config's rootfs.diff_ids\\[1\\] says`),
    );

    const twice = await writeArchive('twice.tar', [...entries, entries.find((e) => e.name === 'manifest.json')!]);
    await expectRefused(`docker-archive:${twice}`, ImageArchiveError, /manifest\.json: appears twice in the archive/);

    // 8 GiB declared in a file of a few KiB: refused at its header, nothing read past it.
    const huge = await writeArchive('huge.tar', [{ name: 'manifest.json', body: '[]', declaredSize: 8 * 1024 ** 3 - 1 }]);
    await expectRefused(
      `docker-archive:${huge}`,
      ImageArchiveError,
      /huge\.tar: manifest\.json: the archive is not a well-formed tar at byte 0: declared size 8589934591 bytes is absurd \(limit \d+\)/,
    );

    await expectRefused(
      `docker-archive:${join(work, 'nowhere.tar')}`,
      ImageArchiveUnreadableError,
      /nowhere\.tar does not exist on this node/,
    );
  });
});
