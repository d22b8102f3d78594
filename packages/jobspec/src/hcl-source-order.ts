// Source order for HCL: hcl2json sorts every body's keys and every block's
// labels; this file recovers the order the HCL text gives them, so problems
// are listed in the order a reader of the file meets them (split from
// document.ts, which reads the documents).
import { isBody, type Body } from './document';

// Source order for HCL. hcl2json sorts every body's keys and every block's
// labels, so a reader walking its output would list problems alphabetically.
// A light scan of the HCL text (names, labels and nesting only: strings,
// heredocs, comments and expressions are skipped, not understood) recovers
// the order the file gives them, and the data is rebuilt in that order.
// Values are never touched, and anything the scan does not follow leaves the
// converter's order as it was.

/** The names in one body (or object value) in the order written; a block's labels and body, an attribute's object value. */
interface ScannedItem {
  name: string;
  labels: string[];
  body?: ScannedItem[];
}

class HclScanner {
  private i = 0;

  constructor(private readonly text: string) {}

  /** The top body. Throws on anything it does not follow. */
  scan(): ScannedItem[] {
    const items = this.body('');
    if (this.peek() !== '') throw new Error(`unexpected ${this.peek()} at ${this.i}`);
    return items;
  }

  private body(end: '' | '}'): ScannedItem[] {
    const items: ScannedItem[] = [];
    for (;;) {
      this.skipSpace(true);
      const c = this.peek();
      if (c === end || c === '') return items;
      const name = this.identifier() ?? this.stringLiteral();
      if (name === undefined) throw new Error(`expected a name at ${this.i}`);
      this.skipSpace(false);
      if (this.text[this.i] === '=' && this.text[this.i + 1] !== '=') {
        this.i++;
        items.push({ name, labels: [], ...this.attributeValue() });
        continue;
      }
      const labels: string[] = [];
      for (;;) {
        this.skipSpace(false);
        if (this.text[this.i] === '{') break;
        const label = this.stringLiteral() ?? this.identifier();
        if (label === undefined) throw new Error(`expected a label or { at ${this.i}`);
        labels.push(label);
      }
      this.i++;
      const body = this.body('}');
      this.expect('}');
      items.push({ name, labels, body });
    }
  }

  /** An attribute's value: an object constructor is scanned as a body; anything else is skipped to the end of its line. */
  private attributeValue(): { body?: ScannedItem[] } {
    this.skipSpace(false);
    if (this.text[this.i] === '{') {
      this.i++;
      const body = this.objectBody();
      this.expect('}');
      this.skipExpression();
      return { body };
    }
    this.skipExpression();
    return {};
  }

  /** `{ a = 1, "b" = { … } }` (or `a: 1`), up to its closing brace. */
  private objectBody(): ScannedItem[] {
    const items: ScannedItem[] = [];
    for (;;) {
      this.skipSpace(true);
      if (this.text[this.i] === ',') {
        this.i++;
        continue;
      }
      if (this.peek() === '}' || this.peek() === '') return items;
      const name = this.identifier() ?? this.stringLiteral();
      if (name === undefined) throw new Error(`expected a key at ${this.i}`);
      this.skipSpace(false);
      const sep = this.text[this.i];
      if (sep !== '=' && sep !== ':') throw new Error(`expected = or : at ${this.i}`);
      this.i++;
      this.skipSpace(true);
      if (this.text[this.i] === '{') {
        this.i++;
        const body = this.objectBody();
        this.expect('}');
        items.push({ name, labels: [], body });
      } else {
        this.skipValue();
        items.push({ name, labels: [] });
      }
    }
  }

  /** Skips an object entry's value: up to a comma, newline or closing brace at its own depth. */
  private skipValue(): void {
    let depth = 0;
    while (this.i < this.text.length) {
      const c = this.text[this.i]!;
      if (depth === 0 && (c === ',' || c === '\n' || c === '}')) return;
      if (!this.skipAtom()) {
        if (c === '(' || c === '[' || c === '{') depth++;
        if (c === ')' || c === ']' || c === '}') depth--;
        this.i++;
      }
    }
  }

  /** Skips an expression to the end of its line (brackets may span lines). */
  private skipExpression(): void {
    let depth = 0;
    while (this.i < this.text.length) {
      const c = this.text[this.i]!;
      if (depth === 0 && (c === '\n' || c === '}')) return;
      if (!this.skipAtom()) {
        if (c === '(' || c === '[' || c === '{') depth++;
        if (c === ')' || c === ']' || c === '}') depth--;
        this.i++;
      }
    }
  }

