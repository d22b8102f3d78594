// kill -9 in the middle of unpacking a big layer (a child process running
// the built package), in overlay and copy modes: the half-made layer never
// appears under its chain id; reopening the store unmounts what the child
// left mounted, removes its temp dir, and a new unpack completes.
// Needs the package built first (nx run images:build): the child runs dist/.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { chainIds, digestHex, isMounted, LayerStore, type LayerStoreMode, prepareRootfs, releaseRootfs } from '../src';
import { type TestTarEntry } from '../src/testing';
import { mountsUnderSync, unmountAndRemove } from './support/cleanup';
import { writeLayer } from './support/layers';
import { processStartTime } from '../src/rootfs/tmp-owner';

const DIST = path.resolve(__dirname, '..', 'dist', 'index.js');
const CHILD = path.join(__dirname, 'support', 'unpack-child.js');
const BIG_FILES = 4000;

let work: string;
let child: ChildProcess | undefined;

beforeAll(() => {
  if (!existsSync(DIST)) throw new Error(`${DIST} is missing: build the package first (NX_DAEMON=false npx nx run images:build)`);
});
beforeEach(() => {
  work = mkdtempSync(path.join(tmpdir(), 'kill-unpack-'));
});
afterEach(() => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  child = undefined;
  unmountAndRemove(work);
});

/** Resolves when `check` holds, polling the filesystem the child writes (the event we wait for is its progress). */
function until(check: () => boolean, what: string, exited: () => boolean): Promise<void> {
  return new Promise((resolve, reject) => {
    const tick = () => {
      if (check()) return resolve();
      if (exited()) return reject(new Error(`the child exited before ${what}`));
      setTimeout(tick, 5);
    };
    tick();
  });
}

function filesIn(dir: string): number {
  try {
    return readdirSync(dir).length;
  } catch {
    return 0;
  }
}

describe.each<LayerStoreMode>(['overlay', 'copy'])('kill -9 mid-unpack, %s mode', (mode) => {
  it('leaves no half layer, and the reopened store cleans up and unpacks', async () => {
    const blobs = path.join(work, 'blobs');
    mkdirSync(blobs);
    const base = writeLayer(
      blobs,
      'base',
      [
        { name: 'etc/', type: 'directory' },
        { name: 'etc/os-release', body: 'ID=test\n' },
      ],
      'gzip',
    );
    const bigEntries: TestTarEntry[] = [{ name: 'big/', type: 'directory' }];
    for (let i = 0; i < BIG_FILES; i++) bigEntries.push({ name: `big/f${i}`, body: randomBytes(4096) });
    const big = writeLayer(blobs, 'big', bigEntries, 'gzip');
    const storeDir = path.join(work, 'store');
    const [, bigChain] = chainIds([base.diffId, big.diffId]);

    let exited = false;
    child = spawn(process.execPath, [CHILD, storeDir, mode, JSON.stringify([base, big])], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const exit = new Promise<NodeJS.Signals | number | null>((resolve) =>
      child!.on('exit', (code, signal) => ((exited = true), resolve(signal ?? code))),
    );

    // The child unpacks in its own subdir of unpack-tmp, named by its pid and start time.
    const tmp = path.join(storeDir, 'unpack-tmp', `p${child.pid!}-${processStartTime(child.pid!)!}`);
    const bigDirFor = (d: string) => (mode === 'overlay' ? path.join(tmp, d, 'mnt', 'big') : path.join(tmp, d, 'fs', 'big'));
    const unpackingBig = () =>
      filesIn(tmp) > 0 &&
      readdirSync(tmp).some((d) => d.startsWith(`unpack-${digestHex(bigChain!).slice(0, 12)}`) && filesIn(bigDirFor(d)) >= 50);
    await until(unpackingBig, 'it was halfway through the big layer', () => exited).catch((err: Error) => {
      throw new Error(`${err.message}; stderr: ${stderr}`);
    });
    child.kill('SIGKILL');
    expect(await exit).toBe('SIGKILL');

    // What the kill left: a temp dir (and in overlay mode its mount), never the big chain's dir.
    expect(readdirSync(tmp).length).toBeGreaterThan(0);
    if (mode === 'overlay') expect(mountsUnderSync(storeDir).length).toBe(1);
    expect(existsSync(path.join(storeDir, 'layers', digestHex(bigChain!)))).toBe(false);

    const store = await LayerStore.open({ storeDir, mode });
    expect(existsSync(tmp)).toBe(false);
    expect(readdirSync(store.tmpDir)).toEqual([]);
    expect(mountsUnderSync(storeDir)).toEqual([]);
    const image = await store.unpackImage([base, big]);
    expect(readdirSync(path.join(image.layers[1]!.dir, 'big'))).toHaveLength(BIG_FILES);
    expect(await store.list()).toHaveLength(2);
  }, 180_000); // thousands of files through an overlay on a shared 2-core machine: a generous limit, not a figure
});

describe('kill -9 of the process that prepared a task root', () => {
  it('leaves the overlay mounted with the task on it; preparing again finds it, releasing removes it', async () => {
    const blobs = path.join(work, 'blobs');
    mkdirSync(blobs);
    const base = writeLayer(
      blobs,
      'base',
      [
        { name: 'etc/', type: 'directory' },
        { name: 'etc/os-release', body: 'ID=test\n' },
      ],
      'gzip',
    );
    const storeDir = path.join(work, 'store');
    const taskDir = path.join(work, 'task');
    child = spawn(process.execPath, [CHILD, storeDir, 'overlay', JSON.stringify([base]), taskDir], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const signal = await new Promise<NodeJS.Signals | number | null>((resolve) => child!.on('exit', (code, sig) => resolve(sig ?? code)));
    expect({ signal, stderr }).toEqual({ signal: 'SIGKILL', stderr: '' });

    expect(await isMounted(taskDir)).toBe(true);
    const store = await LayerStore.open({ storeDir, mode: 'overlay' }); // the store's own cleanup leaves task roots alone
    expect(await isMounted(taskDir)).toBe(true);
    const image = await store.unpackImage([base]);
    const again = await prepareRootfs({ image, dir: taskDir });
    expect(mountsUnderSync(taskDir)).toEqual([again.rootfs]);
    expect(readFileSync(path.join(again.rootfs, 'etc/os-release'), 'utf8')).toBe('ID=test\n');
    await releaseRootfs(taskDir);
    expect(await isMounted(taskDir)).toBe(false);
    expect(existsSync(again.rootfs)).toBe(false);
  });
});
