// The bounds check's own test. It runs tools/bounds/check-bounds.cjs exactly
// as `npm run bounds` does, against throwaway fixture trees: one that holds
// every bound right at its limit (an 800-line file, a 30-method class, the
// agent at 20%, a CLI importing only what it may), and one per bound broken
// by a single line or method past it — each must fail, saying what, where
// and the limit, and nothing else may. The trees are written at test time
// (as the layering check's are), so no 801-line file sits in the repository.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

const SCRIPT = join(__dirname, '..', 'check-bounds.cjs');
// A CommonJS script with no types of its own: loaded, and typed here.
const bounds = createRequire(__filename)(SCRIPT) as {
  checkBounds(root: string, options?: { longFileExceptions?: Map<string, string> }): { violations: string[]; notes: string[] };
  countLines(text: string): number;
};

interface BoundsRun {
  readonly exitCode: number | null;
  /** The violation lines (not the notes, not the summary). */
  readonly violations: readonly string[];
  readonly notes: readonly string[];
  readonly stdout: string;
}

/** Runs the check on the tree at `root` as `npm run bounds` runs it on this repository. */
function runBounds(root: string): BoundsRun {
  const run = spawnSync(process.execPath, [SCRIPT, root], { encoding: 'utf8' });
  if (run.error) throw run.error;
  const lines = run.stdout.split('\n').filter((line) => line.startsWith('bounds: '));
  const summary = lines[lines.length - 1] ?? '';
  return {
    exitCode: run.status,
    violations: lines.filter((line) => !line.startsWith('bounds: note: ') && line !== summary),
    notes: lines.filter((line) => line.startsWith('bounds: note: ')),
    stdout: run.stdout + run.stderr,
  };
}

const trees: string[] = [];

/** A throwaway tree from a path → content map. */
function writeTree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'csiplug-bounds-'));
  trees.push(root);
  for (const [file, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, file)), { recursive: true });
    writeFileSync(join(root, file), content);
  }
  return root;
}

afterAll(() => {
  for (const root of trees) rmSync(root, { recursive: true, force: true });
});

/** `n` lines of plain declarations, each ending with a newline. */
function declarations(n: number, prefix = 'v'): string {
  return Array.from({ length: n }, (_, i) => `export const ${prefix}${i} = ${i};\n`).join('');
}

/**
 * A class of `n` methods as the rule counts them: a constructor, a getter, a
 * setter, one overloaded method (two signatures and its body: one method)
 * and plain methods — plus two function-valued properties, which are not
 * methods and must not count.
 */
function classWith(name: string, n: number): string {
  const plain = Array.from({ length: n - 4 }, (_, i) => `  m${i}(): number {\n    return ${i};\n  }\n`).join('');
  return (
    `export class ${name} {\n` +
    '  private v = 0;\n' +
    '  readonly arrow = (): number => 1;\n' +
    '  readonly other = function (): number {\n    return 2;\n  };\n' +
    '  constructor() {\n    this.v = 1;\n  }\n' +
    '  get value(): number {\n    return this.v;\n  }\n' +
    '  set value(v: number) {\n    this.v = v;\n  }\n' +
    '  over(a: string): string;\n' +
    '  over(a: number): number;\n' +
    '  over(a: string | number): string | number {\n    return a;\n  }\n' +
    plain +
    '}\n'
  );
}

/**
 * The tree that holds every bound at its limit. Its production lines are the
 * agent's and everyone else's, with the agent at exactly `agentShare` of them;
 * spec files and src/testing, which are not production, break every bound
 * and must not be read as production.
 */
