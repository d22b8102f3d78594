// Output for people, the way Nomad's CLI lays it out: aligned columns for
// lists, `Key = value` blocks for one object, short ids unless -verbose.
import type { MountUsageView } from '@csiplug/api/client';
import { humanizeIBytes } from './nomad-units';

/** Columns padded to their widest cell, two spaces apart, no trailing blanks. */
export function formatTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const all = [header, ...rows];
  const widths = header.map((_, c) => Math.max(...all.map((r) => (r[c] ?? '').length)));
  return all
    .map((r) =>
      r
        .map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]!)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** `Key   = value` lines with the `=` aligned. */
export function formatKV(pairs: readonly (readonly [string, string])[]): string {
  const width = Math.max(0, ...pairs.map(([k]) => k.length));
  return pairs.map(([k, v]) => `${k.padEnd(width)} = ${v}`.trimEnd()).join('\n');
}

/** ms since the epoch as `2026-01-02T03:04:05Z`; unset as `N/A`. */
export function formatTime(ms: number | undefined | null): string {
  if (ms === undefined || ms === null || !Number.isFinite(ms) || ms <= 0) return 'N/A';
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** The first 8 characters of an id, as Nomad shows them, unless `verbose`. */
export function shortId(id: string, verbose: boolean): string {
  return verbose ? id : id.slice(0, 8);
}

export function orNone(value: string | undefined | null): string {
  return value === undefined || value === null || value === '' ? '<none>' : value;
}

/** A nested info value on one line: scalars as they are, the rest as JSON. */
export function formatValue(v: unknown): string {
  if (v === undefined || v === null) return '<none>';
  if (typeof v === 'string') return v === '' ? '<none>' : v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return JSON.stringify(v);
}

/** Pretty JSON for -json, ending in a newline. */
export function formatJson(v: unknown): string {
  return `${JSON.stringify(v, null, 2)}\n`;
}

/** Words filled into lines of at most `width` characters, each starting with `indent`. */
export function wrap(text: string, width = 76, indent = '  '): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line && line.length + 1 + word.length > width - indent.length) {
      lines.push(indent + line);
      line = word;
    } else {
      line = line ? `${line} ${word}` : word;
    }
  }
  if (line) lines.push(indent + line);
  return lines.join('\n');
}

/**
 * One mount's usage for a table cell: `12 KiB of 1.0 GiB (1%)`, sizes as Nomad prints them, the condition
 * when the plugin reports it abnormal, or why it could not be read.
 */
export function usageText(u: MountUsageView | Error | undefined): string {
  if (u === undefined) return '<none>';
  if (u instanceof Error) return `<unknown: ${u.message}>`;
  if (u.error !== undefined || !u.usage) return `<unknown: ${u.error ?? 'no stats'}>`;
  const b = u.usage.bytes;
  let text = '<not reported>';
  if (b?.used !== undefined) {
    text = humanizeIBytes(b.used);
    if (b.total) text += ` of ${humanizeIBytes(b.total)} (${Math.round((b.used / b.total) * 100)}%)`;
  }
  if (u.usage.condition?.abnormal) text += `; ABNORMAL: ${u.usage.condition.message}`;
  return text;
}
