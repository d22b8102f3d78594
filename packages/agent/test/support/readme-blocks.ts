// Finds the fenced code blocks of the READMEs and docs and says how each is
// tested: a TypeScript block is type-checked against the built packages and
// run, a shell block marked `run` is run, an HCL or JSON block is parsed by
// the agent's own parsers, anything else must say why it is not run. The
// test that drives it is test/readme-blocks.test.ts; what a README author
// writes is in that file's header.
import { DefaultTimeoutPolicy, MathRandom, RealClock } from '@csiplug/core';
import { GrpcCSIClient, mountCapability } from '@csiplug/csi';
import { type ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import { connect } from 'net';
import * as path from 'path';
import * as ts from 'typescript';

export const REPO = path.resolve(__dirname, '..', '..', '..', '..');

/** The marker comment, alone on the last non-blank line before a fence. */
const MARKER = /^<!--\s*readme-test:(.*?)-->$/;

export type SpecKind = 'agent-config' | 'jobspec' | 'volume-spec' | 'job-fragment';
const SPEC_KINDS: readonly SpecKind[] = ['agent-config', 'jobspec', 'volume-spec', 'job-fragment'];

export interface Block {
  /** The README, relative to the repository root. */
  readonly file: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  /** The fence's language, lower-cased; '' when it names none. */
  readonly lang: string;
  readonly code: string;
  readonly marker: string | undefined;
}

export type Plan =
  | {
      readonly kind: 'ts';
      readonly run: boolean;
      readonly reason?: string;
      /** A jest test (`typecheck (a jest test: …)`): only its type check sees jest's globals. */
      readonly jest: boolean;
      readonly givens: readonly string[];
      readonly prints: readonly string[];
    }
  | { readonly kind: 'js'; readonly prints: readonly string[] }
  | { readonly kind: 'sh'; readonly prints: readonly string[] }
  | { readonly kind: 'spec'; readonly spec: SpecKind }
  | { readonly kind: 'skip'; readonly reason: string }
  | { readonly kind: 'text' };

export function where(block: Block): string {
  return `${block.file}:${block.line}`;
}

/** Every packages/<name>/README.md, sorted. */
export function packageReadmes(): string[] {
  const dir = path.join(REPO, 'packages');
  return fs
    .readdirSync(dir)
    .map((name) => path.join('packages', name, 'README.md'))
    .filter((file) => fs.existsSync(path.join(REPO, file)))
    .sort();
}

/** The repository's own pages: README.md and ARCHITECTURE.md at the root, then every docs/*.md, sorted. */
export function repositoryDocs(): string[] {
  const docs = path.join(REPO, 'docs');
  const pages = fs.existsSync(docs)
    ? fs
        .readdirSync(docs)
        .filter((name) => name.endsWith('.md'))
        .map((name) => path.join('docs', name))
        .sort()
    : [];
  return ['README.md', 'ARCHITECTURE.md', ...pages].filter((file) => fs.existsSync(path.join(REPO, file)));
}

/** Every markdown file whose blocks the README test holds to its rules: the repository's pages, then the packages' READMEs. */
export function testedMarkdown(): string[] {
  return [...repositoryDocs(), ...packageReadmes()];
}

/**
 * The fenced blocks of one markdown text (``` or ~~~, indented ones inside
 * list items too), and the problems found on the way: a marker that belongs
 * to no fence, a fence never closed.
 */
export function extractBlocks(file: string, text: string): { blocks: Block[]; problems: string[] } {
  const lines = text.split('\n');
  const blocks: Block[] = [];
  const problems: string[] = [];
  let pendingMarker: { text: string; line: number } | undefined;
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!;
    const trimmed = raw.trim();
    const marker = MARKER.exec(trimmed);
    if (marker) {
      if (pendingMarker) problems.push(`${file}:${pendingMarker.line}: readme-test marker not followed by a code block`);
      pendingMarker = { text: marker[1]!.trim(), line: i + 1 };
      continue;
    }
    if (trimmed.includes('readme-test'))
      problems.push(`${file}:${i + 1}: malformed readme-test marker (write <!-- readme-test: … --> alone on its line)`);
    const open = /^(\s*)(`{3,}|~{3,})\s*([^`\s]*)/.exec(raw);
    if (!open) {
      if (trimmed !== '' && pendingMarker) {
        problems.push(`${file}:${pendingMarker.line}: readme-test marker not followed by a code block`);
        pendingMarker = undefined;
      }
      continue;
    }
    const indent = open[1]!.length;
    const fence = open[2]!;
    const body: string[] = [];
    let closed = false;
    let j = i + 1;
    for (; j < lines.length; j++) {
      const l = lines[j]!;
      if (new RegExp(`^\\s*${fence[0] === '`' ? '`' : '~'}{${fence.length},}\\s*$`).test(l)) {
        closed = true;
        break;
      }
      body.push(l.slice(Math.min(indent, l.length - l.trimStart().length)));
    }
    if (!closed) problems.push(`${file}:${i + 1}: code block never closed`);
    blocks.push({ file, line: i + 1, lang: open[3]!.toLowerCase(), code: body.join('\n') + '\n', marker: pendingMarker?.text });
    pendingMarker = undefined;
    i = j;
  }
  if (pendingMarker) problems.push(`${file}:${pendingMarker.line}: readme-test marker not followed by a code block`);
  return { blocks, problems };
}

