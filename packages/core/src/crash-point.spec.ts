// Crash points: CSIPLUG_CRASH_AT parsing, the n-th-time counting, nothing at
// all when unarmed, and — in a real child process built from this source — a
// SIGKILL at the named point with its line on stderr, or a refusal at load
// for a name that is no crash point.
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import * as ts from 'typescript';
import { CRASH_POINTS, CrashPointSpecError, type CrashPointName, crashPoint, crashPointFor, parseCrashAt } from './crash-point';
import { ValidationError } from './errors';

describe('parseCrashAt', () => {
  it('reads "<point>" as the first time and "<point>:<n>" as the n-th', () => {
    expect(parseCrashAt('reconciler.claim.after-write')).toEqual({ point: 'reconciler.claim.after-write', count: 1 });
    expect(parseCrashAt(' reconciler.stage.after-call:3 ')).toEqual({ point: 'reconciler.stage.after-call', count: 3 });
  });

  it('arms nothing when unset or empty', () => {
    expect(parseCrashAt(undefined)).toBeUndefined();
    expect(parseCrashAt('')).toBeUndefined();
  });

  it.each([
    ['reconciler.claim.after-writ'],
    ['reconciler.claim.after-write:0'],
    ['reconciler.claim.after-write:x'],
    ['reconciler.claim.after-write:-1'],
    [':2'],
  ])('refuses %j, naming the variable', (value) => {
    const err = (() => {
      try {
        parseCrashAt(value);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(CrashPointSpecError);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as Error).message).toContain(`CSIPLUG_CRASH_AT="${value}"`);
  });
});

describe('crashPointFor', () => {
  it('dies the n-th time the armed point is reached, and only at that point', () => {
    const died: string[] = [];
    const point = crashPointFor({ point: 'reconciler.stage.after-call', count: 2 }, (p) => died.push(p));
    point('reconciler.claim.after-write');
    point('reconciler.stage.after-call');
    expect(died).toEqual([]);
    point('reconciler.publish.after-call');
    point('reconciler.stage.after-call');
    expect(died).toEqual(['reconciler.stage.after-call']);
    point('reconciler.stage.after-call');
    expect(died).toEqual(['reconciler.stage.after-call']);
  });

  it('does nothing when nothing is armed', () => {
    const died: string[] = [];
    const point = crashPointFor(undefined, (p) => died.push(p));
    for (const name of Object.keys(CRASH_POINTS) as CrashPointName[]) point(name);
    expect(died).toEqual([]);
  });

  it('the module-level crashPoint is unarmed in this test process', () => {
    expect(process.env['CSIPLUG_CRASH_AT']).toBeUndefined();
    for (const name of Object.keys(CRASH_POINTS) as CrashPointName[]) crashPoint(name);
  });

  it('every point is described in the file header too', () => {
    const header = fs.readFileSync(path.join(__dirname, 'crash-point.ts'), 'utf8').split('\nexport const')[0]!;
    for (const name of Object.keys(CRASH_POINTS)) expect(header).toContain(`//   ${name} `);
  });
});

describe('crash points in a real process', () => {
  let dir: string;

  beforeAll(() => {
    // This source, compiled alone into a temp dir, with the one module it imports.
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-crash-point-'));
    for (const file of ['crash-point.ts', 'errors.ts']) {
      const out = ts.transpileModule(fs.readFileSync(path.join(__dirname, file), 'utf8'), {
        compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022 },
      });
      fs.writeFileSync(path.join(dir, file.replace(/\.ts$/, '.js')), out.outputText);
    }
  });

  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  const run = (crashAt: string | undefined) => {
    const script = `const { crashPoint } = require(${JSON.stringify(path.join(dir, 'crash-point.js'))});
      for (let i = 1; i <= 3; i++) { process.stdout.write('reached ' + i + '\\n'); crashPoint('reconciler.publish.after-call'); }
      process.stdout.write('done\\n');`;
    const env = { ...process.env };
    delete env['CSIPLUG_CRASH_AT'];
    if (crashAt !== undefined) env['CSIPLUG_CRASH_AT'] = crashAt;
    return spawnSync(process.execPath, ['-e', script], { env, encoding: 'utf8' });
  };

  it('SIGKILLs itself the n-th time the point is reached, saying so on stderr', () => {
    const r = run('reconciler.publish.after-call:2');
    expect(r.signal).toBe('SIGKILL');
    expect(r.stdout).toBe('reached 1\nreached 2\n');
    expect(r.stderr).toContain('crash point reconciler.publish.after-call reached (CSIPLUG_CRASH_AT)');
  });

  it('runs to the end when another point is armed, or none', () => {
    for (const crashAt of ['reconciler.publish.before-write', undefined]) {
      const r = run(crashAt);
      expect(r.signal).toBeNull();
      expect(r.status).toBe(0);
      expect(r.stdout).toBe('reached 1\nreached 2\nreached 3\ndone\n');
    }
  });

  it('refuses to load with a name that is no crash point', () => {
    const r = run('reconciler.publish.after-cal');
    expect(r.signal).toBeNull();
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('no crash point is named "reconciler.publish.after-cal"');
    expect(r.stdout).toBe('');
  });
});
