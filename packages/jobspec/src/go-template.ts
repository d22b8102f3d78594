// The Go-template subset a task's `template` block is written in (what
// consul-template renders for Nomad, minus Consul, Vault and the sprig
// library): parsed once when the jobspec is checked, so any function or
// `.Field` outside the subset is refused then, naming it and its line;
// rendered when the task starts. Pure: no I/O, the caller reads and writes.
//
// The subset: text with actions between the delimiters (`{{` `}}` unless
// the template names others); `{{-` / `-}}` trim the white space beside an
// action; `{{/* comments */}}`; literals (strings "…" and `…`, numbers,
// true, false, nil); `.` (the value of the enclosing `with`/`range`);
// variables `$x` (`:=` declares, `=` assigns; `$` is the top dot);
// pipelines with `|` and parentheses; `if`/`else if`/`else`/`end`,
// `with`/`else with`/`else`/`end`, `range [$i,] [$x] := …`/`else`/`end` over
// lists and maps; the functions of go-template-funcs.ts.
//
// `${NAME}` of the task's variables (interpolate.ts) is replaced in text and
// in string literals when rendering, when the caller gives the variables
// (a template's `data`, as Nomad's HCL interpolation does); a name that is
// not known then is an error. Values are inserted as text, never parsed as
// template, so a variable cannot inject an action.
//
// Limits against hostile input: nesting depth, items ranged over in one
// render, and output size (GO_TEMPLATE_LIMITS).
import { interpolate } from './interpolate';
import { lex, type Fail, type Token } from './go-template-lex';
import { FUNCTIONS, GoTemplateValueError, formatValue, isTrue, type TemplateValue } from './go-template-funcs';

export { type TemplateValue } from './go-template-funcs';

export const GO_TEMPLATE_LIMITS = Object.freeze({
  /** Control structures and parentheses nested in one another. */
  maxDepth: 64,
  /** Items all `range` actions of one render go over together. */
  maxRangeItems: 100_000,
  /** Characters one render may produce. */
  maxOutputChars: 16 * 1024 * 1024,
  /** Characters of template text. */
  maxTemplateChars: 4 * 1024 * 1024,
});

/** A template that cannot be parsed or rendered: `line`/`column` (1-based) of the action at fault. */
export class GoTemplateError extends Error {
  constructor(
    readonly template: string,
    readonly line: number,
    readonly column: number,
    readonly reason: string,
  ) {
    super(`template ${template} line ${line}, column ${column}: ${reason}`);
    this.name = 'GoTemplateError';
  }
}

export interface GoTemplateOptions {
  /** How errors name the template (its destination, say). */
  name: string;
  leftDelimiter?: string;
  rightDelimiter?: string;
}

export interface RenderContext {
  /** `{{ env "NAME" }}`: the task's environment; a name it lacks reads as "" (as consul-template's env). */
  env: Readonly<Record<string, string>>;
  /** The task's variables for `${NAME}` in text and string literals; absent: `${…}` is left as written. */
  vars?: Readonly<Record<string, string>>;
}

// ---------------------------------------------------------------------------
// The tree.

type Operand =
  | { kind: 'value'; value: TemplateValue; interpolate: boolean; pos: number }
  | { kind: 'var'; name: string; pos: number }
  | { kind: 'dot'; pos: number }
  | { kind: 'func'; name: string; pos: number }
  | { kind: 'pipe'; pipe: Pipeline; pos: number };

interface Command {
  operands: Operand[];
  pos: number;
}

interface Pipeline {
  /** Variables declared (`:=`) or assigned (`=`) with the pipeline's value; in a range, one or two. */
  decl?: { names: string[]; assign: boolean };
  commands: Command[];
  pos: number;
}

interface ControlNode {
  kind: 'if' | 'with' | 'range';
  pipe: Pipeline;
  body: Node[];
  otherwise?: Node[];
  pos: number;
}

type Node = { kind: 'text'; text: string; pos: number } | { kind: 'action'; pipe: Pipeline; pos: number } | ControlNode;

