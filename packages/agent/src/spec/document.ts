// Reading spec documents (jobspecs, agent configs, volume specs) written in
// HCL or JSON, and a small checked reader over their blocks. HCL goes
// through @cdktf/hcl2json, which turns every block into an array of bodies
// and every labelled block into `{ label: [body] }`; JSON may use that form
// or the natural one (a block is an object, labels are keys). The reader
// accepts both, so every parser above it sees one shape.
import { ValidationError, parseDuration } from '@csiplug/core';
import * as path from 'path';
import { HclSyntaxError, parseHclText } from './hcl-process';

export type Body = Record<string, unknown>;
export type DocumentFormat = 'hcl' | 'json';

/** `.json` is JSON; `.hcl` and `.nomad` are HCL; otherwise a body starting with `{` is JSON. */
export function detectFormat(text: string, filename: string): DocumentFormat {
  const ext = path.extname(filename).toLowerCase();
  if (ext === '.json') return 'json';
  if (ext === '.hcl' || ext === '.nomad') return 'hcl';
  return text.trimStart().startsWith('{') ? 'json' : 'hcl';
}

/** Parses HCL or JSON text into plain data; syntax errors name the file. */
export async function loadDocument(text: string, filename: string): Promise<Body> {
  const format = detectFormat(text, filename);
  let data: unknown;
  if (format === 'json') {
    try {
      data = JSON.parse(text);
    } catch (err) {
      throw new ValidationError(`${filename}: invalid JSON: ${(err as Error).message}`);
    }
  } else {
    data = await parseHcl(text, filename);
  }
  if (!isBody(data)) throw new ValidationError(`${filename}: the document must be an object`);
  return data;
}

async function parseHcl(text: string, filename: string): Promise<unknown> {
  // In a short-lived child process: the converter's memory goes with it (hcl-process.ts).
  try {
    return await parseHclText(path.basename(filename) || 'input.hcl', text);
  } catch (err) {
    if (!(err instanceof HclSyntaxError)) throw new Error(`${filename}: could not parse: ${err instanceof Error ? err.message : String(err)}`);
    // hcl2json says "parse config: [file:line,col-col: Summary; Detail.]".
    const raw = err.message;
    const detail = raw.replace(/^parse config: \[/, '').replace(/\]$/, '');
    throw new ValidationError(`${filename}: invalid HCL: ${detail}`);
  }
}

export function isBody(v: unknown): v is Body {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Re-raises a ValidationError with `prefix: ` in front of its message; other errors pass through. */
export function withPrefix<T>(prefix: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof ValidationError && prefix) throw new ValidationError(`${prefix}: ${err.message}`, err.field);
    throw err;
  }
}

const show = (v: unknown): string => (v === undefined ? 'nothing' : JSON.stringify(v));

/**
 * Where a value sits, for error messages: `prefix` names the object (a file,
 * or `job "web" group "app"`), `path` the field within it (`restart.`).
 */
export class Where {
  constructor(
    readonly prefix: string,
    readonly path = '',
  ) {}

  /** The same object, one block deeper. */
  block(field: string): Where {
    return new Where(this.prefix, `${this.path}${field}.`);
  }

  /** A new named object (a group, a task) whose fields start afresh. */
  object(name: string): Where {
    return new Where(this.prefix ? `${this.prefix} ${name}` : name);
  }

  field(field: string): string {
    return `${this.path}${field}`;
  }

  /** Throws `<prefix>: <path><field> <why>`. */
  fail(field: string, why: string): never {
    const name = this.field(field);
    throw new ValidationError(`${this.prefix ? `${this.prefix}: ` : ''}${name} ${why}`, name);
  }

  /** Throws `<prefix>: <why>` for a problem with the object as a whole. */
  failObject(why: string): never {
    const name = this.path.replace(/\.$/, '');
    throw new ValidationError(`${this.prefix ? `${this.prefix}: ` : ''}${name ? `${name} ` : ''}${why}`, name || undefined);
  }
}

/**
 * A checked view of one block body: refuses unknown fields up front, and
 * reads each field with its type, default and limits. `null` counts as unset.
 */
export class BlockReader {
  constructor(
    readonly body: Body,
    readonly where: Where,
    known: readonly string[],
  ) {
    for (const key of Object.keys(body)) {
      if (!known.includes(key)) where.fail(key, `is not a known field${known.length ? ` (known: ${known.join(', ')})` : ''}`);
    }
  }

  /** A single block (object, or a one-element list as hcl2json gives it) read as a block. */
  static of(value: unknown, where: Where, field: string, known: readonly string[]): BlockReader {
    return new BlockReader(singleBody(value, where, field), where.block(field), known);
  }

  has(key: string): boolean {
    return this.body[key] !== undefined && this.body[key] !== null;
  }

  raw(key: string): unknown {
    return this.has(key) ? this.body[key] : undefined;
  }

  fail(key: string, why: string): never {
    return this.where.fail(key, why);
  }

  requiredString(key: string): string {
    const v = this.raw(key);
    if (v === undefined || v === '') this.fail(key, 'is required');
    if (typeof v !== 'string') this.fail(key, `must be a string (got ${show(v)})`);
    return v;
  }

