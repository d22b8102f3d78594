// Bind mounts through mount(8)/umount(8); mount state from mountinfo.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { MountCommandError } from './errors';
import { type MountInfo, readMountInfo } from './mountinfo';

const run = promisify(execFile);

export interface Mounter {
  bind(source: string, target: string): Promise<void>;
  /** Re-applies a bind mount with `options` (e.g. ["ro", "nosuid"]). */
  remount(target: string, options: string[]): Promise<void>;
  unmount(target: string): Promise<void>;
  mounts(): Promise<MountInfo[]>;
}

async function exec(cmd: string, args: string[]): Promise<void> {
  try {
    await run(cmd, args, { timeout: 30_000 });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new MountCommandError(cmd, args, (e.stderr || e.message).trim(), { cause: err });
  }
}

export class LinuxMounter implements Mounter {
  bind(source: string, target: string): Promise<void> {
    return exec('mount', ['--bind', source, target]);
  }
  remount(target: string, options: string[]): Promise<void> {
    return exec('mount', ['-o', ['remount', 'bind', ...options].join(','), target]);
  }
  unmount(target: string): Promise<void> {
    return exec('umount', [target]);
  }
  mounts(): Promise<MountInfo[]> {
    return readMountInfo();
  }
}
