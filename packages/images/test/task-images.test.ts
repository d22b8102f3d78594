// TaskImages, the agent's image service, against a real registry (Debian's
// docker-registry over TLS with htpasswd auth) and real overlay mounts: a
// task's root made from a pulled image, credentials from the agent's docker
// config file, a mounted root taken again without a registry request, the
// task's writes kept out of the shared layers, and Nomad's image GC on the
// injected clock (an image no task uses is removed after the delay, but not
// a layer another image shares; gc.image = false keeps everything).
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeClock } from '@csiplug/core/testing';
import {
  RegistryAuthError,
  TaskImages,
  TaskRootImageLostError,
  chainIds,
  digestHex,
  isMounted,
  type PreparedTaskImage,
  type ImageEvent,
} from '../src';
import { TestRegistry, buildTestImage, type AccessLogEntry } from '../src/testing';
import { mountsUnderSync, unmountAndRemove } from './support/cleanup';

jest.setTimeout(120_000);

const UA = 'csiplug-images';
let registry: TestRegistry;
let work: string;
const services: TaskImages[] = [];

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'images-task-images-'));
  registry = await TestRegistry.start();
  const layout = join(work, 'layout');
  const base = { files: { 'etc/base': 'base', 'etc/passwd': 'root:x:0:0::/root:/bin/sh\n' } };
  await buildTestImage(layout, 'one', { layers: [base, { files: { 'srv/one': 'one' } }], workingDir: '/srv' });
  await buildTestImage(layout, 'two', { layers: [base, { files: { 'srv/two': 'two' } }] });
  await registry.push({ layoutDir: layout, tag: 'one' }, 'team/one:1');
  await registry.push({ layoutDir: layout, tag: 'two' }, 'team/two:1');
});

afterAll(async () => {
  for (const s of services) s.dispose();
  await registry?.stop();
  if (work) {
    unmountAndRemove(work);
    expect(mountsUnderSync(work)).toEqual([]);
  }
});

function open(
  name: string,
  clock: FakeClock,
  extra: { gc?: { image: boolean; imageDelay: number }; authConfig?: string; layerMode?: 'overlay' | 'copy' } = {},
) {
  const svc = new TaskImages({
    dataDir: join(work, name),
    docker: {
      pullActivityTimeout: 60_000,
      gc: extra.gc ?? { image: true, imageDelay: 180_000 },
      ...(extra.authConfig ? { authConfig: extra.authConfig } : {}),
    },
    clock,
    certsDir: registry.certsDir,
    ...(extra.layerMode ? { layerMode: extra.layerMode } : {}),
  });
  services.push(svc);
  return svc;
}

const auth = () => registry.credentials;

const requestsDuring = (fn: () => Promise<unknown>): Promise<AccessLogEntry[]> => registry.requestsDuring(fn, UA);

async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

