// TaskImages: the images of the agent's tasks, as one service over the
// library — one shared ImagePuller and LayerStore on <dataDir>/images (0700),
// a task's root made from its image (pulled when the store lacks it,
// unpacked once per layer chain, an overlay of its own per task), released
// when its alloc goes, and Nomad's image GC: an image no task uses for
// gc.imageDelay is removed from the store (its blobs and layer chains that no
// other image shares), never while a task root is mounted on it.
//
// A task root outlives the agent (the task runs on it after kill -9): a
// prepare that finds the root in place (mounted; in copy mode, its copy made)
// takes it as it is, with the image its record (image.json beside it) names
// by digest — never by tag, which may name another image by now — and asks
// the registry nothing. An image is "used" by its manifest digest, whatever
// reference a task named it by. Prepares hold the store lock shared from
// their first look at the store to the mount; GC holds it alone from its
// checks to its last delete (store-lock.ts).
import { existsSync, promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { type Clock, type Disposable, type Logger, NullLogger, RealClock, errorMessage, readMountInfo } from '@csiplug/core';
import type { AuthConfig } from './distribution/auth';
import { ImageError, TaskRootImageLostError } from './errors';
import { isDigest } from './digest';
import type { ImageRuntimeConfig } from './image-config';
import type { ImageConfig } from './manifest';
import { ArchiveLoader, type ArchiveLoadEvent } from './archive/archive-loader';
import type { ArchivePathPolicy } from './archive/archive-catalog';
import { ImagePuller, type PullEvent, type PulledImage } from './puller';
import { parseImageReference } from './reference';
import { chainIds, digestHex } from './rootfs/chain-id';
import { LayerStore, type LayerStoreMode } from './rootfs/layer-store';
import { isMounted, prepareRootfs, releaseRootfs } from './rootfs/task-rootfs';
import { StoreLock } from './store-lock';
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
  /** Which archive paths (oci-archive:, docker-archive:) a task may name: the agent gives its allowed_host_paths check; every path when not given. */
  readonly archivePathPolicy?: ArchivePathPolicy;
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
  readonly onEvent?: (event: ImageEvent) => void;
  readonly signal?: AbortSignal;
}

/** What a prepare reports: a pull's progress and end, or an archive's load (oci-archive:, docker-archive:). */
export type ImageEvent = PullEvent | ArchiveLoadEvent;

export interface PreparedTaskImage {
  /** The task's root filesystem (mounted, writable: the task's own layer over the image). */
  readonly rootfs: string;
  readonly config: ImageConfig;
  /** The digest the reference resolved to in the registry. */
  readonly digest: string;
  /** The canonical reference. */
  readonly reference: string;
  /** True when the root was in place already (a task re-started, or an agent restarted after kill -9): nothing was pulled, and the image is the one the root was made from. */
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
  /** The canonical reference the task named the image by. */
  readonly reference: string;
  /** The digest the reference resolved to in the registry then (what the Pulled event shows). */
  readonly repoDigest: string;
  /** The image the root stands on: its use, its GC and a later prepare go by these, never by the tag. */
  readonly manifestDigest: string;
  readonly configDigest: string;
}

/** The root's record, or why there is none to go by. */
async function readRootRecord(dir: string): Promise<{ record: RootRecord } | { problem: string }> {
  const file = path.join(dir, ROOT_RECORD);
  let parsed: Partial<RootRecord> | null;
  try {
    parsed = JSON.parse(await fsp.readFile(file, 'utf8')) as Partial<RootRecord> | null;
  } catch (err) {
    return { problem: `its record ${file} cannot be read (${errorMessage(err)})` };
  }
  const ok =
    parsed !== null &&
    typeof parsed === 'object' &&
    typeof parsed.reference === 'string' &&
    [parsed.repoDigest, parsed.manifestDigest, parsed.configDigest].every((d) => typeof d === 'string' && isDigest(d));
  return ok ? { record: parsed as RootRecord } : { problem: `its record ${file} does not name the image's digests` };
}

