// The unpacked-layer store: each layer unpacked once per chain and shared by
// every image that has that chain, in <storeDir>/layers/<chain-id hex>/fs.
//
// Overlay mode (containerd's overlay snapshotter technique): a chain's dir
// holds only its own layer's diff. Layer N is applied THROUGH an overlay
// mount whose lower dirs are the parent chain's dirs and whose upper dir is
// fresh, so deletions and opaque dirs become the kernel's own whiteouts in
// the upper dir; after unmounting, the upper dir is the layer. Copy mode
// (no overlayfs, or forced): each chain's dir is a full copy of its parent
// with the layer applied.
//
// Crash safety: everything is made under <storeDir>/unpack-tmp (its own
// name: the blob store's partial downloads live elsewhere) and renamed into
// <storeDir>/layers only when complete, so after kill -9 a chain id names a
// whole layer or nothing. Each process unpacks in its own subdir of
// unpack-tmp named by its pid and start time (tmp-owner.ts); opening the
// store unmounts and removes only the subdirs of processes no longer
// running, so it never destroys another live process's unpack. The store
// only ever mounts inside unpack-tmp; task roots live in the task's own dir.
// Before a chain dir is renamed into layers/ its filesystem is synced
// (`sync -f`, one syncfs(2) instead of an fsync per file, which would be slow
// for layers of thousands of files), and layers/ is fsynced after the
// rename, so a host crash cannot leave a trusted chain of empty files.
//
// Devices: an unprivileged unpack skips device nodes and fifos. A layer that
// has none unpacks identically either way and is shared; a layer that has
// some, unpacked for a privileged plugin, goes to <hex>.devices, and so do
// the chains above it, so an unprivileged task never sees them.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { type Logger, NullLogger, errorMessage } from '@csiplug/core';
import { applyLayer, type ApplyLayerResult, type LayerBlob } from '../unpack/apply-layer';
import { LayerStoreError } from '../unpack/errors';
import { chainIds, digestHex } from './chain-id';
import { mountOverlay, overlayWorksIn, unmount, unmountAllUnder } from './overlay';
import { ownerIsAlive, ownTmpDirName } from './tmp-owner';
import { copyTree, removeTree } from './tree';

export type LayerStoreMode = 'overlay' | 'copy';

export interface LayerStoreOptions {
  readonly storeDir: string;
  /** `auto` (default): overlay where a trial mount works, else copy. A store keeps the mode it was made with. */
  readonly mode?: LayerStoreMode | 'auto';
  readonly logger?: Logger;
  readonly zstdBin?: string;
  readonly setfattrBin?: string;
  readonly mknodBin?: string;
}

export interface UnpackedLayer {
  readonly chainId: string;
  readonly diffId: string;
  /** The layer's filesystem: its diff (overlay mode) or the whole chain (copy mode). */
  readonly dir: string;
}

/** An image's layers in the store, bottom first: what a task root is made from. */
export interface UnpackedImage {
  readonly mode: LayerStoreMode;
  readonly layers: readonly UnpackedLayer[];
}

/** What <chain dir>/layer.json records. */
interface LayerRecord {
  readonly chainId: string;
  readonly diffId: string;
  readonly parent: string | null;
  readonly mode: LayerStoreMode;
  readonly devices: number;
  readonly allowDevices: boolean;
  readonly entries: number;
  readonly bytes: number;
}

const STORE_RECORD = 'layer-store.json';
const DEVICES_SUFFIX = '.devices';
/** Where unpacks are made before they are renamed into layers/, in one subdir per process; dead processes' subdirs are removed on open. */
const UNPACK_TMP = 'unpack-tmp';

export class LayerStore {
  readonly layersDir: string;
  readonly tmpDir: string;
  private readonly logger: Logger;
  /** Unpacks running in this process, by chain dir name: asked twice, done once. */
  private readonly inFlight = new Map<string, Promise<UnpackedLayer>>();

  private constructor(
    readonly storeDir: string,
    readonly mode: LayerStoreMode,
    private readonly options: LayerStoreOptions,
  ) {
    this.layersDir = path.join(storeDir, 'layers');
    this.tmpDir = path.join(storeDir, UNPACK_TMP, ownTmpDirName());
    this.logger = options.logger ?? new NullLogger();
  }

