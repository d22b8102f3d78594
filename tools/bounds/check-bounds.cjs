#!/usr/bin/env node
// The size bounds of the tree (issue 26): what keeps the agent a composition
// root and every file and class small enough to read. Run by `npm test`
// (`npm run bounds`) beside the layering check; its own test
// (test/bounds.test.ts) breaks each rule on purpose in fixture trees.
//
//   1. the agent package holds at most 20% of the production lines;
//   2. no production file is over 800 lines (flat tables excepted, by name,
//      in LONG_FILE_EXCEPTIONS below);
//   3. no class has over 30 methods (methods, getters, setters and
//      constructors, counted with the TypeScript compiler API);
//   4. the CLI package imports, of our packages, only the API client,
//      jobspec and core (skipped, with a note, while packages/cli is absent).
//
// Production lines: packages/*/src/**/*.ts, less *.spec.ts and src/testing/**
// (the fakes and conformance suites of the testing entry points). The hostpath
// plugin counts as production: it is published, `csiplug demo` and the agent
// run it, and the issue's own measure (agent 40% of the production source)
// counted it.
//
// Usage: node tools/bounds/check-bounds.cjs [ROOT]   (ROOT: this repository)
// Prints every violation with what, where and the limit; exits 1 when any.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const ts = require('typescript');

// ---------------------------------------------------------------------------
// THE BOUNDS — edit here.
// ---------------------------------------------------------------------------
/** The agent package's share of the production lines, at most. */
const AGENT_SHARE_LIMIT = 0.2;
/** Lines of one production file, at most. */
const FILE_LINE_LIMIT = 800;
/** Methods (with getters, setters and constructors) of one class, at most. */
const CLASS_METHOD_LIMIT = 30;
/**
 * Production files allowed past FILE_LINE_LIMIT because they are flat tables
 * (a route list, a table of codes): one entry per line, nothing to split by
 * concept. Paths from the root; each entry says why. Empty today.
 */
const LONG_FILE_EXCEPTIONS = new Map([
  // ['packages/api/src/routes/route-table.ts', 'the route list: one route per line'],
]);
/** The only @csiplug imports the CLI may have: the API client, jobspec, core (subpaths of these included). */
const CLI_ALLOWED_IMPORTS = ['@csiplug/api/client', '@csiplug/jobspec', '@csiplug/core'];
// ---------------------------------------------------------------------------

const AGENT_PACKAGE = 'agent';
const CLI_PACKAGE = 'cli';

/** Every production .ts file of the tree, as paths from `root` with forward slashes, sorted. */
function productionFiles(root) {
  const packagesDir = path.join(root, 'packages');
  const out = [];
  if (!fs.existsSync(packagesDir)) return out;
  for (const pkg of fs.readdirSync(packagesDir, { withFileTypes: true })) {
    if (!pkg.isDirectory()) continue;
    const src = path.join(packagesDir, pkg.name, 'src');
    if (fs.existsSync(src)) walk(src, `packages/${pkg.name}/src`, out);
  }
  return out.sort();
}

function walk(dir, rel, out) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const relPath = `${rel}/${entry.name}`;
    if (entry.isDirectory()) {
      // The testing entry point is test code shipped for users' tests, not production.
      if (relPath.split('/').length === 4 && entry.name === 'testing') continue;
      walk(path.join(dir, entry.name), relPath, out);
    } else if (entry.isFile() && entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts') && !entry.name.endsWith('.d.ts')) {
      out.push(relPath);
    }
  }
}

/** Lines as `wc -l` counts them for a file that ends with a newline (a last line without one counts too). */
function countLines(text) {
  if (text.length === 0) return 0;
  let n = 0;
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) n++;
  return text.endsWith('\n') ? n : n + 1;
}

function packageOf(file) {
  return file.split('/')[1];
}

/** Counts the methods of each class in `source`: methods, getters, setters and constructors with a body (or abstract); overload signatures are not methods. */
function classSizes(source) {
  const out = [];
  const visit = (node) => {
    if (ts.isClassDeclaration(node) || ts.isClassExpression(node)) {
      let methods = 0;
      for (const member of node.members) {
        const isMethodLike =
          ts.isMethodDeclaration(member) ||
          ts.isGetAccessorDeclaration(member) ||
          ts.isSetAccessorDeclaration(member) ||
          ts.isConstructorDeclaration(member);
        if (!isMethodLike) continue;
        const isAbstract = (ts.getCombinedModifierFlags(member) & ts.ModifierFlags.Abstract) !== 0;
        if (member.body !== undefined || isAbstract) methods++;
      }
      const name = node.name ? node.name.text : '(anonymous class)';
      const { line } = source.getLineAndCharacterOfPosition(node.getStart(source));
      out.push({ name, line: line + 1, methods });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

/** Every module specifier the file loads: import/export … from, import = require, require() and import() with a literal. */
function importsOf(source) {
  const out = [];
  const add = (literal) => {
    const { line } = source.getLineAndCharacterOfPosition(literal.getStart(source));
    out.push({ specifier: literal.text, line: line + 1 });
  };
  const visit = (node) => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier))
      add(node.moduleSpecifier);
    else if (
      ts.isImportEqualsDeclaration(node) &&
      ts.isExternalModuleReference(node.moduleReference) &&
      ts.isStringLiteral(node.moduleReference.expression)
    )
      add(node.moduleReference.expression);
    else if (ts.isCallExpression(node) && node.arguments.length > 0 && ts.isStringLiteralLike(node.arguments[0])) {
      const callee = node.expression;
      if (callee.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(callee) && callee.text === 'require')) add(node.arguments[0]);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal))
      add(node.argument.literal);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

