// The hostpath plugin's OCI image, built with Debian's umoci (no Docker
// daemon): `npm run image:hostpath` runs cli.ts, which calls
// buildHostpathImage.
//
// Two layers, so the first is shared by every image built this way:
//   1. base: the node binary running this build (process.execPath) with the
//      shared libraries ldd lists for it and the dynamic loader, at their
//      host paths; a minimal /etc/passwd, /etc/group and /etc/nsswitch.conf
//      (root, nobody); /tmp and /run.
//   2. plugin: @csiplug/hostpath-plugin and its production dependency
//      closure under /opt/csiplug/node_modules (package-closure.ts); the
//      programs the plugin runs (mount and umount in mounter.ts, tar in
//      data.ts) with the libraries of theirs the base lacks.
// Every entry's times are set to one epoch (SOURCE_DATE_EPOCH, else 0) and
// so are the config's `created` and history times: the same inputs give the
// same layer, config and manifest digests (the test checks it).
import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import {
  buildImageLayout,
  clampTimes,
  collectLayoutGarbage,
  copyHostPath,
  copyProgram,
  sharedLibraries,
  tagImageLayout,
  whichProgram,
} from '@csiplug/images/testing';
import { ImageBuildError } from './errors';
import { copyClosure, productionClosure, readManifest } from './package-closure';

export const PLUGIN_PACKAGE = '@csiplug/hostpath-plugin';
/** The plugin's bin, as its package.json names it. */
export const PLUGIN_BIN = 'csiplug-hostpath';
/** Where the app's node_modules tree goes in the image. */
export const APP_ROOT = '/opt/csiplug';
/** The programs the plugin runs by name (mounter.ts: mount, umount; data.ts: tar). */
export const PLUGIN_PROGRAMS = ['mount', 'umount', 'tar'] as const;
export const IMAGE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

const PASSWD = 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n';
const GROUP = 'root:x:0:\nnogroup:x:65534:\n';
const NSSWITCH = 'passwd: files\ngroup: files\nhosts: files dns\n';

export interface HostpathImageOptions {
  /** The OCI layout to write; created when missing, an existing layout gets the tags replaced. */
  readonly out: string;
  /** The repository root: its node_modules holds the workspace links. */
  readonly repoRoot: string;
  /** Seconds since 1970 for every time in the image (SOURCE_DATE_EPOCH); 0 when not given. */
  readonly epochSeconds?: number;
  /** The node binary to put in the image; the one running this build when not given. */
  readonly node?: string;
}

export interface ImageLayerSummary {
  readonly digest: string;
  readonly size: number;
  readonly createdBy: string;
}

export interface BuiltImage {
  readonly layoutDir: string;
  /** The package version, then `latest`. */
  readonly tags: readonly string[];
  readonly manifestDigest: string;
  /** Bytes of manifest, config and (compressed) layers: what a registry stores. */
  readonly size: number;
  readonly layers: readonly ImageLayerSummary[];
  readonly entrypoint: readonly string[];
}

/** The repository root above `from`: the nearest directory whose node_modules links the plugin package. */
export async function findRepoRoot(from: string): Promise<string> {
  for (let dir = path.resolve(from); ; dir = path.dirname(dir)) {
    if (await fs.stat(path.join(dir, 'node_modules', PLUGIN_PACKAGE, 'package.json')).catch(() => undefined)) return dir;
    if (path.dirname(dir) === dir)
      throw new ImageBuildError(`no node_modules/${PLUGIN_PACKAGE} above ${from}; run npm ci at the repository root`);
  }
}

async function writeStagedFile(stage: string, rel: string, content: string, mode: number): Promise<void> {
  const file = path.join(stage, rel);
  await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o755 });
  await fs.writeFile(file, content, { mode });
  await fs.chmod(file, mode);
}

async function makeStage(scratch: string, name: string): Promise<string> {
  const stage = path.join(scratch, name);
  await fs.mkdir(stage);
  // The stage is the image's / in the layer: 0755, not mkdtemp's 0700.
  await fs.chmod(stage, 0o755);
  return stage;
}

/** Stages the base layer; resolves with the host paths it holds (node, its libraries, the loader). */
async function stageBase(stage: string, node: string): Promise<Set<string>> {
  const copied = new Set(await copyProgram(node, stage));
  await writeStagedFile(stage, 'etc/passwd', PASSWD, 0o644);
  await writeStagedFile(stage, 'etc/group', GROUP, 0o644);
  await writeStagedFile(stage, 'etc/nsswitch.conf', NSSWITCH, 0o644);
  await fs.mkdir(path.join(stage, 'tmp'));
  await fs.chmod(path.join(stage, 'tmp'), 0o1777);
  await fs.mkdir(path.join(stage, 'run'), { mode: 0o755 });
  return copied;
}

