// A byte range of a task's log file, read as it is consumed: the service
// opens the file, fixes its size at that moment and hands back a stream
// over just the range asked for, so reading the last 10 bytes of a 600 MB
// log costs 10 bytes of memory, and streaming all of it costs one chunk.
import { CsiplugError } from '@csiplug/core';
import * as fs from 'fs';
import { Readable } from 'stream';

/** Which bytes of a log to read, as Nomad's fs logs API takes them. */
export interface LogRange {
  /** Bytes from `origin`. Default 0. */
  offset?: number;
  /** `start`: offset counts from the first byte; `end`: back from the end of the file. Default start. */
  origin?: 'start' | 'end';
  /** At most this many bytes. Default: to the end of the file (as it was when opened). */
  limit?: number;
  /** Which file of the log: 0 the current one (default), n the one rotated n times (stdout.log.n). */
  file?: number;
}

/** What `allocLogs` hands back: where the bytes are, and a stream of them. */
export interface LogSlice {
  /** The file's size in bytes when it was opened (0 when the task has written nothing yet). */
  size: number;
  /** The byte offset of the slice's first byte, from the start of the file. */
  start: number;
  /** How many bytes the stream yields (fewer only if the file is truncated meanwhile). */
  length: number;
  /** The bytes, read from the file as the stream is consumed. Destroy it if you stop early. */
  stream: Readable;
  /** Which file on disk it is (device and inode), so a follower tells a rotated log (a new file) from a truncated one. */
  fileId?: string;
}

/**
 * Where a range falls in a file of `size` bytes. Offsets past either end
 * are clamped, so asking past the end gives an empty slice at the end
 * rather than an error (a file can shrink between two reads).
 */
export function resolveLogRange(size: number, range: LogRange = {}): { start: number; length: number } {
  const offset = range.offset ?? 0;
  const start = range.origin === 'end' ? Math.max(0, size - offset) : Math.min(offset, size);
  const length = Math.min(size - start, range.limit ?? Infinity);
  return { start, length };
}

/** A task's log path holds something other than the file the agent wrote (a symlink, a FIFO…): it is not read. */
export class LogNotFileError extends CsiplugError {
  constructor(file: string, what: string) {
    super('ELOG_NOT_FILE', `${file} ${what}; the agent reads only the logs it wrote`);
  }
}

/** Opens `file` and returns the slice `range` of it; a missing file is an empty log. */
export async function openLogSlice(file: string, range: LogRange = {}): Promise<LogSlice> {
  let handle: fs.promises.FileHandle;
  try {
    // A task may have put a symlink or a FIFO where its log was: never follow one, never block on one.
    handle = await fs.promises.open(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return emptySlice(0, 0);
    if ((err as NodeJS.ErrnoException).code === 'ELOOP') throw new LogNotFileError(file, 'is a symlink');
    throw err;
  }
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw new LogNotFileError(file, 'is not a regular file');
    const { size } = stat;
    const fileId = `${stat.dev}:${stat.ino}`;
    const { start, length } = resolveLogRange(size, range);
    if (length === 0) {
      await handle.close();
      return { ...emptySlice(size, start), fileId };
    }
    // `end` is inclusive; the stream closes the handle when it ends or is destroyed.
    return { size, start, length, fileId, stream: handle.createReadStream({ start, end: start + length - 1, autoClose: true }) };
  } catch (err) {
    await handle.close().catch(() => undefined);
    throw err;
  }
}

/** The slice `range` of an in-memory log (for fakes and tests). */
export function memoryLogSlice(data: Buffer, range: LogRange = {}): LogSlice {
  const { start, length } = resolveLogRange(data.length, range);
  const bytes = data.subarray(start, start + length);
  return { size: data.length, start, length, stream: Readable.from(length ? [bytes] : []) };
}

function emptySlice(size: number, start: number): LogSlice {
  return { size, start, length: 0, stream: Readable.from([]) };
}
