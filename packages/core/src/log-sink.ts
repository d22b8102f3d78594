// Where PinoLogger's lines go when no destination is given: a file
// descriptor (stderr), written so that logging never blocks the agent and
// never throws. A line the descriptor refuses (ENOSPC on a full disk, EIO,
// EDQUOT…) is dropped and counted — pino's own destination retries such a
// write every 100 ms for ever, which wedged the whole agent, and threw once
// space returned. When a write works again, one line says how many were
// dropped and why, before the line that got through. A pipe that is full
// for now (EAGAIN) keeps its lines in a bounded queue, written in order as
// the reader catches up; past the bound they are dropped and counted too.
import * as fs from 'fs';

/** What the sink says once writes work again: the text of one whole log line (with its newline). */
export type DroppedNotice = (dropped: number, error: string) => string;

export interface LogSinkOptions {
  /** The bytes a full pipe may hold back before lines are dropped; default 1 MiB. */
  maxQueuedBytes?: number;
  /** Ms between tries to write what a full pipe held back; default 20. */
  retryMs?: number;
}

export class LogSink {
  /** Lines dropped since writes last worked. */
  private dropped = 0;
  /** Why the first of them was dropped (an errno code). */
  private droppedBecause = '';
  /** Lines dropped in all, for tests and metrics. */
  private droppedTotal = 0;
  /** A line the fs cut short: the next line written starts on a line of its own. */
  private cut = false;
  /** Bytes waiting for a full pipe, in order. */
  private readonly queue: Buffer[] = [];
  private queuedBytes = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly maxQueuedBytes: number;
  private readonly retryMs: number;

  constructor(
    private readonly fd: number,
    private readonly notice: DroppedNotice,
    options: LogSinkOptions = {},
  ) {
    this.maxQueuedBytes = options.maxQueuedBytes ?? 1024 * 1024;
    this.retryMs = options.retryMs ?? 20;
  }

  /** What a full pipe still holds goes out once as the process leaves (listened for only while something waits); a write that fails then is lost, never retried. */
  private readonly atExit = (): void => this.flushOnce();

  /** Lines dropped since this sink was made. */
  get droppedLines(): number {
    return this.droppedTotal;
  }

  /** Writes one line; never throws, never waits. */
  write(line: string): boolean {
    const buf = Buffer.from(line);
    if (this.queue.length) this.enqueue(buf);
    else this.writeLine(buf);
    return true;
  }

  private drop(err: unknown, lines = 1): void {
    if (this.dropped === 0) this.droppedBecause = String((err as NodeJS.ErrnoException)?.code ?? (err as Error)?.message ?? err);
    this.dropped += lines;
    this.droppedTotal += lines;
  }

  private enqueue(buf: Buffer): void {
    if (this.queuedBytes + buf.length > this.maxQueuedBytes) return this.drop({ code: 'EAGAIN (the reader of the log is too slow)' });
    if (!this.queue.length) process.once('exit', this.atExit);
    this.queue.push(buf);
    this.queuedBytes += buf.length;
    this.timer ??= setTimeout(() => this.drain(), this.retryMs);
    this.timer.unref();
  }

  /** Writes `buf` whole, or as much as goes; returns the bytes a full pipe left over (EAGAIN), else undefined. Throws any other error. */
  private writeAll(buf: Buffer): Buffer | undefined {
    let off = 0;
    while (off < buf.length) {
      try {
        off += fs.writeSync(this.fd, buf, off, buf.length - off);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EAGAIN') return buf.subarray(off);
        if (off > 0) this.cut = true;
        throw err;
      }
    }
    return undefined;
  }

  private writeLine(buf: Buffer): void {
    let out = buf;
    if (this.dropped > 0 || this.cut) {
      const said = this.dropped > 0 ? this.notice(this.dropped, this.droppedBecause) : '';
      out = Buffer.concat([Buffer.from(`${this.cut ? '\n' : ''}${said}`), buf]);
    }
    const hadDropped = this.dropped;
    const wasCut = this.cut;
    try {
      this.cut = false;
      const rest = this.writeAll(out);
      if (rest) this.enqueue(rest);
      this.dropped = 0;
    } catch (err) {
      if (wasCut && !this.cut) this.cut = true;
      this.dropped = hadDropped;
      this.drop(err);
    }
  }

  private drain(): void {
    this.timer = undefined;
    while (this.queue.length) {
      const head = this.queue.shift()!;
      this.queuedBytes -= head.length;
      try {
        const rest = this.writeAll(head);
        if (rest) {
          this.queue.unshift(rest);
          this.queuedBytes += rest.length;
          break;
        }
      } catch (err) {
        this.drop(err);
      }
    }
    if (this.queue.length) {
      this.timer = setTimeout(() => this.drain(), this.retryMs);
      this.timer.unref();
    } else process.removeListener('exit', this.atExit);
  }

  /** One try at what is queued, at exit. */
  private flushOnce(): void {
    for (const buf of this.queue.splice(0)) {
      try {
        if (this.writeAll(buf)) return;
      } catch {
        return;
      }
    }
  }
}
