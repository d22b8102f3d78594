// The one reader of /proc/<pid>/mountinfo (see proc(5)) for every package:
// the CSI manager asks "is this a mount point", the hostpath plugin "what is
// mounted here and what does it bind", the agent and the tests "what is left
// mounted under this dir". One parser, so an escaped path (a space is \040)
// or an optional field reads the same everywhere.
import { promises as fsp, readFileSync } from 'node:fs';
import * as path from 'node:path';

/** The kernel's table of this process's mount namespace. */
export const PROC_SELF_MOUNTINFO = '/proc/self/mountinfo';

/** One line of mountinfo. Paths have their octal escapes decoded. */
export interface MountInfoEntry {
  /** The mount's id; a new mount gets a new id. */
  readonly id: number;
  /** The id of the mount this one sits on. */
  readonly parentId: number;
  /** "major:minor" of the filesystem. */
  readonly device: string;
  /** The directory within the filesystem that is mounted here (a bind mount of /a/b shows /a/b). */
  readonly root: string;
  readonly mountPoint: string;
  /** Per-mount options, e.g. ["rw", "relatime"]. */
  readonly options: readonly string[];
  /** Optional fields, e.g. ["shared:1"]; often empty. */
  readonly optionalFields: readonly string[];
  readonly fsType: string;
  /** The mount source ("/dev/sda1", "tmpfs"…). */
  readonly source: string;
  /** Per-superblock options. */
  readonly superOptions: readonly string[];
}

/** Decodes the octal escapes (\040 for a space, \011 tab, \012 newline, \134 backslash) the kernel puts in mountinfo paths. */
export function unescapeMountPath(p: string): string {
  return p.replace(/\\([0-7]{3})/g, (_m, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/**
 * The entries of a mountinfo text, in the kernel's order (mount order). A
 * line without the "-" separator or the fields after it is skipped: the
 * kernel never writes one, so it is a truncated read, not a mount.
 */
export function parseMountInfo(text: string): MountInfoEntry[] {
  const out: MountInfoEntry[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const f = line.split(' ');
    // Fields 0-5 are fixed, then optional fields up to a lone "-", then fs type, source, super options.
    const sep = f.indexOf('-', 6);
    if (sep < 0 || f.length < sep + 3) continue;
    out.push({
      id: Number(f[0]),
      parentId: Number(f[1]),
      device: f[2]!,
      root: unescapeMountPath(f[3]!),
      mountPoint: unescapeMountPath(f[4]!),
      options: f[5]!.split(','),
      optionalFields: f.slice(6, sep),
      fsType: unescapeMountPath(f[sep + 1]!),
      source: unescapeMountPath(f[sep + 2]!),
      superOptions: f[sep + 3] ? f[sep + 3]!.split(',') : [],
    });
  }
  return out;
}

/** Reads and parses a mountinfo file (this process's by default). */
export async function readMountInfo(file = PROC_SELF_MOUNTINFO): Promise<MountInfoEntry[]> {
  return parseMountInfo(await fsp.readFile(file, 'utf8'));
}

/** readMountInfo, synchronously: for the agent's start-up checks and test cleanup, which must not interleave with anything. */
export function readMountInfoSync(file = PROC_SELF_MOUNTINFO): MountInfoEntry[] {
  return parseMountInfo(readFileSync(file, 'utf8'));
}

/** Whether `p` is `dir` or lies below it (both normalised absolute paths, as mountinfo lists them). */
function isAtOrUnder(p: string, dir: string): boolean {
  return p === dir || p.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
}

/**
 * Every mount point at or below `dir`, in mount order (a path mounted twice
 * is listed twice). Reversed, it is the order to unmount them in: a mount
 * below another is always the newer of the two.
 */
export function mountPointsUnder(mounts: readonly MountInfoEntry[], dir: string): string[] {
  return mounts.filter((m) => isAtOrUnder(m.mountPoint, dir)).map((m) => m.mountPoint);
}

/** The mount on top at exactly `mountPoint` (the last one listed), if any. */
export function topMountAt(mounts: readonly MountInfoEntry[], mountPoint: string): MountInfoEntry | undefined {
  let top: MountInfoEntry | undefined;
  for (const m of mounts) if (m.mountPoint === mountPoint) top = m;
  return top;
}

/**
 * The device and in-filesystem path of directory `dir` (a real path): what
 * a bind mount of it shows as (device, root) in mountinfo. Undefined when no
 * mount covers it.
 */
export function backingOf(mounts: readonly MountInfoEntry[], dir: string): { device: string; root: string } | undefined {
  let best: MountInfoEntry | undefined;
  for (const m of mounts) {
    if (isAtOrUnder(dir, m.mountPoint) && (!best || m.mountPoint.length >= best.mountPoint.length)) best = m;
  }
  if (!best) return undefined;
  const rel = path.posix.relative(best.mountPoint, dir);
  return { device: best.device, root: rel ? path.posix.join(best.root, rel) : best.root };
}
