// Builds OCI image layouts without Docker, with Debian's umoci:
// `umoci init --layout`, `umoci new`, one `umoci insert` per layer and
// `umoci config` for Entrypoint/Cmd/Env/WorkingDir/User/Labels/platform. An
// image index over several tags (a multi-platform image) is written beside
// them by hand, as `docker buildx` would push one. Tests give layers as files
// in memory (buildTestImage); a real image build (the hostpath plugin's,
// `npm run image:hostpath`) gives staged directories (buildImageLayout).
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { clampTimes } from './host-files';
import { run } from './run';

const UMOCI = '/usr/bin/umoci';
const REF_NAME = 'org.opencontainers.image.ref.name';

export interface TestImageLayer {
  /** Path inside the image (relative, e.g. "etc/app.conf") → content. */
  readonly files: Readonly<Record<string, string | Uint8Array>>;
  /** Modes of some of the files (e.g. 0o755 for a program); 0644 otherwise. */
  readonly modes?: Readonly<Record<string, number>>;
}

/** A staged directory inserted at / as one layer, owners, modes, times and symlinks as they are. */
export interface ImageLayoutLayer {
  readonly dir: string;
  /** The layer's history entry (`created_by`). */
  readonly createdBy: string;
}

/** The image config umoci writes. */
export interface ImageLayoutConfig {
  readonly entrypoint?: readonly string[];
  readonly cmd?: readonly string[];
  readonly env?: readonly string[];
  readonly workingDir?: string;
  readonly user?: string;
  readonly labels?: Readonly<Record<string, string>>;
  /** GOARCH; umoci's default (the build machine's) when not given. */
  readonly architecture?: string;
  readonly os?: string;
  /**
   * RFC 3339 time for the config's `created` and every history entry; now
   * when not given. A fixed one makes the config (and so the manifest)
   * digest depend only on the content.
   */
  readonly created?: string;
}

export interface TestImageSpec extends ImageLayoutConfig {
  readonly layers: readonly TestImageLayer[];
}

export interface TestImage {
  readonly layoutDir: string;
  readonly tag: string;
  readonly manifestDigest: string;
}

interface LayoutIndex {
  schemaVersion: number;
  mediaType?: string;
  manifests: { mediaType: string; digest: string; size: number; annotations?: Record<string, string>; platform?: unknown }[];
}

