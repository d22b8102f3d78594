// Reading the kernel's mount table — and asking a mount whether it still
// answers — behind a small interface so the logic above it is tested with a
// fake (IMountTable; the fake is in @csiplug/csimanager/testing). The parsing
// is @csiplug/core's mountinfo.
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { doublingBackoff, mountPointsUnder, parseMountInfo as parseMountInfoEntries, readMountInfoSync, type Clock } from '@csiplug/core';
import { isTransientFsError } from './errors';

export interface MountTable {
  /**
   * Whether `target` is a mount point now. A path that does not exist is not
   * one; a table that cannot be read rejects (never "not mounted").
   */
  isMountPoint(target: string): Promise<boolean>;
  /**
   * Stats `target`, following it as a workload would: resolves when it
   * answers; rejects with the errno error (ENOTCONN or EIO of a dead FUSE
   * mount, ESTALE of an NFS one, ENOENT…). On a dead network mount it may
   * never settle: a caller races it against a timer.
   */
  stat(target: string): Promise<void>;
}

/** Backoff (ms) between mount-table reads that failed for a transient fault: doubling from the base up to the max. */
const TRANSIENT_RETRY_BASE = 250;
const TRANSIENT_RETRY_MAX = 30_000;

/**
 * Whether `target` is a mount point, asked again after a backoff for as long
 * as the table cannot be read for a transient fault of the agent's own
 * process (EMFILE reading /proc/self/mountinfo under a connection flood, say):
 * "unknown" never becomes "not mounted" nor a failed restore, either of
 * which ends in unmounting under a running workload. Other errors are thrown;
 * an abort of `signal` rejects with its reason. `onFault` is told of each
 * retry (for a log line; the doubling backoff keeps them few).
 */
export async function isMountPointRetrying(
  table: Pick<MountTable, 'isMountPoint'>,
  target: string,
  options: { clock: Clock; signal?: AbortSignal; onFault?: (err: unknown, attempt: number, delayMs: number) => void },
): Promise<boolean> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await table.isMountPoint(target);
    } catch (err) {
      if (!isTransientFsError(err)) throw err;
      const delay = doublingBackoff(attempt, TRANSIENT_RETRY_BASE, TRANSIENT_RETRY_MAX);
      options.onFault?.(err, attempt, delay);
      await options.clock.sleep(delay, options.signal);
    }
  }
}

export { unescapeMountPath } from '@csiplug/core';

/**
 * The mount points listed in a /proc/<pid>/mountinfo text, in mount order.
 * Kept for this package's callers; the parser is @csiplug/core's
 * parseMountInfo, which gives the full entries.
 */
export function parseMountInfo(text: string): string[] {
  return parseMountInfoEntries(text).map((m) => m.mountPoint);
}

/** Mount points at or below `dir` (a real path), in mount order, read now from /proc/self/mountinfo. */
export function mountsUnder(dir: string): string[] {
  return mountPointsUnder(readMountInfoSync(), dir);
}

/**
 * Reads /proc/self/mountinfo. A path that does not exist is answered without
 * reading the table. Concurrent callers share reads, but only a read that
 * starts after they asked: a read already under way may predate a mount the
 * caller just made, so newcomers wait for the next one (at most one read runs
 * and one waits, however many callers there are).
 */
export class ProcMountTable implements MountTable {
  private inflight: Promise<Set<string>> | undefined;
  private pending: Promise<Set<string>> | undefined;
  /** How many times the table was read (for tests and benchmarks). */
  reads = 0;

  constructor(private readonly file = '/proc/self/mountinfo') {}

  async stat(target: string): Promise<void> {
    await fs.stat(target);
  }

  async isMountPoint(target: string): Promise<boolean> {
    let resolved: string;
    try {
      resolved = await fs.realpath(target);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw err;
    }
    const mounts = await this.read();
    return mounts.has(path.normalize(resolved));
  }

  /** Every mount point now. */
  async mountPoints(): Promise<string[]> {
    return [...(await this.read())];
  }

  private read(): Promise<Set<string>> {
    if (this.pending) return this.pending;
    if (!this.inflight) return this.start();
    const after = this.inflight;
    const next = after
      .catch(() => undefined)
      .then(() => {
        this.pending = undefined;
        return this.start();
      });
    this.pending = next;
    return next;
  }

  private start(): Promise<Set<string>> {
    this.reads++;
    const p = fs.readFile(this.file, 'utf8').then((text) => new Set(parseMountInfo(text)));
    this.inflight = p;
    const clear = () => {
      if (this.inflight === p) this.inflight = undefined;
    };
    p.then(clear, clear);
    return p;
  }
}
