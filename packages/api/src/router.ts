// A small path router: `/v1/job/:id` patterns matched segment by segment.
// A path that matches a route under another method is a 405 (with the
// methods that would do), not a 404. A route may carry options (what the
// server must know of it, e.g. that a blocking query never holds it).
import { ApiError, ApiErrorCode } from './api-error';

export type RouteParams = Record<string, string>;

/**
 * What the server must know of a route beyond its handler. A GET route not
 * answered at once must answer from its path and query alone: identical held
 * queries share one compute (query-index.ts SharedComputes), which runs with
 * the first caller's request — a handler that reads request headers (secrets,
 * a caller's identity) must be answered at once.
 */
export interface RouteOptions {
  /**
   * A read answered at once even when a blocking query (?index=N) asks to
   * wait: its handler calls a plugin (a gRPC call per compute), reads etcd,
   * reads request headers, or writes its own response, so it is never
   * computed again on the agent's events.
   */
  answersAtOnce?: boolean;
}

interface Route<H> {
  method: string;
  segments: string[];
  handler: H;
  options: RouteOptions;
}

export type RouteMatch<H> =
  { kind: 'found'; handler: H; params: RouteParams; options: RouteOptions } | { kind: 'method'; allowed: string[] } | { kind: 'none' };

export class Router<H> {
  private readonly routes: Route<H>[] = [];

  add(method: string, pattern: string, handler: H, options: RouteOptions = {}): this {
    this.routes.push({ method: method.toUpperCase(), segments: split(pattern), handler, options });
    return this;
  }

  /**
   * Matches a raw (still percent-encoded) path. Segments are decoded one by
   * one after splitting, so an encoded "/" stays inside its id.
   */
  match(method: string, rawPath: string): RouteMatch<H> {
    const segments = split(rawPath).map(decodeSegment);
    const allowed = new Set<string>();
    for (const route of this.routes) {
      const params = matchSegments(route.segments, segments);
      if (!params) continue;
      if (route.method === method.toUpperCase()) return { kind: 'found', handler: route.handler, params, options: route.options };
      allowed.add(route.method);
    }
    return allowed.size ? { kind: 'method', allowed: [...allowed].sort() } : { kind: 'none' };
  }
}

function split(path: string): string[] {
  return path.split('/').filter((s) => s !== '');
}

function decodeSegment(segment: string): string {
  let decoded: string;
  try {
    decoded = decodeURIComponent(segment);
  } catch {
    throw new ApiError(400, ApiErrorCode.Invalid, `the path segment "${segment}" is not valid percent-encoding`);
  }
  // No id holds a control character (the specs refuse them): such a segment is a bad request, not an id to look up.
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(decoded)) {
    throw new ApiError(400, ApiErrorCode.Invalid, `the path segment "${segment}" decodes to control characters, which no id may hold`);
  }
  return decoded;
}

function matchSegments(pattern: string[], path: string[]): RouteParams | undefined {
  if (pattern.length !== path.length) return undefined;
  const params: RouteParams = {};
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i]!;
    const s = path[i]!;
    if (p.startsWith(':')) {
      if (s === '') return undefined;
      params[p.slice(1)] = s;
    } else if (p !== s) {
      return undefined;
    }
  }
  return params;
}
