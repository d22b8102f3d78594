// Times as Nomad's api package carries them, and back: CreateTime and
// ModifyTime are Unix nanoseconds (int64), time.Time fields are RFC 3339
// strings with Go's zero time "0001-01-01T00:00:00Z" for "never". csiplug
// keeps milliseconds since the epoch; these are the only conversions.

/** Go's zero time.Time as encoding/json writes it: what Nomad sends for a time never set. */
export const GO_ZERO_TIME = '0001-01-01T00:00:00Z';

/** Milliseconds since the epoch as Unix nanoseconds (an int64 on Nomad's side; exact to the millisecond here). */
export function msToUnixNano(ms: number): number {
  return Math.round(ms) * 1_000_000;
}

/** Unix nanoseconds back to milliseconds since the epoch (0 stays 0). */
export function unixNanoToMs(nanos: number): number {
  return Math.round(nanos / 1_000_000);
}

/** Milliseconds since the epoch as a Go time.Time in JSON; undefined (never) as Go's zero time. */
export function msToGoTime(ms: number | undefined): string {
  return ms === undefined ? GO_ZERO_TIME : new Date(ms).toISOString();
}

/** A Go time.Time from JSON back to milliseconds since the epoch; Go's zero time, or anything unreadable, as undefined. */
export function goTimeToMs(value: unknown): number | undefined {
  if (typeof value !== 'string' || value === '' || value.startsWith('0001-01-01')) return undefined;
  const ms = Date.parse(value);
  return Number.isFinite(ms) ? ms : undefined;
}