/** Whether the CLI may import `specifier`: anything outside our scope, its own files, or an allowed package (or a subpath of one). */
function cliMayImport(file, specifier) {
  if (specifier.startsWith('.')) {
    // A relative import must stay inside the CLI package: no reaching into another package's files.
    const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier));
    return target.startsWith(`packages/${CLI_PACKAGE}/`);
  }
  if (!specifier.startsWith('@csiplug/')) return true;
  return CLI_ALLOWED_IMPORTS.some((allowed) => specifier === allowed || specifier.startsWith(`${allowed}/`));
}

/**
 * Checks the tree at `root`; returns the violations and notes (each a
 * printable line). `longFileExceptions` replaces LONG_FILE_EXCEPTIONS (for
 * the check's own test).
 */
function checkBounds(root, { longFileExceptions = LONG_FILE_EXCEPTIONS } = {}) {
  const violations = [];
  const notes = [];
  const files = productionFiles(root);
  const linesByPackage = new Map();
  let total = 0;
  const hasCli = fs.existsSync(path.join(root, 'packages', CLI_PACKAGE));
  if (!hasCli) notes.push(`no packages/${CLI_PACKAGE} in this tree: the CLI import rule is skipped until it exists`);

  for (const file of files) {
    const text = fs.readFileSync(path.join(root, file), 'utf8');
    const lines = countLines(text);
    total += lines;
    linesByPackage.set(packageOf(file), (linesByPackage.get(packageOf(file)) ?? 0) + lines);

    if (lines > FILE_LINE_LIMIT) {
      if (longFileExceptions.has(file)) notes.push(`${file} has ${lines} lines, allowed as a flat table (${longFileExceptions.get(file)})`);
      else
        violations.push(
          `file too long: ${file} has ${lines} lines (limit ${FILE_LINE_LIMIT} per production file; split it where its ideas meet, or list a flat table by name in LONG_FILE_EXCEPTIONS)`,
        );
    }

    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
    for (const cls of classSizes(source)) {
      if (cls.methods > CLASS_METHOD_LIMIT) {
        violations.push(
          `class too big: class ${cls.name} at ${file}:${cls.line} has ${cls.methods} methods (limit ${CLASS_METHOD_LIMIT}, counting methods, getters, setters and constructors)`,
        );
      }
    }

    if (hasCli && packageOf(file) === CLI_PACKAGE) {
      for (const { specifier, line } of importsOf(source)) {
        if (!cliMayImport(file, specifier)) {
          violations.push(
            `CLI import: ${file}:${line} imports "${specifier}" (the CLI may import only ${CLI_ALLOWED_IMPORTS.join(', ')} of our packages, and its own files)`,
          );
        }
      }
    }
  }

  for (const file of longFileExceptions.keys()) {
    if (!files.includes(file))
      notes.push(`LONG_FILE_EXCEPTIONS names ${file}, which is not a production file of this tree: remove the entry`);
  }

  const agentLines = linesByPackage.get(AGENT_PACKAGE) ?? 0;
  const share = total === 0 ? 0 : agentLines / total;
  const sharePct = `${(share * 100).toFixed(1)}%`;
  if (share > AGENT_SHARE_LIMIT) {
    violations.push(
      `agent share: packages/${AGENT_PACKAGE} has ${agentLines} of ${total} production lines = ${sharePct} (limit ${AGENT_SHARE_LIMIT * 100}%; the agent is composition and the service facade, nothing else)`,
    );
  }
  return { violations, notes, summary: { files: files.length, productionLines: total, agentLines, agentShare: sharePct } };
}

function main() {
  const root = path.resolve(process.argv[2] ?? path.join(__dirname, '..', '..'));
  const { violations, notes, summary } = checkBounds(root);
  for (const note of notes) console.log(`bounds: note: ${note}`);
  for (const violation of violations) console.log(`bounds: ${violation}`);
  console.log(
    `bounds: ${summary.files} production files, ${summary.productionLines} lines, agent ${summary.agentLines} (${summary.agentShare}); ${violations.length === 0 ? 'all bounds hold' : `${violations.length} violation${violations.length === 1 ? '' : 's'}`}`,
  );
  process.exitCode = violations.length === 0 ? 0 : 1;
}

module.exports = { checkBounds, countLines, classSizes, importsOf };

if (require.main === module) main();
