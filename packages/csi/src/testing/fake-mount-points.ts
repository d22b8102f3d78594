// The mount points a fake CSI plugin made, by path: stage and publish add
// one, unpublish and unstage remove it, as a real plugin changes the host's
// mount table. @csiplug/csimanager/testing's FakeMountTable is one of these
// that also answers the CSI manager's MountTable questions.
import * as path from 'node:path';

/** `p` as one spelling: normalised, without a trailing slash (the kernel lists "/a/b", never "/a/b/"). */
export function normalizeMountPath(p: string): string {
  const n = path.normalize(p);
  return n.length > 1 && n.endsWith('/') ? n.replace(/\/+$/, '') || '/' : n;
}

export class FakeMountPoints {
  /** The mounted paths, normalised. Tests may clear it (a host reboot) or inspect it. */
  readonly points = new Set<string>();

  /** Records a mount at `p`. */
  mark(p: string): void {
    this.points.add(normalizeMountPath(p));
  }

  /** Records that `p` was unmounted. */
  unmark(p: string): void {
    this.points.delete(normalizeMountPath(p));
  }

  has(p: string): boolean {
    return this.points.has(normalizeMountPath(p));
  }
}
