// Owner-only modes for what the state store keeps on disk. The client state
// holds volume secrets in clear, so a file the store creates is 0600 from its
// first byte and a directory it creates is 0700; a file that an older release
// left looser is tightened in place (chmod only: nothing is moved or
// rewritten, so no data can be lost). A mode change never goes through a
// symlink: the entry is lstat-ed, opened O_NOFOLLOW, and changed through that
// descriptor only if it is still the same inode.
import type { Logger } from '@csiplug/core';
import * as fs from 'fs';
import { StateError } from './errors';

/** Owner read/write: every file of a SQLite store (db, -wal, -shm, -journal, backups). */
export const PRIVATE_FILE_MODE = 0o600;
/** Owner only: a directory the store creates for its file. */
export const PRIVATE_DIR_MODE = 0o700;

export type EntryKind = 'file' | 'dir';

/** One tightened entry: its permission bits before and after. */
export interface ModeChange {
  path: string;
  from: number;
  to: number;
}

/** `0644`-style text for log lines and messages. */
export function formatMode(mode: number): string {
  return `0${(mode & 0o7777).toString(8).padStart(3, '0')}`;
}

function errnoCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null ? (err as NodeJS.ErrnoException).code : undefined;
}

/**
 * Clears every permission bit of `entry` that `max` does not allow (it never
 * sets one) and returns what changed. A missing entry, a symlink, or an
 * entry that is not of `kind` is left alone and gives undefined. Throws when
 * the entry is swapped between the check and the change: something else is
 * writing in that directory, and that must not go unnoticed.
 */
export function tightenMode(entry: string, max: number, kind: EntryKind = 'file'): ModeChange | undefined {
  let before: fs.Stats;
  try {
    before = fs.lstatSync(entry);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return undefined;
    throw err;
  }
  if (!(kind === 'file' ? before.isFile() : before.isDirectory())) return undefined;
  const from = before.mode & 0o7777;
  const to = from & max;
  if (to === from) return undefined;
  const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK, O_DIRECTORY } = fs.constants;
  const fd = fs.openSync(entry, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | (kind === 'dir' ? O_DIRECTORY : 0));
  try {
    const now = fs.fstatSync(fd);
    if (now.dev !== before.dev || now.ino !== before.ino) {
      throw new StateError(
        'EMODE',
        `${entry} was replaced while its mode was being tightened; check what else writes in its directory, then start again`,
      );
    }
    fs.fchmodSync(fd, to);
  } finally {
    fs.closeSync(fd);
  }
  return { path: entry, from, to };
}

/** tightenMode over `entries`, with one log line per entry that changed. */
export function tightenModes(entries: readonly string[], max: number, logger: Logger | undefined, kind: EntryKind = 'file'): ModeChange[] {
  const changes: ModeChange[] = [];
  for (const entry of entries) {
    const change = tightenMode(entry, max, kind);
    if (!change) continue;
    changes.push(change);
    logger?.warn('tightened the mode of a path other users could reach', {
      path: change.path,
      from: formatMode(change.from),
      to: formatMode(change.to),
    });
  }
  return changes;
}

/**
 * Creates `file` empty with PRIVATE_FILE_MODE unless something is there
 * already (a file, or a symlink: never followed). True when it created it.
 * SQLite then opens the file and gives its -wal, -shm and -journal the same
 * mode, so the store is private before its first byte is written.
 */
export function createPrivateFile(file: string): boolean {
  const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;
  let fd: number;
  try {
    fd = fs.openSync(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, PRIVATE_FILE_MODE);
  } catch (err) {
    if (errnoCode(err) === 'EEXIST') return false;
    throw err;
  }
  try {
    // Exactly 0600 whatever the umask took away.
    fs.fchmodSync(fd, PRIVATE_FILE_MODE);
  } finally {
    fs.closeSync(fd);
  }
  return true;
}
