// ClientStateDB on the bbolt-style DB: the same code over the SQLite file
// (`<data_dir>/state.db`) and over the in-memory store; one instance serves
// every narrow store (registry, allocs, volumes). Opening checks the
// file, migrates an older schema (after a backup) and refuses a newer one.
// A file that was there but held no state (0 bytes, or a database without a
// schema) is started empty like a new one, but never silently: the store
// says so (`foundEmpty`) and logs it, and the agent warns at start.
// The state holds volume secrets in clear: the file, its SQLite side files
// and the migration backup are 0600, a state dir created here is 0700.
import { type Clock, type Logger, NullLogger, RealClock, ValidationError } from '@csiplug/core';
import * as fs from 'fs';
import * as path from 'path';
import type { Bucket } from './bucket';
import type { ClientStateDB, FoundEmptyState } from './client-state';
import type { DecodeFailure } from './decode-failure';
import type { SavedTaskRecord } from './alloc-state-store';
import { DB } from './db';
import { ErrMigration, ErrSchemaVersion } from './errors';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, tightenModes } from './file-modes';
import { CLIENT_STATE_SCHEMA_VERSION, decode, encode, ensureLayout, Layout, readSchemaVersion, writeSchemaVersion } from './layout';
import type { PendingUnmountRecord, VolumeMountStub, VolumeUsageRecord } from './legacy-volume-records';
import { CLIENT_STATE_MIGRATIONS, type Migration, migrationPath } from './migrations';
import { backupTempPath, sqliteFiles } from './sqlite-store';
import type { Tx } from './tx';

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
      logger.warn('the client state file held no state: starting with an empty state; whatever an earlier agent ran or mounted is not known to this one', {
        file: db.path,
        bytes: before.size,
      });
    }
    return new BoltClientStateDB(db, version, logger, foundEmpty, !options.memory && before === undefined);
  } catch (err) {
    db.close();
    throw err;
  }
}

