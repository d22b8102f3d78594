// Reading the kernel's mount table, behind a small interface so the volume
// manager's logic is tested with a fake (IMountTable).
import { promises as fs } from 'node:fs';
import * as path from 'node:path';

export interface MountTable {
  /** Whether `target` is a mount point now. A path that does not exist is not one. */
  isMountPoint(target: string): Promise<boolean>;
}

/** Decodes the octal escapes (\040 for a space…) the kernel puts in mountinfo paths. */
export function unescapeMountPath(p: string): string {
  return p.replace(/\\([0-7]{3})/g, (_m, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/** The mount points listed in a /proc/<pid>/mountinfo text (field 5). */
export function parseMountInfo(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    if (!line) continue;
    const fields = line.split(' ');
    if (fields.length < 5) continue;
    out.push(unescapeMountPath(fields[4]!));
  }
  return out;
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
