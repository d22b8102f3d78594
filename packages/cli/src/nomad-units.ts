// Sizes and times of day printed as Nomad's CLI prints them: sizes with
// go-humanize's IBytes (v1.0.1, the version Nomad builds with: "1.0 MiB",
// "977 KiB", "1000 B"), ages with Nomad's prettyTimeDiff ("3m12s ago").
// Durations use core's formatGoDuration (Go's time.Duration String).

const IBYTES_SUFFIXES = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'] as const;

/**
 * Bytes as go-humanize's IBytes prints them: base 1024; one decimal under
 * 10 of the unit, none at or above 10; under 10 bytes as a whole number.
 * The unit is picked with floating-point logarithms as go-humanize picks it,
 * so values a hair under a power of 1024 print as it prints them.
 */
export function humanizeIBytes(bytes: number): string {
  const s = Math.max(0, Math.floor(bytes));
  if (s < 10) return `${s} B`;
  const e = Math.floor(Math.log(s) / Math.log(1024));
  const suffix = IBYTES_SUFFIXES[e]!;
  // go-humanize rounds to tenths: floor(x*10 + 0.5) / 10.
  const tenths = Math.floor((s / 1024 ** e) * 10 + 0.5);
  if (tenths < 100) return `${Math.floor(tenths / 10)}.${tenths % 10} ${suffix}`;
  // Go's "%.0f" rounds an exact half to the even neighbour (10.5 → "10"); other values to the nearest.
  const whole = Math.floor(tenths / 10);
  const rounded = tenths % 10 === 5 ? (whole % 2 === 0 ? whole : whole + 1) : Math.round(tenths / 10);
  return `${rounded} ${suffix}`;
}

/**
 * The time between two instants (ms since the epoch) as Nomad's
 * prettyTimeDiff prints it: each rounded to the second, at most the two
 * largest of y, mo (30 days), d, h, m and s, then "ago" or "from now";
 * "" when `first` is unset.
 */
export function prettyTimeDiff(first: number | undefined | null, second: number): string {
  if (first === undefined || first === null || !Number.isFinite(first) || first === 0) return '';
  const a = Math.round(first / 1000);
  const b = Math.round(second / 1000);
  const suffix = b >= a ? 'ago' : 'from now';
  let u = Math.abs(b - a);
  const periods: string[] = [];
  const push = (n: number, unit: string) => {
    if (n > 0) periods.unshift(`${n}${unit}`);
  };
  push(u % 60, 's');
  u = Math.floor(u / 60);
  push(u % 60, 'm');
  u = Math.floor(u / 60);
  push(u % 24, 'h');
  u = Math.floor(u / 24);
  push(u % 30, 'd');
  u = Math.floor(u / 30);
  push(u % 12, 'mo');
  push(Math.floor(u / 12), 'y');
  if (periods.length === 0) return `0s ${suffix}`;
  return `${periods.slice(0, 2).join('')} ${suffix}`;
}
