// Orphans: what lives under the data dir although the agent's state does not
// know it — tasks still run by their executors, mounts, and alloc dirs left by
// an alloc the state lost (a state file found empty, a memory agent killed,
// a purge that had to keep a dir under a live mount). Nothing of it would
// ever be stopped, unmounted or removed otherwise, and a lost state must
// never be silent.
//
// At start, once the modules have opened the state and before any restore or
// resumed rollout runs (which allocs exist is fixed by the state then, and
// nothing mounts beside the cleanup), the agent scans once (checkOrphansAtStart) and logs one warning per orphan saying what and
// where. With `-reconcile-orphans` (config `reconcile_orphans = true`) it
// also cleans them, in this order:
//   1. tasks: stopped through the driver, which signals a pid only together
//      with its start time (a reused pid is never killed); an executor that
//      outlives its task is killed the same way;
//   2. mounts: unmounted deepest first; a lazy unmount (`umount -l`) only
//      when the normal one fails, and the log says so;
//   3. dirs (the alloc dir, its plugin socket dir, its per-alloc mount dir):
//      removed only when nothing is mounted below and none of its tasks runs.
// A task dir with an executor dir whose end is not proven (no readable
// pid.json naming a task and executor both gone, and no exit.json) is a task
// that may run: its alloc's dirs and mounts are kept, never removed.
//
// What counts as known: an alloc the alloc store has a record of (one it
// cannot read included: it is never touched), that a volume mount record
// names (one it cannot read included, by its key), that a plugin
// registration names, or that holds a claim on a volume of the catalog; a
// staging mount of a (plugin, volume) that a mount record names — and every
// staging mount while a mount record cannot be read (its volume is unknown).
// A dir is never removed while a live mount lies below it or has its source
// inside it (a bind of a plugin's data kept in its alloc dir).
// The shared bind an isolated plugin's staging/publish base gets (a mount
// exactly at csi/<type>/<plugin>) is known while an alloc record or a
// plugin registration names that plugin, and always while an alloc record
// cannot be read; an orphan one is unmounted only when nothing is left
// below it, never lazily. Other paths that are the data dir's own layout
// (allocs/, csi/<type>/<plugin>/…) or that the layout does not explain are
// never taken for orphans.
import {
  TimeoutError,
  backingOf,
  errorMessage,
  formatDuration,
  mountPointsUnder,
  readMountInfoSync,
  type Logger,
  type MountInfoEntry,
} from '@csiplug/core';
import { IClientStateDB, type ClientStateDB } from '@csiplug/state';
import { EXECUTOR_DIR, ITaskDriver, executorPaths, isSameProcess, type TaskDriver, type TaskHandle } from '@csiplug/driver';
import { IVolumeReconciler, type VolumeReconcilerService } from '@csiplug/volumes';
import { execFile } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import type { DependencyContainer } from 'tsyringe';
import { IAllocStore, type AllocStore } from './alloc-store';

/** What the state knows: allocs by id, and the volumes mount records name (for staging mounts). */
export interface KnownState {
  allocs: ReadonlySet<string>;
  volumes: readonly { pluginId: string; volumeId: string; externalId: string }[];
  /** A mount record could not be read: which volume it names is unknown, so every staging mount counts as known. */
  stagingUnknown?: boolean;
  /**
   * The plugins (`<type>/<id>`, as csi/<type>/<id> in the data dir) some
   * alloc the state knows runs: the shared bind an isolated plugin's
   * staging/publish base gets is theirs. Absent: every such bind counts as
   * known (so does each while an alloc record cannot be read).
   */
  pluginRoots?: ReadonlySet<string>;
}

/** Whether a process is alive: `true`, `false`, or `'unknown'` when it could not be checked just now. */
export type Liveness = boolean | 'unknown';

export type Orphan =
  /** A task (or its executor) still running for an alloc the state does not know. */
  | {
      kind: 'task';
      allocId: string;
      taskName: string;
      taskDir: string;
      handle: TaskHandle;
      task: Liveness;
      executor: Liveness;
      container?: true;
    }
  /** A task of an alloc the state does not know whose executor record cannot be read or is missing with no exit record: it may run, and nothing can stop it. */
  | { kind: 'unverified task'; allocId: string; taskName: string; taskDir: string; why: string }
  /** A mount under the data dir that belongs to no alloc or volume the state knows (or, with no volumeId, the shared bind of the staging/publish base of a plugin no alloc the state knows runs). */
  | { kind: 'mount'; mountPoint: string; allocId?: string; pluginId?: string; volumeId?: string }
  /** A dir of an alloc the state does not know. */
  | { kind: 'dir'; what: 'alloc dir' | 'plugin socket dir' | 'per-alloc mount dir'; allocId: string; path: string };

