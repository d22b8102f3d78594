// The exec driver against real processes: tasks started through the
// compiled executor (dist/executor.js: the test target builds it
// first), stopped, recovered by a new driver as after an agent restart, and
// found out when their handle or their executor is not what it should be.
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { MemoryLogger, RealClock, ShutdownError, registerCore } from '@csiplug/core';
import { container as rootContainer } from 'tsyringe';
import { DEFAULT_EXECUTOR_PATH, ExecDriver, type ExecDriverOptions } from '../src/exec-driver';
import type { TaskHandle } from '../src/driver';
import { TaskAlreadyRunningError, TaskStartError } from '../src/errors';
import { executorPaths } from '../src/executor-protocol';
import { isSameProcess, readProcStat } from '../src/proc';
import { registerExecDriver } from '../src/register';
import { ITaskDriver } from '../src/tokens';

const DIST = resolve(__dirname, '../dist');
const EXECUTOR = join(DIST, 'executor.js');

/** Waits for a real process to do something (not for a timer): checks often, gives up after `ms`. */
async function until<T>(what: string, check: () => T | undefined | false, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function readIfExists(file: string): string {
  return existsSync(file) ? readFileSync(file, 'utf8') : '';
}

/** Kills by pid, only if the pid still is the process we started (and its group, if it leads one). */
function killIfSame(pid: number, startTime: string): void {
  const stat = readProcStat(pid);
  if (!stat || stat.startTime !== startTime) return;
  try {
    process.kill(stat.pgrp === pid ? -pid : pid, 'SIGKILL');
  } catch {
    // gone already
  }
}

/** A task that runs until `go` appears in its task dir, then exits with `code`. */
const untilGo = (code: number) => `echo ready; while [ ! -f go ]; do sleep 0.05; done; exit ${code}`;

describe('ExecDriver with real processes', () => {
  let logger: MemoryLogger;
  let roots: string[];
  let handles: TaskHandle[];
  let drivers: ExecDriver[];

  beforeAll(() => {
    if (!existsSync(EXECUTOR))
      throw new Error(`${EXECUTOR} is missing: build @csiplug/driver first (tsc -p tsconfig.lib.json; the test target does)`);
    const built = statSync(EXECUTOR).mtimeMs;
    for (const src of ['executor.ts', 'executor-protocol.ts', 'proc.ts', 'rotating-log.ts', 'task-logs.ts']) {
      if (statSync(resolve(__dirname, '../src', src)).mtimeMs > built + 1000)
        throw new Error(`${EXECUTOR} is older than src/${src}: rebuild @csiplug/driver (tsc -p tsconfig.lib.json)`);
    }
  });

  beforeEach(() => {
    logger = new MemoryLogger();
    roots = [];
    handles = [];
    drivers = [];
  });

  afterEach(() => {
    for (const d of drivers) d.dispose();
    for (const h of handles) {
      killIfSame(h.pid, h.startTime);
      killIfSame(h.executorPid, h.executorStartTime);
    }
    for (const root of roots) rmSync(root, { recursive: true, force: true });
  });

  function newDriver(options: ExecDriverOptions = {}): ExecDriver {
    const driver = new ExecDriver(new RealClock(), logger, { executorPath: EXECUTOR, pollInterval: 100, ...options });
    drivers.push(driver);
    return driver;
  }

  function newTaskDir(): string {
    const root = mkdtempSync(join(tmpdir(), 'csiplug-'));
    roots.push(root);
    return join(root, 'allocs', 'a1', 'web');
  }

  async function start(driver: ExecDriver, script: string, opts: { env?: Record<string, string>; taskDir?: string } = {}) {
    const taskDir = opts.taskDir ?? newTaskDir();
    const handle = await driver.start({
      allocId: 'a1',
      taskName: 'web',
      taskDir,
      command: '/bin/sh',
      args: ['-c', script],
      env: opts.env ?? {},
    });
    handles.push(handle);
    const stdout = () => readIfExists(join(taskDir, 'stdout.log'));
    return { handle, taskDir, stdout, stderr: () => readIfExists(join(taskDir, 'stderr.log')) };
  }

  it('runs a task in its task dir with its env, logging stdout and stderr to files', async () => {
    const driver = newDriver();
    const { handle, taskDir, stdout, stderr } = await start(driver, 'echo "hi $FOO"; pwd; echo oops >&2; echo ready; sleep 30', {
      env: { FOO: 'bar baz' },
    });

    expect(handle).toMatchObject({ version: 1, driver: 'exec', allocId: 'a1', taskName: 'web', taskDir });
    expect(handle.startTime).toMatch(/^\d+$/);
    expect(handle.executorStartTime).toMatch(/^\d+$/);
    await until('the task to print ready', () => stdout().includes('ready'));
    expect(stdout()).toBe(`hi bar baz\n${taskDir}\nready\n`);
    expect(stderr()).toBe('oops\n');
    expect(driver.isRunning(handle)).toBe(true);
    expect(await driver.recover(handle)).toEqual({ running: true });
    // An agent that never saved the handle finds the same task from the executor's record.
    const other = newDriver();
    expect(other.adopt({ allocId: 'a1', taskName: 'web', taskDir })).toMatchObject({
      pid: handle.pid,
      startTime: handle.startTime,
      executorPid: handle.executorPid,
    });
    expect(other.adopt({ allocId: 'a1', taskName: 'web', taskDir: `${taskDir}-never-started` })).toBeUndefined();
    // The task leads its own session, apart from the agent and the executor.
    const stat = readProcStat(handle.pid)!;
    expect(stat.session).toBe(handle.pid);
    expect(stat.ppid).toBe(handle.executorPid);
  });

  it('signalTask sends a signal the task handles and leaves it running; a task that has exited is not signalled', async () => {
    const driver = newDriver();
    const { handle, stdout } = await start(driver, 'trap "echo got-hup" HUP; echo ready; while [ ! -f go ]; do sleep 0.05; done');
    await until('the task to print ready', () => stdout().includes('ready'));
    await driver.signalTask(handle, 'SIGHUP');
    await until('the task to report the signal', () => stdout().includes('got-hup'));
    expect(driver.isRunning(handle)).toBe(true);
    writeFileSync(join(handle.taskDir, 'go'), '');
    expect(await driver.wait(handle)).toMatchObject({ exitCode: 0 });
    await expect(driver.signalTask(handle, 'SIGHUP')).rejects.toThrow(/not running/);
    await expect(driver.signalTask(handle, 'SIGNOPE' as NodeJS.Signals)).rejects.toThrow(/unknown signal "SIGNOPE"/);
  });

  it('stops a task with its kill signal, its children with it, and the executor exits', async () => {
    const driver = newDriver();
    const { handle, stdout } = await start(driver, 'sleep 30 & echo "child $!"; echo ready; wait');
    const childPid = Number(await until('the child pid', () => /child (\d+)/.exec(stdout())?.[1]));
    await until('ready', () => stdout().includes('ready'));
    const childStart = readProcStat(childPid)!.startTime;

    const exit = await driver.stop(handle, 'SIGTERM', 5_000);
    expect(exit).toMatchObject({ exitCode: null, signal: 'SIGTERM' });
    expect(exit.error).toBeUndefined();
    expect(driver.isRunning(handle)).toBe(false);
    await until('the child to go', () => !isSameProcess(childPid, childStart));
    await until('the executor to exit', () => !isSameProcess(handle.executorPid, handle.executorStartTime));
    expect(logger.find('sending SIGKILL')).toHaveLength(0);

    // Stopping again, waiting and recovering all report the same end.
    expect(await driver.stop(handle, 'SIGTERM', 5_000)).toEqual(exit);
    expect(await driver.wait(handle)).toEqual(exit);
    expect(await driver.recover(handle)).toEqual({ running: false, exit });
  });

  it('SIGKILLs a task that ignores its kill signal once the kill timeout has passed', async () => {
    const driver = newDriver();
    const { handle, stdout } = await start(driver, 'trap "" TERM; echo ready; sleep 30');
    await until('the trap to be set', () => stdout().includes('ready'));

    const exit = await driver.stop(handle, 'SIGTERM', 300);
    expect(exit).toMatchObject({ exitCode: null, signal: 'SIGKILL' });
    expect(logger.find('sending SIGKILL', 'warn')).toHaveLength(1);
  });

  it('reports the exit code of a task that exits on its own', async () => {
    const driver = newDriver();
    const { handle } = await start(driver, 'exit 3');
    const exit = await driver.wait(handle);
    expect(exit).toMatchObject({ exitCode: 3, signal: null });
    expect(exit.error).toBeUndefined();
    expect(await driver.recover(handle)).toEqual({ running: false, exit });
  });

  it('appends to the logs across restarts in the same task dir', async () => {
    const driver = newDriver();
    const first = await start(driver, 'echo one; echo e1 >&2');
    await driver.wait(first.handle);
    const second = await start(driver, 'echo two; echo e2 >&2', { taskDir: first.taskDir });
    expect(await driver.wait(second.handle)).toMatchObject({ exitCode: 0 });
    expect(second.stdout()).toBe('one\ntwo\n');
    expect(second.stderr()).toBe('e1\ne2\n');
    // The first run's handle does not take the second run's records for its own.
    expect(second.handle.pid).not.toBe(first.handle.pid);
  });

  it('refuses to start a task in a task dir whose task still runs', async () => {
    const driver = newDriver();
    const { taskDir } = await start(driver, 'sleep 30');
    await expect(start(driver, 'true', { taskDir })).rejects.toBeInstanceOf(TaskAlreadyRunningError);
  });

  it('fails clearly when the command cannot be run', async () => {
    const driver = newDriver();
    const taskDir = newTaskDir();
    const started = driver.start({ allocId: 'a1', taskName: 'web', taskDir, command: '/no/such/command', args: [], env: {} });
    await expect(started).rejects.toBeInstanceOf(TaskStartError);
    await expect(started).rejects.toThrow(/could not start task "web" of alloc a1: .*ENOENT/);
  });

  it('keeps task and executor logs private to the agent (0600), tightening older ones', async () => {
    const driver = newDriver();
    const taskDir = newTaskDir();
    mkdirSync(executorPaths(taskDir).dir, { recursive: true });
    for (const file of [join(taskDir, 'stdout.log'), executorPaths(taskDir).log]) {
      writeFileSync(file, '', { mode: 0o644 });
      chmodSync(file, 0o644);
    }
    const { handle } = await start(driver, 'echo secret; echo oops >&2', { taskDir });
    await driver.wait(handle);
    for (const file of [join(taskDir, 'stdout.log'), join(taskDir, 'stderr.log'), executorPaths(taskDir).log]) {
      expect({ file, mode: (statSync(file).mode & 0o777).toString(8) }).toEqual({ file, mode: '600' });
    }
  });

  it('keeps the reason as the cause when the executor cannot be run at all', async () => {
    const driver = newDriver({ nodePath: '/no/such/node' });
    const started = start(driver, 'true');
    await expect(started).rejects.toBeInstanceOf(TaskStartError);
    await expect(started.catch((err: Error) => (err.cause as NodeJS.ErrnoException).code)).resolves.toBe('ENOENT');
  });

  it('runs the executor of this package (dist/executor.js) when given no executorPath', async () => {
    expect(DEFAULT_EXECUTOR_PATH).toBe(EXECUTOR);
    const driver = newDriver({ executorPath: undefined });
    const { handle } = await start(driver, 'exit 6');
    expect(await driver.wait(handle)).toMatchObject({ exitCode: 6, signal: null });
  });

  it('fails clearly when the executor script is missing', async () => {
    const driver = newDriver({ executorPath: '/no/such/executor.js' });
    await expect(start(driver, 'true')).rejects.toThrow(/executor script \/no\/such\/executor.js does not exist/);
  });

  it('survives an agent restart: dispose kills nothing, a new driver recovers and waits', async () => {
    const first = newDriver();
    const { handle, taskDir, stdout } = await start(first, untilGo(7));
    await until('ready', () => stdout().includes('ready'));
    const waiting = first.wait(handle);
    first.dispose();
    await expect(waiting).rejects.toBeInstanceOf(ShutdownError);
    expect(isSameProcess(handle.pid, handle.startTime)).toBe(true);
    expect(isSameProcess(handle.executorPid, handle.executorStartTime)).toBe(true);

    const second = newDriver();
    expect(await second.recover(handle)).toEqual({ running: true });
    const exited = second.wait(handle);
    writeFileSync(join(taskDir, 'go'), '');
    const exit = await exited;
    expect(exit).toMatchObject({ exitCode: 7, signal: null });
    expect(exit.error).toBeUndefined();
  });

  it('reports the exit code of a task that exited while no driver was there', async () => {
    const first = newDriver();
    const { handle, taskDir, stdout } = await start(first, untilGo(5));
    await until('ready', () => stdout().includes('ready'));
    first.dispose();
    writeFileSync(join(taskDir, 'go'), '');
    await until('the exit record', () => existsSync(executorPaths(taskDir).exit));

    const second = newDriver();
    const recovered = await second.recover(handle);
    expect(recovered).toMatchObject({ running: false, exit: { exitCode: 5, signal: null } });
    expect(recovered.running === false && recovered.exit.error).toBeUndefined();
  });

  it('never takes a handle with the right pid but another start time for the task, nor signals it', async () => {
    const driver = newDriver();
    const { handle } = await start(driver, 'sleep 30');
    const forged: TaskHandle = { ...handle, startTime: String(Number(handle.startTime) + 1) };

    expect(driver.isRunning(forged)).toBe(false);
    const recovered = await driver.recover(forged);
    expect(recovered.running).toBe(false);
    expect(recovered.running === false && recovered.exit.error).toMatch(/unknown.*does not run it/);
    const stopped = await driver.stop(forged, 'SIGKILL', 0);
    expect(stopped.error).toMatch(/unknown/);
    expect(await driver.wait(forged)).toMatchObject({ exitCode: null, error: expect.stringMatching(/unknown/) });

    // The real task was never touched.
    expect(driver.isRunning(handle)).toBe(true);
    expect(logger.find('signalled task')).toHaveLength(0);
  });

  it("rotates a task's logs as its logs limits say (Nomad's max_files, max_file_size): a task writing without end keeps max_files files of max_file_size MB", async () => {
    const driver = newDriver();
    const taskDir = newTaskDir();
    mkdirSync(taskDir, { recursive: true });
    // As fast as it can, on both streams.
    const handle = await driver.start({
      allocId: 'a1',
      taskName: 'web',
      taskDir,
      command: '/bin/sh',
      args: ['-c', 'yes out & exec yes err >&2'],
      env: {},
      logs: { maxFiles: 3, maxFileSizeMB: 1 },
    });
    handles.push(handle);
    // Rotated past the oldest kept file more than once: the current file became .1 after .2 was there, so the first .2 was removed.
    const firstOldest = await until(
      'stdout.log.2',
      () => (existsSync(join(taskDir, 'stdout.log.2')) ? statSync(join(taskDir, 'stdout.log.2')).ino : undefined),
      60_000,
    );
    await until(
      'stdout.log.2 replaced',
      () => existsSync(join(taskDir, 'stdout.log.2')) && statSync(join(taskDir, 'stdout.log.2')).ino !== firstOldest,
      60_000,
    );
    await until('stderr.log.2', () => existsSync(join(taskDir, 'stderr.log.2')), 60_000);
    await driver.stop(handle, 'SIGKILL', 1_000);
    await driver.wait(handle);
    const logs = readdirSync(taskDir)
      .filter((f) => /^std(out|err)\.log/.test(f))
      .sort();
    expect(logs).toEqual(['stderr.log', 'stderr.log.1', 'stderr.log.2', 'stdout.log', 'stdout.log.1', 'stdout.log.2']);
    for (const f of logs) expect(statSync(join(taskDir, f)).size).toBeLessThanOrEqual(1024 * 1024);
    // A rotated file is full, and whole lines: nothing was lost between two files.
    expect(statSync(join(taskDir, 'stdout.log.1')).size).toBe(1024 * 1024);
    expect(
      readFileSync(join(taskDir, 'stdout.log.1'), 'utf8')
        .split('\n')
        .slice(0, -1)
        .every((l) => l === 'out'),
    ).toBe(true);
  });

  it('keeps the task running when its executor is SIGKILLed, and still learns when it ends', async () => {
    const first = newDriver();
    const { handle, taskDir, stdout } = await start(first, untilGo(4));
    await until('ready', () => stdout().includes('ready'));
    process.kill(handle.executorPid, 'SIGKILL');
    await until('the executor to die', () => !isSameProcess(handle.executorPid, handle.executorStartTime));
    expect(first.isRunning(handle)).toBe(true);
    first.dispose();

    const second = newDriver();
    expect(await second.recover(handle)).toEqual({ running: true });
    const exited = second.wait(handle);
    writeFileSync(join(taskDir, 'go'), '');
    const exit = await exited;
    // Nobody recorded the status. If the orphan is still unreaped we read its
    // status from /proc; otherwise it is unknown, and the driver says so.
    if (exit.error !== undefined) {
      expect(exit).toMatchObject({ exitCode: null, signal: null });
      expect(exit.error).toMatch(/exit status of task "web" of alloc a1 is unknown.*executor .* ended without recording/);
    } else {
      expect(exit).toMatchObject({ exitCode: 4, signal: null });
    }
    expect(second.isRunning(handle)).toBe(false);
  });

  it('passes a SIGTERM sent to the executor on to the task, and records the exit', async () => {
    const driver = newDriver();
    const { handle, stdout } = await start(driver, 'echo ready; sleep 30');
    await until('ready', () => stdout().includes('ready'));
    process.kill(handle.executorPid, 'SIGHUP'); // not for the task, and not the end of the executor
    process.kill(handle.executorPid, 'SIGTERM');
    expect(await driver.wait(handle)).toMatchObject({ exitCode: null, signal: 'SIGTERM' });
  });

  it('is bound to ITaskDriver by registerExecDriver', async () => {
    const c = rootContainer.createChildContainer();
    registerCore(c, { clock: new RealClock(), logger });
    registerExecDriver(c, { executorPath: EXECUTOR });
    const driver = c.resolve<ExecDriver>(ITaskDriver);
    drivers.push(driver);
    expect(driver).toBeInstanceOf(ExecDriver);
    const { handle } = await start(driver, 'exit 0');
    expect(await driver.wait(handle)).toMatchObject({ exitCode: 0 });
  });
});
