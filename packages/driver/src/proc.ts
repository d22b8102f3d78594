// Process identity from /proc: a pid alone is never trusted, because the
// kernel reuses pids; a pid together with its start time (clock ticks since
// boot, /proc/<pid>/stat field 22) names one process for good.
//
// The executor imports this file, so it must use node built-ins only.
import { readFileSync } from 'node:fs';
import { constants as osConstants } from 'node:os';

/**
 * errno codes that report a fault of the reading process itself — out of
 * file descriptors or memory, interrupted, busy — and so say nothing about
 * what was read. An agent flooded with connections gets EMFILE on every open;
 * that must never be taken for "the process is gone". The same list as
 * @csiplug/core's TRANSIENT_FS_ERROR_CODES (proc.spec.ts holds them equal),
 * kept here because the executor may load node built-ins only.
 */
export const TRANSIENT_ERRNO_CODES: ReadonlySet<string> = new Set(['EMFILE', 'ENFILE', 'EAGAIN', 'ENOMEM', 'EINTR', 'EBUSY']);

/** Whether `err` is a read or syscall error whose errno is one of TRANSIENT_ERRNO_CODES. */
export function isTransientErrno(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' && TRANSIENT_ERRNO_CODES.has(code);
}

/**
 * A read that failed for a passing local reason (see TRANSIENT_ERRNO_CODES):
 * whether its subject exists is unknown, so the caller must retry later and
 * never conclude "gone". A plain Error, not a DriverError, because the
 * executor imports this file and may load node built-ins only.
 */
export class TransientReadError extends Error {
  readonly code = 'ETRANSIENT_READ';

  constructor(
    readonly path: string,
    readonly errno: string,
    cause: unknown,
  ) {
    super(`could not read ${path} (${errno}): a fault of this process, not of what it reads; retry later`, { cause });
    this.name = 'TransientReadError';
  }
}

/** Rethrows a failed read of `path`: as a TransientReadError when the fault is transient, as itself otherwise. */
export function rethrowReadError(path: string, err: unknown): never {
  if (isTransientErrno(err)) throw new TransientReadError(path, (err as NodeJS.ErrnoException).code!, err);
  throw err;
}

/** The fields of /proc/<pid>/stat that the driver needs. */
export interface ProcStat {
  pid: number;
  /** The command name as the kernel keeps it (at most 15 bytes; may hold spaces and parens). */
  comm: string;
  /** One letter: R running, S sleeping, D disk sleep, Z zombie, X dead, T stopped, … */
  state: string;
  ppid: number;
  /** Process group id. */
  pgrp: number;
  session: number;
  /** Field 22: clock ticks after boot at which the process started, as the kernel prints it. */
  startTime: string;
  /** Field 52 (Linux 3.5+, readable by the owner or root): the wait status of a zombie. */
  exitStatus?: number;
}

/**
 * Parses one /proc/<pid>/stat line. The second field is the command name in
 * parens and may itself contain spaces and parens, so the fixed fields are
 * read after the last ')'.
 */
export function parseProcStat(text: string): ProcStat {
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  if (open < 0 || close < open)
    throw new Error(`malformed /proc stat line (no command name in parens): ${JSON.stringify(text.slice(0, 80))}`);
  const pid = Number(text.slice(0, open).trim());
  const comm = text.slice(open + 1, close);
  // rest[0] is field 3; field n is rest[n - 3].
  const rest = text
    .slice(close + 1)
    .trim()
    .split(/\s+/);
  if (!Number.isInteger(pid) || rest.length < 20)
    throw new Error(`malformed /proc stat line (too few fields): ${JSON.stringify(text.slice(0, 80))}`);
  const field = (n: number): string | undefined => rest[n - 3];
  const exitField = field(52);
  return {
    pid,
    comm,
    state: rest[0]!,
    ppid: Number(field(4)),
    pgrp: Number(field(5)),
    session: Number(field(6)),
    startTime: field(22)!,
    exitStatus: exitField !== undefined && /^\d+$/.test(exitField) ? Number(exitField) : undefined,
  };
}

function isValidPid(pid: number): boolean {
  // 0 and negative numbers mean process groups to kill(2); 1 is init. Neither is ever a task.
  return Number.isInteger(pid) && pid > 1;
}

/**
 * The stat of `pid`, or undefined when there is no such process (ENOENT,
 * ESRCH). Throws TransientReadError when this process cannot read it just now
 * (EMFILE…): that is "unknown", never "gone".
 */
export function readProcStat(pid: number): ProcStat | undefined {
  if (!isValidPid(pid)) return undefined;
  const file = `/proc/${pid}/stat`;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ESRCH') return undefined;
    rethrowReadError(file, err);
  }
  return parseProcStat(text);
}

/** The start time of `pid`, or undefined when it does not exist. */
export function processStartTime(pid: number): string | undefined {
  return readProcStat(pid)?.startTime;
}

/** Whether a process state letter means the process has finished (zombie or dead). */
export function isFinishedState(state: string): boolean {
  return state === 'Z' || state === 'X' || state === 'x';
}

/**
 * Whether `pid` is alive and is the very process that started at
 * `startTime`. A zombie is not alive: it has exited and waits to be reaped.
 * Throws TransientReadError when that cannot be told just now.
 */
export function isSameProcess(pid: number, startTime: string, read: (pid: number) => ProcStat | undefined = readProcStat): boolean {
  if (!startTime) return false;
  const stat = read(pid);
  return stat !== undefined && stat.startTime === startTime && !isFinishedState(stat.state);
}

/** Decodes a wait(2) status into an exit code or the name of the signal that ended the process. */
export function decodeWaitStatus(status: number): { exitCode: number | null; signal: string | null } {
  const termSignal = status & 0x7f;
  if (termSignal === 0) return { exitCode: (status >> 8) & 0xff, signal: null };
  return { exitCode: null, signal: signalName(termSignal) };
}

/** `SIGTERM` for 15, and so on; `SIG<n>` for numbers Node has no name for. */
export function signalName(signo: number): string {
  for (const [name, value] of Object.entries(osConstants.signals)) if (value === signo) return name;
  return `SIG${signo}`;
}
