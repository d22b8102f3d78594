// The lexer of csiplug's Go-template subset (go-template.ts): the text cut
// into text and actions, with `{{-`/`-}}` trimming and `{{/* */}}` comments
// applied, and each action into its tokens (Go's string escapes included).

export type Token =
  | { t: 'text'; text: string; pos: number }
  | { t: 'open'; pos: number }
  | { t: 'close'; pos: number }
  | { t: 'ident' | 'var' | 'field'; text: string; pos: number }
  | { t: 'string'; value: string; pos: number }
  | { t: 'number'; value: number; pos: number }
  | { t: 'dot' | 'pipe' | 'lparen' | 'rparen' | 'declare' | 'assign' | 'comma'; pos: number };

export type Fail = (pos: number, why: string) => never;

const SPACE = /[ \t\r\n]/;

export function lex(text: string, left: string, right: string, fail: Fail): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  let trimNext = false;
  const pushText = (from: number, to: number, trimEnd: boolean): void => {
    let s = text.slice(from, to);
    let start = from;
    if (trimNext) {
      const trimmed = s.replace(/^[ \t\r\n]+/, '');
      start += s.length - trimmed.length;
      s = trimmed;
    }
    if (trimEnd) s = s.replace(/[ \t\r\n]+$/, '');
    if (s) tokens.push({ t: 'text', text: s, pos: start });
  };
  while (i < text.length) {
    const open = text.indexOf(left, i);
    if (open < 0) {
      pushText(i, text.length, false);
      break;
    }
    let p = open + left.length;
    const trimBefore = text[p] === '-' && SPACE.test(text[p + 1] ?? '');
    if (trimBefore) p += 2;
    pushText(i, open, trimBefore);
    trimNext = false;
    // A comment: the whole action, right after the delimiter (and trim marker).
    const afterSpace = trimBefore ? p + skipSpace(text, p) : p;
    if (text.startsWith('/*', afterSpace)) {
      const end = text.indexOf('*/', afterSpace + 2);
      if (end < 0) fail(open, 'comment is not closed (a comment is {{/* … */}})');
      let q = end + 2;
      q += skipSpace(text, q);
      if (text[q] === '-' && text.startsWith(right, q + 1) && SPACE.test(text[q - 1] ?? '')) {
        trimNext = true;
        q += 1;
      }
      if (!text.startsWith(right, q)) fail(open, `comment ends before the closing delimiter ${right}`);
      i = q + right.length;
      continue;
    }
    tokens.push({ t: 'open', pos: open });
    i = lexAction(text, p, right, tokens, fail, (trim) => (trimNext = trim));
  }
  return tokens;
}

function skipSpace(text: string, p: number): number {
  let n = 0;
  while (SPACE.test(text[p + n] ?? '')) n++;
  return n;
}

