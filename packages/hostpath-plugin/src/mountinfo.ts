// Reads mount state from /proc/self/mountinfo (see proc(5)): which paths
// are mount points, what they bind, and with which options.
import * as fs from 'node:fs/promises';
import * as path from 'node:path';

export interface MountInfo {
  id: number;
  parentId: number;
  /** "major:minor" of the filesystem. */
  device: string;
  /** The directory within the filesystem that is mounted here. */
  root: string;
  mountPoint: string;
  /** Per-mount options, e.g. ["rw", "relatime"]. */
  options: string[];
  fsType: string;
  source: string;
}

function unescape(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_m, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

export function parseMountInfo(text: string): MountInfo[] {
  const out: MountInfo[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const parts = line.split(' ');
    const sep = parts.indexOf('-', 6);
    if (sep < 0 || parts.length < sep + 3) continue;
    out.push({
      id: Number(parts[0]),
      parentId: Number(parts[1]),
      device: parts[2],
      root: unescape(parts[3]),
      mountPoint: unescape(parts[4]),
      options: parts[5].split(','),
      fsType: parts[sep + 1],
      source: unescape(parts[sep + 2]),
    });
  }
  return out;
}

export async function readMountInfo(file = '/proc/self/mountinfo'): Promise<MountInfo[]> {
  return parseMountInfo(await fs.readFile(file, 'utf8'));
}

/** The mount on top at exactly `mountPoint` (the last one listed), if any. */
export function topMountAt(mounts: MountInfo[], mountPoint: string): MountInfo | undefined {
  let top: MountInfo | undefined;
  for (const m of mounts) if (m.mountPoint === mountPoint) top = m;
  return top;
}

/** Device and in-filesystem path of a directory: what a bind mount of it would show as (device, root). */
export function backingOf(mounts: MountInfo[], dir: string): { device: string; root: string } | undefined {
  let best: MountInfo | undefined;
  for (const m of mounts) {
    const inside = dir === m.mountPoint || dir.startsWith(m.mountPoint.endsWith('/') ? m.mountPoint : m.mountPoint + '/');
    if (inside && (!best || m.mountPoint.length >= best.mountPoint.length)) best = m;
  }
  if (!best) return undefined;
  const rel = path.relative(best.mountPoint, dir);
  return { device: best.device, root: rel ? path.posix.join(best.root, rel) : best.root };
}

/** Every mount point at or below `dir`, newest first (mountinfo lists in mount order): the order to unmount them. */
export function mountsUnder(mounts: MountInfo[], dir: string): string[] {
  const prefix = dir.endsWith('/') ? dir : dir + '/';
  return mounts
    .map((m) => m.mountPoint)
    .filter((p) => p === dir || p.startsWith(prefix))
    .reverse();
}
