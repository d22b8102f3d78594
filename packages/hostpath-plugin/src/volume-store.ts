// Volume and snapshot metadata, persisted as one JSON file in the state dir
// and written atomically (temp file, fsync, rename) so a crash never leaves
// half a file. Each read goes to disk, so a node-mode process sees what a
// controller process sharing the state dir created. Every change goes
// through one queue (read, change, write), so concurrent changes never drop
// each other. Only the controller writes this file; where a node publishes
// a volume is kept apart, one file per node (PublishedStore), so a node
// process and a controller process never write the same file.
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { VolumeMetadataError } from './errors';

/** What a volume was created from. */
export interface ContentSourceRecord {
  type: 'snapshot' | 'volume';
  /** The snapshot id or the volume id. */
  id: string;
}

export interface VolumeRecord {
  id: string;
  name: string;
  /** Bytes, as a decimal string (int64 on the wire); the volume's quota (0 = none). */
  capacityBytes: string;
  parameters: Record<string, string>;
  createdAt: string;
  /** Set when the volume was restored from a snapshot or cloned from a volume. */
  contentSource?: ContentSourceRecord;
  /** The topology segments of the process that created it (a volume lives where it was made); absent in older records: the answering process's. */
  topology?: Record<string, string>;
}

export interface SnapshotRecord {
  id: string;
  name: string;
  sourceVolumeId: string;
  /** The source volume's capacity when the snapshot was cut: the least a volume restored from it gets. */
  sourceCapacityBytes: string;
  /** The snapshot's size as CSI reports it (bytes, decimal string): the source's capacity, the least a restore of it must get; the archive's size when the source had none. */
  sizeBytes: string;
  createdAt: string;
  readyToUse: boolean;
}

interface StoreFile {
  version: 1;
  volumes: VolumeRecord[];
  snapshots?: SnapshotRecord[];
}

interface Contents {
  volumes: VolumeRecord[];
  snapshots: SnapshotRecord[];
}

export class VolumeStore {
  readonly file: string;
  readonly volumesDir: string;
  readonly snapshotsDir: string;

  private queue: Promise<unknown> = Promise.resolve();
  private writes = 0;

  constructor(readonly stateDir: string) {
    this.file = path.join(stateDir, 'volumes.json');
    this.volumesDir = path.join(stateDir, 'volumes');
    this.snapshotsDir = path.join(stateDir, 'snapshots');
  }

  async init(): Promise<void> {
    await fs.mkdir(this.volumesDir, { recursive: true, mode: 0o700 });
    await fs.mkdir(this.snapshotsDir, { recursive: true, mode: 0o700 });
  }

  dirOf(id: string): string {
    return path.join(this.volumesDir, id);
  }

  /** Where a snapshot's archive lives. */
  archiveOf(snapshotId: string): string {
    return path.join(this.snapshotsDir, `${snapshotId}.tar`);
  }

  private async read(): Promise<Contents> {
    try {
      const parsed = JSON.parse(await fs.readFile(this.file, 'utf8')) as StoreFile;
      return { volumes: parsed.volumes ?? [], snapshots: parsed.snapshots ?? [] };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { volumes: [], snapshots: [] };
      throw new VolumeMetadataError(this.file, err);
    }
  }

  async list(): Promise<VolumeRecord[]> {
    return (await this.read()).volumes;
  }

  async get(id: string): Promise<VolumeRecord | undefined> {
    return (await this.list()).find((v) => v.id === id);
  }

  async byName(name: string): Promise<VolumeRecord | undefined> {
    return (await this.list()).find((v) => v.name === name);
  }

  put(record: VolumeRecord): Promise<void> {
    return this.mutate((c) => ({ ...c, volumes: [...c.volumes.filter((v) => v.id !== record.id), record] })).then(() => undefined);
  }

  remove(id: string): Promise<void> {
    return this.mutate((c) => ({ ...c, volumes: c.volumes.filter((v) => v.id !== id) })).then(() => undefined);
  }

  /**
   * Changes one volume's record as it is on disk now (not as the caller read
   * it earlier); resolves to the new record, or undefined when the volume is
   * gone (nothing is written then).
   */
  async update(id: string, change: (v: VolumeRecord) => VolumeRecord): Promise<VolumeRecord | undefined> {
    let updated: VolumeRecord | undefined;
    await this.mutate((c) => {
      const i = c.volumes.findIndex((v) => v.id === id);
      if (i < 0) return undefined;
      updated = change(c.volumes[i]);
      const volumes = [...c.volumes];
      volumes[i] = updated;
      return { ...c, volumes };
    });
    return updated;
  }

  async snapshots(): Promise<SnapshotRecord[]> {
    return (await this.read()).snapshots;
  }

  async snapshot(id: string): Promise<SnapshotRecord | undefined> {
    return (await this.snapshots()).find((s) => s.id === id);
  }

