// A layer fails (its blob altered in the registry: a digest mismatch) while a
// sibling layer's download is stuck in a store write that ignores the stop
// (a hung disk). The pull waits for the stopped sibling at most the settle
// bound, then fails with the failing layer's own error — not with
// image_pull_timeout once that runs out, which would hide the real cause.
// The registry is the real TestRegistry; the one injected fault is the hung
// write (support/hung-disk.ts), because a real disk cannot be made to hang
// mid-write. The puller runs on a FakeClock, so its bounds are moved by the
// test, not by the machine's speed.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { FakeClock } from '@csiplug/core/testing';
import { DigestMismatchError, ImagePuller } from '../src';
import { TestRegistry, buildTestImage } from '../src/testing';
import { hangFirstWriteOf } from './support/hung-disk';

jest.setTimeout(120_000);

/** The puller's bound on waiting for stopped downloads (STOPPED_PULL_SETTLE_MS). */
const SETTLE_BOUND_MS = 10_000;
const HOUR_MS = 3_600_000;

let registry: TestRegistry;
let work: string;
let puller: ImagePuller | undefined;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'images-hung-sibling-test-'));
  registry = await TestRegistry.start();
});

afterAll(async () => {
  puller?.dispose();
  await registry?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

it("fails with the failing layer's own error within the settle bound while a sibling's write hangs", async () => {
  const layout = join(work, 'layout');
  const built = await buildTestImage(layout, 'two', {
    layers: [{ files: { stuck: randomBytes(500_000) } }, { files: { altered: randomBytes(400_000) } }],
  });
  await registry.push({ layoutDir: layout, tag: built.tag }, 'team/two:1');
  const manifest = JSON.parse(readFileSync(join(layout, 'blobs', 'sha256', built.manifestDigest.slice(7)), 'utf8')) as {
    layers: { digest: string; size: number }[];
  };
  const [stuck, altered] = manifest.layers;
  await writeFile(registry.blobDataPath(altered!.digest), randomBytes(altered!.size));

  const clock = new FakeClock();
  puller = await ImagePuller.open({ storeDir: join(work, 'store'), certsDir: registry.certsDir, clock, activityTimeoutMs: HOUR_MS });
  // The altered layer's write waits for the stuck one's: on a loaded machine it could fail first and stop the pull before.
  const hung = hangFirstWriteOf(puller.blobs, stuck!.digest, [altered!.digest]);
  let outcome: unknown;
  let settled = false;
  void puller
    .pull(`${registry.host}/team/two:1`, { auth: { username: registry.username, password: registry.password }, pullTimeoutMs: HOUR_MS })
    .then(
      () => 'pulled',
      (e: unknown) => e,
    )
    .then((o) => {
      outcome = o;
      settled = true;
    });
  await hung.started;
  expect(await hung.otherWriteFailed).toBeInstanceOf(DigestMismatchError);

  // Time passes on the puller's clock, a settle bound at a step, until the pull ends (by the hour's timeout at the latest).
  for (let waited = 0; !settled && waited <= HOUR_MS + SETTLE_BOUND_MS; waited += SETTLE_BOUND_MS) {
    await clock.advance(SETTLE_BOUND_MS);
    await sleep(10);
  }
  expect(outcome).toBeInstanceOf(DigestMismatchError);
  expect((outcome as Error).message).toContain(altered!.digest);
});
