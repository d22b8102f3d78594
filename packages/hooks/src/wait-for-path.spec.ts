// waitForPath when the directory watch fails: a fault of the agent itself
// (out of inotify instances or file descriptors) says nothing about the
// file, so the wait goes on by polling instead of failing.
import { MemoryLogger, TimeoutError } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { EventEmitter } from 'events';
import { WAIT_FOR_PATH_POLL_MS, waitForPath } from './wait-for-path';

const emfile = () => Object.assign(new Error('EMFILE: too many open files, watch'), { code: 'EMFILE' });

describe('waitForPath', () => {
  let dir: string;
  let clock: FakeClock;
  let logger: MemoryLogger;

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-wait-'));
    clock = new FakeClock(0);
    logger = new MemoryLogger();
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  function track(p: Promise<void>): { settled: () => boolean; promise: Promise<void> } {
    let done = false;
    p.then(
      () => (done = true),
      () => (done = true),
    );
    return { settled: () => done, promise: p };
  }

  it('a watch that cannot be set up (EMFILE) falls back to polling, and sees the file appear', async () => {
    const file = path.join(dir, 'csi.sock');
    const waiting = track(
      waitForPath(file, {
        clock,
        timeoutMs: 60_000,
        logger,
        watch: () => {
          throw emfile();
        },
      }),
    );
    await clock.advance(WAIT_FOR_PATH_POLL_MS * 3);
    expect(waiting.settled()).toBe(false);
    expect(logger.find('cannot watch for a file; polling for it instead', 'warn')).toHaveLength(1);
    fs.writeFileSync(file, '');
    await clock.advance(WAIT_FOR_PATH_POLL_MS);
    await expect(waiting.promise).resolves.toBeUndefined();
  });

  it('a watch that fails later falls back to polling too', async () => {
    const file = path.join(dir, 'csi.sock');
    const watcher = Object.assign(new EventEmitter(), { close: jest.fn() }) as unknown as fs.FSWatcher;
    const waiting = track(waitForPath(file, { clock, timeoutMs: 60_000, logger, watch: () => watcher }));
    watcher.emit('error', emfile());
    await clock.advance(WAIT_FOR_PATH_POLL_MS);
    expect(waiting.settled()).toBe(false);
    fs.writeFileSync(file, '');
    await clock.advance(WAIT_FOR_PATH_POLL_MS);
    await expect(waiting.promise).resolves.toBeUndefined();
    expect(watcher.close).toHaveBeenCalled();
  });

  it('still times out when the file never appears', async () => {
    const waiting = waitForPath(path.join(dir, 'never.sock'), {
      clock,
      timeoutMs: 5_000,
      watch: () => {
        throw emfile();
      },
    });
    const failed = expect(waiting).rejects.toBeInstanceOf(TimeoutError);
    await clock.advance(5_000);
    await failed;
    expect(clock.pendingTimers).toBe(0);
  });
});
