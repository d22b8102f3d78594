// The FakeDriver held to the TaskDriver contract (its "tasks" are scripted
// through onDidStart: command `exit <code>` ends at once, `run` runs until
// stopped), then the knobs the runner specs drive it by.
import { TransientProbeError } from '../errors';
import { describeTaskDriverContract } from './conformance';
import { FakeDriver } from './fake-driver';

describeTaskDriverContract('FakeDriver', () => {
  const driver = new FakeDriver();
  driver.onDidStart(({ config, handle }) => {
    // Ends after start() has resolved, as a real short-lived process would.
    if (config.command === 'exit') queueMicrotask(() => driver.exit(handle.pid, Number(config.args[0])));
  });
  return {
    driver,
    exitsWith: (code) => ({ command: 'exit', args: [String(code)] }),
    runsUntilSignalled: () => ({ command: 'run', args: [] }),
  };
});

describe('FakeDriver', () => {
  const config = (taskDir = '/tmp/fake/web') => ({ allocId: 'a1', taskName: 'web', taskDir, command: '/bin/app', args: [], env: {} });
  const emfile = () => Object.assign(new Error('EMFILE: too many open files'), { code: 'EMFILE' });

  it('records every start and stop, and hands out one pid per start', async () => {
    const driver = new FakeDriver();
    const first = await driver.start(config());
    const second = await driver.start(config('/tmp/fake/other'));
    expect([first.pid, second.pid]).toEqual([100, 101]);
    await driver.stop(first, 'SIGINT', 0);
    expect(driver.started.map((c) => c.taskDir)).toEqual(['/tmp/fake/web', '/tmp/fake/other']);
    expect(driver.stops).toEqual(['100 SIGINT']);
    expect(driver.isRunning(second)).toBe(true);
  });

  it('records a signal sent to a running task, which keeps running; a task that is not running cannot be signalled', async () => {
    const driver = new FakeDriver();
    const handle = await driver.start(config());
    await driver.signalTask(handle, 'SIGHUP');
    expect(driver.signals).toEqual(['100 SIGHUP']);
    expect(driver.isRunning(handle)).toBe(true);
    driver.exit(100, 0);
    await expect(driver.signalTask(handle, 'SIGHUP')).rejects.toThrow(/not running/);
  });

  it('fails the next calls with the injected errors, one per call, then works again', async () => {
    const driver = new FakeDriver();
    driver.startFailures.push(emfile());
    await expect(driver.start(config())).rejects.toMatchObject({ code: 'EMFILE' });
    const handle = await driver.start(config());
    expect(driver.started).toHaveLength(2);

    driver.waitFailures.push(emfile());
    await expect(driver.wait(handle)).rejects.toMatchObject({ code: 'EMFILE' });
    const waiting = driver.wait(handle);
    driver.exit(handle.pid, 4);
    expect(await waiting).toMatchObject({ exitCode: 4 });
    expect(driver.waits).toBe(2);

    const probe = new TransientProbeError('a1', 'web', 'EMFILE', emfile());
    driver.adoptFailures.push(probe);
    expect(() => driver.adopt(config())).toThrow(probe);
    expect(driver.adopt(config())).toEqual(handle);
    expect(driver.adopts).toBe(2);
  });

  it('answers recover() with recoverGate, then recoverAs, before what it knows', async () => {
    const driver = new FakeDriver();
    const handle = await driver.start(config());
    const gone = { running: false as const, exit: { exitCode: 2, signal: null, finishedAt: 0 } };
    driver.recoverAs = gone;
    expect(await driver.recover(handle)).toEqual(gone);
    let answer!: (r: { running: true }) => void;
    driver.recoverGate = new Promise((r) => (answer = r));
    const pending = driver.recover(handle);
    answer({ running: true });
    expect(await pending).toEqual({ running: true });
  });

  it('adopts the handle set in adoptable as a running task it can wait for and stop', async () => {
    const driver = new FakeDriver();
    const found = {
      version: 1 as const,
      driver: 'exec' as const,
      allocId: 'a1',
      taskName: 'web',
      taskDir: '/tmp/fake/web',
      executorPid: 1500,
      executorStartTime: '1',
      pid: 500,
      startTime: '1',
      startedAt: 0,
    };
    expect(driver.isRunning(found)).toBe(false);
    driver.adoptable = found;
    expect(driver.adopt(config())).toBe(found);
    expect(driver.isRunning(found)).toBe(true);
    expect(await driver.stop(found, 'SIGTERM', 0)).toMatchObject({ signal: 'SIGTERM' });
    expect(driver.stops).toEqual(['500 SIGTERM']);
  });

  it('with stopExits off, a stop resolves only when the test ends the task', async () => {
    const driver = new FakeDriver();
    driver.stopExits = false;
    const handle = await driver.start(config());
    let stopped = false;
    const stopping = driver.stop(handle, 'SIGTERM', 0).then((e) => ((stopped = true), e));
    await Promise.resolve();
    expect(stopped).toBe(false);
    expect(driver.isRunning(handle)).toBe(true);
    driver.exit(handle.pid, null, 'SIGKILL');
    expect(await stopping).toMatchObject({ exitCode: null, signal: 'SIGKILL' });
  });

  it('refuses to end a task it does not run, naming the pid', async () => {
    const driver = new FakeDriver();
    const handle = await driver.start(config());
    driver.exit(handle.pid, 0);
    expect(() => driver.exit(handle.pid, 0)).toThrow(/no running task has pid 100 \(running: none\)/);
    expect(() => driver.exit(7, 0)).toThrow(/pid 7/);
  });
});
