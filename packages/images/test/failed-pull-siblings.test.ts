// A pull that fails on one layer while its other layers are still
// downloading: the failure ends the whole pull. The other downloads are
// stopped and the pull rejects only once they have settled, so when the
// task hears of the failure the store holds no temp file of the failed pull
// and nothing keeps writing into it behind its back (the agent's e2e
// image-pull-faults test met such a temp file after a digest mismatch).
// Both layers come through a slow TCP relay (about 2 MB/s), so the big one
// (12 MB) is surely mid-download when the small one (1 MB, altered in the
// registry) fails its digest check at its end.
import { randomBytes } from 'node:crypto';
import { writeFile, mkdtemp, rm } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DigestMismatchError, ImagePuller } from '../src';
import { TestRegistry, buildTestImage, freePort } from '../src/testing';

jest.setTimeout(180_000);

let registry: TestRegistry;
let work: string;
let relay: Server | undefined;
const sockets: Socket[] = [];

/** Relays TCP to the registry at about 2 MB/s, so a 12 MB layer takes seconds. */
function startSlowRelay(port: number, target: number): Promise<Server> {
  const server = createServer((client) => {
    const upstream = createConnection(target, '127.0.0.1');
    sockets.push(client, upstream);
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => {
      upstream.pause();
      client.write(chunk);
      setTimeout(() => upstream.resume(), Math.ceil(chunk.length / 2_000));
    });
    upstream.on('end', () => client.end());
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  return new Promise((r) => server.listen(port, '127.0.0.1', () => r(server)));
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'images-siblings-test-'));
  registry = await TestRegistry.start();
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  if (relay) await new Promise((r) => relay!.close(r));
  await registry?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

it('stops the other layers of a pull one layer failed, and rejects only once their temp files are gone', async () => {
  const layout = join(work, 'layout');
  const built = await buildTestImage(layout, 'two', {
    layers: [{ files: { big: randomBytes(12_000_000) } }, { files: { small: randomBytes(1_000_000) } }],
  });
  await registry.push({ layoutDir: layout, tag: built.tag }, 'team/two:1');
  const manifest = JSON.parse(readFileSync(join(layout, 'blobs', 'sha256', built.manifestDigest.slice(7)), 'utf8')) as {
    layers: { digest: string; size: number }[];
  };
  const [big, small] = manifest.layers;
  await writeFile(registry.blobDataPath(small!.digest), randomBytes(small!.size));

  const port = await freePort();
  relay = await startSlowRelay(port, Number(registry.host.split(':')[1]));
  await registry.trustFor(`127.0.0.1:${port}`);
  const puller = await ImagePuller.open({ storeDir: join(work, 'store'), certsDir: registry.certsDir });
  try {
    const pull = puller.pull(`127.0.0.1:${port}/team/two:1`, { auth: { username: registry.username, password: registry.password } });
    const err = await pull.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(DigestMismatchError);
    expect((err as Error).message).toContain(small!.digest);
    // At the moment the pull failed: no temp file, and the big layer was stopped, not finished.
    expect(await puller.blobs.tempFiles()).toEqual([]);
    expect(await puller.blobs.has(big!.digest)).toBe(false);
    expect(await puller.blobs.has(small!.digest)).toBe(false);
  } finally {
    puller.dispose();
  }
});
