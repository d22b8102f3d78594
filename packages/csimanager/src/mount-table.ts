// Reading the kernel's mount table — and asking a mount whether it still
// answers — behind a small interface so the logic above it is tested with a
// fake (IMountTable; the fake is in @csiplug/csimanager/testing). The parsing
// is @csiplug/core's mountinfo.
//
// A stat of a dead hard-mounted NFS or hung FUSE path can block for ever,
// and in-process it would hold one of libuv's four pool threads while it
// does (every later fs call of the agent then queues behind it). So the
// table never enters a mount on the agent's own threads: isMountPoint reads
// /proc/self/mountinfo and resolves only the target's *parent*; stat runs in
// a short-lived child process, killed at its limit, with at most
// MAX_PROBES_IN_FLIGHT alive at once (a child stuck in D state costs a pid,
// not an agent thread, and keeps its slot until it really exits). Stats asked
// in the same turn of the loop share one child (up to PROBE_BATCH_MAX paths):
// spawning from the agent costs milliseconds of its CPU each, and a check of
// a thousand mounts after a restart must not be a thousand spawns. The child
// stats the paths one after another and answers each on its own line as it
// goes, so each path's limit counts from its own start; the path it is stuck
// on past its limit is the hung one — named, and kept from being probed again
// until the child exits — and the paths after it go to a new batch.
import { spawn } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import { constants as osConstants } from 'node:os';
import * as path from 'node:path';
import { doublingBackoff, mountPointsUnder, parseMountInfo as parseMountInfoEntries, readMountInfoSync, type Clock } from '@csiplug/core';
import { isTransientFsError } from './errors';

export interface MountTable {
  /**
   * Whether `target` is a mount point now. A path that does not exist is not
   * one; a table that cannot be read rejects (never "not mounted").
   */
  isMountPoint(target: string): Promise<boolean>;
  /**
   * Stats `target`, following it as a workload would: resolves when it
   * answers; rejects with the errno error (ENOTCONN or EIO of a dead FUSE
   * mount, ESTALE of an NFS one, ENOENT…), with a MountProbeHungError when
   * it did not answer within `limitMs` of starting (or an earlier probe of
   * it still has not), or with a MountProbeNotStartedError when the probe
   * could not even start (too many in flight, spawn failing) — which says
   * nothing of the mount. `onStarted` is called when the probe really
   * starts: a caller that races it against a timer of its own starts the
   * timer then, so time spent queued never reads as a hung mount. An
   * implementation may never settle for a hung path (the fake's hangStat):
   * callers race it against such a timer.
   */
  stat(target: string, options?: StatOptions): Promise<void>;
}

export interface StatOptions {
  /** How long the probe may take once started (default DEFAULT_PROBE_LIMIT_MS). */
  limitMs?: number;
  /** The probe really started (called again when it is started anew). */
  onStarted?: () => void;
}

/** The default limit of one stat probe once started. */
export const DEFAULT_PROBE_LIMIT_MS = 5_000;
/** Probes (child processes) alive at once, hung ones included; the rest queue. */
export const MAX_PROBES_IN_FLIGHT = 4;
/** Probes waiting for a slot; one more is refused at once (not started). */
export const MAX_PROBES_QUEUED = 256;
/** Paths one batched probe stats (one child process for all of them). */
export const PROBE_BATCH_MAX = 128;
/** Batched stats that may wait for a probe to start; past it a stat is "not started". */
export const MAX_BATCHED_WAITING = 4_096;

/** A stat waiting in, or run by, a batched probe. */
interface BatchedStat {
  p: string;
  limitMs: number;
  onStarted: (() => void) | undefined;
  resolve: () => void;
  reject: (err: Error) => void;
}

/**
 * The batch's child: says `start` once running, then stats its arguments in
 * order and writes `<index> ok` or `<index> err <errno number> <code>` for
 * each as soon as it has the answer (writes to a pipe are synchronous on
 * Linux, so a line is out before the next stat starts). The errno number,
 * not only the code: libuv has no name for some of them — ESTALE, the error
 * of a dead NFS mount, comes as "Unknown system error -116".
 */
