// Builds OCI image layouts for tests without Docker, with Debian's umoci:
// `umoci init --layout`, `umoci new`, one `umoci insert` per layer and
// `umoci config` for Entrypoint/Cmd/Env/WorkingDir/User/Labels/platform. An
// image index over several tags (a multi-platform image) is written beside
// them by hand, as `docker buildx` would push one.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { run } from './run';

const UMOCI = '/usr/bin/umoci';
const REF_NAME = 'org.opencontainers.image.ref.name';

export interface TestImageLayer {
  /** Path inside the image (relative, e.g. "etc/app.conf") → content. */
  readonly files: Readonly<Record<string, string | Uint8Array>>;
  /** Modes of some of the files (e.g. 0o755 for a program); 0644 otherwise. */
  readonly modes?: Readonly<Record<string, number>>;
}

export interface TestImageSpec {
  readonly layers: readonly TestImageLayer[];
  readonly entrypoint?: readonly string[];
  readonly cmd?: readonly string[];
  readonly env?: readonly string[];
  readonly workingDir?: string;
  readonly user?: string;
  readonly labels?: Readonly<Record<string, string>>;
  /** GOARCH; umoci's default (the build machine's) when not given. */
  readonly architecture?: string;
  readonly os?: string;
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
  if (!existsSync(join(layoutDir, 'index.json'))) {
    await mkdir(dirname(layoutDir), { recursive: true });
    await run(UMOCI, ['init', '--layout', layoutDir]);
  }
  const image = `${layoutDir}:${tag}`;
  await run(UMOCI, ['new', '--image', image]);
  const scratch = await mkdtemp(join(tmpdir(), 'images-layer-'));
  try {
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
      await run(UMOCI, ['insert', '--image', image, '--history.created_by', `test layer ${i}`, root, '/']);
    }
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  const args = ['config', '--image', image];
  for (const e of spec.entrypoint ?? []) args.push('--config.entrypoint', e);
  for (const c of spec.cmd ?? []) args.push('--config.cmd', c);
  for (const e of spec.env ?? []) args.push('--config.env', e);
  for (const [k, v] of Object.entries(spec.labels ?? {})) args.push('--config.label', `${k}=${v}`);
  if (spec.workingDir !== undefined) args.push('--config.workingdir', spec.workingDir);
  if (spec.user !== undefined) args.push('--config.user', spec.user);
  if (spec.architecture !== undefined) args.push('--architecture', spec.architecture);
  if (spec.os !== undefined) args.push('--os', spec.os);
  await run(UMOCI, args);
  return { layoutDir, tag, manifestDigest: (await findTag(layoutDir, tag)).digest };
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
