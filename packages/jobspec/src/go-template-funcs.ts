// The functions a csiplug template may call (go-template.ts parses and
// renders; this file is what each function does), with Go's and
// consul-template's meanings: Go's builtins `printf eq ne lt le gt ge and or
// not`, consul-template's `env split join trimSpace toUpper toLower
// replaceAll base64Encode base64Decode toJSON toYAML`. Also how a value
// prints (Go's %v) and what counts as true in an `if`.

/** A value in a template: what literals, env and the functions make. */
export type TemplateValue = string | number | boolean | null | TemplateValue[] | { [key: string]: TemplateValue };

/** A function got a value it cannot use; the renderer adds the function's name and the line. */
export class GoTemplateValueError extends Error {}

export interface TemplateFunction {
  /** Arguments it takes (the piped value counts as the last). */
  min: number;
  max: number;
  /** Arguments are evaluated when asked for (`and` and `or` stop early, as Go's do). */
  call(args: (() => TemplateValue)[], ctx: { env: Readonly<Record<string, string>> }): TemplateValue;
}

const all = (args: (() => TemplateValue)[]): TemplateValue[] => args.map((a) => a());

function str(v: TemplateValue, what: string): string {
  if (typeof v !== 'string') throw new GoTemplateValueError(`${what} must be a string (got ${goType(v)} ${formatValue(v)})`);
  return v;
}

function strings(v: TemplateValue, what: string): string[] {
  if (!Array.isArray(v)) throw new GoTemplateValueError(`${what} must be a list (got ${goType(v)} ${formatValue(v)})`);
  return v.map((item, i) => str(item, `${what}[${i}]`));
}

const unary = (fn: (s: string) => TemplateValue): TemplateFunction => ({
  min: 1,
  max: 1,
  call: ([a]) => fn(str(a!(), 'its argument')),
});

function compare(op: 'lt' | 'le' | 'gt' | 'ge'): TemplateFunction {
  return {
    min: 2,
    max: 2,
    call: (args) => {
      const [a, b] = all(args);
      if (!((typeof a === 'number' && typeof b === 'number') || (typeof a === 'string' && typeof b === 'string')))
        throw new GoTemplateValueError(
          `incompatible types for comparison: ${goType(a!)} and ${goType(b!)} (compare numbers with numbers, strings with strings)`,
        );
      const c = a < b ? -1 : a > b ? 1 : 0;
      return op === 'lt' ? c < 0 : op === 'le' ? c <= 0 : op === 'gt' ? c > 0 : c >= 0;
    },
  };
}

function equal(a: TemplateValue, b: TemplateValue): boolean {
  if (a === null || b === null) return a === b;
  if (typeof a === 'object' || typeof b === 'object')
    throw new GoTemplateValueError(`cannot compare a ${goType(a)} with a ${goType(b)}: lists and maps are not comparable`);
  if (typeof a !== typeof b) throw new GoTemplateValueError(`incompatible types for comparison: ${goType(a)} and ${goType(b)}`);
  return a === b;
}

