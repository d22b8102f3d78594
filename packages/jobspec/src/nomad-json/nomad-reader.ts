// A checked reader over one object of Nomad's JSON job format, for the
// codec in from-nomad-json.ts: each problem is named by its path in the
// body as Nomad spells it (`Job.TaskGroups[0].Tasks[1].Services`), and all
// of a body's problems are found in one pass. Its rules say, per field,
// whether csiplug reads it, refuses it (unless it holds what Nomad's JSON
// carries for it when the jobspec left it out), or ignores it because
// Nomad's server sets it.
import { ValidationError } from '@csiplug/core';
import { ValidationProblems } from '../document';

/** How a field of a Nomad object is treated. */
export type FieldRule =
  /** Read into the job. */
  | { kind: 'read' }
  /**
   * Not supported: refused with `advice` unless its value is one Nomad's JSON
   * carries when the jobspec left the field out (`accepts`; by default
   * null, false, 0, "", [] or {}, and objects of only such values).
   */
  | { kind: 'unsupported'; advice: string; accepts?: (value: unknown) => boolean }
  /** Set by Nomad's server, never by a jobspec (indexes, status…): present in what GET /v1/job answers, ignored here as Nomad ignores it on register. */
  | { kind: 'server' };

export type FieldRules = Readonly<Record<string, FieldRule>>;

export const READ: FieldRule = { kind: 'read' };
export const SERVER: FieldRule = { kind: 'server' };
export const unsupported = (advice: string, accepts?: (value: unknown) => boolean): FieldRule => ({ kind: 'unsupported', advice, accepts });

/** Nomad's zero value of a field: what its JSON holds for a field a jobspec did not set. */
export function isZero(value: unknown): boolean {
  if (value === null || value === undefined || value === false || value === 0 || value === '') return true;
  if (Array.isArray(value)) return value.length === 0;
  if (typeof value === 'object') return Object.values(value).every(isZero);
  return false;
}

/**
 * Accepts the zero value, or an object each of whose fields is zero or the
 * default Nomad's Canonicalize fills in (`defaults`), or exactly one of `values`.
 */
