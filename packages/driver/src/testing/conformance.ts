// The TaskDriver contract as jest tests: what every driver does the same
// way, so that the runners above it can be tested against the FakeDriver and
// trusted with the exec driver. `describeTaskDriverContract(name, make)`
// registers the tests in the calling test file; `make` gives a fresh driver
// and says how that driver runs the two kinds of task the tests need.
//
// Jest's functions come from @jest/globals, loaded when the suite is
// described rather than when this file is imported: the testing entry (with
// FakeDriver) must load outside jest too. @jest/globals is an optional peer
// dependency of @csiplug/driver, needed only by this suite.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ShutdownError, ValidationError } from '@csiplug/core';
import type * as JestGlobals from '@jest/globals';
import type { DriverTaskConfig, TaskDriver, TaskHandle } from '../driver';

/** The command and args that run one kind of task on the driver under test. */
export type ContractProgram = Pick<DriverTaskConfig, 'command' | 'args'>;

export interface TaskDriverContractSubject {
  /** A fresh driver for one test; the suite disposes it after the test. */
  readonly driver: TaskDriver;
  /** A task that exits by itself, soon after it starts, with exit code `code`. */
  exitsWith(code: number): ContractProgram;
  /** A task that runs until a signal ends it (and does not catch SIGTERM). */
  runsUntilSignalled(): ContractProgram;
  /** Ends, without the driver, whatever the test left running (after each test, once the driver is disposed). */
  cleanup?(handles: readonly TaskHandle[]): void | Promise<void>;
}

/** The ids every contract task is started with. */
const ALLOC_ID = 'contract-alloc';
const TASK_NAME = 'contract-task';

/** ms a stop waits after SIGTERM before SIGKILL: far longer than a task that does not catch SIGTERM needs. */
const KILL_TIMEOUT = 10_000;

