// A store an older release left behind after a crash: the db file, its -wal
// (holding the last commit) and its -shm all 0644. Opening it with this
// release tightens each to 0600 — chmod only, so the commit that lives only
// in the -wal is still there.
import { MemoryLogger } from '@csiplug/core';
import * as fs from 'fs';
import * as path from 'path';
import { DB } from '../src/db';
import { killAll, startFixture } from './support/child';
import { tempDir } from './support/backends';

const modeOf = (f: string) => fs.lstatSync(f).mode & 0o7777;

describe('file modes of a store left by a crashed older writer', () => {
  let dir: string;
  let file: string;
  beforeEach(() => {
    dir = tempDir('csiplug-modes-');
    file = path.join(dir, 'state.db');
  });
  afterEach(async () => {
    await killAll();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('a 0644 db, -wal and -shm are tightened to 0600 on open, and the -wal’s commit survives', async () => {
    const db = DB.open(file);
    db.update((tx) => tx.createBucket('secrets').put('old', Buffer.from('kept')));
    db.close();
    fs.chmodSync(file, 0o644);

    const writer = startFixture('older-writer.js', [file, 'secrets', 'new', 'in the wal only']);
    await writer.waitForLine((l) => l === 'written');
    writer.proc.kill('SIGKILL');
    await writer.exited;
    for (const f of [file, `${file}-wal`, `${file}-shm`]) expect([f, modeOf(f)]).toEqual([f, 0o644]);
    expect(fs.statSync(`${file}-wal`).size).toBeGreaterThan(0);

    const logger = new MemoryLogger();
    const reopened = DB.open(file, { logger });
    try {
      for (const f of [file, `${file}-wal`, `${file}-shm`]) expect([f, modeOf(f)]).toEqual([f, 0o600]);
      expect(logger.find('tightened the mode').map((r) => r.fields)).toEqual([
        { path: file, from: '0644', to: '0600' },
        { path: `${file}-wal`, from: '0644', to: '0600' },
        { path: `${file}-shm`, from: '0644', to: '0600' },
      ]);
      reopened.view((tx) => {
        expect(tx.bucket('secrets')!.get('old')!.toString()).toBe('kept');
        expect(tx.bucket('secrets')!.get('new')!.toString()).toBe('in the wal only');
      });
      expect(reopened.check()).toEqual([]);
    } finally {
      reopened.close();
    }
  });
});
