// The client state on a full filesystem (a small tmpfs, filled with a
// file): a write that does not fit fails with ErrNoSpace naming the file,
// saves nothing, and leaves the file sound; once space returns, writes work
// and survive a reopen. Needs root (mount); every mount is undone afterwards.
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { openClientState } from '../src/client-state-db';
import { ErrNoSpace } from '../src/errors';
import { tempDir, thrown } from './support/backends';
import { requireRoot } from '@csiplug/core/testing';

requireRoot();

/** Writes `file` until the filesystem refuses (ENOSPC); returns the bytes written. */
function fillUp(file: string): number {
  const fd = fs.openSync(file, 'w');
  const chunk = Buffer.alloc(4096, 0x5a);
  let written = 0;
  try {
    for (;;) written += fs.writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    fs.closeSync(fd);
  }
  return written;
}

describe('client state on a full filesystem', () => {
  let dir: string;
  let mounted = false;

  beforeAll(() => {
    dir = tempDir('csiplug-state-full-');
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m,mode=0700', 'tmpfs', dir]);
    mounted = true;
  });

  afterAll(() => {
    if (mounted) execFileSync('umount', [dir]);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('a write that does not fit fails with ErrNoSpace, saves nothing, and the store works again once space returns', () => {
    const file = path.join(dir, 'state.db');
    const filler = path.join(dir, 'filler');
    const state = openClientState({ path: file });
    try {
      state.putAllocation('before', { id: 'before' });
      expect(fillUp(filler)).toBeGreaterThan(0);

      const err = thrown(() => state.putAllocation('lost', { id: 'lost', pad: 'x'.repeat(64 * 1024) }));
      expect(err).toBeInstanceOf(ErrNoSpace);
      expect(err.code).toBe('ESTATE_NO_SPACE');
      expect(err.message).toContain(file);
      expect(err.message).toContain('SQLITE_FULL');
      // Nothing of it was saved; what was there still reads.
      expect(state.getAllocation('lost')).toBeUndefined();
      expect(state.getAllocation('before')).toEqual({ id: 'before' });

      fs.rmSync(filler);
      state.putAllocation('after', { id: 'after', pad: 'x'.repeat(64 * 1024) });
    } finally {
      fs.rmSync(filler, { force: true });
      state.dispose();
    }
    // The file is sound (the open runs SQLite's quick_check) and holds what was saved, nothing else.
    const again = openClientState({ path: file });
    try {
      expect(again.foundEmpty).toBeUndefined();
      expect(again.listAllocations().allocs.map((a) => a.allocId)).toEqual(['after', 'before']);
    } finally {
      again.dispose();
    }
  });
});
