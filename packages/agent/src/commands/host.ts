// Small facts about this host that the demo, the end-to-end tests and the
// benchmarks all ask: a free loopback port, the mounts under a dir, whether
// a pid is alive, and a bounded wait for a condition read from the API.
// Internal to the agent (the commands import this file): not part of
// @csiplug/agent; tests and benchmarks get freePort, isAlive and pollUntil
// from @csiplug/agent/testing.
import { errorMessage } from '@csiplug/core';
import * as net from 'net';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** Mount points at or below `dir`, in mount order (from /proc/self/mountinfo, escapes decoded). */
export { mountsUnder } from '@csiplug/csimanager';

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Calls `fn` every `everyMs` until it returns a value (not undefined), and
 * rejects after `timeoutMs` naming `what` and the last error. For clients of
 * the agent (the demo, tests, benchmarks) that watch its API from outside.
 */
export async function pollUntil<T>(
  what: string,
  fn: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 60_000,
  everyMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${errorMessage(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