/** Tokens of one action from `p`; returns the index after its closing delimiter. */
function lexAction(text: string, start: number, right: string, out: Token[], fail: Fail, setTrim: (trim: boolean) => void): number {
  let p = start;
  for (;;) {
    p += skipSpace(text, p);
    if (p >= text.length) fail(start, `action is not closed with ${right}`);
    if (text[p] === '-' && text.startsWith(right, p + 1) && p > start && SPACE.test(text[p - 1]!)) {
      out.push({ t: 'close', pos: p });
      setTrim(true);
      return p + 1 + right.length;
    }
    if (text.startsWith(right, p)) {
      out.push({ t: 'close', pos: p });
      setTrim(false);
      return p + right.length;
    }
    const c = text[p]!;
    const pos = p;
    if (c === '"') {
      const [value, end] = readQuoted(text, p, fail);
      out.push({ t: 'string', value, pos });
      p = end;
    } else if (c === '`') {
      const end = text.indexOf('`', p + 1);
      if (end < 0) fail(p, 'raw string is not closed with `');
      out.push({ t: 'string', value: text.slice(p + 1, end), pos });
      p = end + 1;
    } else if (c === "'") {
      fail(p, 'character constants (\'x\') are not supported; write a string ("x")');
    } else if (/[0-9]/.test(c) || ((c === '-' || c === '+') && /[0-9.]/.test(text[p + 1] ?? ''))) {
      const m = /^[+-]?(0[xX][0-9a-fA-F_]+|(?:[0-9][0-9_]*)?\.?[0-9_]*(?:[eE][+-]?[0-9]+)?)/.exec(text.slice(p))!;
      const raw = m[0].replace(/_/g, '');
      const value = Number(raw);
      if (!m[0] || !Number.isFinite(value)) fail(p, `"${m[0] || c}" is not a number`);
      const after = text[p + m[0].length] ?? '';
      if (/[A-Za-z_.]/.test(after)) fail(p, `"${m[0]}${after}" is not a number`);
      out.push({ t: 'number', value, pos });
      p += m[0].length;
    } else if (c === '$') {
      const m = /^\$[A-Za-z0-9_]*/.exec(text.slice(p))!;
      if (text[p + 1] === '{') fail(p, '"${" inside an action: ${NAME} is replaced in the text and in strings, not in an action\'s code');
      out.push({ t: 'var', text: m[0], pos });
      p += m[0].length;
    } else if (c === '.') {
      const m = /^\.[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(p));
      if (m) {
        out.push({ t: 'field', text: m[0], pos });
        p += m[0].length;
      } else {
        out.push({ t: 'dot', pos });
        p += 1;
      }
    } else if (/[A-Za-z_]/.test(c)) {
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(p))!;
      out.push({ t: 'ident', text: m[0], pos });
      p += m[0].length;
    } else if (c === '|') {
      out.push({ t: 'pipe', pos });
      p++;
    } else if (c === '(') {
      out.push({ t: 'lparen', pos });
      p++;
    } else if (c === ')') {
      out.push({ t: 'rparen', pos });
      p++;
    } else if (c === ',') {
      out.push({ t: 'comma', pos });
      p++;
    } else if (c === ':' && text[p + 1] === '=') {
      out.push({ t: 'declare', pos });
      p += 2;
    } else if (c === '=') {
      out.push({ t: 'assign', pos });
      p++;
    } else {
      fail(p, `unexpected "${c}" in an action`);
    }
  }
}

const SIMPLE_ESCAPES: Readonly<Record<string, string>> = {
  n: '\n',
  t: '\t',
  r: '\r',
  a: '\x07',
  b: '\b',
  f: '\f',
  v: '\v',
  '\\': '\\',
  '"': '"',
  "'": "'",
};

/** A Go interpreted string literal at `p`: its value and the index after it. */
function readQuoted(text: string, p: number, fail: Fail): [string, number] {
  let value = '';
  let q = p + 1;
  for (;;) {
    const c = text[q];
    if (c === undefined || c === '\n') fail(p, 'string is not closed with "');
    if (c === '"') return [value, q + 1];
    if (c !== '\\') {
      value += c;
      q++;
      continue;
    }
    const e = text[q + 1] ?? '';
    if (e in SIMPLE_ESCAPES) {
      value += SIMPLE_ESCAPES[e];
      q += 2;
      continue;
    }
    const hex = e === 'x' ? 2 : e === 'u' ? 4 : e === 'U' ? 8 : 0;
    if (hex) {
      const digits = text.slice(q + 2, q + 2 + hex);
      if (!new RegExp(`^[0-9a-fA-F]{${hex}}$`).test(digits)) fail(q, `bad escape \\${e}${digits} in a string`);
      const code = parseInt(digits, 16);
      if (code > 0x10ffff) fail(q, `escape \\${e}${digits} is not a character`);
      value += String.fromCodePoint(code);
      q += 2 + hex;
      continue;
    }
    const octal = text.slice(q + 1, q + 4);
    if (/^[0-7]{3}$/.test(octal)) {
      value += String.fromCharCode(parseInt(octal, 8));
      q += 4;
      continue;
    }
    fail(q, `unknown escape \\${e} in a string`);
  }
}