export interface GoTemplate {
  readonly name: string;
  /** Renders with `ctx`; throws a GoTemplateError naming the line at fault. */
  render(ctx: RenderContext): string;
}

/** Parses `text`; throws a GoTemplateError at the first problem. */
export function parseGoTemplate(text: string, options: GoTemplateOptions): GoTemplate {
  const left = options.leftDelimiter || '{{';
  const right = options.rightDelimiter || '}}';
  const lines = lineStarts(text);
  const where = (pos: number): [number, number] => {
    let lo = 0;
    let hi = lines.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (lines[mid]! <= pos) lo = mid;
      else hi = mid - 1;
    }
    return [lo + 1, pos - lines[lo]! + 1];
  };
  const fail = (pos: number, why: string): never => {
    const [line, column] = where(pos);
    throw new GoTemplateError(options.name, line, column, why);
  };
  if (text.length > GO_TEMPLATE_LIMITS.maxTemplateChars)
    fail(0, `is ${text.length} characters; at most ${GO_TEMPLATE_LIMITS.maxTemplateChars} are rendered`);
  const tokens = lex(text, left, right, fail);
  const nodes = new Parser(tokens, fail).parseAll();
  return {
    name: options.name,
    render: (ctx) => new Renderer(ctx, fail).run(nodes),
  };
}

function lineStarts(text: string): number[] {
  const starts = [0];
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) starts.push(i + 1);
  return starts;
}

// ---------------------------------------------------------------------------
// Parsing: actions into the tree, checking every name as it goes.

/** Go's other builtins and the template keywords csiplug does not take, with what to do. */
const REFUSED_KEYWORDS: Readonly<Record<string, string>> = {
  define: 'named templates are not supported',
  template: 'named templates are not supported',
  block: 'named templates are not supported',
  break: 'break is not supported in a range',
  continue: 'continue is not supported in a range',
};

class Parser {
  private i = 0;
  private depth = 0;
  /** Variables in scope, innermost last; each control structure opens a scope. */
  private readonly scopes: Set<string>[] = [new Set(['$'])];

  constructor(
    private readonly tokens: Token[],
    private readonly fail: Fail,
  ) {}

  parseAll(): Node[] {
    const [nodes, end] = this.list();
    if (end) this.fail(end.pos, `{{ ${end.word} }} without an if, with or range to close`);
    return nodes;
  }

  /** Nodes up to an `end` or `else` action (returned, consumed) or the end of the text. */
  private list(): [Node[], { word: 'end' | 'else'; pos: number } | undefined] {
    const nodes: Node[] = [];
    for (;;) {
      const tok = this.tokens[this.i];
      if (!tok) return [nodes, undefined];
      if (tok.t === 'text') {
        nodes.push({ kind: 'text', text: tok.text, pos: tok.pos });
        this.i++;
        continue;
      }
      // An action.
      this.i++;
      const first = this.peek();
      if (first.t === 'ident' && (first.text === 'end' || first.text === 'else')) {
        if (first.text === 'end') {
          this.i++;
          this.expectClose('end');
        }
        // `else`: the caller reads what follows it (else if / else with / else).
        return [nodes, { word: first.text, pos: first.pos }];
      }
      if (first.t === 'ident' && (first.text === 'if' || first.text === 'with' || first.text === 'range')) {
        this.i++;
        nodes.push(this.control(first.text, first.pos));
        continue;
      }
      if (first.t === 'ident' && Object.hasOwn(REFUSED_KEYWORDS, first.text)) this.fail(first.pos, REFUSED_KEYWORDS[first.text]!);
      const pipe = this.pipeline(false);
      this.expectClose('action');
      nodes.push({ kind: 'action', pipe, pos: pipe.pos });
    }
  }