/** Stages the plugin layer; resolves with the entrypoint. */
async function stagePlugin(stage: string, repoRoot: string, inBase: ReadonlySet<string>, node: string): Promise<string[]> {
  const appRoot = path.join(stage, APP_ROOT);
  await fs.mkdir(appRoot, { recursive: true, mode: 0o755 });
  const closure = await productionClosure(repoRoot, PLUGIN_PACKAGE);
  const addons = await copyClosure(closure, appRoot);
  const skip = new Set(inBase);
  for (const name of PLUGIN_PROGRAMS) for (const p of await copyProgram(await whichProgram(name), stage, skip)) skip.add(p);
  for (const addon of addons)
    for (const lib of await sharedLibraries(addon)) {
      if (skip.has(lib)) continue;
      await copyHostPath(lib, stage);
      skip.add(lib);
    }
  const plugin = closure[0]!;
  const manifest = await readManifest(plugin.hostDir);
  const bin = typeof manifest.bin === 'string' ? manifest.bin : manifest.bin?.[PLUGIN_BIN];
  if (bin === undefined) throw new ImageBuildError(`${PLUGIN_PACKAGE}'s package.json has no bin ${PLUGIN_BIN}`);
  return [node, path.posix.join(APP_ROOT, plugin.installPath, bin)];
}

interface LayoutIndex {
  manifests: { digest: string; size: number; annotations?: Record<string, string> }[];
}
interface ImageManifest {
  config: { digest: string; size: number };
  layers: { digest: string; size: number }[];
}

async function readBlobJson<T>(layoutDir: string, digest: string): Promise<T> {
  return JSON.parse(await fs.readFile(path.join(layoutDir, 'blobs', ...digest.split(':')), 'utf8')) as T;
}

/** What the layout holds under `tag`: the manifest digest, the stored size and each layer. */
export async function summariseImage(
  layoutDir: string,
  tag: string,
  createdBy: readonly string[] = [],
): Promise<Omit<BuiltImage, 'tags' | 'entrypoint'>> {
  const index = JSON.parse(await fs.readFile(path.join(layoutDir, 'index.json'), 'utf8')) as LayoutIndex;
  const entry = index.manifests.find((m) => m.annotations?.['org.opencontainers.image.ref.name'] === tag);
  if (!entry) throw new ImageBuildError(`tag ${tag} is not in the OCI layout ${layoutDir}`);
  const manifest = await readBlobJson<ImageManifest>(layoutDir, entry.digest);
  const size = entry.size + manifest.config.size + manifest.layers.reduce((sum, l) => sum + l.size, 0);
  return {
    layoutDir,
    manifestDigest: entry.digest,
    size,
    layers: manifest.layers.map((l, i) => ({ digest: l.digest, size: l.size, createdBy: createdBy[i] ?? '' })),
  };
}

/** Refuses to write into a directory that holds something other than an OCI layout. */
async function checkOut(out: string): Promise<void> {
  const names: string[] = await fs.readdir(out).catch((err: NodeJS.ErrnoException): string[] => {
    if (err.code === 'ENOENT') return [];
    throw new ImageBuildError(`cannot read the output directory ${out}: ${err.message}`, { cause: err });
  });
  if (names.length > 0 && !names.includes('oci-layout'))
    throw new ImageBuildError(`${out} exists and is not an OCI layout (no oci-layout file); give --out an empty or new directory`);
  // umoci init makes the layout's directory itself and refuses one that exists, even empty.
  if (names.length === 0)
    await fs.rmdir(out).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw new ImageBuildError(`cannot use the empty directory ${out}: ${err.message}`, { cause: err });
    });
}

export async function buildHostpathImage(options: HostpathImageOptions): Promise<BuiltImage> {
  const out = path.resolve(options.out);
  const node = options.node ?? process.execPath;
  const epoch = options.epochSeconds ?? 0;
  await checkOut(out);
  const pluginDir = path.join(options.repoRoot, 'node_modules', PLUGIN_PACKAGE);
  const manifest = await readManifest(pluginDir);
  const version = manifest.version ?? '0.0.0';
  const repository = typeof manifest.repository === 'string' ? manifest.repository : manifest.repository?.url;
  const scratch = await fs.mkdtemp(path.join(tmpdir(), 'csiplug-hostpath-image-'));
  try {
    const base = await makeStage(scratch, 'base');
    const plugin = await makeStage(scratch, 'plugin');
    const inBase = await stageBase(base, node);
    const entrypoint = await stagePlugin(plugin, options.repoRoot, inBase, node);
    await clampTimes(base, epoch);
    await clampTimes(plugin, epoch);
    const createdBy = [
      `csiplug image base: ${node} ${process.version} and its libraries`,
      `csiplug-hostpath ${version}: ${APP_ROOT}/node_modules, ${PLUGIN_PROGRAMS.join(', ')}`,
    ];
    await buildImageLayout(
      out,
      version,
      [
        { dir: base, createdBy: createdBy[0]! },
        { dir: plugin, createdBy: createdBy[1]! },
      ],
      {
        entrypoint,
        env: [`PATH=${IMAGE_PATH}`],
        workingDir: '/',
        created: new Date(epoch * 1000).toISOString(),
        labels: {
          'org.opencontainers.image.title': PLUGIN_BIN,
          'org.opencontainers.image.description': 'csiplug hostpath CSI plugin',
          'org.opencontainers.image.version': version,
          'org.opencontainers.image.licenses': 'MPL-2.0',
          ...(repository !== undefined
            ? { 'org.opencontainers.image.source': repository.replace(/^git\+/, '').replace(/\.git$/, '') }
            : {}),
        },
      },
    );
    await tagImageLayout(out, version, 'latest');
    await collectLayoutGarbage(out);
    return { ...(await summariseImage(out, version, createdBy)), tags: [version, 'latest'], entrypoint };
  } finally {
    await fs.rm(scratch, { recursive: true, force: true });
  }
}
