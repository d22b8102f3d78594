// Volume data: snapshot archives (tar), restores (tar), clones (cp -a) and
// how many bytes a volume holds (a walk of its directory).
import { execFile } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { DataCommandError } from './errors';

/** How long one tar or cp may run before it is killed (ms). */
export const DATA_COMMAND_TIMEOUT_MS = 30 * 60_000;

/** Runs `cmd`; resolves with its exit code when it is one of `okCodes`, else rejects with a DataCommandError. */
function run(cmd: string, args: string[], timeoutMs: number, okCodes: readonly number[] = [0]): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 4 << 20 }, (err, _stdout, stderr) => {
      const text = String(stderr ?? '').trim();
      if (!err) return resolve({ code: 0, stderr: text });
      const e = err as NodeJS.ErrnoException & { code?: number | string; killed?: boolean; signal?: string };
      if (typeof e.code === 'number' && okCodes.includes(e.code)) return resolve({ code: e.code, stderr: text });
      const why = e.killed || e.signal ? `killed (${e.signal ?? 'SIGKILL'}) after the ${timeoutMs} ms timeout or by a signal` : typeof e.code === 'number' ? `exit code ${e.code}` : e.message;
      reject(new DataCommandError(cmd, args, text ? `${why}: ${text}` : why, { cause: err }));
    });
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

/** Copies the contents of `src` into `dst` (which exists) with `cp -a`: modes, times, owners, links. */
export async function copyDir(src: string, dst: string, timeoutMs = DATA_COMMAND_TIMEOUT_MS): Promise<void> {
  await run('cp', ['-a', '--', `${src}/.`, `${dst}/`], timeoutMs);
}

/**
 * The bytes the files under `dir` hold: the sizes of its regular files (a
 * file with several hard links counted once), not following symlinks and
 * not descending into another filesystem mounted below. 0 when `dir` is gone.
 */
export async function bytesIn(dir: string): Promise<bigint> {
  let root;
  try {
    root = await fs.lstat(dir, { bigint: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0n;
    throw err;
  }
  if (!root.isDirectory()) return root.isFile() ? root.size : 0n;
  const linked = new Set<bigint>();
  let total = 0n;
  const stack = [dir];
  while (stack.length) {
    const d = stack.pop()!;
    let names: string[];
    try {
      names = await fs.readdir(d);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') continue; // removed while we walked
      throw err;
    }
    for (const name of names) {
      const p = path.join(d, name);
      let st;
      try {
        st = await fs.lstat(p, { bigint: true });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw err;
      }
      if (st.isDirectory()) {
        if (st.dev === root.dev) stack.push(p);
      } else if (st.isFile()) {
        if (st.nlink > 1n) {
          if (linked.has(st.ino)) continue;
          linked.add(st.ino);
        }
        total += st.size;
      }
    }
  }
  return total;
}
