// Runs the host tools unpacking needs where Node has no API: mknod(1) for
// device nodes and fifos, setfattr(1) for extended attributes, mount(8),
// umount(8) and cp(1). Absolute paths only: the agent runs as root, and a
// PATH lookup would let whoever controls PATH choose what runs.
import { execFile } from 'node:child_process';
import { accessSync, constants as fsc } from 'node:fs';

export const MKNOD_BIN = '/usr/bin/mknod';
export const SETFATTR_BIN = '/usr/bin/setfattr';
export const MOUNT_BIN = '/usr/bin/mount';
export const UMOUNT_BIN = '/usr/bin/umount';
export const CP_BIN = '/usr/bin/cp';

/** Whether an executable exists at `bin`. */
export function toolExists(bin: string): boolean {
  try {
    accessSync(bin, fsc.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** A tool that exited non-zero, with what it printed. */
export class ToolFailedError extends Error {
  constructor(
    readonly bin: string,
    readonly args: readonly string[],
    readonly stderr: string,
    readonly exitCode: number | string | null,
  ) {
    super(`${bin} ${args.join(' ')} failed (${exitCode}): ${stderr.trim() || 'no message'}`);
  }
}

/** Runs `bin args…` to completion; rejects with ToolFailedError on a non-zero exit. */
export function runTool(bin: string, args: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(bin, args, { maxBuffer: 1 << 20 }, (err, _stdout, stderr) => {
      if (!err) return resolve();
      const code = (err as { code?: number | string }).code ?? null;
      reject(new ToolFailedError(bin, args, String(stderr || err.message), code));
    });
  });
}
