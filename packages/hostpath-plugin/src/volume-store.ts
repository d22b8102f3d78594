// Volume metadata, persisted as one JSON file in the state dir and written
// atomically (temp file, fsync, rename) so a crash never leaves half a file.
// Each read goes to disk, so a node-mode process sees what a controller
// process sharing the state dir created.
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { VolumeMetadataError } from './errors';

export interface VolumeRecord {
  id: string;
  name: string;
  /** Bytes, as a decimal string (int64 on the wire). */
  capacityBytes: string;
  parameters: Record<string, string>;
  createdAt: string;
}

interface StoreFile {
  version: 1;
  volumes: VolumeRecord[];
}

export class VolumeStore {
  readonly file: string;
  readonly volumesDir: string;

  private queue: Promise<unknown> = Promise.resolve();
  private writes = 0;

  constructor(readonly stateDir: string) {
    this.file = path.join(stateDir, 'volumes.json');
    this.volumesDir = path.join(stateDir, 'volumes');
  }

  async init(): Promise<void> {
    await fs.mkdir(this.volumesDir, { recursive: true, mode: 0o700 });
  }

  dirOf(id: string): string {
    return path.join(this.volumesDir, id);
  }

  async list(): Promise<VolumeRecord[]> {
    try {
      const parsed = JSON.parse(await fs.readFile(this.file, 'utf8')) as StoreFile;
      return parsed.volumes ?? [];
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw new VolumeMetadataError(this.file, err);
    }
  }

  async get(id: string): Promise<VolumeRecord | undefined> {
    return (await this.list()).find((v) => v.id === id);
  }

  async byName(name: string): Promise<VolumeRecord | undefined> {
    return (await this.list()).find((v) => v.name === name);
  }

  put(record: VolumeRecord): Promise<void> {
    return this.mutate((volumes) => [...volumes.filter((v) => v.id !== record.id), record]);
  }

  remove(id: string): Promise<void> {
    return this.mutate((volumes) => volumes.filter((v) => v.id !== id));
  }

  /**
   * Read, change, write — one change at a time: concurrent calls (e.g. many
   * CreateVolume for different names) would otherwise each read the old
   * list and the last write would drop the others' volumes.
   */
  private mutate(change: (volumes: VolumeRecord[]) => VolumeRecord[]): Promise<void> {
    const next = this.queue.then(async () => this.write(change(await this.list())));
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async write(volumes: VolumeRecord[]): Promise<void> {
    const tmp = `${this.file}.${process.pid}.${++this.writes}.tmp`;
    const body = JSON.stringify({ version: 1, volumes } satisfies StoreFile, null, 2) + '\n';
    const fh = await fs.open(tmp, 'w', 0o600);
    try {
      await fh.writeFile(body);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await fs.rename(tmp, this.file);
  }
}