export interface OrphanScanInput {
  /** The data dir, as a real path (mountinfo lists real paths). */
  dataDir: string;
  known: KnownState;
  /** Mount points, in mount order (e.g. readMountInfoSync()). */
  mounts: readonly { mountPoint: string }[];
  /** The handle an executor recorded in a task dir, or undefined (the driver's adopt). Throws when it cannot be read. */
  readTask(task: { allocId: string; taskName: string; taskDir: string }): TaskHandle | undefined;
  /** Whether `pid` is the live process that started at `startTime`; throws when it cannot be told. */
  isSameProcess(pid: number, startTime: string): boolean;
  /** Told of an executor record the scan could not read; that task is taken to be running (its alloc is kept). */
  onUnreadable?(what: string, err: unknown): void;
  /** Whether an isolated task's container still runs (its runc and executor may both be gone); throws when it cannot be told. */
  containerRuns?(handle: TaskHandle): Promise<boolean>;
}

/** The dirs in `dir` (never a symlink), sorted; `wanted` filters names before anything is stat-ed. */
function subdirs(dir: string, wanted: (name: string) => boolean = () => true): string[] {
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR') return [];
    throw err;
  }
  // Never through a symlink: lstat.
  return names.filter((name) => wanted(name) && fs.lstatSync(path.join(dir, name), { throwIfNoEntry: false })?.isDirectory()).sort();
}

function liveness(check: () => boolean): Liveness {
  try {
    return check();
  } catch {
    return 'unknown';
  }
}

/**
 * Which alloc or volume a mount under the data dir belongs to, from the
 * layout (ARCHITECTURE.md, "Other files"); undefined for the layout's own
 * dirs and for paths it does not explain.
 */
export function classifyMount(
  dataDir: string,
  mountPoint: string,
): { allocId: string } | { pluginId: string; volumeId: string } | undefined {
  const rel = path.relative(dataDir, mountPoint);
  if (!rel || rel.startsWith('..') || path.isAbsolute(rel)) return undefined;
  const parts = rel.split(path.sep);
  if (parts[0] === 'allocs' && parts.length >= 2) return { allocId: parts[1]! };
  if (parts[0] === 'csi' && parts.length >= 5) {
    const [, , pluginId, tree, id] = parts as [string, string, string, string, string];
    if (tree === 'per-alloc') return { allocId: id };
    if (tree === 'staging') return { pluginId, volumeId: id };
  }
  return undefined;
}

/** `<type>/<id>` when the mount is at a plugin's staging/publish base, csi/<type>/<id> (where an isolated plugin's shared bind is), else undefined. */
export function pluginRootOf(dataDir: string, mountPoint: string): string | undefined {
  const rel = path.relative(dataDir, mountPoint);
  if (!rel || rel.startsWith('..') || path.isAbsolute(rel)) return undefined;
  const parts = rel.split(path.sep);
  return parts.length === 3 && parts[0] === 'csi' ? `${parts[1]}/${parts[2]}` : undefined;
}

/** Whether the state knows what the mount belongs to; true for mounts the layout does not explain (never orphans). */
export function mountIsKnown(dataDir: string, mountPoint: string, known: KnownState): boolean {
  const root = pluginRootOf(dataDir, mountPoint);
  if (root !== undefined) return known.pluginRoots === undefined || known.pluginRoots.has(root);
  const owner = classifyMount(dataDir, mountPoint);
  if (!owner) return true;
  if ('allocId' in owner) return known.allocs.has(owner.allocId);
  if (known.stagingUnknown) return true;
  return knownVolumeKeys(known).has(volumeKey(owner.pluginId, owner.volumeId));
}

const volumeKey = (pluginId: string, volumeId: string): string => `${pluginId}\0${volumeId}`;
const volumeKeys = new WeakMap<KnownState, Set<string>>();

/**
 * The (plugin, volume id or external id) pairs the state names, made once
 * per KnownState: each staging mount is one lookup, not a scan of every
 * mount record (a scan made the start-up check quadratic in the volumes).
 */
