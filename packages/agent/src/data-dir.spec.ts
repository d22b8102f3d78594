// secureDataDir and lockDataDir on real files: a data dir an older release
// left readable is tightened path by path (one log line each, chmod only),
// planted symlinks are never followed, a data dir another user controls is
// refused, and the data dir's lock keeps a second holder out.
import { MemoryLogger } from '@csiplug/core';
import { formatMode } from '@csiplug/state';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { DataDirError, DataDirInUseError, dataDirLockPath, lockDataDir, secureDataDir } from './data-dir';
import { requireRoot } from '@csiplug/core/testing';

const modeOf = (p: string) => formatMode(fs.lstatSync(p).mode);
const NOBODY = 65534;

/** Makes `rel` under `root` (a dir when it ends in '/') with `mode`. */
function make(root: string, rel: string, mode: number, content = 'x'): string {
  const p = path.join(root, rel);
  if (rel.endsWith('/')) {
    fs.mkdirSync(p, { recursive: true });
  } else {
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.writeFileSync(p, content);
  }
  fs.chmodSync(p, mode);
  return p.replace(/\/$/, '');
}

describe('the data dir', () => {
  let root: string;
  let dataDir: string;
  let elsewhere: string;
  beforeEach(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-datadir-'));
    dataDir = path.join(root, 'data');
    elsewhere = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-elsewhere-'));
  });
  afterEach(() => {
    fs.rmSync(root, { recursive: true, force: true });
    fs.rmSync(elsewhere, { recursive: true, force: true });
  });

  test('a new data dir is created 0700', () => {
    const umask = process.umask(0);
    try {
      expect(secureDataDir(dataDir, new MemoryLogger())).toEqual([]);
    } finally {
      process.umask(umask);
    }
    expect(modeOf(dataDir)).toBe('0700');
  });

  test('what an older release left readable is tightened: state 0600, agent dirs 0700, alloc and task dirs 0700 (the shared dir of several users keeps 1777) — one line per path', () => {
    fs.mkdirSync(dataDir);
    fs.chmodSync(dataDir, 0o755);
    const files = ['state.db', 'state.db-wal', 'state.db-shm', 'state.db.backup', 'state.db.backup.tmp', 'agent.lock', 'agent.lock-wal'];
    for (const f of files) make(dataDir, f, 0o644, `secret ${f}`);
    const dirs755 = [
      'allocs/',
      'allocs/a1/',
      'allocs/a1/web/',
      'allocs/a1/web/.executor/',
      'plugins/',
      'plugins/p1/',
      'csi/',
      'csi/node/',
      'csi/node/hostpath/',
    ];
    for (const d of dirs755) make(dataDir, d, 0o755);
    // Not the agent's to change: a task's own files, what lies below a plugin's dir (volume mounts), unknown entries.
    const untouched = [
      make(dataDir, 'allocs/a1/web/stdout.log', 0o644),
      make(dataDir, 'allocs/a1/web/local/', 0o755),
      make(dataDir, 'csi/node/hostpath/per-alloc/', 0o755),
      make(dataDir, 'other/', 0o755),
      make(dataDir, 'notes.txt', 0o644),
    ];
    // Already tighter than the rule: never loosened.
    make(dataDir, 'allocs/a2/', 0o700);
    // The shared dir of an alloc whose isolated tasks run as several users: sticky, behind the 0700 alloc dir.
    const sharedDir = make(dataDir, 'allocs/a2/alloc/', 0o1777);
    fs.chmodSync(sharedDir, 0o1777);

    const logger = new MemoryLogger();
    const changes = secureDataDir(dataDir, logger.child({ component: 'agent' }));

    const want: Record<string, string> = {
      '.': '0700',
      ...Object.fromEntries(files.map((f) => [f, '0600'])),
      allocs: '0700',
      'allocs/a1': '0700',
      'allocs/a1/web': '0700',
      'allocs/a1/web/.executor': '0700',
      plugins: '0700',
      'plugins/p1': '0700',
      csi: '0700',
      'csi/node': '0700',
      'csi/node/hostpath': '0700',
    };
    for (const [rel, mode] of Object.entries(want)) expect([rel, modeOf(path.join(dataDir, rel))]).toEqual([rel, mode]);
    for (const p of untouched) expect([p, modeOf(p)]).toEqual([p, fs.lstatSync(p).isDirectory() ? '0755' : '0644']);
    expect(modeOf(path.join(dataDir, 'allocs/a2'))).toBe('0700');
    expect(modeOf(sharedDir)).toBe('01777');
    // chmod only: every file still holds what it held.
    for (const f of files) expect(fs.readFileSync(path.join(dataDir, f), 'utf8')).toBe(`secret ${f}`);

    // One log line per path, naming it with its old and new mode.
    const lines = logger.find('tightened the mode').map((r) => r.fields);
    expect(lines).toHaveLength(Object.keys(want).length);
    expect(changes).toHaveLength(Object.keys(want).length);
    expect(lines).toContainEqual({ component: 'agent', path: dataDir, from: '0755', to: '0700' });
    expect(lines).toContainEqual({ component: 'agent', path: path.join(dataDir, 'state.db'), from: '0644', to: '0600' });
    expect(lines).toContainEqual({ component: 'agent', path: path.join(dataDir, 'plugins'), from: '0755', to: '0700' });
    expect(lines).toContainEqual({ component: 'agent', path: path.join(dataDir, 'allocs/a1/web'), from: '0755', to: '0700' });

    // Nothing left to do the next time.
    expect(secureDataDir(dataDir, logger)).toEqual([]);
  });

  test('a planted symlink below the top level is never followed: what it points at keeps its mode', () => {
    fs.mkdirSync(dataDir, { mode: 0o700 });
    const outsideDir = make(elsewhere, 'shared/', 0o755);
    make(dataDir, 'allocs/', 0o700);
    fs.symlinkSync(outsideDir, path.join(dataDir, 'allocs', 'a1'));
    make(dataDir, 'allocs/a2/', 0o700);
    make(dataDir, 'allocs/a2/web/', 0o700);
    fs.symlinkSync(outsideDir, path.join(dataDir, 'allocs/a2/web/.executor'));
    make(dataDir, 'csi/', 0o700);
    fs.symlinkSync(outsideDir, path.join(dataDir, 'csi', 'node'));

    const logger = new MemoryLogger();
    expect(secureDataDir(dataDir, logger)).toEqual([]);
    expect(modeOf(outsideDir)).toBe('0755');
    expect(logger.find('tightened the mode')).toEqual([]);
  });

  test.each(['state.db', 'agent.lock', 'plugins', 'allocs', 'csi'])(
    'a symlink planted as %s is refused, and what it points at keeps its mode',
    (name) => {
      fs.mkdirSync(dataDir, { mode: 0o700 });
      const outside = name.includes('.') ? make(elsewhere, 'passwd', 0o644) : make(elsewhere, 'shared/', 0o755);
      fs.symlinkSync(outside, path.join(dataDir, name));
      expect(() => secureDataDir(dataDir, new MemoryLogger())).toThrow(
        new RegExp(`${name.replace('.', '\\.')} is a symlink; the agent keeps its state`),
      );
      expect(modeOf(outside)).toBe(name.includes('.') ? '0644' : '0755');
    },
  );

  test('a data dir inside a dir others may rename things in is refused; a sticky one like /tmp is fine', () => {
    const open = make(elsewhere, 'open/', 0o777);
    fs.chmodSync(open, 0o777);
    expect(() => secureDataDir(path.join(open, 'data'), new MemoryLogger())).toThrow(
      /lies inside .*open, writable by its group and every user without the sticky bit/,
    );
    fs.chmodSync(open, 0o1777);
    expect(() => secureDataDir(path.join(open, 'data2'), new MemoryLogger())).not.toThrow();
  });

  test('a data dir that is a symlink of the agent’s own is followed, and the real dir tightened', () => {
    const real = make(elsewhere, 'real-data/', 0o755);
    make(real, 'state.db', 0o644);
    fs.symlinkSync(real, dataDir);
    const logger = new MemoryLogger();
    secureDataDir(dataDir, logger);
    expect(modeOf(real)).toBe('0700');
    expect(modeOf(path.join(real, 'state.db'))).toBe('0600');
    expect(fs.lstatSync(dataDir).isSymbolicLink()).toBe(true);
  });

  test('a data dir others may write to is refused, and nothing in it is touched', () => {
    fs.mkdirSync(dataDir);
    fs.chmodSync(dataDir, 0o777);
    const state = make(dataDir, 'state.db', 0o644);
    const err = (() => {
      try {
        secureDataDir(dataDir, new MemoryLogger());
      } catch (e) {
        return e as DataDirError;
      }
      throw new Error('expected secureDataDir to refuse');
    })();
    expect(err).toBeInstanceOf(DataDirError);
    expect(err.code).toBe('EDATADIR');
    expect(err.message).toContain(dataDir);
    expect(err.message).toMatch(/writable by its group and every user \(mode 0777\)/);
    expect(modeOf(dataDir)).toBe('0777');
    expect(modeOf(state)).toBe('0644');
  });

  test('a data dir, or a symlink to one, owned by another user is refused', () => {
    requireRoot(); // chown to another user
    const theirs = make(elsewhere, 'theirs/', 0o711);
    fs.chownSync(theirs, NOBODY, NOBODY);
    expect(() => secureDataDir(theirs, new MemoryLogger())).toThrow(/owned by uid 65534, neither this agent's user \(uid 0\) nor root/);

    const mine = make(elsewhere, 'mine/', 0o711);
    fs.symlinkSync(mine, dataDir);
    fs.lchownSync(dataDir, NOBODY, NOBODY);
    expect(() => secureDataDir(dataDir, new MemoryLogger())).toThrow(DataDirError);
    expect(() => secureDataDir(dataDir, new MemoryLogger())).toThrow(/is a symlink owned by uid 65534/);
    expect(fs.readdirSync(mine)).toEqual([]);
  });

  test('the lock keeps a second holder out until released, and says which data dir', () => {
    fs.mkdirSync(dataDir, { mode: 0o711 });
    const first = lockDataDir(dataDir);
    try {
      expect(modeOf(dataDirLockPath(dataDir))).toBe('0600');
      let err: unknown;
      try {
        lockDataDir(dataDir).close();
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(DataDirInUseError);
      expect((err as DataDirInUseError).code).toBe('EDATADIR_IN_USE');
      expect((err as Error).message).toBe(
        `data dir ${dataDir} is in use: another csiplug agent holds its lock ${dataDirLockPath(dataDir)}. Stop that agent first, or give this one its own data_dir.`,
      );
    } finally {
      first.close();
    }
    lockDataDir(dataDir).close();
  });
});
