// The checked-in src/generated must be what scripts/gen-types.sh makes from
// the current csi.proto; regenerate with `npm run gen-types -w @csiplug/csi`.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const pkg = path.resolve(__dirname, '..');

function listFiles(dir: string, base = dir): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? listFiles(path.join(dir, e.name), base) : [path.relative(base, path.join(dir, e.name))]))
    .sort();
}

describe('generated types', () => {
  let tmp: string;
  beforeAll(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-gen-'));
    execFileSync('sh', [path.join(pkg, 'scripts', 'gen-types.sh'), path.join(tmp, 'generated')], { cwd: pkg, stdio: 'pipe' });
  }, 60_000);
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('are up to date with csi.proto (run scripts/gen-types.sh if this fails)', () => {
    const fresh = path.join(tmp, 'generated');
    const checkedIn = path.join(pkg, 'src', 'generated');
    const files = listFiles(fresh);
    expect(listFiles(checkedIn)).toEqual(files);
    const stale = files.filter((f) => fs.readFileSync(path.join(fresh, f), 'utf8') !== fs.readFileSync(path.join(checkedIn, f), 'utf8'));
    expect(stale).toEqual([]);
  });
});