it("makes a task's root from the image, keeps its writes out of the shared layers, and takes a mounted root again without asking the registry", async () => {
  const svc = open('a', new FakeClock());
  const events: ImageEvent[] = [];
  const taskDir = join(work, 'a-alloc', 'task', 'image');
  const first = await requestsDuring(async () => {
    const root = await svc.prepare({ taskDir, ref: `${registry.host}/team/one:1`, auth: auth(), onEvent: (e) => events.push(e) });
    expect(root.reused).toBe(false);
    expect(root.config.workingDir).toBe('/srv');
    expect(await readFile(join(root.rootfs, 'srv/one'), 'utf8')).toBe('one');
    expect(root.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    await writeFile(join(root.rootfs, 'etc/base'), 'changed by the task');
  });
  expect(first.some((r) => r.path.includes('/manifests/1'))).toBe(true);
  expect(events.at(-1)).toMatchObject({ kind: 'pulled', fromStore: false });
  expect(await isMounted(taskDir)).toBe(true);
  // The write went to the task's upper dir; the shared layer is as the image has it.
  expect(await readFile(join(taskDir, 'upper/etc/base'), 'utf8')).toBe('changed by the task');
  const layersDir = join(svc.storeDir, 'layers');
  const bases = [];
  for (const d of await readdir(layersDir))
    if (existsSync(join(layersDir, d, 'fs/etc/base'))) bases.push(await readFile(join(layersDir, d, 'fs/etc/base'), 'utf8'));
  expect(bases).toEqual(['base']);

  // A new service over the same store (an agent restarted after kill -9): the mounted root is taken as it is, with no request.
  const again = open('a', new FakeClock());
  const second = await requestsDuring(async () => {
    const root = await again.prepare({ taskDir, ref: `${registry.host}/team/one:1`, auth: auth() });
    expect(root.reused).toBe(true);
    expect(await readFile(join(root.rootfs, 'etc/base'), 'utf8')).toBe('changed by the task');
  });
  expect(second).toEqual([]);
  await again.release(taskDir);
  expect(await isMounted(taskDir)).toBe(false);
  expect(existsSync(join(taskDir, 'upper'))).toBe(false);
});

it("answers the registry's challenge with the agent's docker config file when the task has no auth, and fails clearly with neither", async () => {
  const config = join(work, 'docker.json');
  const b64 = Buffer.from(`${registry.username}:${registry.password}`).toString('base64');
  await writeFile(config, JSON.stringify({ auths: { [registry.host]: { auth: b64 } } }));
  const svc = open('b', new FakeClock(), { authConfig: config });
  const root = await svc.prepare({ taskDir: join(work, 'b-alloc', 'image'), ref: `${registry.host}/team/two:1` });
  expect(await readFile(join(root.rootfs, 'srv/two'), 'utf8')).toBe('two');
  await svc.release(join(work, 'b-alloc', 'image'));

  const bare = open('c', new FakeClock());
  await expect(bare.prepare({ taskDir: join(work, 'c-alloc', 'image'), ref: `${registry.host}/team/two:1` })).rejects.toBeInstanceOf(
    RegistryAuthError,
  );
  expect(await isMounted(join(work, 'c-alloc', 'image'))).toBe(false);
});

it('removes an image no task used for gc.imageDelay, keeping the layer another image shares; gc.image = false keeps every image', async () => {
  const clock = new FakeClock();
  const svc = open('d', clock);
  const one = join(work, 'd-alloc', 'one');
  const two = join(work, 'd-alloc', 'two');
  await svc.prepare({ taskDir: one, ref: `${registry.host}/team/one:1`, auth: auth() });
  await svc.prepare({ taskDir: two, ref: `${registry.host}/team/two:1`, auth: auth() });
  const { puller } = await svc.open();
  const imageOne = (await puller.lookup(`${registry.host}/team/one:1`))!;
  const [baseChain, topChain] = chainIds(imageOne.diffIds).map(digestHex);
  await svc.release(one);
  // Not before the delay: a task starting again soon finds it.
  await clock.advance(179_000);
  expect(puller.index.get(`${registry.host}/team/one:1`)).toBeDefined();
  await clock.advance(1_000);
  // The top chain's dir goes last: GC is done when it is gone.
  await until(
    'image one removed',
    () => puller.index.get(`${registry.host}/team/one:1`) === undefined && !existsSync(join(svc.storeDir, 'layers', topChain!)),
  );
  expect(await puller.blobs.has(imageOne.layers[1]!.digest)).toBe(false);
  expect(existsSync(join(svc.storeDir, 'layers', topChain!))).toBe(false);
  // The base layer is image two's too, and image two is in use.
  expect(await puller.blobs.has(imageOne.layers[0]!.digest)).toBe(true);
  expect(existsSync(join(svc.storeDir, 'layers', baseChain!))).toBe(true);
  expect(puller.index.get(`${registry.host}/team/two:1`)).toBeDefined();
  await svc.release(two);

  // A service that never saw a root prepared (an agent restarted, its task not yet restored) still keeps the layers a mounted root stands on.
  const running = join(work, 'd-alloc', 'running');
  await svc.prepare({ taskDir: running, ref: `${registry.host}/team/two:1`, auth: auth() });
  const unaware = open('d', new FakeClock());
  expect(await unaware.removeImage(`${registry.host}/team/two:1`)).toBe(false);
  expect((await unaware.open()).puller.index.get(`${registry.host}/team/two:1`)).toBeDefined();
  await svc.release(running);

  const keepClock = new FakeClock();
  const keep = open('e', keepClock, { gc: { image: false, imageDelay: 1_000 } });
  await keep.prepare({ taskDir: join(work, 'e-alloc', 'one'), ref: `${registry.host}/team/one:1`, auth: auth() });
  await keep.release(join(work, 'e-alloc', 'one'));
  expect(keepClock.pendingTimers).toBe(0);
  await keepClock.advance(10_000);
  expect((await keep.open()).puller.index.get(`${registry.host}/team/one:1`)).toBeDefined();
});

it('takes a mounted root again with the image it was made from, not the one its moving tag names now, and asks the registry nothing', async () => {
  const layout = join(work, 'layout-moving');
  await buildTestImage(layout, 'v1', { layers: [{ files: { 'srv/version': 'v1' } }], entrypoint: ['/srv/v1'], env: ['VERSION=1'] });
  await buildTestImage(layout, 'v2', { layers: [{ files: { 'srv/version': 'v2' } }], entrypoint: ['/srv/v2'], env: ['VERSION=2'] });
  const ref = `${registry.host}/team/moving:latest`;
  await registry.push({ layoutDir: layout, tag: 'v1' }, 'team/moving:latest');
  const svc = open('moving', new FakeClock());
  const dirA = join(work, 'moving-alloc', 'a');
  const dirB = join(work, 'moving-alloc', 'b');
  const a = await svc.prepare({ taskDir: dirA, ref, auth: auth() });
  expect(a.config.entrypoint).toEqual(['/srv/v1']);
  await registry.push({ layoutDir: layout, tag: 'v2' }, 'team/moving:latest');
  const b = await svc.prepare({ taskDir: dirB, ref, auth: auth() });
  expect(b.config.entrypoint).toEqual(['/srv/v2']);
  expect(b.digest).not.toBe(a.digest);

  // Task A restarts (and, after kill -9, a new agent prepares it): its root, its image's config and digest, no request.
  for (const svcAgain of [svc, open('moving', new FakeClock())]) {
    const events: ImageEvent[] = [];
    const requests = await requestsDuring(async () => {
      const again = await svcAgain.prepare({ taskDir: dirA, ref, auth: auth(), onEvent: (e) => events.push(e) });
      expect(again).toMatchObject({ reused: true, digest: a.digest });
      expect(again.config.entrypoint).toEqual(['/srv/v1']);
      expect(again.config.env).toContain('VERSION=1');
      expect(await readFile(join(again.rootfs, 'srv/version'), 'utf8')).toBe('v1');
    });
    expect(requests).toEqual([]);
    expect(events).toEqual([expect.objectContaining({ kind: 'pulled', digest: a.digest, fromStore: true })]);
  }
  await svc.release(dirA);
  await svc.release(dirB);
});

it("keeps the image under a task that names it by digest, even when all its layers are another image's too and another task of its tag is gone", async () => {
  const layout = join(work, 'layout-shared');
  const base = { files: { 'srv/a': 'a' } };
  await buildTestImage(layout, 'a', { layers: [base] });
  await buildTestImage(layout, 'b', { layers: [base, { files: { 'srv/b': 'b' } }] });
  await registry.push({ layoutDir: layout, tag: 'a' }, 'team/a:1');
  await registry.push({ layoutDir: layout, tag: 'b' }, 'team/b:1');
  const clock = new FakeClock();
  const svc = open('shared', clock);
  const byTag = join(work, 'shared-alloc', 'tag');
  const byDigest = join(work, 'shared-alloc', 'digest');
  const bDir = join(work, 'shared-alloc', 'b');
  const tagged = await svc.prepare({ taskDir: byTag, ref: `${registry.host}/team/a:1`, auth: auth() });
  await svc.prepare({ taskDir: bDir, ref: `${registry.host}/team/b:1`, auth: auth() });
  const pinnedRef = `${registry.host}/team/a@${tagged.digest}`;
  const pinned = await svc.prepare({ taskDir: byDigest, ref: pinnedRef, auth: auth() });
  await writeFile(join(pinned.rootfs, 'srv/a'), 'written by the task');

  // The task on a:1 by its tag goes: the image is still in use (by digest), so no GC is set, and none removes it.
  await svc.release(byTag);
  expect(clock.pendingTimers).toBe(0);
  await clock.advance(180_000);
  expect(await svc.removeImage(`${registry.host}/team/a:1`)).toBe(false);
  const { puller } = await svc.open();
  expect(puller.index.get(`${registry.host}/team/a:1`)).toBeDefined();
  const again = await svc.prepare({ taskDir: byDigest, ref: pinnedRef, auth: auth() });
  expect(again.reused).toBe(true);
  expect(await readFile(join(again.rootfs, 'srv/a'), 'utf8')).toBe('written by the task');
  expect(await isMounted(byDigest)).toBe(true);

  // An agent that never saw these roots keeps image a too: its one layer is b's as well, but a mounted root stands on it.
  const unaware = open('shared', new FakeClock());
  expect(await unaware.removeImage(`${registry.host}/team/a:1`)).toBe(false);
  await svc.release(byDigest);
  await svc.release(bDir);
});

it('lets no prepare mount a root over an image GC is removing: the prepare waits for the GC, then pulls the image again', async () => {
  const svc = open('race', new FakeClock());
  const ref = `${registry.host}/team/one:1`;
  const first = join(work, 'race-alloc', 'first');
  const second = join(work, 'race-alloc', 'second');
  await svc.prepare({ taskDir: first, ref, auth: auth() });
  await svc.release(first);
  const { puller } = await svc.open();
  // The ordering is forced: GC has made its checks and is about to delete when a task starts on the image.
  const realDelete = puller.index.delete.bind(puller.index);
  let prepared: Promise<PreparedTaskImage> | undefined;
  let settled = false;
  jest.spyOn(puller.index, 'delete').mockImplementationOnce(async (reference) => {
    prepared = svc.prepare({ taskDir: second, ref, auth: auth() });
    prepared.finally(() => (settled = true)).catch(() => undefined);
    await until('the prepare to end or to wait for the GC', () => settled || svc.storeLock.waiting > 0);
    return realDelete(reference);
  });
  expect(await svc.removeImage(ref)).toBe(true);
  const root = await prepared!;
  expect(root.reused).toBe(false);
  expect(await readFile(join(root.rootfs, 'srv/one'), 'utf8')).toBe('one');
  expect(await readFile(join(root.rootfs, 'etc/base'), 'utf8')).toBe('base');
  expect(puller.index.get(ref)).toBeDefined();
  await svc.release(second);
});

it('takes a copy-mode root again (it is not a mount) with the image it was made from, asking the registry nothing', async () => {
  const layout = join(work, 'layout-moving-copy');
  await buildTestImage(layout, 'v1', { layers: [{ files: { 'srv/version': 'c1' } }], entrypoint: ['/srv/c1'] });
  await buildTestImage(layout, 'v2', { layers: [{ files: { 'srv/version': 'c2' } }], entrypoint: ['/srv/c2'] });
  const ref = `${registry.host}/team/moving-copy:latest`;
  await registry.push({ layoutDir: layout, tag: 'v1' }, 'team/moving-copy:latest');
  const svc = open('moving-copy', new FakeClock(), { layerMode: 'copy' });
  const dir = join(work, 'moving-copy-alloc', 'a');
  const first = await svc.prepare({ taskDir: dir, ref, auth: auth() });
  expect(first.reused).toBe(false);
  await registry.push({ layoutDir: layout, tag: 'v2' }, 'team/moving-copy:latest');
  const requests = await requestsDuring(async () => {
    const again = await open('moving-copy', new FakeClock(), { layerMode: 'copy' }).prepare({ taskDir: dir, ref, auth: auth() });
    expect(again).toMatchObject({ reused: true, digest: first.digest });
    expect(again.config.entrypoint).toEqual(['/srv/c1']);
    expect(await readFile(join(again.rootfs, 'srv/version'), 'utf8')).toBe('c1');
  });
  expect(requests).toEqual([]);
  await svc.release(dir);
});

it('fails clearly on a mounted root whose image the store lost, and leaves the root and its files alone', async () => {
  const svc = open('lost', new FakeClock());
  const ref = `${registry.host}/team/one:1`;
  const dir = join(work, 'lost-alloc', 'a');
  const root = await svc.prepare({ taskDir: dir, ref, auth: auth() });
  await writeFile(join(root.rootfs, 'srv/one'), 'written by the task');
  const { puller } = await svc.open();
  const image = (await puller.lookup(ref))!;
  await puller.blobs.remove(image.configDigest);
  await puller.index.delete(ref);
  await expect(open('lost', new FakeClock()).prepare({ taskDir: dir, ref, auth: auth() })).rejects.toThrow(
    expect.objectContaining({ name: TaskRootImageLostError.name, message: expect.stringMatching(/stop the alloc and start it again/) }),
  );
  expect(await isMounted(dir)).toBe(true);
  expect(await readFile(join(root.rootfs, 'srv/one'), 'utf8')).toBe('written by the task');
  await svc.release(dir);
});