export const FUNCTIONS: Readonly<Record<string, TemplateFunction>> = Object.freeze({
  env: {
    min: 1,
    max: 1,
    call: ([name], ctx) => {
      const n = str(name!(), 'the variable name');
      return Object.hasOwn(ctx.env, n) ? ctx.env[n]! : '';
    },
  },
  // consul-template's split: the string trimmed first, and an empty one is an empty list.
  split: {
    min: 2,
    max: 2,
    call: (args) => {
      const [sep, s] = all(args);
      const text = str(s!, 'the string to split').trim();
      if (text === '') return [];
      const by = str(sep!, 'the separator');
      return by === '' ? Array.from(text) : text.split(by);
    },
  },
  join: {
    min: 2,
    max: 2,
    call: (args) => {
      const [sep, list] = all(args);
      return strings(list!, 'the list to join').join(str(sep!, 'the separator'));
    },
  },
  trimSpace: unary((s) => s.trim()),
  toUpper: unary((s) => s.toUpperCase()),
  toLower: unary((s) => s.toLowerCase()),
  replaceAll: {
    min: 3,
    max: 3,
    call: (args) => {
      const [from, to, s] = all(args).map((v, i) => str(v, ['the text to replace', 'the replacement', 'the string'][i]!));
      return s!.split(from!).join(to!);
    },
  },
  base64Encode: unary((s) => Buffer.from(s, 'utf8').toString('base64')),
  base64Decode: unary((s) => {
    const clean = s.replace(/[\r\n]/g, '');
    if (clean.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(clean))
      throw new GoTemplateValueError(
        `${JSON.stringify(s.length > 40 ? `${s.slice(0, 40)}…` : s)} is not standard base64 (A–Z a–z 0–9 + /, padded with =)`,
      );
    const bytes = Buffer.from(clean, 'base64');
    const text = bytes.toString('utf8');
    if (!Buffer.from(text, 'utf8').equals(bytes))
      throw new GoTemplateValueError('the decoded bytes are not UTF-8 text; csiplug templates render text');
    return text;
  }),
  toJSON: { min: 1, max: 1, call: ([v]) => toJSON(v!()) },
  toYAML: { min: 1, max: 1, call: ([v]) => toYAML(v!(), 0).replace(/\n$/, '') },
  printf: {
    min: 1,
    max: Infinity,
    call: (args) => {
      const [format, ...rest] = all(args);
      return sprintf(str(format!, 'the format'), rest);
    },
  },
  eq: {
    min: 2,
    max: Infinity,
    call: (args) => {
      const [a, ...others] = all(args);
      return others.some((b) => equal(a!, b));
    },
  },
  ne: {
    min: 2,
    max: 2,
    call: (args) => {
      const [a, b] = all(args);
      return !equal(a!, b!);
    },
  },
  lt: compare('lt'),
  le: compare('le'),
  gt: compare('gt'),
  ge: compare('ge'),
  and: {
    min: 1,
    max: Infinity,
    call: (args) => {
      let v: TemplateValue = null;
      for (const a of args) if (!isTrue((v = a()))) return v;
      return v;
    },
  },
  or: {
    min: 1,
    max: Infinity,
    call: (args) => {
      let v: TemplateValue = null;
      for (const a of args) if (isTrue((v = a()))) return v;
      return v;
    },
  },
  not: { min: 1, max: 1, call: ([a]) => !isTrue(a!()) },
} satisfies Record<string, TemplateFunction>);

/** Go's truth: false, 0, nil, "" and an empty list or map are false. */
export function isTrue(v: TemplateValue): boolean {
  if (v === null) return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === 'object') return Object.keys(v).length > 0;
  return Boolean(v);
}

/** The Go type a value would have, for messages. */
export function goType(v: TemplateValue): string {
  if (v === null) return '<nil>';
  if (Array.isArray(v)) return v.every((x) => typeof x === 'string') ? '[]string' : '[]interface {}';
  if (typeof v === 'object') return 'map[string]interface {}';
  if (typeof v === 'number') return Number.isInteger(v) ? 'int' : 'float64';
  return typeof v;
}