function knownVolumeKeys(known: KnownState): Set<string> {
  let keys = volumeKeys.get(known);
  if (!keys) {
    keys = new Set(known.volumes.flatMap((v) => [volumeKey(v.pluginId, v.volumeId), volumeKey(v.pluginId, v.externalId)]));
    volumeKeys.set(known, keys);
  }
  return keys;
}

/** Finds every orphan under the data dir: running tasks, mounts, then dirs. Reads only. */
export async function findOrphans(input: OrphanScanInput): Promise<Orphan[]> {
  const { dataDir, known } = input;
  const tasks: Orphan[] = [];
  const dirs: Orphan[] = [];

  const unknown = (allocId: string) => !known.allocs.has(allocId);
  const allocsDir = path.join(dataDir, 'allocs');
  for (const allocId of subdirs(allocsDir, unknown)) {
    const allocDir = path.join(allocsDir, allocId);
    dirs.push({ kind: 'dir', what: 'alloc dir', allocId, path: allocDir });
    for (const taskName of subdirs(allocDir)) {
      const taskDir = path.join(allocDir, taskName);
      if (!fs.existsSync(path.join(taskDir, EXECUTOR_DIR))) continue;
      let handle: TaskHandle | undefined;
      try {
        handle = input.readTask({ allocId, taskName, taskDir });
      } catch (err) {
        input.onUnreadable?.(`the executor record in ${taskDir}`, err);
        tasks.push({
          kind: 'unverified task',
          allocId,
          taskName,
          taskDir,
          why: `its executor record could not be read (${errorMessage(err)})`,
        });
        continue;
      }
      if (!handle) {
        // No pid.json (or a damaged one): ended only if the executor recorded the end.
        if (!fs.existsSync(executorPaths(taskDir).exit)) {
          tasks.push({ kind: 'unverified task', allocId, taskName, taskDir, why: 'its executor recorded neither a pid nor an exit' });
        }
        continue;
      }
      const task = liveness(() => input.isSameProcess(handle.pid, handle.startTime));
      const executor = liveness(() => input.isSameProcess(handle.executorPid, handle.executorStartTime));
      // An isolated task's container outlives a killed runc and executor: it still runs, and is stopped as a task.
      const askContainer = task === false && executor === false && handle.runc !== undefined && input.containerRuns !== undefined;
      // A check that fails (runc hangs past its limit, answers garbage, or throws at once) is "unknown": the task is kept as one that may run.
      const container: Liveness = askContainer
        ? await Promise.resolve(handle)
            .then((h) => input.containerRuns!(h))
            .catch((): Liveness => 'unknown')
        : false;
      if (task === false && executor === false && container === false) continue; // it ended: only its dir is left
      tasks.push({
        kind: 'task',
        allocId,
        taskName,
        taskDir,
        handle,
        task: task === false && container !== false ? container : task,
        executor,
        ...(container !== false ? { container: true } : {}),
      });
    }
  }

  const pluginsDir = path.join(dataDir, 'plugins');
  for (const allocId of subdirs(pluginsDir, unknown))
    dirs.push({ kind: 'dir', what: 'plugin socket dir', allocId, path: path.join(pluginsDir, allocId) });
  const csiDir = path.join(dataDir, 'csi');
  for (const type of subdirs(csiDir)) {
    for (const plugin of subdirs(path.join(csiDir, type))) {
      const perAlloc = path.join(csiDir, type, plugin, 'per-alloc');
      for (const allocId of subdirs(perAlloc, unknown))
        dirs.push({ kind: 'dir', what: 'per-alloc mount dir', allocId, path: path.join(perAlloc, allocId) });
    }
  }

  const mounts: Orphan[] = [];
  for (const { mountPoint } of input.mounts) {
    if (mountIsKnown(dataDir, mountPoint, known)) continue;
    const root = pluginRootOf(dataDir, mountPoint);
    mounts.push({
      kind: 'mount',
      mountPoint,
      ...(root !== undefined ? { pluginId: root.split('/')[1]! } : classifyMount(dataDir, mountPoint)!),
    });
  }
  return [...tasks, ...mounts, ...dirs];
}

const livenessText = (l: Liveness, what: string) =>
  l === 'unknown' ? `${what} may run (it could not be checked)` : l ? `${what} runs` : `${what} has ended`;

