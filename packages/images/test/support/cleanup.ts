// Test support: unmounts whatever a test left mounted under its temp dir
// (newest first) and removes the dir, so a failed test leaves no mount.
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { mountPointsUnder, readMountInfoSync } from '@csiplug/core';

export function mountsUnderSync(dir: string): string[] {
  return mountPointsUnder(readMountInfoSync(), dir);
}

export function unmountAndRemove(dir: string): void {
  for (const p of mountsUnderSync(dir).reverse()) {
    try {
      execFileSync('/usr/bin/umount', [p]);
    } catch {
      execFileSync('/usr/bin/umount', ['-l', p]);
    }
  }
  if (mountsUnderSync(dir).length) throw new Error(`mounts remain under ${dir}; not removing it`);
  rmSync(dir, { recursive: true, force: true });
}