/**
 * The relative links of one markdown text (`[text](target)`, outside code
 * blocks; a link's text may be inline code, inline code is never a link) whose target, read from the file's own dir and
 * without its #fragment, does not exist: each as `file:line: target`.
 * Links with a scheme (https:, mailto:) and same-page #fragments are not looked at.
 */
export function brokenRelativeLinks(file: string, text: string): string[] {
  const broken: string[] = [];
  let fence: string | undefined;
  text.split('\n').forEach((line, i) => {
    const open = /^\s*(`{3,}|~{3,})/.exec(line);
    if (open) {
      if (fence === undefined) fence = open[1]![0];
      else if (open[1]![0] === fence && /^\s*(`{3,}|~{3,})\s*$/.test(line)) fence = undefined;
      return;
    }
    if (fence !== undefined) return;
    for (const m of line.replace(/`[^`]*`/g, '').matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('#')) continue;
      const resolved = path.resolve(REPO, path.dirname(file), decodeURIComponent(target.split('#')[0]!));
      if (!fs.existsSync(resolved)) broken.push(`${file}:${i + 1}: ${target}`);
    }
  });
  return broken;
}

interface Directives {
  skip?: string;
  typecheck?: string;
  run: boolean;
  spec?: SpecKind;
  givens: string[];
  prints: string[];
}

/** `;`-separated directives; a `;` inside a reason's parentheses or a quoted string belongs to it. */
function splitDirectives(marker: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let quoted = false;
  let current = '';
  for (let i = 0; i < marker.length; i++) {
    const c = marker[i]!;
    if (quoted && c === '\\') {
      current += c + (marker[++i] ?? '');
      continue;
    }
    if (c === '"') quoted = !quoted;
    else if (!quoted && c === '(') depth++;
    else if (!quoted && c === ')') depth = Math.max(0, depth - 1);
    if (c === ';' && depth === 0 && !quoted) {
      parts.push(current);
      current = '';
    } else {
      current += c;
    }
  }
  parts.push(current);
  return parts.map((p) => p.trim()).filter(Boolean);
}

function parseDirectives(marker: string): Directives | string {
  const out: Directives = { run: false, givens: [], prints: [] };
  for (const part of splitDirectives(marker)) {
    let m: RegExpExecArray | null;
    if ((m = /^(skip|typecheck)(?:\s*\((.*)\))?$/.exec(part))) {
      const reason = (m[2] ?? '').trim();
      if (!reason) return `"${m[1]}" needs a reason: ${m[1]} (why it cannot run)`;
      out[m[1] as 'skip' | 'typecheck'] = reason;
    } else if ((m = /^given\s+(.+)$/.exec(part))) {
      out.givens.push(
        ...m[1]!
          .split(',')
          .map((g) => g.trim())
          .filter(Boolean),
      );
    } else if ((m = /^prints\s+(".*")$/.exec(part))) {
      try {
        out.prints.push(JSON.parse(m[1]!) as string);
      } catch {
        return `prints takes one JSON string ("text", \\" for a quote), not ${m[1]}`;
      }
    } else if (part === 'run') {
      out.run = true;
    } else if ((SPEC_KINDS as readonly string[]).includes(part)) {
      out.spec = part as SpecKind;
    } else {
      return `unknown directive "${part}" (known: skip (why), typecheck (why), given a, b, prints "text", run, ${SPEC_KINDS.join(', ')})`;
    }
  }
  return out;
}

