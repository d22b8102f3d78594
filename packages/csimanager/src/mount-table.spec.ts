import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { FakeClock } from '@csiplug/core/testing';
import { isTransientFsError } from './errors';
import { ProcMountTable, isMountPointRetrying, parseMountInfo, type MountTable } from './mount-table';

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

describe('isMountPointRetrying', () => {
  const fault = (code: string) => Object.assign(new Error(`${code}: reading /proc/self/mountinfo`), { code });

  /** A table that fails with the given errors first, then answers `answer`. */
  const failing = (errors: Error[], answer = true): Pick<MountTable, 'isMountPoint'> & { calls: number } => ({
    calls: 0,
    async isMountPoint() {
      this.calls++;
      const err = errors.shift();
      if (err) throw err;
      return answer;
    },
  });

  it('reads again after a backoff while the fault is transient, and answers what the table says', async () => {
    const clock = new FakeClock(0);
    const table = failing([fault('EMFILE'), fault('ENOMEM'), fault('EAGAIN')]);
    const faults: number[] = [];
    let answer: boolean | undefined;
    void isMountPointRetrying(table, '/x', { clock, onFault: (_e, attempt) => faults.push(attempt) }).then((a) => (answer = a));
    await clock.advance(0);
    expect(answer).toBeUndefined();
    await clock.runAll();
    expect(answer).toBe(true);
    expect(table.calls).toBe(4);
    expect(faults).toEqual([1, 2, 3]);
  });

  it('throws other errors at once, and an abort while waiting', async () => {
    const clock = new FakeClock(0);
    await expect(isMountPointRetrying(failing([fault('EACCES')]), '/x', { clock })).rejects.toThrow(/EACCES/);
    const ac = new AbortController();
    const waiting = isMountPointRetrying(failing([fault('EMFILE')]), '/x', { clock, signal: ac.signal });
    await clock.advance(0);
    ac.abort(new Error('stopped'));
    await expect(waiting).rejects.toThrow('stopped');
  });

  it('knows a transient fault by its code, also as the cause of another error', () => {
    for (const code of ['EMFILE', 'ENFILE', 'EAGAIN', 'ENOMEM', 'EINTR', 'EBUSY']) expect(isTransientFsError(fault(code))).toBe(true);
    expect(isTransientFsError(new Error('wrapped', { cause: fault('EMFILE') }))).toBe(true);
    for (const err of [fault('ENOENT'), fault('EACCES'), new Error('x'), undefined, 'EMFILE']) expect(isTransientFsError(err)).toBe(false);
  });
});
