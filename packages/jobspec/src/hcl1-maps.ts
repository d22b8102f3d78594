// Nomad reads its agent config as HCL 1, where a map may be written as a
// block of quoted keys — its docs' `chroot_env { "/bin" = "/bin" }`,
// `meta { "rack" = "r1" }`, `options { "driver.allowlist" = "exec" }`. HCL 2
// (this reader) refuses a quoted name inside a block, but reads the same map
// written as an attribute, `chroot_env = { "/bin" = "/bin" }`, which Nomad's
// HCL 1 reads too. So a Nomad agent config runs unchanged: where the parser
// says a name must not be quoted, the unlabelled block around that name is
// turned into a map attribute (`NAME {` becomes `NAME = {` on the same line,
// so every later error still names the right line) and the text is parsed
// again. Only for agent configs: Nomad's own jobspecs are HCL 2 and refuse
// this form as well.

/** The parser's complaint about a quoted name inside a block, with its 1-based line and column. */
const QUOTED_NAME = /:(\d+),(\d+)(?:-\d+)?: Invalid argument name; Argument names must not be quoted/;

/** A block rewritten as a map: the new text, and the lines (1-based, inclusive) the block spans. */
export interface BlockAsMap {
  text: string;
  firstLine: number;
  lastLine: number;
}

/**
 * `text` with the unlabelled block that holds the quoted name the parser
 * complained about (`detail`, hcl2json's message) written as a map
 * attribute; undefined when the complaint is another one, or the name is not
 * directly inside an unlabelled block (a labelled block such as
 * `plugin "exec" { "x" = 1 }` is not a map in HCL 1 either).
 */
export function quotedNameBlockAsMap(text: string, detail: string): BlockAsMap | undefined {
  const at = QUOTED_NAME.exec(detail);
  if (!at) return undefined;
  const offset = offsetOf(text, Number(at[1]), Number(at[2]));
  if (offset === undefined) return undefined;
  const open = innermostOpenBrace(text, offset);
  if (open === undefined) return undefined;
  // The block's header: from the start of its line to its `{`, a bare name.
  const lineStart = text.lastIndexOf('\n', open - 1) + 1;
  const header = /^(\s*)([A-Za-z_][\w-]*)\s*$/.exec(text.slice(lineStart, open));
  if (!header) return undefined;
  const lineOf = (o: number): number => text.slice(0, o).split('\n').length;
  return {
    text: `${text.slice(0, lineStart)}${header[1]}${header[2]} = ${text.slice(open)}`,
    firstLine: lineOf(open),
    lastLine: lineOf(closingBrace(text, open) ?? text.length),
  };
}

/** The line (1-based) an hcl2json complaint names first, if it names one. */
export function complaintLine(detail: string): number | undefined {
  const at = /:(\d+),\d+/.exec(detail);
  return at ? Number(at[1]) : undefined;
}

/** The offset of a 1-based line and column (columns count characters, as hcl2json's do for this text). */
function offsetOf(text: string, line: number, column: number): number | undefined {
  let offset = 0;
  for (let l = 1; l < line; l++) {
    offset = text.indexOf('\n', offset) + 1;
    if (offset === 0) return undefined;
  }
  const target = offset + column - 1;
  return target <= text.length ? target : undefined;
}

/** Calls `visit` with each `{` and `}` of `text` from `from` on, skipping strings and comments; stops when it answers true. */
function eachBrace(text: string, from: number, until: number, visit: (c: '{' | '}', at: number) => boolean | void): void {
  for (let i = from; i < until; i++) {
    const c = text[i];
    if (c === '"') {
      for (i++; i < until && text[i] !== '"' && text[i] !== '\n'; i++) if (text[i] === '\\') i++;
    } else if (c === '#' || (c === '/' && text[i + 1] === '/')) {
      while (i < until && text[i] !== '\n') i++;
    } else if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      i = end < 0 ? until : end + 1;
    } else if ((c === '{' || c === '}') && visit(c, i)) {
      return;
    }
  }
}

/** The offset of the `{` of the innermost block open at `offset`. */
function innermostOpenBrace(text: string, offset: number): number | undefined {
  const open: number[] = [];
  eachBrace(text, 0, offset, (c, at) => {
    if (c === '{') open.push(at);
    else open.pop();
  });
  return open.at(-1);
}

/** The offset of the `}` that closes the `{` at `open`; undefined when none does. */
function closingBrace(text: string, open: number): number | undefined {
  let depth = 0;
  let close: number | undefined;
  eachBrace(text, open, text.length, (c, at) => {
    depth += c === '{' ? 1 : -1;
    if (depth === 0) close = at;
    return depth === 0;
  });
  return close;
}
