// The route table's small helpers: query parameters read and checked the
// way every route reads them (a bad one is a 400 naming it). Split from
// http-api.ts, which serves the routes.
import { ApiError } from './api-error';

/** `?x`, `?x=true|1` → true; `?x=false|0` or absent → false; anything else is a 400. */
export function boolParam(query: URLSearchParams, name: string): boolean {
  const v = query.get(name);
  if (v === null || v === 'false' || v === '0') return false;
  if (v === '' || v === 'true' || v === '1') return true;
  throw ApiError.badRequest(`query parameter ${name} must be true or false (got "${v}")`);
}

/** Go's strconv.ParseBool, as Nomad reads its boolean parameters: absent or empty is false. */
export function goBoolParam(query: URLSearchParams, name: string): boolean {
  const v = query.get(name);
  if (v === null || v === '') return false;
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(v)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(v)) return false;
  throw ApiError.badRequest(
    `query parameter ${name} must be a boolean: true or false (or 1, t, T, TRUE, True, 0, f, F, FALSE, False); got "${v}"`,
  );
}

/** A whole number that may be negative, as Go's strconv.ParseInt reads an int64 (Nomad's log offset). */
export function goInt64Param(query: URLSearchParams, name: string): number {
  const v = query.get(name);
  if (v === null || v === '') return 0;
  if (!/^[+-]?\d+$/.test(v) || BigInt(v) > 2n ** 63n - 1n || BigInt(v) < -(2n ** 63n))
    throw ApiError.badRequest(`query parameter ${name} must be a whole number between -2^63 and 2^63-1 (got "${v}")`);
  return Number(v);
}

export function intParam(query: URLSearchParams, name: string, dflt: number): number {
  const v = query.get(name);
  if (v === null || v === '') return dflt;
  if (!/^\d+$/.test(v) || !Number.isSafeInteger(Number(v)))
    throw ApiError.badRequest(`query parameter ${name} must be a whole number of at least 0 (got "${v}")`);
  return Number(v);
}

export function oneOf<T extends string>(query: URLSearchParams, name: string, allowed: readonly T[], dflt: T): T {
  const v = query.get(name);
  if (v === null || v === '') return dflt;
  if (!(allowed as readonly string[]).includes(v))
    throw ApiError.badRequest(`query parameter ${name} must be one of ${allowed.join(', ')} (got "${v}")`);
  return v as T;
}

/** Nomad's list endpoints take `?type=csi`; csi is the only type here. */
export function csiTypeParam(query: URLSearchParams): void {
  const type = query.get('type');
  if (type !== null && type !== '' && type !== 'csi')
    throw ApiError.badRequest(`query parameter type must be csi, the only plugin type (got "${type}")`);
}

/** Nomad's `?namespace=`: csiplug has one, "default" ("" is it too; "*", every namespace, where `wildcard`). */
export function namespaceParam(query: URLSearchParams, options: { wildcard: boolean }): void {
  const ns = query.get('namespace');
  if (ns === null || ns === '' || ns === 'default' || (options.wildcard && ns === '*')) return;
  throw ApiError.badRequest(
    `query parameter namespace "${ns}" is not known: csiplug has one namespace, "default"; leave -namespace out or give "default"`,
  );
}

/** Snapshots one PUT /v1/volumes/snapshot may ask for. */
export const MAX_SNAPSHOTS_PER_REQUEST = 16;

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