/** One line saying what the orphan is and where. */
export function describeOrphan(o: Orphan): string {
  switch (o.kind) {
    case 'task':
      return (
        `orphan task: task "${o.taskName}" of alloc ${o.allocId} (${o.taskDir}): ${livenessText(o.task, o.container ? `its container ${o.handle.runc!.id} (runc pid ${o.handle.pid} has ended)` : `pid ${o.handle.pid}`)}, ` +
        `${livenessText(o.executor, `its executor pid ${o.handle.executorPid}`)}; the state knows no alloc ${o.allocId}`
      );
    case 'unverified task':
      return `orphan task that may run: task "${o.taskName}" of alloc ${o.allocId} (${o.taskDir}): ${o.why}; the state knows no alloc ${o.allocId}`;
    case 'mount': {
      const owner =
        o.allocId !== undefined
          ? `alloc ${o.allocId}, which the state does not know`
          : o.volumeId === undefined
            ? `the staging/publish base of plugin ${o.pluginId} (its shared bind), which no alloc the state knows runs`
            : `volume ${o.volumeId} of plugin ${o.pluginId}, which no mount record of the state names`;
      return `orphan mount: ${o.mountPoint} is mounted for ${owner}`;
    }
    case 'dir':
      return `orphan ${o.what}: ${o.path} belongs to alloc ${o.allocId}, which the state does not know`;
  }
}

/** How long past kill_timeout (when SIGKILL goes) a stop of an orphan task may take before it is given up. */
const STOP_MARGIN_MS = 10_000;
/** How long one unmount may take (a umount stuck on a dead NFS server never returns), and all of them together. */
const UNMOUNT_LIMIT_MS = 35_000;
const MOUNTS_LIMIT_MS = 120_000;

/** `work`, or a TimeoutError after `ms` whether or not `work` ever settles. */
function bounded<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    work,
    new Promise<never>(
      (_, reject) => (timer = setTimeout(() => reject(new TimeoutError(`${what} did not finish within ${formatDuration(ms)}`, ms)), ms)),
    ),
  ]).finally(() => clearTimeout(timer));
}

export interface OrphanCleanupDeps {
  driver: Pick<TaskDriver, 'stop'>;
  /** The signal a task is stopped with, and the ms before SIGKILL (its jobspec is lost with the state). */
  killSignal: NodeJS.Signals;
  killTimeout: number;
  isSameProcess(pid: number, startTime: string): boolean;
  /** Sends a signal to a pid (process.kill), after isSameProcess said it is the process. */
  kill(pid: number, signal: NodeJS.Signals): void;
  /** ms to wait for an executor to exit after its task did, before it is killed. */
  executorGrace: number;
  sleep(ms: number): Promise<void>;
  /** Unmounts `mountPoint`; `lazy` detaches it even while busy (umount -l). Rejects when it fails. */
  unmount(mountPoint: string, options: { lazy: boolean }): Promise<void>;
  /** Mount points at or below `dir`, read now. */
  mountsUnder(dir: string): string[];
  /** Mount points elsewhere whose source (a bind's device and root) lies at or below `dir`, read now. */
  mountsFrom(dir: string): string[];
  /** What the state knows now (read again before mounts are taken down). */
  known(): KnownState;
  dataDir: string;
  logger: Logger;
  /** ms one unmount may take, and all unmounts together (defaults 35 s and 120 s): the agent's start never waits longer; what is left is left. */
  unmountLimit?: number;
  mountsLimit?: number;
  /** ms since some epoch (Date.now). */
  now?: () => number;
}

export interface OrphanCleanupReport {
  tasksStopped: number;
  unmounted: number;
  lazilyUnmounted: number;
  dirsRemoved: number;
  /** Orphans left as they were, each with why. */
  left: { orphan: Orphan; why: string }[];
}

