// RuncContainers: the exec driver's side of runc for isolated tasks — the
// bundle of a task's container, bounded runc calls in a child process, and
// the kill and removal of a container, only ever of one of this driver's
// own (its runc root, its naming). The driver decides when; this file knows
// how, and refuses to touch a container a tampered record names.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { errorMessage, formatDuration, type ILogger } from '@csiplug/core';
import type { DriverTaskConfig, TaskHandle } from './driver';
import { TaskStartError } from './errors';
import { type ExecutorPaths, type RuncContainer, containerStateExists, runcDeleteArgs } from './executor-protocol';
import { taskFields } from './fault-log';
import { isolatedProcessArgs, ociConfig, prepareBundle } from './isolation';

/** Where runc's state of isolated tasks lives by default (tmpfs: containers do not outlive a reboot, nor does their state). */
export const DEFAULT_RUNC_ROOT = '/run/csiplug/runc';

/** The runc binary on this machine, or undefined. */
export function findRunc(): string | undefined {
  return ['/usr/sbin/runc', '/usr/bin/runc', '/sbin/runc', '/bin/runc', '/usr/local/sbin/runc', '/usr/local/bin/runc'].find((p) =>
    existsSync(p),
  );
}

/** A runc container id for the task: runc takes [A-Za-z0-9_.+-] only, at most 1024 characters. */
export function containerId(allocId: string, taskName: string): string {
  // Every byte outside [A-Za-z0-9.-] (the "_" of the escape included) as _XX: one name, one id.
  const escape = (s: string) =>
    [...Buffer.from(s, 'utf8')]
      .map((b) => (/[A-Za-z0-9.-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `_${b.toString(16).padStart(2, '0')}`))
      .join('');
  const id = `csiplug-${escape(allocId)}-${escape(taskName)}`;
  // runc keeps a dir per container: a name past a file name's 255 bytes is hashed.
  return id.length <= 200 ? id : `csiplug-${escape(allocId)}-${createHash('sha256').update(taskName).digest('hex').slice(0, 32)}`;
}

/** How long one runc call may take before it is given up. */
const RUNC_CALL_LIMIT_MS = 10_000;

/** The PATH an isolated task gets unless its env sets one. */
const TASK_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** What the containers need to know of the driver's processes and records. */
export interface RuncProcessChecks {
  /** Whether `pid` is the live process that started at `startTime`; throws when that cannot be told just now. */
  isSame(pid: number, startTime: string): boolean;
  /** Whether the task dir's pid record still names the handle's run. */
  isLatestRun(handle: TaskHandle): boolean;
}

export class RuncContainers {
  /** Container removals under way, by runc root and id. */
  private readonly removals = new Map<string, Promise<void>>();

  constructor(
    private readonly runcPath: string | undefined,
    private readonly runcRoot: string,
    private readonly log: ILogger,
    private readonly checks: RuncProcessChecks,
  ) {}

  /**
   * Writes the bundle of an isolated task (config.json, an empty root) and
   * removes a container a dead earlier run of the task left under its id.
   * Throws a TaskStartError when runc is not on the machine.
   */
  async prepare(config: DriverTaskConfig, paths: ExecutorPaths): Promise<RuncContainer> {
    const { allocId, taskName } = config;
    if (!this.runcPath || !existsSync(this.runcPath)) {
      throw new TaskStartError(
        allocId,
        taskName,
        `the exec driver runs tasks isolated on runc, which is not installed on this machine${this.runcPath ? ` (no ${this.runcPath})` : ''}: install the runc package (apt-get install runc), or use driver = "raw_exec" to run the task as a host process`,
      );
    }
    const id = containerId(allocId, taskName);
    const bundle = join(paths.dir, 'bundle');
    const { configPath } = prepareBundle(bundle);
    const env = { PATH: TASK_PATH, ...config.env };
    let oci: Record<string, unknown>;
    try {
      oci = ociConfig(
        { hostname: taskName.slice(0, 63), args: isolatedProcessArgs(config.command, config.args, config.isolation!), env },
        config.isolation!,
      );
    } catch (err) {
      throw new TaskStartError(allocId, taskName, `cannot isolate the task: ${errorMessage(err)}`, { cause: err });
    }
    // Never through a link someone put in its place: removed, then created anew.
    rmSync(configPath, { force: true });
    writeFileSync(configPath, JSON.stringify(oci, null, 1), { mode: 0o600, flag: 'wx' });
    mkdirSync(this.runcRoot, { recursive: true, mode: 0o700 });
    const container: RuncContainer = { binary: this.runcPath, root: this.runcRoot, id, bundle };
    // The earlier run is known dead (checked above): what is left of its container goes.
    await this.remove({ runc: container, taskName, allocId });
    return container;
  }

  /**
   * Whether a container a record names is one of this driver's: in its runc
   * root, named as its tasks are. A record is a file on disk; a tampered one
   * must not make the agent kill or delete another runtime's containers.
   */
  private owns(c: { root: string; id: string }, task?: { allocId: string; taskName: string }): boolean {
    const ours = c.root === this.runcRoot && c.id.startsWith('csiplug-') && (!task || c.id === containerId(task.allocId, task.taskName));
    if (!ours)
      this.log.warn("not touching a container a task record names: it is not one of this driver's", { root: c.root, container: c.id });
    return ours;
  }

  /** The handle's container when it has one, runc is here and the container is one of ours (see owns). */
  ours(handle: Pick<TaskHandle, 'runc'>, task?: { allocId: string; taskName: string }): { root: string; id: string } | undefined {
    return handle.runc && this.runcPath && this.owns(handle.runc, task) ? handle.runc : undefined;
  }

  /**
   * One runc call, bounded, in a child process: the agent's event loop never
   * waits on runc (a container stuck in the kernel holds up only its own
   * call). `why` says what went wrong when it did not succeed.
   */
  call(args: string[]): Promise<{ ok: true; stdout: string } | { ok: false; why: string }> {
    return new Promise((resolve) => {
      try {
        execFile(
          this.runcPath!,
          args,
          { timeout: RUNC_CALL_LIMIT_MS, killSignal: 'SIGKILL', env: { PATH: TASK_PATH }, maxBuffer: 1 << 20 },
          (err, stdout, stderr) => {
            if (!err) resolve({ ok: true, stdout });
            else if (err.killed)
              resolve({
                ok: false,
                why: `runc ${args[2] ?? ''} took longer than ${formatDuration(RUNC_CALL_LIMIT_MS)}${String(stderr).trim() ? ` (${String(stderr).trim()})` : ''}`,
              });
            else resolve({ ok: false, why: String(stderr).trim() || err.message });
          },
        );
      } catch (err) {
        // A spawn that fails at once (ENOMEM, E2BIG) throws rather than calling back.
        resolve({ ok: false, why: `runc could not be run: ${errorMessage(err)}` });
      }
    });
  }

  /** `runc kill` of the handle's container when runc (pid and start time) still runs it; false when that could not be done. */
  async kill(handle: TaskHandle, signal: NodeJS.Signals): Promise<boolean> {
    const c = this.ours(handle, handle);
    if (!c || !this.checks.isSame(handle.pid, handle.startTime)) return false;
    const r = await this.call(['--root', c.root, 'kill', c.id, signal]);
    if (!r.ok) this.log.debug('runc kill failed; signalling runc instead', { ...taskFields(handle), signal, err: r.why });
    return r.ok;
  }

  /**
   * runc delete --force of the handle's container, if runc still keeps one:
   * a no-op (and no runc call) when it is gone. One removal per container at
   * a time: a second caller shares the one under way. Never throws.
   */
  remove(handle: Pick<TaskHandle, 'runc' | 'taskName' | 'allocId'> | TaskHandle): Promise<void> {
    const c = this.ours(handle);
    if (!c || !containerStateExists(c)) return Promise.resolve();
    // Every run of a task has the same container id: an old run's handle (a late stop, wait or recover) must never remove a newer run's container.
    if ('pid' in handle && !this.checks.isLatestRun(handle)) {
      this.log.debug('not removing the container: the task dir records a newer run than this handle', {
        ...taskFields(handle),
        container: c.id,
      });
      return Promise.resolve();
    }
    const key = `${c.root}\0${c.id}`;
    const under = this.removals.get(key);
    if (under) return under;
    const removal = this.call(runcDeleteArgs(c)).then((r) => {
      // "does not exist" is the usual answer to a race with runc's own cleanup: nothing was left.
      if (!r.ok && !/does not exist/.test(r.why))
        this.log.warn('could not remove the container of an isolated task', {
          allocId: handle.allocId,
          taskName: handle.taskName,
          container: c.id,
          err: r.why,
        });
    });
    this.removals.set(key, removal);
    const forget = () => {
      if (this.removals.get(key) === removal) this.removals.delete(key);
    };
    removal.then(forget, forget);
    return removal;
  }
}
