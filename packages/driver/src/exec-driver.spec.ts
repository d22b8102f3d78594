// The exec driver under faults of the agent's own process: EMFILE (and its
// kin) while checking a task is "status unknown, retry", never an exit. The
// faults are injected through the driver's procReader / recordReader seams;
// everything else is real: /proc, the executor's files, real processes.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { MemoryLogger, RealClock } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import type { ExitResult, TaskHandle } from './driver';
import { TransientProbeError } from './errors';
import { ExecDriver, type ExecDriverOptions } from './exec-driver';
import { type ExecutorExitRecord, type ExecutorPidRecord, executorPaths, readJsonFile, writeJsonAtomic } from './executor-protocol';
import { isSameProcess, processStartTime, readProcStat } from './proc';

const EXECUTOR = resolve(__dirname, '../dist/executor.js');

const WARNING = 'cannot check the task for a fault of the agent itself';
const RECOVERED = 'task checks work again';

function emfile(path: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`EMFILE: too many open files, open '${path}'`), { code: 'EMFILE', errno: -24, syscall: 'open', path });
}

function eacces(path: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`EACCES: permission denied, open '${path}'`), { code: 'EACCES', errno: -13, syscall: 'open', path });
}

/**
 * The driver's readers, made to fail with EMFILE while `faulty` is set (the
 * executor records alone while `recordsFaulty` is), and /proc reads with
 * EACCES, a fault that does not pass, while `procDenied` is; `faults` counts
 * the failed reads.
 */
class FaultyReaders {
  faulty = false;
  recordsFaulty = false;
  procDenied = false;
  faults = 0;

  readonly procReader = (pid: number) => {
    if (this.procDenied) {
      this.faults++;
      throw eacces(`/proc/${pid}/stat`);
    }
    this.maybeFail(`/proc/${pid}/stat`, this.faulty);
    return readProcStat(pid);
  };

  readonly recordReader = (file: string) => {
    this.maybeFail(file, this.faulty || this.recordsFaulty);
    return readJsonFile(file);
  };

  private maybeFail(path: string, faulty: boolean): void {
    if (!faulty) return;
    this.faults++;
    throw emfile(path);
  }
}

