// Paths inside an unpacked root, resolved the way Go's filepath-securejoin
// (cyphar/filepath-securejoin, SecureJoin) does: component by component,
// reading each symlink met on the way and continuing from its target, where
// an absolute target starts again at the root and ".." stops at the root. A
// layer may hold any symlink (`a -> /`, `b -> ../../..`), and they are
// written as they are; this is what keeps a later entry `a/etc/passwd` from
// landing on the host's /etc/passwd.
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { UnsafeEntryError } from './errors';

/** How many symlinks one resolution may follow before it is called a loop (Linux allows 40; securejoin 255). */
export const MAX_SYMLINKS = 255;

/**
 * Cleans an archive path into a path relative to the root: a leading "/" is
 * dropped (as GNU tar and Docker do), "." and empty parts vanish, and a ".."
 * that would climb above the root is refused, as Docker refuses an entry
 * that "breaks out" of the layer. Returns "" for the root itself.
 */
export function cleanEntryPath(name: string): string {
  const out: string[] = [];
  for (const part of name.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (!out.length) throw new UnsafeEntryError(name, 'its path climbs above the layer root with ".."');
      out.pop();
      continue;
    }
    if (part.includes('\0')) throw new UnsafeEntryError(name, 'its path holds a NUL byte');
    out.push(part);
  }
  return out.join('/');
}

function isENOENT(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/**
 * The host path of `relPath` inside `root`, never outside it. Symlinks in
 * every component are followed within the root; the last component's
 * symlink only when `followFinal`. Components that do not exist yet are
 * taken as they are. Throws on a symlink loop.
 */
export async function resolveInRoot(root: string, relPath: string, options: { followFinal: boolean; entryName?: string }): Promise<string> {
  const todo = relPath.split('/').filter((p) => p !== '' && p !== '.');
  const done: string[] = [];
  let links = 0;
  while (todo.length) {
    const part = todo.shift()!;
    if (part === '..') {
      done.pop();
      continue;
    }
    done.push(part);
    if (!todo.length && !options.followFinal) continue;
    const host = path.join(root, ...done);
    let target: string;
    try {
      const st = await fsp.lstat(host);
      if (!st.isSymbolicLink()) continue;
      target = await fsp.readlink(host);
    } catch (err) {
      // Missing: taken as it is. Later components are still checked, since a ".." from a symlink target may climb back to existing ones.
      if (!isENOENT(err)) throw err;
      continue;
    }
    if (++links > MAX_SYMLINKS) {
      throw new UnsafeEntryError(options.entryName ?? relPath, `resolving it follows more than ${MAX_SYMLINKS} symlinks (a loop)`);
    }
    done.pop();
    if (target.startsWith('/')) done.length = 0;
    todo.unshift(...target.split('/').filter((p) => p !== '' && p !== '.'));
  }
  return done.length ? path.join(root, ...done) : root;
}

/** Whether `p` (a normalised absolute path) is `root` or below it. */
export function isWithin(root: string, p: string): boolean {
  const rel = path.relative(root, p);
  // Not startsWith('..'): a top-level name like "..data" (Kubernetes' atomic writer) is inside.
  return !(rel === '..' || rel.startsWith('../') || path.isAbsolute(rel));
}
