// The agent's data dir: who may enter which part of it, and the one lock that
// keeps a second agent out of it. The agent runs as root and the data dir
// holds volume secrets (state.db) and task records, so no other user may
// enter any of it.
//
//   <data_dir>/                        0700  the agent's alone
//     agent.lock  (-wal -shm -journal) 0600  the data dir's lock
//     state.db    (-wal -shm -journal, .backup, .backup.tmp)
//                                      0600  the client state: volume secrets in clear
//     allocs/                          0700  (alloc runner)
//       <alloc id>/                    0700
//         <task>/                      0700  logs, volume links
//           local/ secrets/            0700  an isolated task's own dirs: owned by its user
//           .executor/                 0700  the executor's records (the task's command and env)
//         alloc/                       0700  the alloc's shared dir: owned by its isolated tasks' user (1777 for several)
//     plugins/                         0700  plugin sockets: the agent and its plugins only
//       <alloc id>/                    0700  (hooks)
//     csi/                             0700  staging and publish dirs: the agent and plugins only
//       <type>/ <type>/<plugin>/       0700  (hooks); below are volume mounts: never walked
//
// Why nothing is 0711 any more: an isolated task (which runs as nobody, or
// its jobspec's user) never walks these host paths — runc binds its dirs
// into it as root — and a raw_exec task runs as the agent's user. A path
// other users could walk would let them run a setuid file, or open a device
// node, that a task planted in its dirs (issue 25, item 4).
//
// Tightening only clears bits (chmod, never a move or rewrite), never goes
// through a symlink (entries are lstat-ed; state's tightenMode changes an
// inode through an O_NOFOLLOW descriptor) and never crosses into another
// filesystem (a mount point's mode is that of the mounted volume).
import { CsiplugError, type Logger } from '@csiplug/core';
import { EXECUTOR_DIR } from '@csiplug/driver';
import {
  DB,
  PRIVATE_DIR_MODE,
  PRIVATE_FILE_MODE,
  clientStateFiles,
  formatMode,
  sqliteFiles,
  stateFilePath,
  tightenModes,
  type EntryKind,
  type ModeChange,
} from '@csiplug/state';
import * as fs from 'fs';
import * as path from 'path';

/** The data dir and the alloc and task dirs (see the layout above): no other user walks them. */
export const TRAVERSE_DIR_MODE = 0o700;
/** The alloc's shared dir at most (see the layout above). */
const SHARED_ALLOC_DIR_MAX_MODE = 0o1777;
/** Everything the agent keeps for itself. */
export const AGENT_DIR_MODE = PRIVATE_DIR_MODE;
export const AGENT_FILE_MODE = PRIVATE_FILE_MODE;

export const DATA_DIR_LOCK_NAME = 'agent.lock';

/** `<data_dir>/agent.lock`: held by the agent that owns the data dir, whatever its state backend. */
export function dataDirLockPath(dataDir: string): string {
  return path.join(dataDir, DATA_DIR_LOCK_NAME);
}

/** The data dir is not safe to run on; the message says why and what to do. */
export class DataDirError extends CsiplugError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('EDATADIR', message, options);
  }
}

/** Another agent holds the data dir's lock. */
export class DataDirInUseError extends CsiplugError {
  constructor(
    readonly dataDir: string,
    readonly lockFile: string,
    cause: unknown,
  ) {
    super(
      'EDATADIR_IN_USE',
      `data dir ${dataDir} is in use: another csiplug agent holds its lock ${lockFile}. Stop that agent first, or give this one its own data_dir.`,
      { cause },
    );
  }
}

function whoCanWrite(mode: number): string {
  const who = [mode & 0o020 ? 'its group' : '', mode & 0o002 ? 'every user' : ''].filter(Boolean);
  return who.join(' and ');
}

/**
 * Refuses a data dir that another user controls: a symlink or a dir owned
 * by someone other than this agent's user or root, or a dir others may
 * write to (they could have planted anything in it, and a shared dir such
 * as /tmp must not be chmod-ed). Returns the real path and its stat.
 */
