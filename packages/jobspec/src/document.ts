// Reading spec documents (jobspecs, agent configs, volume specs) written in
// HCL or JSON, and a small checked reader over their blocks. HCL goes
// through @cdktn/hcl2json, which turns every block into an array of bodies
// and every labelled block into `{ label: [body] }`; JSON may use that form
// or the natural one (a block is an object, labels are keys). The reader
// accepts both, so every parser above it sees one shape. A reader given a
// Problems collector reports every problem of a document in one pass (the
// jobspec's does); without one, it stops at the first.
import { ValidationError, parseDuration } from '@csiplug/core';
import * as path from 'path';
import { HclSyntaxError, parseHclText } from './hcl-process';
import { complaintLine, quotedNameBlockAsMap } from './hcl1-maps';

/** How many blocks of quoted keys one document may have turned into maps (each is one more parse). */
const MAX_HCL1_MAP_REWRITES = 64;

export type Body = Record<string, unknown>;
export type DocumentFormat = 'hcl' | 'json';

/** `.json` is JSON; `.hcl` and `.nomad` are HCL; otherwise a body starting with `{` is JSON. */
export function detectFormat(text: string, filename: string): DocumentFormat {
  const ext = path.extname(filename).toLowerCase();
  if (ext === '.json') return 'json';
  if (ext === '.hcl' || ext === '.nomad') return 'hcl';
  return text.trimStart().startsWith('{') ? 'json' : 'hcl';
}

/**
 * Parses HCL or JSON text into plain data; syntax errors name the file.
 * `hcl1Maps`: a block of quoted keys is read as a map, as Nomad's HCL 1
 * agent config reads it (hcl1-maps.ts).
 */
export async function loadDocument(text: string, filename: string, options: { hcl1Maps?: boolean } = {}): Promise<Body> {
  const format = detectFormat(text, filename);
  let data: unknown;
  if (format === 'json') {
    try {
      data = JSON.parse(text);
    } catch (err) {
      throw new ValidationError(`${filename}: invalid JSON: ${(err as Error).message}`);
    }
  } else {
    data = await parseHcl(text, filename, options.hcl1Maps === true);
  }
  if (!isBody(data)) throw new ValidationError(`${filename}: the document must be an object`);
  return data;
}

async function parseHcl(text: string, filename: string, hcl1Maps: boolean): Promise<unknown> {
  /** Blocks read as HCL 1 maps so far: where each is, and the complaint that made it one. */
  const asMaps: Array<{ firstLine: number; lastLine: number; complaint: string }> = [];
  for (;;) {
    try {
      // In a short-lived child process: the converter's memory goes with it (hcl-process.ts).
      return await parseHclText(path.basename(filename) || 'input.hcl', text);
    } catch (err) {
      if (!(err instanceof HclSyntaxError))
        throw new Error(`${filename}: could not parse: ${err instanceof Error ? err.message : String(err)}`);
      // hcl2json says "parse config: [file:line,col-col: Summary; Detail.]".
      const detail = err.message.replace(/^parse config: \[/, '').replace(/\]$/, '');
      const asMap = hcl1Maps && asMaps.length < MAX_HCL1_MAP_REWRITES ? quotedNameBlockAsMap(text, detail) : undefined;
      if (asMap !== undefined) {
        asMaps.push({ firstLine: asMap.firstLine, lastLine: asMap.lastLine, complaint: detail });
        text = asMap.text;
        continue;
      }
      throw new ValidationError(`${filename}: invalid HCL: ${hclComplaint(detail, asMaps, hcl1Maps)}`);
    }
  }
}

/**
 * What to say of a complaint: one inside a block this reader made a map of
 * is that block's own first complaint (it is no HCL 1 map either: a block
 * inside it, a name given twice), never words of text the user did not write.
 */
function hclComplaint(
  detail: string,
  asMaps: ReadonlyArray<{ firstLine: number; lastLine: number; complaint: string }>,
  hcl1Maps: boolean,
): string {
  const line = complaintLine(detail);
  const inMap = line === undefined ? undefined : asMaps.find((m) => line >= m.firstLine && line <= m.lastLine);
  if (inMap) return `${inMap.complaint} (read as an HCL 1 map of quoted keys, the block is not one either: ${detail})`;
  if (!/Argument names must not be quoted/.test(detail)) return detail;
  // A block of quoted keys where HCL 1 maps are not read (a jobspec: Nomad's are HCL 2 too), or past the limit.
  const limit = hcl1Maps && asMaps.length >= MAX_HCL1_MAP_REWRITES ? `; only ${MAX_HCL1_MAP_REWRITES} such blocks are read as maps` : '';
  return `${detail} (a block of quoted keys is a map written in HCL 1; in HCL 2 write it as name = { "key" = "value" }${limit})`;
}