const BATCH_SCRIPT =
  'const fs=require("fs");fs.writeSync(1,"start\\n");process.argv.slice(1).forEach((p,i)=>{let a="ok";try{fs.statSync(p)}catch(e){a="err "+Math.abs(Number(e.errno)||0)+" "+String(e.code||"UNKNOWN").replace(/\\s+/g,"_")}fs.writeSync(1,i+" "+a+"\\n")})';

/** The single probe's node stand-in for stat(1): the errno number on stderr (see BATCH_SCRIPT). */
const SINGLE_SCRIPT =
  'try{require("fs").statSync(process.argv[1])}catch(e){process.stderr.write("errno "+Math.abs(Number(e.errno)||0)+" "+String(e.code||"UNKNOWN").replace(/\\s+/g,"_"));process.exit(1)}';

/** The name of an errno number (116 → ESTALE), from this system's table; undefined when unknown. */
export function errnoName(n: number): string | undefined {
  if (!(n > 0)) return undefined;
  for (const [name, value] of Object.entries(osConstants.errno)) if (value === n) return name;
  return undefined;
}

/** A stat probe of `path` started and did not answer within its limit (or an earlier probe of it still has not): the mount hangs. */
export class MountProbeHungError extends Error {
  readonly code = 'EPROBEHUNG';
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(message);
    this.name = 'MountProbeHungError';
  }
}

/** A stat probe of `path` could not start (too many in flight or queued, a spawn that failed): nothing is known of the mount. */
export class MountProbeNotStartedError extends Error {
  readonly code = 'EPROBENOTSTARTED';
  constructor(
    readonly path: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'MountProbeNotStartedError';
  }
}

/** stat(1)'s messages (LC_ALL=C) for the errnos a probe tells apart. */
const STAT_MESSAGES: ReadonlyArray<readonly [string, string]> = [
  ['Transport endpoint is not connected', 'ENOTCONN'],
  ['Stale file handle', 'ESTALE'],
  ['Input/output error', 'EIO'],
  ['No such file or directory', 'ENOENT'],
  ['Permission denied', 'EACCES'],
  ['Not a directory', 'ENOTDIR'],
  ['Too many levels of symbolic links', 'ELOOP'],
];

const STAT_BINARY = ['/usr/bin/stat', '/bin/stat'].find((p) => existsSync(p));

/** Backoff (ms) between mount-table reads that failed for a transient fault: doubling from the base up to the max. */
const TRANSIENT_RETRY_BASE = 250;
const TRANSIENT_RETRY_MAX = 30_000;

/**
 * Whether `target` is a mount point, asked again after a backoff for as long
 * as the table cannot be read for a transient fault of the agent's own
 * process (EMFILE reading /proc/self/mountinfo under a connection flood, say):
 * "unknown" never becomes "not mounted" nor a failed restore, either of
 * which ends in unmounting under a running workload. Other errors are thrown;
 * an abort of `signal` rejects with its reason. `onFault` is told of each
 * retry (for a log line; the doubling backoff keeps them few).
 */
export async function isMountPointRetrying(
  table: Pick<MountTable, 'isMountPoint'>,
  target: string,
  options: { clock: Clock; signal?: AbortSignal; onFault?: (err: unknown, attempt: number, delayMs: number) => void },
): Promise<boolean> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await table.isMountPoint(target);
    } catch (err) {
      if (!isTransientFsError(err)) throw err;
      const delay = doublingBackoff(attempt, TRANSIENT_RETRY_BASE, TRANSIENT_RETRY_MAX);
      options.onFault?.(err, attempt, delay);
      await options.clock.sleep(delay, options.signal);
    }
  }
}

export { unescapeMountPath } from '@csiplug/core';

/**
 * The mount points listed in a /proc/<pid>/mountinfo text, in mount order.
 * Kept for this package's callers; the parser is @csiplug/core's
 * parseMountInfo, which gives the full entries.
 */
export function parseMountInfo(text: string): string[] {
  return parseMountInfoEntries(text).map((m) => m.mountPoint);
}

/** Mount points at or below `dir` (a real path), in mount order, read now from /proc/self/mountinfo. */
export function mountsUnder(dir: string): string[] {
  return mountPointsUnder(readMountInfoSync(), dir);
}

