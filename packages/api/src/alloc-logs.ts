// The server half of Nomad's GET /v1/client/fs/logs/:alloc_id: how a log
// slice (see ../log-slice.ts) goes out, as Nomad's StreamFrames (one JSON
// object a line, the bytes in base64: wire/alloc-wire.ts) or with
// plain=true as the raw bytes, and with follow=true what the task writes
// next, until it ends. Either holds one read chunk at a time, whatever the
// size of the file, and waits for a slow reader.
import type { Clock } from '@csiplug/core';
import type { ServerResponse } from 'http';
import { once } from 'events';
import { Transform } from 'stream';
import { pipeline } from 'stream/promises';
import type { LogSlice } from './log-slice';
import { ApiError } from './api-error';
import { LOG_OFFSET_HEADER, LOG_SIZE_HEADER } from './protocol';
import { encodeLogFrame, encodeLogTruncated } from './wire/alloc-wire';

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

/** Where a followed log is read from. */
export interface FollowedLog {
  /** The log from `offset` (from its start) to its end now. */
  open(offset: number): Promise<LogSlice>;
  /** Whether the task will write no more: it is dead, its alloc ended or gone. */
  ended(): boolean;
}

/**
 * follow=true: sends the first slice, then every FOLLOW_POLL_MS what was
 * written after it, until a look made after the task ended (so its last
 * bytes are in) or until `signal` aborts (the reader gone, the API
 * closing). A log that got shorter is read again from its start, after
 * Nomad's "file truncated" frame.
 */
export async function followLog(
  res: ServerResponse,
  first: LogSlice,
  log: FollowedLog,
  options: { plain: boolean; clock: Clock; signal: AbortSignal },
): Promise<void> {
  const { plain, clock, signal } = options;
  writeLogHead(res, first, plain);
  let next = await writeSlice(res, first, plain, signal);
  for (;;) {
    await clock.sleep(FOLLOW_POLL_MS, signal);
    const done = log.ended();
    let slice = await log.open(next);
    if (slice.size < next) {
      slice.stream.destroy();
      if (!plain) await write(res, encodeLogTruncated(), signal);
      slice = await log.open(0);
    }
    next = await writeSlice(res, slice, plain, signal);
    if (done) break;
  }
  res.end();
}

/** Writes a slice's bytes (or frames) without ending the response; resolves with the file offset after them. */
async function writeSlice(res: ServerResponse, slice: LogSlice, plain: boolean, signal: AbortSignal): Promise<number> {
  let end = slice.start;
  try {
    for await (const chunk of slice.stream as AsyncIterable<Buffer>) {
      end += chunk.length;
      await write(res, plain ? chunk : encodeLogFrame(chunk, end), signal);
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