/** The reason that marks a typecheck block as a jest test: `typecheck (a jest test: where it runs)`. */
const JEST_REASON = /^a jest test\b/;

const TS_LANGS = ['ts', 'typescript'];
const JS_LANGS = ['js', 'javascript'];
const SH_LANGS = ['sh', 'bash', 'shell'];
const SPEC_LANGS = ['hcl', 'json'];

/** How `block` is tested, or why it cannot be: the message says what to write. */
export function planBlock(block: Block): Plan | string {
  const d: Directives | string = block.marker === undefined ? { run: false, givens: [], prints: [] } : parseDirectives(block.marker);
  if (typeof d === 'string') return d;
  // Directives that do not fit the block's kind are refused, not ignored.
  const used: [string, boolean][] = [
    ['typecheck', d.typecheck !== undefined],
    ['run', d.run],
    ['given', d.givens.length > 0],
    ['prints', d.prints.length > 0],
    ['a spec kind', d.spec !== undefined],
  ];
  const extras = (allowed: string[]): string | undefined => {
    const misplaced = used.filter(([name, present]) => present && !allowed.includes(name)).map(([name]) => name);
    return misplaced.length
      ? `${misplaced.join(', ')} does not apply to a \`\`\`${block.lang || '(no language)'} block${d.skip !== undefined ? ' marked skip' : ''}`
      : undefined;
  };
  if (d.skip !== undefined) return extras([]) ?? { kind: 'skip', reason: d.skip };
  if (block.lang === '')
    return 'a code block names its language: ```text for output, a diagram or log lines; ```ts, ```sh, ```hcl … for code';
  if (block.lang === 'text') return extras([]) ?? { kind: 'text' };
  if (TS_LANGS.includes(block.lang)) {
    return (
      extras(['typecheck', 'given', 'prints']) ?? {
        kind: 'ts',
        run: d.typecheck === undefined,
        ...(d.typecheck ? { reason: d.typecheck } : {}),
        jest: d.typecheck !== undefined && JEST_REASON.test(d.typecheck),
        givens: d.givens,
        prints: d.prints,
      }
    );
  }
  if (JS_LANGS.includes(block.lang)) return extras(['prints']) ?? { kind: 'js', prints: d.prints };
  if (SH_LANGS.includes(block.lang)) {
    if (!d.run)
      return 'a shell block is run only when marked: <!-- readme-test: run --> (fast, safe, no agent) or <!-- readme-test: skip (why) -->';
    return extras(['run', 'prints']) ?? { kind: 'sh', prints: d.prints };
  }
  if (SPEC_LANGS.includes(block.lang)) {
    if (!d.spec)
      return `an ${block.lang} block says what it is, and is parsed as that: <!-- readme-test: ${SPEC_KINDS.join(' | ')} --> or <!-- readme-test: skip (why) -->`;
    return extras(['a spec kind']) ?? { kind: 'spec', spec: d.spec };
  }
  return `a \`\`\`${block.lang} block cannot be run here: mark it <!-- readme-test: skip (why) -->`;
}

// ---------------------------------------------------------------------------
// Givens: names a TypeScript block may use without making them, each with the
// declaration that opens the block's generated function. A README names the
// ones it uses (`given dataDir, signal`); everything else a block imports.
// What the test prepares (a dir, a running hostpath plugin) reaches the
// block's process as JSON in READMETEST_GIVENS.
// ---------------------------------------------------------------------------

export type Preparation = 'dataDir' | 'tmpDir' | 'plugin' | 'volume';

export interface Given {
  /** Imports the declaration needs, under $-names no README uses. */
  readonly imports?: readonly string[];
  /** Statements declaring the name, inside the block's function. `$given(k)` reads a prepared value. */
  readonly code: string;
  /** What the test prepares before the run. */
  readonly prepares?: Preparation;
  /** A value exists only for the type check: a block using it must be marked typecheck. */
  readonly typeOnly?: boolean;
}

const CORE = "import * as $core from '@csiplug/core';";