/** The errno error of a failed stat of `p`, as the probes reject with it. */
function statError(p: string, errno: string, detail: string, signal?: string | null): Error {
  return Object.assign(new Error(`${errno}: stat '${p}' failed${signal ? ` (${signal})` : ''}: ${detail}`), {
    code: errno,
    syscall: 'stat',
    path: p,
  });
}

/**
 * Reads /proc/self/mountinfo. A path that does not exist is answered without
 * reading the table. Concurrent callers share reads, but only a read that
 * starts after they asked: a read already under way may predate a mount the
 * caller just made, so newcomers wait for the next one (at most one read runs
 * and one waits, however many callers there are).
 */
export class ProcMountTable implements MountTable {
  private inflight: Promise<Set<string>> | undefined;
  private pending: Promise<Set<string>> | undefined;
  /** How many times the table was read (for tests and benchmarks). */
  reads = 0;

  /** Stat probes alive (child processes not exited yet, killed ones included), by path. */
  private readonly alive = new Map<string, number>();
  private inFlight = 0;
  private readonly queued: (() => void)[] = [];
  /** Batched stats not started yet (waiting for the next turn of the loop or for a slot). */
  private readonly batchWaiting: BatchedStat[] = [];
  private batchNotStarted = 0;
  private batchFlushScheduled = false;
  /** How many batched probes (child processes for several paths) were started (for tests and benchmarks). */
  batches = 0;

  /**
   * `file`: the mount table to read. `probeCommand`: the process a stat runs
   * in (for tests: a command that hangs); by default stat(1), or node when
   * there is no stat binary.
   */
  constructor(
    private readonly file = '/proc/self/mountinfo',
    private readonly probeCommand?: (target: string) => readonly [string, readonly string[]],
    /** The process a batch of stats runs in (for tests: one that hangs); it must answer as BATCH_SCRIPT does. By default node running BATCH_SCRIPT. */
    private readonly batchCommand?: (targets: readonly string[]) => readonly [string, readonly string[]],
  ) {}

  /** How many probe processes are alive now (for tests). */
  get probesInFlight(): number {
    return this.inFlight;
  }

  async stat(target: string, options: StatOptions = {}): Promise<void> {
    const limitMs = options.limitMs ?? DEFAULT_PROBE_LIMIT_MS;
    const p = path.resolve(target);
    if (this.alive.has(p)) throw new MountProbeHungError(p, `an earlier stat of ${p} has not returned (the mount hangs)`);
    // A command of the caller's probes one path: no batch.
    if (this.probeCommand) return this.statAlone(p, limitMs, options.onStarted);
    return this.statBatched(p, limitMs, options.onStarted);
  }

  /** One path in a child process of its own, through the slots. */
  private async statAlone(p: string, limitMs: number, onStarted: (() => void) | undefined): Promise<void> {
    if (this.alive.has(p)) throw new MountProbeHungError(p, `an earlier stat of ${p} has not returned (the mount hangs)`);
    if (this.inFlight >= MAX_PROBES_IN_FLIGHT) {
      if (this.queued.length >= MAX_PROBES_QUEUED)
        throw new MountProbeNotStartedError(
          p,
          `could not stat ${p}: ${MAX_PROBES_IN_FLIGHT} probes in flight and ${MAX_PROBES_QUEUED} queued`,
        );
      await new Promise<void>((resolve) => this.queued.push(resolve));
      if (this.alive.has(p)) {
        this.release();
        throw new MountProbeHungError(p, `an earlier stat of ${p} has not returned (the mount hangs)`);
      }
    } else {
      this.inFlight++;
    }
    return this.probe(p, limitMs, onStarted);
  }

  /** Joins the stats asked in this turn of the loop: one child process stats them all. */
  private statBatched(p: string, limitMs: number, onStarted: (() => void) | undefined): Promise<void> {
    if (this.batchNotStarted >= MAX_BATCHED_WAITING) {
      return Promise.reject(
        new MountProbeNotStartedError(p, `could not stat ${p}: ${this.batchNotStarted} stats already wait for a probe to start`),
      );
    }
    return new Promise<void>((resolve, reject) => this.enqueue([{ p, limitMs, onStarted, resolve, reject }]));
  }

