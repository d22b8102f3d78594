// What the agent and the executor tell each other through files in the
// task's `.executor/` dir: the spec the agent writes, and the pid and exit
// records the executor writes. Files, not pipes, because either side may be
// gone when the other reads them.
//
// The executor imports this file, so it must use node built-ins only (a
// type-only import loads nothing).
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { rethrowReadError } from './proc';
import type { TaskLogLimits } from '@csiplug/core';

/** The dir under a task dir that holds the executor's files. */
export const EXECUTOR_DIR = '.executor';

/** What the executor runs: written by the agent, read once by the executor. */
export interface ExecutorSpec {
  version: 1;
  command: string;
  args: string[];
  /** The task's complete environment. */
  env: Record<string, string>;
  cwd: string;
  /** Opened O_APPEND, so logs accumulate across restarts. */
  stdoutPath: string;
  stderrPath: string;
  /** How the logs rotate (task-logs.ts); absent in specs of agents before rotation, whose tasks write the files themselves. */
  logs?: TaskLogLimits;
  /** Where the executor writes its ExecutorPidRecord and ExecutorExitRecord. */
  pidPath: string;
  exitPath: string;
  /** An isolated task: the executor runs it with `runc run` in this bundle (its config.json holds command, args and env). */
  runc?: RuncContainer;
}

/** Where an isolated task's container lives: runc's binary, its state root, the container id and the bundle. */
export interface RuncContainer {
  binary: string;
  root: string;
  id: string;
  bundle: string;
}

/** `runc run` of the container, in the foreground: runc passes signals on to the task and exits with its status. */
export function runcRunArgs(c: RuncContainer): string[] {
  return ['--root', c.root, 'run', '--bundle', c.bundle, '--no-new-keyring', c.id];
}

/**
 * Whether runc still keeps state for the container (its dir under the runc
 * root, gone once the container is deleted): a container whose runc exited
 * normally has none, and needs no `runc delete`.
 */
export function containerStateExists(c: Pick<RuncContainer, 'root' | 'id'>): boolean {
  return existsSync(join(c.root, c.id));
}

/** `runc delete --force`: kills what is left of the container and removes it (its cgroup too); nothing if it is gone. */
export function runcDeleteArgs(c: Pick<RuncContainer, 'root' | 'id'>): string[] {
  return ['--root', c.root, 'delete', '--force', c.id];
}

/** Written by the executor once the task runs. */
export interface ExecutorPidRecord {
  version: 1;
  executorPid: number;
  executorStartTime: string;
  pid: number;
  startTime: string;
  /** ms since the epoch, by the executor's clock. */
  startedAt: number;
}

/** Written by the executor when the task has exited, or could not be started at all. */
export interface ExecutorExitRecord {
  version: 1;
  /** The task's pid and start time, so a record is never taken for another run's. 0 and '' when spawning failed. */
  pid: number;
  startTime: string;
  exitCode: number | null;
  signal: string | null;
  /** ms since the epoch, by the executor's clock. */
  finishedAt: number;
  /** Set when the task could not be started (e.g. `spawn /x ENOENT`). */
  startError?: string;
}

export interface ExecutorPaths {
  dir: string;
  spec: string;
  pid: string;
  exit: string;
  /** The executor's own stderr: its crashes end up here. */
  log: string;
}

export function executorPaths(taskDir: string): ExecutorPaths {
  const dir = join(taskDir, EXECUTOR_DIR);
  return {
    dir,
    spec: join(dir, 'spec.json'),
    pid: join(dir, 'pid.json'),
    exit: join(dir, 'exit.json'),
    log: join(dir, 'executor.log'),
  };
}

/**
 * Writes `value` as JSON so that a reader sees the old file or the whole new
 * one, never a part: write a temp file, flush it, rename it over the target,
 * then flush the dir so the rename survives a crash.
 */
export function writeJsonAtomic(file: string, value: unknown, mode = 0o600): void {
  const tmp = `${file}.${process.pid}.tmp`;
  const fd = openSync(tmp, 'w', mode);
  try {
    try {
      writeSync(fd, JSON.stringify(value));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, file);
  } catch (err) {
    // A half-written record is never left behind (a full disk).
    try {
      unlinkSync(tmp);
    } catch {
      // already gone
    }
    throw err;
  }
  const dirFd = openSync(join(file, '..'), 'r');
  try {
    fsyncSync(dirFd);
  } catch {
    // Some filesystems refuse fsync on a dir; the rename itself is still atomic.
  } finally {
    closeSync(dirFd);
  }
}

/**
 * The parsed JSON in `file`, or undefined when it does not exist. Throws
 * TransientReadError when it cannot be read just now (EMFILE…): "unknown",
 * never "no record".
 */
export function readJsonFile<T>(file: string): T | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    rethrowReadError(file, err);
  }
  return JSON.parse(text) as T;
}
