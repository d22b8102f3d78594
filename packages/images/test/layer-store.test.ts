// The layer store and task roots as root, in overlay mode and copy mode:
// whiteouts and opaque dirs across three layers give the same visible tree
// in both modes; a diff id mismatch leaves nothing; two images sharing a
// base store it once (bytes shown); a task's writes reach neither the
// shared layers nor another task's root.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, symlinkSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import {
  chainIds,
  digestHex,
  isMounted,
  type LayerBlob,
  LayerStore,
  type LayerStoreMode,
  prepareRootfs,
  releaseRootfs,
  type UnpackedImage,
} from '../src';
import { type TestTarEntry } from '../src/testing';
import { MemoryLogger } from '@csiplug/core';
import { mountsUnderSync, unmountAndRemove } from './support/cleanup';
import { snapshotTree, writeLayer } from './support/layers';
import { processStartTime } from '../src/rootfs/tmp-owner';

const MODES: LayerStoreMode[] = ['overlay', 'copy'];

let work: string;
let blobs: string;
let n = 0;

beforeEach(() => {
  work = mkdtempSync(path.join(tmpdir(), 'layer-store-'));
  blobs = path.join(work, 'blobs');
  execFileSync('/usr/bin/mkdir', ['-p', blobs]);
});
afterEach(() => unmountAndRemove(work));

function layer(entries: readonly TestTarEntry[]): LayerBlob {
  return writeLayer(blobs, `l${n++}`, entries, 'gzip');
}

/** Three layers that delete, make opaque and re-create across each other. */
function threeLayers(): LayerBlob[] {
  return [
    layer([
      { name: 'etc/', type: 'directory' },
      { name: 'etc/a', body: 'a0' },
      { name: 'etc/b', body: 'b0' },
      { name: 'etc/hl', type: 'hardlink', linkname: 'etc/a' },
      { name: 'keep/', type: 'directory' },
      { name: 'keep/x', body: 'x0' },
      { name: 'opq/', type: 'directory' },
      { name: 'opq/old1', body: 'o1' },
      { name: 'opq/sub/', type: 'directory' },
      { name: 'opq/sub/old2', body: 'o2' },
      { name: 'del/', type: 'directory' },
      { name: 'del/f', body: 'f' },
      { name: 'bin/', type: 'directory' },
      { name: 'bin/tool', body: 'tool', mode: 0o4755, uid: 1000, gid: 1000 },
      { name: 'sym', type: 'symlink', linkname: '/etc' },
    ]),
    layer([
      { name: 'etc/.wh.a' },
      { name: 'etc/c', body: 'c1' },
      { name: 'keep/x', body: 'x1' },
      { name: 'opq/', type: 'directory', mode: 0o750 },
      { name: 'opq/.wh..wh..opq' },
      { name: 'opq/new1', body: 'n1' },
      { name: '.wh.del' },
    ]),
    layer([
      { name: 'etc/.wh.b' },
      { name: 'etc/b2', body: 'b2' },
      // A hard link to a file of a lower layer: through an overlay mount the kernel copies it up first.
      { name: 'bin/tool-link', type: 'hardlink', linkname: 'bin/tool' },
      { name: 'del/', type: 'directory' },
      { name: 'del/g', body: 'g2' },
      { name: '.wh.sym' },
      { name: 'newdir/', type: 'directory', mode: 0o2775, gid: 50 },
      // An opaque dir whose own new entries this layer writes before the marker: they stay.
      { name: 'keep/', type: 'directory' },
      { name: 'keep/y', body: 'y2' },
      { name: 'keep/.wh..wh..opq' },
    ]),
  ];
}

const EXPECTED_NAMES = [
  'bin',
  'bin/tool',
  'bin/tool-link',
  'del',
  'del/g',
  'etc',
  'etc/b2',
  'etc/c',
  'etc/hl',
  'keep',
  'keep/y',
  'newdir',
  'opq',
  'opq/new1',
];

