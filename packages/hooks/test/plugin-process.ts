// The real hostpath CSI plugin as a child process, started the way a task
// driver starts a plugin task: with the environment the supervisor hook's
// prestart returned (CSI_ENDPOINT). Every process started here is tracked so
// a test's afterEach can kill what a failed test left running.
import { type ChildProcess, spawn } from 'node:child_process';
import * as path from 'node:path';

export const HOSTPATH_CLI = path.resolve(__dirname, '../../hostpath-plugin/dist/cli.js');

const live = new Set<PluginProcess>();

export class PluginProcess {
  private stderr = '';
  private readonly exited: Promise<void>;

  private constructor(readonly child: ChildProcess) {
    child.stderr?.on('data', (d: Buffer) => (this.stderr = (this.stderr + d.toString()).slice(-8_000)));
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    live.add(this);
    void this.exited.then(() => live.delete(this));
  }

  /** Starts `hostpath-plugin --mode monolith` with the task's env; does not wait for it to listen (the supervisor does). */
  static start(options: { env: Record<string, string>; stateDir: string; nodeId?: string }): PluginProcess {
    const args = [
      HOSTPATH_CLI,
      '--node-id',
      options.nodeId ?? 'n1',
      '--state-dir',
      options.stateDir,
      '--mode',
      'monolith',
      '--log-level',
      'warn',
    ];
    return new PluginProcess(
      spawn(process.execPath, args, { env: { ...process.env, ...options.env }, stdio: ['ignore', 'ignore', 'pipe'] }),
    );
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** What the plugin wrote to stderr (the tail), for failure messages. */
  get log(): string {
    return this.stderr;
  }

  /** Sends `signal` and waits for the process to exit. SIGKILL leaves its mounts and its socket file behind, as a crash does. */
  async kill(signal: NodeJS.Signals = 'SIGTERM'): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (this.running) {
      this.child.kill(signal);
      const escalate = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
      await this.exited;
      clearTimeout(escalate);
    }
    return { code: this.child.exitCode, signal: this.child.signalCode };
  }

  /** Kills every plugin process still running (afterEach); returns how many there were. */
  static async killAll(): Promise<number> {
    const all = [...live].filter((p) => p.running);
    await Promise.all(all.map((p) => p.kill('SIGKILL')));
    return all.length;
  }
}
