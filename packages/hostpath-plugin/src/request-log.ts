// The request log, for tests only and off by default: with --request-log PATH
// (or CSIPLUG_HOSTPATH_REQUEST_LOG) the plugin appends one JSON line per CSI
// request it receives to PATH — the RPC's name, the ids it names, and its
// parameters, volume context and secrets WITH THEIR VALUES — so an end-to-end
// test can check what reached the plugin (a re-registered volume's new
// secrets at the next stage, a snapshot's per-call parameters). Secrets are
// written in the clear on purpose: never turn it on outside a test. The file
// is owner-only (0600): made so before the first request, and a file there
// already (a mode only applies when a file is made) is set to 0600 first.
import * as fs from 'node:fs';
import { type Logger, errorMessage } from '@csiplug/core';
import { CSI_SERVICES, type CsiCallContext, type CsiServerHandlers, type CsiServiceKey, csiPackageDefinition } from '@csiplug/csi';

/** One line of the request log. */
export interface LoggedRequest {
  rpc: string;
  /** When the request came, ms since the epoch. */
  time: number;
  volumeId?: string;
  snapshotId?: string;
  sourceVolumeId?: string;
  name?: string;
  parameters?: Record<string, string>;
  volumeContext?: Record<string, string>;
  secrets?: Record<string, string>;
}

type AnyHandler = (req: unknown, ctx: CsiCallContext) => unknown;

const ID_FIELDS = ['volumeId', 'snapshotId', 'sourceVolumeId', 'name'] as const;
const MAP_FIELDS = ['parameters', 'volumeContext', 'secrets'] as const;

/** What of `req` the log keeps: the ids and the three maps, when the request has them. */
export function loggedRequestOf(rpc: string, req: unknown, time: number): LoggedRequest {
  const out: LoggedRequest = { rpc, time };
  if (typeof req !== 'object' || req === null) return out;
  const fields = req as Record<string, unknown>;
  for (const f of ID_FIELDS) if (typeof fields[f] === 'string' && fields[f] !== '') out[f] = fields[f];
  for (const f of MAP_FIELDS) {
    const map = fields[f];
    if (typeof map === 'object' && map !== null && Object.keys(map).length > 0) out[f] = { ...(map as Record<string, string>) };
  }
  return out;
}

/** Reads a request log back: its lines, oldest first (none when the file is not there yet). */
export function readRequestLog(file: string): LoggedRequest[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as LoggedRequest);
}

/** Makes `file` (0600) or makes the one there owner-only, before anything is written to it; throws saying what is wrong. */
export function prepareRequestLog(file: string): void {
  const fd = fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT | fs.constants.O_NOFOLLOW, 0o600);
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw new Error(`the request log ${file} is not a regular file; give --request-log a file path`);
    if ((st.mode & 0o777) !== 0o600) fs.fchmodSync(fd, 0o600);
  } finally {
    fs.closeSync(fd);
  }
}

/** `handlers` with each request appended to `file` before it is handled; the file is owner-only first (prepareRequestLog). */
export function withRequestLog(handlers: CsiServerHandlers, file: string, logger: Logger): CsiServerHandlers {
  prepareRequestLog(file);
  logger.warn('request log on (test only): every request, secrets included, is written to the file', { file });
  const wrap =
    (rpc: string, handler: AnyHandler): AnyHandler =>
    (req, ctx) => {
      try {
        fs.appendFileSync(file, `${JSON.stringify(loggedRequestOf(rpc, req, Date.now()))}\n`, { mode: 0o600 });
      } catch (err) {
        // The log is a test's view only: a failed write must not change what the plugin answers.
        logger.error('could not append to the request log', { file, rpc, error: errorMessage(err) });
      }
      return handler(req, ctx);
    };
  const def = csiPackageDefinition();
  const out: Partial<Record<CsiServiceKey, Record<string, AnyHandler>>> = {};
  for (const svc of Object.keys(CSI_SERVICES) as CsiServiceKey[]) {
    const given = (handlers as unknown as Record<CsiServiceKey, Record<string, AnyHandler | undefined> | undefined>)[svc];
    if (!given) continue;
    const wrapped: Record<string, AnyHandler> = {};
    // Only the RPCs the plugin has: the others stay UNIMPLEMENTED, as the server answers them.
    for (const rpc of Object.keys(def[CSI_SERVICES[svc]] as object)) {
      const handler = given[rpc];
      if (handler) wrapped[rpc] = wrap(rpc, handler);
    }
    out[svc] = wrapped;
  }
  return out as unknown as CsiServerHandlers;
}