export class TaskImages implements TaskImagesService, Disposable {
  readonly storeDir: string;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private opened: Promise<{ puller: ImagePuller; loader: ArchiveLoader; layers: LayerStore }> | undefined;
  /** The task roots this agent prepared or found, by their dir: the record of each (its image by digest). */
  private readonly users = new Map<string, RootRecord>();
  /** GC timers of images no task uses, by manifest digest. */
  private readonly gcTimers = new Map<string, Disposable>();
  /** Prepares share it; GC holds it alone. */
  readonly storeLock = new StoreLock();
  private disposed = false;

  constructor(private readonly options: TaskImagesOptions) {
    this.storeDir = path.join(options.dataDir, 'images');
    this.clock = options.clock ?? new RealClock();
    this.logger = options.logger ?? new NullLogger();
  }

  /** Opens the store (cleaning what a killed pull or unpack left); idempotent. */
  open(): Promise<{ puller: ImagePuller; loader: ArchiveLoader; layers: LayerStore }> {
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
      // An archive's image goes into the puller's store and index: past the fetch, it is a pulled image.
      const loader = new ArchiveLoader(puller.blobs, puller.index, {
        clock: this.clock,
        logger: this.logger,
        ...(this.options.archivePathPolicy ? { pathPolicy: this.options.archivePathPolicy } : {}),
      });
      return { puller, loader, layers };
    })();
    return this.opened;
  }

  async prepare(request: PrepareTaskImageRequest): Promise<PreparedTaskImage> {
    if (this.disposed) throw new ImageError('EIMAGE_STORE', `the image service is stopped; task root ${request.taskDir} was not prepared`);
    const { puller, loader, layers } = await this.open();
    const dir = path.resolve(request.taskDir);
    return this.storeLock.withShared(async () => {
      if (this.disposed)
        throw new ImageError('EIMAGE_STORE', `the image service is stopped; task root ${request.taskDir} was not prepared`);
      const reused = await this.reuse(dir, layers.mode, puller, request);
      if (reused) return reused;
      try {
        const auth: AuthConfig | undefined = request.auth
          ? {
              ...(request.auth.username !== undefined ? { username: request.auth.username } : {}),
              ...(request.auth.password !== undefined ? { password: request.auth.password } : {}),
              ...(request.auth.serverAddress !== undefined ? { server_address: request.auth.serverAddress } : {}),
            }
          : undefined;
        // An archive replaces only the registry fetch (force_pull and image_pull_timeout are a registry's: archive-loader.ts).
        const image: PulledImage =
          parseImageReference(request.ref).kind === 'registry'
            ? await puller.pull(request.ref, {
                ...(auth ? { auth } : {}),
                ...(request.forcePull ? { forcePull: true } : {}),
                ...(request.pullTimeout !== undefined ? { pullTimeoutMs: request.pullTimeout } : {}),
                ...(request.onEvent ? { onProgress: request.onEvent } : {}),
                ...(request.signal ? { signal: request.signal } : {}),
              })
            : await loader.load(request.ref, {
                ...(request.onEvent ? { onProgress: request.onEvent } : {}),
                ...(request.signal ? { signal: request.signal } : {}),
              });
        const unpacked = await layers.unpackImage(
          image.layers.map((l, i) => ({ blobPath: puller.blobs.path(l.digest), mediaType: l.mediaType, diffId: image.diffIds[i]! })),
          { allowDevices: request.allowDevices === true },
        );
        const record: RootRecord = {
          reference: image.reference,
          repoDigest: image.repoDigest,
          manifestDigest: image.manifestDigest,
          configDigest: image.configDigest,
        };
        await fsp.mkdir(dir, { recursive: true, mode: 0o711 });
        // Written before the root is made: a root in place always has its record.
        await fsp.writeFile(path.join(dir, ROOT_RECORD), JSON.stringify(record));
        const { rootfs } = await prepareRootfs({ image: unpacked, dir });
        this.use(dir, record);
        return { rootfs, config: image.config, digest: image.repoDigest, reference: image.reference, reused: false };
      } catch (err) {
        // A root that was never made holds no image: its GC clock starts.
        if (!(await rootInPlace(dir, layers.mode).catch(() => false))) this.unuse(dir);
        throw err;
      }
    });
  }

  /**
   * The root as it is when it is in place (mounted; in copy mode, its copy
   * made), with the image its record names by digest, from the store only.
   * A root in place whose image cannot be read is never made anew here: a
   * task may run on it.
   */
  private async reuse(
    dir: string,
    mode: LayerStoreMode,
    puller: ImagePuller,
    request: PrepareTaskImageRequest,
  ): Promise<PreparedTaskImage | undefined> {
    if (!(await rootInPlace(dir, mode))) return undefined;
    const rootfs = path.join(await fsp.realpath(dir), 'rootfs');
    const read = await readRootRecord(dir);
    if ('problem' in read) throw new TaskRootImageLostError(rootfs, read.problem);
    const { record } = read;
    const config = await puller.configByDigest(record.configDigest);
    if (!config)
      throw new TaskRootImageLostError(
        rootfs,
        `the config ${record.configDigest} of its image ${record.reference} (manifest ${record.manifestDigest}) is not in the store ${this.storeDir}`,
      );
    this.use(dir, record);
    request.onEvent?.({
      kind: parseImageReference(record.reference).kind === 'registry' ? 'pulled' : 'loaded',
      reference: record.reference,
      digest: record.repoDigest,
      fromStore: true,
      message: `Image ${record.reference} is present, digest ${record.repoDigest}`,
    });
    return { rootfs, config, digest: record.repoDigest, reference: record.reference, reused: true };
  }

  /**
   * A task root a restored task runs on (re-attached after the agent
   * restarted, never prepared by this agent): counted as a use of its image,
   * so that GC leaves the image alone.
   */
  async adopt(taskDir: string): Promise<void> {
    const dir = path.resolve(taskDir);
    if (!existsSync(path.join(dir, ROOT_RECORD))) return; // no root made yet: nothing in use
    const read = await readRootRecord(dir);
    if ('record' in read) this.use(dir, read.record);
    else
      this.logger.warn('the record of a task root is unreadable; its image is guarded from GC by its mount only', {
        dir,
        problem: read.problem,
      });
  }

  async release(taskDir: string): Promise<void> {
    const dir = path.resolve(taskDir);
    await releaseRootfs(dir);
    await fsp.rm(path.join(dir, ROOT_RECORD), { force: true });
    this.unuse(dir);
  }

  /** The manifest digests of the images some task root uses now. */
  inUse(): string[] {
    return [...new Set([...this.users.values()].map((r) => r.manifestDigest))].sort();
  }

  dispose(): void {
    this.disposed = true;
    for (const t of this.gcTimers.values()) t.dispose();
    this.gcTimers.clear();
    void this.opened
      ?.then(({ puller, loader }) => {
        loader.dispose();
        puller.dispose();
      })
      .catch(() => undefined);
  }

  private use(dir: string, record: RootRecord): void {
    const before = this.users.get(dir);
    this.users.set(dir, record);
    this.gcTimers.get(record.manifestDigest)?.dispose();
    this.gcTimers.delete(record.manifestDigest);
    if (before !== undefined && before.manifestDigest !== record.manifestDigest) this.scheduleGcIfUnused(before.manifestDigest);
  }

  private unuse(dir: string): void {
    const record = this.users.get(dir);
    if (record === undefined) return;
    this.users.delete(dir);
    this.scheduleGcIfUnused(record.manifestDigest);
  }

  private isUsed(manifestDigest: string): boolean {
    return [...this.users.values()].some((r) => r.manifestDigest === manifestDigest);
  }

  private scheduleGcIfUnused(manifestDigest: string): void {
    const { gc } = this.options.docker;
    if (!gc.image || this.disposed || this.isUsed(manifestDigest) || this.gcTimers.has(manifestDigest)) return;
    const timer = this.clock.setTimeout(() => {
      this.gcTimers.delete(manifestDigest);
      this.collect(manifestDigest).catch((err) =>
        this.logger.warn('image GC could not remove an unused image; it stays in the store until a later GC', {
          image: manifestDigest,
          error: errorMessage(err),
        }),
      );
    }, gc.imageDelay);
    this.gcTimers.set(manifestDigest, timer);
  }

  /** GC of one image: every reference the store holds it under; an image a mount kept is tried again after the delay. */
  private async collect(manifestDigest: string): Promise<void> {
    const { puller } = await this.open();
    let kept = false;
    for (const r of puller.index.list().filter((x) => x.manifestDigest === manifestDigest)) {
      if (!(await this.removeImage(r.reference))) kept = true;
    }
    if (kept && !this.isUsed(manifestDigest) && !this.disposed) {
      this.logger.info('image GC kept an image no task of this agent uses; it tries again after the delay', {
        image: manifestDigest,
        delay_ms: this.options.docker.gc.imageDelay,
      });
      this.scheduleGcIfUnused(manifestDigest);
    }
  }

  /**
   * Removes an image no task uses: its index entry, its blobs no other image
   * (nor a root this agent knows) lists, its layer chains no other image
   * has — but nothing while a mounted overlay stands on any chain of it (a
   * task this agent does not know of yet). Holds the store lock alone: no
   * prepare looks at the store between the checks and the deletes.
   */
  removeImage(reference: string): Promise<boolean> {
    return this.storeLock.withExclusive(() => this.removeImageLocked(reference));
  }

  private async removeImageLocked(reference: string): Promise<boolean> {
    if (this.disposed) return false;
    const { puller, layers } = await this.open();
    const record = puller.index.get(reference);
    if (!record) return false;
    if (this.isUsed(record.manifestDigest)) return false;
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
    // A root this agent knows may stand on an image its tag no longer names (the index forgot it): its blobs stay.
    for (const u of this.users.values()) otherBlobs.add(u.manifestDigest).add(u.configDigest).add(u.repoDigest);
    const chains = image ? chainIds(image.diffIds).map(digestHex) : [];
    // A chain dir an overlay mount stands on (as a lower dir) is in use, whoever made the mount.
    const lowerLists = (await readMountInfo())
      .filter((m) => m.fsType === 'overlay')
      .map((m) => m.superOptions.filter((o) => o.startsWith('lowerdir=')).flatMap((o) => o.slice('lowerdir='.length).split(':')));
    const isChainDir = (l: string, hex: string) =>
      l === path.join(layers.layersDir, hex, 'fs') || l.startsWith(`${path.join(layers.layersDir, hex)}.`);
    const own = chains.filter((c) => !otherChains.has(c));
    const ownMounted = own.some((hex) => lowerLists.some((lowers) => lowers.some((l) => isChainDir(l, hex))));
    // A root made from this very image has its top chain as its first lower dir (a chain id names every layer
    // below it): that root must find the image in the store when its task starts again, even when every chain is shared.
    const top = chains.at(-1);
    const rootOnImage = top !== undefined && lowerLists.some((lowers) => lowers[0] !== undefined && isChainDir(lowers[0], top));
    if (ownMounted || rootOnImage) {
      this.logger.info('image GC keeps an image a mounted task root stands on', { image: reference });
      return false;
    }
    // Checked again just before deleting: a root adopted while this GC awaited (adopt takes no lock) is a use too.
    if (this.isUsed(record.manifestDigest)) return false;
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

/** Whether the task's root is in place: mounted (overlay mode) or its copy made (copy mode: a copy is renamed into place only when whole). */
async function rootInPlace(dir: string, mode: LayerStoreMode): Promise<boolean> {
  if (mode === 'overlay') return isMounted(dir);
  return existsSync(path.join(dir, 'rootfs'));
}
