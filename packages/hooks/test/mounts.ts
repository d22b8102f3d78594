// Reads the host's mount table for integration tests: which mounts sit under
// a test's temp dir (with their mount ids, so a test can tell "still the same
// mount" from "mounted again"), and a last-resort lazy unmount for what a
// failed test left behind. Parsing is core's (the one mountinfo reader).
import { execFileSync } from 'node:child_process';
import { type MountInfoEntry, readMountInfoSync } from '@csiplug/core';

/** Mounts at or under `dir`, deepest first. */
export function mountsUnder(dir: string): MountInfoEntry[] {
  return readMountInfoSync()
    .filter((m) => m.mountPoint === dir || m.mountPoint.startsWith(dir + '/'))
    .sort((a, b) => b.mountPoint.length - a.mountPoint.length);
}

/** The ids of the mounts at exactly `target` (bottom first); empty if it is not a mount point. */
export function mountIdsAt(target: string): number[] {
  return readMountInfoSync()
    .filter((m) => m.mountPoint === target)
    .map((m) => m.id);
}

/** Lazily unmounts everything under `dir`; returns what it had to unmount. */
export function forceUnmountUnder(dir: string): string[] {
  const done: string[] = [];
  for (let round = 0; round < 5; round++) {
    const left = mountsUnder(dir);
    if (left.length === 0) break;
    for (const m of left) {
      try {
        execFileSync('umount', ['-l', m.mountPoint], { stdio: 'ignore' });
        done.push(m.mountPoint);
      } catch {
        // Checked again on the next round, and by the caller.
      }
    }
  }
  return done;
}
