// The compiled executor (dist/executor.js) when it cannot write the task's
// pid record (a full disk, here a dir that is not there): a task no record
// names could never be found or stopped, and the agent would start a second
// copy. The executor kills it, records why in exit.json, exits non-zero, and
// leaves no temp file behind.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { ExecutorExitRecord, ExecutorSpec } from '../src/executor-protocol';

const EXECUTOR = join(resolve(__dirname, '..', 'dist'), 'executor.js');

/** Whether `pid` runs (a zombie has ended all the same). */
function runs(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

describe('executor whose pid record cannot be written', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'csiplug-executor-pid-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('kills the task, records why in exit.json and exits non-zero', () => {
    const marker = join(dir, 'task.pid');
    const spec: ExecutorSpec = {
      version: 1,
      command: '/bin/sh',
      args: ['-c', `echo $$ > ${marker}; exec sleep 30`],
      env: { PATH: '/usr/bin:/bin' },
      cwd: dir,
      stdoutPath: join(dir, 'stdout.log'),
      stderrPath: join(dir, 'stderr.log'),
      pidPath: join(dir, 'missing', 'pid.json'),
      exitPath: join(dir, 'exit.json'),
    };
    const specPath = join(dir, 'spec.json');
    writeFileSync(specPath, JSON.stringify(spec));
    const run = spawnSync(process.execPath, [EXECUTOR, specPath], { encoding: 'utf8', timeout: 20_000 });
    expect(run.status).toBe(1);
    const exit = JSON.parse(readFileSync(spec.exitPath, 'utf8')) as ExecutorExitRecord;
    expect(exit.startError).toMatch(/^could not record the task's pid in .*missing\/pid\.json: ENOENT.*; the task \(pid \d+\) was killed$/);
    // The shell may not have written its pid before the kill; when it did, that process is gone.
    if (existsSync(marker) && readFileSync(marker, 'utf8').trim()) expect(runs(Number(readFileSync(marker, 'utf8').trim()))).toBe(false);
    const taskPid = Number(/\(pid (\d+)\)/.exec(exit.startError!)![1]);
    expect(runs(taskPid)).toBe(false);
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });
});
