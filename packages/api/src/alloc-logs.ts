// The server half of Nomad's GET /v1/client/fs/logs/:alloc_id: how a log
// slice (see ../log-slice.ts) goes out, as Nomad's StreamFrames (one JSON
// object a line, the bytes in base64: wire/alloc-wire.ts) or with
// plain=true as the raw bytes. Either holds one read chunk at a time,
// whatever the size of the file, and waits for a slow reader.
import type { ServerResponse } from 'http';
import { Transform } from 'stream';
import { pipeline } from 'stream/promises';
import type { LogSlice } from './log-slice';
import { ApiError } from './api-error';
import { LOG_OFFSET_HEADER, LOG_SIZE_HEADER } from './protocol';
import { encodeLogFrame } from './wire/alloc-wire';

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
  res.writeHead(200, {
    // Nomad's two types; the charset says what the raw bytes of a task's log usually are.
    'Content-Type': plain ? 'text/plain; charset=utf-8' : 'application/json',
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    [LOG_OFFSET_HEADER]: String(slice.start),
    [LOG_SIZE_HEADER]: String(slice.size),
  });
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
