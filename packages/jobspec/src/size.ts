// Byte sizes as Nomad volume specs write them: "1GiB" (powers of 1024),
// "100MB" or "100M" (powers of 1000), "512B", or a plain number of bytes.
import { ValidationError } from '@csiplug/core';

const UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1e3,
  kb: 1e3,
  m: 1e6,
  mb: 1e6,
  g: 1e9,
  gb: 1e9,
  t: 1e12,
  tb: 1e12,
  p: 1e15,
  pb: 1e15,
  ki: 2 ** 10,
  kib: 2 ** 10,
  mi: 2 ** 20,
  mib: 2 ** 20,
  gi: 2 ** 30,
  gib: 2 ** 30,
  ti: 2 ** 40,
  tib: 2 ** 40,
  pi: 2 ** 50,
  pib: 2 ** 50,
};
const SIZE = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i;

/** Parses a size into whole bytes (fractions round down). `where` names the setting in the error. */
export function parseSize(input: string | number, where = 'size'): number {
  if (typeof input === 'number') {
    if (!Number.isSafeInteger(input) || input < 0)
      throw new ValidationError(`${where}: ${input} is not a whole, non-negative number of bytes`, where);
    return input;
  }
  const m = SIZE.exec(input.trim());
  const unit = m ? UNITS[m[2]!.toLowerCase()] : undefined;
  if (!m || unit === undefined) {
    throw new ValidationError(
      `${where}: cannot parse size "${input}"; use bytes or a number with a unit, like "512MiB", "10GiB" or "100MB"`,
      where,
    );
  }
  const bytes = Math.floor(Number(m[1]) * unit);
  if (!Number.isSafeInteger(bytes)) throw new ValidationError(`${where}: size "${input}" is too large`, where);
  return bytes;
}

/** Formats bytes with the largest binary unit that divides them: 10485760 → "10MiB". */
export function formatSize(bytes: number): string {
  for (const [unit, size] of [
    ['PiB', 2 ** 50],
    ['TiB', 2 ** 40],
    ['GiB', 2 ** 30],
    ['MiB', 2 ** 20],
    ['KiB', 2 ** 10],
  ] as const) {
    if (bytes >= size && bytes % size === 0) return `${bytes / size}${unit}`;
  }
  return `${bytes}B`;
}
