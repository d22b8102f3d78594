// Crash safety with real processes: a child commits numbered updates and
// reports each one after db.update() returns; we SIGKILL it at random
// moments, reopen, and demand every reported update, no half-applied one,
// and a clean integrity check.
import * as fs from 'fs';
import * as path from 'path';
import { DB } from '../src/db';
import { killAll, startFixture } from './support/child';
import { prng, tempDir } from './support/backends';

const ROUNDS = 24;

function verify(file: string): { last: number; nextTxid: number; problems: string[] } {
  const db = DB.open(file, { integrityCheck: true });
  try {
    const problems = db.check();
    const last = db.view((tx) => {
      const lastRaw = tx.bucket('meta')?.get('last');
      const last = lastRaw ? Number(lastRaw.toString()) : 0;
      const log = tx.bucket('log');
      const nested = tx.bucket('nested');
      let expected = 1;
      log?.forEach((k, v) => {
        const n = Number(k.readBigUInt64BE());
        if (n !== expected) problems.push(`log: expected ${expected}, found ${n}`);
        if (!v || v.length !== 1500 + (n % 700) || v[0] !== n % 251) problems.push(`log ${n}: wrong value`);
        expected = n + 1;
      });
      if (expected - 1 !== last) problems.push(`log ends at ${expected - 1} but meta.last is ${last}`);
      let buckets = 0;
      nested?.forEachBucket(() => buckets++);
      if (buckets !== last) problems.push(`nested holds ${buckets} buckets, meta.last is ${last}`);
      if (last > 0 && nested?.bucket(`n${last}`)?.get('n')?.toString() !== String(last)) problems.push(`nested n${last} missing`);
      return last;
    });
    const nextTxid = db.update((tx) => tx.id);
    return { last, nextTxid, problems };
  } finally {
    db.close();
  }
}

describe('crash safety (SIGKILL during commits)', () => {
  let dir: string;

  beforeAll(() => {
    if (!fs.existsSync(path.join(__dirname, '..', 'dist', 'index.js')))
      throw new Error('build @csiplug/state first (tsc -p tsconfig.lib.json)');
  });
  beforeEach(() => {
    dir = tempDir('csiplug-crash-');
  });
  afterEach(async () => {
    await killAll();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test(`every reported update survives ${ROUNDS} random SIGKILLs`, async () => {
    const file = path.join(dir, 'state.db');
    const rnd = prng(20260101);
    let reportedMax = 0;
    let killedMidWork = 0;
    let maxTxid = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const child = startFixture('crash-child.js', [file]);
      if (rnd() < 0.85) {
        // Usually let it commit for a while, then kill it mid-stream.
        await child.waitForLine((l) => /^\d+ \d+$/.test(l));
        await new Promise((r) => setTimeout(r, Math.floor(rnd() * 60)));
        killedMidWork++;
      } else {
        // Sometimes kill it while it is starting or opening the file.
        await new Promise((r) => setTimeout(r, Math.floor(rnd() * 80)));
      }
      child.proc.kill('SIGKILL');
      const { signal } = await child.exited;
      expect(signal).toBe('SIGKILL');
      const reportedLines = child.lines.filter((l) => /^\d+ \d+$/.test(l)).map((l) => l.split(' ').map(Number) as [number, number]);
      const reported = reportedLines.map(([n]) => n);
      for (const [, id] of reportedLines) maxTxid = Math.max(maxTxid, id);
      const start = child.lines.find((l) => l.startsWith('start '));
      if (start) expect(Number(start.slice(6))).toBeGreaterThanOrEqual(reportedMax);
      if (reported.length) reportedMax = Math.max(reportedMax, ...reported);

      const { last, nextTxid, problems } = verify(file);
      expect(problems).toEqual([]);
      // Transaction ids keep increasing across crashes.
      expect(nextTxid).toBeGreaterThan(maxTxid);
      maxTxid = nextTxid;
      // Every update reported after update() returned is on disk; at most one more (committed, not yet reported).
      expect(last).toBeGreaterThanOrEqual(reportedMax);
      expect(last).toBeLessThanOrEqual(reportedMax + 1);
      reportedMax = last;
    }
    expect(killedMidWork).toBeGreaterThanOrEqual(15);
    expect(reportedMax).toBeGreaterThan(ROUNDS);
  }, 90_000);
});
