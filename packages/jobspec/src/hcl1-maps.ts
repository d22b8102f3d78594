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

/**
 * `text` with the unlabelled block that holds the quoted name the parser
 * complained about (`detail`, hcl2json's message) written as a map
 * attribute; undefined when the complaint is another one, or the name is not
 * directly inside an unlabelled block (a labelled block such as
 * `plugin "exec" { "x" = 1 }` is not a map in HCL 1 either).
 */
export function quotedNameBlockAsMap(text: string, detail: string): string | undefined {
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
  return `${text.slice(0, lineStart)}${header[1]}${header[2]} = ${text.slice(open)}`;
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

/** The offset of the `{` of the innermost block open at `offset`, skipping strings and comments. */
function innermostOpenBrace(text: string, offset: number): number | undefined {
  const open: number[] = [];
  for (let i = 0; i < offset; i++) {
    const c = text[i];
    if (c === '"') {
      for (i++; i < offset && text[i] !== '"' && text[i] !== '\n'; i++) if (text[i] === '\\') i++;
    } else if (c === '#' || (c === '/' && text[i + 1] === '/')) {
      while (i < offset && text[i] !== '\n') i++;
    } else if (c === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      i = end < 0 ? offset : end + 1;
    } else if (c === '{') {
      open.push(i);
    } else if (c === '}') {
      open.pop();
    }
  }
  return open.at(-1);
}
