// Paths the agent (root) reaches under a dir a task can write to — its
// task dir, the alloc's shared dir — where the task may have planted
// symlinks. Every dir on the way is opened one component at a time through
// the one before it (/proc/self/fd/N/name, as openat would), never
// following a symlink; what is made or replaced is made in the last dir
// through its fd, so nothing is ever made or replaced outside `base`.
// Template files (task-templates.ts) and a host-process task's volume_mount
// links (task-setup.ts) are placed this way.
import * as fs from 'fs';
import * as path from 'path';

const { O_RDONLY, O_NOFOLLOW, O_DIRECTORY } = fs.constants;

/** Why a path was refused: it climbs out of its base (".."), or a component on the way is a symlink or not a dir. */
export type BeneathProblem = 'climbs' | 'link';

/** Makes the error a caller throws for a refused path; `problem` says what is wrong and where. */
export type BeneathRefusal = (problem: string, kind: BeneathProblem) => Error;

/**
 * Opens `rel` under `base` one dir at a time, each through the one before
 * it and never through a symlink; makes a missing dir (0755, owned by
 * `owner` when given) when `make`. Returns the last dir's fd, which the
 * caller closes. A ".." or a symlinked (or non-dir) component: `refuse`'s error.
 */
export function openDirBeneath(
  base: string,
  rel: string,
  refuse: BeneathRefusal,
  owner: { uid: number; gid: number } | undefined,
  make = true,
): number {
  let fd = fs.openSync(base, O_RDONLY | O_DIRECTORY);
  try {
    let walked = base;
    for (const part of rel.split('/').filter((p) => p !== '' && p !== '.')) {
      if (part === '..') throw refuse(`"${rel}" climbs out of ${base}`, 'climbs');
      walked = path.join(walked, part);
      const at = `/proc/self/fd/${fd}/${part}`;
      let next: number;
      try {
        next = fs.openSync(at, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ELOOP' || code === 'ENOTDIR') throw refuse(`${walked} is a symlink or not a dir`, 'link');
        if (code !== 'ENOENT' || !make) throw err;
        fs.mkdirSync(at, { mode: 0o755 });
        next = fs.openSync(at, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
        if (owner) fs.fchownSync(next, owner.uid, owner.gid);
      }
      fs.closeSync(fd);
      fd = next;
    }
    return fd;
  } catch (err) {
    fs.closeSync(fd);
    throw err;
  }
}

/**
 * A symlink to `target` at `rel` under `base`, its dirs made on the way
 * (openDirBeneath): a link there already to `target` is kept, another link
 * replaced; anything else there (a file, a dir) is an error, left as it is.
 */
export function linkBeneath(base: string, rel: string, target: string, refuse: BeneathRefusal): void {
  const name = path.basename(rel);
  if (name === '' || name === '.' || name === '..') throw refuse(`"${rel}" names no entry under ${base}`, 'climbs');
  const dirFd = openDirBeneath(base, path.dirname(rel), refuse, undefined);
  try {
    // readlink, unlink and symlink act on the entry in the dir itself: none follows a link at `name`.
    const at = `/proc/self/fd/${dirFd}/${name}`;
    let now: string | undefined;
    try {
      now = fs.readlinkSync(at);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EINVAL')
        throw new Error(`${path.join(base, rel)} is there already and is not a symlink: remove it, or name another path`);
      if (code !== 'ENOENT') throw err;
    }
    if (now === target) return;
    if (now !== undefined) fs.unlinkSync(at);
    fs.symlinkSync(target, at);
  } finally {
    fs.closeSync(dirFd);
  }
}
