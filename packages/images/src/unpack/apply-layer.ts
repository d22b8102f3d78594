// Applies one image layer (a tar blob on disk) onto a directory that shows
// everything below it: a full copy of the parent chain, or an overlay mount
// whose upper dir collects this layer's diff. The rules are Docker's and
// containerd's (moby pkg/archive's createTarFile and UnpackLayer,
// containerd archive/tar.go):
//   - `.wh.<name>` deletes <name> from the layers below; `.wh..wh..opq`
//     empties its directory of everything this layer did not itself write;
//     other `.wh..wh.*` names (aufs bookkeeping) are ignored.
//   - every entry's parent is resolved inside the root, symlinks followed
//     but never out of it (secure-join.ts); the entry itself, if it exists,
//     is replaced (never written through), unless both are directories.
//   - hard links point at a path already inside the root.
//   - owner (lchown), then xattrs, then mode (after chown, which clears
//     setuid/setgid), then times (lutimes; directories last, once their
//     children stop changing them).
//   - device nodes and fifos only with `allowDevices` (privileged plugins),
//     made by mknod(1); otherwise skipped and reported.
//   - xattrs by setfattr(1) when the host has it (Node has no xattr API), as
//     far as the filesystem takes them; otherwise skipped with a debug line.
// The uncompressed bytes are hashed as they are read and must equal the
// diff id; on any error the caller throws the directory away.
import { constants as fsc, promises as fsp } from 'node:fs';
import * as path from 'node:path';
import { type Logger, NullLogger } from '@csiplug/core';
import { DiffIdMismatchError, LayerWriteError, UnpackError, UnsafeEntryError } from './errors';
import { MKNOD_BIN, SETFATTR_BIN, runTool, toolExists } from './host-tools';
import { openLayer, ZSTD_BIN } from './layer-stream';
import { cleanEntryPath, isWithin, resolveInRoot } from './secure-join';
import { readTar, type TarEntry, type TarReaderOptions } from './tar-reader';

/** A layer blob on disk and the digest of its uncompressed tar. */
export interface LayerBlob {
  readonly blobPath: string;
  readonly mediaType: string;
  /** "sha256:<hex>" from the image config's rootfs.diff_ids. */
  readonly diffId: string;
}

export interface ApplyLayerOptions extends TarReaderOptions {
  /** The directory to apply into (it exists and shows the layers below). */
  readonly root: string;
  readonly layer: LayerBlob;
  /** Make device nodes and fifos (privileged plugins only). */
  readonly allowDevices?: boolean;
  readonly logger?: Logger;
  readonly zstdBin?: string;
  readonly mknodBin?: string;
  /** setfattr(1); when absent on the host, xattrs are skipped. */
  readonly setfattrBin?: string;
}

export interface SkippedEntry {
  readonly name: string;
  readonly reason: string;
}

export interface ApplyLayerResult {
  /** Entries read, whiteouts included. */
  readonly entries: number;
  /** Bytes of file bodies written. */
  readonly bytes: number;
  /** Entries not made, and why (devices without allowDevices, xattrs the host cannot set). */
  readonly skipped: readonly SkippedEntry[];
  /** Device nodes and fifos in the layer, made or skipped: a layer with none unpacks the same with or without allowDevices. */
  readonly devices: number;
  readonly compression: string;
}

const WHITEOUT_PREFIX = '.wh.';
const WHITEOUT_META_PREFIX = '.wh..wh.';
const WHITEOUT_OPAQUE = '.wh..wh..opq';
const OVERLAY_XATTR_PREFIX = 'trusted.overlay.';

function errno(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException).code;
}

async function lstatOrUndefined(p: string) {
  try {
    return await fsp.lstat(p);
  } catch (err) {
    if (errno(err) === 'ENOENT' || errno(err) === 'ENOTDIR') return undefined;
    throw err;
  }
}