  /** Stats to run in a batch from the next turn of the loop on. */
  private enqueue(stats: BatchedStat[]): void {
    this.batchWaiting.push(...stats);
    this.batchNotStarted += stats.length;
    if (this.batchFlushScheduled) return;
    this.batchFlushScheduled = true;
    setImmediate(() => {
      this.batchFlushScheduled = false;
      while (this.batchWaiting.length > 0) void this.runBatchWhenFree(this.batchWaiting.splice(0, PROBE_BATCH_MAX));
    });
  }

  /** Takes a slot (a batch is one probe), then runs the batch. */
  private async runBatchWhenFree(batch: BatchedStat[]): Promise<void> {
    if (this.inFlight >= MAX_PROBES_IN_FLIGHT) await new Promise<void>((resolve) => this.queued.push(resolve));
    else this.inFlight++;
    this.batchNotStarted -= batch.length;
    // A path whose probe hangs is not asked again while that probe lives.
    const live = batch.filter((b) => {
      if (!this.alive.has(b.p)) return true;
      b.reject(new MountProbeHungError(b.p, `an earlier stat of ${b.p} has not returned (the mount hangs)`));
      return false;
    });
    if (live.length === 0) this.release();
    else this.runBatch(live);
  }

  /**
   * One child process stats the batch's paths in order, holding one slot
   * until it exits, and answers each on its own line: each path's stat
   * starts when the helper is running (the first) or the path before it
   * answered (its onStarted then), and has `limitMs` from there. Stuck past
   * it: that path is hung (and counted alive until the child exits), the
   * child is killed, the paths after it go to a new batch. A helper that
   * does not even say it runs within the limit: every path "not started". A
   * child that ends without answering them all: the rest are asked one by
   * one.
   */
  private runBatch(batch: BatchedStat[]): void {
    // One argument per distinct path; every stat of it gets its answer.
    const paths = [...new Set(batch.map((b) => b.p))];
    const statsOf = new Map<string, BatchedStat[]>();
    for (const b of batch) statsOf.set(b.p, [...(statsOf.get(b.p) ?? []), b]);
    const limitOf = (p: string) => Math.max(...statsOf.get(p)!.map((b) => b.limitMs));
    const command = this.batchCommand?.(paths) ?? [process.execPath, ['-e', BATCH_SCRIPT, ...paths]];
    let child;
    try {
      // A clean environment: nothing of the agent's (NODE_OPTIONS, say) reaches the helper.
      child = spawn(command[0], [...command[1]], { stdio: ['ignore', 'pipe', 'ignore'], env: { LC_ALL: 'C', PATH: '/usr/bin:/bin' } });
    } catch (err) {
      this.release();
      for (const b of batch)
        b.reject(new MountProbeNotStartedError(b.p, `could not start a stat of ${b.p}: ${(err as Error).message}`, { cause: err }));
      return;
    }
    this.batches++;
    let spawned = false;
    let running = false;
    let ended = false;
    /** Paths answered so far: the next one is the one the child is on. */
    let answered = 0;
    let hungPath: string | undefined;
    let timer: NodeJS.Timeout | undefined;
    const exited = () => child.exitCode !== null || child.signalCode !== null;
    /** Runs `fire` at the limit, after one more turn of the loop: an answer or exit the busy loop has not read yet is heard first (then 'close' decides). */
    const arm = (limitMs: number, fire: () => void) => {
      clearTimeout(timer);
      timer = setTimeout(() => setImmediate(() => !ended && !exited() && fire()), limitMs);
    };
    const startNext = () => {
      const p = paths[answered];
      if (p === undefined) return clearTimeout(timer);
      for (const b of statsOf.get(p)!) b.onStarted?.();
      arm(limitOf(p), () => {
        if (paths[answered] !== p) return;
        ended = true;
        // Killed, but never waited for: a child stuck in D state keeps its slot — and the path stays hung — until it really exits.
        this.alive.set(p, (this.alive.get(p) ?? 0) + 1);
        hungPath = p;
        child.kill('SIGKILL');
        for (const b of statsOf.get(p)!)
          b.reject(new MountProbeHungError(p, `${p} did not answer a stat within ${limitOf(p)} ms (the mount hangs)`));
        const rest = paths.slice(answered + 1).flatMap((q) => statsOf.get(q)!);
        if (rest.length > 0) this.enqueue(rest);
      });
    };
    let partial = '';
    child.stdout?.setEncoding('utf8');
    child.stdout?.on('data', (chunk: string) => {
      if (ended) return;
      const lines = (partial + chunk).split('\n');
      partial = lines.pop()!;
      for (const line of lines) {
        if (!running) {
          if (line !== 'start') continue;
          running = true;
          startNext();
          continue;
        }
        const m = /^(\d+) (?:(ok)|err (\d+) (\S+))$/.exec(line);
        // Answers come in order; anything else is not this script's: the rest are asked one by one when it ends.
        if (!m || Number(m[1]) !== answered) continue;
        const p = paths[answered++]!;
        const errno = m[2] === 'ok' ? undefined : (errnoName(Number(m[3])) ?? (/^E[A-Z0-9]+$/.test(m[4]!) ? m[4]! : 'EUNKNOWN'));
        for (const b of statsOf.get(p)!) {
          if (errno === undefined) b.resolve();
          else b.reject(statError(p, errno, m[4]!));
        }
        startNext();
      }
    });
    child.once('spawn', () => {
      spawned = true;
      // The helper must say it runs within the limit (its start-up is not a path's time).
      arm(Math.max(...batch.map((b) => b.limitMs)), () => {
        if (running) return;
        ended = true;
        child.kill('SIGKILL');
        for (const b of batch)
          b.reject(new MountProbeNotStartedError(b.p, `could not stat ${b.p}: the stat helper did not start within ${limitOf(b.p)} ms`));
      });
    });
    child.once('error', (err: NodeJS.ErrnoException) => {
      if (spawned || ended) return;
      ended = true;
      this.release();
      for (const b of batch)
        b.reject(new MountProbeNotStartedError(b.p, `could not start a stat of ${b.p}: ${err.message}`, { cause: err }));
    });
    child.once('close', () => {
      if (!spawned) return;
      clearTimeout(timer);
      if (hungPath !== undefined) {
        const n = (this.alive.get(hungPath) ?? 1) - 1;
        if (n > 0) this.alive.set(hungPath, n);
        else this.alive.delete(hungPath);
      }
      if (ended) return this.release();
      ended = true;
      // Ended without answering every path (killed from outside, a crash): the path it was on is asked alone, in
      // the slot it frees (its stat had started); the ones it never reached go to a new batch.
      const left = paths.slice(answered);
      if (left.length === 0) return this.release();
      this.askAloneInSlot(statsOf.get(left[0]!)!);
      const rest = left.slice(1).flatMap((q) => statsOf.get(q)!);
      if (rest.length > 0) this.enqueue(rest);
    });
  }

