// TaskImages: the images of the agent's tasks, as one service over the
// library — one shared ImagePuller and LayerStore on <dataDir>/images (0700),
// a task's root made from its image (pulled when the store lacks it,
// unpacked once per layer chain, an overlay of its own per task), released
// when its alloc goes, and Nomad's image GC: an image no task uses for
// gc.imageDelay is removed from the store (its blobs and layer chains that no
// other image shares), never while a task root is mounted on it.
//
// A task root outlives the agent (the task runs on it after kill -9): a
// prepare that finds the root mounted takes it as it is, with the image from
// the store, and asks the registry nothing.
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { type Clock, type Disposable, type Logger, NullLogger, RealClock, errorMessage, readMountInfo } from '@csiplug/core';
import type { AuthConfig } from './distribution/auth';
import { ImageError } from './errors';
import type { ImageRuntimeConfig } from './image-config';
import type { ImageConfig } from './manifest';
import { ImagePuller, type PullEvent, type PulledImage } from './puller';
import { parseImageReference } from './reference';
import { chainIds, digestHex } from './rootfs/chain-id';
import { LayerStore, type LayerStoreMode } from './rootfs/layer-store';
import { isMounted, prepareRootfs, releaseRootfs } from './rootfs/task-rootfs';
import { removeTree } from './rootfs/tree';

/**
 * The agent's image driver settings this service reads: the fields of the
 * agent config's ImageDriverConfig (plugin "docker" { config { … } }) it needs,
 * named as there (jobspec sits beside this package, so the shape is restated).
 */
export interface TaskImagesDriverConfig {
  /** `auth { config }`: a docker config.json whose `auths` give credentials after the task's own. */
  readonly authConfig?: string;
  /** `pull_activity_timeout` in ms. */
  readonly pullActivityTimeout: number;
  /** `gc { image, image_delay }`. */
  readonly gc: { readonly image: boolean; readonly imageDelay: number };
}

export interface TaskImagesOptions {
  /** The agent's data dir: the store is <dataDir>/images. */
  readonly dataDir: string;
  readonly docker: TaskImagesDriverConfig;
  readonly clock?: Clock;
  readonly logger?: Logger;
  /** Docker's certs.d layout; /etc/docker/certs.d when not given. */
  readonly certsDir?: string;
  /** The layer store's mode; `auto` (overlay where it works) by default. */
  readonly layerMode?: LayerStoreMode | 'auto';
}

export interface PrepareTaskImageRequest {
  /** Where the task's root goes (rootfs/, upper/, work/ are made in it), e.g. <task dir>/image. */
  readonly taskDir: string;
  /** The image reference as the task names it. */
  readonly ref: string;
  /** The task's auth {}: tried before the agent's docker config file. */
  readonly auth?: { readonly username?: string; readonly password?: string; readonly serverAddress?: string };
  readonly forcePull?: boolean;
  /** image_pull_timeout in ms. */
  readonly pullTimeout?: number;
  /** Device nodes of the image's layers made (a privileged plugin only). */
  readonly allowDevices?: boolean;
  readonly onEvent?: (event: PullEvent) => void;
  readonly signal?: AbortSignal;
}

export interface PreparedTaskImage {
  /** The task's root filesystem (mounted, writable: the task's own layer over the image). */
  readonly rootfs: string;
  readonly config: ImageConfig;
  /** The digest the reference resolved to in the registry. */
  readonly digest: string;
  /** The canonical reference. */
  readonly reference: string;
  /** True when the root was mounted already (a task re-started, or an agent restarted after kill -9): nothing was pulled. */
  readonly reused: boolean;
}

/** The image service the runner asks for a task's root. */
export interface TaskImagesService {
  prepare(request: PrepareTaskImageRequest): Promise<PreparedTaskImage>;
  /** Unmounts and removes the task's root (its writable layer too); the image stays in the store until GC. */
  release(taskDir: string): Promise<void>;
  /** A root a restored task runs on (prepared by an earlier agent): its image counts as in use. */
  adopt(taskDir: string): Promise<void>;
}

/** The image config as Docker names its runtime fields: what resolveImageProcess reads. */
export function runtimeConfigOf(config: ImageConfig): ImageRuntimeConfig {
  return {
    ...(config.entrypoint ? { Entrypoint: config.entrypoint } : {}),
    ...(config.cmd ? { Cmd: config.cmd } : {}),
    Env: config.env,
    ...(config.workingDir !== undefined ? { WorkingDir: config.workingDir } : {}),
    ...(config.user !== undefined ? { User: config.user } : {}),
  };
}

/** Which image a task root was made from, kept beside it: a later agent needs it to find the image without asking the registry. */
const ROOT_RECORD = 'image.json';

