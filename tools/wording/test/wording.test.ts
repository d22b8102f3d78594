// The wording check's own test. It runs tools/wording/check-wording.cjs as
// `npm run wording` does, against throwaway fixture trees: one with each
// kind of leak in each kind of operator text (an error, an error class's
// super call, an event message, a function that makes a message, CLI output), which must be reported with
// file:line and the text, and one with words that only look alike ("(got 3)",
// "Nomad's API (v1)", a plural "(s)", an error code), which must pass. Then
// the repository itself must pass.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

const SCRIPT = join(__dirname, '..', 'check-wording.cjs');
const REPO = join(__dirname, '..', '..', '..');

function runWording(root: string): { exitCode: number | null; violations: string[]; stdout: string } {
  const run = spawnSync(process.execPath, [SCRIPT, root], { encoding: 'utf8' });
  if (run.error) throw run.error;
  const lines = run.stdout.split('\n').filter((l) => l.startsWith('wording: '));
  return { exitCode: run.status, violations: lines.slice(0, -1), stdout: run.stdout + run.stderr };
}

describe('the wording check', () => {
  let root: string;
  const write = (file: string, text: string) => {
    mkdirSync(dirname(join(root, file)), { recursive: true });
    writeFileSync(join(root, file), text);
  };

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'wording-'));
    write('packages/core/src/tokens.ts', "export const IPluginRegistry = Symbol('IPluginRegistry');\n");
    write('packages/core/src/plugin-registry.ts', 'export class PluginRegistry {}\nexport class Volume {}\n');
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('reports call syntax, DI token names and internal class names in errors, events and CLI output, with file:line and the text', () => {
    write(
      'packages/csimanager/src/errors.ts',
      [
        "import { CsiplugError } from '@csiplug/core';",
        'export class PluginMissingError extends CsiplugError {',
        '  constructor(type: string, name: string) {',
        '    super(\'ECSI_PLUGIN_NOT_FOUND\', `plugin ${name} not found; call waitForPlugin("${type}", "${name}", phase) before using it`);',
        '  }',
        '}',
        "export const e = new Error('nothing bound to IPluginRegistry');",
      ].join('\n'),
    );
    write(
      'packages/hooks/src/hook.ts',
      [
        "export const event = { type: 'Driver Failure', message: 'the PluginRegistry refused it' };",
        'export function retryWhy(ms: number): string {\n  return `trying again in ${ms}: call retry() to hurry`;\n}',
      ].join('\n'),
    );
    write(
      'packages/cli/src/command.ts',
      "export function run(ctx: { out(t: string): void }) {\n  ctx.out('stopped; run dispose() next');\n}\n",
    );
    const r = runWording(root);
    expect(r.exitCode).toBe(1);
    expect(r.violations).toEqual([
      'wording: packages/cli/src/command.ts:2: call syntax "dispose(": "stopped; run dispose() next"',
      'wording: packages/csimanager/src/errors.ts:4: call syntax "waitForPlugin(": " not found; call waitForPlugin(\\""',
      'wording: packages/csimanager/src/errors.ts:7: DI token name "IPluginRegistry": "nothing bound to IPluginRegistry"',
      'wording: packages/hooks/src/hook.ts:1: internal class name "PluginRegistry": "the PluginRegistry refused it"',
      'wording: packages/hooks/src/hook.ts:3: call syntax "retry(": ": call retry() to hurry"',
    ]);
  });

  it('passes parentheses after a space, plurals, error codes, one-word class names, specs and testing entries', () => {
    write(
      'packages/jobspec/src/check.ts',
      [
        "export const a = new Error('count must be at least 1 (got 3)');",
        "export const b = new Error(`Nomad's API (v1) has no such route; use volume(s) by id`);",
        "export const c = new Error('the Volume is claimed');",
        "export class StateError extends Error { constructor() { super('ErrBucketNotFound'); } }",
        "export const d = { message: 'waiting (30s)' };",
        "export const notOperatorText = 'waitForPlugin(x)';",
      ].join('\n'),
    );
    write('packages/jobspec/src/check.spec.ts', "throw new Error('call waitForPlugin() first');\n");
    write('packages/jobspec/src/testing/fake.ts', "throw new Error('call waitForPlugin() first');\n");
    const r = runWording(root);
    expect(r.stdout).toMatch(/^wording: ok \(\d+ operator texts in 3 files\)$/m);
    expect(r.exitCode).toBe(0);
  });

  it("holds for this repository's production sources", () => {
    const r = runWording(REPO);
    expect(r.violations).toEqual([]);
    expect(r.exitCode).toBe(0);
  });
});
