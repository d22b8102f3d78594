// Every package imports on its own, as a user's empty project would load
// it: a fresh node process with nothing loaded first (no reflect-metadata,
// which tsyringe's decorators need and @csiplug/core now brings), by
// require and by ESM import, each package and each testing entry.
import { execFile } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { promisify } from 'util';

const run = promisify(execFile);
const PACKAGES = path.resolve(__dirname, '..', '..');
const NAMES = fs.readdirSync(PACKAGES).filter((p) => fs.existsSync(path.join(PACKAGES, p, 'package.json')));

/** The package's entries (`.` and `./testing` when it has one), as built files. */
function entries(name: string): string[] {
  const manifest = JSON.parse(fs.readFileSync(path.join(PACKAGES, name, 'package.json'), 'utf8')) as {
    exports?: Record<string, { default?: string } | string>;
  };
  return Object.values(manifest.exports ?? {})
    .map((e) => (typeof e === 'string' ? e : e.default))
    .filter((e): e is string => typeof e === 'string' && e.endsWith('.js'))
    .map((e) => path.join(PACKAGES, name, e));
}

describe('every package imports on its own', () => {
  it.each(NAMES)('@csiplug/%s: require and import in a fresh process, nothing loaded first', async (name) => {
    const files = entries(name);
    expect(files.length).toBeGreaterThan(0);
    const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-imports-'));
    try {
      for (const file of files) {
        const cjs = await run(
          process.execPath,
          [
            '-e',
            `const m = require(${JSON.stringify(file)}); if (!Object.keys(m).length) throw new Error('exports nothing'); console.log('ok')`,
          ],
          { cwd },
        );
        expect(cjs.stdout.trim()).toBe('ok');
        const esm = await run(
          process.execPath,
          [
            '--input-type=module',
            '-e',
            `const m = await import(${JSON.stringify(file)}); if (!Object.keys(m).length) throw new Error('exports nothing'); console.log('ok')`,
          ],
          { cwd },
        );
        expect(esm.stdout.trim()).toBe('ok');
      }
    } finally {
      fs.rmSync(cwd, { recursive: true, force: true });
    }
  });
});