  string(key: string): string | undefined;
  string(key: string, dflt: string): string;
  string(key: string, dflt?: string): string | undefined {
    const v = this.raw(key);
    if (v === undefined) return dflt;
    if (typeof v !== 'string') this.fail(key, `must be a string (got ${show(v)})`);
    return v;
  }

  oneOf<T extends string>(key: string, allowed: readonly T[], dflt?: T): T {
    const v = this.raw(key) ?? dflt;
    if (v === undefined) this.fail(key, `is required (one of ${allowed.join(', ')})`);
    if (typeof v !== 'string' || !(allowed as readonly string[]).includes(v)) this.fail(key, `must be one of ${allowed.join(', ')} (got ${show(v)})`);
    return v as T;
  }

  bool(key: string, dflt: boolean): boolean {
    const v = this.raw(key);
    if (v === undefined) return dflt;
    if (typeof v !== 'boolean') this.fail(key, `must be true or false (got ${show(v)})`);
    return v;
  }

  int(key: string, dflt: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
    const v = this.raw(key);
    if (v === undefined) return dflt;
    if (typeof v !== 'number' || !Number.isInteger(v)) this.fail(key, `must be a whole number (got ${show(v)})`);
    if (v < min || v > max) this.fail(key, max === Number.MAX_SAFE_INTEGER ? `must be at least ${min} (got ${v})` : `must be between ${min} and ${max} (got ${v})`);
    return v;
  }

  number(key: string, dflt: number | undefined, min: number, max: number): number | undefined {
    const v = this.raw(key);
    if (v === undefined) return dflt;
    if (typeof v !== 'number' || !Number.isFinite(v)) this.fail(key, `must be a number (got ${show(v)})`);
    if (v < min || v > max) this.fail(key, `must be between ${min} and ${max} (got ${v})`);
    return v;
  }

  /** A Go-style duration ("30s", "1h30m") or a number of milliseconds; returns ms. */
  duration(key: string): number | undefined;
  duration(key: string, dflt: number): number;
  duration(key: string, dflt?: number): number | undefined {
    const v = this.raw(key);
    if (v === undefined) return dflt;
    if (typeof v !== 'string' && typeof v !== 'number') this.fail(key, `must be a duration like "30s" (got ${show(v)})`);
    const name = this.where.field(key);
    return withPrefix(this.where.prefix, () => parseDuration(v, name));
  }

  stringList(key: string, dflt: string[] = []): string[] {
    const v = this.raw(key);
    if (v === undefined) return [...dflt];
    if (!Array.isArray(v)) this.fail(key, `must be a list of strings (got ${show(v)})`);
    v.forEach((item, i) => {
      if (typeof item !== 'string') this.fail(`${key}[${i}]`, `must be a string (got ${show(item)})`);
    });
    return [...(v as string[])];
  }

  /**
   * A string-to-string map, written either as an attribute (`env = { … }`)
   * or as a block (`env { … }`).
   */
  stringMap(key: string): Record<string, string> {
    const v = this.raw(key);
    if (v === undefined) return {};
    const body = singleBody(v, this.where, key);
    const w: Where = this.where.block(key);
    const entries = Object.entries(body).map(([k, val]): [string, string] => {
      if (k === '' || k.includes('\0')) w.fail(JSON.stringify(k), 'is not a usable key');
      if (typeof val !== 'string') w.fail(k, `must be a string (got ${show(val)}); quote it`);
      return [k, val];
    });
    // fromEntries defines own properties, so a key like "__proto__" stays data.
    return Object.fromEntries(entries);
  }

  /** An optional single block. */
  block(key: string, known: readonly string[]): BlockReader | undefined {
    const v = this.raw(key);
    return v === undefined ? undefined : BlockReader.of(v, this.where, key, known);
  }

  /** A repeatable unlabelled block: a list of bodies, or one body. */
  blocks(key: string): Body[] {
    const v = this.raw(key);
    if (v === undefined) return [];
    const list = Array.isArray(v) ? v : [v];
    return list.map((item, i) => {
      if (!isBody(item)) this.fail(list.length > 1 ? `${key}[${i}]` : key, `must be a block (got ${show(item)})`);
      return item;
    });
  }

  /**
   * A labelled block (`task "name" { … }`): `{ label: body }` or, from
   * hcl2json, `{ label: [body] }`. A label given twice is an error.
   */
  labelled(key: string, what: string): Array<[string, Body]> {
    const v = this.raw(key);
    if (v === undefined) return [];
    if (!isBody(v)) this.fail(key, `must be labelled blocks, like ${key} "name" { … } (got ${show(v)})`);
    return Object.entries(v).map(([label, value]): [string, Body] => {
      if (Array.isArray(value) && value.length > 1) this.fail(`${key} "${label}"`, `is defined ${value.length} times; ${what} names must be unique`);
      return [label, singleBody(value, this.where, `${key} "${label}"`)];
    });
  }
}

/** A single block body: an object, or a list holding exactly one (the hcl2json form). */
export function singleBody(value: unknown, where: Where, field: string): Body {
  let v = value;
  if (Array.isArray(v)) {
    if (v.length !== 1) where.fail(field, v.length === 0 ? 'is an empty list; give one block' : `may be given once (got ${v.length} blocks)`);
    v = v[0];
  }
  if (!isBody(v)) where.fail(field, `must be a block (got ${show(v)})`);
  return v;
}
