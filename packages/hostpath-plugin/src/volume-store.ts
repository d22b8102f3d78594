// Volume metadata, persisted as one JSON file in the state dir and written
// atomically (temp file, fsync, rename) so a crash never leaves half a file.
// Each read goes to disk, so a node-mode process sees what a controller
// process sharing the state dir created.
import * as fs from 'node:fs/promises';
import * as path from 'node:path';

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
      throw new Error(`cannot read volume metadata ${this.file}: ${(err as Error).message}`);
    }
  }

  async get(id: string): Promise<VolumeRecord | undefined> {
    return (await this.list()).find((v) => v.id === id);
  }

  async byName(name: string): Promise<VolumeRecord | undefined> {
    return (await this.list()).find((v) => v.name === name);
  }

  async put(record: VolumeRecord): Promise<void> {
    const volumes = (await this.list()).filter((v) => v.id !== record.id);
    volumes.push(record);
    await this.write(volumes);
  }

  async remove(id: string): Promise<void> {
    await this.write((await this.list()).filter((v) => v.id !== id));
  }

  private async write(volumes: VolumeRecord[]): Promise<void> {
    const tmp = `${this.file}.${process.pid}.tmp`;
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