export const GIVENS: Readonly<Record<string, Given>> = {
  dataDir: { code: "const dataDir: string = $given('dataDir');", prepares: 'dataDir' },
  tmpDir: { code: "const tmpDir: string = $given('tmpDir');", prepares: 'tmpDir' },
  signal: { code: 'const signal: AbortSignal = AbortSignal.timeout(20_000);' },
  log: { imports: [CORE], code: 'const log: $core.Logger = new $core.PinoLogger();' },
  allocId: { code: "const allocId: string = 'readme-alloc-1';" },
  endpoint: { code: "const endpoint: string = $given('endpoint');", prepares: 'plugin' },
  socketPath: { code: "const socketPath: string = $given('socketPath');", prepares: 'plugin' },
  externalId: { code: "const externalId: string = $given('externalId');", prepares: 'volume' },
  publishContext: { code: 'const publishContext: Record<string, string> = {};' },
  stateDb: { imports: ["import * as $state from '@csiplug/state';"], code: 'const stateDb = $state.openClientState({ memory: true });' },
  makeCsiClient: {
    imports: [CORE, "import * as $csi from '@csiplug/csi';"],
    code: 'const makeCsiClient = (socket: string): $csi.CSIClient =>\n  new $csi.GrpcCSIClient(socket, { timeouts: new $core.DefaultTimeoutPolicy(), clock: new $core.RealClock(), random: new $core.MathRandom() });',
  },
  taskCtx: { imports: ["import type * as $hooks from '@csiplug/hooks';"], code: 'let taskCtx!: $hooks.TaskHookContext;', typeOnly: true },
  allocCtx: {
    imports: ["import type * as $hooks from '@csiplug/hooks';"],
    code: 'let allocCtx!: $hooks.AllocHookContext;',
    typeOnly: true,
  },
  myVolumeCatalog: {
    imports: ["import type * as $volumes from '@csiplug/volumes';"],
    code: 'let myVolumeCatalog!: $volumes.VolumeClaimer;',
    typeOnly: true,
  },
  mySubject: {
    imports: ["import type * as $registryTesting from '@csiplug/registry/testing';"],
    code: 'let mySubject!: () => $registryTesting.RegistryStoreSubject;',
    typeOnly: true,
  },
};

/** A problem with the givens a plan names, or undefined. */
export function checkGivens(plan: Extract<Plan, { kind: 'ts' }>): string | undefined {
  const unknown = plan.givens.filter((g) => !Object.prototype.hasOwnProperty.call(GIVENS, g));
  if (unknown.length) return `unknown given ${unknown.join(', ')} (known: ${Object.keys(GIVENS).join(', ')})`;
  const typeOnly = plan.givens.filter((g) => GIVENS[g]!.typeOnly);
  if (plan.run && typeOnly.length)
    return `given ${typeOnly.join(', ')} has no value at run time: mark the block typecheck (why it cannot run)`;
  return undefined;
}

// ---------------------------------------------------------------------------
// A TypeScript block as a module: its imports at the top, the rest inside an
// async function (so top-level await type-checks under CommonJS), with a map
// from generated lines back to README lines.
// ---------------------------------------------------------------------------

export interface GeneratedModule {
  readonly text: string;
  /** For each 0-based generated line, the README line it came from (undefined for harness lines). */
  readonly lines: readonly (number | undefined)[];
}

