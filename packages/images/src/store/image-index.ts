// Which reference points to which image in the store: for each canonical
// reference, the manifest digest it resolved to (and the index digest it
// came through), the config digest and the layer descriptors. Kept in one
// JSON file in the store dir, replaced atomically (temp + fsync + rename +
// fsync of the dir), so a restart reads the last complete version. A file
// that is not what this code wrote is refused with an error naming it;
// nothing is deleted (blobs stay where they are).
import { randomBytes } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import { open, readFile, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { isDigest } from '../digest';
import { ImageIndexCorruptError, ImageStoreError, ImageStoreFullError } from '../errors';
import type { LayerDescriptor } from '../manifest';
import { syncDir } from './blob-store';

export const IMAGE_INDEX_FILE = 'images.json';
const VERSION = 1;

export interface ImageRecord {
  /** The canonical reference, e.g. `r.io/team/app:1.2`. */
  readonly reference: string;
  /** The digest of the platform's image manifest. */
  readonly manifestDigest: string;
  readonly manifestMediaType: string;
  /** The digest the reference resolves to in the registry (the index's when it is one; else the manifest's). */
  readonly repoDigest: string;
  readonly configDigest: string;
  readonly layers: readonly LayerDescriptor[];
  /** Milliseconds since the epoch. */
  readonly pulledAt: number;
}

interface IndexFile {
  version: number;
  images: Record<string, ImageRecord>;
}

export class ImageIndex {
  /** Writes run one at a time, each over the last one's result. */
  private writes: Promise<void> = Promise.resolve();

  private constructor(
    readonly file: string,
    private images: Map<string, ImageRecord>,
  ) {}

  /** Reads the index in `dir` (empty when there is none yet). */
  static async open(dir: string): Promise<ImageIndex> {
    const file = join(dir, IMAGE_INDEX_FILE);
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new ImageIndex(file, new Map());
      throw new ImageStoreError(file, 'read', err);
    }
    return new ImageIndex(file, parseIndexFile(file, text));
  }

  get(reference: string): ImageRecord | undefined {
    return this.images.get(reference);
  }

  /** The first record whose manifest or repo digest is `digest`. */
  findByDigest(digest: string): ImageRecord | undefined {
    for (const r of this.images.values()) if (r.manifestDigest === digest || r.repoDigest === digest) return r;
    return undefined;
  }

  list(): ImageRecord[] {
    return [...this.images.values()];
  }

  put(record: ImageRecord): Promise<void> {
    return this.change((next) => next.set(record.reference, record));
  }

  delete(reference: string): Promise<void> {
    return this.change((next) => next.delete(reference));
  }

  private change(edit: (next: Map<string, ImageRecord>) => void): Promise<void> {
    const run = this.writes.then(async () => {
      const next = new Map(this.images);
      edit(next);
      await this.persist(next);
      this.images = next;
    });
    this.writes = run.catch(() => undefined);
    return run;
  }

  private async persist(images: Map<string, ImageRecord>): Promise<void> {
    const doc: IndexFile = { version: VERSION, images: Object.fromEntries(images) };
    const temp = `${this.file}.${randomBytes(6).toString('hex')}.tmp`;
    const dir = join(this.file, '..');
    try {
      const fh = await open(temp, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL, 0o600);
      try {
        await fh.writeFile(`${JSON.stringify(doc, null, 2)}\n`);
        await fh.sync();
      } finally {
        await fh.close();
      }
      await rename(temp, this.file);
      await syncDir(dir);
    } catch (err) {
      await unlink(temp).catch(() => undefined);
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOSPC' || code === 'EDQUOT') throw new ImageStoreFullError('(the image index)', dir, { cause: err });
      throw new ImageStoreError(this.file, 'write', err);
    }
  }
}

function parseIndexFile(file: string, text: string): Map<string, ImageRecord> {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new ImageIndexCorruptError(file, `not JSON: ${(err as Error).message}`);
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) throw new ImageIndexCorruptError(file, 'not a JSON object');
  const { version, images } = doc as Partial<IndexFile>;
  if (version !== VERSION)
    throw new ImageIndexCorruptError(file, `version ${JSON.stringify(version)}, this csiplug reads version ${VERSION}`);
  if (images === null || typeof images !== 'object' || Array.isArray(images)) throw new ImageIndexCorruptError(file, 'no "images" object');
  const out = new Map<string, ImageRecord>();
  for (const [reference, record] of Object.entries(images)) {
    const r = record as Partial<ImageRecord> | null;
    const ok =
      r !== null &&
      typeof r === 'object' &&
      r.reference === reference &&
      typeof r.manifestDigest === 'string' &&
      isDigest(r.manifestDigest) &&
      typeof r.repoDigest === 'string' &&
      isDigest(r.repoDigest) &&
      typeof r.configDigest === 'string' &&
      isDigest(r.configDigest) &&
      typeof r.manifestMediaType === 'string' &&
      typeof r.pulledAt === 'number' &&
      Array.isArray(r.layers) &&
      r.layers.every(
        (l) =>
          l !== null &&
          typeof l === 'object' &&
          typeof l.digest === 'string' &&
          isDigest(l.digest) &&
          typeof l.size === 'number' &&
          typeof l.mediaType === 'string',
      );
    if (!ok) throw new ImageIndexCorruptError(file, `the entry for ${JSON.stringify(reference)} is malformed`);
    out.set(reference, r as ImageRecord);
  }
  return out;
}
