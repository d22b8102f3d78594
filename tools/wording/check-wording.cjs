#!/usr/bin/env node
// Words for operators (issue 28): the texts an operator reads — error
// messages, task and plugin event messages, the CLI's output — name no
// function, API, DI token or internal class. An operator cannot act on
// `call waitForPlugin(...)` or `IVolumeClaimer`; each text says what, where
// and what to do in the operator's words. Run by `npm test` (`npm run
// wording`) beside the bounds check; its own test (test/wording.test.ts)
// breaks each rule on purpose in fixture trees.
//
// The texts checked (production files: packages/*/src/**/*.ts, less
// *.spec.ts and src/testing/**): every string literal and template literal
// (its fixed parts) that is an argument of `new <Anything>Error(…)` or of an
// error class's `super(…)`, the value
// of an object property named as an event's or refusal's text (OPERATOR_TEXT_
// PROPERTIES), an argument of a call that prints or reports to the operator
// (OPERATOR_TEXT_CALLS), or what a function that makes such a text returns
// (TEXT_MAKER: retryWhy, usageText…). In those texts it refuses:
//   1. call syntax: a word immediately followed by `(`, as in `foo(` or
//      `foo()` (a `(` after a space, as in "(got 3)", is fine; so is a
//      plural "(s)");
//   2. a DI token's name (every `export const IXxx = Symbol(…)` of a
//      package's tokens*.ts);
//   3. an internal class's name (every class declared in production code
//      whose name joins two or more words, such as PluginRegistry).
//
// Usage: node tools/wording/check-wording.cjs [ROOT]   (ROOT: this repository)
// Prints each violation as file:line, the rule and the text; exits 1 when any.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const ts = require('typescript');

/** Object properties whose value an operator reads: event messages and refusal reasons. */
const OPERATOR_TEXT_PROPERTIES = new Set(['message', 'displayMessage', 'reason', 'why', 'details', 'hint']);
/** Calls whose text arguments an operator reads: CLI output and restart reasons. */
const OPERATOR_TEXT_CALLS = new Set(['out', 'write', 'requestRestart', 'fail', 'kill', 'event', 'emitEvent', 'addEvent']);
/** Functions whose returned text an operator reads: an event's or refusal's words made in one place (retryWhy, pendingWhy, usageText…). */
const TEXT_MAKER = /(Why|Message|Text|Reason|Words|Hint)$/;
/** `(s)`, `(es)`: a plural in passing, not a call. */
const PLURAL = /^\((e?s)\)/;
const CALL = /([A-Za-z_$][\w$]*)\(/g;

/** Production .ts files under `root`, paths from `root` with forward slashes, sorted. */
function productionFiles(root) {
  const out = [];
  const packagesDir = path.join(root, 'packages');
  if (!fs.existsSync(packagesDir)) return out;
  const walk = (dir, rel) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const r = `${rel}/${e.name}`;
      if (e.isDirectory()) {
        if (e.name === 'testing' || e.name === 'node_modules') continue;
        walk(path.join(dir, e.name), r);
      } else if (e.name.endsWith('.ts') && !e.name.endsWith('.spec.ts') && !e.name.endsWith('.d.ts')) out.push(r);
    }
  };
  for (const pkg of fs.readdirSync(packagesDir, { withFileTypes: true })) {
    const src = path.join(packagesDir, pkg.name, 'src');
    if (pkg.isDirectory() && fs.existsSync(src)) walk(src, `packages/${pkg.name}/src`);
  }
  return out.sort();
}

function parse(root, file) {
  return ts.createSourceFile(file, fs.readFileSync(path.join(root, file), 'utf8'), ts.ScriptTarget.Latest, true);
}

/** The DI token names: `export const IXxx = …` in every packages/*\/src/tokens*.ts. */
function tokenNames(root, files) {
  const names = new Set();
  for (const file of files.filter((f) => /\/src\/tokens[^/]*\.ts$/.test(f))) {
    const visit = (node) => {
      if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && /^I[A-Z]\w+$/.test(node.name.text)) names.add(node.name.text);
      ts.forEachChild(node, visit);
    };
    visit(parse(root, file));
  }
  return names;
}