/** Builds `tag` in the OCI layout `layoutDir` (created when missing) with the given layers and config. */
export async function buildTestImage(layoutDir: string, tag: string, spec: TestImageSpec): Promise<TestImage> {
  const scratch = await mkdtemp(join(tmpdir(), 'images-layer-'));
  try {
    const layers: ImageLayoutLayer[] = [];
    for (const [i, layer] of spec.layers.entries()) {
      const root = join(scratch, `layer-${i}`);
      await mkdir(root, { recursive: true });
      for (const [path, content] of Object.entries(layer.files)) {
        if (path.startsWith('/') || path.split('/').includes('..'))
          throw new Error(`test image file path ${path} must be relative and inside the image`);
        await mkdir(dirname(join(root, path)), { recursive: true });
        await writeFile(join(root, path), content, { mode: layer.modes?.[path] ?? 0o644 });
        if (layer.modes?.[path] !== undefined) await chmod(join(root, path), layer.modes[path]!);
      }
      // Content, not the moment it was written, makes the layer: two images given one layer share it (same digest).
      await clampTimes(root, spec.created !== undefined ? Math.floor(Date.parse(spec.created) / 1000) : 0);
      layers.push({ dir: root, createdBy: `test layer ${i}` });
    }
    return await buildImageLayout(layoutDir, tag, layers, spec);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/**
 * Builds `tag` in the OCI layout `layoutDir` (created when missing; a tag
 * already there is replaced) from staged directories, one layer each, in
 * order, and the image config.
 */
export async function buildImageLayout(
  layoutDir: string,
  tag: string,
  layers: readonly ImageLayoutLayer[],
  config: ImageLayoutConfig,
): Promise<TestImage> {
  if (!existsSync(join(layoutDir, 'index.json'))) {
    await mkdir(dirname(layoutDir), { recursive: true });
    await run(UMOCI, ['init', '--layout', layoutDir]);
  }
  const image = `${layoutDir}:${tag}`;
  const created = config.created !== undefined ? ['--history.created', config.created] : [];
  await run(UMOCI, ['new', '--image', image]);
  for (const layer of layers)
    await run(UMOCI, ['insert', '--image', image, '--history.created_by', layer.createdBy, ...created, layer.dir, '/']);
  const args = ['config', '--image', image, ...created];
  if (config.created !== undefined) args.push('--created', config.created);
  for (const e of config.entrypoint ?? []) args.push('--config.entrypoint', e);
  for (const c of config.cmd ?? []) args.push('--config.cmd', c);
  for (const e of config.env ?? []) args.push('--config.env', e);
  for (const [k, v] of Object.entries(config.labels ?? {})) args.push('--config.label', `${k}=${v}`);
  if (config.workingDir !== undefined) args.push('--config.workingdir', config.workingDir);
  if (config.user !== undefined) args.push('--config.user', config.user);
  if (config.architecture !== undefined) args.push('--architecture', config.architecture);
  if (config.os !== undefined) args.push('--os', config.os);
  await run(UMOCI, args);
  return { layoutDir, tag, manifestDigest: (await findTag(layoutDir, tag)).digest };
}

/** Adds `newTag` for the image `tag` names in the layout (`umoci tag`). */
export async function tagImageLayout(layoutDir: string, tag: string, newTag: string): Promise<TestImage> {
  await run(UMOCI, ['tag', '--image', `${layoutDir}:${tag}`, newTag]);
  return { layoutDir, tag: newTag, manifestDigest: (await findTag(layoutDir, newTag)).digest };
}

/** Removes the blobs no tag of the layout reaches any more (`umoci gc`), after a rebuild replaced a tag. */
export async function collectLayoutGarbage(layoutDir: string): Promise<void> {
  await run(UMOCI, ['gc', '--layout', layoutDir]);
}

/**
 * Writes an OCI image index under `tag` over images already in the layout
 * (each a tag, with the platform the index claims for it).
 */
export async function buildTestImageIndex(
  layoutDir: string,
  tag: string,
  entries: readonly { tag: string; platform: { os: string; architecture: string; variant?: string } }[],
): Promise<TestImage> {
  const manifests = [];
  for (const e of entries) {
    const d = await findTag(layoutDir, e.tag);
    manifests.push({ mediaType: d.mediaType, digest: d.digest, size: d.size, platform: e.platform });
  }
  const bytes = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.index.v1+json', manifests }));
  const hex = createHash('sha256').update(bytes).digest('hex');
  await writeFile(join(layoutDir, 'blobs', 'sha256', hex), bytes);
  const index = await readLayoutIndex(layoutDir);
  index.manifests = index.manifests.filter((m) => m.annotations?.[REF_NAME] !== tag);
  index.manifests.push({
    mediaType: 'application/vnd.oci.image.index.v1+json',
    digest: `sha256:${hex}`,
    size: bytes.length,
    annotations: { [REF_NAME]: tag },
  });
  await writeFile(join(layoutDir, 'index.json'), JSON.stringify(index));
  return { layoutDir, tag, manifestDigest: `sha256:${hex}` };
}

async function readLayoutIndex(layoutDir: string): Promise<LayoutIndex> {
  return JSON.parse(await readFile(join(layoutDir, 'index.json'), 'utf8')) as LayoutIndex;
}

async function findTag(layoutDir: string, tag: string): Promise<LayoutIndex['manifests'][number]> {
  const found = (await readLayoutIndex(layoutDir)).manifests.find((m) => m.annotations?.[REF_NAME] === tag);
  if (!found) throw new Error(`tag ${tag} is not in the OCI layout ${layoutDir}`);
  return found;
}