export function generateModule(block: Block, givens: readonly string[]): GeneratedModule {
  const source = ts.createSourceFile('block.ts', block.code, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  const firstCodeLine = block.line + 1;
  const out: string[] = [];
  const lines: (number | undefined)[] = [];
  const push = (text: string, from?: number): void => {
    text.split('\n').forEach((l, i) => {
      out.push(l);
      lines.push(from === undefined ? undefined : from + i);
    });
  };
  push(`// ${where(block)}, generated by packages/agent/test/readme-blocks.test.ts`);
  // Imports go to the top, each at its README line; the body keeps them as blank lines.
  let body = block.code;
  for (const statement of source.statements) {
    if (!ts.isImportDeclaration(statement) && !ts.isImportEqualsDeclaration(statement)) continue;
    const start = statement.getStart(source);
    const text = block.code.slice(start, statement.end);
    push(text, firstCodeLine + source.getLineAndCharacterOfPosition(start).line);
    body = body.slice(0, start) + text.replace(/[^\n]/g, ' ') + body.slice(statement.end);
  }
  for (const line of new Set(givens.flatMap((g) => GIVENS[g]!.imports ?? []))) push(line);
  push('export {};');
  push('function $given(name: string): string {');
  push("  const value = (JSON.parse(process.env.READMETEST_GIVENS ?? '{}') as Record<string, unknown>)[name];");
  push("  if (typeof value !== 'string') throw new Error(`the test prepared no given ${name}`);");
  push('  return value;');
  push('}');
  push('async function $readmeBlock(): Promise<void> {');
  for (const g of givens) push(GIVENS[g]!.code);
  push(body.replace(/\n$/, ''), firstCodeLine);
  push('}');
  // The block must end on its own: nothing here exits for it, so a handle it leaves open shows as a timeout.
  push('$readmeBlock().catch((err: unknown) => {');
  push('  console.error(err);');
  push('  process.exitCode = 1;');
  push('});');
  return { text: out.join('\n') + '\n', lines };
}

/**
 * Compiler options for the blocks: the repository's strict settings,
 * CommonJS, decorators, no unused-name rule (a README shows a value it does
 * not use) — and the settings a user's project may have rather than ours:
 * the published .d.ts files are checked too (skipLibCheck off) and default
 * imports of CommonJS modules are not invented (esModuleInterop off), so a
 * published type that breaks a user's build breaks this check. Jest's
 * globals only for jest tests.
 */
export function blockCompilerOptions(srcDir: string, outDir: string, jest: boolean): ts.CompilerOptions {
  const base = ts.readConfigFile(path.join(REPO, 'tsconfig.base.json'), ts.sys.readFile);
  if (base.error) throw new Error(`tsconfig.base.json: ${ts.flattenDiagnosticMessageText(base.error.messageText, '\n')}`);
  const { options, errors } = ts.convertCompilerOptionsFromJson(base.config.compilerOptions, REPO);
  if (errors.length)
    throw new Error(`tsconfig.base.json: ${errors.map((e) => ts.flattenDiagnosticMessageText(e.messageText, '\n')).join('; ')}`);
  return {
    ...options,
    module: ts.ModuleKind.CommonJS,
    experimentalDecorators: true,
    emitDecoratorMetadata: true,
    noUnusedLocals: false,
    noUnusedParameters: false,
    declaration: false,
    declarationMap: false,
    sourceMap: false,
    skipLibCheck: false,
    esModuleInterop: false,
    allowSyntheticDefaultImports: false,
    types: jest ? ['node', 'jest'] : ['node'],
    rootDir: srcDir,
    outDir,
    noEmitOnError: false,
  };
}

export interface BlockModule {
  readonly block: Block;
  readonly module: GeneratedModule;
  /** Compiled with jest's globals (a block marked as a jest test). */
  readonly jest: boolean;
}

/**
 * Type-checks and emits `files`: the jest tests in one program, the rest in
 * another (a global declared by any file is seen by all of a program's
 * files, so one program cannot keep jest's globals from the blocks that are
 * not jest tests). Returns each diagnostic as text, README locations where a
 * line maps back; a diagnostic of a library file both programs read is
 * given once.
 */
export function compileBlocks(files: ReadonlyMap<string, BlockModule>, srcDir: string, outDir: string): string[] {
  const messages: string[] = [];
  for (const jest of [false, true]) {
    const roots = [...files].filter(([, entry]) => entry.jest === jest).map(([file]) => file);
    if (roots.length === 0) continue;
    const program = ts.createProgram(roots, blockCompilerOptions(srcDir, outDir, jest));
    const diagnostics = [...ts.getPreEmitDiagnostics(program), ...program.emit().diagnostics];
    for (const text of describeDiagnostics(diagnostics, files)) if (!messages.includes(text)) messages.push(text);
  }
  return messages;
}

function describeDiagnostics(diagnostics: readonly ts.Diagnostic[], files: ReadonlyMap<string, BlockModule>): string[] {
  return diagnostics.map((d) => {
    const message = ts.flattenDiagnosticMessageText(d.messageText, '\n');
    if (!d.file || d.start === undefined) return `TS${d.code}: ${message}`;
    const entry = files.get(path.resolve(d.file.fileName));
    const { line, character } = d.file.getLineAndCharacterOfPosition(d.start);
    if (!entry) return `${d.file.fileName}:${line + 1}:${character + 1} TS${d.code}: ${message}`;
    const readmeLine = entry.module.lines[line];
    return readmeLine === undefined
      ? `${where(entry.block)} (harness line ${line + 1}: ${entry.module.text.split('\n')[line]?.trim()}) TS${d.code}: ${message}`
      : `${entry.block.file}:${readmeLine} TS${d.code}: ${message}`;
  });
}

// ---------------------------------------------------------------------------
// Running: a child process with a time limit, the real hostpath plugin.
// ---------------------------------------------------------------------------

export interface ProcessResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly timedOut: boolean;
}