/** How Go prints a value ({{ . }}, %v). */
export function formatValue(v: TemplateValue): string {
  if (v === null) return '<no value>';
  if (typeof v === 'string') return v;
  if (typeof v === 'number') return formatNumber(v);
  if (typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return `[${v.map((x) => (x === null ? '<nil>' : formatValue(x))).join(' ')}]`;
  return `map[${Object.keys(v)
    .sort()
    .map((k) => `${k}:${formatValue(v[k]!)}`)
    .join(' ')}]`;
}

/** Go's %v of a number: an int as is; a float as the shortest %g, in exponent form below 1e-4 and from 1e21. */
function formatNumber(n: number): string {
  if (Number.isInteger(n) && Math.abs(n) < 1e21) return String(n);
  if (!Number.isFinite(n)) return Number.isNaN(n) ? 'NaN' : n > 0 ? '+Inf' : '-Inf';
  const exp = Math.floor(Math.log10(Math.abs(n)));
  if (exp < -4 || exp >= 21) return n.toExponential().replace(/e([+-])(\d)$/, 'e$10$2');
  return String(n);
}

/** Go's strconv.Quote, for %q. */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    const named: Record<string, string> = {
      '\x07': '\\a',
      '\b': '\\b',
      '\f': '\\f',
      '\n': '\\n',
      '\r': '\\r',
      '\t': '\\t',
      '\v': '\\v',
      '\\': '\\\\',
      '"': '\\"',
    };
    if (named[ch]) out += named[ch];
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else if ((c >= 0x80 && c < 0xa0) || c === 0xfffd) out += `\\u${c.toString(16).padStart(4, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}

/** Go's fmt.Sprintf for the verbs %s %d %v %q and %%, with Go's %!verb(type=value) for a value a verb does not take. */
export function sprintf(format: string, args: TemplateValue[]): string {
  let next = 0;
  const bad = (verb: string, v: TemplateValue): string => (v === null ? `%!${verb}(<nil>)` : `%!${verb}(${goType(v)}=${formatValue(v)})`);
  const one = (verb: string, v: TemplateValue): string => {
    if (Array.isArray(v) && verb !== 'v') return `[${v.map((x) => one(verb, x)).join(' ')}]`;
    switch (verb) {
      case 'v':
        return v === null ? '<nil>' : formatValue(v);
      case 's':
        return typeof v === 'string' ? v : bad(verb, v);
      case 'q':
        if (typeof v === 'string') return goQuote(v);
        if (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 0x10ffff) return `'${String.fromCodePoint(v)}'`;
        return bad(verb, v);
      default:
        return typeof v === 'number' && Number.isInteger(v) ? String(v) : bad(verb, v);
    }
  };
  let out = format.replace(/%(.?)/gs, (_m, verb: string) => {
    if (verb === '%') return '%';
    if (!'sdvq'.includes(verb) || verb === '') return `%!${verb || '(NOVERB)'}`;
    if (next >= args.length) return `%!${verb}(MISSING)`;
    return one(verb, args[next++]!);
  });
  if (next < args.length)
    out += `%!(EXTRA ${args
      .slice(next)
      .map((v) => (v === null ? '<nil>' : `${goType(v)}=${formatValue(v)}`))
      .join(', ')})`;
  return out;
}

/** Go's json.Marshal (as consul-template's toJSON): map keys sorted, <, > and & escaped. */
export function toJSON(v: TemplateValue): string {
  const text = JSON.stringify(v, (_k, value: unknown) =>
    value !== null && typeof value === 'object' && !Array.isArray(value)
      ? Object.fromEntries(
          Object.keys(value)
            .sort()
            .map((k) => [k, (value as Record<string, unknown>)[k]]),
        )
      : value,
  );
  return text.replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** YAML as consul-template's toYAML gives it (block style, map keys sorted); a string that would read as another type, or is not plain text, is double-quoted. */
export function toYAML(v: TemplateValue, indent: number): string {
  const pad = ' '.repeat(indent);
  if (Array.isArray(v)) {
    if (v.length === 0) return '[]\n';
    return v.map((item) => `${pad}- ${nested(item, indent + 2).replace(/^ +/, '')}`).join('');
  }
  if (v !== null && typeof v === 'object') {
    const keys = Object.keys(v).sort();
    if (keys.length === 0) return '{}\n';
    return keys
      .map((k) => {
        const item = v[k]!;
        const key = `${pad}${yamlScalar(k)}:`;
        if (Array.isArray(item) && item.length) return `${key}\n${toYAML(item, indent)}`;
        if (item !== null && typeof item === 'object' && !Array.isArray(item) && Object.keys(item).length)
          return `${key}\n${toYAML(item, indent + 2)}`;
        return `${key} ${toYAML(item, 0)}`;
      })
      .join('');
  }
  return `${yamlScalar(v)}\n`;
}

/** An item of a list: a map or list inside it starts on the dash's line. */
function nested(item: TemplateValue, indent: number): string {
  if (item !== null && typeof item === 'object') return toYAML(item, indent);
  return toYAML(item, 0);
}

function yamlScalar(v: TemplateValue): string {
  if (v === null) return 'null';
  if (typeof v === 'number') return formatNumber(v);
  if (typeof v === 'boolean') return String(v);
  const s = v as string;
  const plain =
    /^[A-Za-z0-9_./][A-Za-z0-9_ ./@()-]*$/.test(s) &&
    !/ $/.test(s) &&
    !/^(true|false|yes|no|on|off|y|n|null|~)$/i.test(s) &&
    !/^[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?$/.test(s) &&
    !/^0[xXoObB]/.test(s) &&
    !/^\.(inf|nan)$/i.test(s);
  return plain ? s : JSON.stringify(s);
}