  async snapshotByName(name: string): Promise<SnapshotRecord | undefined> {
    return (await this.snapshots()).find((s) => s.name === name);
  }

  putSnapshot(record: SnapshotRecord): Promise<void> {
    return this.mutate((c) => ({ ...c, snapshots: [...c.snapshots.filter((s) => s.id !== record.id), record] })).then(() => undefined);
  }

  removeSnapshot(id: string): Promise<void> {
    return this.mutate((c) => ({ ...c, snapshots: c.snapshots.filter((s) => s.id !== id) })).then(() => undefined);
  }

  /**
   * Read, change, write — one change at a time: concurrent calls (e.g. many
   * CreateVolume for different names, a snapshot beside them) would
   * otherwise each read the old contents and the last write would drop the
   * others' changes. A change that returns undefined writes nothing.
   */
  private mutate(change: (contents: Contents) => Contents | undefined): Promise<boolean> {
    const next = this.queue.then(async () => {
      const changed = change(await this.read());
      if (!changed) return false;
      await this.write(changed);
      return true;
    });
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async write(contents: Contents): Promise<void> {
    const tmp = `${this.file}.${process.pid}.${++this.writes}.tmp`;
    const body =
      JSON.stringify({ version: 1, volumes: contents.volumes, snapshots: contents.snapshots } satisfies StoreFile, null, 2) + '\n';
    await writeAtomically(this.file, tmp, body);
  }
}

async function writeAtomically(file: string, tmp: string, body: string): Promise<void> {
  const fh = await fs.open(tmp, 'w', 0o600);
  try {
    await fh.writeFile(body);
    await fh.sync();
  } finally {
    await fh.close();
  }
  try {
    await fs.rename(tmp, file);
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
}

interface PublishedFile {
  version: 1;
  /** volume id → target paths where this node has published it. */
  volumes: Record<string, string[]>;
}

/**
 * Where volumes are published: one file per node,
 * <state-dir>/published/<node-id>.json, written only by that node's process
 * (NodePublishVolume / NodeUnpublishVolume), read by the controller for
 * ListVolumes' published_node_ids.
 */
export class PublishedStore {
  readonly dir: string;
  readonly file: string;
  private queue: Promise<unknown> = Promise.resolve();
  private writes = 0;

  /** `nodeId` is path-safe (the config checks it). */
  constructor(
    stateDir: string,
    readonly nodeId: string,
  ) {
    this.dir = path.join(stateDir, 'published');
    this.file = path.join(this.dir, `${nodeId}.json`);
  }

  private static async readFile(file: string): Promise<Record<string, string[]>> {
    try {
      const parsed = JSON.parse(await fs.readFile(file, 'utf8')) as PublishedFile;
      return parsed.volumes ?? {};
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
      throw new VolumeMetadataError(file, err);
    }
  }

  /** This node's targets of `volumeId`. */
  async targets(volumeId: string): Promise<string[]> {
    return (await PublishedStore.readFile(this.file))[volumeId] ?? [];
  }

  add(volumeId: string, target: string): Promise<void> {
    return this.mutate((vols) => {
      const targets = vols[volumeId] ?? [];
      if (targets.includes(target)) return false;
      vols[volumeId] = [...targets, target].sort();
      return true;
    });
  }

  remove(volumeId: string, target: string): Promise<void> {
    return this.mutate((vols) => {
      const targets = vols[volumeId];
      if (!targets?.includes(target)) return false;
      const left = targets.filter((t) => t !== target);
      if (left.length) vols[volumeId] = left;
      else delete vols[volumeId];
      return true;
    });
  }

  /** Every node's publications in the state dir: volume id → node ids (sorted). */
  async nodesByVolume(): Promise<Map<string, string[]>> {
    let names: string[];
    try {
      names = await fs.readdir(this.dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new Map();
      throw err;
    }
    const out = new Map<string, string[]>();
    for (const name of names.filter((n) => n.endsWith('.json')).sort()) {
      const node = name.slice(0, -'.json'.length);
      for (const [volumeId, targets] of Object.entries(await PublishedStore.readFile(path.join(this.dir, name)))) {
        if (!targets.length) continue;
        out.set(volumeId, [...(out.get(volumeId) ?? []), node]);
      }
    }
    return out;
  }

  private mutate(change: (volumes: Record<string, string[]>) => boolean): Promise<void> {
    const next = this.queue.then(async () => {
      const volumes = await PublishedStore.readFile(this.file);
      if (!change(volumes)) return;
      await fs.mkdir(this.dir, { recursive: true, mode: 0o700 });
      const body = JSON.stringify({ version: 1, volumes } satisfies PublishedFile, null, 2) + '\n';
      await writeAtomically(this.file, `${this.file}.${process.pid}.${++this.writes}.tmp`, body);
    });
    this.queue = next.catch(() => undefined);
    return next;
  }
}
