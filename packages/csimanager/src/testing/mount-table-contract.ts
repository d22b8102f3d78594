// What every MountTable answers, as jest tests: run against FakeMountTable
// and against ProcMountTable over real bind mounts in a temp dir
// (packages/csimanager/test/mount-table-contract.test.ts), so the fake the
// volume manager's tests use answers what the kernel's table does.
import type { MountTable } from '../mount-table';
import type * as JestGlobals from '@jest/globals';

/** One implementation under test, made fresh for each test. */
export interface MountTableContractSubject {
  readonly table: MountTable;
  /** A directory that exists and is not a mount point; the test makes paths below it. */
  readonly dir: string;
  /** Makes an existing directory `target` a mount point (a bind mount for the real table). */
  mount(target: string): Promise<void>;
  /** Unmounts `target`. */
  unmount(target: string): Promise<void>;
  /** Makes directory `p` (and its parents). */
  mkdir(p: string): Promise<void>;
  /** Unmounts and removes whatever the test left. */
  cleanup(): Promise<void>;
}

/** Registers the MountTable contract's tests under `describe(name)`; `make` runs before each test, the subject's cleanup after it. */
export function describeMountTableContract(name: string, make: () => Promise<MountTableContractSubject>): void {
  // Jest's functions, loaded when the suite is described (not when the testing entry is imported: it loads outside jest too); @jest/globals is an optional peer dependency.
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded lazily on purpose, as said above
  const { afterEach, beforeEach, describe, expect, it } = require('@jest/globals') as typeof JestGlobals;
  describe(`MountTable contract: ${name}`, () => {
    let s: MountTableContractSubject;
    beforeEach(async () => {
      s = await make();
    });
    afterEach(async () => {
      await s.cleanup();
    });

    it('a directory is not a mount point until something is mounted on it, and not after it is unmounted', async () => {
      const target = `${s.dir}/target`;
      await s.mkdir(target);
      expect(await s.table.isMountPoint(target)).toBe(false);
      await s.mount(target);
      expect(await s.table.isMountPoint(target)).toBe(true);
      await s.unmount(target);
      expect(await s.table.isMountPoint(target)).toBe(false);
    });

    it('a path that does not exist is not a mount point (no error)', async () => {
      expect(await s.table.isMountPoint(`${s.dir}/no/such/path`)).toBe(false);
    });

    it('a mount point is one however the path is spelled (trailing slash, "." and doubled slashes)', async () => {
      const target = `${s.dir}/spelled`;
      await s.mkdir(target);
      await s.mount(target);
      for (const spelling of [`${target}/`, `${s.dir}/./spelled`, `${s.dir}//spelled`])
        expect(await s.table.isMountPoint(spelling)).toBe(true);
    });

    it('a mount point does not make its parent or its subdirectories mount points', async () => {
      const target = `${s.dir}/outer/inner`;
      await s.mkdir(target);
      await s.mount(target);
      expect(await s.table.isMountPoint(`${s.dir}/outer`)).toBe(false);
      expect(await s.table.isMountPoint(target)).toBe(true);
    });

    it('a directory answers its stat, mounted or not', async () => {
      const target = `${s.dir}/stat`;
      await s.mkdir(target);
      await expect(s.table.stat(target)).resolves.toBeUndefined();
      await s.mount(target);
      await expect(s.table.stat(target)).resolves.toBeUndefined();
    });

    it('answers many concurrent questions consistently', async () => {
      const a = `${s.dir}/a`;
      const b = `${s.dir}/b`;
      await s.mkdir(a);
      await s.mkdir(b);
      await s.mount(a);
      const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => s.table.isMountPoint(i % 2 ? a : b)));
      expect(answers).toEqual(Array.from({ length: 40 }, (_, i) => i % 2 === 1));
    });
  });
}