describe.each(MODES)('%s mode', (mode) => {
  let store: LayerStore;
  beforeEach(async () => {
    store = await LayerStore.open({ storeDir: path.join(work, 'store'), mode });
  });

  it('applies whiteouts and opaque dirs across three layers', async () => {
    const image = await store.unpackImage(threeLayers());
    expect(image.mode).toBe(mode);
    const { rootfs } = await prepareRootfs({ image, dir: path.join(work, 'task') });
    const tree = snapshotTree(rootfs);
    expect(tree.map((l) => l.split(' ')[0])).toEqual(EXPECTED_NAMES);
    expect(readFileSync(path.join(rootfs, 'etc/hl'), 'utf8')).toBe('a0');
    expect(tree).toContain(`opq 750 0:0 dir`);
    expect(tree).toContain(`newdir 2775 0:50 dir`);
    expect(tree.find((l) => l.startsWith('bin/tool '))).toMatch(/^bin\/tool 4755 1000:1000 file/);
    expect(lstatSync(path.join(rootfs, 'bin/tool-link')).ino).toBe(lstatSync(path.join(rootfs, 'bin/tool')).ino);
    if (mode === 'overlay') {
      // The kernel made the deletions: whiteouts (char 0/0) in layer 1's own dir, which holds only its diff.
      const l1 = image.layers[1]!.dir;
      expect(lstatSync(path.join(l1, 'etc/a')).isCharacterDevice()).toBe(true);
      expect(lstatSync(path.join(l1, 'etc/a')).rdev).toBe(0);
      expect(lstatSync(path.join(l1, 'del')).isCharacterDevice()).toBe(true);
      expect(existsSync(path.join(l1, 'bin'))).toBe(false);
    } else {
      expect(snapshotTree(image.layers[2]!.dir)).toEqual(tree);
    }
    await releaseRootfs(path.join(work, 'task'));
    expect(existsSync(rootfs)).toBe(false);
  });

  it('leaves nothing when a diff id does not match, and the right layer unpacks after', async () => {
    const layers = threeLayers();
    const bad = [layers[0]!, { ...layers[1]!, diffId: `sha256:${'1'.repeat(64)}` }];
    await expect(store.unpackImage(bad)).rejects.toMatchObject({ code: 'ELAYER_DIFF_ID_MISMATCH' });
    expect(await store.list()).toEqual([`sha256:${digestHex(layers[0]!.diffId)}`]);
    expect(readdirSync(store.tmpDir)).toEqual([]);
    expect(mountsUnderSync(store.storeDir)).toEqual([]);
    await expect(store.unpackImage(layers.slice(0, 2))).resolves.toMatchObject({ layers: [{}, {}] });
  });

  it('stores a base two images share once', async () => {
    const base = layer([{ name: 'big', body: Buffer.alloc(4 * 1024 * 1024, 7) }]);
    const imageA = await store.unpackImage([base, layer([{ name: 'a', body: 'A' }])]);
    const imageB = await store.unpackImage([base, layer([{ name: 'b', body: 'B' }])]);
    expect(imageA.layers[0]!.dir).toBe(imageB.layers[0]!.dir);
    const dirs = readdirSync(store.layersDir).sort();
    expect(dirs).toHaveLength(3);
    expect(dirs.filter((d) => d === digestHex(base.diffId))).toHaveLength(1);
    const du = (p: string) => Number(execFileSync('/usr/bin/du', ['-s', '-B1', p]).toString().split('\t')[0]);
    const bytes = { base: du(path.join(store.layersDir, digestHex(base.diffId))), all: du(store.layersDir) };
    // Bytes on disk, shown on purpose (issue 27's disk figure): overlay keeps each diff once; copy mode copies the base into each chain.
    console.log(`${mode} mode: base layer dir ${bytes.base} B, all layer dirs ${bytes.all} B for two images sharing the base`);
    if (mode === 'overlay') expect(bytes.all).toBeLessThan(bytes.base * 1.5);
    else expect(bytes.all).toBeGreaterThan(bytes.base * 2.5);
    expect(chainIds([base.diffId])[0]).toBe(base.diffId);
  });

  it("keeps a task's writes out of the shared layers and the other task's root", async () => {
    const image = await store.unpackImage(threeLayers());
    const before = image.layers.map((l) => snapshotTree(l.dir));
    const a = await prepareRootfs({ image, dir: path.join(work, 'taskA') });
    const b = await prepareRootfs({ image, dir: path.join(work, 'taskB') });
    const bBefore = snapshotTree(b.rootfs);
    writeFileSync(path.join(a.rootfs, 'etc/c'), 'changed by A');
    writeFileSync(path.join(a.rootfs, 'bin/tool'), 'trojan');
    writeFileSync(path.join(a.rootfs, 'new-file'), 'A');
    rmSync(path.join(a.rootfs, 'keep'), { recursive: true });
    expect(readFileSync(path.join(a.rootfs, 'etc/c'), 'utf8')).toBe('changed by A');
    expect(image.layers.map((l) => snapshotTree(l.dir))).toEqual(before);
    expect(snapshotTree(b.rootfs)).toEqual(bBefore);
    expect(await isMounted(path.join(work, 'taskA'))).toBe(mode === 'overlay');
    // Preparing again (an agent re-attaching) finds the root as the task left it.
    await prepareRootfs({ image, dir: path.join(work, 'taskA') });
    expect(readFileSync(path.join(a.rootfs, 'new-file'), 'utf8')).toBe('A');
    await releaseRootfs(path.join(work, 'taskA'));
    await releaseRootfs(path.join(work, 'taskB'));
    expect(mountsUnderSync(work)).toEqual([]);
  });
});

