// Durations printed as Nomad prints them: Go's time.Duration String form
// ("1m0s", "1h0m0s", "1.5s", "250ms", "1.5µs"), the form its CLI and its
// messages use for every duration, and one parseDuration reads back.

const NS_PER_MS = 1_000_000n;
const NS_PER_S = 1_000_000_000n;

/**
 * Milliseconds (fractions kept to the nanosecond) as Go's
 * `time.Duration.String()` prints them: 60000 → "1m0s", 60017 → "1m0.017s",
 * 1500 → "1.5s", 250 → "250ms", 0 → "0s".
 */
export function formatGoDuration(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  const totalNs = BigInt(Math.round(ms * 1e6));
  const negative = totalNs < 0n;
  const ns = negative ? -totalNs : totalNs;
  const sign = negative ? '-' : '';
  if (ns === 0n) return '0s';
  if (ns < NS_PER_S) {
    // Under a second Go picks the largest of ns, µs and ms below the value.
    if (ns < 1000n) return `${sign}${ns}ns`;
    if (ns < NS_PER_MS) return `${sign}${withFraction(ns, 3)}µs`;
    return `${sign}${withFraction(ns, 6)}ms`;
  }
  const seconds = withFraction(ns % (60n * NS_PER_S), 9);
  const minutes = ns / (60n * NS_PER_S);
  if (minutes === 0n) return `${sign}${seconds}s`;
  const hours = minutes / 60n;
  if (hours === 0n) return `${sign}${minutes}m${seconds}s`;
  return `${sign}${hours}h${minutes % 60n}m${seconds}s`;
}

/** `value / 10^digits` with its fraction's trailing zeros (and a bare point) dropped, as Go's fmtFrac. */
function withFraction(value: bigint, digits: number): string {
  const scale = 10n ** BigInt(digits);
  const whole = value / scale;
  const fraction = (value % scale).toString().padStart(digits, '0').replace(/0+$/, '');
  return fraction ? `${whole}.${fraction}` : `${whole}`;
}
