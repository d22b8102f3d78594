// Spawning fixture scripts for the process tests, with line-wise stdout and
// a registry so every child is killed at the end of a test.
import { type ChildProcess, spawn } from 'child_process';
import * as path from 'path';

export const FIXTURES = path.join(__dirname, '..', 'fixtures');

export interface Child {
  proc: ChildProcess;
  lines: string[];
  /** Resolves with the first line matching `test` (rejects on exit first). */
  waitForLine(test: (line: string) => boolean, timeoutMs?: number): Promise<string>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr(): string;
}

const live = new Set<ChildProcess>();

export function startFixture(script: string, args: string[]): Child {
  const proc = spawn(process.execPath, [path.join(FIXTURES, script), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(proc);
  const lines: string[] = [];
  const waiters: { test: (l: string) => boolean; resolve: (l: string) => void }[] = [];
  let partial = '';
  let err = '';
  proc.stdout!.setEncoding('utf8');
  proc.stdout!.on('data', (chunk: string) => {
    partial += chunk;
    const parts = partial.split('\n');
    partial = parts.pop()!;
    for (const line of parts) {
      lines.push(line);
      for (const w of [...waiters]) {
        if (w.test(line)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(line);
        }
      }
    }
  });
  proc.stderr!.setEncoding('utf8');
  proc.stderr!.on('data', (chunk: string) => (err += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.on('exit', (code, signal) => {
      live.delete(proc);
      resolve({ code, signal });
    }),
  );
  return {
    proc,
    lines,
    exited,
    stderr: () => err,
    waitForLine(test, timeoutMs = 10_000) {
      const seen = lines.find(test);
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise<string>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`no matching line from ${script} within ${timeoutMs} ms; stderr: ${err}`)),
          timeoutMs,
        );
        waiters.push({
          test,
          resolve: (l) => {
            clearTimeout(timer);
            resolve(l);
          },
        });
        void exited.then(() => {
          clearTimeout(timer);
          reject(new Error(`${script} exited before a matching line; stderr: ${err}`));
        });
      });
    },
  };
}

/** Kills every fixture child still running (afterEach). */
export async function killAll(): Promise<void> {
  const waits = [...live].map(
    (p) =>
      new Promise<void>((resolve) => {
        p.once('exit', () => resolve());
        p.kill('SIGKILL');
      }),
  );
  await Promise.all(waits);
}
