// Overlay mounts for the layer store and task roots: whether the kernel
// offers overlayfs here (listed in /proc/filesystems, and a trial mount in
// the directory that will hold the layers actually works: the upper dir's
// filesystem must take trusted.* xattrs and whiteouts, which overlay on
// overlay or some FUSE filesystems do not), mounting with lower dirs listed
// top first, unmounting, and finding what is mounted under a directory.
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { mountPointsUnder, readMountInfo } from '@csiplug/core';
import { RootfsMountError } from '../unpack/errors';
import { MOUNT_BIN, runTool, UMOUNT_BIN } from '../unpack/host-tools';

/** The mount data the kernel takes in one page; a longer lowerdir list cannot be mounted. */
const MAX_MOUNT_DATA = 4095;

export interface OverlayDirs {
  /** Read-only layers, TOP layer first (overlayfs order). */
  readonly lower: readonly string[];
  readonly upper: string;
  readonly work: string;
  readonly target: string;
}

/** Characters overlayfs's option parser treats as separators or escapes. */
function assertPlainPath(p: string): void {
  if (/[:,\\\n]/.test(p))
    throw new RootfsMountError(
      p,
      'path holds ":", ",", "\\" or a newline, which overlayfs cannot take in its options; use a data dir without them',
    );
}

/** Mounts an overlay; the lower dirs top first. */
export async function mountOverlay(dirs: OverlayDirs): Promise<void> {
  if (!dirs.lower.length) throw new RootfsMountError(dirs.target, 'an overlay needs at least one lower layer');
  for (const p of [...dirs.lower, dirs.upper, dirs.work, dirs.target]) assertPlainPath(p);
  const data = `lowerdir=${dirs.lower.join(':')},upperdir=${dirs.upper},workdir=${dirs.work}`;
  if (data.length > MAX_MOUNT_DATA) {
    throw new RootfsMountError(
      dirs.target,
      `the overlay options are ${data.length} bytes for ${dirs.lower.length} layers, over the kernel's ${MAX_MOUNT_DATA}; use a shorter data dir path or the copy mode`,
    );
  }
  try {
    await runTool(MOUNT_BIN, ['-t', 'overlay', 'overlay', '-o', data, dirs.target]);
  } catch (err) {
    throw new RootfsMountError(dirs.target, 'overlay mount refused', err);
  }
}

/** Unmounts `target`; with `detach`, lazily (MNT_DETACH), for a mount still busy. */
export async function unmount(target: string, options: { detach?: boolean } = {}): Promise<void> {
  try {
    await runTool(UMOUNT_BIN, options.detach ? ['-l', target] : [target]);
  } catch (err) {
    throw new RootfsMountError(target, 'unmount failed (a process may still use it)', err);
  }
}

/** Mount points at or below `dir`, newest first: the order to unmount them in. */
export async function mountsUnder(dir: string): Promise<string[]> {
  return mountPointsUnder(await readMountInfo(), path.resolve(dir)).reverse();
}

/** Whether something is mounted exactly at `target`. */
export async function isMountPoint(target: string): Promise<boolean> {
  const abs = path.resolve(target);
  return (await readMountInfo()).some((m) => m.mountPoint === abs);
}

/** Unmounts everything at or below `dir`, newest first. */
export async function unmountAllUnder(dir: string): Promise<string[]> {
  const points = await mountsUnder(dir);
  for (const p of points) await unmount(p);
  return points;
}

async function filesystemsListOverlay(): Promise<boolean> {
  try {
    return /\boverlay$/m.test(await fsp.readFile('/proc/filesystems', 'utf8'));
  } catch {
    return false;
  }
}

/**
 * Whether an overlay can be mounted with its upper dir in `scratchDir` (a
 * dir on the filesystem that will hold the layers): /proc/filesystems must
 * list overlay (the module may load on first mount, so a trial mount decides
 * when it does not) and a trial mount with a whiteout must work.
 */
export async function overlayWorksIn(scratchDir: string): Promise<{ ok: boolean; reason?: string }> {
  const listed = await filesystemsListOverlay();
  const probe = await fsp.mkdtemp(path.join(scratchDir, 'overlay-probe-'));
  const [lower, upper, work, merged] = ['lower', 'upper', 'work', 'merged'].map((d) => path.join(probe, d)) as [
    string,
    string,
    string,
    string,
  ];
  try {
    for (const d of [lower, upper, work, merged]) await fsp.mkdir(d);
    await fsp.writeFile(path.join(lower, 'f'), 'x');
    await mountOverlay({ lower: [lower], upper, work, target: merged });
    try {
      await fsp.rm(path.join(merged, 'f'));
      const st = await fsp.lstat(path.join(upper, 'f'));
      if (!st.isCharacterDevice()) return { ok: false, reason: 'a deletion through the overlay left no whiteout in the upper dir' };
    } finally {
      await unmount(merged);
    }
    return { ok: true };
  } catch (err) {
    return { ok: false, reason: `${listed ? '' : 'overlay is not in /proc/filesystems; '}${(err as Error).message}` };
  } finally {
    await fsp.rm(probe, { recursive: true, force: true });
  }
}
