// A mount table the test controls, for the CSI manager and whatever reads
// mount state through it: the fake CSI client (@csiplug/csi/testing) marks
// and unmarks paths as a plugin's stage, publish, unpublish and unstage
// would, and so does FakeVolumeManager. A test can also make a path's stat
// fail (ENOTCONN of a dead FUSE mount, ESTALE of an NFS one) or hang (a dead
// hard-mounted NFS server). describeMountTableContract holds it to
// ProcMountTable over real bind mounts.
import { FakeMountPoints, normalizeMountPath } from '@csiplug/csi/testing';
import type { MountTable, StatOptions } from '../mount-table';

/** What a test made a path's stat or mount check do: fail with an errno, or hang until released. */
type Fault = { code: string } | { hang: Promise<void> };

/** Makes `p` hang in `faults` until the returned function is called (then it answers, and the fault is cleared). */
function hangIn(faults: Map<string, Fault>, p: string): () => void {
  let release!: () => void;
  const hang = new Promise<void>((r) => (release = r));
  const key = normalizeMountPath(p);
  const fault = { hang };
  faults.set(key, fault);
  return () => {
    if (faults.get(key) === fault) faults.delete(key);
    release();
  };
}

export class FakeMountTable extends FakeMountPoints implements MountTable {
  /** How many times the table was asked (for tests of read sharing and retries). */
  reads = 0;
  /** Every path stat'ed, in order. */
  readonly statted: string[] = [];
  private readonly statFaults = new Map<string, Fault>();
  private readonly checkFaults = new Map<string, Fault>();

  /** Answers from the marks, unless the test made the check of `target` fail or hang (failMountCheck, hangMountCheck). */
  async isMountPoint(target: string): Promise<boolean> {
    this.reads++;
    const fault = this.checkFaults.get(normalizeMountPath(target));
    if (fault && 'hang' in fault) await fault.hang;
    else if (fault)
      throw Object.assign(new Error(`${fault.code}: checking whether '${target}' is a mount point failed (injected)`), {
        code: fault.code,
        path: target,
      });
    return this.has(target);
  }

  /** Every later isMountPoint(`p`) rejects with errno `code` (ENOTCONN of a realpath through a dead FUSE target, say), until cleared. */
  failMountCheck(p: string, code: string): void {
    this.checkFaults.set(normalizeMountPath(p), { code });
  }

  /** Every later isMountPoint(`p`) hangs until the returned function is called (then they answer). */
  hangMountCheck(p: string): () => void {
    return hangIn(this.checkFaults, p);
  }

  /** isMountPoint(`p`) answers from the marks again. */
  clearMountCheck(p: string): void {
    this.checkFaults.delete(normalizeMountPath(p));
  }

  /** Answers, unless the test made `target`'s stat fail or hang. The fake has no filesystem: every path "exists". The probe starts at once. */
  async stat(target: string, options: StatOptions = {}): Promise<void> {
    this.statted.push(target);
    options.onStarted?.();
    const fault = this.statFaults.get(normalizeMountPath(target));
    if (!fault) return;
    if ('hang' in fault) return fault.hang;
    throw Object.assign(new Error(`${fault.code}: stat '${target}' failed (injected)`), {
      code: fault.code,
      syscall: 'stat',
      path: target,
    });
  }

  /** Every later stat of `p` fails with errno `code` (e.g. ENOTCONN, ESTALE, EIO, ENOENT), until cleared. */
  failStat(p: string, code: string): void {
    this.statFaults.set(normalizeMountPath(p), { code });
  }

  /** Every later stat of `p` hangs until the returned function is called (then they answer); clears on release. */
  hangStat(p: string): () => void {
    return hangIn(this.statFaults, p);
  }

  /** `p` answers its stat again. */
  clearStat(p: string): void {
    this.statFaults.delete(normalizeMountPath(p));
  }
}
