// The host side of an isolated plugin's bidirectional mount: its
// staging/publish base dir must be a mount point with shared propagation,
// or what the plugin mounts inside its container stays in the container's
// mount namespace and no workload ever sees it (a classic with container
// drivers, e.g. nomad-driver-podman#192). The dir is bind-mounted onto
// itself when it is not a mount point yet, then made shared.
import { CsiplugError, parseMountInfo, readMountInfoSync, topMountAt, type MountInfoEntry } from '@csiplug/core';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';

/** The staging/publish base of an isolated plugin could not be made (or is not) a shared mount. */
export class SharedMountError extends CsiplugError {
  constructor(
    readonly dir: string,
    why: string,
  ) {
    super(
      'ESHARED_MOUNT',
      `${dir} must be a shared mount for an isolated plugin's bidirectional mounts (what the plugin mounts there must reach the host and the workloads): ${why}`,
    );
  }
}

/** The mount at exactly `dir` (the top one), or undefined when `dir` is not a mount point. */
function mountAt(dir: string, read: () => readonly MountInfoEntry[]): MountInfoEntry | undefined {
  return topMountAt(read(), dir);
}

/** Whether a mountinfo entry's propagation is shared ("shared:N" among its optional fields). */
export function isShared(entry: Pick<MountInfoEntry, 'optionalFields'>): boolean {
  return entry.optionalFields.some((f) => f.startsWith('shared:'));
}

/**
 * Makes `dir` a mount point with shared propagation (idempotent): a bind
 * mount of itself when it is none yet, then `mount --make-shared`. Throws a
 * SharedMountError that says what failed.
 */
export function ensureSharedMount(dir: string, read: () => readonly MountInfoEntry[] = () => readMountInfoSync()): void {
  const real = fs.realpathSync(dir);
  const run = (args: string[]) => {
    try {
      execFileSync('mount', args, {
        stdio: ['ignore', 'ignore', 'pipe'],
        timeout: 10_000,
        env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LC_ALL: 'C' },
      });
    } catch (err) {
      const stderr = (err as { stderr?: Buffer }).stderr?.toString().trim();
      throw new SharedMountError(real, `mount ${args.join(' ')} failed: ${stderr || (err as Error).message}`);
    }
  };
  let entry = mountAt(real, read);
  if (!entry) {
    // A bind onto itself would hide what is mounted below it now (volumes a host-process plugin staged there).
    const below = read()
      .filter((m) => m.mountPoint.startsWith(`${real}/`))
      .map((m) => m.mountPoint);
    if (below.length)
      throw new SharedMountError(
        real,
        `it is not a mount point yet and ${below.length} mount(s) lie below it (${below.slice(0, 3).join(', ')}${below.length > 3 ? ', …' : ''}); unmount them (stop the allocs that use them) first`,
      );
    run(['--bind', real, real]);
    // Its own peer group, not the one of the mount it was bound from (a shared / would get every plugin mount twice).
    run(['--make-private', real]);
    entry = mountAt(real, read);
    if (!entry) throw new SharedMountError(real, 'a bind mount of it onto itself did not show in the mount table');
  }
  if (isShared(entry)) return;
  run(['--make-shared', real]);
  const after = mountAt(real, read);
  if (!after || !isShared(after)) throw new SharedMountError(real, 'mount --make-shared left it without shared propagation');
}

/**
 * Undoes ensureSharedMount when nothing is mounted below `dir` any more:
 * unmounts the bind of `dir` onto itself. Returns whether it did; a dir
 * with mounts below it (volumes still staged or published) is left.
 */
export function releaseSharedMount(dir: string, read: () => readonly MountInfoEntry[] = () => readMountInfoSync()): boolean {
  let real: string;
  try {
    real = fs.realpathSync(dir);
  } catch {
    return false;
  }
  const mounts = read();
  if (!topMountAt(mounts, real)) return false;
  if (mounts.some((m) => m.mountPoint.startsWith(`${real}/`))) return false;
  try {
    execFileSync('umount', [real], {
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: 10_000,
      env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LC_ALL: 'C' },
    });
  } catch (err) {
    const stderr = (err as { stderr?: Buffer }).stderr?.toString().trim();
    throw new SharedMountError(real, `umount failed: ${stderr || (err as Error).message}`);
  }
  return true;
}

/**
 * Why an isolated plugin's bidirectional mount would not carry its mounts
 * to the host, or undefined when it will: the host side (`hostDir` in the
 * host's mount table) and the task side (`taskDir` in the mount table the
 * task sees, `taskMountInfo`: /proc/<pid>/mountinfo of a process in it)
 * must both be mount points with shared propagation.
 */
export function propagationProblem(
  hostDir: string,
  taskDir: string,
  taskMountInfo: string,
  hostMounts: readonly MountInfoEntry[] = readMountInfoSync(),
): string | undefined {
  const host = topMountAt(hostMounts, hostDir);
  if (!host) return `on the host, ${hostDir} is not a mount point`;
  if (!isShared(host)) return `on the host, the mount at ${hostDir} has no shared propagation (${propagationOf(host)})`;
  const inTask = topMountAt(parseMountInfo(taskMountInfo), taskDir);
  if (!inTask) return `in the plugin's container, ${taskDir} is not a mount point`;
  if (!isShared(inTask))
    return `in the plugin's container, the mount at ${taskDir} has no shared propagation (${propagationOf(inTask)}): what the plugin mounts there stays in its container`;
  return undefined;
}

const propagationOf = (m: Pick<MountInfoEntry, 'optionalFields'>): string =>
  m.optionalFields.length ? m.optionalFields.join(' ') : 'private';
