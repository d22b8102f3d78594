// A mount table the tests control: the fake CSI client adds and removes
// mount points as a plugin would.
import * as path from 'node:path';
import type { MountTable } from '../../src';

export class FakeMountTable implements MountTable {
  readonly points = new Set<string>();
  reads = 0;

  add(p: string): void {
    this.points.add(path.normalize(p));
  }
  delete(p: string): void {
    this.points.delete(path.normalize(p));
  }
  async isMountPoint(target: string): Promise<boolean> {
    this.reads++;
    return this.points.has(path.normalize(target));
  }
}
