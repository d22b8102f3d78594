// Waits for a file (a plugin's socket) to appear, woken by a filesystem
// watch on its directory rather than a sleep loop. The watch is set up
// before the first existence check, so a file created in between is seen.
//
// A watch that cannot be set up or fails later (the agent out of inotify
// instances or file descriptors, say) says nothing about the file: the wait
// goes on with a slow poll on the Clock instead of failing, which would have
// the plugin's task restarted although it may be running fine.
import { Clock, Logger, TimeoutError, abortReason, errorMessage, formatDuration } from '@csiplug/core';
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
  if (signal?.aborted) return Promise.reject(abortReason(signal));
  return new Promise<void>((resolve, reject) => {
    let watcher: fs.FSWatcher | undefined;
    let poll: { dispose(): void } | undefined;
    let settled = false;
    const finish = (err?: Error) => {
      if (settled) return;
      settled = true;
      watcher?.close();
      poll?.dispose();
      timer.dispose();
      signal?.removeEventListener('abort', onAbort);
      if (err) reject(err);
      else resolve();
    };
    const check = () => {
      if (fs.existsSync(file)) finish();
    };
    const fallBackToPoll = (err: unknown) => {
      if (settled || poll) return;
      options.logger?.warn('cannot watch for a file; polling for it instead', { file, poll_ms: WAIT_FOR_PATH_POLL_MS, error: errorMessage(err) });
      try {
        watcher?.close();
      } catch {
        // already closed by its own failure
      }
      watcher = undefined;
      poll = clock.setInterval(check, WAIT_FOR_PATH_POLL_MS);
      check();
    };
    const onAbort = () => finish(abortReason(signal!));
    const timer = clock.setTimeout(
      () => finish(new TimeoutError(`${file} did not appear within ${formatDuration(timeoutMs)}`, timeoutMs)),
      timeoutMs,
    );
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      watcher = watchDir(path.dirname(file), (_event, name) => {
        if (!name || name.toString() === path.basename(file)) check();
      });
      watcher.on('error', fallBackToPoll);
    } catch (err) {
      fallBackToPoll(err);
      return;
    }
    check();
  });
}
