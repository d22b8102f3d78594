// The node's identity file in the data dir: made once, read back the same,
// and a torn or foreign file refused with its path rather than replaced.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { CLUSTER_INSTANCE_FILE, clusterInstanceId } from './membership';

describe('clusterInstanceId', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-identity-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('makes an id once (0600, no temp file left) and reads the same one back', () => {
    const id = clusterInstanceId(dir);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(fs.statSync(path.join(dir, CLUSTER_INSTANCE_FILE)).mode & 0o777).toBe(0o600);
    expect(fs.readdirSync(dir)).toEqual([CLUSTER_INSTANCE_FILE]);
    expect(clusterInstanceId(dir)).toBe(id);
  });

  it.each([
    ['empty (a torn write)', ''],
    ['not an id', 'hello\n'],
  ])('refuses a file that is %s, naming it, and leaves it as it is', (_what, content) => {
    const file = path.join(dir, CLUSTER_INSTANCE_FILE);
    fs.writeFileSync(file, content);
    expect(() => clusterInstanceId(dir)).toThrow(
      new RegExp(
        `${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} should hold this node's identity .* restore it from a backup, or remove it to join as a new node`,
      ),
    );
    expect(fs.readFileSync(file, 'utf8')).toBe(content);
  });
});