/** Waits for something a real process does (not for a timer): checks often, gives up after `ms`. */
async function until<T>(what: string, check: () => T | undefined | false, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function track<T>(promise: Promise<T>): { promise: Promise<T>; settled: () => boolean } {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  return { promise, settled: () => done };
}

describe('ExecDriver under faults of the agent itself (fake clock)', () => {
  let clock: FakeClock;
  let logger: MemoryLogger;
  let readers: FaultyReaders;
  let roots: string[];
  let drivers: ExecDriver[];
  let children: ChildProcess[];

  beforeEach(() => {
    clock = new FakeClock(0);
    logger = new MemoryLogger();
    readers = new FaultyReaders();
    roots = [];
    drivers = [];
    children = [];
  });

  afterEach(() => {
    for (const d of drivers) d.dispose();
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    for (const root of roots) rmSync(root, { recursive: true, force: true });
  });

  function newDriver(options: ExecDriverOptions = {}): ExecDriver {
    const driver = new ExecDriver(clock, logger, {
      pollInterval: 1_000,
      exitGrace: 5_000,
      procReader: readers.procReader,
      recordReader: readers.recordReader,
      ...options,
    });
    drivers.push(driver);
    return driver;
  }

  function newTaskDir(): string {
    const root = mkdtempSync(join(tmpdir(), 'csiplug-faults-'));
    roots.push(root);
    const taskDir = join(root, 'web');
    mkdirSync(executorPaths(taskDir).dir, { recursive: true });
    return taskDir;
  }

  /** A handle for a live process of ours that stands in for a task (this test process: never signalled here). */
  function selfHandle(taskDir: string): TaskHandle {
    const startTime = processStartTime(process.pid)!;
    return {
      version: 1,
      driver: 'exec',
      allocId: 'a1',
      taskName: 'web',
      taskDir,
      executorPid: process.pid,
      executorStartTime: startTime,
      pid: process.pid,
      startTime,
      startedAt: 0,
    };
  }

  function recordExit(handle: TaskHandle, exitCode: number): void {
    const record: ExecutorExitRecord = { version: 1, pid: handle.pid, startTime: handle.startTime, exitCode, signal: null, finishedAt: 1 };
    writeJsonAtomic(executorPaths(handle.taskDir).exit, record);
  }

  it('keeps waiting through a long EMFILE storm, logs it sparingly, and resolves with the recorded exit once reads work', async () => {
    const driver = newDriver();
    const handle = selfHandle(newTaskDir());
    readers.faulty = true;
    const waiting = track(driver.wait(handle));

    await clock.advance(10 * 60_000);
    expect(readers.faults).toBeGreaterThan(100);
    expect(waiting.settled()).toBe(false);
    expect(driver.isRunning(handle)).toBe(true);
    // Ten minutes of faults on every poll: a handful of lines, not one per poll.
    const warnings = logger.find(WARNING, 'warn').filter((r) => r.fields['during'] === 'wait');
    expect(warnings.length).toBeGreaterThanOrEqual(1);
    expect(warnings.length).toBeLessThanOrEqual(21);
    expect(warnings[0]!.fields).toMatchObject({ allocId: 'a1', taskName: 'web', err: expect.stringMatching(/EMFILE/) });
    expect(logger.find('exit status unknown')).toHaveLength(0);

    // The task ends while its record still cannot be read: still unknown, not an exit.
    recordExit(handle, 3);
    await clock.advance(5_000);
    expect(waiting.settled()).toBe(false);

    readers.faulty = false;
    await clock.advance(1_000);
    expect(waiting.settled()).toBe(true);
    await expect(waiting.promise).resolves.toMatchObject({ exitCode: 3, signal: null });
    expect(logger.find(RECOVERED, 'info')).toHaveLength(1);
  });

  it('recover() never reports an exit it cannot read: the task is kept as running, and wait() learns the truth later', async () => {
    const driver = newDriver();
    const handle = selfHandle(newTaskDir());
    recordExit(handle, 5);
    readers.faulty = true;

    const recovering = track(driver.recover(handle));
    await clock.advance(5_000);
    await expect(recovering.promise).resolves.toEqual({ running: true });
    expect(logger.find('could not tell whether the task still runs', 'warn')).toHaveLength(1);

    const waiting = track(driver.wait(handle));
    await clock.advance(3_000);
    expect(waiting.settled()).toBe(false);
    readers.faulty = false;
    await clock.advance(1_000);
    await expect(waiting.promise).resolves.toMatchObject({ exitCode: 5 });
  });

  it('recover() whose check fails for good (EACCES on /proc, not a passing fault) keeps the task too, never a dead task on a guess', async () => {
    const driver = newDriver();
    const handle = selfHandle(newTaskDir());
    readers.procDenied = true;
    const recovering = track(driver.recover(handle));
    await clock.advance(5_000);
    await expect(recovering.promise).resolves.toEqual({ running: true });
  });

  it('recover() that can read again before its grace is up answers what it finds', async () => {
    const driver = newDriver();
    const handle = selfHandle(newTaskDir());
    readers.faulty = true;
    const recovering = track(driver.recover(handle));
    await clock.advance(2_000);
    expect(recovering.settled()).toBe(false);
    readers.faulty = false;
    await clock.advance(1_000);
    await expect(recovering.promise).resolves.toEqual({ running: true });
    expect(logger.find('could not tell whether the task still runs')).toHaveLength(0);
  });

  it('adopt() says "unknown", not "nothing was started here", when the record cannot be read', () => {
    const driver = newDriver();
    const handle = selfHandle(newTaskDir());
    const record: ExecutorPidRecord = {
      version: 1,
      executorPid: handle.executorPid,
      executorStartTime: handle.executorStartTime,
      pid: handle.pid,
      startTime: handle.startTime,
      startedAt: 7,
    };
    writeJsonAtomic(executorPaths(handle.taskDir).pid, record);
    const task = { allocId: 'a1', taskName: 'web', taskDir: handle.taskDir };

    readers.faulty = true;
    expect(() => driver.adopt(task)).toThrow(TransientProbeError);
    readers.faulty = false;
    expect(driver.adopt(task)).toMatchObject({ pid: handle.pid, startTime: handle.startTime });
  });

  it('a damaged record is still logged and ignored, as before', () => {
    const driver = newDriver();
    const taskDir = newTaskDir();
    writeFileSync(executorPaths(taskDir).pid, '{ not json');
    expect(driver.adopt({ allocId: 'a1', taskName: 'web', taskDir })).toBeUndefined();
    expect(logger.find('ignoring an unreadable executor record', 'warn')).toHaveLength(1);
  });

  /** A stand-in task: a real process leading its own group that ignores SIGTERM, with no executor. */
  async function stubbornTask(): Promise<{ handle: TaskHandle; exited: Promise<NodeJS.Signals | null> }> {
    const taskDir = newTaskDir();
    // It says when its trap is in place: a SIGTERM before that would end it (a race under load).
    const ready = join(taskDir, 'trap-set');
    const child = spawn('/bin/sh', ['-c', `trap "" TERM; : > "${ready}"; while :; do sleep 0.05; done`], {
      detached: true,
      stdio: 'ignore',
    });
    children.push(child);
    const exited = new Promise<NodeJS.Signals | null>((r) => child.once('exit', (_code, signal) => r(signal)));
    const pid = child.pid!;
    const startTime = await until('the child to show in /proc', () => processStartTime(pid));
    await until('the child to set its trap', () => (existsSync(ready) ? true : undefined));
    return {
      handle: {
        version: 1,
        driver: 'exec',
        allocId: 'a1',
        taskName: 'web',
        taskDir,
        executorPid: pid,
        executorStartTime: startTime,
        pid,
        startTime,
        startedAt: 0,
      },
      exited,
    };
  }

  const signalled = () => logger.find('signalled task').map((r) => r.fields['signal']);

  it('stop() keeps trying to signal a task it cannot verify, gives it its full kill timeout from the delivery, and resolves on the real exit', async () => {
    const driver = newDriver();
    const { handle, exited } = await stubbornTask();

    readers.faulty = true;
    const stopping = track(driver.stop(handle, 'SIGTERM', 3_000));
    // Long past the kill timeout, but the SIGTERM has not reached the task: no SIGKILL either.
    await clock.advance(10_000);
    expect(stopping.settled()).toBe(false);
    expect(isSameProcess(handle.pid, handle.startTime)).toBe(true);
    expect(signalled()).toEqual([]);
    expect(logger.find('sending SIGKILL')).toHaveLength(0);

    // /proc can be read again (the records not yet, so the wait stays "unknown").
    readers.faulty = false;
    readers.recordsFaulty = true;
    await clock.advance(1_000);
    expect(signalled()).toEqual(['SIGTERM']);
    await clock.advance(2_999);
    expect(signalled()).toEqual(['SIGTERM']);
    await clock.advance(1);
    expect(logger.find('sending SIGKILL', 'warn')).toHaveLength(1);
    expect(signalled()).toEqual(['SIGTERM', 'SIGKILL']);
    // Reaped by this process (its parent): no zombie is left to read a status from.
    expect(await exited).toBe('SIGKILL');
    expect(stopping.settled()).toBe(false);

    readers.recordsFaulty = false;
    await clock.advance(1_000);
    const exit: ExitResult = await stopping.promise;
    // No executor recorded it and nothing is left to read: unknown, never a guess.
    expect(exit).toMatchObject({ exitCode: null, signal: null, error: expect.stringMatching(/unknown/) });
  });

  it('stop() of a task whose checks keep failing (not for a passing fault) still signals it and escalates instead of throwing', async () => {
    const driver = newDriver();
    const { handle, exited } = await stubbornTask();

    readers.procDenied = true;
    const stopping = track(driver.stop(handle, 'SIGTERM', 3_000));
    await clock.advance(5_000);
    expect(stopping.settled()).toBe(false);
    expect(signalled()).toEqual([]);

    readers.procDenied = false;
    await clock.advance(1_000);
    expect(signalled()).toEqual(['SIGTERM']);
    await clock.advance(3_000);
    expect(signalled()).toEqual(['SIGTERM', 'SIGKILL']);
    expect(await exited).toBe('SIGKILL');
    await clock.advance(1_000);
    await expect(stopping.promise).resolves.toMatchObject({ exitCode: null });
  });

  it('a start that times out only because the records cannot be read reads on and returns the handle, instead of orphaning the task', async () => {
    let reads = 0;
    let faulty = true;
    // The first read (is a previous run still there?) works; all later ones fail with EMFILE.
    const recordReader = (file: string) => {
      if (++reads > 1 && faulty) throw emfile(file);
      return readJsonFile(file);
    };
    const driver = newDriver({ executorPath: EXECUTOR, startTimeout: 10_000, recordReader });
    const taskDir = newTaskDir();
    const starting = track(
      driver.start({ allocId: 'a1', taskName: 'web', taskDir, command: '/bin/sh', args: ['-c', 'sleep 30'], env: {} }),
    );
    const pidFile = executorPaths(taskDir).pid;
    await until('the executor to record the running task', () => existsSync(pidFile));
    const record = readJsonFile<ExecutorPidRecord>(pidFile)!;
    try {
      await clock.advance(60_000);
      expect(starting.settled()).toBe(false);
      expect(isSameProcess(record.pid, record.startTime)).toBe(true);
      expect(isSameProcess(record.executorPid, record.executorStartTime)).toBe(true);

      faulty = false;
      await clock.advance(1_000);
      await expect(starting.promise).resolves.toMatchObject({
        pid: record.pid,
        startTime: record.startTime,
        executorPid: record.executorPid,
      });
    } finally {
      for (const pid of [record.pid, record.executorPid]) {
        try {
          process.kill(pid === record.pid ? -pid : pid, 'SIGKILL');
        } catch {
          // gone already
        }
      }
    }
  });
});

describe('ExecDriver under faults of the agent itself (real executor)', () => {
  let logger: MemoryLogger;
  let readers: FaultyReaders;
  let roots: string[];
  let handles: TaskHandle[];
  let drivers: ExecDriver[];

  beforeAll(() => {
    if (!existsSync(EXECUTOR))
      throw new Error(`${EXECUTOR} is missing: build @csiplug/driver first (tsc -p tsconfig.lib.json; the test target does)`);
    const built = statSync(EXECUTOR).mtimeMs;
    for (const src of ['executor.ts', 'executor-protocol.ts', 'proc.ts']) {
      if (statSync(join(__dirname, src)).mtimeMs > built + 1000)
        throw new Error(`${EXECUTOR} is older than src/${src}: rebuild @csiplug/driver (tsc -p tsconfig.lib.json)`);
    }
  });

  beforeEach(() => {
    logger = new MemoryLogger();
    readers = new FaultyReaders();
    roots = [];
    handles = [];
    drivers = [];
  });

  afterEach(() => {
    for (const d of drivers) d.dispose();
    for (const h of handles) {
      for (const [pid, startTime] of [
        [h.pid, h.startTime],
        [h.executorPid, h.executorStartTime],
      ] as const) {
        const stat = readProcStat(pid);
        if (!stat || stat.startTime !== startTime) continue;
        try {
          process.kill(stat.pgrp === pid ? -pid : pid, 'SIGKILL');
        } catch {
          // gone already
        }
      }
    }
    for (const root of roots) rmSync(root, { recursive: true, force: true });
  });

  it('a task checked under EMFILE is still running, its wait does not end, and its real exit code comes once reads work', async () => {
    const driver = new ExecDriver(new RealClock(), logger, {
      executorPath: EXECUTOR,
      pollInterval: 50,
      procReader: readers.procReader,
      recordReader: readers.recordReader,
    });
    drivers.push(driver);
    const root = mkdtempSync(join(tmpdir(), 'csiplug-faults-'));
    roots.push(root);
    const taskDir = join(root, 'web');
    const handle = await driver.start({
      allocId: 'a1',
      taskName: 'web',
      taskDir,
      command: '/bin/sh',
      args: ['-c', 'echo ready; while [ ! -f go ]; do sleep 0.05; done; exit 7'],
      env: {},
    });
    handles.push(handle);
    await until(
      'ready',
      () => existsSync(join(taskDir, 'stdout.log')) && readFileSync(join(taskDir, 'stdout.log'), 'utf8').includes('ready'),
    );

    readers.faulty = true;
    const waiting = track(driver.wait(handle));
    await until('a few failed checks', () => readers.faults >= 10);
    expect(driver.isRunning(handle)).toBe(true);
    expect(waiting.settled()).toBe(false);

    // The task really exits while the driver still cannot read anything.
    writeFileSync(join(taskDir, 'go'), '');
    await until('the exit record', () => existsSync(executorPaths(taskDir).exit));
    const seen = readers.faults;
    await until('more failed checks after the exit', () => readers.faults >= seen + 5);
    expect(waiting.settled()).toBe(false);
    expect(logger.find('exit status unknown')).toHaveLength(0);
    // At most one line per 30 s on the real clock: one, or two on a slow run.
    const warned = logger.find(WARNING, 'warn').filter((r) => r.fields['during'] === 'wait').length;
    expect(warned).toBeGreaterThanOrEqual(1);
    expect(warned).toBeLessThanOrEqual(2);

    readers.faulty = false;
    const exit = await waiting.promise;
    expect(exit).toMatchObject({ exitCode: 7, signal: null });
    expect(exit.error).toBeUndefined();
    expect(logger.find(RECOVERED, 'info').length).toBeGreaterThanOrEqual(1);
  });
});
