// Whole-tree operations on unpacked roots: a copy that keeps everything a
// root holds (owners, modes, setuid bits, hard links, device nodes,
// symlinks as they are, xattrs the filesystem has) — cp(1) -a, since Node's
// fs.cp drops owners and device nodes — and a removal that refuses to run
// while anything is mounted at or below the tree, so a leftover mount never
// lets `rm -rf` reach the shared layers or the host behind it.
import { promises as fsp } from 'node:fs';
import { RootfsMountError } from '../unpack/errors';
import { CP_BIN, runTool } from '../unpack/host-tools';
import { mountsUnder } from './overlay';

/** Copies the tree at `src` to `dst` (which must not exist). */
export async function copyTree(src: string, dst: string): Promise<void> {
  await runTool(CP_BIN, ['-a', '--reflink=auto', '--', src, dst]);
}

/** Removes `dir` and everything below it; throws, removing nothing, while anything is mounted there. */
export async function removeTree(dir: string): Promise<void> {
  const mounted = await mountsUnder(dir);
  if (mounted.length)
    throw new RootfsMountError(
      mounted[0]!,
      `refusing to remove ${dir} while ${mounted.length} mount(s) remain below it; unmount them first`,
    );
  await fsp.rm(dir, { recursive: true, force: true });
}