/** Applies one layer; see the file header for the rules. Throws UnpackError subclasses; leaves cleanup to the caller. */
export async function applyLayer(options: ApplyLayerOptions): Promise<ApplyLayerResult> {
  const applier = new LayerApplier(options);
  const opened = await openLayer(options.layer.blobPath, options.layer.mediaType, options.zstdBin ?? ZSTD_BIN);
  let entries = 0;
  try {
    for await (const entry of readTar(opened.tar, options)) {
      entries++;
      await applier.apply(entry);
    }
    const digest = await opened.finish();
    if (digest !== options.layer.diffId) throw new DiffIdMismatchError(options.layer.blobPath, options.layer.diffId, digest);
  } catch (err) {
    opened.destroy();
    throw err;
  }
  await applier.finishDirectoryTimes();
  return { entries, bytes: applier.bytes, skipped: applier.skipped, devices: applier.devices, compression: opened.compression };
}

/** The per-layer state of an application: what this layer wrote (for opaque dirs), deferred dir times, notes. */
class LayerApplier {
  bytes = 0;
  devices = 0;
  readonly skipped: SkippedEntry[] = [];
  private readonly root: string;
  private readonly logger: Logger;
  /** Root-relative paths this layer wrote: an opaque whiteout keeps them. */
  private readonly unpacked = new Set<string>();
  /** Dir mtimes by cleaned root-relative path, re-resolved inside the root at the end (a later entry may turn a parent into a symlink). */
  private readonly dirTimes: { rel: string; mtime: number }[] = [];
  /** Parent dirs already resolved and made in this layer, by root-relative path (see parentDir). */
  private readonly parents = new Map<string, string>();
  private readonly setfattr: string | undefined;
  private xattrNoteLogged = false;

  constructor(private readonly options: ApplyLayerOptions) {
    this.root = path.resolve(options.root);
    this.logger = options.logger ?? new NullLogger();
    const bin = options.setfattrBin ?? SETFATTR_BIN;
    this.setfattr = toolExists(bin) ? bin : undefined;
  }

  async apply(entry: TarEntry): Promise<void> {
    const rel = cleanEntryPath(entry.name);
    if (rel === '') {
      // "./": the root itself. Only its metadata can change; it cannot be replaced.
      if (entry.type !== 'directory') throw new UnsafeEntryError(entry.name, `a ${entry.type} cannot replace the layer root`);
      await this.setMetadata(entry, this.root, '');
      return;
    }
    const base = path.posix.basename(rel);
    const parentRel = path.posix.dirname(rel) === '.' ? '' : path.posix.dirname(rel);
    if (base.startsWith(WHITEOUT_PREFIX)) {
      const parentHost = await resolveInRoot(this.root, parentRel, { followFinal: true, entryName: entry.name });
      this.assertWithin(entry, parentHost);
      this.parents.clear();
      await this.whiteout(entry, base, parentRel, parentHost);
      return;
    }
    const parentHost = await this.parentDir(entry, parentRel);
    const hostPath = path.join(parentHost, base);
    this.assertWithin(entry, hostPath);

    const existing = await lstatOrUndefined(hostPath);
    if (existing && !(existing.isDirectory() && entry.type === 'directory')) {
      if (entry.type === 'hardlink' && (await this.linkTarget(entry)) === hostPath) return; // a link to itself: nothing to do
      this.parents.clear();
      await this.guard(entry, hostPath, () => fsp.rm(hostPath, { recursive: true, force: true }));
    }

    switch (entry.type) {
      case 'directory':
        if (!existing?.isDirectory()) await this.guard(entry, hostPath, () => fsp.mkdir(hostPath, { mode: 0o700 }));
        break;
      case 'file':
        await this.writeFile(entry, hostPath);
        break;
      case 'symlink':
        if (!entry.linkname) throw new UnsafeEntryError(entry.name, 'a symlink with an empty target');
        this.parents.clear();
        await this.guard(entry, hostPath, () => fsp.symlink(entry.linkname, hostPath));
        break;
      case 'hardlink': {
        const target = await this.linkTarget(entry);
        const st = await lstatOrUndefined(target);
        if (!st)
          throw new UnsafeEntryError(entry.name, `its hard link target "${entry.linkname}" is not in this layer or the layers below`);
        if (st.isDirectory()) throw new UnsafeEntryError(entry.name, `its hard link target "${entry.linkname}" is a directory`);
        await this.guard(entry, hostPath, () => fsp.link(target, hostPath));
        this.unpacked.add(rel);
        return; // a hard link shares its target's inode: owner, mode and times are the target's
      }
      case 'char':
      case 'block':
      case 'fifo':
        this.devices++;
        if (!this.options.allowDevices) {
          this.skip(
            entry,
            `${entry.type === 'fifo' ? 'fifo' : 'device node'} not made: device nodes and fifos are only made for privileged plugins`,
          );
          return;
        }
        await this.mknod(entry, hostPath);
        break;
    }
    this.unpacked.add(rel);
    await this.setMetadata(entry, hostPath, rel);
  }