/** Cleans the orphans: tasks first, then mounts (deepest first), then dirs. Never throws; what it could not clean is in `left`. */
export async function reconcileOrphans(orphans: readonly Orphan[], deps: OrphanCleanupDeps): Promise<OrphanCleanupReport> {
  const report: OrphanCleanupReport = { tasksStopped: 0, unmounted: 0, lazilyUnmounted: 0, dirsRemoved: 0, left: [] };
  const log = deps.logger;
  const leave = (orphan: Orphan, why: string) => {
    report.left.push({ orphan, why });
    log.error(`${describeOrphan(orphan)}: left as it is: ${why}`);
  };
  /** Allocs with a task that may still run: their dirs stay. */
  const stillRunning = new Set<string>();

  for (const o of orphans) {
    if (o.kind !== 'unverified task') continue;
    stillRunning.add(o.allocId);
    leave(o, "it may run and cannot be stopped without its record; its alloc's dirs and mounts are kept");
  }

  await Promise.all(
    orphans.map(async (o) => {
      if (o.kind !== 'task') return;
      try {
        if (o.task !== false) {
          // Bounded: a task that not even SIGKILL ends (stuck in the kernel) must not hold the agent's start.
          const limit = deps.killTimeout + STOP_MARGIN_MS;
          let timer: NodeJS.Timeout | undefined;
          const exit = await Promise.race([
            deps.driver.stop(o.handle, deps.killSignal, deps.killTimeout),
            new Promise<never>(
              (_, reject) =>
                (timer = setTimeout(
                  () =>
                    reject(
                      new TimeoutError(`it did not exit within ${formatDuration(limit)} of ${deps.killSignal}, SIGKILL included`, limit),
                    ),
                  limit,
                )),
            ),
          ]).finally(() => clearTimeout(timer));
          log.warn(
            `stopped orphan task "${o.taskName}" of alloc ${o.allocId} (pid ${o.handle.pid}, ${o.taskDir}): ${exit.signal ? `signal ${exit.signal}` : exit.error ? exit.error : `exit code ${exit.exitCode}`}`,
          );
        }
        // Its executor records the exit and leaves at once; one that lingers is killed, verified by its start time.
        const executorGone = async () => {
          for (let waited = 0; waited < deps.executorGrace; waited += 50) {
            if (!deps.isSameProcess(o.handle.executorPid, o.handle.executorStartTime)) return true;
            await deps.sleep(50);
          }
          return !deps.isSameProcess(o.handle.executorPid, o.handle.executorStartTime);
        };
        if (!(await executorGone())) {
          log.warn(
            `killing the executor of orphan task "${o.taskName}" of alloc ${o.allocId} (pid ${o.handle.executorPid}): it outlived its task`,
          );
          deps.kill(o.handle.executorPid, 'SIGKILL');
          if (!(await executorGone())) throw new Error(`its executor (pid ${o.handle.executorPid}) is still running after SIGKILL`);
        }
        report.tasksStopped++;
      } catch (err) {
        stillRunning.add(o.allocId);
        leave(o, `could not stop it: ${errorMessage(err)}`);
      }
    }),
  );

  // The state may have learnt of a mount meanwhile (a restore mounting again): check each against it afresh.
  const known = deps.known();
  const mounts = orphans.filter((o): o is Extract<Orphan, { kind: 'mount' }> => o.kind === 'mount').reverse();
  const now = deps.now ?? Date.now;
  const unmountLimit = deps.unmountLimit ?? UNMOUNT_LIMIT_MS;
  const mountsLimit = deps.mountsLimit ?? MOUNTS_LIMIT_MS;
  const mountsStart = now();
  for (const o of mounts) {
    if (now() - mountsStart >= mountsLimit) {
      leave(o, `the mount cleanup ran out of time (${formatDuration(mountsLimit)}); a later -reconcile-orphans tries again`);
      continue;
    }
    if (mountIsKnown(deps.dataDir, o.mountPoint, known)) {
      log.info(`not unmounting ${o.mountPoint}: the state knows it now`);
      continue;
    }
    if (o.allocId !== undefined && stillRunning.has(o.allocId)) {
      leave(o, `a task of alloc ${o.allocId} may still use it`);
      continue;
    }
    const pluginRoot = pluginRootOf(deps.dataDir, o.mountPoint) !== undefined;
    if (pluginRoot) {
      // A plugin's shared bind goes only with nothing below it (a kept or known mount would go with it), and never lazily.
      const below = deps.mountsUnder(o.mountPoint).filter((m) => m !== o.mountPoint);
      if (below.length || stillRunning.size) {
        leave(
          o,
          below.length
            ? `still mounted below it: ${below.slice(0, 3).join(', ')}${below.length > 3 ? ', …' : ''}`
            : 'a task that may still run could use it',
        );
        continue;
      }
    }
    try {
      await bounded(deps.unmount(o.mountPoint, { lazy: false }), unmountLimit, `umount ${o.mountPoint}`);
      report.unmounted++;
      log.warn(`unmounted orphan mount ${o.mountPoint}`);
    } catch (err) {
      if (pluginRoot) {
        leave(o, `could not unmount it: ${errorMessage(err)}`);
        continue;
      }
      try {
        await bounded(deps.unmount(o.mountPoint, { lazy: true }), unmountLimit, `umount -l ${o.mountPoint}`);
        report.lazilyUnmounted++;
        log.warn(
          `unmounted orphan mount ${o.mountPoint} lazily (umount -l): a normal unmount failed (${errorMessage(err)}); the kernel frees it once nothing uses it`,
        );
      } catch (lazyErr) {
        leave(o, `could not unmount it: ${errorMessage(err)}; nor lazily: ${errorMessage(lazyErr)}`);
      }
    }
  }

  for (const o of orphans) {
    if (o.kind !== 'dir') continue;
    if (stillRunning.has(o.allocId)) {
      leave(o, `a task of alloc ${o.allocId} may still run in it`);
      continue;
    }
    try {
      // The scan's path (under the data dir's real path), never through a
      // symlink put in its place since: rm -rf would run on the link's target.
      const entry = fs.lstatSync(o.path);
      if (!entry.isDirectory()) {
        leave(o, `it is no longer a dir (${entry.isSymbolicLink() ? 'a symlink' : 'another kind of file'}): nothing is removed through it`);
        continue;
      }
      const real = o.path;
      const below = deps.mountsUnder(real);
      if (below.length) {
        leave(o, `still mounted below it: ${below.join(', ')} (never deleted through a mount)`);
        continue;
      }
      const from = deps.mountsFrom(real);
      if (from.length) {
        leave(o, `it is the source of a live mount: ${from.join(', ')} (its data is in use there)`);
        continue;
      }
      fs.rmSync(real, { recursive: true, force: true });
      report.dirsRemoved++;
      log.warn(`removed orphan ${o.what} ${o.path}`);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue; // gone with its parent
      leave(o, `could not remove it: ${errorMessage(err)}`);
    }
  }
  return report;
}

