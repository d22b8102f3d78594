// What the HTTP API's server and client agree on beyond the service's views:
// the token header and the shapes the API adds of its own.

/** The header that carries the ACL token: Nomad's, which its Go api client, the nomad CLI and the Terraform provider send. */
export const TOKEN_HEADER = 'X-Nomad-Token';

/**
 * On an error answer: csiplug's stable error code (EFORBIDDEN, EVOLUME_IN_USE…).
 * A csiplug addition: Nomad answers errors with the message as plain text and
 * nothing else, so its clients read the body alone; the code rides beside it
 * for csiplug's own client and scripts.
 */
export const ERROR_CODE_HEADER = 'X-Csiplug-Error-Code';

/** What ApiClient.allocLogs makes of GET /v1/client/fs/logs/:alloc_id's StreamFrames: a range of a task's log as text. */
export interface AllocLogs {
  allocId: string;
  task: string;
  stream: 'stdout' | 'stderr';
  /** The byte offset (from the start of the file) of the first byte of `data`. */
  offset: number;
  /** The byte offset right after the last byte of `data`: ask for it next to read on. */
  nextOffset: number;
  /** The log file's size in bytes when it was read. */
  size: number;
  /** The bytes from offset to nextOffset, as UTF-8 text (see utf8Window for characters cut by the range). */
  data: string;
}

/** Which part of a log to read: Nomad's fs logs parameters. */
export interface AllocLogsQuery {
  stream?: 'stdout' | 'stderr';
  /** Bytes from `origin`. Default 0. */
  offset?: number;
  /** `start` (default): offset from the first byte; `end`: offset back from the end of the file. */
  origin?: 'start' | 'end';
  /** At most this many bytes. JSON answers default to DEFAULT_LOG_LIMIT and take at most MAX_JSON_LOG_LIMIT; plain ones default to the rest of the file. */
  limit?: number;
}

/** How many bytes of log a JSON answer carries when no limit is given. */
export const DEFAULT_LOG_LIMIT = 64 * 1024;
/** The most a JSON log answer carries; more is streamed with plain=true. */
export const MAX_JSON_LOG_LIMIT = 4 * 1024 * 1024;
/** On a plain=true log answer: the byte offset of its first byte. */
export const LOG_OFFSET_HEADER = 'X-Csiplug-Log-Offset';
/** On a plain=true log answer: the log file's size when it was read. */
export const LOG_SIZE_HEADER = 'X-Csiplug-Log-Size';

/** The answer of DELETE /v1/volume/csi/:id and DELETE /v1/volume/csi/:id/delete. */
export interface VolumeDeleted {
  id: string;
}
