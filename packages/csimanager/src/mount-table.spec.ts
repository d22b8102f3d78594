import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ProcMountTable, parseMountInfo } from './mount-table';

describe('mount table', () => {
  it('parses mountinfo, decoding octal escapes', () => {
    const text = [
      '22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw',
      '80 22 8:1 /data/v /var/lib/csi\\040dir/x rw,relatime shared:1 - ext4 /dev/sda1 rw',
      '',
    ].join('\n');
    expect(parseMountInfo(text)).toEqual(['/', '/var/lib/csi dir/x']);
  });

  it('reads the kernel table: / is a mount point, a fresh dir is not, a missing path is not', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'csiplug-mt-'));
    try {
      const t = new ProcMountTable();
      const [root, fresh, missing] = await Promise.all([t.isMountPoint('/'), t.isMountPoint(dir), t.isMountPoint(path.join(dir, 'nope'))]);
      expect([root, fresh, missing]).toEqual([true, false, false]);
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});

describe('ProcMountTable read sharing', () => {
  it('answers a missing path without reading, and shares reads between concurrent callers', async () => {
    const t = new ProcMountTable();
    expect(await t.isMountPoint('/definitely/not/here')).toBe(false);
    expect(t.reads).toBe(0);
    const answers = await Promise.all(Array.from({ length: 50 }, () => t.isMountPoint('/')));
    expect(answers.every(Boolean)).toBe(true);
    expect(t.reads).toBeLessThanOrEqual(2);
  });
});