function execFileAsync(file: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { timeout: 30_000 }, (err, _stdout, stderr) => {
      if (err) reject(new Error(`${file} ${args.join(' ')}: ${String(stderr).trim() || err.message}`));
      else resolve();
    });
  });
}

const isAtOrUnder = (p: string, dir: string) => p === dir || p.startsWith(dir.endsWith('/') ? dir : `${dir}/`);

/** Mount points outside `dir` whose source (device and root of a bind) lies at or below `dir`. */
export function mountsFromDir(table: readonly MountInfoEntry[], dir: string): string[] {
  const backing = backingOf(table, dir);
  if (!backing) return [];
  return table
    .filter((m) => m.device === backing.device && isAtOrUnder(m.root, backing.root) && !isAtOrUnder(m.mountPoint, dir))
    .map((m) => m.mountPoint);
}

/** Every string `allocId` field in a saved value (registry state, a volume's claims), whatever its shape. */
function allocIdsIn(value: unknown, out: Set<string>, depth = 0): void {
  if (depth > 8 || value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) {
    for (const v of value) allocIdsIn(v, out, depth + 1);
    return;
  }
  for (const [k, v] of Object.entries(value)) {
    if (k === 'allocId' && typeof v === 'string' && v) out.add(v);
    else allocIdsIn(v, out, depth + 1);
  }
}

/**
 * The plugins (`<type>/<id>`) whose staging/publish base an alloc the state
 * knows may use: every csi_plugin task of every group of every alloc record,
 * and every plugin a registration names (under each type). Undefined — all
 * of them — when an alloc record cannot be read or has not the shape it
 * should: it may run any plugin.
 */
function knownPluginRoots(
  state: Pick<ClientStateDB, 'getRegistryState'>,
  allocs: Pick<AllocStore, 'listAllocations'>,
): Set<string> | undefined {
  const roots = new Set<string>();
  const { records, failures } = allocs.listAllocations();
  if (failures.length) return undefined;
  try {
    for (const { alloc } of records) {
      for (const group of alloc.job.groups)
        for (const task of group.tasks) if (task.csiPlugin) roots.add(`${task.csiPlugin.type}/${task.csiPlugin.id}`);
    }
  } catch {
    return undefined;
  }
  // Registered plugins by name, whatever their registry type (csi-node, csi-controller): the dir's type may be any of the three.
  const plugins = (state.getRegistryState<{ plugins?: Record<string, Record<string, unknown>> }>() ?? {}).plugins;
  if (plugins && typeof plugins === 'object') {
    for (const byName of Object.values(plugins)) {
      if (!byName || typeof byName !== 'object') continue;
      for (const name of Object.keys(byName)) for (const type of ['monolith', 'node', 'controller']) roots.add(`${type}/${name}`);
    }
  }
  return roots;
}

