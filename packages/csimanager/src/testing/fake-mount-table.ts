// A mount table the test controls, for the CSI manager and whatever reads
// mount state through it: the fake CSI client (@csiplug/csi/testing) marks
// and unmarks paths as a plugin's stage, publish, unpublish and unstage
// would, and so does FakeVolumeManager. describeMountTableContract holds it
// to ProcMountTable over real bind mounts.
import { FakeMountPoints } from '@csiplug/csi/testing';
import type { MountTable } from '../mount-table';

export class FakeMountTable extends FakeMountPoints implements MountTable {
  /** How many times the table was asked (for tests of read sharing and retries). */
  reads = 0;

  async isMountPoint(target: string): Promise<boolean> {
    this.reads++;
    return this.has(target);
  }
}
