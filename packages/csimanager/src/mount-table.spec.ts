import { promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { FakeClock } from '@csiplug/core/testing';
import { isTransientFsError } from './errors';
import {
  MAX_PROBES_IN_FLIGHT,
  MAX_PROBES_QUEUED,
  MountProbeHungError,
  PROBE_BATCH_MAX,
  errnoName,
  MountProbeNotStartedError,
  ProcMountTable,
  isMountPointRetrying,
  parseMountInfo,
  type MountTable,
} from './mount-table';

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

describe("ProcMountTable never enters a mount on the agent's own threads", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'csiplug-mt-probe-'));
  });
  afterEach(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it("a stat answers while every thread of Node's pool is blocked (it runs in a child process)", async () => {
    const { spawn } = await import('node:child_process');
    // Four opens of FIFOs with no writer hold libuv's four pool threads, as four hung stats of a dead NFS mount would.
    const fifos = [1, 2, 3, 4].map((i) => path.join(dir, `fifo${i}`));
    await new Promise<void>((resolve, reject) =>
      spawn('mkfifo', fifos).once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`mkfifo exited ${code}`)))),
    );
    const blocked = fifos.map((f) => fs.open(f, 'r').then((h) => h.close()));
    try {
      const answered = await Promise.race([
        new ProcMountTable().stat(dir).then(() => 'answered'),
        new Promise((r) => setTimeout(() => r('not answered within 3s'), 3000)),
      ]);
      expect(answered).toBe('answered');
    } finally {
      // A writer for each FIFO frees the blocked threads.
      await new Promise<void>((resolve) => spawn('sh', ['-c', fifos.map((f) => `: > '${f}'`).join('; ')]).once('exit', () => resolve()));
      await Promise.all(blocked);
    }
  });

  it('a stat answers with the errno of the path (ENOENT), a hung one with MountProbeHungError, and a path still being probed is not probed twice', async () => {
    const t = new ProcMountTable();
    await expect(t.stat(path.join(dir, 'missing'))).rejects.toMatchObject({ code: 'ENOENT' });
    // A probe that never answers (as a stat of a dead hard NFS mount): hung at its limit, counted from its start.
    const hanging = new ProcMountTable(undefined, () => ['sleep', ['30']]);
    const started = jest.fn();
    const t0 = Date.now();
    await expect(hanging.stat(dir, { limitMs: 300, onStarted: started })).rejects.toBeInstanceOf(MountProbeHungError);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(290);
    expect(started).toHaveBeenCalledTimes(1);
    // Killed but maybe not exited yet: a second probe of the path is refused as hung, not started again.
    if (hanging.probesInFlight > 0) await expect(hanging.stat(dir)).rejects.toBeInstanceOf(MountProbeHungError);
    await waitFor(() => hanging.probesInFlight === 0);
    await expect(t.stat(dir)).resolves.toBeUndefined();
  });

  it(`at most ${MAX_PROBES_IN_FLIGHT} probes run at once, the rest queue; past the queue a probe is "not started", never hung`, async () => {
    // One probe per path (a command of the caller's is never batched).
    const t = new ProcMountTable(undefined, (p) => ['stat', ['-L', '--', p]]);
    let peak = 0;
    const probes = Array.from({ length: MAX_PROBES_QUEUED + MAX_PROBES_IN_FLIGHT + 3 }, (_, i) => {
      const p = path.join(dir, `p${i}`);
      return t.stat(p, { onStarted: () => (peak = Math.max(peak, t.probesInFlight)) }).then(
        () => 'ok',
        (err: unknown) => (err instanceof MountProbeNotStartedError ? 'not-started' : (err as NodeJS.ErrnoException).code),
      );
    });
    const answers = await Promise.all(probes);
    expect(peak).toBeLessThanOrEqual(MAX_PROBES_IN_FLIGHT);
    expect(answers.filter((a) => a === 'not-started')).toHaveLength(3);
    expect(answers.filter((a) => a === 'ENOENT')).toHaveLength(MAX_PROBES_QUEUED + MAX_PROBES_IN_FLIGHT);
    expect(t.probesInFlight).toBe(0);
  }, 60_000);

  it('stats asked in one turn share one child process, which answers each path (its errno, odd names too) as it goes', async () => {
    const t = new ProcMountTable();
    const present = Array.from({ length: 20 }, (_, i) => path.join(dir, `d${i}`));
    for (const p of present) await fs.mkdir(p);
    const odd = path.join(dir, "q'x café");
    await fs.mkdir(odd);
    const started: string[] = [];
    const answer = (p: string) =>
      t.stat(p, { onStarted: () => started.push(p) }).then(
        () => 'ok',
        (err: NodeJS.ErrnoException) => err.code,
      );
    const asked = [...present, path.join(dir, 'missing'), odd, path.join(odd, 'none'), present[0]!];
    const answers = await Promise.all(asked.map(answer));
    expect(answers).toEqual([...present.map(() => 'ok'), 'ENOENT', 'ok', 'ENOENT', 'ok']);
    expect(t.batches).toBe(1);
    // Each stat was told when the child reached its path (the same path asked twice: both).
    expect(started.sort()).toEqual([...asked].sort());
    // The answers stream in before the child exits; its slot is free once it has.
    await waitFor(() => t.probesInFlight === 0);
    // More than a batch holds: several children, every path answered.
    const many = Array.from({ length: PROBE_BATCH_MAX + 5 }, (_, i) => (i % 2 ? present[i % present.length]! : path.join(dir, `gone${i}`)));
    const manyAnswers = await Promise.all(many.map(answer));
    expect(manyAnswers).toEqual(many.map((_, i) => (i % 2 ? 'ok' : 'ENOENT')));
    expect(t.batches).toBe(3);
  });

  it('a batch stuck on one path past its limit: that path is hung (and not probed again while the child lives), the ones before it answered, the ones after it go to a new batch', async () => {
    // A batch child that answers as the real one does, but hangs on a path named "hang" (as a stat of a dead NFS mount would).
    const script =
      'echo start; i=0; for p do if [ "${p##*/}" = hang ]; then exec sleep 30; fi; if [ -e "$p" ]; then echo "$i ok"; else echo "$i err 2 ENOENT"; fi; i=$((i+1)); done';
    const t = new ProcMountTable(undefined, undefined, (paths) => ['sh', ['-c', script, 'sh', ...paths]]);
    const hang = path.join(dir, 'hang');
    const started: string[] = [];
    const answer = (p: string) =>
      t.stat(p, { limitMs: 300, onStarted: () => started.push(path.basename(p)) }).then(
        () => 'ok',
        (err: NodeJS.ErrnoException) => (err instanceof MountProbeHungError ? 'hung' : err.code),
      );
    const answers = await Promise.all([dir, hang, path.join(dir, 'missing')].map(answer));
    expect(answers).toEqual(['ok', 'hung', 'ENOENT']);
    expect(t.batches).toBe(2);
    // "missing" was started once, by the second batch: the first never reached it.
    expect(started).toEqual([path.basename(dir), 'hang', 'missing']);
    // The killed child may not have exited yet: a stat of the hung path meanwhile is refused as hung, not started again.
    if (t.probesInFlight > 0) await expect(t.stat(hang)).rejects.toBeInstanceOf(MountProbeHungError);
    await waitFor(() => t.probesInFlight === 0);
  });

  it('an errno libuv has no name for (ESTALE of a dead NFS mount) is known by its number; a helper that never says it runs is "not started"; one that dies mid-batch leaves the rest to probes of their own', async () => {
    expect(errnoName(116)).toBe('ESTALE');
    expect(errnoName(107)).toBe('ENOTCONN');
    expect(errnoName(0)).toBeUndefined();
    const stale = path.join(dir, 'stale');
    // As node reports a stat of a dead NFS mount: no code name, the number only.
    const liar = new ProcMountTable(undefined, undefined, (paths) => [
      'sh',
      ['-c', 'echo start; echo "0 err 116 Unknown_system_error_-116"; echo "1 ok"', 'sh', ...paths],
    ]);
    const [a, b] = await Promise.all(
      [stale, dir].map((p) =>
        liar.stat(p).then(
          () => 'ok',
          (e: NodeJS.ErrnoException) => e.code,
        ),
      ),
    );
    expect([a, b]).toEqual(['ESTALE', 'ok']);
    const mute = new ProcMountTable(undefined, undefined, () => ['sh', ['-c', 'exec sleep 30']]);
    await expect(mute.stat(dir, { limitMs: 300 })).rejects.toBeInstanceOf(MountProbeNotStartedError);
    await waitFor(() => mute.probesInFlight === 0);
    // Dies after the first answer (the first batch only): the path it was on is stat'ed alone, the one it never reached goes to a new batch.
    const marker = path.join(dir, 'died-once');
    const dying = new ProcMountTable(undefined, undefined, (paths) => [
      'sh',
      [
        '-c',
        `if [ -e '${marker}' ]; then echo start; i=0; for p do if [ -e "$p" ]; then echo "$i ok"; else echo "$i err 2 ENOENT"; fi; i=$((i+1)); done; else : > '${marker}'; echo start; echo "0 ok"; kill -9 $$; fi`,
        'sh',
        ...paths,
      ],
    ]);
    const answers = await Promise.all(
      [dir, dir + '/', path.join(dir, 'nope'), path.join(dir, 'stale')].map((p) =>
        dying.stat(p).then(
          () => 'ok',
          (e: NodeJS.ErrnoException) => e.code,
        ),
      ),
    );
    expect(answers).toEqual(['ok', 'ok', 'ENOENT', 'ENOENT']);
    expect(dying.batches).toBe(2);
    await waitFor(() => dying.probesInFlight === 0);
  });

  it('isMountPoint resolves only the parent: a target whose own resolution fails (a symlink loop, as a dead FUSE root fails with ENOTCONN) is answered from the table', async () => {
    const loop = path.join(dir, 'loop');
    await fs.symlink(loop, loop);
    await expect(fs.realpath(loop)).rejects.toMatchObject({ code: 'ELOOP' });
    await expect(new ProcMountTable().isMountPoint(loop)).resolves.toBe(false);
  });
});

async function waitFor(cond: () => boolean, ms = 5000): Promise<void> {
  const until = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > until) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
