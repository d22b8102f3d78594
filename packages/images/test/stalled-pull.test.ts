// A registry that stalls mid-layer: the bytes stop coming and the pull runs
// into image_pull_timeout. The timeout fails the pull only once the layer
// downloads it stopped have settled, so when the task hears of the timeout
// the store holds no temp file of the pull. A TCP relay in front of the
// registry passes the first bytes of each connection, then holds the rest.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ImagePuller, ImagePullTimeoutError } from '../src';
import { TestRegistry, buildTestImage, freePort } from '../src/testing';

jest.setTimeout(180_000);

let registry: TestRegistry;
let work: string;
let relay: Server | undefined;
const sockets: Socket[] = [];

/** Relays TCP to the registry, each connection's first `budget` bytes from it only; the rest is held. */
function startStallingRelay(port: number, target: number, budget: number): Promise<Server> {
  const server = createServer((client) => {
    const upstream = createConnection(target, '127.0.0.1');
    sockets.push(client, upstream);
    client.pipe(upstream);
    let passed = 0;
    upstream.on('data', (chunk: Buffer) => {
      const room = budget - passed;
      if (room > 0) client.write(chunk.subarray(0, room));
      passed += chunk.length;
      if (passed >= budget) upstream.pause();
    });
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  return new Promise((r) => server.listen(port, '127.0.0.1', () => r(server)));
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'images-stall-test-'));
  registry = await TestRegistry.start();
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  if (relay) await new Promise((r) => relay!.close(r));
  await registry?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

it('times out on a layer that stalls mid-download, and fails only once its temp file is gone', async () => {
  const layout = join(work, 'layout');
  const built = await buildTestImage(layout, 'big', { layers: [{ files: { big: randomBytes(12_000_000) } }] });
  await registry.push({ layoutDir: layout, tag: built.tag }, 'team/big:1');
  const port = await freePort();
  relay = await startStallingRelay(port, Number(registry.host.split(':')[1]), 2_000_000);
  await registry.trustFor(`127.0.0.1:${port}`);
  const puller = await ImagePuller.open({ storeDir: join(work, 'store'), certsDir: registry.certsDir, progressIntervalMs: 0 });
  try {
    let midLayer = false;
    const pull = puller.pull(`127.0.0.1:${port}/team/big:1`, {
      auth: { username: registry.username, password: registry.password },
      // The relay stalls for good, so the timeout only has to outlast the first bytes, however loaded the machine.
      pullTimeoutMs: 20_000,
      onProgress: (e) => {
        if (e.kind === 'downloading' && e.downloadedBytes > 0) midLayer = true;
      },
    });
    const err = await pull.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ImagePullTimeoutError);
    expect((err as Error).message).toContain('image_pull_timeout');
    expect(midLayer).toBe(true);
    expect(await puller.blobs.tempFiles()).toEqual([]);
  } finally {
    puller.dispose();
  }
});