  /** An if, with or range (its keyword read), through its `end`. */
  private control(kind: 'if' | 'with' | 'range', pos: number): Node {
    if (++this.depth > GO_TEMPLATE_LIMITS.maxDepth) this.fail(pos, `nesting is deeper than ${GO_TEMPLATE_LIMITS.maxDepth} levels`);
    this.scopes.push(new Set());
    const pipe = this.pipeline(kind === 'range');
    this.expectClose(kind);
    const [body, end] = this.list();
    if (!end) this.fail(pos, `{{ ${kind} }} is not closed with {{ end }}`);
    let otherwise: Node[] | undefined;
    if (end.word === 'else') {
      this.i++; // the else
      const next = this.peek();
      if (next.t === 'ident' && (next.text === 'if' || next.text === 'with') && kind !== 'range') {
        // `else if …` / `else with …`: a nested structure that shares this one's end.
        this.i++;
        otherwise = [this.chained(next.text, next.pos)];
      } else {
        this.expectClose('else');
        const [rest, end2] = this.list();
        if (!end2 || end2.word !== 'end') this.fail(end2?.pos ?? pos, `{{ ${kind} }} … {{ else }} is not closed with {{ end }}`);
        otherwise = rest;
      }
    }
    this.scopes.pop();
    this.depth--;
    return { kind, pipe, body, ...(otherwise ? { otherwise } : {}), pos };
  }

  /** `else if` / `else with`: as control, but its `end` is the enclosing one's. */
  private chained(kind: 'if' | 'with', pos: number): Node {
    return this.control(kind, pos);
  }

  private peek(): Token {
    const tok = this.tokens[this.i];
    if (!tok) return this.fail(this.tokens[this.tokens.length - 1]?.pos ?? 0, 'action is not closed');
    return tok;
  }

  private expectClose(what: string): void {
    const tok = this.peek();
    if (tok.t !== 'close') this.fail(tok.pos, `unexpected ${describe(tok)} in ${what}`);
    this.i++;
  }

  private declared(name: string): boolean {
    return this.scopes.some((s) => s.has(name));
  }

  private pipeline(inRange: boolean): Pipeline {
    const start = this.peek();
    let decl: Pipeline['decl'];
    // `$x :=`, `$x =`, or in a range `$i, $x :=`.
    const vars: Token[] = [];
    let j = this.i;
    while (this.tokens[j]?.t === 'var') {
      vars.push(this.tokens[j]!);
      if (this.tokens[j + 1]?.t === 'comma' && vars.length < 2) j += 2;
      else {
        j++;
        break;
      }
    }
    const op = this.tokens[j];
    if (vars.length && (op?.t === 'declare' || op?.t === 'assign')) {
      if (vars.length > 1 && !inRange) this.fail(vars[1]!.pos, 'only a range declares two variables');
      const names = vars.map((v) => (v as { text: string }).text);
      if (op.t === 'assign') {
        for (const [k, n] of names.entries())
          if (!this.declared(n)) this.fail(vars[k]!.pos, `variable ${n} is assigned before it is declared with :=`);
      } else {
        for (const [k, n] of names.entries()) if (n === '$') this.fail(vars[k]!.pos, 'variable $ cannot be declared');
      }
      decl = { names, assign: op.t === 'assign' };
      this.i = j + 1;
    }
    const commands: Command[] = [];
    for (;;) {
      commands.push(this.command(commands.length > 0));
      const next = this.peek();
      if (next.t !== 'pipe') break;
      this.i++;
    }
    // Declared after the pipeline is read: `$x := $x` reads an outer $x.
    if (decl && !decl.assign) for (const n of decl.names) this.scopes[this.scopes.length - 1]!.add(n);
    return { ...(decl ? { decl } : {}), commands, pos: start.pos };
  }

