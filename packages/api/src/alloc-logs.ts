// The server half of GET /v1/allocation/:id/logs/:task: how a log slice
// (see ../log-slice.ts) becomes the JSON AllocLogs answer or a stream of
// raw bytes. Neither holds more than the JSON limit (or one read chunk when
// streaming), whatever the size of the file.
import type { ServerResponse } from 'http';
import { pipeline } from 'stream/promises';
import type { LogSlice } from './log-slice';
import { ApiError } from './api-error';
import { type AllocLogs, DEFAULT_LOG_LIMIT, LOG_OFFSET_HEADER, LOG_SIZE_HEADER, MAX_JSON_LOG_LIMIT } from './protocol';

/**
 * The `limit` to read with: the one asked for, else the JSON default
 * (plain answers stream to the end of the file). A JSON answer holds the
 * bytes in memory and then as a string, so it is capped; streaming is not.
 */
export function logLimit(asked: number | undefined, plain: boolean): number | undefined {
  if (asked === 0) throw ApiError.badRequest('query parameter limit must be at least 1 byte; leave it out for the default');
  if (plain) return asked;
  if (asked === undefined) return DEFAULT_LOG_LIMIT;
  if (asked > MAX_JSON_LOG_LIMIT) {
    throw ApiError.badRequest(
      `query parameter limit ${asked} is over the JSON answer's maximum of ${MAX_JSON_LOG_LIMIT} bytes (${MAX_JSON_LOG_LIMIT / 1024 / 1024} MiB); ask for less, or add plain=true to stream any amount as raw bytes`,
    );
  }
  return asked;
}

/** Reads the slice (at most the JSON limit) and makes the JSON answer. */
export async function readLogJson(allocId: string, task: string, stream: AllocLogs['stream'], slice: LogSlice): Promise<AllocLogs> {
  const chunks: Buffer[] = [];
  let got = 0;
  for await (const chunk of slice.stream as AsyncIterable<Buffer>) {
    chunks.push(chunk);
    got += chunk.length;
  }
  const bytes = Buffer.concat(chunks, got);
  const cutByLimit = slice.start + got < slice.size;
  const { skip, keep } = utf8Window(bytes, slice.start > 0, cutByLimit);
  const offset = slice.start + skip;
  return {
    allocId,
    task,
    stream,
    offset,
    nextOffset: offset + keep,
    size: slice.size,
    data: bytes.subarray(skip, skip + keep).toString('utf8'),
  };
}

/**
 * Which bytes of a slice make whole UTF-8 characters, for the JSON answer
 * (whose `data` is a string, so a cut character would come out as U+FFFD
 * and its bytes be lost to a reader that goes on from nextOffset):
 *
 * - at the front, when the slice does not start the file, up to 3
 *   continuation bytes (the tail of a character cut by the range) are
 *   skipped, and `offset` says where the data really starts;
 * - at the back, an incomplete character is left out and nextOffset points
 *   at its first byte, so the next read gets it whole. When that would
 *   leave nothing, the limit is what cut it (a limit smaller than one
 *   character) and nothing was skipped either, the bytes are kept (as
 *   U+FFFD) so that a reader still moves on; at the end of the file an
 *   empty answer is right: the task is probably writing that character.
 *
 * Bytes that are simply not UTF-8 are not judged: they decode as U+FFFD,
 * and their byte count still moves nextOffset on. plain=true gives the
 * bytes exactly as they are.
 */
export function utf8Window(bytes: Buffer, midFile: boolean, cutByLimit: boolean): { skip: number; keep: number } {
  let skip = 0;
  if (midFile) while (skip < 3 && skip < bytes.length && isContinuation(bytes[skip]!)) skip++;
  let end = bytes.length;
  const partial = incompleteTail(bytes, skip);
  if (partial > 0 && (end - partial > skip || skip > 0 || !cutByLimit)) end -= partial;
  return { skip, keep: end - skip };
}

function isContinuation(b: number): boolean {
  return (b & 0xc0) === 0x80;
}

/** How many bytes at the end of `bytes` (not before `from`) are the start of a character that is not all there. */
function incompleteTail(bytes: Buffer, from: number): number {
  for (let back = 1; back <= 4 && bytes.length - back >= from; back++) {
    const b = bytes[bytes.length - back]!;
    if (isContinuation(b)) continue;
    const want = b >= 0xf8 ? 1 : b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    return want > back ? back : 0;
  }
  return 0;
}

/**
 * Streams the slice as the raw bytes, with the file's backpressure: a
 * reader that stops reading stops the file reads. The slice's offset and
 * the file's size go in headers. Rejects when either side breaks.
 */
export async function sendLogBytes(res: ServerResponse, slice: LogSlice, signal?: AbortSignal): Promise<void> {
  res.writeHead(200, {
    'Content-Type': 'text/plain; charset=utf-8',
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    [LOG_OFFSET_HEADER]: String(slice.start),
    [LOG_SIZE_HEADER]: String(slice.size),
  });
  // The signal ends the pipeline (and closes the file) when the client's connection is gone.
  await pipeline(slice.stream, res, signal ? { signal } : {});
}
