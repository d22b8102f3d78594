// Exclusive opens across two processes: a read-write open holds the file
// until close (or death); a second opener waits up to its timeout, then
// fails with ErrTimeout that asks about another agent on the data dir.
import * as fs from 'fs';
import * as path from 'path';
import { DB } from '../src/db';
import { ErrTimeout } from '../src/errors';
import { killAll, startFixture } from './support/child';
import { tempDir, thrown } from './support/backends';

describe('lock across processes', () => {
  let dir: string;
  let file: string;

  beforeEach(() => {
    dir = tempDir('csiplug-lock-');
    file = path.join(dir, 'state.db');
  });
  afterEach(async () => {
    await killAll();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('a child holding the file makes our open time out, read-write or read-only', async () => {
    const holder = startFixture('lock-child.js', ['hold', file, '0']);
    await holder.waitForLine((l) => l === 'locked');
    const err = thrown(() => DB.open(file, { timeout: 200 }));
    expect(err).toBeInstanceOf(ErrTimeout);
    expect(err.message).toContain(file);
    expect(err.message).toMatch(/is another csiplug agent using the data dir/);
    expect(thrown(() => DB.open(file, { timeout: 50, readOnly: true })).code).toBe('ErrTimeout');
    holder.proc.kill('SIGTERM');
    await holder.waitForLine((l) => l === 'released');
    await holder.exited;
    const db = DB.open(file);
    expect(db.view((tx) => tx.bucket('holder')!.get('pid')!.toString())).toBe(String(holder.proc.pid));
    db.close();
  });

  test('an opener waits within its timeout for the holder to let go', async () => {
    const holder = startFixture('lock-child.js', ['hold', file, '300']);
    await holder.waitForLine((l) => l === 'locked');
    // Synchronous wait: the child releases on its own timer while we block.
    const db = DB.open(file, { timeout: 10_000 });
    expect(db.view((tx) => tx.bucket('holder') !== undefined)).toBe(true);
    db.close();
    await holder.exited;
  });

  test('a child cannot open while we hold the file, and the lock dies with a SIGKILLed holder', async () => {
    const db = DB.open(file);
    const attempt = startFixture('lock-child.js', ['try', file, '150']);
    const line = await attempt.waitForLine((l) => l.startsWith('{'));
    expect(JSON.parse(line)).toMatchObject({ ok: false, code: 'ErrTimeout' });
    db.close();

    const holder = startFixture('lock-child.js', ['hold', file, '0']);
    await holder.waitForLine((l) => l === 'locked');
    holder.proc.kill('SIGKILL');
    await holder.exited;
    const after = DB.open(file);
    expect(after.check()).toEqual([]);
    after.close();
  });
});
