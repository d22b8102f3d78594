// Reading a request body as JSON under a size limit, and checking the
// envelope (`{ "Job": … }`) before the content is validated.
import type { IncomingMessage } from 'http';
import { ApiError, ApiErrorCode } from './api-error';

export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

/** Thrown for a body over the limit; the server answers 400 and drops the rest of the body. */
export class BodyTooLargeError extends ApiError {
  constructor(readonly limit: number) {
    super(400, ApiErrorCode.BodyTooLarge, `the request body is larger than the limit of ${limit} bytes`);
  }
}

/**
 * Reads the whole body, failing as soon as it passes `limit` bytes (or at once
 * when Content-Length says it will). After a failure the rest of the body is
 * left to the caller, which answers and drains it.
 */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(new BodyTooLargeError(limit));
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (err?: Error) => {
      if (done) return;
      done = true;
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
      if (err) reject(err);
      else resolve(Buffer.concat(chunks, size));
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        chunks.length = 0;
        finish(new BodyTooLargeError(limit));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => finish();
    const onError = (err: Error) => finish(err);
    const onClose = () => finish(new ApiError(400, 'ECLIENT_CLOSED', 'the client closed the connection before sending the whole body'));
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

/** How deep objects and arrays may nest in a body; a jobspec needs about 10. */
export const MAX_JSON_DEPTH = 64;

/**
 * The deepest nesting of objects and arrays in `text`, stopping early once
 * it passes `limit`. One pass over the characters, strings skipped: a body
 * nested 100,000 deep is refused before anything recursive reads it.
 */
export function jsonDepthExceeds(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \\ */) i++;
      else if (c === 0x22 /* " */) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (++depth > limit) return true;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) depth--;
  }
  return false;
}

/** Parses a body as JSON; an empty, malformed or too deeply nested body is a 400 that says why. */
export function parseJsonBody(body: Buffer, maxDepth: number = MAX_JSON_DEPTH): unknown {
  const text = body.toString('utf8');
  if (text.trim() === '') throw ApiError.badRequest('the request body is empty; send a JSON document', ApiErrorCode.BadJson);
  if (jsonDepthExceeds(text, maxDepth)) {
    throw ApiError.badRequest(
      `the request body nests objects and arrays more than ${maxDepth} deep; no csiplug document needs that`,
      ApiErrorCode.BadJson,
    );
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw ApiError.badRequest(`the request body is not valid JSON: ${(err as Error).message}`, ApiErrorCode.BadJson);
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Unwraps `{ "<key>": <document> }`. A body that carries `key` may hold
 * nothing else; a body without it is the bare document, and its own fields
 * are checked by the validator that reads it.
 */
export function unwrapEnvelope(body: unknown, key: string): unknown {
  if (!isObject(body)) throw ApiError.badRequest(`the request body must be a JSON object like { "${key}": { … } }`);
  if (!(key in body)) return body;
  const extra = Object.keys(body).filter((k) => k !== key);
  if (extra.length) {
    throw ApiError.badRequest(`unknown field ${extra.map((k) => JSON.stringify(k)).join(', ')} in the request body (known: ${key})`);
  }
  return body[key];
}