/** Brings the store to `target`; `wasEmpty` when it held nothing at all (a new file, or one that lost its state). */
function prepareSchema(db: DB, target: number, migrations: readonly Migration[], clock: Clock, logger: Logger, onDisk: boolean): { version: number; wasEmpty: boolean } {
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

export class BoltClientStateDB implements ClientStateDB {
  constructor(
    private readonly db: DB,
    readonly schemaVersion: number,
    private readonly logger: Logger,
    readonly foundEmpty?: FoundEmptyState,
    readonly createdNew = false,
  ) {}

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

  putAllocation(allocId: string, alloc: unknown): void {
    const value = encode(alloc);
    this.db.update((tx) => this.allocBucket(tx, allocId).put(Layout.allocKey, value));
  }

  putAllocations(entries: readonly { allocId: string; alloc: unknown }[]): void {
    const values = entries.map(({ allocId, alloc }) => ({ allocId, value: encode(alloc) }));
    this.db.update((tx) => {
      for (const { allocId, value } of values) this.allocBucket(tx, allocId).put(Layout.allocKey, value);
    });
  }

  getAllocation<T = unknown>(allocId: string): T | undefined {
    return this.readAllocKey<T>(allocId, Layout.allocKey);
  }

  listAllocations<T = unknown>(): { allocs: { allocId: string; alloc: T }[]; failures: DecodeFailure[] } {
    const { allocs, failures } = this.scanAllocations<T>(false);
    return { allocs: allocs.map(({ allocId, alloc }) => ({ allocId, alloc })), failures };
  }

  listAllocationsWithTasks<T = unknown>(): { allocs: { allocId: string; alloc: T; tasks: Record<string, SavedTaskRecord> }[]; failures: DecodeFailure[] } {
    return this.scanAllocations<T>(true);
  }

  /** Every alloc record in one read, with its tasks' handles and states when asked. */
  private scanAllocations<T>(withTasks: boolean): { allocs: { allocId: string; alloc: T; tasks: Record<string, SavedTaskRecord> }[]; failures: DecodeFailure[] } {
    return this.db.view((tx) => {
      const allocs: { allocId: string; alloc: T; tasks: Record<string, SavedTaskRecord> }[] = [];
      const failures: DecodeFailure[] = [];
      const bucket = tx.bucket(Layout.allocations);
      bucket?.forEach((key, value) => {
        const allocId = key.toString('utf8');
        if (value !== null) {
          failures.push({ key: allocId, error: `${Layout.allocations}/${allocId} is a bare value, not an alloc bucket` });
          return;
        }
        const allocBucket = bucket.bucket(key)!;
        const raw = allocBucket.get(Layout.allocKey);
        if (!raw) {
          failures.push({ key: allocId, error: `${Layout.allocations}/${allocId} has no ${Layout.allocKey} record` });
          return;
        }
        let alloc: T;
        try {
          alloc = decode<T>(raw, `${Layout.allocations}/${allocId}/${Layout.allocKey}`);
        } catch (err) {
          failures.push({ key: allocId, error: (err as Error).message });
          return;
        }
        // No prototype: a task may be named "__proto__" (or "state", "error").
        const tasks: Record<string, SavedTaskRecord> = Object.create(null) as Record<string, SavedTaskRecord>;
        if (withTasks) {
          try {
            allocBucket.forEach((sub, subValue) => {
              const name = sub.toString('utf8');
              if (subValue !== null || !name.startsWith(Layout.taskPrefix)) return;
              const taskBucket = allocBucket.bucket(sub)!;
              const where = `${Layout.allocations}/${allocId}/${name}`;
              const saved: SavedTaskRecord = {};
              try {
                const handle = taskBucket.get(Layout.taskHandle);
                if (handle) saved.handle = decode(handle, `${where}/${Layout.taskHandle}`);
                const state = taskBucket.get(Layout.taskState);
                if (state) saved.state = decode(state, `${where}/${Layout.taskState}`);
              } catch (err) {
                tasks[name.slice(Layout.taskPrefix.length)] = { error: err as Error };
                return;
              }
              tasks[name.slice(Layout.taskPrefix.length)] = saved;
            });
          } catch (err) {
            // The alloc's tasks cannot be read at all: the alloc is left untouched, the others restored.
            failures.push({ key: allocId, error: `cannot read the tasks of ${Layout.allocations}/${allocId}: ${(err as Error).message}` });
            return;
          }
        }
        allocs.push({ allocId, alloc, tasks });
      });
      for (const f of failures) this.logger.warn('client state: alloc record skipped', { allocId: f.key, error: f.error });
      return { allocs, failures };
    });
  }

  listAllocationIds(): string[] {
    return this.db.view((tx) => {
      const ids: string[] = [];
      tx.bucket(Layout.allocations)?.forEach((key) => void ids.push(key.toString('utf8')));
      return ids;
    });
  }

  deleteAllocation(allocId: string): void {
    this.db.update((tx) => {
      const allocs = tx.bucket(Layout.allocations);
      if (allocs?.bucket(allocId)) allocs.deleteBucket(allocId);
    });
  }

  putVolumeStubs(allocId: string, stubs: Readonly<Record<string, unknown>>): void {
    const value = encode(stubs);
    this.db.update((tx) => this.allocBucket(tx, allocId).put(Layout.volumesKey, value));
  }

  getVolumeStubs<T = Record<string, VolumeMountStub>>(allocId: string): T | undefined {
    return this.readAllocKey<T>(allocId, Layout.volumesKey);
  }

  putTaskHandle(allocId: string, task: string, handle: unknown): void {
    this.putTaskKey(allocId, task, Layout.taskHandle, handle);
  }

  getTaskHandle<T = unknown>(allocId: string, task: string): T | undefined {
    return this.readTaskKey<T>(allocId, task, Layout.taskHandle);
  }

  putTaskState(allocId: string, task: string, state: unknown): void {
    this.putTaskKey(allocId, task, Layout.taskState, state);
  }

  putTaskStates(entries: readonly { allocId: string; task: string; state: unknown }[]): void {
    const values = entries.map(({ allocId, task, state }) => ({ allocId, task, raw: encode(state) }));
    this.db.update((tx) => {
      for (const { allocId, task, raw } of values) this.allocBucket(tx, allocId).createBucketIfNotExists(Layout.taskPrefix + task).put(Layout.taskState, raw);
    });
  }

  getTaskState<T = unknown>(allocId: string, task: string): T | undefined {
    return this.readTaskKey<T>(allocId, task, Layout.taskState);
  }

  deleteTask(allocId: string, task: string): void {
    this.db.update((tx) => {
      const alloc = tx.bucket(Layout.allocations)?.bucket(allocId);
      if (alloc?.bucket(Layout.taskPrefix + task)) alloc.deleteBucket(Layout.taskPrefix + task);
    });
  }

  putVolumeUsage(pluginId: string, volumeId: string, users: readonly unknown[]): void {
    const value = users.length ? encode(users) : undefined;
    this.db.update((tx) => {
      const usage = this.csiBucket(tx, Layout.usage);
      if (value) {
        usage.createBucketIfNotExists(pluginId).put(volumeId, value);
        return;
      }
      const plugin = usage.bucket(pluginId);
      if (!plugin) return;
      plugin.delete(volumeId);
      if (!plugin.cursor().first()) usage.deleteBucket(pluginId);
    });
  }

  getVolumeUsage<U = VolumeUsageRecord>(pluginId: string, volumeId: string): U[] {
    return this.db.view((tx) => {
      const raw = tx.bucket(Layout.csi)?.bucket(Layout.usage)?.bucket(pluginId)?.get(volumeId);
      return raw ? decode<U[]>(raw, `csi/usage/${pluginId}/${volumeId}`) : [];
    });
  }

  listVolumeUsage<U = VolumeUsageRecord>(): { pluginId: string; volumeId: string; users: U[] }[] {
    return this.db.view((tx) => {
      const out: { pluginId: string; volumeId: string; users: U[] }[] = [];
      const usage = tx.bucket(Layout.csi)?.bucket(Layout.usage);
      usage?.forEachBucket((plugin) => {
        const pluginId = plugin.toString('utf8');
        usage.bucket(plugin)!.forEach((volume, raw) => {
          const volumeId = volume.toString('utf8');
          const users = this.decodeOrSkip<U[]>(raw, `csi/usage/${pluginId}/${volumeId}`);
          if (users) out.push({ pluginId, volumeId, users });
        });
      });
      return out;
    });
  }

  putPendingUnmount<T extends { readonly id: string }>(record: T): void {
    const value = encode(record);
    this.db.update((tx) => this.csiBucket(tx, Layout.pending).put(record.id, value));
  }

  deletePendingUnmount(id: string): void {
    this.db.update((tx) => this.csiBucket(tx, Layout.pending).delete(id));
  }

  listPendingUnmounts<T = PendingUnmountRecord>(): T[] {
    return this.db.view((tx) => {
      const out: T[] = [];
      tx.bucket(Layout.csi)
        ?.bucket(Layout.pending)
        ?.forEach((key, raw) => {
          const record = this.decodeOrSkip<T>(raw, `csi/pending/${key.toString('utf8')}`);
          if (record) out.push(record);
        });
      return out;
    });
  }

  putVolume(volumeId: string, volume: unknown): void {
    const value = encode(volume);
    this.db.update((tx) => tx.createBucketIfNotExists(Layout.volumeCatalog).put(volumeId, value));
  }

  getVolume<T = unknown>(volumeId: string): T | undefined {
    return this.db.view((tx) => {
      const raw = tx.bucket(Layout.volumeCatalog)?.get(volumeId);
      return raw && decode<T>(raw, `${Layout.volumeCatalog}/${volumeId}`);
    });
  }

  deleteVolume(volumeId: string): void {
    this.db.update((tx) => tx.bucket(Layout.volumeCatalog)?.delete(volumeId));
  }

  listVolumes<T = unknown>(): T[] {
    return this.db.view((tx) => {
      const out: T[] = [];
      tx.bucket(Layout.volumeCatalog)?.forEach((key, raw) => {
        const volume = this.decodeOrSkip<T>(raw, `${Layout.volumeCatalog}/${key.toString('utf8')}`);
        if (volume !== undefined) out.push(volume);
      });
      return out;
    });
  }

  putVolumeMount(key: string, record: unknown): void {
    const value = encode(record);
    this.db.update((tx) => this.csiBucket(tx, Layout.mounts).put(key, value));
  }

  getVolumeMount<T = unknown>(key: string): T | undefined {
    return this.db.view((tx) => {
      const raw = tx.bucket(Layout.csi)?.bucket(Layout.mounts)?.get(key);
      return raw && decode<T>(raw, `${Layout.csi}/${Layout.mounts}/${key}`);
    });
  }

  deleteVolumeMount(key: string): void {
    this.db.update((tx) => tx.bucket(Layout.csi)?.bucket(Layout.mounts)?.delete(key));
  }

  listVolumeMounts<T = unknown>(): { records: { key: string; record: T }[]; failures: DecodeFailure[] } {
    return this.listCsiRecords<T>(Layout.mounts, 'volume mount record');
  }

  putVolumeOp(volumeId: string, intent: unknown): void {
    const value = encode(intent);
    this.db.update((tx) => this.csiBucket(tx, Layout.volumeOps).put(volumeId, value));
  }

  getVolumeOp<T = unknown>(volumeId: string): T | undefined {
    return this.db.view((tx) => {
      const raw = tx.bucket(Layout.csi)?.bucket(Layout.volumeOps)?.get(volumeId);
      return raw && decode<T>(raw, `${Layout.csi}/${Layout.volumeOps}/${volumeId}`);
    });
  }

  deleteVolumeOp(volumeId: string): void {
    this.db.update((tx) => tx.bucket(Layout.csi)?.bucket(Layout.volumeOps)?.delete(volumeId));
  }

  listVolumeOps<T = unknown>(): { records: { key: string; record: T }[]; failures: DecodeFailure[] } {
    return this.listCsiRecords<T>(Layout.volumeOps, 'volume operation intent');
  }

  /** Every record of csi/<bucket>, in key order; one that cannot be decoded is a failure (logged), not dropped. */
  private listCsiRecords<T>(bucket: string, what: string): { records: { key: string; record: T }[]; failures: DecodeFailure[] } {
    return this.db.view((tx) => {
      const records: { key: string; record: T }[] = [];
      const failures: DecodeFailure[] = [];
      tx.bucket(Layout.csi)
        ?.bucket(bucket)
        ?.forEach((k, raw) => {
          const key = k.toString('utf8');
          const where = `${Layout.csi}/${bucket}/${key}`;
          if (raw === null) {
            failures.push({ key, error: `${where} is a nested bucket, not a ${what}` });
            return;
          }
          try {
            records.push({ key, record: decode<T>(raw, where) });
          } catch (err) {
            failures.push({ key, error: (err as Error).message });
          }
        });
      for (const f of failures) this.logger.warn(`client state: ${what} skipped`, { key: f.key, error: f.error });
      return { records, failures };
    });
  }

  dispose(): void {
    this.db.close();
  }

  private allocBucket(tx: Tx, allocId: string): Bucket {
    return tx.createBucketIfNotExists(Layout.allocations).createBucketIfNotExists(allocId);
  }

  private csiBucket(tx: Tx, name: string): Bucket {
    return tx.createBucketIfNotExists(Layout.csi).createBucketIfNotExists(name);
  }

  private readAllocKey<T>(allocId: string, key: string): T | undefined {
    return this.db.view((tx) => {
      const raw = tx.bucket(Layout.allocations)?.bucket(allocId)?.get(key);
      return raw && decode<T>(raw, `${Layout.allocations}/${allocId}/${key}`);
    });
  }

  private putTaskKey(allocId: string, task: string, key: string, value: unknown): void {
    const raw = encode(value);
    this.db.update((tx) => this.allocBucket(tx, allocId).createBucketIfNotExists(Layout.taskPrefix + task).put(key, raw));
  }

  private readTaskKey<T>(allocId: string, task: string, key: string): T | undefined {
    return this.db.view((tx) => {
      const raw = tx.bucket(Layout.allocations)?.bucket(allocId)?.bucket(Layout.taskPrefix + task)?.get(key);
      return raw && decode<T>(raw, `${Layout.allocations}/${allocId}/${Layout.taskPrefix}${task}/${key}`);
    });
  }

  /** Lists skip what they cannot decode, and say so in the log. */
  private decodeOrSkip<T>(raw: Buffer | null, where: string): T | undefined {
    if (raw === null) {
      this.logger.warn('client state: unexpected nested bucket skipped', { where });
      return undefined;
    }
    try {
      return decode<T>(raw, where);
    } catch (err) {
      this.logger.warn('client state: undecodable record skipped', { where, err });
      return undefined;
    }
  }
}