function passingTree(overrides: Record<string, string> = {}, agentShare = 0.2, { withCli = true } = {}): Record<string, string> {
  const all: Record<string, string> = {
    'packages/core/src/index.ts': "export * from './long';\nexport * from './widget';\n",
    // Right at the file limit.
    'packages/core/src/long.ts': declarations(800),
    // Right at the class limit (overloads counted once, arrow properties not at all).
    'packages/core/src/widget.ts': classWith('Widget', 30),
    'packages/cli/src/main.ts': [
      "import { readFileSync } from 'node:fs';",
      "import { ApiClient } from '@csiplug/api/client';",
      "import { parseJobspec } from '@csiplug/jobspec';",
      "import type { Logger } from '@csiplug/core';",
      "import { printTable } from './output/table';",
      'export { ApiClient, parseJobspec, printTable, readFileSync, type Logger };',
      '',
    ].join('\n'),
    'packages/cli/src/output/table.ts': 'export function printTable(): void {}\n',
    // Not production: far past every bound, and must change nothing.
    'packages/core/src/huge.spec.ts': declarations(2000) + classWith('SpecHelper', 40),
    'packages/core/src/testing/fake.ts': declarations(2000) + classWith('FakeEverything', 40),
    'packages/cli/src/main.spec.ts': "import '@csiplug/volumes';\n",
    'packages/cli/src/testing/harness.ts': "import '@csiplug/agent';\n",
    ...overrides,
  };
  const others = Object.fromEntries(Object.entries(all).filter(([file]) => withCli || !file.startsWith('packages/cli/')));
  const counted = Object.entries(others)
    .filter(([file]) => !file.endsWith('.spec.ts') && !file.includes('/src/testing/'))
    .reduce((sum, [, text]) => sum + bounds.countLines(text), 0);
  // Padded to a multiple of 4, so that 20% is a whole number of agent lines.
  const padding = (4 - (counted % 4)) % 4;
  others['packages/core/src/pad.ts'] = declarations(padding, 'p');
  const otherLines = counted + padding;
  // agent / (agent + others) = share  ⇒  agent = others · share / (1 − share), never rounded up past it.
  const agentLines = Math.floor((otherLines * agentShare) / (1 - agentShare) + 1e-9);
  return { ...others, 'packages/agent/src/agent.ts': declarations(agentLines, 'a') };
}

