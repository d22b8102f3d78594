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
import { RegistryAuthError, TaskImages, chainIds, digestHex, isMounted, type PullEvent } from '../src';
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

function open(name: string, clock: FakeClock, extra: { gc?: { image: boolean; imageDelay: number }; authConfig?: string } = {}) {
  const svc = new TaskImages({
    dataDir: join(work, name),
    docker: {
      pullActivityTimeout: 60_000,
      gc: extra.gc ?? { image: true, imageDelay: 180_000 },
      ...(extra.authConfig ? { authConfig: extra.authConfig } : {}),
    },
    clock,
    certsDir: registry.certsDir,
  });
  services.push(svc);
  return svc;
}

const auth = () => ({ username: registry.username, password: registry.password });

async function requestsDuring(fn: () => Promise<unknown>): Promise<AccessLogEntry[]> {
  await registry.syncAccessLog();
  const before = registry.accessLog(UA).length;
  await fn();
  await registry.syncAccessLog();
  return registry.accessLog(UA).slice(before);
}

async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

it("makes a task's root from the image, keeps its writes out of the shared layers, and takes a mounted root again without asking the registry", async () => {
  const svc = open('a', new FakeClock());
  const events: PullEvent[] = [];
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
  await until('image one removed', () => puller.index.get(`${registry.host}/team/one:1`) === undefined);
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