/** After the kill at the limit, how long the pipes may stay open: held by a process that left the group (its own session), they would never close. */
const CLOSE_GRACE_MS = 2_000;

/**
 * Runs `argv` to its end, or SIGKILLs its process group at `timeoutMs` and
 * answers once the process has exited (its output as far as it came).
 */
export function runProcess(
  argv: readonly string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number },
): Promise<ProcessResult> {
  return new Promise((resolve, reject) => {
    // Its own process group, so a block that started children cannot leave them behind at the limit.
    const child = spawn(argv[0]!, argv.slice(1), { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    let grace: NodeJS.Timeout | undefined;
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const finish = (code: number | null, signal: NodeJS.Signals | null): void => {
      clearTimeout(timer);
      clearTimeout(grace);
      child.stdout!.destroy();
      child.stderr!.destroy();
      resolve({ code, signal, stdout, stderr, timedOut });
    };
    const exited = (): boolean => child.exitCode !== null || child.signalCode !== null;
    const awaitClose = (): void => {
      grace ??= setTimeout(() => finish(child.exitCode, child.signalCode), CLOSE_GRACE_MS);
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child);
      if (exited()) awaitClose(); // it ended before the limit, but something still holds its pipes
    }, options.timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('exit', () => {
      if (timedOut) awaitClose();
    });
    child.once('close', (code, signal) => finish(code, signal));
  });
}

function killGroup(child: ChildProcess): void {
  try {
    if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
  } catch {
    child.kill('SIGKILL'); // the group is gone already; the process itself may not be
  }
}

/** The script a package's package.json names as its bin `name`: what `npm install` puts on the PATH. */
export function packageBin(manifestPath: string, name: string): string {
  const manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8')) as { bin?: Record<string, string> };
  const bin = manifest.bin?.[name];
  if (!bin) throw new Error(`${manifestPath} has no bin "${name}"`);
  const script = path.resolve(path.dirname(manifestPath), bin);
  if (!fs.existsSync(script)) throw new Error(`bin "${name}" of ${manifestPath} is ${script}, which does not exist`);
  return script;
}

/** The hostpath plugin's CLI, found as the agent finds it for CSIPLUG_HOSTPATH_CLI. */
export function hostpathCli(): string {
  const cli = path.join(path.dirname(require.resolve('@csiplug/hostpath-plugin/package.json')), 'dist', 'cli.js');
  if (!fs.existsSync(cli)) throw new Error(`the hostpath plugin is not built (${cli} is missing): run npx nx run agent:build first`);
  return cli;
}

export interface PluginProcess {
  readonly socketPath: string;
  stop(): Promise<void>;
}

/** Starts the real hostpath plugin (monolith) on a unix socket under `dir`, and waits until the socket takes a connection. */
export async function startHostpathPlugin(dir: string): Promise<PluginProcess> {
  const socketPath = path.join(dir, 'csi.sock');
  const child = spawn(
    process.execPath,
    [
      hostpathCli(),
      '--endpoint',
      `unix://${socketPath}`,
      '--node-id',
      'readme-node',
      '--state-dir',
      path.join(dir, 'state'),
      '--log-level',
      'warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const late = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(late);
    }
  };
  // A real process: poll its socket until it takes a connection, or it exits.
  const deadline = Date.now() + 15_000;
  while (!(await accepts(socketPath))) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`the hostpath plugin exited (${child.exitCode ?? child.signalCode}) before serving ${socketPath}: ${stderr.trim()}`);
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`the hostpath plugin did not serve ${socketPath} within 15 s: ${stderr.trim()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return { socketPath, stop };
}

function accepts(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(socketPath);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Creates a volume on the plugin through its controller, as the catalog would; returns its id. */
export async function createVolume(socketPath: string, name: string): Promise<string> {
  const client = new GrpcCSIClient(`unix://${socketPath}`, {
    timeouts: new DefaultTimeoutPolicy(),
    clock: new RealClock(),
    random: new MathRandom(),
  });
  try {
    const { volume } = await client.createVolume({
      name,
      capacityRange: { requiredBytes: 1024 * 1024 },
      volumeCapabilities: [mountCapability('SINGLE_NODE_WRITER')],
    });
    if (!volume?.volumeId) throw new Error(`CreateVolume ${name} on ${socketPath} answered no volume id`);
    return volume.volumeId;
  } finally {
    client.dispose();
  }
}
