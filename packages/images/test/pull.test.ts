// The pull side against a real registry: Debian's docker-registry over TLS
// with htpasswd auth, images built with umoci and pushed with skopeo.
// Requests are counted from the registry's own access log.
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  DigestMismatchError,
  ImageNotFoundError,
  ImagePuller,
  ImagePullTimeoutError,
  RegistryAuthError,
  RegistryTlsError,
  type ImagePullerOptions,
} from '../src';
import { TestRegistry, buildTestImage, buildTestImageIndex, freePort, type AccessLogEntry } from '../src/testing';

jest.setTimeout(120_000);

const UA = 'csiplug-images';
let registry: TestRegistry;
let work: string;
let layout: string;
const pullers: ImagePuller[] = [];

async function openPuller(extra: Partial<ImagePullerOptions> = {}, name = randomBytes(4).toString('hex')): Promise<ImagePuller> {
  const puller = await ImagePuller.open({
    storeDir: join(work, `store-${name}`),
    certsDir: registry.certsDir,
    retry: { attempts: 2, baseDelayMs: 50, maxDelayMs: 50 },
    ...extra,
  });
  pullers.push(puller);
  return puller;
}
const auth = () => registry.credentials;

const requestsDuring = (fn: () => Promise<unknown>): Promise<AccessLogEntry[]> => registry.requestsDuring(fn, UA);

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'images-pull-test-'));
  registry = await TestRegistry.start();
  layout = join(work, 'layout');
  await buildTestImage(layout, 'multi', {
    layers: [{ files: { 'etc/one': 'one' } }, { files: { 'usr/bin/two': randomBytes(300_000) } }, { files: { 'srv/three': 'three' } }],
    entrypoint: ['/usr/bin/two'],
    cmd: ['--serve'],
    env: ['MODE=test'],
    workingDir: '/srv',
    labels: { 'org.example': 'yes' },
  });
  await registry.push({ layoutDir: layout, tag: 'multi' }, 'team/app:1.0');
  await registry.push({ layoutDir: layout, tag: 'multi' }, 'team/app:latest');
  await buildTestImage(layout, 'amd', { layers: [{ files: { arch: 'amd64' } }], architecture: 'amd64' });
  await buildTestImage(layout, 'arm', { layers: [{ files: { arch: 'arm64' } }], architecture: 'arm64' });
  await buildTestImageIndex(layout, 'both', [
    { tag: 'amd', platform: { os: 'linux', architecture: 'amd64' } },
    { tag: 'arm', platform: { os: 'linux', architecture: 'arm64', variant: 'v8' } },
  ]);
  await registry.push({ layoutDir: layout, tag: 'both' }, 'team/multiarch:2');
});

afterEach(() => {
  for (const p of pullers.splice(0)) p.dispose();
});