describe('the bounds check', () => {
  test('a tree at every limit passes: 800 lines, 30 methods, the agent at 20%, the CLI on the API client, jobspec and core', () => {
    const files = passingTree();
    // The arithmetic of the fixture itself: exactly 20%.
    const production = Object.entries(files).filter(([file]) => !file.endsWith('.spec.ts') && !file.includes('/src/testing/'));
    const total = production.reduce((sum, [, text]) => sum + bounds.countLines(text), 0);
    expect(bounds.countLines(files['packages/agent/src/agent.ts']!) / total).toBe(0.2);
    const run = runBounds(writeTree(files));
    expect(run.violations).toEqual([]);
    expect(run.stdout).toMatch(/all bounds hold/);
    expect(run.exitCode).toBe(0);
  });

  test('an 801-line production file fails, named with its line count and the limit', () => {
    const run = runBounds(writeTree(passingTree({ 'packages/core/src/long.ts': declarations(801) })));
    expect(run.violations).toEqual([
      expect.stringMatching(/^bounds: file too long: packages\/core\/src\/long\.ts has 801 lines \(limit 800 per production file/),
    ]);
    expect(run.exitCode).toBe(1);
  });

  test('a class of 31 methods fails, named with where it is, its count and the limit', () => {
    const run = runBounds(writeTree(passingTree({ 'packages/core/src/widget.ts': classWith('Widget', 31) })));
    expect(run.violations).toEqual([
      expect.stringMatching(
        /^bounds: class too big: class Widget at packages\/core\/src\/widget\.ts:1 has 31 methods \(limit 30, counting methods, getters, setters and constructors\)$/,
      ),
    ]);
    expect(run.exitCode).toBe(1);
  });

  test('a class past the limit is found wherever it is declared: nested in a function, as a class expression', () => {
    const nested = `export function make() {\n  return class {\n${Array.from({ length: 31 }, (_, i) => `    m${i}() {}\n`).join('')}  };\n}\n`;
    const run = runBounds(writeTree(passingTree({ 'packages/core/src/nested.ts': nested })));
    expect(run.violations).toEqual([
      expect.stringMatching(/^bounds: class too big: class \(anonymous class\) at packages\/core\/src\/nested\.ts:2 has 31 methods/),
    ]);
  });

  test('an agent over 20% of the production lines fails, with its lines, the total and the limit', () => {
    const run = runBounds(writeTree(passingTree({}, 0.21)));
    expect(run.violations).toEqual([
      expect.stringMatching(/^bounds: agent share: packages\/agent has \d+ of \d+ production lines = 21\.0% \(limit 20%/),
    ]);
    expect(run.exitCode).toBe(1);
  });

  test('a CLI importing @csiplug/volumes fails, and so does every other way past the API client, jobspec and core', () => {
    const main = [
      "import { VolumeCatalog } from '@csiplug/volumes';",
      "import { startServer } from '@csiplug/api';",
      "export { Agent } from '@csiplug/agent';",
      "import { agentInternals } from '../../agent/src/agent';",
      "const lazy = () => import('@csiplug/runner');",
      "const old = require('@csiplug/cluster');",
      "import { ApiClient } from '@csiplug/api/client';",
      'export { VolumeCatalog, startServer, agentInternals, lazy, old, ApiClient };',
      '',
    ].join('\n');
    const run = runBounds(writeTree(passingTree({ 'packages/cli/src/main.ts': main })));
    const allowed = '(the CLI may import only @csiplug/api/client, @csiplug/jobspec, @csiplug/core of our packages, and its own files)';
    expect(run.violations).toEqual([
      `bounds: CLI import: packages/cli/src/main.ts:1 imports "@csiplug/volumes" ${allowed}`,
      `bounds: CLI import: packages/cli/src/main.ts:2 imports "@csiplug/api" ${allowed}`,
      `bounds: CLI import: packages/cli/src/main.ts:3 imports "@csiplug/agent" ${allowed}`,
      `bounds: CLI import: packages/cli/src/main.ts:4 imports "../../agent/src/agent" ${allowed}`,
      `bounds: CLI import: packages/cli/src/main.ts:5 imports "@csiplug/runner" ${allowed}`,
      `bounds: CLI import: packages/cli/src/main.ts:6 imports "@csiplug/cluster" ${allowed}`,
    ]);
    expect(run.exitCode).toBe(1);
  });

  test('with no packages/cli the CLI rule is skipped, and says so', () => {
    const run = runBounds(writeTree(passingTree({}, 0.2, { withCli: false })));
    expect(run.notes).toEqual(['bounds: note: no packages/cli in this tree: the CLI import rule is skipped until it exists']);
    expect(run.violations).toEqual([]);
    expect(run.exitCode).toBe(0);
  });

  test('all the breaks at once: each is reported, none hides another', () => {
    const run = runBounds(
      writeTree(
        passingTree(
          {
            'packages/core/src/long.ts': declarations(801),
            'packages/core/src/widget.ts': classWith('Widget', 31),
            'packages/cli/src/main.ts': "import '@csiplug/volumes';\n",
          },
          0.3,
        ),
      ),
    );
    // In file order, the agent's share last.
    expect(run.violations.map((line) => line.split(':')[1]!.trim())).toEqual([
      'CLI import',
      'file too long',
      'class too big',
      'agent share',
    ]);
    expect(run.exitCode).toBe(1);
  });

  test('a flat table listed by name may pass the file limit; listed, it is a note, and a listed file that is gone is a note too', () => {
    const root = writeTree(passingTree({ 'packages/core/src/long.ts': declarations(801) }));
    const exceptions = new Map([
      ['packages/core/src/long.ts', 'a flat table: one entry per line'],
      ['packages/core/src/gone.ts', 'a table since removed'],
    ]);
    const result = bounds.checkBounds(root, { longFileExceptions: exceptions });
    expect(result.violations).toEqual([]);
    expect(result.notes).toEqual([
      'packages/core/src/long.ts has 801 lines, allowed as a flat table (a flat table: one entry per line)',
      'LONG_FILE_EXCEPTIONS names packages/core/src/gone.ts, which is not a production file of this tree: remove the entry',
    ]);
    // Excepted by exact path only: another long file is still a violation.
    const other = writeTree(
      passingTree({ 'packages/core/src/long.ts': declarations(801), 'packages/core/src/long2.ts': declarations(801) }),
    );
    expect(bounds.checkBounds(other, { longFileExceptions: exceptions }).violations).toEqual([
      expect.stringMatching(/^file too long: packages\/core\/src\/long2\.ts has 801 lines/),
    ]);
  });
});