function checkDataDir(dataDir: string): { dir: string; stat: fs.Stats } {
  const uid = process.getuid?.() ?? 0;
  const trusted = (owner: number) => owner === uid || owner === 0;
  const link = fs.lstatSync(dataDir);
  if (link.isSymbolicLink() && !trusted(link.uid)) {
    throw new DataDirError(
      `data dir ${dataDir} is a symlink owned by uid ${link.uid}, neither this agent's user (uid ${uid}) nor root: its owner decides where the agent's state goes. ` +
        'Replace it with a directory, or a symlink owned by root.',
    );
  }
  const dir = fs.realpathSync(dataDir);
  const stat = fs.statSync(dir);
  if (!stat.isDirectory()) throw new DataDirError(`data dir ${dataDir} is not a directory; point data_dir at a directory`);
  if (!trusted(stat.uid)) {
    throw new DataDirError(
      `data dir ${dir} is owned by uid ${stat.uid}, neither this agent's user (uid ${uid}) nor root: its owner could read the state or plant files in it. ` +
        "chown it to the agent's user, or choose another data_dir.",
    );
  }
  if (stat.mode & 0o022) {
    throw new DataDirError(
      `data dir ${dir} is writable by ${whoCanWrite(stat.mode)} (mode ${formatMode(stat.mode)}): anything in it may have been planted by another user. ` +
        `Check its contents, then chmod go-w ${dir} (the agent wants ${formatMode(TRAVERSE_DIR_MODE)}), or choose a data_dir of its own.`,
    );
  }
  // Every dir above it too: whoever may rename an ancestor can swap the
  // whole data dir for a symlink after this check. A sticky dir (/tmp) lets
  // nobody but the owner rename what is in it.
  for (let parent = path.dirname(dir); ; parent = path.dirname(parent)) {
    const st = fs.statSync(parent);
    if (!trusted(st.uid)) {
      throw new DataDirError(
        `data dir ${dir} lies inside ${parent}, owned by uid ${st.uid} (neither this agent's user nor root), who could move it aside and put another in its place; choose a data_dir under dirs root owns`,
      );
    }
    if (st.mode & 0o022 && !(st.mode & 0o1000)) {
      throw new DataDirError(
        `data dir ${dir} lies inside ${parent}, writable by ${whoCanWrite(st.mode)} without the sticky bit (mode ${formatMode(st.mode)}): another user could move the data dir aside and put another in its place; chmod go-w ${parent} or choose another data_dir`,
      );
    }
    if (parent === path.dirname(parent)) break;
  }
  // The agent never reaches its state or its task, plugin and volume dirs through a symlink.
  for (const entry of [
    stateFilePath(dir),
    dataDirLockPath(dir),
    ...['allocs', 'plugins', 'plugin-data', 'csi'].map((n) => path.join(dir, n)),
  ]) {
    const name = path.basename(entry);
    const st = fs.lstatSync(entry, { throwIfNoEntry: false });
    if (st?.isSymbolicLink()) {
      throw new DataDirError(
        `${entry} is a symlink; the agent keeps its state and its task, plugin and volume dirs in the data dir itself. Move the real ${name} into ${dir}.`,
      );
    }
  }
  return { dir, stat };
}

/**
 * Creates the data dir (0700) if missing, refuses one another user controls
 * (DataDirError), and tightens what an older release left looser: state and
 * lock files to 0600, every dir down to the task dirs to 0700. Logs one line per path changed, with its old and new mode, and
 * returns the changes.
 */
export function secureDataDir(dataDir: string, logger: Logger): ModeChange[] {
  return tightenDataDir(prepareDataDir(dataDir), logger);
}

/** Creates the data dir (0700) if missing and refuses one another user controls (DataDirError); returns its real path. Changes no mode. */
export function prepareDataDir(dataDir: string): string {
  fs.mkdirSync(dataDir, { recursive: true, mode: TRAVERSE_DIR_MODE });
  return checkDataDir(dataDir).dir;
}

/**
 * The tightening half of secureDataDir, for a dir prepareDataDir accepted;
 * run it only while holding the data dir's lock, so that it never races a
 * live agent's own changes.
 */
export function tightenDataDir(realDir: string, logger: Logger): ModeChange[] {
  const dir = realDir;
  const root = fs.statSync(dir);
  const changes: ModeChange[] = [];
  const tighten = (entries: string[], max: number, kind: EntryKind) => changes.push(...tightenModes(entries, max, logger, kind));
  /** A real directory on the data dir's own filesystem (not a symlink, not a mount point). */
  const isOwnDir = (p: string) => {
    const st = fs.lstatSync(p, { throwIfNoEntry: false });
    return !!st && st.isDirectory() && st.dev === root.dev;
  };
  const subdirs = (parent: string) =>
    isOwnDir(parent)
      ? fs
          .readdirSync(parent)
          .map((name) => path.join(parent, name))
          .filter(isOwnDir)
      : [];
  const dirs = (entries: string[], max: number) => tighten(entries.filter(isOwnDir), max, 'dir');

  dirs([dir], TRAVERSE_DIR_MODE);
  tighten([...clientStateFiles(stateFilePath(dir)), ...sqliteFiles(dataDirLockPath(dir))], AGENT_FILE_MODE, 'file');

  const allocs = path.join(dir, 'allocs');
  dirs([allocs], TRAVERSE_DIR_MODE);
  for (const alloc of subdirs(allocs)) {
    dirs([alloc], TRAVERSE_DIR_MODE);
    for (const task of subdirs(alloc)) {
      // The shared dir of tasks of several users is 1777 (behind the 0700 alloc dir): kept so.
      dirs([task], path.basename(task) === 'alloc' ? SHARED_ALLOC_DIR_MAX_MODE : TRAVERSE_DIR_MODE);
      dirs([path.join(task, EXECUTOR_DIR)], AGENT_DIR_MODE);
    }
  }

  const plugins = path.join(dir, 'plugins');
  dirs([plugins, ...subdirs(plugins)], AGENT_DIR_MODE);
  // Plugin data dirs (CSIPLUG_PLUGIN_DATA_DIR): only the root plugin tasks reach them.
  const pluginData = path.join(dir, 'plugin-data');
  dirs([pluginData, ...subdirs(pluginData)], AGENT_DIR_MODE);

  const csi = path.join(dir, 'csi');
  dirs([csi], AGENT_DIR_MODE);
  for (const type of subdirs(csi)) dirs([type, ...subdirs(type)], AGENT_DIR_MODE);
  return changes;
}

/**
 * Takes `<data_dir>/agent.lock` whatever the state backend, so one data dir
 * has one agent: the state package's exclusive open of a SQLite file, which
 * holds across processes (a file lock that dies with its process) and within
 * one (SQLite's own bookkeeping per inode). Fails at once with
 * DataDirInUseError. Close the returned DB to release it.
 */
export function lockDataDir(dataDir: string, logger?: Logger): DB {
  const file = dataDirLockPath(dataDir);
  try {
    return DB.open(file, { logger });
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ErrTimeout') throw new DataDirInUseError(dataDir, file, err);
    throw err;
  }
}
