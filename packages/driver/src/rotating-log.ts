// One stream of a task's output as the executor writes it: appended to the
// current file until it holds its size, then rotated (rotatedLogPath names
// the files). Writes never block on the disk and never throw: a chunk the disk refuses (ENOSPC) is dropped and
// counted, and `say` is told once how much was lost when writes work again,
// so a full disk never stops the task or its executor.
//
// The executor imports this file, so it must use node built-ins only (a
// type-only import loads nothing).
import { closeSync, constants as fsConstants, fchmodSync, fstatSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import type { TaskLogLimits } from '@csiplug/core';

/** The name of a stream's file `n` steps older than the current one (0: the current one). */
export function rotatedLogPath(current: string, n: number): string {
  return n === 0 ? current : `${current}.${n}`;
}

/** Opens a task's log for appending: mode 0600 (only the agent and root read a task's output), never through a symlink. */
export function openTaskLog(file: string, say: (message: string) => void): number {
  const fd = openSync(file, fsConstants.O_WRONLY | fsConstants.O_APPEND | fsConstants.O_CREAT | fsConstants.O_NOFOLLOW, 0o600);
  try {
    fchmodSync(fd, 0o600);
  } catch (e) {
    // A file system without modes still gets the task's output.
    say(`cannot tighten ${file} to 0600: ${(e as Error).message}`);
  }
  return fd;
}

export class RotatingLog {
  private fd: number;
  private size: number;
  private readonly maxBytes: number;
  /** Bytes dropped since writes last worked, and why the first were. */
  private droppedBytes = 0;
  private droppedBecause = '';

  constructor(
    private readonly file: string,
    private readonly limits: TaskLogLimits,
    private readonly say: (message: string) => void,
  ) {
    this.maxBytes = limits.maxFileSizeMB * 1024 * 1024;
    this.fd = openTaskLog(file, say);
    // Logs accumulate across restarts of the task: an earlier run's output counts.
    this.size = fstatSync(this.fd).size;
  }

  write(chunk: Buffer): void {
    let rest = chunk;
    while (rest.length) {
      // A full file is rotated before anything more is written: each file holds max_file_size MB exactly, its lines cut where the size falls.
      if (this.size >= this.maxBytes && !this.rotate()) return this.drop(rest.length, 'rotation failed');
      const piece = rest.subarray(0, this.maxBytes - this.size);
      rest = rest.subarray(piece.length);
      this.append(piece);
    }
  }

  close(): void {
    try {
      closeSync(this.fd);
    } catch {
      // already closed
    }
  }

  private append(piece: Buffer): void {
    let off = 0;
    try {
      while (off < piece.length) off += writeSync(this.fd, piece, off, piece.length - off);
    } catch (err) {
      this.size += off;
      return this.drop(piece.length - off, (err as NodeJS.ErrnoException).code ?? (err as Error).message);
    }
    this.size += off;
    if (this.droppedBytes > 0) {
      this.say(`${this.droppedBytes} bytes of the task's output to ${this.file} were dropped (${this.droppedBecause}); writing again`);
      this.droppedBytes = 0;
    }
  }

  private drop(bytes: number, why: string): void {
    if (this.droppedBytes === 0) {
      this.droppedBecause = why;
      this.say(`cannot write the task's output to ${this.file} (${why}): dropping it until writes work again`);
    }
    this.droppedBytes += bytes;
  }

  /** The current file becomes .1, each older one a step older, the oldest goes; a new current file is opened. False when that failed (the old file kept). */
  private rotate(): boolean {
    try {
      const oldest = this.limits.maxFiles - 1;
      if (oldest === 0) {
        // One file only: it starts again empty.
        closeSync(this.fd);
        this.fd = openSync(this.file, fsConstants.O_WRONLY | fsConstants.O_APPEND | fsConstants.O_TRUNC | fsConstants.O_NOFOLLOW);
        this.size = 0;
        return true;
      }
      rmSync(rotatedLogPath(this.file, oldest), { force: true });
      for (let n = oldest - 1; n >= 0; n--) {
        try {
          renameSync(rotatedLogPath(this.file, n), rotatedLogPath(this.file, n + 1));
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
        }
      }
      const fd = openTaskLog(this.file, this.say);
      closeSync(this.fd);
      this.fd = fd;
      this.size = 0;
      return true;
    } catch (err) {
      this.say(`cannot rotate ${this.file}: ${(err as Error).message}`);
      return false;
    }
  }
}
