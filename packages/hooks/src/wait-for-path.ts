// Waits for a file (a plugin's socket) to appear, woken by a filesystem
// watch on its directory rather than a sleep loop. The watch is set up
// before the first existence check, so a file created in between is seen.
import { Clock, TimeoutError, abortReason, formatDuration } from '@csiplug/core';
import * as fs from 'fs';
import * as path from 'path';

export function waitForPath(file: string, options: { clock: Clock; timeoutMs: number; signal?: AbortSignal }): Promise<void> {
  const { clock, timeoutMs, signal } = options;
  if (signal?.aborted) return Promise.reject(abortReason(signal));
  return new Promise<void>((resolve, reject) => {
    let watcher: fs.FSWatcher | undefined;
    let settled = false;
    const finish = (err?: Error) => {
      if (settled) return;
      settled = true;
      watcher?.close();
      timer.dispose();
      signal?.removeEventListener('abort', onAbort);
      if (err) reject(err);
      else resolve();
    };
    const check = () => {
      if (fs.existsSync(file)) finish();
    };
    const onAbort = () => finish(abortReason(signal!));
    const timer = clock.setTimeout(
      () => finish(new TimeoutError(`${file} did not appear within ${formatDuration(timeoutMs)}`, timeoutMs)),
      timeoutMs,
    );
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      watcher = fs.watch(path.dirname(file), { persistent: false }, (_event, name) => {
        if (!name || name.toString() === path.basename(file)) check();
      });
      watcher.on('error', (err) => finish(err));
    } catch (err) {
      finish(err as Error);
      return;
    }
    check();
  });
}