  /** Opens (or makes) the store: cleans what a killed unpack left, settles the mode. */
  static async open(options: LayerStoreOptions): Promise<LayerStore> {
    const logger = options.logger ?? new NullLogger();
    await fsp.mkdir(options.storeDir, { recursive: true, mode: 0o700 });
    // Resolved once: the kernel's mount table names real paths, and a store dir reached through a symlink must still find its mounts.
    const storeDir = await fsp.realpath(options.storeDir);
    await fsp.chmod(storeDir, 0o700);
    const layersDir = path.join(storeDir, 'layers');
    const tmpRoot = path.join(storeDir, UNPACK_TMP);
    const tmpDir = path.join(tmpRoot, ownTmpDirName());
    await fsp.mkdir(layersDir, { recursive: true });
    await fsp.mkdir(tmpDir, { recursive: true });

    // Only in unpack-tmp (the store mounts nowhere else), and only what a process no longer running left: a live one's unpack is its own.
    for (const name of await fsp.readdir(tmpRoot)) {
      if (ownerIsAlive(name)) continue;
      const dead = path.join(tmpRoot, name);
      for (const p of await unmountAllUnder(dead))
        logger.warn('unmounted a mount a killed unpack left in the image store', { mountPoint: p });
      logger.info('removing an unfinished unpack from the image store', { dir: dead });
      await removeTree(dead);
    }

    const recordPath = path.join(storeDir, STORE_RECORD);
    let stored: LayerStoreMode | undefined;
    try {
      stored = (JSON.parse(await fsp.readFile(recordPath, 'utf8')) as { mode: LayerStoreMode }).mode;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
        throw new LayerStoreError(
          `image store record ${recordPath} is unreadable: ${errorMessage(err)}; remove the store dir ${storeDir} to start it afresh`,
          err,
        );
    }
    const asked = options.mode ?? 'auto';
    if (stored && asked !== 'auto' && asked !== stored) {
      throw new LayerStoreError(
        `image store ${storeDir} holds ${stored}-mode layers, but ${asked} mode was asked for; remove the store dir to change its mode, or open it in ${stored} mode`,
      );
    }
    let mode: LayerStoreMode = stored ?? (asked === 'auto' ? 'copy' : asked);
    if (mode === 'overlay' || (!stored && asked === 'auto')) {
      const probe = await overlayWorksIn(tmpDir);
      if (probe.ok) mode = stored ?? (asked === 'auto' ? 'overlay' : asked);
      else if (mode === 'overlay') {
        throw new LayerStoreError(
          `image store ${storeDir} needs overlayfs (${stored ? 'its layers were made in overlay mode' : 'overlay mode was asked for'}), but it does not work here: ${probe.reason}`,
        );
      } else logger.info('overlayfs unavailable for the image store; layers are full copies', { reason: probe.reason });
    }
    if (!stored) await fsp.writeFile(recordPath, JSON.stringify({ mode }));
    return new LayerStore(storeDir, mode, options);
  }

  /** The chain dir of a chain id (plain or device variant). */
  chainDir(chainId: string, devices = false): string {
    return path.join(this.layersDir, digestHex(chainId) + (devices ? DEVICES_SUFFIX : ''));
  }

  /** Whether the chain is unpacked (plain variant). */
  async has(chainId: string, devices = false): Promise<boolean> {
    return (await this.readRecord(this.chainDir(chainId, devices))) !== undefined;
  }

  /** Chain ids of the dirs in the store, for GC and figures. */
  async list(): Promise<string[]> {
    return (await fsp.readdir(this.layersDir)).map((n) => `sha256:${n}`);
  }

  /**
   * Makes sure every chain of an image is unpacked (bottom first, each once)
   * and returns the image's layer dirs. `allowDevices` for privileged plugins.
   */
  async unpackImage(layers: readonly LayerBlob[], options: { allowDevices?: boolean } = {}): Promise<UnpackedImage> {
    if (!layers.length) throw new LayerStoreError('an image with no layers has no root filesystem; check the image config');
    const ids = chainIds(layers.map((l) => l.diffId));
    const out: UnpackedLayer[] = [];
    let parentUsesDevices = false;
    for (const [i, layer] of layers.entries()) {
      const got = await this.ensureChain(ids[i]!, layer, out, !!options.allowDevices, parentUsesDevices);
      parentUsesDevices = got.dir.endsWith(`${DEVICES_SUFFIX}/fs`);
      out.push(got);
    }
    return { mode: this.mode, layers: out };
  }

  private async readRecord(chainDir: string): Promise<LayerRecord | undefined> {
    try {
      return JSON.parse(await fsp.readFile(path.join(chainDir, 'layer.json'), 'utf8')) as LayerRecord;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw new LayerStoreError(
        `layer record in ${chainDir} is unreadable: ${errorMessage(err)}; remove ${chainDir} and unpack again`,
        err,
      );
    }
  }

