// The orphan scan against a temp data dir and a fake mount table, and the
// cleanup with a fake driver and fake unmounts: what the state knows is never
// touched, every orphan is found and described in one line, tasks go first,
// mounts deepest first (lazily only when a normal unmount fails), and a dir
// stays while something is mounted below it or one of its tasks may run.
import { MemoryLogger } from '@csiplug/core';
import { FakeDriver } from '@csiplug/driver/testing';
import type { ExitResult, TaskHandle } from '@csiplug/driver';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import {
  classifyMount,
  deletedStateFinding,
  describeOrphan,
  findOrphans,
  knownState,
  mountIsKnown,
  mountsFromDir,
  reconcileOrphans,
  type KnownState,
  type Orphan,
  type OrphanCleanupDeps,
} from './orphans';
import type { MountInfoEntry } from '@csiplug/core';

/** A task handle as an executor would record it, in `taskDir`. */
const handleIn = (allocId: string, taskName: string, taskDir: string, pid: number): TaskHandle => ({
  version: 1,
  driver: 'exec',
  allocId,
  taskName,
  taskDir,
  executorPid: pid + 1_000,
  executorStartTime: `${pid + 1_000}`,
  pid,
  startTime: `${pid}`,
  startedAt: 0,
});

describe('orphans', () => {
  let dd: string;
  /** pid → alive; a pid listed in `unreadable` cannot be checked. */
  let alive: Map<number, boolean>;
  let unreadable: Set<number>;
  let records: Map<string, TaskHandle>;
  const known: KnownState = {
    allocs: new Set(['known-1']),
    volumes: [{ pluginId: 'hostpath', volumeId: 'vol-known', externalId: 'ext-known' }],
  };

  const mkdir = (...parts: string[]) => fs.mkdirSync(path.join(dd, ...parts), { recursive: true });
  /** A task dir with an executor record of `pid`. */
  const task = (allocId: string, taskName: string, pid: number) => {
    const taskDir = path.join(dd, 'allocs', allocId, taskName);
    fs.mkdirSync(path.join(taskDir, '.executor'), { recursive: true });
    records.set(taskDir, handleIn(allocId, taskName, taskDir, pid));
  };
  /** pid → the start time of the process that has it now (default: the one handleIn records, `${pid}`). */
  let startTimes: Map<number, string>;
  const isSameProcess = (pid: number, startTime: string) => {
    if (unreadable.has(pid)) throw Object.assign(new Error(`EMFILE reading /proc/${pid}/stat`), { code: 'EMFILE' });
    return (alive.get(pid) ?? false) && startTime === (startTimes.get(pid) ?? `${pid}`);
  };
  const staging = (volume: string) => path.join(dd, 'csi', 'monolith', 'hostpath', 'staging', volume, 'rw-file-system-single-node-writer');
  const target = (allocId: string, volume: string) =>
    path.join(dd, 'csi', 'monolith', 'hostpath', 'per-alloc', allocId, volume, 'rw-file-system-single-node-writer');
  const scan = (mounts: string[]) =>
    findOrphans({
      dataDir: dd,
      known,
      mounts: mounts.map((mountPoint) => ({ mountPoint })),
      readTask: ({ taskDir }) => records.get(taskDir),
      isSameProcess,
    });

  beforeEach(() => {
    dd = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-orphans-'));
    alive = new Map();
    unreadable = new Set();
    startTimes = new Map();
    records = new Map();
  });
  afterEach(() => fs.rmSync(dd, { recursive: true, force: true }));

  describe('classifyMount', () => {
    it('names the alloc or the volume a path of the layout belongs to, and nothing for the layout itself or paths it does not explain', () => {
      expect(classifyMount(dd, path.join(dd, 'allocs', 'a1', 'web', 'data'))).toEqual({ allocId: 'a1' });
      expect(classifyMount(dd, target('a1', 'v'))).toEqual({ allocId: 'a1' });
      expect(classifyMount(dd, staging('v'))).toEqual({ pluginId: 'hostpath', volumeId: 'v' });
      for (const p of [
        dd,
        path.join(dd, 'allocs'),
        path.join(dd, 'csi'),
        path.join(dd, 'csi', 'monolith', 'hostpath'),
        path.join(dd, 'csi', 'monolith', 'hostpath', 'staging'),
        path.join(dd, 'plugins', 'a1'),
        path.join(dd, 'other'),
        '/mnt/elsewhere',
      ]) {
        expect(classifyMount(dd, p)).toBeUndefined();
      }
    });
  });

  describe('findOrphans', () => {
    it('finds running tasks, mounts and dirs the state does not know, and leaves what it knows alone', async () => {
      task('known-1', 'web', 100);
      alive.set(100, true).set(1_100, true);
      task('lost-1', 'web', 200);
      alive.set(200, true).set(1_200, true);
      task('lost-1', 'finished', 300); // task and executor ended: only its dir is left
      task('lost-2', 'lingering', 400);
      alive.set(1_400, true); // the task ended, its executor has not
      task('lost-2', 'unknown', 500);
      unreadable.add(500).add(1_500);
      mkdir('allocs', 'lost-3'); // an empty dir
      mkdir('plugins', 'known-1');
      mkdir('plugins', 'lost-1');
      mkdir('csi', 'monolith', 'hostpath', 'per-alloc', 'known-1');
      mkdir('csi', 'monolith', 'hostpath', 'per-alloc', 'lost-1');

      const orphans = await scan([
        path.join(dd, 'allocs'), // an operator's own filesystem for allocs: the layout, not an orphan
        staging('vol-known'),
        staging('ext-known'), // named by external id
        target('known-1', 'vol-known'),
        staging('vol-lost'),
        target('lost-1', 'vol-lost'),
        path.join(dd, 'allocs', 'lost-1', 'web', 'data'),
        path.join(dd, 'somewhere', 'else'),
      ]);

      const tasks = orphans
        .filter((o) => o.kind === 'task')
        .map((o) => o.kind === 'task' && `${o.allocId}/${o.taskName} task=${o.task} executor=${o.executor}`);
      expect(tasks).toEqual([
        'lost-1/web task=true executor=true',
        'lost-2/lingering task=false executor=true',
        'lost-2/unknown task=unknown executor=unknown',
      ]);
      expect(orphans.filter((o) => o.kind === 'mount')).toEqual([
        { kind: 'mount', mountPoint: staging('vol-lost'), pluginId: 'hostpath', volumeId: 'vol-lost' },
        { kind: 'mount', mountPoint: target('lost-1', 'vol-lost'), allocId: 'lost-1' },
        { kind: 'mount', mountPoint: path.join(dd, 'allocs', 'lost-1', 'web', 'data'), allocId: 'lost-1' },
      ]);
      expect(orphans.filter((o) => o.kind === 'dir').map((o) => o.kind === 'dir' && `${o.what} ${path.relative(dd, o.path)}`)).toEqual([
        'alloc dir allocs/lost-1',
        'alloc dir allocs/lost-2',
        'alloc dir allocs/lost-3',
        'plugin socket dir plugins/lost-1',
        'per-alloc mount dir csi/monolith/hostpath/per-alloc/lost-1',
      ]);
      // Tasks first, then mounts, then dirs: the order they are cleaned in.
      expect(orphans.map((o) => o.kind)).toEqual(['task', 'task', 'task', 'mount', 'mount', 'mount', 'dir', 'dir', 'dir', 'dir', 'dir']);
    });

    it('finds nothing in a data dir the state knows all of, or one that has no allocs dir yet', async () => {
      expect(await scan([])).toEqual([]);
      task('known-1', 'web', 100);
      alive.set(100, true);
      expect(await scan([target('known-1', 'vol-known'), staging('vol-known')])).toEqual([]);
    });

    it('never follows a symlink in the data dir', async () => {
      const elsewhere = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-orphans-elsewhere-'));
      try {
        mkdir('allocs');
        fs.symlinkSync(elsewhere, path.join(dd, 'allocs', 'linked'));
        expect(await scan([])).toEqual([]);
      } finally {
        fs.rmSync(elsewhere, { recursive: true, force: true });
      }
    });

    it('an isolated task whose runc and executor are gone but whose container runs is an orphan task (stopped through the driver, which removes the container)', async () => {
      task('lost-iso', 'web', 300);
      const taskDir = path.join(dd, 'allocs', 'lost-iso', 'web');
      records.set(taskDir, { ...records.get(taskDir)!, runc: { root: '/run/csiplug/runc', id: 'csiplug-lost-iso-web' } });
      task('lost-ended', 'web', 400);
      const endedDir = path.join(dd, 'allocs', 'lost-ended', 'web');
      records.set(endedDir, { ...records.get(endedDir)!, runc: { root: '/run/csiplug/runc', id: 'csiplug-lost-ended-web' } });
      const orphans = await findOrphans({
        dataDir: dd,
        known,
        mounts: [],
        readTask: ({ taskDir: d }) => records.get(d),
        isSameProcess,
        containerRuns: async (h) => h.allocId === 'lost-iso',
      });
      const tasks = orphans.filter((o) => o.kind === 'task');
      expect(tasks.map((o) => o.kind === 'task' && o.allocId)).toEqual(['lost-iso']);
      expect(describeOrphan(tasks[0]!)).toBe(
        `orphan task: task "web" of alloc lost-iso (${taskDir}): its container csiplug-lost-iso-web (runc pid 300 has ended) runs, its executor pid 1300 has ended; the state knows no alloc lost-iso`,
      );
    });

    it('an isolated task whose container cannot be checked (runc fails, or the check throws at once) is an orphan task that may run', async () => {
      task('lost-a', 'web', 500);
      task('lost-b', 'web', 600);
      for (const id of ['lost-a', 'lost-b']) {
        const dir = path.join(dd, 'allocs', id, 'web');
        records.set(dir, { ...records.get(dir)!, runc: { root: '/run/csiplug/runc', id: `csiplug-${id}-web` } });
      }
      const orphans = await findOrphans({
        dataDir: dd,
        known,
        mounts: [],
        readTask: ({ taskDir: d }) => records.get(d),
        isSameProcess,
        containerRuns: (h) => {
          if (h.allocId === 'lost-b') throw new Error('runc could not be run');
          return Promise.reject(new Error('runc state took longer than 10s'));
        },
      });
      const tasks = orphans.filter((o) => o.kind === 'task');
      expect(tasks.map((o) => o.kind === 'task' && [o.allocId, o.task, o.container])).toEqual([
        ['lost-a', 'unknown', true],
        ['lost-b', 'unknown', true],
      ]);
    });

    it("the shared bind of a plugin's staging/publish base is an orphan when no alloc the state knows runs the plugin", async () => {
      const root = path.join(dd, 'csi', 'monolith', 'hostpath');
      const scanWith = (pluginRoots: Set<string>) =>
        findOrphans({
          dataDir: dd,
          known: { ...known, pluginRoots },
          mounts: [{ mountPoint: root }],
          readTask: () => undefined,
          isSameProcess,
        });
      expect(await scanWith(new Set(['monolith/hostpath']))).toEqual([]);
      const orphans = await scanWith(new Set(['node/other']));
      expect(orphans).toEqual([{ kind: 'mount', mountPoint: root, pluginId: 'hostpath' }]);
      expect(describeOrphan(orphans[0]!)).toBe(
        `orphan mount: ${root} is mounted for the staging/publish base of plugin hostpath (its shared bind), which no alloc the state knows runs`,
      );
    });

    it('takes a task whose record cannot be read for one that may run, says so, and the cleanup keeps its alloc dir', async () => {
      task('lost-1', 'web', 200);
      const unread: string[] = [];
      const orphans = await findOrphans({
        dataDir: dd,
        known,
        mounts: [],
        readTask: () => {
          throw new Error('EMFILE');
        },
        isSameProcess,
        onUnreadable: (what) => unread.push(what),
      });
      expect(orphans.map((o) => o.kind)).toEqual(['unverified task', 'dir']);
      expect(describeOrphan(orphans[0]!)).toBe(
        `orphan task that may run: task "web" of alloc lost-1 (${path.join(dd, 'allocs', 'lost-1', 'web')}): its executor record could not be read (EMFILE); the state knows no alloc lost-1`,
      );
      expect(unread).toEqual([`the executor record in ${path.join(dd, 'allocs', 'lost-1', 'web')}`]);
      const logger = new MemoryLogger();
      const report = await reconcileOrphans(orphans, {
        driver: { stop: async () => Promise.reject(new Error('nothing is stopped here')) },
        killSignal: 'SIGTERM',
        killTimeout: 0,
        isSameProcess: () => false,
        kill: () => undefined,
        executorGrace: 0,
        sleep: async () => undefined,
        unmount: async () => undefined,
        mountsUnder: () => [],
        mountsFrom: () => [],
        known: () => known,
        dataDir: dd,
        logger,
      });
      expect(report.dirsRemoved).toBe(0);
      expect(report.left.map((l) => l.orphan.kind)).toEqual(['unverified task', 'dir']);
      expect(fs.existsSync(path.join(dd, 'allocs', 'lost-1', 'web', '.executor'))).toBe(true);
    });

    it('takes a task dir whose executor recorded neither a pid nor an exit for a task that may run; one with an exit record has ended', async () => {
      for (const allocId of ['lost-1', 'lost-2']) fs.mkdirSync(path.join(dd, 'allocs', allocId, 'web', '.executor'), { recursive: true });
      fs.writeFileSync(path.join(dd, 'allocs', 'lost-2', 'web', '.executor', 'exit.json'), '{}');
      const orphans = await scan([]);
      expect(orphans.map((o) => `${o.kind} ${o.allocId}`)).toEqual(['unverified task lost-1', 'dir lost-1', 'dir lost-2']);
    });
  });

  describe('describeOrphan', () => {
    it('says in one line what and where', () => {
      const taskDir = path.join(dd, 'allocs', 'lost-1', 'web');
      expect(
        describeOrphan({
          kind: 'task',
          allocId: 'lost-1',
          taskName: 'web',
          taskDir,
          handle: handleIn('lost-1', 'web', taskDir, 200),
          task: true,
          executor: 'unknown',
        }),
      ).toBe(
        `orphan task: task "web" of alloc lost-1 (${taskDir}): pid 200 runs, its executor pid 1200 may run (it could not be checked); the state knows no alloc lost-1`,
      );
      expect(describeOrphan({ kind: 'mount', mountPoint: '/d/csi/x', allocId: 'lost-1' })).toBe(
        'orphan mount: /d/csi/x is mounted for alloc lost-1, which the state does not know',
      );
      expect(describeOrphan({ kind: 'mount', mountPoint: '/d/csi/s', pluginId: 'hostpath', volumeId: 'v' })).toBe(
        'orphan mount: /d/csi/s is mounted for volume v of plugin hostpath, which no mount record of the state names',
      );
      expect(describeOrphan({ kind: 'dir', what: 'alloc dir', allocId: 'lost-1', path: '/d/allocs/lost-1' })).toBe(
        'orphan alloc dir: /d/allocs/lost-1 belongs to alloc lost-1, which the state does not know',
      );
    });
  });

  describe('reconcileOrphans', () => {
    let driver: FakeDriver;
    let logger: MemoryLogger;
    let table: string[];
    let calls: string[];
    let knownNow: KnownState;
    /** Mount points whose normal unmount fails (busy), and whose lazy one fails too. */
    let busy: Set<string>;
    let stuck: Set<string>;
    /** A dir (real path) → a mount point elsewhere whose source lies in it. */
    let sourceOf: Map<string, string>;

    const deps = (over: Partial<OrphanCleanupDeps> = {}): OrphanCleanupDeps => ({
      driver: {
        stop: async (handle, signal, killTimeout): Promise<ExitResult> => {
          calls.push(`stop ${handle.pid} ${signal}`);
          const exit = await driver.stop(handle, signal, killTimeout);
          alive.set(handle.pid, false).set(handle.executorPid, false); // the executor records the exit and leaves
          return exit;
        },
      },
      killSignal: 'SIGTERM',
      killTimeout: 1_000,
      isSameProcess,
      kill: (pid, signal) => {
        calls.push(`kill ${pid} ${signal}`);
        alive.set(pid, false);
      },
      executorGrace: 0,
      sleep: async () => undefined,
      mountsFrom: (dir) => (sourceOf.get(dir) ? [sourceOf.get(dir)!] : []),
      unmount: async (mountPoint, { lazy }) => {
        calls.push(`${lazy ? 'umount -l' : 'umount'} ${path.relative(dd, mountPoint)}`);
        if (stuck.has(mountPoint) || (!lazy && busy.has(mountPoint))) throw new Error(`umount: ${mountPoint}: target is busy`);
        table.splice(table.lastIndexOf(mountPoint), 1);
      },
      mountsUnder: (dir) => table.filter((m) => m === dir || m.startsWith(`${dir}/`)),
      known: () => knownNow,
      dataDir: dd,
      logger,
      ...over,
    });
    /** Starts a task in the fake driver and records it in a task dir, as an executor would. */
    const running = async (allocId: string, taskName: string): Promise<Extract<Orphan, { kind: 'task' }>> => {
      const taskDir = path.join(dd, 'allocs', allocId, taskName);
      fs.mkdirSync(path.join(taskDir, '.executor'), { recursive: true });
      const handle = await driver.start({ allocId, taskName, taskDir, command: '/bin/sleep', args: ['100'], env: {} });
      alive.set(handle.pid, true).set(handle.executorPid, true);
      return { kind: 'task', allocId, taskName, taskDir, handle, task: true, executor: true };
    };

    beforeEach(() => {
      driver = new FakeDriver();
      logger = new MemoryLogger();
      table = [];
      calls = [];
      busy = new Set();
      stuck = new Set();
      sourceOf = new Map();
      knownNow = known;
    });

    it("a plugin's orphan shared bind goes only with nothing below it, and never lazily", async () => {
      const root = path.join(dd, 'csi', 'monolith', 'hostpath');
      const rootOrphan: Orphan = { kind: 'mount', mountPoint: root, pluginId: 'hostpath' };
      knownNow = { ...known, pluginRoots: new Set() };
      // A known volume's staging mount lies below it: the bind stays (unmounting it would take that mount too).
      table = [root, staging('vol-known')];
      let r = await reconcileOrphans([rootOrphan], deps());
      expect(calls).toEqual([]);
      expect(r.left.map((l) => l.why)).toEqual([`still mounted below it: ${staging('vol-known')}`]);
      // Nothing below, but busy: left, not detached lazily.
      table = [root];
      busy.add(root);
      r = await reconcileOrphans([rootOrphan], deps());
      expect(calls).toEqual(['umount csi/monolith/hostpath']);
      expect(r.left.map((l) => l.why)).toEqual([`could not unmount it: umount: ${root}: target is busy`]);
      // Nothing below, not busy: unmounted.
      busy.clear();
      calls = [];
      r = await reconcileOrphans([rootOrphan], deps());
      expect(calls).toEqual(['umount csi/monolith/hostpath']);
      expect([r.unmounted, r.lazilyUnmounted, r.left]).toEqual([1, 0, []]);
    });

    it('stops the tasks, then unmounts deepest first (lazily when busy), then removes the dirs', async () => {
      const web = await running('lost-1', 'web');
      mkdir('plugins', 'lost-1');
      mkdir('csi', 'monolith', 'hostpath', 'per-alloc', 'lost-1', 'vol-lost', 'rw-file-system-single-node-writer');
      table = [staging('vol-lost'), target('lost-1', 'vol-lost')];
      busy.add(staging('vol-lost'));
      const orphans: Orphan[] = [
        web,
        { kind: 'mount', mountPoint: staging('vol-lost'), pluginId: 'hostpath', volumeId: 'vol-lost' },
        { kind: 'mount', mountPoint: target('lost-1', 'vol-lost'), allocId: 'lost-1' },
        { kind: 'dir', what: 'alloc dir', allocId: 'lost-1', path: path.join(dd, 'allocs', 'lost-1') },
        { kind: 'dir', what: 'plugin socket dir', allocId: 'lost-1', path: path.join(dd, 'plugins', 'lost-1') },
        {
          kind: 'dir',
          what: 'per-alloc mount dir',
          allocId: 'lost-1',
          path: path.join(dd, 'csi', 'monolith', 'hostpath', 'per-alloc', 'lost-1'),
        },
      ];
      const report = await reconcileOrphans(orphans, deps());
      expect(calls).toEqual([
        `stop ${web.handle.pid} SIGTERM`,
        'umount csi/monolith/hostpath/per-alloc/lost-1/vol-lost/rw-file-system-single-node-writer',
        'umount csi/monolith/hostpath/staging/vol-lost/rw-file-system-single-node-writer',
        'umount -l csi/monolith/hostpath/staging/vol-lost/rw-file-system-single-node-writer',
      ]);
      expect(report).toEqual({ tasksStopped: 1, unmounted: 1, lazilyUnmounted: 1, dirsRemoved: 3, left: [] });
      expect(fs.readdirSync(dd).sort()).toEqual(['allocs', 'csi', 'plugins']);
      expect(fs.readdirSync(path.join(dd, 'allocs'))).toEqual([]);
      const lines = logger.records.map((r) => r.msg);
      expect(lines).toContain(
        `unmounted orphan mount ${staging('vol-lost')} lazily (umount -l): a normal unmount failed (umount: ${staging('vol-lost')}: target is busy); the kernel frees it once nothing uses it`,
      );
    });

    it('kills an executor that outlives its task, only while its pid still names the process that started then', async () => {
      const taskDir = path.join(dd, 'allocs', 'lost-2', 'lingering');
      fs.mkdirSync(taskDir, { recursive: true });
      const handle = handleIn('lost-2', 'lingering', taskDir, 400);
      alive.set(1_400, true);
      const report = await reconcileOrphans(
        [{ kind: 'task', allocId: 'lost-2', taskName: 'lingering', taskDir, handle, task: false, executor: true }],
        deps(),
      );
      expect(calls).toEqual(['kill 1400 SIGKILL']);
      expect(report.tasksStopped).toBe(1);
      // Its pid now names another process (another start time): it is not signalled.
      alive.set(1_400, true);
      startTimes.set(1_400, '987654');
      calls = [];
      await reconcileOrphans(
        [{ kind: 'task', allocId: 'lost-2', taskName: 'lingering', taskDir, handle, task: false, executor: true }],
        deps(),
      );
      expect(calls).toEqual([]);
    });

    it('keeps a dir while something is mounted below it, and the dirs and mounts of an alloc whose task could not be stopped', async () => {
      const web = await running('lost-1', 'web');
      mkdir('allocs', 'lost-2', 'web', 'data');
      table = [path.join(dd, 'allocs', 'lost-2', 'web', 'data'), target('lost-1', 'vol-lost')];
      stuck.add(path.join(dd, 'allocs', 'lost-2', 'web', 'data'));
      const failing = deps({
        driver: {
          stop: async () => {
            throw new Error('EPERM: operation not permitted');
          },
        },
      });
      const report = await reconcileOrphans(
        [
          web,
          { kind: 'mount', mountPoint: path.join(dd, 'allocs', 'lost-2', 'web', 'data'), allocId: 'lost-2' },
          { kind: 'mount', mountPoint: target('lost-1', 'vol-lost'), allocId: 'lost-1' },
          { kind: 'dir', what: 'alloc dir', allocId: 'lost-1', path: path.join(dd, 'allocs', 'lost-1') },
          { kind: 'dir', what: 'alloc dir', allocId: 'lost-2', path: path.join(dd, 'allocs', 'lost-2') },
        ],
        failing,
      );
      expect(report.tasksStopped).toBe(0);
      expect(
        report.left.map(
          (l) =>
            `${describeOrphan(l.orphan).split(':')[0]} ${l.orphan.kind === 'task' ? l.orphan.allocId : l.orphan.kind === 'mount' ? path.relative(dd, l.orphan.mountPoint) : l.orphan.kind === 'dir' ? path.relative(dd, l.orphan.path) : l.orphan.taskDir}: ${l.why}`,
        ),
      ).toEqual([
        'orphan task lost-1: could not stop it: EPERM: operation not permitted',
        'orphan mount csi/monolith/hostpath/per-alloc/lost-1/vol-lost/rw-file-system-single-node-writer: a task of alloc lost-1 may still use it',
        `orphan mount allocs/lost-2/web/data: could not unmount it: umount: ${path.join(dd, 'allocs', 'lost-2', 'web', 'data')}: target is busy; nor lazily: umount: ${path.join(dd, 'allocs', 'lost-2', 'web', 'data')}: target is busy`,
        'orphan alloc dir allocs/lost-1: a task of alloc lost-1 may still run in it',
        `orphan alloc dir allocs/lost-2: still mounted below it: ${path.join(dd, 'allocs', 'lost-2', 'web', 'data')} (never deleted through a mount)`,
      ]);
      expect(fs.existsSync(path.join(dd, 'allocs', 'lost-1'))).toBe(true);
      expect(fs.existsSync(path.join(dd, 'allocs', 'lost-2', 'web', 'data'))).toBe(true);
      expect(logger.records.filter((r) => r.level === 'error')).toHaveLength(5);
    });

    it('never removes a dir that is the source of a live mount elsewhere (a plugin keeping its volumes in its alloc dir)', async () => {
      mkdir('allocs', 'lost-3', 'plugin', 'state', 'vol-1');
      const real = fs.realpathSync(path.join(dd, 'allocs', 'lost-3'));
      sourceOf.set(real, '/var/lib/workload/data');
      const report = await reconcileOrphans(
        [{ kind: 'dir', what: 'alloc dir', allocId: 'lost-3', path: path.join(dd, 'allocs', 'lost-3') }],
        deps(),
      );
      expect(report.dirsRemoved).toBe(0);
      expect(report.left.map((l) => l.why)).toEqual([
        'it is the source of a live mount: /var/lib/workload/data (its data is in use there)',
      ]);
      expect(fs.existsSync(path.join(dd, 'allocs', 'lost-3', 'plugin', 'state', 'vol-1'))).toBe(true);
    });

    it('bounds the mount cleanup in time: an unmount that never returns is given up, and past the limit the rest is left', async () => {
      const hung = [staging('vol-a'), staging('vol-b'), staging('vol-c')];
      let t = 0;
      const report = await reconcileOrphans(
        hung.map((mountPoint, i) => ({ kind: 'mount' as const, mountPoint, pluginId: 'hostpath', volumeId: `vol-${'abc'[i]}` })),
        deps({
          unmount: (mountPoint, { lazy }) => {
            calls.push(`${lazy ? 'umount -l' : 'umount'} ${path.relative(dd, mountPoint)}`);
            t += 30;
            return new Promise<void>(() => undefined); // stuck in the kernel: never settles
          },
          unmountLimit: 5,
          mountsLimit: 100,
          now: () => t,
        }),
      );
      expect(calls).toEqual([
        'umount csi/monolith/hostpath/staging/vol-c/rw-file-system-single-node-writer',
        'umount -l csi/monolith/hostpath/staging/vol-c/rw-file-system-single-node-writer',
        'umount csi/monolith/hostpath/staging/vol-b/rw-file-system-single-node-writer',
        'umount -l csi/monolith/hostpath/staging/vol-b/rw-file-system-single-node-writer',
      ]);
      expect(report.left.map((l) => l.why)).toEqual([
        `could not unmount it: umount ${staging('vol-c')} did not finish within 5ms; nor lazily: umount -l ${staging('vol-c')} did not finish within 5ms`,
        `could not unmount it: umount ${staging('vol-b')} did not finish within 5ms; nor lazily: umount -l ${staging('vol-b')} did not finish within 5ms`,
        'the mount cleanup ran out of time (100ms); a later -reconcile-orphans tries again',
      ]);
    });

    it('never removes through a symlink put in place of an orphan dir since the scan', async () => {
      mkdir('elsewhere', 'precious');
      mkdir('allocs');
      fs.symlinkSync(path.join(dd, 'elsewhere'), path.join(dd, 'allocs', 'lost-4'));
      const report = await reconcileOrphans(
        [{ kind: 'dir', what: 'alloc dir', allocId: 'lost-4', path: path.join(dd, 'allocs', 'lost-4') }],
        deps(),
      );
      expect(report.dirsRemoved).toBe(0);
      expect(report.left.map((l) => l.why)).toEqual(['it is no longer a dir (a symlink): nothing is removed through it']);
      expect(fs.existsSync(path.join(dd, 'elsewhere', 'precious'))).toBe(true);
    });

    it('leaves a mount the state has come to know since the scan', async () => {
      table = [staging('vol-new')];
      knownNow = { allocs: new Set(), volumes: [{ pluginId: 'hostpath', volumeId: 'vol-new', externalId: 'e' }] };
      const report = await reconcileOrphans(
        [{ kind: 'mount', mountPoint: staging('vol-new'), pluginId: 'hostpath', volumeId: 'vol-new' }],
        deps(),
      );
      expect(calls).toEqual([]);
      expect(report).toEqual({ tasksStopped: 0, unmounted: 0, lazilyUnmounted: 0, dirsRemoved: 0, left: [] });
    });
  });

  describe('knownState', () => {
    it('counts the allocs of unreadable mount records (by key), plugin registrations and volume claims; an unreadable mount record makes every staging mount known', () => {
      const state = {
        listVolumeMounts: <T>() => ({
          records: [
            { key: 'ok-1/data', record: { allocId: 'ok-1', name: 'data' } as T },
            { key: 'bad-shape/data', record: { allocId: 'bad-shape' } as T },
          ],
          failures: [{ key: 'undecodable/db%2Fvol', error: 'Unexpected token' }],
        }),
        getRegistryState: <T>() => ({ plugins: { node: { hostpath: [{ allocId: 'plugin-alloc', socketPath: '/x' }] } } }) as T,
        listVolumes: <T>() => [{ id: 'v1', claims: [{ allocId: 'claimer', accessMode: 'single-node-writer' }] }] as T[],
      };
      const pluginAlloc = {
        alloc: {
          id: 'alloc-1',
          group: 'plugin',
          job: { groups: [{ name: 'plugin', tasks: [{ name: 'plugin', csiPlugin: { id: 'hostpath', type: 'monolith' } }] }] },
        },
      } as never;
      const allocs = (failures: { key: string; error: string }[] = []) => ({
        listAllocationIds: () => ['alloc-1'],
        listAllocations: () => ({ records: [pluginAlloc], failures }),
      });
      const k = knownState(
        state,
        allocs(),
        { list: () => [{ allocId: 'ok-1', name: 'data', pluginId: 'hostpath', volumeId: 'v', externalId: 'v' }] as never },
        { pluginRoots: true },
      );
      expect([...k.allocs].sort()).toEqual(['alloc-1', 'bad-shape', 'claimer', 'ok-1', 'plugin-alloc', 'undecodable']);
      expect(k.stagingUnknown).toBe(true);
      expect(mountIsKnown(dd, staging('vol-nobody-names'), k)).toBe(true);
      expect(mountIsKnown(dd, target('lost-1', 'v'), k)).toBe(false);
      // The shared bind of a plugin's staging/publish base: known while a known alloc runs the plugin; any, while an alloc record cannot be read.
      expect(mountIsKnown(dd, path.join(dd, 'csi', 'monolith', 'hostpath'), k)).toBe(true);
      expect(mountIsKnown(dd, path.join(dd, 'csi', 'node', 'other'), k)).toBe(false);
      // A plugin only a registration names (here: node/hostpath registered as csi-node) is known under every type.
      expect(mountIsKnown(dd, path.join(dd, 'csi', 'controller', 'hostpath'), k)).toBe(true);
      const unread = knownState(state, allocs([{ key: 'x', error: 'bad' }]), { list: () => [] }, { pluginRoots: true });
      expect(mountIsKnown(dd, path.join(dd, 'csi', 'node', 'other'), unread)).toBe(true);
      // A record of the wrong shape may run any plugin too.
      const odd = knownState(
        state,
        {
          listAllocationIds: () => [],
          listAllocations: () => ({ records: [{ alloc: { job: { groups: [null] } } } as never], failures: [] }),
        },
        { list: () => [] },
        { pluginRoots: true },
      );
      expect(mountIsKnown(dd, path.join(dd, 'csi', 'node', 'other'), odd)).toBe(true);
      // Not asked (no plugin bind under the data dir): no record is decoded, every bind counts as known.
      const cheap = knownState(
        state,
        {
          listAllocationIds: () => [],
          listAllocations: () => {
            throw new Error('not to be read');
          },
        },
        { list: () => [] },
      );
      expect(mountIsKnown(dd, path.join(dd, 'csi', 'node', 'other'), cheap)).toBe(true);
    });
  });

  describe('mountsFromDir', () => {
    it('names the mounts elsewhere whose bind source lies in the dir, not the one the dir lives on nor mounts below it', () => {
      const entry = (id: number, mountPoint: string, device: string, root: string): MountInfoEntry => ({
        id,
        parentId: 1,
        device,
        root,
        mountPoint,
        options: [],
        optionalFields: [],
        fsType: 'ext4',
        source: '/dev/x',
        superOptions: [],
      });
      const table = [
        entry(1, '/', '8:1', '/'),
        entry(2, '/var/lib/csiplug', '8:2', '/'),
        entry(3, '/srv/workload', '8:2', '/allocs/p1/plugin/state/v1'),
        entry(4, '/srv/other', '8:2', '/allocs/p10'),
        entry(5, '/var/lib/csiplug/allocs/p1/below', '8:3', '/'),
      ];
      expect(mountsFromDir(table, '/var/lib/csiplug/allocs/p1')).toEqual(['/srv/workload']);
      expect(mountsFromDir(table, '/var/lib/csiplug/allocs/p2')).toEqual([]);
    });
  });

  describe('deletedStateFinding', () => {
    it('says when a new state file meets what an earlier agent left, and nothing on a first start', () => {
      const file = path.join(dd, 'state.db');
      expect(deletedStateFinding(dd, file)).toBeUndefined();
      mkdir('allocs');
      mkdir('csi');
      expect(deletedStateFinding(dd, file)).toBeUndefined();
      mkdir('allocs', 'a1');
      mkdir('allocs', 'a2');
      fs.writeFileSync(`${file}.backup`, '');
      expect(deletedStateFinding(dd, file)).toBe(
        `the state file ${file} was not there (deleted?) while the data dir holds what an earlier agent left: allocs/ (2 entries), state.db.backup`,
      );
    });
  });
});