/** Names of the classes declared in production code that join two or more words (PluginRegistry, not Volume). */
function classNames(sources) {
  const names = new Set();
  for (const sf of sources.values()) {
    const visit = (node) => {
      if (ts.isClassDeclaration(node) && node.name && /^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+$/.test(node.name.text)) names.add(node.name.text);
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  return names;
}

/** The fixed text pieces of an expression an operator reads, each with its node (for the line). */
function textPieces(expr, out = []) {
  if (!expr) return out;
  if (ts.isStringLiteral(expr) || ts.isNoSubstitutionTemplateLiteral(expr)) out.push({ node: expr, text: expr.text });
  else if (ts.isTemplateExpression(expr)) {
    out.push({ node: expr.head, text: expr.head.text });
    for (const span of expr.templateSpans) {
      textPieces(span.expression, out);
      out.push({ node: span.literal, text: span.literal.text });
    }
  } else if (ts.isBinaryExpression(expr) && expr.operatorToken.kind === ts.SyntaxKind.PlusToken) {
    textPieces(expr.left, out);
    textPieces(expr.right, out);
  } else if (
    ts.isBinaryExpression(expr) &&
    [ts.SyntaxKind.QuestionQuestionToken, ts.SyntaxKind.BarBarToken].includes(expr.operatorToken.kind)
  ) {
    textPieces(expr.right, out);
  } else if (ts.isConditionalExpression(expr)) {
    textPieces(expr.whenTrue, out);
    textPieces(expr.whenFalse, out);
  } else if (ts.isParenthesizedExpression(expr)) textPieces(expr.expression, out);
  else if (ts.isObjectLiteralExpression(expr)) {
    for (const p of expr.properties) if (ts.isPropertyAssignment(p)) textPieces(p.initializer, out);
  }
  return out;
}

function calleeName(expr) {
  if (ts.isIdentifier(expr)) return expr.text;
  if (ts.isPropertyAccessExpression(expr)) return expr.name.text;
  return undefined;
}

/** A `super(…)` call in a class whose name or base's name ends in Error: its arguments are the message. */
function extendsError(node) {
  let n = node.parent;
  while (n && !ts.isClassLike(n)) n = n.parent;
  if (!n) return false;
  if (n.name && /Error$/.test(n.name.text)) return true;
  return (n.heritageClauses ?? []).some((h) => h.types.some((t) => /Error$/.test(t.expression.getText())));
}

/** The name of a function declaration, method, or function bound to a variable. */
function functionName(fn) {
  if (fn.name && ts.isIdentifier(fn.name)) return fn.name.text;
  if (fn.parent && ts.isVariableDeclaration(fn.parent) && ts.isIdentifier(fn.parent.name)) return fn.parent.name.text;
  return undefined;
}

function enclosingFunctionName(node) {
  let n = node.parent;
  while (n && !ts.isFunctionLike(n)) n = n.parent;
  return n ? functionName(n) : undefined;
}

/** The violations in one text: call syntax, token names, class names. */
function problemsIn(text, tokens, classes) {
  const found = [];
  for (const m of text.matchAll(CALL)) {
    if (PLURAL.test(text.slice(m.index + m[1].length))) continue;
    found.push(`call syntax "${m[1]}("`);
  }
  for (const word of text.match(/[A-Za-z_$][\w$]*/g) ?? []) {
    if (tokens.has(word)) found.push(`DI token name "${word}"`);
    else if (classes.has(word)) found.push(`internal class name "${word}"`);
  }
  return found;
}

/**
 * Checks the tree at `root`; `violations` are `file:line: rule: text` lines.
 * `texts` counts the operator texts read (so a check that reads none shows).
 */
function checkWording(root) {
  const files = productionFiles(root);
  const sources = new Map(files.map((f) => [f, parse(root, f)]));
  const tokens = tokenNames(root, files);
  const classes = classNames(sources);
  const violations = [];
  let texts = 0;
  for (const [file, sf] of sources) {
    const seen = new Set();
    const check = (expr) => {
      // A lone word with no space (an error's stable code, a field's name) is not a message.
      if ((ts.isStringLiteral(expr) || ts.isNoSubstitutionTemplateLiteral(expr)) && !/\s/.test(expr.text)) return;
      for (const piece of textPieces(expr)) {
        if (seen.has(piece.node)) continue;
        seen.add(piece.node);
        texts += 1;
        const line = sf.getLineAndCharacterOfPosition(piece.node.getStart(sf)).line + 1;
        for (const problem of problemsIn(piece.text, tokens, classes)) {
          violations.push(`${file}:${line}: ${problem}: ${JSON.stringify(piece.text)}`);
        }
      }
    };
    const visit = (node) => {
      if (ts.isNewExpression(node) && /Error$/.test(calleeName(node.expression) ?? '')) (node.arguments ?? []).forEach(check);
      else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.SuperKeyword && extendsError(node))
        node.arguments.forEach(check);
      else if (ts.isCallExpression(node) && OPERATOR_TEXT_CALLS.has(calleeName(node.expression) ?? '')) node.arguments.forEach(check);
      else if (ts.isPropertyAssignment(node) && OPERATOR_TEXT_PROPERTIES.has(node.name.getText(sf))) check(node.initializer);
      else if (ts.isReturnStatement(node) && TEXT_MAKER.test(enclosingFunctionName(node) ?? '')) check(node.expression);
      else if (ts.isArrowFunction(node) && !ts.isBlock(node.body) && TEXT_MAKER.test(functionName(node) ?? '')) check(node.body);
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  return { violations, texts, files: files.length };
}

module.exports = { checkWording, problemsIn };

if (require.main === module) {
  const root = path.resolve(process.argv[2] ?? path.join(__dirname, '..', '..'));
  const { violations, texts, files } = checkWording(root);
  for (const v of violations) console.log(`wording: ${v}`);
  console.log(
    violations.length
      ? `wording: ${violations.length} operator text(s) name a function, DI token or internal class; say what, where and what to do in the operator's words`
      : `wording: ok (${texts} operator texts in ${files} files)`,
  );
  process.exitCode = violations.length ? 1 : 0;
}
