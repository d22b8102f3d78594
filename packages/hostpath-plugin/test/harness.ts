// Test harness: spawns the built plugin (dist/cli.js) on a temp socket,
// makes clients, and cleans up every process and mount it caused.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { DefaultTimeoutPolicy, RealClock, SeededRandom, readMountInfoSync } from '@csiplug/core';
import { type CsiServiceKey, GrpcCSIClient, GrpcInvoker, parseEndpoint } from '@csiplug/csi';
import * as grpc from '@grpc/grpc-js';
import { mountsUnder } from '../src/mountinfo';

export const CLI = path.resolve(__dirname, '..', 'dist', 'cli.js');

export interface PluginProcess {
  proc: ChildProcess;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export class Harness {
  readonly dir: string;
  readonly sock: string;
  readonly endpoint: string;
  readonly stateDir: string;
  private readonly procs: PluginProcess[] = [];
  private readonly clients: GrpcCSIClient[] = [];

  constructor() {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-hp-'));
    this.sock = path.join(this.dir, 'csi.sock');
    this.endpoint = `unix://${this.sock}`;
    this.stateDir = path.join(this.dir, 'state');
  }

  path(...parts: string[]): string {
    return path.join(this.dir, ...parts);
  }

  spawn(args: string[] = [], env: Record<string, string> = {}, withEndpointFlag = true): PluginProcess {
    const argv = [
      CLI,
      ...(withEndpointFlag ? ['--endpoint', this.endpoint] : []),
      '--node-id',
      'node-1',
      '--state-dir',
      this.stateDir,
      '--log-level',
      'warn',
      ...args,
    ];
    const proc = spawn(process.execPath, argv, { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      proc.once('exit', (code, signal) => resolve({ code, signal })),
    );
    const p = { proc, stderr: () => err, exited };
    this.procs.push(p);
    return p;
  }

  /** A client of the plugin on `opts.endpoint` (default: this harness's socket); disposed by cleanup(). */
  client(opts: { csiCall?: number; probe?: number; retry?: object; endpoint?: string } = {}): GrpcCSIClient {
    const c = new GrpcCSIClient(
      opts.endpoint ?? this.endpoint,
      {
        timeouts: new DefaultTimeoutPolicy({ probe: opts.probe ?? 5_000, csiCall: opts.csiCall ?? 20_000 }),
        clock: new RealClock(),
        random: new SeededRandom(1),
      },
      { retry: { baseDelayMs: 10, maxDelayMs: 100, ...opts.retry } },
    );
    this.clients.push(c);
    return c;
  }

  /** Probes (with the client's own retries) until the plugin answers ready. */
  async waitReady(client: GrpcCSIClient, timeoutMs = 15_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const res = await client.probe({
        timeoutMs: Math.max(1, until - Date.now()),
        retry: { maxAttempts: 1_000, baseDelayMs: 20, maxDelayMs: 100 },
      });
      if (res.ready) return;
      if (Date.now() > until) throw new Error('plugin never became ready');
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /**
   * One call straight over gRPC, past the client's own checks (which refuse
   * e.g. a CreateSnapshot without a name before it is sent): resolves with
   * the status code's name ("OK" and the response when it succeeds).
   */
  async raw(
    service: CsiServiceKey,
    rpc: string,
    request: object,
    endpoint = this.endpoint,
  ): Promise<{ code: string; message: string; response?: unknown }> {
    const invoker = new GrpcInvoker(parseEndpoint(endpoint).target);
    try {
      const response = await invoker.unary(service, rpc, request, new Date(Date.now() + 20_000));
      return { code: 'OK', message: '', response };
    } catch (err) {
      const e = err as { code?: number; details?: string; message?: string };
      return { code: grpc.status[e.code ?? grpc.status.UNKNOWN] ?? String(e.code), message: e.details ?? e.message ?? '' };
    } finally {
      invoker.dispose();
    }
  }

  mountsHere(): string[] {
    return mountsUnder(readMountInfoSync(), this.dir);
  }

  async cleanup(): Promise<void> {
    for (const c of this.clients.splice(0)) c.dispose();
    for (const p of this.procs.splice(0)) {
      if (p.proc.exitCode === null && p.proc.signalCode === null) {
        p.proc.kill('SIGKILL');
        await p.exited;
      }
    }
    for (const m of this.mountsHere()) {
      try {
        execFileSync('umount', ['-l', m]);
      } catch {
        // already gone
      }
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
