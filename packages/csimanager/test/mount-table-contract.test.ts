// The MountTable contract (@csiplug/csimanager/testing) against
// FakeMountTable and against ProcMountTable over real bind mounts in a temp
// dir. Every mount a test makes is unmounted after it, even when it fails.
import { execFileSync } from 'node:child_process';
import { promises as fs, mkdtempSync, realpathSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { mountPointsUnder, readMountInfoSync } from '@csiplug/core';
import { ProcMountTable } from '../src';
import { describeMountTableContract, FakeMountTable, type MountTableContractSubject } from '../src/testing';
import { requireRoot } from '@csiplug/core/testing';

describeMountTableContract('FakeMountTable', async () => {
  const table = new FakeMountTable();
  return {
    table,
    dir: '/fake/contract',
    mount: async (target) => table.mark(target),
    unmount: async (target) => table.unmark(target),
    // The fake has no filesystem: every directory "exists".
    mkdir: async () => undefined,
    cleanup: async () => table.points.clear(),
  };
});

/** Unmounts everything at or below `dir`, newest first (lazily as a last resort), and says what it had to. */
function unmountAllUnder(dir: string): string[] {
  const left = mountPointsUnder(readMountInfoSync(), dir).reverse();
  for (const m of left) {
    try {
      execFileSync('umount', [m], { stdio: 'ignore' });
    } catch {
      execFileSync('umount', ['-l', m], { stdio: 'ignore' });
    }
  }
  return left;
}

async function realTable(): Promise<MountTableContractSubject> {
  const dir = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'csiplug-mount-table-')));
  const source = path.join(dir, 'source');
  const under = path.join(dir, 'mounts');
  await fs.mkdir(source);
  await fs.mkdir(under);
  return {
    table: new ProcMountTable(),
    dir: under,
    mount: async (target) => {
      execFileSync('mount', ['--bind', source, target]);
    },
    unmount: async (target) => {
      execFileSync('umount', [target]);
    },
    mkdir: async (p) => {
      await fs.mkdir(p, { recursive: true });
    },
    cleanup: async () => {
      unmountAllUnder(dir);
      await fs.rm(dir, { recursive: true, force: true });
    },
  };
}

describe('as root', () => {
  beforeAll(requireRoot); // bind mounts
  describeMountTableContract('ProcMountTable with real bind mounts', realTable);
});