  /** One command: operands up to `|`, `)` or the end of the action; `piped`: it gets the value before it as its last argument. */
  private command(piped: boolean): Command {
    const operands: Operand[] = [];
    const pos = this.peek().pos;
    for (;;) {
      const tok = this.peek();
      if (tok.t === 'close' || tok.t === 'pipe' || tok.t === 'rparen') break;
      operands.push(this.operand());
    }
    if (operands.length === 0) this.fail(pos, piped ? 'missing command after |' : 'empty action: give a value or a function');
    const head = operands[0]!;
    if (head.kind !== 'func') {
      if (operands.length > 1) this.fail(operands[1]!.pos, `${describeOperand(head)} is not a function: it takes no arguments`);
      if (piped) this.fail(head.pos, `${describeOperand(head)} after | is not a function`);
    } else {
      const fn = FUNCTIONS[head.name]!;
      const given = operands.length - 1 + (piped ? 1 : 0);
      if (given < fn.min || given > fn.max)
        this.fail(
          head.pos,
          `${head.name} takes ${fn.min === fn.max ? fn.min : fn.max === Infinity ? `at least ${fn.min}` : `${fn.min} to ${fn.max}`} argument${fn.max === 1 ? '' : 's'} (got ${given}${piped ? ', the piped value included' : ''})`,
        );
      const format = operands[1];
      if (head.name === 'printf' && format?.kind === 'value' && typeof format.value === 'string') {
        const bad = /%([^sdvq%])/.exec(format.value.replace(/%%/g, ''));
        if (bad) this.fail(format.pos, `printf verb %${bad[1]} is not supported (only %s, %d, %v, %q and %%)`);
      }
    }
    return { operands, pos };
  }

  private operand(): Operand {
    const tok = this.peek();
    this.i++;
    switch (tok.t) {
      case 'string':
        return { kind: 'value', value: tok.value, interpolate: true, pos: tok.pos };
      case 'number':
        return { kind: 'value', value: tok.value, interpolate: false, pos: tok.pos };
      case 'dot':
        return { kind: 'dot', pos: tok.pos };
      case 'var':
        if (!this.declared(tok.text)) this.fail(tok.pos, `undefined variable ${tok.text}`);
        if (this.peek().t === 'field') return this.fieldRefused(this.peek());
        return { kind: 'var', name: tok.text, pos: tok.pos };
      case 'field':
        return this.fieldRefused(tok);
      case 'lparen': {
        if (++this.depth > GO_TEMPLATE_LIMITS.maxDepth) this.fail(tok.pos, `nesting is deeper than ${GO_TEMPLATE_LIMITS.maxDepth} levels`);
        const pipe = this.pipeline(false);
        if (pipe.decl) this.fail(tok.pos, 'a variable cannot be declared inside parentheses');
        const close = this.peek();
        if (close.t !== 'rparen') this.fail(close.pos, `unexpected ${describe(close)}: ( is not closed with )`);
        this.i++;
        this.depth--;
        return { kind: 'pipe', pipe, pos: tok.pos };
      }
      case 'ident': {
        if (tok.text === 'true' || tok.text === 'false')
          return { kind: 'value', value: tok.text === 'true', interpolate: false, pos: tok.pos };
        if (tok.text === 'nil') return { kind: 'value', value: null, interpolate: false, pos: tok.pos };
        if (Object.hasOwn(FUNCTIONS, tok.text)) return { kind: 'func', name: tok.text, pos: tok.pos };
        return this.fail(tok.pos, unknownFunction(tok.text));
      }
      default:
        return this.fail(tok.pos, `unexpected ${describe(tok)}`);
    }
  }

  private fieldRefused(tok: Token): never {
    const name = (tok as { text: string }).text;
    return this.fail(
      tok.pos,
      `field access ${name} is not supported: a csiplug template has no data to read fields of (no Consul, Vault or Nomad objects); use {{ env "NAME" }} and the task's variables`,
    );
  }
}

const CONSUL_FUNCTIONS = new Set([
  'key',
  'keyOrDefault',
  'keyExists',
  'ls',
  'tree',
  'safeLs',
  'safeTree',
  'service',
  'services',
  'connect',
  'caLeaf',
  'caRoots',
  'node',
  'nodes',
  'datacenters',
  'checks',
]);
const VAULT_FUNCTIONS = new Set(['secret', 'secrets', 'pkiCert']);
const NOMAD_FUNCTIONS = new Set(['nomadVar', 'nomadVarList', 'nomadVarListSafe', 'nomadVarExists', 'nomadService', 'nomadServices']);

