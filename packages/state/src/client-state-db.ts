// ClientStateDB on the bbolt-style DB: the same code over the SQLite file
// (`<data_dir>/state.db`) and over the in-memory store; one instance serves
// every narrow store (registry, allocs, volumes: their buckets in
// bolt-alloc-state.ts and bolt-volume-state.ts). Opening checks the
// file, migrates an older schema (after a backup) and refuses a newer one.
// A file that was there but held no state (0 bytes, or a database without a
// schema) is started empty like a new one, but never silently: the store
// says so (`foundEmpty`) and logs it, and the agent warns at start.
// The state holds volume secrets in clear: the file, its SQLite side files
// and the migration backup are 0600, a state dir created here is 0700.
import { type Clock, type Logger, NullLogger, RealClock, ValidationError } from '@csiplug/core';
import * as fs from 'fs';
import * as path from 'path';
import { BoltVolumeState } from './bolt-volume-state';
import type { ClientStateDB, FoundEmptyState } from './client-state';
import { DB } from './db';
import { ErrMigration, ErrSchemaVersion } from './errors';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, tightenModes } from './file-modes';
import { CLIENT_STATE_SCHEMA_VERSION, decode, encode, ensureLayout, Layout, readSchemaVersion, writeSchemaVersion } from './layout';
import { CLIENT_STATE_MIGRATIONS, type Migration, migrationPath } from './migrations';
import { backupTempPath, sqliteFiles } from './sqlite-store';

export interface ClientStateOptions {
  /**
   * The state file (e.g. `<data_dir>/state.db`); its directory is created
   * (0700) if missing. An existing directory keeps its mode: it is the
   * caller's (the agent's data dir is 0711 on purpose), and every file the
   * store keeps in it is 0600.
   */
  path?: string;
  /** Keep the state in memory instead (nothing survives dispose). */
  memory?: boolean;
  /** How long to wait for another holder of the file, in ms (default 0: fail at once). */
  timeout?: number;
  /** Skip fsync on commit: faster, loses the latest commits on power loss. */
  noSync?: boolean;
  clock?: Clock;
  logger?: Logger;
  /** The schema version to bring the store to (tests of the migration machinery). */
  schemaVersion?: number;
  /** The migration steps to use (tests of the migration machinery). */
  migrations?: readonly Migration[];
}

/** The file name of the backup written before a migration: `<file>.backup`. */
export function backupPathFor(file: string): string {
  return `${file}.backup`;
}

/** Every file a client state at `file` may keep (all 0600): the SQLite files, the migration backup and its temp file. */
export function clientStateFiles(file: string): string[] {
  const backup = backupPathFor(file);
  return [...sqliteFiles(file), backup, backupTempPath(backup)];
}

/** Opens the client state: `{ path }` for the SQLite file, `{ memory: true }` for the in-memory twin. */
export function openClientState(options: ClientStateOptions): BoltClientStateDB {
  if (!options.memory && !options.path) throw new ValidationError('openClientState: give a path, or memory: true', 'path');
  const clock = options.clock ?? new RealClock();
  const logger = options.logger ?? new NullLogger();
  let db: DB;
  /** The file as it was before this open touched it (undefined: there was none). */
  let before: fs.Stats | undefined;
  if (options.memory) {
    db = DB.openMemory({ clock });
  } else {
    const file = path.resolve(options.path!);
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: PRIVATE_DIR_MODE });
    before = fs.statSync(file, { throwIfNoEntry: false });
    db = DB.open(file, { timeout: options.timeout, noSync: options.noSync, integrityCheck: true, clock, logger });
  }
  try {
    if (!options.memory) {
      // A backup (or the temp file of one a crash interrupted) written by an
      // older release may still be readable by others.
      const backup = backupPathFor(db.path);
      tightenModes([backup, backupTempPath(backup)], PRIVATE_FILE_MODE, logger);
    }
    const target = options.schemaVersion ?? CLIENT_STATE_SCHEMA_VERSION;
    const { version, wasEmpty } = prepareSchema(db, target, options.migrations ?? CLIENT_STATE_MIGRATIONS, clock, logger, !options.memory);
    let foundEmpty: FoundEmptyState | undefined;
    if (wasEmpty && before) {
      foundEmpty = {
        file: db.path,
        bytes: before.size,
        why:
          before.size === 0
            ? `${db.path} was there but empty (0 bytes)`
            : `${db.path} was there (${before.size} bytes) but held no client state (no schema, no records)`,
      };
      logger.warn(
        'the client state file held no state: starting with an empty state; whatever an earlier agent ran or mounted is not known to this one',
        {
          file: db.path,
          bytes: before.size,
        },
      );
    }
    return new BoltClientStateDB(db, version, logger, foundEmpty, !options.memory && before === undefined);
  } catch (err) {
    db.close();
    throw err;
  }
}

