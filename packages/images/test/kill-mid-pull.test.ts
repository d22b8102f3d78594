// kill -9 mid-pull: a pull runs in a child process through a slow TCP relay
// (so the big layer is surely mid-download), the child is SIGKILLed, and
// the reopened store has no temp file and no partial blob; the next pull
// completes. The child loads the built package (dist), as the agent would.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ImagePuller, digestOf } from '../src';
import { TestRegistry, buildTestImage, freePort } from '../src/testing';

jest.setTimeout(180_000);

const DIST = join(__dirname, '..', 'dist', 'index.js');
let registry: TestRegistry;
let work: string;
let relay: Server;
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
  work = await mkdtemp(join(tmpdir(), 'images-kill-test-'));
  registry = await TestRegistry.start();
  await buildTestImage(join(work, 'layout'), 'big', { layers: [{ files: { small: 'x' } }, { files: { big: randomBytes(12_000_000) } }] });
  await registry.push({ layoutDir: join(work, 'layout'), tag: 'big' }, 'team/big:1');
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  if (relay) await new Promise((r) => relay.close(r));
  await registry?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

it('leaves no temp file and no partial blob after SIGKILL mid-download, and the next pull completes', async () => {
  if (!existsSync(DIST)) throw new Error(`build the package first (nx run images:build): ${DIST} is missing`);
  const port = await freePort();
  relay = await startSlowRelay(port, Number(registry.host.split(':')[1]));
  await registry.trustFor(`127.0.0.1:${port}`);
  const storeDir = join(work, 'store');
  const ref = `127.0.0.1:${port}/team/big:1`;
  const script = `
    const { ImagePuller } = require(${JSON.stringify(DIST)});
    ImagePuller.open({ storeDir: ${JSON.stringify(storeDir)}, certsDir: ${JSON.stringify(registry.certsDir)}, progressIntervalMs: 0 })
      .then((p) => p.pull(${JSON.stringify(ref)}, { auth: { username: ${JSON.stringify(registry.username)}, password: ${JSON.stringify(registry.password)} },
        onProgress: (e) => { if (e.kind === 'downloading' && e.downloadedBytes > 1000000) console.log('MID ' + e.downloadedBytes); } }))
      .then(() => console.log('DONE'), (e) => { console.log('FAIL ' + e.message); process.exit(1); });`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<NodeJS.Signals | null>((r) => child.once('exit', (_c, s) => r(s)));
  const seen = await new Promise<string>((resolve) => {
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('MID') || out.includes('DONE') || out.includes('FAIL')) resolve(out);
    });
    child.once('exit', () => resolve(out));
  });
  expect(seen).toContain('MID');
  child.kill('SIGKILL');
  expect(await exited).toBe('SIGKILL');
  const { readdir } = await import('node:fs/promises');
  // The kill came mid-download: the big layer's temp file is there, nothing under its digest yet.
  expect((await readdir(join(storeDir, 'blobs', 'sha256'))).some((n) => n.startsWith('.partial-'))).toBe(true);

  const puller = await ImagePuller.open({ storeDir, certsDir: registry.certsDir });
  try {
    expect(await puller.blobs.tempFiles()).toEqual([]);
    // Whatever is under a digest is whole and verified.
    for (const alg of ['sha256']) {
      for (const hex of await readdir(join(storeDir, 'blobs', alg))) {
        expect(digestOf(await readFile(join(storeDir, 'blobs', alg, hex)))).toBe(`${alg}:${hex}`);
      }
    }
    expect(puller.index.list()).toEqual([]);
    const image = await puller.pull(`${registry.host}/team/big:1`, { auth: { username: registry.username, password: registry.password } });
    for (const l of image.layers) expect(await puller.blobs.has(l.digest)).toBe(true);
  } finally {
    puller.dispose();
  }
});
