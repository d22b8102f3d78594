// The server half of Nomad's GET /v1/client/fs/logs/:alloc_id: how a log
// slice (see ../log-slice.ts) goes out, as Nomad's StreamFrames (one JSON
// object a line, the bytes in base64: wire/alloc-wire.ts) or with
// plain=true as the raw bytes, and with follow=true what the task writes
// next, until the reader leaves (as Nomad's, a followed answer does not end
// with the task). Either holds one read chunk at a time, whatever the
// size of the file, and waits for a slow reader.
import type { Clock } from '@csiplug/core';
import type { ServerResponse } from 'http';
import { once } from 'events';
import { Transform } from 'stream';
import { pipeline } from 'stream/promises';
import type { LogSlice } from './log-slice';
import { ApiError } from './api-error';
import { LOG_OFFSET_HEADER, LOG_SIZE_HEADER } from './protocol';
import { encodeLogFrame, encodeLogHeartbeat, encodeLogTruncated } from './wire/alloc-wire';

/** ms between two looks at a followed log for what the task wrote since. */
export const FOLLOW_POLL_MS = 250;

/** csiplug's `limit` (Nomad has none): at most this many bytes; absent, to the end of the file as it was when opened. */
export function logLimit(asked: number | undefined): number | undefined {
  if (asked === 0) throw ApiError.badRequest('query parameter limit must be at least 1 byte; leave it out to read to the end of the log');
  return asked;
}

/**
 * Streams the slice with the file's backpressure (a reader that stops
 * reading stops the file reads): as StreamFrames, or with `plain` as the raw
 * bytes. The slice's offset and the file's size go in csiplug's headers.
 * Rejects when either side breaks.
 */
export async function sendLog(res: ServerResponse, slice: LogSlice, plain: boolean, signal?: AbortSignal): Promise<void> {
  writeLogHead(res, slice, plain);
  // The signal ends the pipeline (and closes the file) when the client's connection is gone.
  const options = signal ? { signal } : {};
  if (plain) return pipeline(slice.stream, res, options);
  let end = slice.start;
  const frames = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      end += chunk.length;
      done(null, encodeLogFrame(chunk, end));
    },
  });
  return pipeline(slice.stream, frames, res, options);
}

/** ms without a frame after which a followed log in frames sends Nomad's heartbeat, `{}` (Nomad's framer beats every second). */
export const HEARTBEAT_MS = 1000;

/** Where a followed log is read from. */
export interface FollowedLog {
  /**
   * The log's file `file` steps older than the current one (0: the current
   * one, 1: the one it was last rotated to) from `offset` to its end now;
   * undefined once the alloc is gone (purged): nothing is left to read.
   */
  open(offset: number, file?: number): Promise<LogSlice | undefined>;
}

/**
 * follow=true: sends the first slice, then every FOLLOW_POLL_MS what was
 * written after it, as Nomad does until the reader leaves, the alloc is gone
 * or the API closes (`signal`; then the answer ends cleanly). A task that
 * ended writes no more, but the answer stays open: Nomad's CLI reads a clean
 * end as "read again", so ending it would make `nomad alloc logs -f` spin.
 * In frames, a heartbeat `{}` goes out when nothing was sent for
 * HEARTBEAT_MS. A log that was rotated (a new file in its place) is read to
 * the end of the old file first, then from the start of the new one; a log
 * that got shorter in place is read again from its start, after Nomad's
 * "file truncated" frame.
 */
export async function followLog(
  res: ServerResponse,
  first: LogSlice,
  log: FollowedLog,
  options: { plain: boolean; clock: Clock; signal: AbortSignal },
): Promise<void> {
  const { plain, clock, signal } = options;
  writeLogHead(res, first, plain);
  // Nomad's CLI waits for the head before it reads anything: it goes now, not with the task's first bytes.
  res.flushHeaders();
  let lastSent = clock.now();
  const send = async (data: Buffer | string) => {
    await write(res, data, signal);
    lastSent = clock.now();
  };
  try {
    let fileId = first.fileId;
    let next = await writeSlice(first, plain, send);
    for (;;) {
      await clock.sleep(FOLLOW_POLL_MS, signal);
      let slice = await log.open(next);
      if (!slice) break;
      if (slice.fileId !== undefined && fileId !== undefined && slice.fileId !== fileId) {
        // Rotated: the rest of the file that was read is now file 1 (unless it rotated again since: those bytes are gone).
        slice.stream.destroy();
        const rotated = await log.open(next, 1);
        if (rotated && rotated.fileId === fileId && rotated.start === next) await writeSlice(rotated, plain, send);
        else rotated?.stream.destroy();
        slice = await log.open(0);
        if (!slice) break;
      } else if (slice.size < next) {
        slice.stream.destroy();
        if (!plain) await send(encodeLogTruncated());
        slice = await log.open(0);
        if (!slice) break;
      }
      fileId = slice.fileId;
      next = await writeSlice(slice, plain, send);
      if (!plain && clock.now() - lastSent >= HEARTBEAT_MS) await send(encodeLogHeartbeat());
    }
  } catch (err) {
    // The reader gone or the API closing: an API that closes ends the answer cleanly (the reader still there is told it is over).
    if (!signal.aborted) throw err;
  }
  if (!res.destroyed) res.end();
}

/** Writes a slice's bytes (or frames) without ending the response; resolves with the file offset after them. */
async function writeSlice(slice: LogSlice, plain: boolean, send: (data: Buffer | string) => Promise<void>): Promise<number> {
  let end = slice.start;
  try {
    for await (const chunk of slice.stream as AsyncIterable<Buffer>) {
      end += chunk.length;
      await send(plain ? chunk : encodeLogFrame(chunk, end));
    }
  } finally {
    slice.stream.destroy();
  }
  return end;
}

/** One write, waiting for a slow reader to drain (or the signal to abort). */
async function write(res: ServerResponse, data: Buffer | string, signal: AbortSignal): Promise<void> {
  if (!res.write(data)) await once(res, 'drain', { signal });
}

function writeLogHead(res: ServerResponse, slice: LogSlice, plain: boolean): void {
  res.writeHead(200, {
    // Nomad's two types; the charset says what the raw bytes of a task's log usually are.
    'Content-Type': plain ? 'text/plain; charset=utf-8' : 'application/json',
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    [LOG_OFFSET_HEADER]: String(slice.start),
    [LOG_SIZE_HEADER]: String(slice.size),
  });
}