/**
 * What the state knows now: alloc ids of the alloc store (from the keys
 * alone; the records themselves only with `pluginRoots`, when a plugin's
 * shared bind is there to judge), of the mount records (readable or not:
 * an unreadable one by its key, and then every staging mount counts as
 * known), of the plugin registrations and of the catalog's volume claims.
 */
export function knownState(
  state: Pick<ClientStateDB, 'listVolumeMounts' | 'getRegistryState' | 'listVolumes'>,
  allocs: Pick<AllocStore, 'listAllocationIds' | 'listAllocations'>,
  volumes: Pick<VolumeReconcilerService, 'list'>,
  options: { pluginRoots?: boolean } = {},
): KnownState {
  const ids = new Set<string>(allocs.listAllocationIds());
  // Only when a plugin's shared bind is there to judge: it costs a decode of every alloc record.
  const pluginRoots = options.pluginRoots ? knownPluginRoots(state, allocs) : undefined;
  const mountRecords = volumes.list();
  for (const r of mountRecords) ids.add(r.allocId);
  const named = mountRecords.map((r) => ({ pluginId: r.pluginId, volumeId: r.volumeId, externalId: r.externalId }));
  let stagingUnknown = false;
  const { records, failures } = state.listVolumeMounts<unknown>();
  const readable = new Set(mountRecords.map((r) => `${r.allocId}\0${r.name}`));
  const unreadableKeys = [
    ...failures.map((f) => f.key),
    ...records
      .filter(({ record }) => {
        const r = record as { allocId?: unknown; name?: unknown } | null;
        return !(r && typeof r === 'object' && readable.has(`${String(r.allocId)}\0${String(r.name)}`));
      })
      .map((r) => r.key),
  ];
  for (const key of unreadableKeys) {
    // The key is the alloc id, then the volume name escaped (mountKey).
    const allocId = key.split('/')[0];
    if (allocId) ids.add(allocId);
    stagingUnknown = true;
  }
  allocIdsIn(state.getRegistryState(), ids);
  for (const volume of state.listVolumes<unknown>()) allocIdsIn((volume as { claims?: unknown } | null)?.claims, ids);
  return { allocs: ids, volumes: named, stagingUnknown, ...(pluginRoots ? { pluginRoots } : {}) };
}

/**
 * A state file this start created (none was there) while the data dir holds
 * what an earlier agent left (alloc dirs, plugin sockets, CSI mount dirs, a
 * migration backup): the state was deleted, and the agent starts knowing
 * nothing. One sentence saying so, or undefined for a true first start.
 */
export function deletedStateFinding(dataDir: string, stateFile: string): string | undefined {
  const left: string[] = [];
  for (const name of ['allocs', 'plugins', 'csi']) {
    let entries: string[] = [];
    try {
      entries = fs.readdirSync(path.join(dataDir, name));
    } catch {
      // not there: nothing left in it
    }
    if (entries.length) left.push(`${name}/ (${entries.length} entr${entries.length === 1 ? 'y' : 'ies'})`);
  }
  if (fs.existsSync(`${stateFile}.backup`)) left.push(`${path.basename(stateFile)}.backup`);
  if (!left.length) return undefined;
  return `the state file ${stateFile} was not there (deleted?) while the data dir holds what an earlier agent left: ${left.join(', ')}`;
}

export interface OrphanCheckOptions {
  /** The data dir as configured (a symlink is resolved here). */
  dataDir: string;
  /** Clean the orphans, not only warn about them. */
  reconcile: boolean;
  logger: Logger;
  /** Overrides for the cleanup (tests). */
  cleanup?: Partial<Pick<OrphanCleanupDeps, 'killSignal' | 'killTimeout' | 'executorGrace'>>;
}