  /** Directory mtimes, set last and deepest first, once nothing below them changes. */
  async finishDirectoryTimes(): Promise<void> {
    // As containerd does: the path is resolved again inside the root, never followed out of it, and skipped when no longer a dir.
    for (const { rel, mtime } of this.dirTimes.reverse()) {
      let hostPath = this.root;
      try {
        hostPath = await resolveInRoot(this.root, rel, { followFinal: false });
        if (!isWithin(this.root, hostPath)) continue;
        const st = await fsp.lstat(hostPath);
        if (!st.isDirectory()) continue;
        await fsp.lutimes(hostPath, mtime, mtime);
      } catch (err) {
        if (errno(err) !== 'ENOENT') throw new LayerWriteError('(directory times)', hostPath, err);
      }
    }
  }

  /**
   * The host dir of an entry's parent, resolved inside the root and made
   * when missing. Remembered for the next entries of the same dir: a made
   * parent is a real directory, so only a removal or a new symlink can
   * change what any remembered path resolves to, and both forget them all.
   */
  private async parentDir(entry: TarEntry, parentRel: string): Promise<string> {
    const known = this.parents.get(parentRel);
    if (known !== undefined) return known;
    const parentHost = await resolveInRoot(this.root, parentRel, { followFinal: true, entryName: entry.name });
    this.assertWithin(entry, parentHost);
    await this.guard(entry, parentHost, () => fsp.mkdir(parentHost, { recursive: true, mode: 0o755 }));
    this.parents.set(parentRel, parentHost);
    return parentHost;
  }

  private assertWithin(entry: TarEntry, hostPath: string): void {
    // resolveInRoot cannot return a path outside the root; this is the belt to its braces.
    if (!isWithin(this.root, hostPath)) throw new UnsafeEntryError(entry.name, `it resolves to ${hostPath}, outside the layer root`);
  }

  private async guard<T>(entry: TarEntry, hostPath: string, op: () => Promise<T>): Promise<T> {
    try {
      return await op();
    } catch (err) {
      if (err instanceof UnpackError) throw err;
      throw new LayerWriteError(entry.name, hostPath, err);
    }
  }

  private skip(entry: TarEntry, reason: string): void {
    this.skipped.push({ name: entry.name, reason });
    this.logger.debug('layer entry skipped', { entry: entry.name, reason, layer: this.options.layer.diffId });
  }

  private async linkTarget(entry: TarEntry): Promise<string> {
    let targetRel: string;
    try {
      targetRel = cleanEntryPath(entry.linkname);
    } catch {
      throw new UnsafeEntryError(entry.name, `its hard link target "${entry.linkname}" climbs above the layer root with ".."`);
    }
    if (targetRel === '') throw new UnsafeEntryError(entry.name, 'a hard link to the layer root');
    const target = await resolveInRoot(this.root, targetRel, { followFinal: false, entryName: entry.name });
    this.assertWithin(entry, target);
    return target;
  }

  private async whiteout(entry: TarEntry, base: string, parentRel: string, parentHost: string): Promise<void> {
    if (base === WHITEOUT_OPAQUE) {
      await this.guard(entry, parentHost, () => this.emptyOpaque(parentRel, parentHost));
      return;
    }
    if (base.startsWith(WHITEOUT_META_PREFIX)) return; // aufs bookkeeping (.wh..wh.plnk, .wh..wh.aufs): not content
    const name = base.slice(WHITEOUT_PREFIX.length);
    if (name === '' || name === '.' || name === '..') throw new UnsafeEntryError(entry.name, 'a whiteout of no name');
    const victim = path.join(parentHost, name);
    this.assertWithin(entry, victim);
    // rm never follows the victim if it is a symlink; through an overlay mount the kernel records the deletion as a whiteout.
    await this.guard(entry, victim, () => fsp.rm(victim, { recursive: true, force: true }));
  }

