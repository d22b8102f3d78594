// A mount table the test controls, for the CSI manager and whatever reads
// mount state through it: the fake CSI client (@csiplug/csi/testing) marks
// and unmarks paths as a plugin's stage, publish, unpublish and unstage
// would, and so does FakeVolumeManager. A test can also make a path's stat
// fail (ENOTCONN of a dead FUSE mount, ESTALE of an NFS one) or hang (a dead
// hard-mounted NFS server). describeMountTableContract holds it to
// ProcMountTable over real bind mounts.
import { FakeMountPoints, normalizeMountPath } from '@csiplug/csi/testing';
import type { MountTable } from '../mount-table';

export class FakeMountTable extends FakeMountPoints implements MountTable {
  /** How many times the table was asked (for tests of read sharing and retries). */
  reads = 0;
  /** Every path stat'ed, in order. */
  readonly statted: string[] = [];
  private readonly statFaults = new Map<string, { code: string } | { hang: Promise<void> }>();

  async isMountPoint(target: string): Promise<boolean> {
    this.reads++;
    return this.has(target);
  }

  /** Answers, unless the test made `target`'s stat fail or hang. The fake has no filesystem: every path "exists". */
  async stat(target: string): Promise<void> {
    this.statted.push(target);
    const fault = this.statFaults.get(normalizeMountPath(target));
    if (!fault) return;
    if ('hang' in fault) return fault.hang;
    throw Object.assign(new Error(`${fault.code}: stat '${target}' failed (injected)`), { code: fault.code, syscall: 'stat', path: target });
  }

  /** Every later stat of `p` fails with errno `code` (e.g. ENOTCONN, ESTALE, EIO, ENOENT), until cleared. */
  failStat(p: string, code: string): void {
    this.statFaults.set(normalizeMountPath(p), { code });
  }

  /** Every later stat of `p` hangs until the returned function is called (then they answer); clears on release. */
  hangStat(p: string): () => void {
    let release!: () => void;
    const hang = new Promise<void>((r) => (release = r));
    const key = normalizeMountPath(p);
    const fault = { hang };
    this.statFaults.set(key, fault);
    return () => {
      if (this.statFaults.get(key) === fault) this.statFaults.delete(key);
      release();
    };
  }

  /** `p` answers its stat again. */
  clearStat(p: string): void {
    this.statFaults.delete(normalizeMountPath(p));
  }
}
