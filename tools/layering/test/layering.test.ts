// The layering check's own test. It runs dependency-cruiser exactly as
// `npm run layering` does, with the real .dependency-cruiser.cjs: against
// throwaway fixture trees whose imports break each rule on purpose (each rule
// must fire, by name, on the import that breaks it, and nowhere else), and
// against this repository (no violation).
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { stripVTControlCharacters } from 'node:util';

const REPO_ROOT = join(__dirname, '..', '..', '..');
const CONFIG = join(REPO_ROOT, '.dependency-cruiser.cjs');
const DEPCRUISE = join(REPO_ROOT, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');
/** Each case runs dependency-cruiser twice; on a loaded two-core machine the real tree takes tens of seconds. */
const CRUISE_TIMEOUT_MS = 120_000;

interface Violation {
  readonly rule: string;
  readonly from: string;
  readonly to: string;
}

interface CruiseOutcome {
  /** The exit status of the check as `npm run layering` runs it (its default, human-readable report). */
  readonly exitCode: number | null;
  /** That report: one line per violation, naming the rule. */
  readonly report: string;
  readonly stderr: string;
  /** Violations that fail the check, from the JSON report (known violations, softened to `ignore`, are left out). */
  readonly violations: readonly Violation[];
  /** The files the check read (their path from the tree's root). */
  readonly modules: readonly string[];
}

function depcruise(root: string, outputType: string) {
  const run = spawnSync(process.execPath, [DEPCRUISE, '--config', CONFIG, '--output-type', outputType, '--no-progress', 'packages'], {
    cwd: root,
    env: { ...process.env, CSIPLUG_LAYERING_ROOT: root },
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (run.error) throw run.error;
  return run;
}

/**
 * Runs the check on the tree at `root` the way `npm run layering` runs it on
 * this repository (for its exit status and report), and once more for the
 * JSON report, which names each violation's rule, source and target.
 */
function runLayering(root: string): CruiseOutcome {
  const human = depcruise(root, 'err');
  const json = depcruise(root, 'json');
  const result = json.stdout.trim()
    ? (JSON.parse(json.stdout) as {
        modules: { source: string }[];
        summary: { violations: { rule: { name: string; severity: string }; from: string; to: string }[] };
      })
    : { modules: [], summary: { violations: [] } };
  return {
    exitCode: human.status,
    // Colour codes off: under nx the report is coloured.
    report: stripVTControlCharacters(human.stdout),
    stderr: human.stderr + json.stderr,
    violations: result.summary.violations
      .filter((violation) => violation.rule.severity !== 'ignore')
      .map((violation) => ({ rule: violation.rule.name, from: violation.from, to: violation.to })),
    modules: result.modules.map((module) => module.source),
  };
}

/** A throwaway tree: files written from a path → content map, plus workspace symlinks as npm makes them. */
function writeTree(files: Record<string, string>, workspaceLinks: readonly string[] = []): string {
  const root = mkdtempSync(join(tmpdir(), 'csiplug-layering-'));
  for (const [file, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, file)), { recursive: true });
    writeFileSync(join(root, file), content);
  }
  mkdirSync(join(root, 'node_modules', '@csiplug'), { recursive: true });
  for (const name of workspaceLinks) {
    symlinkSync(join('..', '..', 'packages', name), join(root, 'node_modules', '@csiplug', name));
  }
  return root;
}

function manifest(name: string, fields: Record<string, unknown> = {}): string {
  return JSON.stringify({
    name: `@csiplug/${name}`,
    version: '0.1.0',
    main: './dist/index.js',
    types: './dist/index.d.ts',
    exports: { '.': { types: './dist/index.d.ts', default: './dist/index.js' }, './package.json': './package.json' },
    ...fields,
  });
}

describe('the layering check on a tree that breaks every rule', () => {
  let root: string;
  let outcome: CruiseOutcome;

  beforeAll(() => {
    root = writeTree(
      {
        'package.json': JSON.stringify({
          name: 'fixture',
          private: true,
          workspaces: ['packages/*'],
          devDependencies: { 'root-dev-tool': '1.0.0' },
        }),
        // npm packages: one only the root declares (as a devDependency), one nobody declares.
        'node_modules/root-dev-tool/package.json': JSON.stringify({ name: 'root-dev-tool', version: '1.0.0', main: 'index.js' }),
        'node_modules/root-dev-tool/index.js': 'module.exports = {};\n',
        'node_modules/undeclared-lib/package.json': JSON.stringify({ name: 'undeclared-lib', version: '1.0.0', main: 'index.js' }),
        'node_modules/undeclared-lib/index.js': 'module.exports = {};\n',

        // core, floor 0: imports agent (floor 6) — upwards.
        'packages/core/package.json': manifest('core'),
        'packages/core/src/index.ts': "export * from './clock';\n",
        'packages/core/src/clock.ts': 'export interface Clock { now(): number }\n',
        'packages/core/src/upwards.ts': "import { Agent } from '@csiplug/agent';\nexport const agent = Agent;\n",

        // csi, floor 1: clean; state imports it from the same floor.
        'packages/csi/package.json': manifest('csi', { dependencies: { '@csiplug/core': '0.1.0' } }),
        'packages/csi/src/index.ts': "import type { Clock } from '@csiplug/core';\nexport type CSIClock = Clock;\n",

        // state, floor 1: a testing entry, a built file, a same-floor import, and a tokens cycle by type only.
        'packages/state/package.json': manifest('state', {
          exports: {
            '.': { types: './dist/index.d.ts', default: './dist/index.js' },
            './testing': { types: './dist/testing/index.d.ts', default: './dist/testing/index.js' },
            './package.json': './package.json',
          },
          dependencies: { '@csiplug/core': '0.1.0', '@csiplug/csi': '0.1.0' },
        }),
        'packages/state/src/index.ts': "export * from './db';\nexport * from './tokens';\n",
        'packages/state/src/db.ts': "import type { CSIClock } from '@csiplug/csi';\nexport interface DB { readonly clock: CSIClock }\n",
        'packages/state/src/tokens.ts':
          "import type { StateStore } from './state-store';\nexport type IStateStore = StateStore;\nexport const IStateStore = Symbol('IStateStore');\n",
        'packages/state/src/state-store.ts':
          "import { IStateStore } from './tokens';\nexport class StateStore { readonly token = IStateStore; }\n",
        'packages/state/src/testing/index.ts': "import type { DB } from '../db';\nexport const fakeDB = (): DB | undefined => undefined;\n",
        'packages/state/dist/db.js': 'exports.db = 1;\n',

        // agent, floor 6: declares core and state only.
        'packages/agent/package.json': manifest('agent', {
          dependencies: { '@csiplug/core': '0.1.0', '@csiplug/state': '0.1.0' },
        }),
        'packages/agent/src/index.ts': "import type { Clock } from '@csiplug/core';\nexport class Agent { clock?: Clock }\n",
        'packages/agent/src/deep-dist.ts': "import { db } from '@csiplug/state/dist/db';\nexport const value = db;\n",
        'packages/agent/src/deep-src.ts': "import type { DB } from '@csiplug/state/src/db';\nexport type AgentDB = DB;\n",
        'packages/agent/src/relative.ts': "import type { DB } from '../../state/src/db';\nexport type RelativeDB = DB;\n",
        'packages/agent/src/uses-fake.ts': "import { fakeDB } from '@csiplug/state/testing';\nexport const db = fakeDB();\n",
        'packages/agent/src/undeclared-workspace.ts': "import type { CSIClock } from '@csiplug/csi';\nexport type AgentClock = CSIClock;\n",
        'packages/agent/src/undeclared-npm.ts': "import * as lib from 'undeclared-lib';\nexport const used = lib;\n",
        'packages/agent/src/dev-only.ts': "import * as tool from 'root-dev-tool';\nexport const used = tool;\n",
        'packages/agent/src/missing.ts': "import { gone } from './gone';\nexport const used = gone;\n",
        // Test code may use testing entries and the root's devDependencies.
        'packages/agent/src/index.spec.ts':
          "import { fakeDB } from '@csiplug/state/testing';\nimport * as tool from 'root-dev-tool';\nexport const used = [fakeDB, tool];\n",
        'packages/agent/test/agent.test.ts':
          "import { Agent } from '../src/index';\nimport { fakeDB } from '@csiplug/state/testing';\nexport const used = [Agent, fakeDB];\n",
      },
      ['core', 'csi', 'state', 'agent'],
    );
    outcome = runLayering(root);
  }, CRUISE_TIMEOUT_MS);

  afterAll(() => {
    rmSync(root, { recursive: true, force: true });
  });

  it('fails, naming each broken rule on the import that breaks it', () => {
    expect(outcome.stderr).toBe('');
    expect(outcome.exitCode).not.toBe(0);
    const expected: Violation[] = [
      { rule: 'floors', from: 'packages/core/src/upwards.ts', to: 'packages/agent/src/index.ts' },
      { rule: 'floors', from: 'packages/state/src/db.ts', to: 'packages/csi/src/index.ts' },
      { rule: 'no-deep-import', from: 'packages/agent/src/deep-dist.ts', to: 'node_modules/@csiplug/state/dist/db.js' },
      { rule: 'no-deep-import', from: 'packages/agent/src/deep-src.ts', to: 'node_modules/@csiplug/state/src/db.ts' },
      { rule: 'no-relative-import-across-packages', from: 'packages/agent/src/relative.ts', to: 'packages/state/src/db.ts' },
      { rule: 'testing-only-from-tests', from: 'packages/agent/src/uses-fake.ts', to: 'packages/state/src/testing/index.ts' },
      { rule: 'no-undeclared-workspace-dependency', from: 'packages/agent/src/undeclared-workspace.ts', to: 'packages/csi/src/index.ts' },
      { rule: 'no-non-package-json', from: 'packages/agent/src/undeclared-npm.ts', to: 'node_modules/undeclared-lib/index.js' },
      { rule: 'not-to-dev-dep', from: 'packages/agent/src/dev-only.ts', to: 'node_modules/root-dev-tool/index.js' },
      { rule: 'not-to-unresolvable', from: 'packages/agent/src/missing.ts', to: './gone' },
    ];
    for (const violation of expected) {
      expect(outcome.violations).toContainEqual(violation);
      expect(outcome.report).toContain(`error ${violation.rule}: ${violation.from}`);
    }
  });

  it('counts a cycle made by a type-only import (tokens.ts naming the class that imports it)', () => {
    // The report names a cycle once, from whichever of its modules it reaches first.
    const tokensCycle = outcome.violations.filter((violation) => violation.rule === 'no-circular');
    expect(tokensCycle).toHaveLength(1);
    expect([tokensCycle[0].from, tokensCycle[0].to].sort()).toEqual(['packages/state/src/state-store.ts', 'packages/state/src/tokens.ts']);
  });

  it('fires each rule only where the fixture breaks it', () => {
    // Every violation the check reports comes from one of the deliberately wrong files above.
    const deliberate = new Set([
      'packages/core/src/upwards.ts',
      'packages/state/src/db.ts',
      'packages/state/src/tokens.ts',
      'packages/state/src/state-store.ts',
      'packages/agent/src/deep-dist.ts',
      'packages/agent/src/deep-src.ts',
      'packages/agent/src/relative.ts',
      'packages/agent/src/uses-fake.ts',
      'packages/agent/src/undeclared-workspace.ts',
      'packages/agent/src/undeclared-npm.ts',
      'packages/agent/src/dev-only.ts',
      'packages/agent/src/missing.ts',
    ]);
    expect(outcome.violations.filter((violation) => !deliberate.has(violation.from))).toEqual([]);
  });

  it('lets test code use testing entries and the root devDependencies', () => {
    expect(outcome.modules).toEqual(expect.arrayContaining(['packages/agent/src/index.spec.ts', 'packages/agent/test/agent.test.ts']));
    const fromTests = outcome.violations.filter(
      (violation) => violation.from.endsWith('.spec.ts') || violation.from.startsWith('packages/agent/test/'),
    );
    expect(fromTests).toEqual([]);
  });
});

describe('the layering check on a clean tree', () => {
  it(
    'passes when every import goes down a floor, through an entry point, to a declared package',
    () => {
      const root = writeTree(
        {
          'package.json': JSON.stringify({ name: 'fixture', private: true, workspaces: ['packages/*'] }),
          'packages/core/package.json': manifest('core'),
          'packages/core/src/index.ts': "export * from './tokens';\n",
          // The fixed tokens shape: the interface lives beside its token, the implementation imports both.
          'packages/core/src/tokens.ts': "export interface Clock { now(): number }\nexport const IClock = Symbol('IClock');\n",
          'packages/core/src/system-clock.ts':
            "import type { Clock } from './tokens';\nexport class SystemClock implements Clock { now(): number { return 0; } }\n",
          'packages/hooks/package.json': manifest('hooks', { dependencies: { '@csiplug/core': '0.1.0' } }),
          'packages/hooks/src/index.ts':
            "import { IClock, type Clock } from '@csiplug/core';\nexport const hookClock: [symbol, Clock?] = [IClock];\n",
        },
        ['core', 'hooks'],
      );
      try {
        const outcome = runLayering(root);
        expect(outcome.stderr).toBe('');
        expect(outcome.modules).toEqual(
          expect.arrayContaining(['packages/core/src/tokens.ts', 'packages/core/src/system-clock.ts', 'packages/hooks/src/index.ts']),
        );
        expect(outcome.violations).toEqual([]);
        expect(outcome.exitCode).toBe(0);
      } finally {
        rmSync(root, { recursive: true, force: true });
      }
    },
    CRUISE_TIMEOUT_MS,
  );

  it(
    'refuses a package that is on no floor',
    () => {
      const root = writeTree({
        'package.json': JSON.stringify({ name: 'fixture', private: true, workspaces: ['packages/*'] }),
        'packages/core/package.json': manifest('core'),
        'packages/core/src/index.ts': 'export const core = 1;\n',
        'packages/newcomer/package.json': manifest('newcomer'),
        'packages/newcomer/src/index.ts': 'export const newcomer = 1;\n',
      });
      try {
        const outcome = runLayering(root);
        expect(outcome.exitCode).not.toBe(0);
        expect(outcome.stderr).toContain('packages/newcomer is on no floor');
      } finally {
        rmSync(root, { recursive: true, force: true });
      }
    },
    CRUISE_TIMEOUT_MS,
  );
});

describe('the layering check on this repository', () => {
  it(
    'finds no violation',
    () => {
      const outcome = runLayering(REPO_ROOT);
      expect(outcome.stderr).toBe('');
      expect(outcome.modules).toEqual(expect.arrayContaining(['packages/core/src/index.ts', 'packages/agent/src/index.ts']));
      expect(outcome.violations).toEqual([]);
      expect(outcome.exitCode).toBe(0);
    },
    CRUISE_TIMEOUT_MS,
  );
});