interface RootRecord {
  readonly reference: string;
}

export class TaskImages implements TaskImagesService, Disposable {
  readonly storeDir: string;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private opened: Promise<{ puller: ImagePuller; layers: LayerStore }> | undefined;
  /** The task roots this agent prepared or found, by their dir: the canonical reference of each. */
  private readonly users = new Map<string, string>();
  /** GC timers of images no task uses, by canonical reference. */
  private readonly gcTimers = new Map<string, Disposable>();
  private disposed = false;

  constructor(private readonly options: TaskImagesOptions) {
    this.storeDir = path.join(options.dataDir, 'images');
    this.clock = options.clock ?? new RealClock();
    this.logger = options.logger ?? new NullLogger();
  }

  /** Opens the store (cleaning what a killed pull or unpack left); idempotent. */
  open(): Promise<{ puller: ImagePuller; layers: LayerStore }> {
    this.opened ??= (async () => {
      await fsp.mkdir(this.storeDir, { recursive: true, mode: 0o700 });
      await fsp.chmod(this.storeDir, 0o700);
      const puller = await ImagePuller.open({
        storeDir: this.storeDir,
        clock: this.clock,
        logger: this.logger,
        activityTimeoutMs: this.options.docker.pullActivityTimeout,
        ...(this.options.docker.authConfig !== undefined ? { dockerConfigPath: this.options.docker.authConfig } : {}),
        ...(this.options.certsDir !== undefined ? { certsDir: this.options.certsDir } : {}),
      });
      const layers = await LayerStore.open({
        storeDir: this.storeDir,
        logger: this.logger,
        ...(this.options.layerMode ? { mode: this.options.layerMode } : {}),
      });
      return { puller, layers };
    })();
    return this.opened;
  }

  async prepare(request: PrepareTaskImageRequest): Promise<PreparedTaskImage> {
    if (this.disposed) throw new ImageError('EIMAGE_STORE', `the image service is stopped; task root ${request.taskDir} was not prepared`);
    const { puller, layers } = await this.open();
    const parsed = parseImageReference(request.ref);
    const canonical = parsed.kind === 'registry' ? parsed.canonical : request.ref;
    const dir = path.resolve(request.taskDir);
    this.use(dir, canonical);
    try {
      if (await isMounted(dir)) {
        const image = await puller.lookup(request.ref);
        if (image) {
          const rootfs = path.join(await fsp.realpath(dir), 'rootfs');
          request.onEvent?.({
            kind: 'pulled',
            reference: image.reference,
            digest: image.repoDigest,
            fromStore: true,
            message: `Image ${image.reference} is present, digest ${image.repoDigest}`,
          });
          return { rootfs, config: image.config, digest: image.repoDigest, reference: image.reference, reused: true };
        }
        // The root is there but its image is not in the store (the store was removed by hand): made anew below.
        this.logger.warn('a task root is mounted but its image is not in the store; the root is made again from a fresh pull', {
          dir,
          image: canonical,
        });
        await releaseRootfs(dir);
      }
      const auth: AuthConfig | undefined = request.auth
        ? {
            ...(request.auth.username !== undefined ? { username: request.auth.username } : {}),
            ...(request.auth.password !== undefined ? { password: request.auth.password } : {}),
            ...(request.auth.serverAddress !== undefined ? { server_address: request.auth.serverAddress } : {}),
          }
        : undefined;
      const image: PulledImage = await puller.pull(request.ref, {
        ...(auth ? { auth } : {}),
        ...(request.forcePull ? { forcePull: true } : {}),
        ...(request.pullTimeout !== undefined ? { pullTimeoutMs: request.pullTimeout } : {}),
        ...(request.onEvent ? { onProgress: request.onEvent } : {}),
        ...(request.signal ? { signal: request.signal } : {}),
      });
      const unpacked = await layers.unpackImage(
        image.layers.map((l, i) => ({ blobPath: puller.blobs.path(l.digest), mediaType: l.mediaType, diffId: image.diffIds[i]! })),
        { allowDevices: request.allowDevices === true },
      );
      await fsp.mkdir(dir, { recursive: true, mode: 0o711 });
      await fsp.writeFile(path.join(dir, ROOT_RECORD), JSON.stringify({ reference: image.reference } satisfies RootRecord));
      const { rootfs } = await prepareRootfs({ image: unpacked, dir });
      this.use(dir, image.reference);
      return { rootfs, config: image.config, digest: image.repoDigest, reference: image.reference, reused: false };
    } catch (err) {
      // A root that was never made holds no image: its GC clock starts.
      if (!(await isMounted(dir).catch(() => false))) this.unuse(dir);
      throw err;
    }
  }