export function isBody(v: unknown): v is Body {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Several problems of one document, found in one pass. Its message lists
 * them one per line, in document order; `problems` holds each as the
 * ValidationError it would have been alone (`field` is the first one's).
 */
export class ValidationProblems extends ValidationError {
  constructor(readonly problems: readonly ValidationError[]) {
    super(problems.map((p) => p.message).join('\n'), problems[0]?.field);
  }
}

/** Re-raises a ValidationError with `prefix: ` in front of its message (of each problem's); other errors pass through. */
export function withPrefix<T>(prefix: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (!prefix || !(err instanceof ValidationError)) throw err;
    if (err instanceof ValidationProblems) throw new ValidationProblems(err.problems.map((p) => prefixed(prefix, p)));
    throw prefixed(prefix, err);
  }
}

function prefixed(prefix: string, err: ValidationError): ValidationError {
  return new ValidationError(`${prefix}: ${err.message}`, err.field);
}

const show = (v: unknown): string => (v === undefined ? 'nothing' : JSON.stringify(v));

/**
 * Thrown by Where.fail once the problem is recorded in a Problems: it only
 * unwinds the reading of the field or block at fault to the nearest guard
 * (a BlockReader accessor, Where.guard or check, Problems.attempt), so reading goes
 * on with the next one. It never leaves a reader that collects problems.
 */
class Recorded extends Error {
  constructor() {
    super('a recorded problem (internal: caught by the reader that collects problems)');
    this.name = 'Recorded';
  }
}

/** A problem's place, for sorting: the index of each key on the way to it, in its body. */
type Order = readonly number[];

/** Where a missing key sorts: after everything its object holds. */
const ABSENT = Number.MAX_SAFE_INTEGER;

function compareOrder(a: Order, b: Order): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

/**
 * The problems of one document, collected while a reader goes on past
 * each: the reader reports every problem in one pass instead of stopping
 * at the first. A field (or an object) is reported once: what follows from
 * a field already found wrong (a missing `source` is also not a usable id)
 * is not news. Give it to the top Where; every Where made from that one
 * shares it.
 */
export class Problems {
  private readonly found: { error: ValidationError; order: Order; seq: number }[] = [];
  private readonly reported = new Set<string>();

  get size(): number {
    return this.found.length;
  }

  /** Records `error` at `order`, unless its field (`key`) already has a problem. Returns whether it was recorded. */
  add(error: ValidationError, order: Order, key = `\0${error.message}`): boolean {
    if (this.reported.has(key)) return false;
    this.reported.add(key);
    this.found.push({ error, order, seq: this.found.length });
    return true;
  }

  /** Whether the field (or object) `key` names has a problem already. */
  has(key: string): boolean {
    return this.reported.has(key);
  }

  /**
   * Runs `read`; when it fails with a problem (recorded already, or a
   * ValidationError, recorded now at `order`) returns `fallback` instead.
   * Other errors pass through.
   */
  attempt<T>(read: () => T, fallback: T, order: Order = []): T {
    try {
      return read();
    } catch (err) {
      if (err instanceof Recorded) return fallback;
      if (err instanceof ValidationError) {
        if (err instanceof ValidationProblems) err.problems.forEach((p) => this.add(p, order));
        else this.add(err, order);
        return fallback;
      }
      throw err;
    }
  }

  /** The problems in document order: undefined for none, the one ValidationError as it is, or a ValidationProblems. */
  toError(): ValidationError | undefined {
    const sorted = [...this.found].sort((a, b) => compareOrder(a.order, b.order) || a.seq - b.seq).map((p) => p.error);
    if (sorted.length <= 1) return sorted[0];
    return new ValidationProblems(sorted);
  }

  throwIfAny(): void {
    const err = this.toError();
    if (err) throw err;
  }
}

/**
 * Where a value sits, for error messages: `prefix` names the object (a file,
 * or `job "web" group "app"`), `path` the field within it (`restart.`).
 * With `problems`, each problem is recorded there and reading goes on (see
 * Problems); without, the first one is thrown. `order` is its place in the
 * document, for listing the problems in the order they appear.
 */
export class Where {
  constructor(
    readonly prefix: string,
    readonly path = '',
    readonly problems?: Problems,
    readonly order: Order = [],
  ) {}

  /** The same object, one block deeper; `at` is the block's place in its body. */
  block(field: string, at: Order = []): Where {
    return new Where(this.prefix, `${this.path}${field}.`, this.problems, [...this.order, ...at]);
  }

  /** A new named object (a group, a task) whose fields start afresh; `at` is its place in its body. */
  object(name: string, at: Order = []): Where {
    return new Where(this.prefix ? `${this.prefix} ${name}` : name, '', this.problems, [...this.order, ...at]);
  }

  field(field: string): string {
    return `${this.path}${field}`;
  }

  /** The key a problem of `field` (of the object itself, for '') is known by in Problems. */
  keyOf(field: string): string {
    return `${this.prefix}\0${field === '' ? this.path.replace(/\.$/, '') : this.field(field)}`;
  }

  /** `<prefix>: <path><field> <why>` as a ValidationError. */
  error(field: string, why: string): ValidationError {
    const name = this.field(field);
    return new ValidationError(`${this.prefix ? `${this.prefix}: ` : ''}${name} ${why}`, name);
  }

  /**
   * Throws `<prefix>: <path><field> <why>`. Collecting problems, records it
   * first: what is thrown then only ends the reading of this field or block.
   */
  fail(field: string, why: string, at: Order = []): never {
    const err = this.error(field, why);
    if (!this.problems) throw err;
    this.problems.add(err, [...this.order, ...at], this.keyOf(field));
    throw new Recorded();
  }

  /** As fail, but collecting problems, reading goes on after it. */
  report(field: string, why: string, at: Order = []): void {
    const err = this.error(field, why);
    if (!this.problems) throw err;
    this.problems.add(err, [...this.order, ...at], this.keyOf(field));
  }

  /** Throws `<prefix>: <why>` for a problem with the object as a whole. */
  failObject(why: string, at: Order = []): never {
    this.reportObject(why, at);
    throw new Recorded();
  }

  /** As failObject, but collecting problems, reading goes on after it. */
  reportObject(why: string, at: Order = []): void {
    const name = this.path.replace(/\.$/, '');
    const err = new ValidationError(`${this.prefix ? `${this.prefix}: ` : ''}${name ? `${name} ` : ''}${why}`, name || undefined);
    if (!this.problems) throw err;
    this.problems.add(err, [...this.order, ...at], this.keyOf(''));
  }

  /**
   * Reads a part (a group, a task, a block) that reports its own problems
   * here: collecting problems, a problem that ends it ends only that part,
   * and `fallback` stands in for it. Otherwise the problem is thrown.
   */
  guard<T>(read: () => T, fallback: T, at: Order = []): T {
    return this.problems ? this.problems.attempt(read, fallback, [...this.order, ...at]) : read();
  }

  /**
   * Runs a check made by other code (an id check, a duration parser) whose
   * ValidationError does not say where: it is given this object's prefix,
   * then recorded at `at` with `fallback` returned (collecting problems) or
   * thrown.
   */
  check<T>(read: () => T, fallback: T, at: Order = []): T {
    return this.guard(() => withPrefix(this.prefix, read), fallback, at);
  }
}

/**
 * A checked view of one block body: refuses unknown fields up front (with
 * the advice `unsupported` has for a field it names, say a Nomad field
 * csiplug has no use for), and reads each field with its type, default and
 * limits. `null` counts as unset. When its Where collects problems, a field
 * found wrong is recorded and read as its default (or left out), and
 * reading goes on.
 */
export class BlockReader {
  constructor(
    readonly body: Body,
    readonly where: Where,
    known: readonly string[],
    unsupported: Readonly<Record<string, string>> = {},
  ) {
    for (const key of Object.keys(body)) {
      if (known.includes(key)) continue;
      const advice = Object.hasOwn(unsupported, key) ? unsupported[key] : undefined;
      this.report(
        key,
        advice !== undefined ? `is not supported: ${advice}` : `is not a known field${known.length ? ` (known: ${known.join(', ')})` : ''}`,
      );
    }
  }

  /** A single block (object, or a one-element list as hcl2json gives it) read as a block. */
  static of(
    value: unknown,
    where: Where,
    field: string,
    known: readonly string[],
    unsupported?: Readonly<Record<string, string>>,
    at: Order = [],
  ): BlockReader {
    return new BlockReader(singleBody(value, where, field, at), where.block(field, at), known, unsupported);
  }

  has(key: string): boolean {
    return this.body[key] !== undefined && this.body[key] !== null;
  }

  raw(key: string): unknown {
    return this.has(key) ? this.body[key] : undefined;
  }

  /** The place of `key` (or of the key `volume_mount[1]` or `task "x"` is made from) among the body's keys; a missing key sorts last. */
  at(key: string): Order {
    const i = Object.keys(this.body).indexOf(key.replace(/(\[\d+\]| ").*$/s, ''));
    return [i < 0 ? ABSENT : i];
  }

  fail(key: string, why: string): never {
    return this.where.fail(key, why, this.at(key));
  }

  /** A problem with `key` after which reading goes on (when collecting problems; otherwise thrown). */
  report(key: string, why: string): void {
    this.where.report(key, why, this.at(key));
  }

  /** Whether `key` was found wrong already (collecting problems). */
  failed(key: string): boolean {
    return this.where.problems?.has(this.where.keyOf(key)) ?? false;
  }

  /**
   * Reads one field with `read`; collecting problems, a problem in it is
   * recorded and `fallback` returned, so reading goes on with the next field.
   */
  private guard<T>(key: string, fallback: T, read: () => T): T {
    const problems = this.where.problems;
    if (!problems) return read();
    try {
      return read();
    } catch (err) {
      if (err instanceof Recorded) return fallback;
      if (err instanceof ValidationError && !(err instanceof ValidationProblems)) {
        problems.add(err, [...this.where.order, ...this.at(key)], this.where.keyOf(key));
        return fallback;
      }
      throw err;
    }
  }

  requiredString(key: string): string {
    return this.guard(key, '', () => {
      const v = this.raw(key);
      if (v === undefined || v === '') this.fail(key, 'is required');
      if (typeof v !== 'string') this.fail(key, `must be a string (got ${show(v)})`);
      return v;
    });
  }

  string(key: string): string | undefined;
  string(key: string, dflt: string): string;
  string(key: string, dflt?: string): string | undefined {
    return this.guard(key, dflt, () => {
      const v = this.raw(key);
      if (v === undefined) return dflt;
      if (typeof v !== 'string') this.fail(key, `must be a string (got ${show(v)})`);
      return v;
    });
  }

  /** One of `allowed`; a value found wrong reads as `dflt`, or else the first allowed. */
  oneOf<T extends string>(key: string, allowed: readonly T[], dflt?: T): T {
    return this.guard(key, dflt ?? allowed[0]!, () => {
      const v = this.raw(key) ?? dflt;
      if (v === undefined) this.fail(key, `is required (one of ${allowed.join(', ')})`);
      if (typeof v !== 'string' || !(allowed as readonly string[]).includes(v))
        this.fail(key, `must be one of ${allowed.join(', ')} (got ${show(v)})`);
      return v as T;
    });
  }

  bool(key: string, dflt: boolean): boolean {
    return this.guard(key, dflt, () => {
      const v = this.raw(key);
      if (v === undefined) return dflt;
      if (typeof v !== 'boolean') this.fail(key, `must be true or false (got ${show(v)})`);
      return v;
    });
  }

  int(key: string, dflt: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
    return this.guard(key, dflt, () => {
      const v = this.raw(key);
      if (v === undefined) return dflt;
      if (typeof v !== 'number' || !Number.isInteger(v)) this.fail(key, `must be a whole number (got ${show(v)})`);
      if (v < min || v > max)
        this.fail(
          key,
          max === Number.MAX_SAFE_INTEGER ? `must be at least ${min} (got ${v})` : `must be between ${min} and ${max} (got ${v})`,
        );
      return v;
    });
  }

  number(key: string, dflt: number | undefined, min: number, max: number): number | undefined {
    return this.guard(key, dflt, () => {
      const v = this.raw(key);
      if (v === undefined) return dflt;
      if (typeof v !== 'number' || !Number.isFinite(v)) this.fail(key, `must be a number (got ${show(v)})`);
      if (v < min || v > max) this.fail(key, `must be between ${min} and ${max} (got ${v})`);
      return v;
    });
  }

  /** A Go-style duration ("30s", "1h30m") or a number of milliseconds; returns ms. */
  duration(key: string): number | undefined;
  duration(key: string, dflt: number): number;
  duration(key: string, dflt?: number): number | undefined {
    return this.guard(key, dflt, () => {
      const v = this.raw(key);
      if (v === undefined) return dflt;
      if (typeof v !== 'string' && typeof v !== 'number') this.fail(key, `must be a duration like "30s" (got ${show(v)})`);
      const name = this.where.field(key);
      return withPrefix(this.where.prefix, () => parseDuration(v, name));
    });
  }

  /** A list of strings; collecting problems, each item that is not one is reported and left out. */
  stringList(key: string, dflt: string[] = []): string[] {
    return this.guard(key, [...dflt], () => {
      const v = this.raw(key);
      if (v === undefined) return [...dflt];
      if (!Array.isArray(v)) this.fail(key, `must be a list of strings (got ${show(v)})`);
      return v.flatMap((item: unknown, i) => {
        if (typeof item === 'string') return [item];
        this.report(`${key}[${i}]`, `must be a string (got ${show(item)})`);
        return [];
      });
    });
  }

  /**
   * A string-to-string map, written either as an attribute (`env = { … }`)
   * or as a block (`env { … }`). Collecting problems, each bad entry is
   * reported and left out.
   */
  stringMap(key: string): Record<string, string> {
    return this.guard(key, {}, () => {
      const v = this.raw(key);
      if (v === undefined) return {};
      const body = singleBody(v, this.where, key, this.at(key));
      const w: Where = this.where.block(key, this.at(key));
      const entries = Object.entries(body).flatMap(([k, val], i): [string, string][] => {
        if (k === '' || k.includes('\0')) w.report(JSON.stringify(k), 'is not a usable key', [i]);
        else if (typeof val !== 'string') w.report(k, `must be a string (got ${show(val)}); quote it`, [i]);
        else return [[k, val]];
        return [];
      });
      // fromEntries defines own properties, so a key like "__proto__" stays data.
      return Object.fromEntries(entries);
    });
  }

  /** An optional single block; collecting problems, one that is not a block is reported and read as absent. */
  block(key: string, known: readonly string[], unsupported?: Readonly<Record<string, string>>): BlockReader | undefined {
    return this.guard(key, undefined, () => {
      const v = this.raw(key);
      return v === undefined ? undefined : BlockReader.of(v, this.where, key, known, unsupported, this.at(key));
    });
  }

  /** A repeatable unlabelled block: a list of bodies, or one body. */
  blocks(key: string): Body[] {
    return this.blockList(key).map((b) => b.body);
  }

  /**
   * A repeatable unlabelled block, each with the name its problems are
   * reported under (`volume_mount`, or `volume_mount[1]` when there are
   * several) and its place. Collecting problems, an item that is not a
   * block is reported and left out.
   */
  blockList(key: string): { body: Body; field: string; at: Order }[] {
    return this.guard(key, [], () => {
      const v = this.raw(key);
      if (v === undefined) return [];
      const list: unknown[] = Array.isArray(v) ? v : [v];
      return list.flatMap((item, i) => {
        const field = list.length > 1 ? `${key}[${i}]` : key;
        const at = [...this.at(key), i];
        if (isBody(item)) return [{ body: item, field, at }];
        this.where.report(field, `must be a block (got ${show(item)})`, at);
        return [];
      });
    });
  }

  /**
   * A labelled block (`task "name" { … }`): `{ label: body }` or, from
   * hcl2json, `{ label: [body] }`, each with its place. A label given twice
   * is an error; collecting problems, such a label (or one whose body is
   * not a block) is reported and left out.
   */
  labelled(key: string, what: string): Array<[string, Body, Order]> {
    return this.guard(key, [], () => {
      const v = this.raw(key);
      if (v === undefined) return [];
      if (!isBody(v)) this.fail(key, `must be labelled blocks, like ${key} "name" { … } (got ${show(v)})`);
      return Object.entries(v).flatMap(([label, value], i): Array<[string, Body, Order]> => {
        const at = [...this.at(key), i];
        const field = `${key} "${label}"`;
        if (Array.isArray(value) && value.length > 1) {
          this.where.report(field, `is defined ${value.length} times; ${what} names must be unique`, at);
          return [];
        }
        const body = this.where.problems
          ? this.where.problems.attempt(() => singleBody(value, this.where, field, at), undefined)
          : singleBody(value, this.where, field, at);
        return body ? [[label, body, at]] : [];
      });
    });
  }

  /** How many labels `key` holds: 0 when absent, -1 when it is not labelled blocks at all (a problem reported on its own). */
  labelCount(key: string): number {
    const v = this.raw(key);
    if (v === undefined) return 0;
    return isBody(v) ? Object.keys(v).length : -1;
  }
}

/** A single block body: an object, or a list holding exactly one (the hcl2json form). */
export function singleBody(value: unknown, where: Where, field: string, at: Order = []): Body {
  let v = value;
  if (Array.isArray(v)) {
    if (v.length !== 1)
      where.fail(field, v.length === 0 ? 'is an empty list; give one block' : `may be given once (got ${v.length} blocks)`, at);
    v = v[0];
  }
  if (!isBody(v)) where.fail(field, `must be a block (got ${show(v)})`, at);
  return v;
}