export function zeroOr(defaults: Readonly<Record<string, unknown>> | readonly unknown[]): (value: unknown) => boolean {
  return (value) => {
    if (isZero(value)) return true;
    if (Array.isArray(defaults)) return defaults.some((d) => JSON.stringify(d) === JSON.stringify(value));
    if (!isPlainObject(value)) return false;
    return Object.entries(value).every(
      ([k, v]) =>
        isZero(v) || (Object.hasOwn(defaults, k) && JSON.stringify((defaults as Record<string, unknown>)[k]) === JSON.stringify(v)),
    );
  };
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const show = (v: unknown): string => JSON.stringify(v) ?? String(v);

/** The problems of one Nomad JSON body, each with its path. */
export class NomadProblems {
  private readonly found: ValidationError[] = [];

  /** `lenient`: reading an answer (a newer agent may send fields this one does not know): unknown and unsupported fields pass. */
  constructor(readonly lenient = false) {}

  report(path: string, why: string): void {
    this.found.push(new ValidationError(`${path} ${why}`, path));
  }

  get size(): number {
    return this.found.length;
  }

  /** Throws the one problem as it is, or several as one ValidationProblems (one per line). */
  throwIfAny(): void {
    if (this.found.length === 1) throw this.found[0]!;
    if (this.found.length > 1) throw new ValidationProblems(this.found);
  }
}

/** One object of the body at `path`: its fields read with their types; problems reported, never thrown. */
export class NomadObject {
  private constructor(
    readonly body: Record<string, unknown>,
    readonly path: string,
    readonly problems: NomadProblems,
  ) {}

  /**
   * The object at `path`, its fields checked against `rules` (unknown and
   * unsupported ones reported); undefined (reported) when it is not an object.
   */
  static read(value: unknown, path: string, problems: NomadProblems, rules: FieldRules): NomadObject | undefined {
    if (!isPlainObject(value)) {
      problems.report(path || 'the request body', `must be an object (got ${show(value)})`);
      return undefined;
    }
    const object = new NomadObject(value, path, problems);
    object.checkFields(rules);
    return object;
  }

  private checkFields(rules: FieldRules): void {
    if (this.problems.lenient) return;
    const read = Object.entries(rules)
      .filter(([, r]) => r.kind === 'read')
      .map(([k]) => k);
    for (const [key, value] of Object.entries(this.body)) {
      const rule = Object.hasOwn(rules, key) ? rules[key]! : undefined;
      if (!rule) {
        this.report(key, `is not a field csiplug knows here (the fields it reads: ${read.join(', ')})`);
      } else if (rule.kind === 'unsupported' && !(rule.accepts ?? isZero)(value)) {
        this.report(key, `is not supported: ${rule.advice}`);
      }
    }
  }

  /** The path of `key`: `Job.TaskGroups[0].Count`; at the top of a request body (path ""), the key alone. */
  at(key: string): string {
    return this.path ? `${this.path}.${key}` : key;
  }

  report(key: string, why: string): void {
    this.problems.report(this.at(key), why);
  }

  /** The raw value; null reads as absent, as Nomad's JSON writes an unset pointer. */
  raw(key: string): unknown {
    const v = this.body[key];
    return v === null ? undefined : v;
  }

  has(key: string): boolean {
    return this.raw(key) !== undefined;
  }

  /** A string; "" reads as absent where `emptyIsUnset` (a Go string field Nomad leaves empty when not set). */
  string(key: string, emptyIsUnset = false): string | undefined {
    const v = this.raw(key);
    if (v === undefined) return undefined;
    if (typeof v !== 'string') {
      this.report(key, `must be a string (got ${show(v)})`);
      return undefined;
    }
    return emptyIsUnset && v === '' ? undefined : v;
  }

  bool(key: string): boolean | undefined {
    const v = this.raw(key);
    if (v === undefined) return undefined;
    if (typeof v !== 'boolean') {
      this.report(key, `must be true or false (got ${show(v)})`);
      return undefined;
    }
    return v;
  }

  int(key: string): number | undefined {
    const v = this.raw(key);
    if (v === undefined) return undefined;
    if (typeof v !== 'number' || !Number.isSafeInteger(v)) {
      this.report(key, `must be a whole number (got ${show(v)})`);
      return undefined;
    }
    return v;
  }

  /**
   * A Go time.Duration (whole nanoseconds, as Nomad's JSON has every
   * duration) as csiplug's milliseconds: exact, a fraction where the
   * nanoseconds are not whole milliseconds.
   */
  nanos(key: string): number | undefined {
    const v = this.raw(key);
    if (v === undefined) return undefined;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
      const hint = typeof v === 'string' ? ' — Nomad\'s JSON gives durations in nanoseconds, like 30000000000 for "30s"' : '';
      this.report(key, `must be a duration in nanoseconds, a whole number of at least 0 (got ${show(v)})${hint}`);
      return undefined;
    }
    return nanosToMs(v);
  }

  stringList(key: string): string[] | undefined {
    const v = this.raw(key);
    if (v === undefined) return undefined;
    if (!Array.isArray(v)) {
      this.report(key, `must be a list of strings (got ${show(v)})`);
      return undefined;
    }
    const bad = v.findIndex((item) => typeof item !== 'string');
    if (bad >= 0) {
      this.problems.report(`${this.at(key)}[${bad}]`, `must be a string (got ${show(v[bad])})`);
      return undefined;
    }
    return v as string[];
  }

  /** A map of strings (Env, Meta…): each value that is not a string is reported. */
  stringMap(key: string): Record<string, string> | undefined {
    const v = this.raw(key);
    if (v === undefined) return undefined;
    if (!isPlainObject(v)) {
      this.report(key, `must be an object of strings (got ${show(v)})`);
      return undefined;
    }
    let ok = true;
    for (const [k, val] of Object.entries(v)) {
      if (typeof val !== 'string') {
        this.problems.report(`${this.at(key)}[${JSON.stringify(k)}]`, `must be a string (got ${show(val)}); quote it`);
        ok = false;
      }
    }
    return ok ? Object.fromEntries(Object.entries(v) as [string, string][]) : undefined;
  }

  /** An object whose fields are the driver's own (Config): passed on as it is. */
  anyObject(key: string): Record<string, unknown> | undefined {
    const v = this.raw(key);
    if (v === undefined) return undefined;
    if (!isPlainObject(v)) {
      this.report(key, `must be an object (got ${show(v)})`);
      return undefined;
    }
    return v;
  }

  /** A nested object, checked against its rules. */
  object(key: string, rules: FieldRules): NomadObject | undefined {
    const v = this.raw(key);
    return v === undefined ? undefined : NomadObject.read(v, this.at(key), this.problems, rules);
  }

  /** A list of objects, each checked against `rules`; the ones that are not objects are reported and left out. */
  objectList(key: string, rules: FieldRules): NomadObject[] {
    const v = this.raw(key);
    if (v === undefined) return [];
    if (!Array.isArray(v)) {
      this.report(key, `must be a list (got ${show(v)})`);
      return [];
    }
    return v.flatMap((item, i) => NomadObject.read(item, `${this.at(key)}[${i}]`, this.problems, rules) ?? []);
  }

  /** A map of objects (a group's Volumes), each checked against `rules`, with its key. */
  objectMap(key: string, rules: FieldRules): [string, NomadObject][] {
    const v = this.raw(key);
    if (v === undefined) return [];
    if (!isPlainObject(v)) {
      this.report(key, `must be an object of named objects (got ${show(v)})`);
      return [];
    }
    return Object.entries(v).flatMap(([name, item]): [string, NomadObject][] => {
      const o = NomadObject.read(item, `${this.at(key)}[${JSON.stringify(name)}]`, this.problems, rules);
      return o ? [[name, o]] : [];
    });
  }
}

/**
 * Nanoseconds (Go's time.Duration) to milliseconds: exact for whole
 * milliseconds; otherwise the nearest double, which msToNanos turns back
 * into the same nanoseconds (for any duration under 2^51 ns, 26 days).
 */
export function nanosToMs(ns: number): number {
  return ns / 1_000_000;
}

/** Milliseconds to Go's time.Duration nanoseconds: the inverse of nanosToMs. */
export function msToNanos(ms: number): number {
  return Math.round(ms * 1_000_000);
}