describe('both modes', () => {
  let sleeper: ChildProcess | undefined;
  afterEach(() => {
    sleeper?.kill('SIGKILL');
    sleeper = undefined;
  });

  it('finds its mounts when the store dir and the task dir are reached through symlinks', async () => {
    mkdirSync(path.join(work, 'real'));
    symlinkSync(path.join(work, 'real'), path.join(work, 'via'));
    const storeDir = path.join(work, 'via', 'store');
    // A dead process's unpack left a mount behind.
    const deadMount = path.join(work, 'real', 'store', 'unpack-tmp', 'p4194305-7', 'mnt');
    mkdirSync(deadMount, { recursive: true });
    execFileSync('/usr/bin/mount', ['-t', 'tmpfs', 'tmpfs', deadMount]);
    const store = await LayerStore.open({ storeDir, mode: 'overlay' });
    expect(mountsUnderSync(path.join(work, 'real'))).toEqual([]);
    expect(existsSync(path.dirname(deadMount))).toBe(false);

    const image = await store.unpackImage([layer([{ name: 'f', body: 'x' }])]);
    const taskDir = path.join(work, 'via', 'task');
    const first = await prepareRootfs({ image, dir: taskDir });
    expect(await isMounted(taskDir)).toBe(true);
    await prepareRootfs({ image, dir: taskDir }); // found mounted: not mounted again on top
    expect(mountsUnderSync(path.join(work, 'real'))).toHaveLength(1);
    expect(readFileSync(path.join(first.rootfs, 'f'), 'utf8')).toBe('x');
    await releaseRootfs(taskDir);
    expect(mountsUnderSync(path.join(work, 'real'))).toEqual([]);
    expect(existsSync(path.join(work, 'real', 'task', 'rootfs'))).toBe(false);
  });

  it("opening the store removes a dead process's unpack-tmp subdir and leaves a live process's alone", async () => {
    const storeDir = path.join(work, 'store');
    sleeper = spawn('/usr/bin/sleep', ['600'], { stdio: 'ignore' });
    const livePid = sleeper.pid!;
    const live = path.join(storeDir, 'unpack-tmp', `p${livePid}-${processStartTime(livePid)!}`, 'unpack-abc');
    // A dead owner: the same live pid with another start time (a reused pid), and a pid that does not exist.
    const reused = path.join(storeDir, 'unpack-tmp', `p${livePid}-1`, 'unpack-def');
    const gone = path.join(storeDir, 'unpack-tmp', 'p4194305-7', 'unpack-ghi');
    for (const d of [live, reused, gone]) {
      mkdirSync(d, { recursive: true });
      writeFileSync(path.join(d, 'f'), 'half');
    }
    const store = await LayerStore.open({ storeDir, mode: 'copy' });
    expect(readFileSync(path.join(live, 'f'), 'utf8')).toBe('half');
    expect(existsSync(path.dirname(reused))).toBe(false);
    expect(existsSync(path.dirname(gone))).toBe(false);
    expect(path.dirname(store.tmpDir)).toBe(path.join(storeDir, 'unpack-tmp'));
    expect(path.basename(store.tmpDir)).toBe(`p${process.pid}-${processStartTime(process.pid)!}`);
  });

  it('show the same tree for the same image', async () => {
    const layers = threeLayers();
    const trees: string[][] = [];
    for (const mode of MODES) {
      const store = await LayerStore.open({ storeDir: path.join(work, `store-${mode}`), mode });
      const image: UnpackedImage = await store.unpackImage(layers);
      const { rootfs } = await prepareRootfs({ image, dir: path.join(work, `task-${mode}`) });
      trees.push(snapshotTree(rootfs));
    }
    expect(trees[0]).toEqual(trees[1]);
    expect(trees[0]!.map((l) => l.split(' ')[0])).toEqual(EXPECTED_NAMES);
  });

  it('unpacks each chain once when two images ask at the same time', async () => {
    const logger = new MemoryLogger();
    const store = await LayerStore.open({ storeDir: path.join(work, 'concurrent'), logger });
    const layers = threeLayers();
    const [x, y] = await Promise.all([store.unpackImage(layers), store.unpackImage(layers)]);
    expect(x.layers.map((l) => l.dir)).toEqual(y.layers.map((l) => l.dir));
    expect(logger.records.filter((r) => r.msg === 'unpacking image layer')).toHaveLength(3);
    expect(readdirSync(store.tmpDir)).toEqual([]);
  });

  it('a store keeps its mode and refuses another', async () => {
    await LayerStore.open({ storeDir: path.join(work, 's'), mode: 'copy' });
    await expect(LayerStore.open({ storeDir: path.join(work, 's'), mode: 'overlay' })).rejects.toThrow(/holds copy-mode layers/);
    expect((await LayerStore.open({ storeDir: path.join(work, 's') })).mode).toBe('copy');
  });

  it('keeps device nodes of a privileged unpack out of the chain unprivileged images use', async () => {
    const store = await LayerStore.open({ storeDir: path.join(work, 'dev-store'), mode: 'overlay' });
    const base = layer([{ name: 'etc/', type: 'directory' }]);
    const devs = layer([
      { name: 'dev/', type: 'directory' },
      { name: 'dev/zero', type: 'char', devmajor: 1, devminor: 5 },
    ]);
    const top = layer([{ name: 'app', body: 'app' }]);
    const plain = await store.unpackImage([base, devs, top]);
    const privileged = await store.unpackImage([base, devs, top], { allowDevices: true });
    expect(privileged.layers[0]!.dir).toBe(plain.layers[0]!.dir); // no devices: shared
    expect(privileged.layers[1]!.dir).not.toBe(plain.layers[1]!.dir);
    expect(privileged.layers[2]!.dir).not.toBe(plain.layers[2]!.dir);
    expect(existsSync(path.join(plain.layers[1]!.dir, 'dev/zero'))).toBe(false);
    expect(lstatSync(path.join(privileged.layers[1]!.dir, 'dev/zero')).isCharacterDevice()).toBe(true);
    expect((await store.unpackImage([base, devs, top], { allowDevices: true })).layers[2]!.dir).toBe(privileged.layers[2]!.dir);
  });
});