/** Brings the store to `target`; `wasEmpty` when it held nothing at all (a new file, or one that lost its state). */
function prepareSchema(
  db: DB,
  target: number,
  migrations: readonly Migration[],
  clock: Clock,
  logger: Logger,
  onDisk: boolean,
): { version: number; wasEmpty: boolean } {
  const found = db.view(readSchemaVersion);
  if (found === 'empty') {
    db.update((tx) => {
      ensureLayout(tx);
      writeSchemaVersion(tx, target, clock.now());
    });
    return { version: target, wasEmpty: true };
  }
  if (typeof found === 'object') throw new ErrSchemaVersion(db.path, found.unknown, target, 'unknown');
  if (found > target) throw new ErrSchemaVersion(db.path, found, target, 'newer');
  if (found === target) return { version: target, wasEmpty: false };

  const steps = migrationPath(found, target, migrations);
  let backup: string | undefined;
  if (onDisk) {
    backup = backupPathFor(db.path);
    db.backup(backup);
    logger.info('client state backed up before migration', { file: db.path, backup, from: found, to: target });
  }
  try {
    db.update((tx) => {
      for (const step of steps) step.migrate(tx);
      ensureLayout(tx);
      writeSchemaVersion(tx, target, clock.now());
    });
  } catch (err) {
    logger.error('client state migration failed', { file: db.path, from: found, to: target, err });
    throw new ErrMigration(db.path, found, target, backup, err);
  }
  logger.info('client state migrated', { file: db.path, from: found, to: target, steps: steps.map((s) => s.description) });
  return { version: target, wasEmpty: false };
}

/**
 * The client state over one DB: the file (its path, schema version, whether
 * it was found empty or created) and the registry's document; the alloc and
 * volume buckets come from the classes it extends (bolt-alloc-state.ts,
 * bolt-volume-state.ts).
 */
export class BoltClientStateDB extends BoltVolumeState implements ClientStateDB {
  constructor(
    db: DB,
    readonly schemaVersion: number,
    logger: Logger,
    readonly foundEmpty?: FoundEmptyState,
    readonly createdNew = false,
  ) {
    super(db, logger);
  }

  get path(): string | undefined {
    return this.db.path === ':memory:' ? undefined : this.db.path;
  }

  /** The DB underneath (for tools and tests). */
  get raw(): DB {
    return this.db;
  }

  getRegistryState<T = unknown>(): T | undefined {
    return this.db.view((tx) => {
      const raw = tx.bucket(Layout.dynamicPlugins)?.get(Layout.registryState);
      return raw && decode<T>(raw, `${Layout.dynamicPlugins}/${Layout.registryState}`);
    });
  }

  putRegistryState(state: unknown): void {
    const value = encode(state);
    this.db.update((tx) => tx.createBucketIfNotExists(Layout.dynamicPlugins).put(Layout.registryState, value));
  }

  dispose(): void {
    this.db.close();
  }
}
