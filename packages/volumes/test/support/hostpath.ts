// Runs the real hostpath plugin as a process for integration tests, and
// cleans up whatever mounts a test left under its temp dir. (Moved here from
// @csiplug/csimanager's tests with the agent-restart test that uses it.)
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import { connect } from 'node:net';
import * as path from 'node:path';
import { mountsUnder as mountPointsUnder } from '@csiplug/csimanager';

export const HOSTPATH_CLI = path.resolve(__dirname, '../../../hostpath-plugin/dist/cli.js');

export interface HostpathProcess {
  readonly socketPath: string;
  readonly child: ChildProcess;
  stop(): Promise<void>;
  /** kill -9, as a crash: the socket file stays behind; resolves once the process is gone. */
  crash(): Promise<void>;
}

/** Starts the plugin; `args` adds flags (e.g. the fault switches: `--hang-rpc NodePublishVolume`). */
export async function startHostpath(opts: {
  socketPath: string;
  stateDir: string;
  nodeId?: string;
  mode?: string;
  args?: string[];
}): Promise<HostpathProcess> {
  if (!existsSync(HOSTPATH_CLI))
    throw new Error(`the hostpath plugin is not built (${HOSTPATH_CLI} is missing); build packages/hostpath-plugin first`);
  await fs.mkdir(path.dirname(opts.socketPath), { recursive: true, mode: 0o700 });
  const child = spawn(
    process.execPath,
    [
      HOSTPATH_CLI,
      '--endpoint',
      `unix://${opts.socketPath}`,
      '--node-id',
      opts.nodeId ?? 'node-it',
      '--state-dir',
      opts.stateDir,
      '--mode',
      opts.mode ?? 'monolith',
      '--log-level',
      'warn',
      ...(opts.args ?? []),
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // An integration test waits for a real process: poll the socket briefly, until
  // it takes a connection (a socket file left by a crashed predecessor refuses).
  const deadline = Date.now() + 15_000;
  while (!(await accepts(opts.socketPath))) {
    if (child.exitCode !== null) throw new Error(`hostpath plugin exited (${child.exitCode}): ${stderr}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`hostpath plugin did not create ${opts.socketPath} within 15 s: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return {
    socketPath: opts.socketPath,
    child,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(t);
      }
    },
    async crash() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** Whether a unix socket at `p` takes a connection now. */
function accepts(p: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(p);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Mount points at or under `dir`, deepest first. */
export function mountsUnder(dir: string): string[] {
  return mountPointsUnder(dir).sort((a, b) => b.length - a.length);
}

/** Unmounts anything a failed test left under `dir`. */
export function unmountAllUnder(dir: string): void {
  for (let i = 0; i < 5; i++) {
    const left = mountsUnder(dir);
    if (left.length === 0) return;
    for (const m of left) {
      try {
        execFileSync('umount', [m], { stdio: 'ignore' });
      } catch {
        try {
          execFileSync('umount', ['-l', m], { stdio: 'ignore' });
        } catch {
          // reported by the caller's check
        }
      }
    }
  }
}