export function describeTaskDriverContract(
  name: string,
  makeSubject: () => TaskDriverContractSubject | Promise<TaskDriverContractSubject>,
): void {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { afterEach, beforeEach, describe, expect, it } = require('@jest/globals') as typeof JestGlobals;

  describe(`${name} keeps the TaskDriver contract`, () => {
    let subject: TaskDriverContractSubject;
    let driver: TaskDriver;
    let root: string;
    let handles: TaskHandle[];
    let dirs = 0;

    beforeEach(async () => {
      subject = await makeSubject();
      driver = subject.driver;
      root = mkdtempSync(join(tmpdir(), 'csiplug-driver-contract-'));
      handles = [];
    });

    afterEach(async () => {
      driver.dispose();
      await subject.cleanup?.(handles);
      rmSync(root, { recursive: true, force: true });
    });

    const config = (program: ContractProgram, over: Partial<DriverTaskConfig> = {}): DriverTaskConfig => ({
      allocId: ALLOC_ID,
      taskName: TASK_NAME,
      taskDir: join(root, `task-${++dirs}`),
      env: {},
      ...program,
      ...over,
    });

    async function start(program: ContractProgram): Promise<TaskHandle> {
      const handle = await driver.start(config(program));
      handles.push(handle);
      return handle;
    }

    it('start resolves with a handle naming the task once it runs; isRunning and recover say it runs', async () => {
      const cfg = config(subject.runsUntilSignalled());
      const handle = await driver.start(cfg);
      handles.push(handle);
      expect(handle).toMatchObject({ version: 1, allocId: ALLOC_ID, taskName: TASK_NAME, taskDir: cfg.taskDir });
      expect(Number.isInteger(handle.pid) && handle.pid > 1).toBe(true);
      expect(typeof handle.startTime).toBe('string');
      expect(driver.isRunning(handle)).toBe(true);
      expect(await driver.recover(handle)).toEqual({ running: true });
    });

    it('wait resolves with the exit code of a task that exits by itself, the same for every wait, and recover reports that exit', async () => {
      const handle = await start(subject.exitsWith(3));
      const exit = await driver.wait(handle);
      expect(exit).toMatchObject({ exitCode: 3, signal: null });
      expect(exit.error).toBeUndefined();
      expect(await driver.wait(handle)).toEqual(exit);
      expect(driver.isRunning(handle)).toBe(false);
      expect(await driver.recover(handle)).toEqual({ running: false, exit });
    });

    it('stop ends a running task with the signal and resolves with that exit; a wait in flight resolves with the same', async () => {
      const handle = await start(subject.runsUntilSignalled());
      const waiting = driver.wait(handle);
      const exit = await driver.stop(handle, 'SIGTERM', KILL_TIMEOUT);
      expect(exit).toMatchObject({ exitCode: null, signal: 'SIGTERM' });
      expect(await waiting).toEqual(exit);
      expect(driver.isRunning(handle)).toBe(false);
    });

    it('a second stop resolves with the exit of the first', async () => {
      const handle = await start(subject.runsUntilSignalled());
      const first = await driver.stop(handle, 'SIGTERM', KILL_TIMEOUT);
      expect(await driver.stop(handle, 'SIGTERM', KILL_TIMEOUT)).toEqual(first);
      expect(await driver.stop(handle, 'SIGKILL', 0)).toEqual(first);
    });

    it('stop of a task that has exited already resolves with how it exited', async () => {
      const handle = await start(subject.exitsWith(0));
      const exit = await driver.wait(handle);
      expect(await driver.stop(handle, 'SIGTERM', KILL_TIMEOUT)).toEqual(exit);
    });

    it('a handle of no task it runs (right pid, other start time) is not running: recover, wait and stop report an unknown exit and leave the real task alone', async () => {
      const handle = await start(subject.runsUntilSignalled());
      const unknown: TaskHandle = { ...handle, startTime: String(Number(handle.startTime) + 1) };
      const unknownExit = { exitCode: null, signal: null, error: expect.stringMatching(/unknown/) };
      expect(driver.isRunning(unknown)).toBe(false);
      const recovered = await driver.recover(unknown);
      expect(recovered).toMatchObject({ running: false, exit: unknownExit });
      expect(await driver.wait(unknown)).toMatchObject(unknownExit);
      expect(await driver.stop(unknown, 'SIGKILL', 0)).toMatchObject(unknownExit);
      expect(driver.isRunning(handle)).toBe(true);
      expect(await driver.recover(handle)).toEqual({ running: true });
    });

    it('adopt finds the task started in a task dir, and nothing in a dir where nothing was started', async () => {
      const handle = await start(subject.runsUntilSignalled());
      const adopted = driver.adopt({ allocId: ALLOC_ID, taskName: TASK_NAME, taskDir: handle.taskDir });
      expect(adopted).toMatchObject({
        allocId: ALLOC_ID,
        taskName: TASK_NAME,
        taskDir: handle.taskDir,
        pid: handle.pid,
        startTime: handle.startTime,
      });
      expect(driver.adopt({ allocId: ALLOC_ID, taskName: TASK_NAME, taskDir: join(root, 'never-started') })).toBeUndefined();
    });

    it('start refuses a config it cannot run with a ValidationError naming the field', async () => {
      const refused = driver.start(config(subject.runsUntilSignalled(), { taskDir: 'relative/task-dir' }));
      await expect(refused).rejects.toBeInstanceOf(ValidationError);
      await expect(refused).rejects.toMatchObject({ field: 'taskDir' });
      await expect(driver.start(config({ command: '', args: [] }))).rejects.toMatchObject({ field: 'config.command' });
      await expect(driver.start(config(subject.runsUntilSignalled(), { env: { 'A=B': 'x' } }))).rejects.toMatchObject({ field: 'env' });
    });

    it('dispose ends a wait in flight with a ShutdownError, leaves the task running, and refuses later calls', async () => {
      const handle = await start(subject.runsUntilSignalled());
      const waiting = driver.wait(handle);
      driver.dispose();
      await expect(waiting).rejects.toBeInstanceOf(ShutdownError);
      expect(driver.isRunning(handle)).toBe(true);
      // Sync throw or rejection: either way the call fails with a ShutdownError.
      await expect(Promise.resolve().then(() => driver.wait(handle))).rejects.toBeInstanceOf(ShutdownError);
      await expect(Promise.resolve().then(() => driver.start(config(subject.exitsWith(0))))).rejects.toBeInstanceOf(ShutdownError);
      driver.dispose();
    });
  });
}
