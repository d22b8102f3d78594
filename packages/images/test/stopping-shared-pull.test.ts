// A pull that is stopping — its only caller gave up, or image_pull_timeout
// fired — waits (on the puller's clock, at most the settle bound) for its
// downloads to remove their temp files. A new pull of the same reference in
// that window must start a pull of its own, not join the stopping one and get
// an abort or a timeout it never asked for (a job update during a slow pull
// did). dispose() does not wait out the bound either.
// The registry is the real TestRegistry; the one injected fault is a store
// write that hangs (support/hung-disk.ts), because a real disk cannot be made
// to hang mid-write: it keeps the stopping pull in its settle window for as
// long as the test holds the FakeClock.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeClock } from '@csiplug/core/testing';
import { ImagePuller, ImagePullTimeoutError } from '../src';
import { TestRegistry, buildTestImage } from '../src/testing';
import { hangFirstWriteOf } from './support/hung-disk';

jest.setTimeout(120_000);

/** The puller's bound on waiting for stopped downloads (STOPPED_PULL_SETTLE_MS). */
const SETTLE_BOUND_MS = 10_000;

let registry: TestRegistry;
let work: string;
let reference: string;
let layerDigest: string;
let repoDigest: string;
const pullers: ImagePuller[] = [];

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'images-stopping-pull-test-'));
  registry = await TestRegistry.start();
  const layout = join(work, 'layout');
  const built = await buildTestImage(layout, 'one', { layers: [{ files: { data: randomBytes(500_000) } }] });
  await registry.push({ layoutDir: layout, tag: built.tag }, 'team/one:1');
  const manifest = JSON.parse(readFileSync(join(layout, 'blobs', 'sha256', built.manifestDigest.slice(7)), 'utf8')) as {
    layers: { digest: string }[];
  };
  layerDigest = manifest.layers[0]!.digest;
  repoDigest = built.manifestDigest;
  reference = `${registry.host}/team/one:1`;
});

afterAll(async () => {
  for (const p of pullers) p.dispose();
  await registry?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

async function openPuller(clock: FakeClock): Promise<ImagePuller> {
  const puller = await ImagePuller.open({ storeDir: await mkdtemp(join(work, 'store-')), certsDir: registry.certsDir, clock });
  pullers.push(puller);
  return puller;
}

const auth = () => ({ username: registry.username, password: registry.password });

it('a pull after the only caller of a shared pull gave up starts anew instead of getting that caller’s abort', async () => {
  const clock = new FakeClock();
  const puller = await openPuller(clock);
  const hung = hangFirstWriteOf(puller.blobs, layerDigest);
  const giveUp = new AbortController();
  const first = puller.pull(reference, { auth: auth(), signal: giveUp.signal });
  first.catch(() => undefined);
  await hung.started;
  giveUp.abort(new Error('the first task was stopped'));
  await expect(first).rejects.toThrow('the first task was stopped');

  // The stopped pull waits for its hung download; a new task pulls the same image meanwhile.
  const second = puller.pull(reference, { auth: auth() });
  second.catch(() => undefined);
  await clock.advance(SETTLE_BOUND_MS);
  const pulled = await second;
  expect(pulled.repoDigest).toBe(repoDigest);
  expect(pulled.fromStore).toBe(false);
});

it('the stopped pull, once settled, leaves its replacement in the sharing: a third caller joins the second', async () => {
  const clock = new FakeClock();
  const puller = await openPuller(clock);
  // The layer's first write hangs for good (the stopped pull); its second waits for the test (the replacement).
  const realWrite = puller.blobs.write.bind(puller.blobs);
  let layerWrites = 0;
  let firstWriting!: () => void;
  const firstStarted = new Promise<void>((resolve) => (firstWriting = resolve));
  let secondWriting!: () => void;
  const secondStarted = new Promise<void>((resolve) => (secondWriting = resolve));
  let letSecondWrite!: () => void;
  const secondMayWrite = new Promise<void>((resolve) => (letSecondWrite = resolve));
  jest.spyOn(puller.blobs, 'write').mockImplementation(async (d, size, chunks, onProgress) => {
    if (d !== layerDigest) return realWrite(d, size, chunks, onProgress);
    layerWrites++;
    if (layerWrites === 1) {
      firstWriting();
      return new Promise<string>(() => undefined);
    }
    if (layerWrites === 2) {
      secondWriting();
      await secondMayWrite;
    }
    return realWrite(d, size, chunks, onProgress);
  });
  const giveUp = new AbortController();
  const first = puller.pull(reference, { auth: auth(), signal: giveUp.signal });
  first.catch(() => undefined);
  await firstStarted;
  giveUp.abort();
  await expect(first).rejects.toThrow();
  const second = puller.pull(reference, { auth: auth() });
  await secondStarted;
  // The stopped pull ends (its settle bound runs out) while its replacement is still writing.
  await clock.advance(SETTLE_BOUND_MS);
  const third = puller.pull(reference, { auth: auth() });
  letSecondWrite();
  const [pulled, joined] = await Promise.all([second, third]);
  expect(joined).toBe(pulled);
  expect(layerWrites).toBe(2);
});

it('a pull after a shared pull hit image_pull_timeout starts anew instead of getting that timeout', async () => {
  const clock = new FakeClock();
  const puller = await openPuller(clock);
  const hung = hangFirstWriteOf(puller.blobs, layerDigest);
  const first = puller.pull(reference, { auth: auth(), pullTimeoutMs: 60_000 });
  first.catch(() => undefined);
  await hung.started;
  await clock.advance(60_000);

  const second = puller.pull(reference, { auth: auth() });
  second.catch(() => undefined);
  await clock.advance(SETTLE_BOUND_MS);
  await expect(first).rejects.toBeInstanceOf(ImagePullTimeoutError);
  const pulled = await second;
  expect(pulled.repoDigest).toBe(repoDigest);
  expect(pulled.fromStore).toBe(false);
});

it('dispose() ends a stopped pull’s wait for its hung download at once', async () => {
  const clock = new FakeClock();
  const puller = await openPuller(clock);
  const hung = hangFirstWriteOf(puller.blobs, layerDigest);
  const pull = puller.pull(reference, { auth: auth(), pullTimeoutMs: 60_000 });
  pull.catch(() => undefined);
  await hung.started;
  await clock.advance(60_000);
  // Nothing moves the clock from here: only dispose() can end the wait.
  puller.dispose();
  await expect(pull).rejects.toBeInstanceOf(ImagePullTimeoutError);
}, 30_000);