  /** Skips a string, heredoc or comment at the cursor; false when there is none. */
  private skipAtom(): boolean {
    const c = this.text[this.i];
    if (c === '"') {
      this.stringLiteral();
      return true;
    }
    if (c === '#' || (c === '/' && this.text[this.i + 1] === '/')) {
      while (this.i < this.text.length && this.text[this.i] !== '\n') this.i++;
      return true;
    }
    if (c === '/' && this.text[this.i + 1] === '*') {
      const end = this.text.indexOf('*/', this.i + 2);
      if (end < 0) throw new Error('unterminated comment');
      this.i = end + 2;
      return true;
    }
    if (c === '<' && this.text[this.i + 1] === '<') {
      const m = /^<<-?([A-Za-z_][A-Za-z0-9_]*)[ \t]*\r?\n/.exec(this.text.slice(this.i));
      if (!m) return false;
      const lines = this.text.slice(this.i + m[0].length).split('\n');
      let offset = this.i + m[0].length;
      for (const line of lines) {
        offset += line.length + 1;
        if (line.trim() === m[1]) {
          this.i = offset - 1;
          return true;
        }
      }
      throw new Error('unterminated heredoc');
    }
    return false;
  }

  private skipSpace(newlines: boolean): void {
    while (this.i < this.text.length) {
      const c = this.text[this.i]!;
      if (c === ' ' || c === '\t' || c === '\r' || (newlines && c === '\n')) this.i++;
      else if ((c === '#' || c === '/') && this.skipAtom()) continue;
      else return;
    }
  }

  private peek(): string {
    return this.text[this.i] ?? '';
  }

  private expect(c: string): void {
    this.skipSpace(true);
    if (this.text[this.i] !== c) throw new Error(`expected ${c} at ${this.i}`);
    this.i++;
  }

  private identifier(): string | undefined {
    const m = /^[A-Za-z_][A-Za-z0-9_-]*/.exec(this.text.slice(this.i, this.i + 256));
    if (!m) return undefined;
    this.i += m[0].length;
    return m[0];
  }

  /** A quoted string (its `${ … }` parts skipped whole), as its raw text between the quotes: labels and keys have no escapes worth decoding for ordering. */
  private stringLiteral(): string | undefined {
    if (this.text[this.i] !== '"') return undefined;
    const start = ++this.i;
    while (this.i < this.text.length) {
      const c = this.text[this.i]!;
      if (c === '\\') this.i += 2;
      else if (c === '"') return this.text.slice(start, this.i++);
      else if ((c === '$' || c === '%') && this.text[this.i + 1] === '{') {
        this.i += 2;
        let depth = 1;
        while (depth > 0 && this.i < this.text.length) {
          if (this.skipAtom()) continue;
          const d = this.text[this.i++];
          if (d === '{') depth++;
          if (d === '}') depth--;
        }
      } else if (c === '\n') throw new Error('unterminated string');
      else this.i++;
    }
    throw new Error('unterminated string');
  }
}

/** `data`'s keys (and labels, nested) rebuilt in the order `items` has them; what `items` does not name keeps its place after. */
function reorder(data: unknown, items: readonly ScannedItem[] | undefined): unknown {
  if (!items || !isBody(data)) return data;
  const names = [...new Set(items.map((it) => it.name))];
  const keys = [...names.filter((n) => Object.hasOwn(data, n)), ...Object.keys(data).filter((k) => !names.includes(k))];
  return Object.fromEntries(
    keys.map((key) => {
      const mine = items.filter((it) => it.name === key);
      return [key, mine.length ? reorderValue(data[key], mine) : data[key]];
    }),
  );
}

/** One key's value: an attribute's object, a block (a list of bodies in hcl2json), or labelled blocks (`{ label: [body] }`, one level per label). */
function reorderValue(value: unknown, items: readonly ScannedItem[]): unknown {
  const first = items[0]!;
  if (first.labels.length === 0) {
    if (Array.isArray(value) && first.body) return value.map((v, i) => reorder(v, items[i]?.body));
    return reorder(value, first.body);
  }
  return reorderLabels(value, items, 0);
}

function reorderLabels(value: unknown, items: readonly ScannedItem[], depth: number): unknown {
  if (!isBody(value)) return value;
  const labels = [...new Set(items.map((it) => it.labels[depth]!))];
  const keys = [...labels.filter((l) => Object.hasOwn(value, l)), ...Object.keys(value).filter((k) => !labels.includes(k))];
  return Object.fromEntries(
    keys.map((label) => {
      const mine = items.filter((it) => it.labels[depth] === label);
      if (!mine.length) return [label, value[label]];
      const inner = value[label];
      if (depth + 1 < mine[0]!.labels.length) return [label, reorderLabels(inner, mine, depth + 1)];
      return [label, Array.isArray(inner) ? inner.map((v, i) => reorder(v, mine[i]?.body)) : reorder(inner, mine[0]!.body)];
    }),
  );
}

/**
 * The data hcl2json made of `text`, with every body's keys and labels in
 * the order the text gives them, so that what reads it in key order (the
 * problems a reader lists) follows the file. Data the scan cannot follow is
 * returned as it is.
 */
export function inSourceOrder(data: Body, text: string): Body {
  let items: ScannedItem[];
  try {
    items = new HclScanner(text).scan();
  } catch {
    return data;
  }
  const out = reorder(data, items);
  return isBody(out) ? out : data;
}
