// Go-style durations as used in Nomad configs: "250ms", "30s", "1m", "24h",
// "1h30m". Numbers given without a unit are milliseconds.
import { ValidationError } from './errors';

const UNITS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const PART = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h|d)/y;

/**
 * Parses a duration into milliseconds. `where` names the setting in the
 * error, e.g. `timeouts.probe`.
 */
export function parseDuration(input: string | number, where = 'duration'): number {
  if (typeof input === 'number') {
    if (!Number.isFinite(input) || input < 0) throw new ValidationError(`${where}: ${input} is not a non-negative duration`, where);
    return input;
  }
  const text = input.trim();
  if (text === '0') return 0;
  if (text === '')
    throw new ValidationError(`${where}: empty duration; use a number with a unit, like "250ms", "30s", "1m" or "24h"`, where);
  let total = 0;
  PART.lastIndex = 0;
  let pos = 0;
  while (pos < text.length) {
    PART.lastIndex = pos;
    const m = PART.exec(text);
    if (!m) {
      throw new ValidationError(
        `${where}: cannot parse duration "${input}"; use a number with a unit, like "250ms", "30s", "1m" or "24h"`,
        where,
      );
    }
    total += Number(m[1]) * UNITS[m[2]!]!;
    pos = PART.lastIndex;
  }
  return Math.round(total * 1000) / 1000;
}

/** Formats milliseconds the way parseDuration reads them: 90000 → "1m30s". */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  if (ms < 1000) return `${ms}ms`;
  const parts: string[] = [];
  let rest = Math.round(ms);
  for (const [unit, size] of [
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
    ['ms', 1],
  ] as const) {
    const n = Math.floor(rest / size);
    if (n > 0) parts.push(`${n}${unit}`);
    rest -= n * size;
  }
  return parts.join('');
}