function unknownFunction(name: string): string {
  if (CONSUL_FUNCTIONS.has(name))
    return `function "${name}" reads Consul, which csiplug does not use; put the value in the task's env and read it with {{ env "NAME" }}`;
  if (VAULT_FUNCTIONS.has(name))
    return `function "${name}" reads Vault, which csiplug does not use; pass the secret in the task's env and read it with {{ env "NAME" }}`;
  if (NOMAD_FUNCTIONS.has(name))
    return `function "${name}" reads Nomad's variables or services, which csiplug does not have; use the task's env and {{ env "NAME" }}`;
  return `function "${name}" is not supported (csiplug's templates have: ${Object.keys(FUNCTIONS).join(', ')})`;
}

function describe(tok: Token): string {
  switch (tok.t) {
    case 'close':
      return 'end of the action';
    case 'open':
      return 'start of an action';
    case 'ident':
    case 'var':
    case 'field':
      return `"${tok.text}"`;
    case 'string':
      return `string ${JSON.stringify(tok.value)}`;
    case 'number':
      return `number ${tok.value}`;
    case 'text':
      return 'text';
    default:
      return `"${{ dot: '.', pipe: '|', lparen: '(', rparen: ')', declare: ':=', assign: '=', comma: ',' }[tok.t]}"`;
  }
}

function describeOperand(op: Operand): string {
  switch (op.kind) {
    case 'value':
      return typeof op.value === 'string' ? `the string ${JSON.stringify(op.value)}` : `the value ${String(op.value)}`;
    case 'var':
      return `variable ${op.name}`;
    case 'dot':
      return '"."';
    case 'pipe':
      return 'a parenthesized pipeline';
    default:
      return op.name;
  }
}

// ---------------------------------------------------------------------------
// Rendering.

class Renderer {
  private out: string[] = [];
  private size = 0;
  private rangeItems = 0;
  /** Variables, innermost last; a structure's are dropped at its end. */
  private readonly vars: { name: string; value: TemplateValue }[] = [{ name: '$', value: null }];

  constructor(
    private readonly ctx: RenderContext,
    private readonly fail: Fail,
  ) {}

  run(nodes: Node[]): string {
    this.walk(nodes, null);
    return this.out.join('');
  }

  private emit(s: string, pos: number): void {
    this.size += s.length;
    if (this.size > GO_TEMPLATE_LIMITS.maxOutputChars) this.fail(pos, `output is over ${GO_TEMPLATE_LIMITS.maxOutputChars} characters`);
    this.out.push(s);
  }

  private walk(nodes: Node[], dot: TemplateValue): void {
    for (const node of nodes) {
      if (node.kind === 'text') this.emit(this.interpolated(node.text, node.pos, true), node.pos);
      else if (node.kind === 'action') {
        const value = this.pipe(node.pipe, dot);
        if (!node.pipe.decl) this.emit(formatValue(value), node.pos);
      } else this.structure(node, dot);
    }
  }

  private structure(node: ControlNode, dot: TemplateValue): void {
    const mark = this.vars.length;
    try {
      if (node.kind === 'range') return this.range(node, dot);
      const value = this.pipe(node.pipe, dot);
      if (isTrue(value)) this.walk(node.body, node.kind === 'with' ? value : dot);
      else if (node.otherwise) this.walk(node.otherwise, dot);
    } finally {
      this.vars.length = mark;
    }
  }

