// Waits for a file (a plugin's socket) to appear, woken by a filesystem
// watch on its directory rather than a sleep loop. The watch is set up
// before the first existence check, so a file created in between is seen.
//
// A watch that cannot be set up or fails later (the agent out of inotify
// instances or file descriptors, say) says nothing about the file: the wait
// goes on with a slow poll on the Clock instead of failing, which would have
// the plugin's task restarted although it may be running fine.
import { type Clock, type Logger, TimeoutError, errorMessage, formatDuration, toDisposable, waitUntil } from '@csiplug/core';
import * as fs from 'fs';
import * as path from 'path';

/** ms between existence checks once the watch has failed. */
export const WAIT_FOR_PATH_POLL_MS = 1_000;

export interface WaitForPathOptions {
  clock: Clock;
  timeoutMs: number;
  signal?: AbortSignal;
  /** Told when the watch fails and the wait falls back to polling. */
  logger?: Logger;
  /** Sets up the directory watch (default fs.watch); a seam for tests that inject faults. */
  watch?: (dir: string, listener: (event: string, name: string | Buffer | null) => void) => fs.FSWatcher;
}

export function waitForPath(file: string, options: WaitForPathOptions): Promise<void> {
  const { clock, timeoutMs, signal } = options;
  const watchDir = options.watch ?? ((dir, listener) => fs.watch(dir, { persistent: false }, listener));
  return waitUntil(() => (fs.existsSync(file) ? true : undefined), {
    clock,
    timeoutMs,
    signal,
    timeoutError: () => new TimeoutError(`${file} did not appear within ${formatDuration(timeoutMs)}`, timeoutMs),
    // Watch first; waitUntil checks after this, so a file created in between is seen.
    wakeOn: (check, wait) => {
      let watcher: fs.FSWatcher | undefined;
      let polling = false;
      const fallBackToPoll = (err: unknown) => {
        if (wait.settled || polling) return;
        polling = true;
        options.logger?.warn('cannot watch for a file; polling for it instead', {
          file,
          poll_ms: WAIT_FOR_PATH_POLL_MS,
          error: errorMessage(err),
        });
        try {
          watcher?.close();
        } catch {
          // already closed by its own failure
        }
        watcher = undefined;
        wait.own(clock.setInterval(check, WAIT_FOR_PATH_POLL_MS));
        check();
      };
      wait.own(toDisposable(() => watcher?.close()));
      try {
        watcher = watchDir(path.dirname(file), (_event, name) => {
          if (!name || name.toString() === path.basename(file)) check();
        });
        watcher.on('error', fallBackToPoll);
      } catch (err) {
        fallBackToPoll(err);
      }
    },
  }).then(() => undefined);
}