  /**
   * A task root a restored task runs on (re-attached after the agent
   * restarted, never prepared by this agent): counted as a use of its image,
   * so that GC leaves the image alone.
   */
  async adopt(taskDir: string): Promise<void> {
    const dir = path.resolve(taskDir);
    try {
      const record = JSON.parse(await fsp.readFile(path.join(dir, ROOT_RECORD), 'utf8')) as RootRecord;
      if (typeof record.reference === 'string') this.use(dir, record.reference);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
        this.logger.warn('the record of a task root is unreadable; its image is guarded from GC by its mount only', {
          dir,
          error: errorMessage(err),
        });
    }
  }

  async release(taskDir: string): Promise<void> {
    const dir = path.resolve(taskDir);
    await releaseRootfs(dir);
    await fsp.rm(path.join(dir, ROOT_RECORD), { force: true });
    this.unuse(dir);
  }

  /** The canonical references some task root uses now. */
  inUse(): string[] {
    return [...new Set(this.users.values())].sort();
  }

  dispose(): void {
    this.disposed = true;
    for (const t of this.gcTimers.values()) t.dispose();
    this.gcTimers.clear();
    void this.opened?.then(({ puller }) => puller.dispose()).catch(() => undefined);
  }

  private use(dir: string, reference: string): void {
    const before = this.users.get(dir);
    this.users.set(dir, reference);
    this.gcTimers.get(reference)?.dispose();
    this.gcTimers.delete(reference);
    if (before !== undefined && before !== reference) this.scheduleGcIfUnused(before);
  }

  private unuse(dir: string): void {
    const reference = this.users.get(dir);
    if (reference === undefined) return;
    this.users.delete(dir);
    this.scheduleGcIfUnused(reference);
  }

  private scheduleGcIfUnused(reference: string): void {
    const { gc } = this.options.docker;
    if (!gc.image || this.disposed || [...this.users.values()].includes(reference) || this.gcTimers.has(reference)) return;
    const timer = this.clock.setTimeout(() => {
      this.gcTimers.delete(reference);
      this.removeImage(reference).catch((err) =>
        this.logger.warn('image GC could not remove an unused image; it stays in the store until a later GC', {
          image: reference,
          error: errorMessage(err),
        }),
      );
    }, gc.imageDelay);
    this.gcTimers.set(reference, timer);
  }

  /**
   * Removes an image no task uses: its index entry, its blobs no other image
   * lists, its layer chains no other image has — but never a chain a mounted
   * overlay still stands on (a task this agent does not know of yet).
   */
  async removeImage(reference: string): Promise<boolean> {
    if (this.disposed || [...this.users.values()].includes(reference)) return false;
    const { puller, layers } = await this.open();
    const record = puller.index.get(reference);
    if (!record) return false;
    const image = await puller.lookup(reference);
    const others = puller.index.list().filter((r) => r.reference !== reference);
    const otherChains = new Set<string>();
    const otherBlobs = new Set<string>();
    for (const o of others) {
      otherBlobs.add(o.manifestDigest).add(o.configDigest).add(o.repoDigest);
      for (const l of o.layers) otherBlobs.add(l.digest);
      const oi = await puller.lookup(o.reference).catch(() => undefined);
      for (const c of oi ? chainIds(oi.diffIds) : []) otherChains.add(digestHex(c));
    }
    const chains = image ? chainIds(image.diffIds).map(digestHex) : [];
    // A chain dir an overlay mount stands on (as a lower dir) is in use, whoever made the mount.
    const lowers = (await readMountInfo())
      .filter((m) => m.fsType === 'overlay')
      .flatMap((m) => m.superOptions.filter((o) => o.startsWith('lowerdir=')).flatMap((o) => o.slice('lowerdir='.length).split(':')));
    const own = chains.filter((hex) => !otherChains.has(hex));
    const mounted = (hex: string) =>
      lowers.some((l) => l === path.join(layers.layersDir, hex, 'fs') || l.startsWith(`${path.join(layers.layersDir, hex)}.`));
    if (own.some(mounted)) {
      this.logger.info('image GC keeps an image a mounted task root stands on', { image: reference });
      return false;
    }
    await puller.index.delete(reference);
    for (const digest of [record.manifestDigest, record.configDigest, record.repoDigest, ...record.layers.map((l) => l.digest)]) {
      if (!otherBlobs.has(digest)) await puller.blobs.remove(digest);
    }
    for (const hex of own) {
      for (const name of [hex, `${hex}.devices`]) await removeTree(path.join(layers.layersDir, name));
    }
    this.logger.info('image GC removed an image no task used', { image: reference, delay_ms: this.options.docker.gc.imageDelay });
    return true;
  }
}