afterAll(async () => {
  await registry?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

it('pulls a multi-layer image with every blob verified in the store, and does not ask again for a non-latest tag', async () => {
  const puller = await openPuller();
  const events: string[] = [];
  let image!: Awaited<ReturnType<ImagePuller['pull']>>;
  const first = await requestsDuring(async () => {
    image = await puller.pull(`${registry.host}/team/app:1.0`, { auth: auth(), onProgress: (e) => events.push(e.message) });
  });
  expect(first.some((r) => r.path.includes('/manifests/1.0'))).toBe(true);
  expect(image.fromStore).toBe(false);
  expect(image.layers).toHaveLength(3);
  expect(image.diffIds).toHaveLength(3);
  expect(image.config).toMatchObject({
    entrypoint: ['/usr/bin/two'],
    cmd: ['--serve'],
    workingDir: '/srv',
    labels: { 'org.example': 'yes' },
  });
  expect(image.config.env).toContain('MODE=test');
  for (const d of [image.manifestDigest, image.configDigest, ...image.layers.map((l) => l.digest)])
    expect(await puller.blobs.has(d)).toBe(true);
  expect(events.some((m) => /^Downloading image .*team\/app:1.0: [\d.]+ of [\d.]+ MB$/.test(m))).toBe(true);
  expect(events.at(-1)).toBe(`Pulled image ${registry.host}/team/app:1.0, digest ${image.repoDigest}`);

  const second = await requestsDuring(() => puller.pull(`${registry.host}/team/app:1.0`, { auth: auth() }));
  expect(second).toEqual([]);

  // After a restart too (the index is on disk).
  puller.dispose();
  const reopened = await ImagePuller.open({ storeDir: puller.blobs.dir, certsDir: registry.certsDir });
  pullers.push(reopened);
  const third = await requestsDuring(async () => expect((await reopened.pull(`${registry.host}/team/app:1.0`)).fromStore).toBe(true));
  expect(third).toEqual([]);
  const byDigest = await requestsDuring(() => reopened.pull(`${registry.host}/team/app@${image.repoDigest}`));
  expect(byDigest).toEqual([]);
});

it('re-checks latest (a manifest request) without fetching blobs again; forcePull re-checks a non-latest tag', async () => {
  const puller = await openPuller();
  await puller.pull(`${registry.host}/team/app:latest`, { auth: auth() });
  const recheck = await requestsDuring(() => puller.pull(`${registry.host}/team/app:latest`, { auth: auth() }));
  expect(recheck.some((r) => r.path.includes('/manifests/latest'))).toBe(true);
  expect(recheck.filter((r) => r.path.includes('/blobs/'))).toEqual([]);

  await puller.pull(`${registry.host}/team/app:1.0`, { auth: auth() });
  const forced = await requestsDuring(() => puller.pull(`${registry.host}/team/app:1.0`, { auth: auth(), forcePull: true }));
  expect(forced.some((r) => r.path.includes('/manifests/1.0'))).toBe(true);
  expect(forced.filter((r) => r.path.includes('/blobs/'))).toEqual([]);
});

it("takes this node's platform from an image index", async () => {
  const puller = await openPuller({ platform: { os: 'linux', architecture: 'arm64', variant: 'v8' } });
  const image = await puller.pull(`${registry.host}/team/multiarch:2`, { auth: auth() });
  expect(image.config.architecture).toBe('arm64');
  expect(image.repoDigest).not.toBe(image.manifestDigest);
  const amd = await (
    await openPuller({ platform: { os: 'linux', architecture: 'amd64' } })
  ).pull(`${registry.host}/team/multiarch:2`, { auth: auth() });
  expect(amd.config.architecture).toBe('amd64');
});

it('names the registry on a wrong password, and repo:tag on a missing tag', async () => {
  const puller = await openPuller();
  const wrong = puller.pull(`${registry.host}/team/app:1.0`, { auth: { username: registry.username, password: 'wrong' } });
  await expect(wrong).rejects.toBeInstanceOf(RegistryAuthError);
  await expect(wrong).rejects.toThrow(`registry ${registry.host}`);
  await expect(wrong).rejects.toThrow("the task's auth block");
  const anonymous = puller.pull(`${registry.host}/team/app:1.0`);
  await expect(anonymous).rejects.toThrow(/none \(anonymous\)/);
  const missing = puller.pull(`${registry.host}/team/app:nope`, { auth: auth() });
  await expect(missing).rejects.toBeInstanceOf(ImageNotFoundError);
  await expect(missing).rejects.toThrow(`${registry.host}/team/app:nope`);
});

it("does not lend one pull's credentials to another: a wrong password after a good one gets the registry's 401", async () => {
  const puller = await openPuller();
  await puller.pull(`${registry.host}/team/app:latest`, { auth: auth() });
  // latest is asked for again (a manifest request): with the wrong password, as if no pull had gone before.
  const wrong = puller.pull(`${registry.host}/team/app:latest`, { auth: { username: registry.username, password: 'wrong' } });
  await expect(wrong).rejects.toBeInstanceOf(RegistryAuthError);
  await expect(puller.pull(`${registry.host}/team/app:latest`)).rejects.toThrow(/none \(anonymous\)/);
  expect((await puller.pull(`${registry.host}/team/app:latest`, { auth: auth() })).reference).toBe(`${registry.host}/team/app:latest`);
});

it('reads credentials from a docker config.json', async () => {
  const config = join(work, 'docker-config.json');
  await writeFile(
    config,
    JSON.stringify({ auths: { [registry.host]: { auth: Buffer.from(`${registry.username}:${registry.password}`).toString('base64') } } }),
  );
  const puller = await openPuller({ dockerConfigPath: config });
  expect((await puller.pull(`${registry.host}/team/app:1.0`)).layers).toHaveLength(3);
});

it('fails a blob altered in the registry with a digest mismatch, leaving no blob and no temp file', async () => {
  const l2 = join(work, 'layout-corrupt');
  const built = await buildTestImage(l2, 'c', { layers: [{ files: { 'data/blob': randomBytes(100_000) } }] });
  await registry.push({ layoutDir: l2, tag: built.tag }, 'team/corrupt:1');
  const probe = await openPuller();
  const manifest = JSON.parse(
    (await import('node:fs')).readFileSync(join(l2, 'blobs', 'sha256', built.manifestDigest.slice(7)), 'utf8'),
  ) as { layers: { digest: string; size: number }[] };
  probe.dispose();
  const layer = manifest.layers[0]!;
  await writeFile(registry.blobDataPath(layer.digest), randomBytes(layer.size));
  const puller = await openPuller();
  const pull = puller.pull(`${registry.host}/team/corrupt:1`, { auth: auth() });
  await expect(pull).rejects.toBeInstanceOf(DigestMismatchError);
  await expect(pull).rejects.toThrow(layer.digest);
  expect(await puller.blobs.has(layer.digest)).toBe(false);
  expect(await puller.blobs.tempFiles()).toEqual([]);
});

it('times out on a registry that accepts and never answers', async () => {
  const sockets: Socket[] = [];
  const server: Server = createServer((s) => sockets.push(s));
  const port = await freePort();
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  try {
    const puller = await openPuller({ activityTimeoutMs: 300, retry: { attempts: 2, baseDelayMs: 10, maxDelayMs: 10 } });
    const pull = puller.pull(`127.0.0.1:${port}/team/app:1.0`);
    await expect(pull).rejects.toBeInstanceOf(ImagePullTimeoutError);
    await expect(pull).rejects.toThrow(/pull_activity_timeout/);
    const overall = await openPuller({ activityTimeoutMs: 60_000, pullTimeoutMs: 300 });
    await expect(overall.pull(`127.0.0.1:${port}/team/app:1.0`)).rejects.toThrow(/image_pull_timeout/);
  } finally {
    for (const s of sockets) s.destroy();
    await new Promise((r) => server.close(r));
  }
});

it('shares one pull among concurrent pulls of one reference', async () => {
  const puller = await openPuller();
  const requests = await requestsDuring(async () => {
    const images = await Promise.all([1, 2, 3, 4].map(() => puller.pull(`${registry.host}/team/app:1.0`, { auth: auth() })));
    expect(new Set(images.map((i) => i.manifestDigest)).size).toBe(1);
  });
  expect(requests.filter((r) => r.path.endsWith('/manifests/1.0') && r.status === 200)).toHaveLength(1);
  const blobGets = requests.filter((r) => r.path.includes('/blobs/') && r.status === 200);
  expect(blobGets.length).toBe(new Set(blobGets.map((r) => r.path)).size);
});

it('says where to put ca.crt when the CA is not trusted, and the same puller uses it once it is there', async () => {
  const certsDir = join(work, 'empty-certs.d');
  const puller = await openPuller({ certsDir });
  const pull = puller.pull(`${registry.host}/team/app:1.0`, { auth: auth() });
  await expect(pull).rejects.toBeInstanceOf(RegistryTlsError);
  await expect(pull).rejects.toThrow(`${certsDir}/${registry.host}/ca.crt`);
  // The operator does as told, the agent running on (Docker reads certs.d at each pull).
  await registry.trustFor(registry.host, certsDir);
  await expect(puller.pull(`${registry.host}/team/app:1.0`, { auth: auth() })).resolves.toBeDefined();
});

it('opens a store left with temp files and removes them', async () => {
  const puller = await openPuller({}, 'leftovers');
  const leftover = join(puller.blobs.dir, 'blobs', 'sha256', `.partial-${'a'.repeat(64)}-x`);
  await writeFile(leftover, 'half');
  const again = await openPuller({}, 'leftovers');
  expect(await readdir(join(again.blobs.dir, 'blobs', 'sha256'))).not.toContain(`.partial-${'a'.repeat(64)}-x`);
});