  private async ensureChain(
    chainId: string,
    layer: LayerBlob,
    parents: readonly UnpackedLayer[],
    allowDevices: boolean,
    parentUsesDevices: boolean,
  ): Promise<UnpackedLayer> {
    const plainDir = this.chainDir(chainId);
    const devicesDir = this.chainDir(chainId, true);
    if (!parentUsesDevices) {
      const plain = await this.readRecord(plainDir);
      // A plain chain serves everyone when its layer has no devices, and unprivileged tasks always.
      if (plain && (!allowDevices || plain.devices === 0)) return { chainId, diffId: layer.diffId, dir: path.join(plainDir, 'fs') };
    }
    if (allowDevices && (await this.readRecord(devicesDir))) return { chainId, diffId: layer.diffId, dir: path.join(devicesDir, 'fs') };

    const key = `${chainId}|${allowDevices}|${parentUsesDevices}`;
    let running = this.inFlight.get(key);
    if (!running) {
      running = this.unpackChain(chainId, layer, parents, allowDevices, parentUsesDevices).finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, running);
    }
    return running;
  }

  private async unpackChain(
    chainId: string,
    layer: LayerBlob,
    parents: readonly UnpackedLayer[],
    allowDevices: boolean,
    parentUsesDevices: boolean,
  ): Promise<UnpackedLayer> {
    const work = path.join(this.tmpDir, `unpack-${digestHex(chainId).slice(0, 12)}-${randomBytes(6).toString('hex')}`);
    const fsDir = path.join(work, 'fs');
    const parent = parents[parents.length - 1];
    this.logger.info('unpacking image layer', { chainId, diffId: layer.diffId, mode: this.mode });
    let result: ApplyLayerResult;
    await fsp.mkdir(work, { mode: 0o700 });
    try {
      if (this.mode === 'copy' && parent) {
        await copyTree(parent.dir, fsDir);
        result = await this.apply(fsDir, layer, allowDevices);
      } else if (this.mode === 'overlay' && parent) {
        const mnt = path.join(work, 'mnt');
        const ovWork = path.join(work, 'work');
        for (const d of [fsDir, mnt, ovWork]) await fsp.mkdir(d);
        await mountOverlay({ lower: parents.map((p) => p.dir).reverse(), upper: fsDir, work: ovWork, target: mnt });
        try {
          result = await this.apply(mnt, layer, allowDevices);
        } finally {
          await unmount(mnt);
        }
        await fsp.rm(mnt, { recursive: true });
        await fsp.rm(ovWork, { recursive: true });
      } else {
        await fsp.mkdir(fsDir, { mode: 0o755 });
        result = await this.apply(fsDir, layer, allowDevices);
      }
      const devicesVariant = parentUsesDevices || (allowDevices && result.devices > 0);
      const record: LayerRecord = {
        chainId,
        diffId: layer.diffId,
        parent: parent?.chainId ?? null,
        mode: this.mode,
        devices: result.devices,
        allowDevices,
        entries: result.entries,
        bytes: result.bytes,
      };
      await writeFileSynced(path.join(work, 'layer.json'), JSON.stringify(record));
      // One syncfs(2) of the store's filesystem rather than an fsync per file (slow for thousands of files): every file is on disk before the rename makes the chain trusted.
      await syncFilesystem(work);
      await fsyncDir(work);
      const finalDir = this.chainDir(chainId, devicesVariant);
      try {
        await fsp.rename(work, finalDir);
        await fsyncDir(this.layersDir);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'EEXIST' && code !== 'ENOTEMPTY') throw err;
        // Another process finished the same chain first: theirs is as good as ours.
        await removeTree(work);
      }
      this.logger.info('image layer unpacked', { chainId, entries: result.entries, bytes: result.bytes, skipped: result.skipped.length });
      return { chainId, diffId: layer.diffId, dir: path.join(finalDir, 'fs') };
    } catch (err) {
      await unmountAllUnder(work).catch((e: unknown) =>
        this.logger.error('could not unmount a failed unpack', { dir: work, error: errorMessage(e) }),
      );
      await removeTree(work).catch((e: unknown) =>
        this.logger.error('could not remove a failed unpack; the store removes it when next opened', { dir: work, error: errorMessage(e) }),
      );
      throw err;
    }
  }

  private apply(root: string, layer: LayerBlob, allowDevices: boolean): Promise<ApplyLayerResult> {
    return applyLayer({
      root,
      layer,
      allowDevices,
      logger: this.logger,
      ...(this.options.zstdBin ? { zstdBin: this.options.zstdBin } : {}),
      ...(this.options.setfattrBin ? { setfattrBin: this.options.setfattrBin } : {}),
      ...(this.options.mknodBin ? { mknodBin: this.options.mknodBin } : {}),
    });
  }
}

/** Writes a file and fsyncs it. */
async function writeFileSynced(file: string, data: string): Promise<void> {
  const handle = await fsp.open(file, 'w', 0o644);
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** fsyncs a directory, so the names in it (a rename into it) are on disk. */
async function fsyncDir(dir: string): Promise<void> {
  const handle = await fsp.open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** syncfs(2) of the filesystem holding `dir`, through `sync -f` (coreutils): Node has no syncfs. */
function syncFilesystem(dir: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('/usr/bin/sync', ['-f', dir], (err, _stdout, stderr) =>
      err
        ? reject(new LayerStoreError(`could not sync the image store's filesystem at ${dir}: ${stderr.trim() || errorMessage(err)}`, err))
        : resolve(),
    );
  });
}
