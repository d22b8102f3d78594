// Which process owns a dir in the layer store's unpack-tmp: each process
// unpacks in its own subdir named by its pid and its start time (field 22 of
// /proc/<pid>/stat, in clock ticks since boot), so a store opened by one
// process removes only what a dead process left, never a live one's unpack,
// even when the dead one's pid has been reused.
import { readFileSync } from 'node:fs';

const OWNER_DIR = /^p([0-9]+)-([0-9]+)$/;

/** The start time of a process from /proc/<pid>/stat (field 22), or undefined when there is no such process. */
export function processStartTime(pid: number): string | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return undefined;
  }
  // Field 2 (comm) is in parentheses and may hold spaces or ')': fields after the last ')' are 3, 4, …
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return fields[22 - 3];
}

/** The name of this process's own subdir of unpack-tmp. */
export function ownTmpDirName(): string {
  const start = processStartTime(process.pid);
  if (start === undefined) throw new Error(`cannot read /proc/${process.pid}/stat: the image store needs /proc`);
  return `p${process.pid}-${start}`;
}

/** Whether a subdir of unpack-tmp belongs to a process still running (same pid and start time). Other names have no owner. */
export function ownerIsAlive(dirName: string): boolean {
  const m = OWNER_DIR.exec(dirName);
  if (!m) return false;
  return processStartTime(Number(m[1])) === m[2];
}