/**
 * The agent's start-up check, before boot() restores anything (what is known is the state as the modules opened it):
 * says loudly when the state file was found empty, warns about every orphan
 * (one line each), and with `reconcile` cleans them. Never throws: a check
 * that fails is logged and the agent runs on.
 */
export async function checkOrphansAtStart(
  container: DependencyContainer,
  options: OrphanCheckOptions,
): Promise<{ orphans: Orphan[]; cleanup?: OrphanCleanupReport }> {
  const log = options.logger;
  try {
    const state = container.resolve<ClientStateDB>(IClientStateDB);
    if (state.foundEmpty) {
      log.error(
        `the state file was found empty: ${state.foundEmpty.why}. This agent starts with no jobs, allocs or volumes; ` +
          'tasks, mounts and alloc dirs an earlier agent left are orphans (listed below; -reconcile-orphans cleans them)',
        { file: state.foundEmpty.file, bytes: state.foundEmpty.bytes },
      );
    } else if (state.createdNew && state.path) {
      const deleted = deletedStateFinding(fs.realpathSync(options.dataDir), state.path);
      if (deleted) {
        log.error(
          `${deleted}. This agent starts with no jobs, allocs or volumes; tasks, mounts and alloc dirs an earlier agent left are orphans (listed below; -reconcile-orphans cleans them)`,
          { file: state.path },
        );
      }
    }
    const allocs = container.resolve<AllocStore>(IAllocStore);
    const volumes = container.resolve<VolumeReconcilerService>(IVolumeReconciler);
    const driver = container.resolve<TaskDriver>(ITaskDriver);
    const dataDir = fs.realpathSync(options.dataDir);
    // Strictly below the data dir: the data dir itself may well be a mount of its own.
    const mounts = readMountInfoSync().filter((m) => m.mountPoint.startsWith(`${dataDir}/`));
    const anyPluginRoot = mounts.some((m) => pluginRootOf(dataDir, m.mountPoint) !== undefined);
    const orphans = await findOrphans({
      dataDir,
      known: knownState(state, allocs, volumes, { pluginRoots: anyPluginRoot }),
      mounts,
      readTask: (task) => driver.adopt(task),
      isSameProcess: (pid, startTime) => isSameProcess(pid, startTime),
      ...(driver.containerRuns ? { containerRuns: (handle: TaskHandle) => driver.containerRuns!(handle) } : {}),
      onUnreadable: (what, err) => log.warn(`orphan check: could not read ${what}; it is left out`, { error: errorMessage(err) }),
    });
    for (const o of orphans) log.warn(describeOrphan(o));
    if (orphans.length === 0) return { orphans };
    if (!options.reconcile) {
      log.warn(
        `${orphans.length} orphan(s) under ${options.dataDir} that the state does not know are left as they are; ` +
          'run the agent with -reconcile-orphans (or reconcile_orphans = true) to stop, unmount and remove them ' +
          '(mounts are taken down with umount only: storage-side attachments a plugin made, such as iSCSI sessions or cloud disks, are not released)',
      );
      return { orphans };
    }
    const cleanup = await reconcileOrphans(orphans, {
      driver,
      killSignal: options.cleanup?.killSignal ?? 'SIGTERM',
      killTimeout: options.cleanup?.killTimeout ?? 5_000,
      executorGrace: options.cleanup?.executorGrace ?? 2_000,
      isSameProcess: (pid, startTime) => isSameProcess(pid, startTime),
      kill: (pid, signal) => process.kill(pid, signal),
      sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
      unmount: (mountPoint, { lazy }) => execFileAsync('umount', lazy ? ['-l', mountPoint] : [mountPoint]),
      mountsUnder: (dir) => mountPointsUnder(readMountInfoSync(), dir),
      mountsFrom: (dir) => mountsFromDir(readMountInfoSync(), dir),
      known: () => knownState(state, allocs, volumes, { pluginRoots: anyPluginRoot }),
      dataDir,
      logger: log,
    });
    log.warn(
      `orphans reconciled: ${cleanup.tasksStopped} task(s) stopped, ${cleanup.unmounted + cleanup.lazilyUnmounted} mount(s) unmounted (${cleanup.lazilyUnmounted} lazily), ` +
        `${cleanup.dirsRemoved} dir(s) removed, ${cleanup.left.length} left`,
    );
    return { orphans, cleanup };
  } catch (err) {
    log.error('the orphan check failed; the agent runs on without it', { error: err });
    return { orphans: [] };
  }
}
