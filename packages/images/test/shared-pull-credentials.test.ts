// Pulls of one reference running at once share one pull only when they use
// the same credentials: a task with a wrong password must get the
// registry's 401, not succeed by joining another task's pull (which would
// hand it an image its own credentials do not reach). Against the real
// TestRegistry with htpasswd auth.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ImagePuller, RegistryAuthError } from '../src';
import { TestRegistry, buildTestImage } from '../src/testing';

jest.setTimeout(120_000);

let registry: TestRegistry;
let work: string;
let puller: ImagePuller | undefined;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'images-shared-creds-test-'));
  registry = await TestRegistry.start();
});

afterAll(async () => {
  puller?.dispose();
  await registry?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

it('two concurrent pulls of one reference, one with a wrong password: that one gets the 401, the other the image', async () => {
  const layout = join(work, 'layout');
  const built = await buildTestImage(layout, 'app', { layers: [{ files: { data: randomBytes(200_000) } }] });
  await registry.push({ layoutDir: layout, tag: built.tag }, 'team/app:1');
  puller = await ImagePuller.open({ storeDir: join(work, 'store'), certsDir: registry.certsDir });
  const reference = `${registry.host}/team/app:1`;

  // Started in one tick: had they shared, the second would only have joined the first.
  const good = puller.pull(reference, { auth: { username: registry.username, password: registry.password } });
  const wrong = puller.pull(reference, { auth: { username: registry.username, password: 'wrong' } });
  const sameAuth = puller.pull(reference, { auth: { username: registry.username, password: registry.password } });
  await expect(wrong).rejects.toBeInstanceOf(RegistryAuthError);
  await expect(wrong).rejects.toThrow(`registry ${registry.host}`);
  const pulled = await good;
  expect(pulled.repoDigest).toBe(built.manifestDigest);
  expect(pulled.fromStore).toBe(false);
  // The same credentials still share one pull.
  expect(await sameAuth).toBe(pulled);
});
