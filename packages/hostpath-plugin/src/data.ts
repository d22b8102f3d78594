// Volume data: snapshot archives (tar), restores (tar), clones (tar into
// tar: cp would follow a directory a workload swaps for a symlink midway)
// and how many bytes a volume holds (a walk that reads each directory
// through its descriptor).
// Every command runs with LC_ALL=C, so its messages read the same anywhere.
import { execFile } from 'node:child_process';
import { type BigIntStats, constants as fsConstants } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { DataCommandError } from './errors';

/** How long one tar or cp may run before it is killed (ms). */
export const DATA_COMMAND_TIMEOUT_MS = 30 * 60_000;

/** Runs `cmd`; resolves with its exit code when it is one of `okCodes`, else rejects with a DataCommandError. */
function run(
  cmd: string,
  args: string[],
  timeoutMs: number,
  okCodes: readonly number[] = [0],
): Promise<{ code: number; stderr: string; stdout?: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      cmd,
      args,
      { timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 4 << 20, env: { ...process.env, LC_ALL: 'C' } },
      (err, stdout, stderr) => {
        const text = String(stderr ?? '').trim();
        if (!err) return resolve({ code: 0, stderr: text, stdout: String(stdout ?? '') });
        const e = err as NodeJS.ErrnoException & { code?: number | string; killed?: boolean; signal?: string };
        if (typeof e.code === 'number' && okCodes.includes(e.code)) return resolve({ code: e.code, stderr: text });
        const why =
          e.killed || e.signal
            ? `killed (${e.signal ?? 'SIGKILL'}) after the ${timeoutMs} ms timeout or by a signal`
            : typeof e.code === 'number'
              ? `exit code ${e.code}`
              : e.message;
        reject(new DataCommandError(cmd, args, text ? `${why}: ${text}` : why, { cause: err }));
      },
    );
  });
}

/**
 * Archives the contents of `dir` into `archive` (`tar -C dir -cf … .`),
 * through a temp file that is synced and renamed, so `archive` is either
 * whole or absent. A file that changed while tar read it (GNU tar's exit
 * code 1, a volume in use) does not fail the archive: it is what the
 * volume held at about that time. Resolves with tar's warnings, if any.
 */
export async function archiveDir(dir: string, archive: string, timeoutMs = DATA_COMMAND_TIMEOUT_MS): Promise<string | undefined> {
  const tmp = `${archive}.${process.pid}.tmp`;
  try {
    const { code, stderr } = await run('tar', ['-C', dir, '-cf', tmp, '.'], timeoutMs, [0, 1]);
    const fh = await fs.open(tmp, 'r');
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
    await fs.rename(tmp, archive);
    return code === 1 ? stderr || 'tar exit code 1 (a file changed while it was read)' : undefined;
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
}

/** Extracts `archive` into `dir` (which exists), keeping modes, times and owners. */
export async function extractArchive(archive: string, dir: string, timeoutMs = DATA_COMMAND_TIMEOUT_MS): Promise<void> {
  await run('tar', ['-C', dir, '-xpf', archive], timeoutMs);
}

/**
 * Copies the contents of `src` into `dst` (which exists): modes, times,
 * owners, links. Through an archive next to `dst` (tar walks the source by
 * descriptor, never following a directory swapped for a symlink midway),
 * extracted, then removed.
 */
export async function copyDir(src: string, dst: string, timeoutMs = DATA_COMMAND_TIMEOUT_MS): Promise<string | undefined> {
  const archive = `${dst}.clone.${process.pid}.tar`;
  try {
    // tar's warning (a file changed while it was read: a source in use) is the caller's to log.
    const warning = await archiveDir(src, archive, timeoutMs);
    await extractArchive(archive, dst, timeoutMs);
    return warning;
  } finally {
    await fs.rm(archive, { force: true });
  }
}

/** How long one count of a volume's bytes may take (ms): a stats call past it fails rather than hang. */
export const USAGE_TIMEOUT_MS = 60_000;

/** lstat calls in flight at once while a directory is read. */
const LSTAT_BATCH = 64;

/**
 * The bytes the files under `dir` hold: the sizes of its regular files (a
 * file with several hard links counted once), not following symlinks and
 * not descending into another filesystem mounted below. 0 when `dir` is gone.
 *
 * A workload owns what is in its volume, so the walk never trusts a path:
 * each directory is opened without following a symlink in its last part and
 * read through its descriptor (/proc/self/fd), and only if it still is the
 * directory found there (device and inode) — one swapped for a symlink
 * midway is skipped, never read. (A swapped parent is resolved by the open
 * itself; the inode check then refuses what it finds.) Rejects past
 * `timeoutMs`, checked between batches of entries too.
 */
export async function bytesIn(dir: string, timeoutMs = USAGE_TIMEOUT_MS): Promise<bigint> {
  let root;
  try {
    root = await fs.lstat(dir, { bigint: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0n;
    throw err;
  }
  if (!root.isDirectory()) return root.isFile() ? root.size : 0n;
  const deadline = Date.now() + timeoutMs;
  const linked = new Set<bigint>();
  let total = 0n;
  const stack: { path: string; ino: bigint }[] = [{ path: dir, ino: root.ino }];
  const flags = fsConstants.O_RDONLY | fsConstants.O_DIRECTORY | fsConstants.O_NOFOLLOW;
  while (stack.length) {
    if (Date.now() > deadline) throw new DataCommandError('walk', [dir], `counting the bytes of ${dir} took longer than ${timeoutMs} ms`);
    const { path: d, ino } = stack.pop()!;
    let fh;
    try {
      fh = await fs.open(d, flags);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP') continue; // removed, or swapped for something else, while we walked
      throw err;
    }
    try {
      const st = await fh.stat({ bigint: true });
      if (st.dev !== root.dev || st.ino !== ino) continue; // not the directory that was found there
      const here = `/proc/self/fd/${fh.fd}`;
      const names = await fs.readdir(here);
      // The entries' lstats a batch at a time: one at a time, a volume of many small files takes seconds.
      const stats: (BigIntStats | undefined)[] = [];
      for (let i = 0; i < names.length; i += LSTAT_BATCH) {
        if (Date.now() > deadline)
          throw new DataCommandError('walk', [dir], `counting the bytes of ${dir} took longer than ${timeoutMs} ms`);
        stats.push(
          ...(await Promise.all(
            names.slice(i, i + LSTAT_BATCH).map((name) =>
              fs.lstat(path.join(here, name), { bigint: true }).catch((err: NodeJS.ErrnoException) => {
                if (err.code === 'ENOENT') return undefined; // removed while we walked
                throw err;
              }),
            ),
          )),
        );
      }
      for (const [i, name] of names.entries()) {
        const child = stats[i];
        if (!child) continue;
        if (child.isDirectory()) {
          if (child.dev === root.dev) stack.push({ path: path.join(d, name), ino: child.ino });
        } else if (child.isFile()) {
          if (child.nlink > 1n) {
            if (linked.has(child.ino)) continue;
            linked.add(child.ino);
          }
          total += child.size;
        }
      }
    } finally {
      await fh.close();
    }
  }
  return total;
}