  /** Removes everything under `dirHost` this layer did not write (containerd's opaque-whiteout walk). */
  private async emptyOpaque(dirRel: string, dirHost: string): Promise<void> {
    let names: string[];
    try {
      names = await fsp.readdir(dirHost);
    } catch (err) {
      if (errno(err) === 'ENOENT' || errno(err) === 'ENOTDIR') return;
      throw err;
    }
    for (const name of names) {
      const childRel = dirRel ? `${dirRel}/${name}` : name;
      const childHost = path.join(dirHost, name);
      if (!this.unpacked.has(childRel)) {
        await fsp.rm(childHost, { recursive: true, force: true });
        continue;
      }
      const st = await lstatOrUndefined(childHost);
      if (st?.isDirectory()) await this.emptyOpaque(childRel, childHost);
    }
  }

  private async writeFile(entry: TarEntry, hostPath: string): Promise<void> {
    const handle = await this.guard(entry, hostPath, () =>
      fsp.open(hostPath, fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL | fsc.O_NOFOLLOW, 0o600),
    );
    try {
      for await (const chunk of entry.body) {
        let off = 0;
        while (off < chunk.length) {
          const { bytesWritten } = await this.guard(entry, hostPath, () => handle.write(chunk, off, chunk.length - off));
          off += bytesWritten;
        }
        this.bytes += chunk.length;
      }
    } finally {
      await handle.close();
    }
  }

  private async mknod(entry: TarEntry, hostPath: string): Promise<void> {
    const args =
      entry.type === 'fifo'
        ? ['-m', '0600', hostPath, 'p']
        : ['-m', '0600', hostPath, entry.type === 'char' ? 'c' : 'b', String(entry.devmajor), String(entry.devminor)];
    await this.guard(entry, hostPath, () => runTool(this.options.mknodBin ?? MKNOD_BIN, args));
  }

  private async setMetadata(entry: TarEntry, hostPath: string, rel: string): Promise<void> {
    await this.guard(entry, hostPath, () => fsp.lchown(hostPath, entry.uid, entry.gid));
    if (entry.xattrs.size) await this.setXattrs(entry, hostPath);
    if (entry.type !== 'symlink') await this.guard(entry, hostPath, () => fsp.chmod(hostPath, entry.mode));
    if (entry.type === 'directory') this.dirTimes.push({ rel, mtime: entry.mtime });
    else await this.guard(entry, hostPath, () => fsp.lutimes(hostPath, entry.mtime, entry.mtime));
  }

  private async setXattrs(entry: TarEntry, hostPath: string): Promise<void> {
    // overlayfs's own attributes (opaque, redirect, metacopy…) in a layer dir would steer the kernel when the dir is a lower layer: never taken from an image.
    const overlayKeys = [...entry.xattrs.keys()].filter((k) => k.startsWith(OVERLAY_XATTR_PREFIX));
    if (overlayKeys.length)
      this.skip(entry, `xattrs ${overlayKeys.join(', ')} refused: overlayfs's own attributes never come from an image`);
    const xattrs = [...entry.xattrs].filter(([k]) => !k.startsWith(OVERLAY_XATTR_PREFIX));
    if (!xattrs.length) return;
    if (!this.setfattr) {
      if (!this.xattrNoteLogged) {
        this.xattrNoteLogged = true;
        this.logger.debug('layer xattrs skipped: the setfattr command is not installed (Debian package attr)', {
          layer: this.options.layer.diffId,
        });
      }
      this.skipped.push({
        name: entry.name,
        reason: `xattrs ${[...entry.xattrs.keys()].join(', ')} not set: the setfattr command is not installed on this node (install the attr package)`,
      });
      return;
    }
    for (const [key, value] of xattrs) {
      try {
        await runTool(this.setfattr, ['-h', '-n', key, '-v', `0x${value.toString('hex')}`, hostPath]);
      } catch (err) {
        // The filesystem may not take this namespace (trusted.* unprivileged, security.* on some filesystems): note it, go on.
        this.skip(entry, `xattr ${key} not set: ${(err as Error).message}`);
      }
    }
  }
}