  private range(node: ControlNode, dot: TemplateValue): void {
    const decl = node.pipe.decl;
    // The range's variables are set per item, not to the whole list.
    const value = this.pipe(decl ? { ...node.pipe, decl: undefined } : node.pipe, dot);
    let items: [TemplateValue, TemplateValue][];
    if (Array.isArray(value)) items = value.map((v, i) => [i, v]);
    else if (value !== null && typeof value === 'object')
      items = Object.keys(value)
        .sort()
        .map((k) => [k, value[k]!]);
    else if (value === null) items = [];
    else return this.fail(node.pos, `range can't iterate over ${formatValue(value)} (a ${typeof value}); give it a list, as split makes`);
    if (items.length === 0) {
      if (node.otherwise) this.walk(node.otherwise, dot);
      return;
    }
    const mark = this.vars.length;
    for (const [key, item] of items) {
      if (++this.rangeItems > GO_TEMPLATE_LIMITS.maxRangeItems)
        this.fail(node.pos, `ranges go over more than ${GO_TEMPLATE_LIMITS.maxRangeItems} items in one render`);
      this.vars.length = mark;
      if (decl) {
        if (decl.names.length === 2) {
          this.bind(decl.names[0]!, key, decl.assign);
          this.bind(decl.names[1]!, item, decl.assign);
        } else this.bind(decl.names[0]!, item, decl.assign);
      }
      this.walk(node.body, item);
    }
  }

  private bind(name: string, value: TemplateValue, assign: boolean): void {
    if (!assign) {
      this.vars.push({ name, value });
      return;
    }
    for (let k = this.vars.length - 1; k >= 0; k--)
      if (this.vars[k]!.name === name) {
        this.vars[k]!.value = value;
        return;
      }
  }

  private pipe(pipe: Pipeline, dot: TemplateValue): TemplateValue {
    let value: TemplateValue | undefined;
    for (const [k, cmd] of pipe.commands.entries()) value = this.command(cmd, dot, k > 0 ? [value!] : []);
    if (pipe.decl) for (const name of pipe.decl.names) this.bind(name, value!, pipe.decl.assign);
    return value!;
  }

  private command(cmd: Command, dot: TemplateValue, piped: TemplateValue[]): TemplateValue {
    const head = cmd.operands[0]!;
    if (head.kind !== 'func') return this.operand(head, dot);
    const fn = FUNCTIONS[head.name]!;
    const args = cmd.operands.slice(1);
    const lazy = args.map((a) => () => this.operand(a, dot));
    for (const p of piped) lazy.push(() => p);
    try {
      return fn.call(lazy, this.ctx);
    } catch (err) {
      if (err instanceof GoTemplateValueError) return this.fail(head.pos, `${head.name}: ${err.message}`);
      throw err;
    }
  }

  private operand(op: Operand, dot: TemplateValue): TemplateValue {
    switch (op.kind) {
      case 'value':
        return op.interpolate && typeof op.value === 'string' ? this.interpolated(op.value, op.pos) : op.value;
      case 'dot':
        return dot;
      case 'var': {
        for (let k = this.vars.length - 1; k >= 0; k--) if (this.vars[k]!.name === op.name) return this.vars[k]!.value;
        return null;
      }
      case 'pipe': {
        const mark = this.vars.length;
        const value = this.pipe(op.pipe, dot);
        this.vars.length = mark;
        return value;
      }
      default:
        return this.fail(op.pos, `${op.name} is a function, not a value`);
    }
  }

  /** `${NAME}` of the task's variables replaced (when the context has them); an unknown name is an error. */
  private interpolated(text: string, pos: number, textPos = false): string {
    const vars = this.ctx.vars;
    if (!vars || !text.includes('${')) return text;
    const matches = [...text.matchAll(/\$\$\{|\$\{([^}]*)\}/g)].filter((m) => m[1] !== undefined && !Object.hasOwn(vars, m[1].trim()));
    const unknown = matches.map((m) => m[1]!.trim());
    if (unknown.length)
      this.fail(
        // Where the first unknown name is (a string literal's own position is its opening quote).
        textPos ? pos + matches[0]!.index : pos,
        `\${${unknown[0]}} is not a variable of this task${
          unknown.length > 1
            ? ` (nor ${unknown
                .slice(1)
                .map((n) => `\${${n}}`)
                .join(', ')})`
            : ''
        }; write $\${…} for a literal \${…}, or use a variable the task has (NOMAD_*, CSIPLUG_*, its env)`,
      );
    return interpolate(text, vars);
  }
}