  /** The stats of one path asked again in a child of its own, in the probe slot the caller holds and hands over. */
  private askAloneInSlot(group: BatchedStat[]): void {
    const p = group[0]!.p;
    let asked: Promise<void>;
    if (this.alive.has(p)) {
      this.release();
      asked = Promise.reject(new MountProbeHungError(p, `an earlier stat of ${p} has not returned (the mount hangs)`));
    } else {
      asked = this.probe(p, Math.max(...group.map((b) => b.limitMs)), () => group.forEach((b) => b.onStarted?.()));
    }
    asked.then(
      () => group.forEach((b) => b.resolve()),
      (err: Error) => group.forEach((b) => b.reject(err)),
    );
  }

  /** Frees a probe slot: the next queued probe takes it. */
  private release(): void {
    const next = this.queued.shift();
    if (next) next();
    else this.inFlight--;
  }

  /** One stat in a child process, holding a slot until the child exits; settles at `limitMs` at the latest. */
  private probe(p: string, limitMs: number, onStarted: (() => void) | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let settled = false;
      // Declared before settle: a spawn that throws at once settles before the timer is set.
      let timer: NodeJS.Timeout | undefined;
      const settle = (err?: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (err) reject(err);
        else resolve();
      };
      let child;
      try {
        const custom = this.probeCommand?.(p);
        child = custom
          ? spawn(custom[0], [...custom[1]], { stdio: ['ignore', 'ignore', 'pipe'], env: { LC_ALL: 'C', PATH: '/usr/bin:/bin' } })
          : STAT_BINARY
            ? spawn(STAT_BINARY, ['-L', '-c', '%i', '--', p], {
                stdio: ['ignore', 'ignore', 'pipe'],
                env: { LC_ALL: 'C', PATH: '/usr/bin:/bin' },
              })
            : spawn(process.execPath, ['-e', SINGLE_SCRIPT, p], {
                stdio: ['ignore', 'ignore', 'pipe'],
                env: { LC_ALL: 'C', PATH: '/usr/bin:/bin' },
              });
      } catch (err) {
        this.release();
        settle(new MountProbeNotStartedError(p, `could not start a stat of ${p}: ${(err as Error).message}`, { cause: err }));
        return;
      }
      this.alive.set(p, (this.alive.get(p) ?? 0) + 1);
      let stderr = '';
      child.stderr?.setEncoding('utf8');
      child.stderr?.on('data', (chunk: string) => {
        if (stderr.length < 4096) stderr += chunk;
      });
      let spawned = false;
      child.once('spawn', () => {
        spawned = true;
        onStarted?.();
      });
      timer = setTimeout(() => {
        // The agent's loop may have been busy past the limit (a restore of
        // many allocs): what already happened — the child's exit — is heard
        // first (I/O before setImmediate), so a busy agent never takes a
        // healthy mount for a hung one and remounts it under its workload.
        setImmediate(() => {
          if (settled || child.exitCode !== null || child.signalCode !== null) return; // it exited: 'close' settles
          // Killed, but never waited for: a child stuck in D state may outlive SIGKILL until the mount answers; it keeps its slot until then.
          child.kill('SIGKILL');
          settle(new MountProbeHungError(p, `${p} did not answer a stat within ${limitMs} ms (the mount hangs)`));
        });
      }, limitMs);
      const gone = () => {
        const n = (this.alive.get(p) ?? 1) - 1;
        if (n > 0) this.alive.set(p, n);
        else this.alive.delete(p);
        this.release();
      };
      child.once('error', (err: NodeJS.ErrnoException) => {
        if (!spawned) {
          gone();
          settle(new MountProbeNotStartedError(p, `could not start a stat of ${p}: ${err.message}`, { cause: err }));
        }
      });
      child.once('close', (code, sig) => {
        if (!spawned) return;
        gone();
        if (code === 0) return settle();
        const numbered = /^errno (\d+) (\S+)$/.exec(stderr.trim());
        const found = numbered
          ? (errnoName(Number(numbered[1])) ?? (/^E[A-Z0-9]+$/.test(numbered[2]!) ? numbered[2] : undefined))
          : STAT_MESSAGES.find(([text]) => stderr.includes(text))?.[1];
        const errno = found ?? 'EUNKNOWN';
        settle(statError(p, errno, stderr.trim() || `exit ${code}`, sig));
      });
    });
  }

  /**
   * Whether `target` is listed in the mount table. Only its parent is
   * resolved (a stale or hung mount at `target` is never entered): targets
   * are paths the agent made, not symlinks. A parent that does not exist
   * means not mounted.
   */
  async isMountPoint(target: string): Promise<boolean> {
    const absolute = path.resolve(target);
    if (absolute === '/') return (await this.read()).has('/');
    let parent: string;
    try {
      parent = await fs.realpath(path.dirname(absolute));
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') return false;
      throw err;
    }
    const mounts = await this.read();
    return mounts.has(path.join(parent, path.basename(absolute)));
  }

  /** Every mount point now. */
  async mountPoints(): Promise<string[]> {
    return [...(await this.read())];
  }

  private read(): Promise<Set<string>> {
    if (this.pending) return this.pending;
    if (!this.inflight) return this.start();
    const after = this.inflight;
    const next = after
      .catch(() => undefined)
      .then(() => {
        this.pending = undefined;
        return this.start();
      });
    this.pending = next;
    return next;
  }

  private start(): Promise<Set<string>> {
    this.reads++;
    const p = fs.readFile(this.file, 'utf8').then((text) => new Set(parseMountInfo(text)));
    this.inflight = p;
    const clear = () => {
      if (this.inflight === p) this.inflight = undefined;
    };
    p.then(clear, clear);
    return p;
  }
}
