// A task's root filesystem on top of an unpacked image: in overlay mode an
// overlay mount at <dir>/rootfs whose lower dirs are the image's layer dirs
// (top layer first) and whose upper and work dirs, in <dir>, are the task's
// own writable layer; in copy mode a private copy of the top chain dir.
// Either way the task's writes never reach the shared layers. The mount
// outlives the agent (a task runs on it after kill -9), so preparing is
// idempotent and `isMounted` lets a re-attaching agent tell.
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { RootfsMountError } from '../unpack/errors';
import { type UnpackedImage } from './layer-store';
import { isMountPoint, mountOverlay, unmountAllUnder } from './overlay';
import { copyTree, removeTree } from './tree';

export interface PrepareRootfsOptions {
  readonly image: UnpackedImage;
  /** The task's dir for its root: rootfs/, upper/ and work/ are made in it. */
  readonly dir: string;
}

export interface PreparedRootfs {
  /** The root filesystem to hand to runc. */
  readonly rootfs: string;
  readonly mode: UnpackedImage['mode'];
}

const ROOTFS = 'rootfs';
const UPPER = 'upper';
const WORK = 'work';
const PARTIAL = 'rootfs.partial';

/** Makes (or finds, when already made) `<dir>/rootfs` for a task. */
export async function prepareRootfs(options: PrepareRootfsOptions): Promise<PreparedRootfs> {
  const { image } = options;
  if (!image.layers.length) throw new RootfsMountError(path.join(path.resolve(options.dir), ROOTFS), 'the image has no layers');
  await fsp.mkdir(options.dir, { recursive: true, mode: 0o711 });
  // Resolved, since the kernel's mount table names the real path: a dir reached through a symlink would never match it.
  const dir = await realDir(options.dir);
  const rootfs = path.join(dir, ROOTFS);
  if (image.mode === 'overlay') {
    if (await isMountPoint(rootfs)) return { rootfs, mode: image.mode };
    for (const d of [ROOTFS, UPPER, WORK]) await fsp.mkdir(path.join(dir, d), { recursive: true });
    await mountOverlay({
      lower: image.layers.map((l) => l.dir).reverse(),
      upper: path.join(dir, UPPER),
      work: path.join(dir, WORK),
      target: rootfs,
    });
    return { rootfs, mode: image.mode };
  }
  try {
    await fsp.access(rootfs);
    return { rootfs, mode: image.mode }; // a copy is renamed into place only when whole
  } catch {
    // not made yet
  }
  const partial = path.join(dir, PARTIAL);
  await removeTree(partial);
  await copyTree(image.layers[image.layers.length - 1]!.dir, partial);
  await fsp.rename(partial, rootfs);
  return { rootfs, mode: image.mode };
}

/** Whether the task's root is mounted (overlay mode): after an agent's kill -9 it still is, with the task on it. */
export async function isMounted(dir: string): Promise<boolean> {
  return isMountPoint(path.join(await realDir(dir), ROOTFS));
}

/** Unmounts the task's root (and anything mounted below it) and removes it with the task's writable layer. */
export async function releaseRootfs(dir: string): Promise<void> {
  const abs = await realDir(dir);
  await unmountAllUnder(path.join(abs, ROOTFS));
  for (const d of [ROOTFS, PARTIAL, UPPER, WORK]) await removeTree(path.join(abs, d));
}

/** The real path of a dir (symlinks resolved, as the mount table names it), or the absolute path when it does not exist. */
async function realDir(dir: string): Promise<string> {
  try {
    return await fsp.realpath(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return path.resolve(dir);
    throw err;
  }
}
