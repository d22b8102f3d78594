// The hostpath CSI plugin: volumes are directories under the state dir;
// NodeStageVolume bind-mounts the volume at the staging path and
// NodePublishVolume bind-mounts staging onto the target (read-only when
// asked). Every call is idempotent and answers with the status code the
// CSI spec names for each failure.
import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { Logger, sameStringMap } from '@csiplug/core';
import {
  ACCESS_MODES,
  AccessMode,
  CsiServerHandlers,
  NodeServerHandlers,
  ControllerServerHandlers,
  IdentityServerHandlers,
  VolumeCapability__Output,
  accessTypeOf,
  csiStatus,
} from '@csiplug/csi';
import type { PluginConfig } from './config';
import { Mounter } from './mounter';
import { MountInfo, backingOf, topMountAt } from './mountinfo';
import { VolumeRecord, VolumeStore } from './volume-store';

export const TOPOLOGY_KEY = 'topology.hostpath.csiplug.io/node';

/** Access modes a node-local directory can honour. */
const SUPPORTED_MODES: readonly AccessMode[] = ['SINGLE_NODE_WRITER', 'SINGLE_NODE_READER_ONLY', 'SINGLE_NODE_SINGLE_WRITER', 'SINGLE_NODE_MULTI_WRITER'];
const READ_ONLY_MODES: readonly string[] = ['SINGLE_NODE_READER_ONLY', 'MULTI_NODE_READER_ONLY'];
/** Mount flags that make sense on a bind mount and are applied on remount. */
const SUPPORTED_FLAGS: readonly string[] = ['ro', 'rw', 'noexec', 'nosuid', 'nodev', 'noatime', 'nodiratime', 'relatime'];

type Cap = VolumeCapability__Output | null | undefined;

function requireField(value: unknown, field: string, rpc: string): asserts value is string {
  if (typeof value !== 'string' || value === '') throw csiStatus.invalidArgument(`${rpc}: ${field} is required`);
}

function requireAbsolute(p: string, field: string, rpc: string): string {
  if (!path.isAbsolute(p)) throw csiStatus.invalidArgument(`${rpc}: ${field} must be an absolute path, got "${p}"`);
  return path.normalize(p);
}

/** Why the plugin cannot serve `cap`; undefined when it can. Malformed capabilities are INVALID_ARGUMENT. */
function unsupported(cap: Cap, rpc: string): string | undefined {
  if (!cap) throw csiStatus.invalidArgument(`${rpc}: volume_capability is required`);
  const type = accessTypeOf(cap);
  if (!type) throw csiStatus.invalidArgument(`${rpc}: volume_capability must set exactly one access type (mount or block)`);
  const mode = String(cap.accessMode?.mode ?? 'UNKNOWN');
  if (!ACCESS_MODES.includes(mode as AccessMode)) throw csiStatus.invalidArgument(`${rpc}: volume_capability.access_mode is required`);
  if (type === 'block') return 'block access is not supported: hostpath volumes are directories';
  if (!SUPPORTED_MODES.includes(mode as AccessMode)) return `access mode ${mode} is not supported: hostpath volumes live on one node (supported: ${SUPPORTED_MODES.join(', ')})`;
  if (cap.mount?.fsType) return `fs type "${cap.mount.fsType}" is not supported: hostpath volumes are bind mounts of directories (leave fs_type empty)`;
  const bad = (cap.mount?.mountFlags ?? []).filter((f) => !SUPPORTED_FLAGS.includes(f));
  if (bad.length) return `mount flags ${bad.join(', ')} are not supported (supported: ${SUPPORTED_FLAGS.join(', ')})`;
  if (cap.mount?.volumeMountGroup) return 'volume_mount_group is not supported';
  return undefined;
}

function sameBacking(m: MountInfo | undefined, want: { device: string; root: string } | undefined): boolean {
  return !!m && !!want && m.device === want.device && m.root === want.root;
}

export interface HostPathPluginDeps {
  config: PluginConfig;
  store: VolumeStore;
  mounter: Mounter;
  logger: Logger;
  version: string;
  /** When Probe starts answering ready (ms since epoch). */
  readyAt: () => number;
}

export class HostPathPlugin {
  private readonly busy = new Set<string>();

  constructor(private readonly deps: HostPathPluginDeps) {}

  handlers(): CsiServerHandlers {
    const { mode } = this.deps.config;
    return {
      identity: this.identity(),
      controller: mode === 'node' ? undefined : this.controller(),
      node: mode === 'controller' ? undefined : this.node(),
    };
  }

  /** Serialises work per volume: a second call while one is in flight gets ABORTED, as the spec allows. */
  private async exclusive<T>(key: string, rpc: string, fn: () => Promise<T>): Promise<T> {
    if (this.busy.has(key)) throw csiStatus.aborted(`${rpc}: an operation on ${key} is already in progress; retry later`);
    this.busy.add(key);
    try {
      return await fn();
    } finally {
      this.busy.delete(key);
    }
  }

  private async volume(id: string, rpc: string): Promise<VolumeRecord> {
    const v = await this.deps.store.get(id);
    if (!v) throw csiStatus.notFound(`${rpc}: volume "${id}" does not exist`);
    return v;
  }

  private topology() {
    return { segments: { [TOPOLOGY_KEY]: this.deps.config.nodeId } };
  }

  private toVolume(v: VolumeRecord) {
    return { volumeId: v.id, capacityBytes: v.capacityBytes, volumeContext: { name: v.name }, accessibleTopology: [this.topology()] };
  }

  // ---------------------------------------------------------------- identity

  private identity(): IdentityServerHandlers {
    const { config } = this.deps;
    return {
      GetPluginInfo: () => ({ name: config.name, vendorVersion: this.deps.version, manifest: { mode: config.mode } }),
      GetPluginCapabilities: () => ({
        capabilities: [
          ...(config.mode === 'node' ? [] : [{ service: { type: 'CONTROLLER_SERVICE' as const } }]),
          { service: { type: 'VOLUME_ACCESSIBILITY_CONSTRAINTS' as const } },
        ],
      }),
      Probe: () => ({ ready: { value: Date.now() >= this.deps.readyAt() } }),
    };
  }

  // -------------------------------------------------------------- controller

  private controller(): ControllerServerHandlers {
    const { store, logger } = this.deps;
    return {
      ControllerGetCapabilities: () => ({
        capabilities: (['CREATE_DELETE_VOLUME', 'LIST_VOLUMES', 'GET_CAPACITY', 'SINGLE_NODE_MULTI_WRITER'] as const).map((type) => ({ rpc: { type } })),
      }),

      CreateVolume: (req) => {
        const rpc = 'CreateVolume';
        requireField(req.name, 'name', rpc);
        if (!req.volumeCapabilities.length) throw csiStatus.invalidArgument(`${rpc}: volume_capabilities must list at least one capability`);
        for (const cap of req.volumeCapabilities) {
          const why = unsupported(cap, rpc);
          if (why) throw csiStatus.invalidArgument(`${rpc}: ${why}`);
        }
        if (req.volumeContentSource?.type) throw csiStatus.invalidArgument(`${rpc}: creating a volume from a ${req.volumeContentSource.type} is not supported`);
        const required = BigInt(req.capacityRange?.requiredBytes || '0');
        const limit = BigInt(req.capacityRange?.limitBytes || '0');
        if (required < 0n || limit < 0n) throw csiStatus.invalidArgument(`${rpc}: capacity_range values must not be negative`);
        if (limit > 0n && required > limit) throw csiStatus.outOfRange(`${rpc}: required_bytes ${required} exceeds limit_bytes ${limit}`);
        return this.exclusive(`name ${req.name}`, rpc, async () => {
          const existing = await store.byName(req.name);
          if (existing) {
            const cap = BigInt(existing.capacityBytes);
            const fits = cap >= required && (limit === 0n || cap <= limit);
            if (!fits || !sameStringMap(existing.parameters, req.parameters)) {
              throw csiStatus.alreadyExists(`${rpc}: volume "${req.name}" exists (id ${existing.id}, ${cap} bytes) with a different capacity or parameters`);
            }
            return { volume: this.toVolume(existing) };
          }
          const record: VolumeRecord = {
            id: randomUUID(),
            name: req.name,
            capacityBytes: String(required > 0n ? required : limit),
            parameters: { ...(req.parameters ?? {}) },
            createdAt: new Date().toISOString(),
          };
          await fs.mkdir(store.dirOf(record.id), { recursive: true, mode: 0o777 });
          await fs.chmod(store.dirOf(record.id), 0o777);
          await store.put(record);
          logger.info('created volume', { volumeId: record.id, name: record.name, capacityBytes: record.capacityBytes });
          return { volume: this.toVolume(record) };
        });
      },

      DeleteVolume: (req) => {
        const rpc = 'DeleteVolume';
        requireField(req.volumeId, 'volume_id', rpc);
        return this.exclusive(req.volumeId, rpc, async () => {
          const v = await store.get(req.volumeId);
          if (!v) return {}; // already gone: success, per spec
          const dir = store.dirOf(v.id);
          const mounts = await this.deps.mounter.mounts();
          const backing = backingOf(mounts, dir);
          const users = mounts.filter((m) => sameBacking(m, backing) && m.mountPoint !== dir).map((m) => m.mountPoint);
          if (users.length) throw csiStatus.failedPrecondition(`${rpc}: volume "${v.id}" is still mounted at ${users.join(', ')}; unpublish and unstage it first`);
          await fs.rm(dir, { recursive: true, force: true });
          await store.remove(v.id);
          logger.info('deleted volume', { volumeId: v.id, name: v.name });
          return {};
        });
      },

      ValidateVolumeCapabilities: async (req) => {
        const rpc = 'ValidateVolumeCapabilities';
        requireField(req.volumeId, 'volume_id', rpc);
        if (!req.volumeCapabilities.length) throw csiStatus.invalidArgument(`${rpc}: volume_capabilities must list at least one capability`);
        const v = await this.volume(req.volumeId, rpc);
        for (const cap of req.volumeCapabilities) {
          const why = unsupported(cap, rpc);
          if (why) return { message: why };
        }
        return { confirmed: { volumeContext: req.volumeContext, volumeCapabilities: req.volumeCapabilities, parameters: { ...v.parameters, ...req.parameters } } };
      },

      ListVolumes: async (req) => {
        const all = (await store.list()).sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
        let start = 0;
        if (req.startingToken) {
          start = Number(req.startingToken);
          if (!Number.isInteger(start) || start < 0 || start > all.length) throw csiStatus.aborted(`ListVolumes: starting_token "${req.startingToken}" is not valid; start again without one`);
        }
        if (req.maxEntries < 0) throw csiStatus.invalidArgument('ListVolumes: max_entries must not be negative');
        const end = req.maxEntries > 0 ? Math.min(all.length, start + req.maxEntries) : all.length;
        return {
          entries: all.slice(start, end).map((v) => ({ volume: this.toVolume(v) })),
          nextToken: end < all.length ? String(end) : '',
        };
      },

      GetCapacity: async (req) => {
        for (const cap of req.volumeCapabilities) if (unsupported(cap, 'GetCapacity')) return { availableCapacity: '0' };
        const st = await fs.statfs(this.deps.store.volumesDir, { bigint: true });
        return { availableCapacity: String(st.bavail * st.bsize) };
      },
    };
  }

  // -------------------------------------------------------------------- node

  private node(): NodeServerHandlers {
    const { store, mounter, logger, config } = this.deps;
    return {
      NodeGetCapabilities: () => ({
        capabilities: (['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'VOLUME_CONDITION', 'SINGLE_NODE_MULTI_WRITER'] as const).map((type) => ({ rpc: { type } })),
      }),

      NodeGetInfo: () => ({ nodeId: config.nodeId, maxVolumesPerNode: '0', accessibleTopology: this.topology() }),

      NodeStageVolume: (req) => {
        const rpc = 'NodeStageVolume';
        requireField(req.volumeId, 'volume_id', rpc);
        requireField(req.stagingTargetPath, 'staging_target_path', rpc);
        const staging = requireAbsolute(req.stagingTargetPath, 'staging_target_path', rpc);
        const why = unsupported(req.volumeCapability, rpc);
        if (why) throw csiStatus.failedPrecondition(`${rpc}: ${why}`);
        return this.exclusive(req.volumeId, rpc, async () => {
          const v = await this.volume(req.volumeId, rpc);
          const dir = store.dirOf(v.id);
          await fs.mkdir(staging, { recursive: true });
          const mounts = await mounter.mounts();
          const current = topMountAt(mounts, await resolved(staging));
          if (current) {
            if (sameBacking(current, backingOf(mounts, dir))) return {}; // already staged
            throw csiStatus.alreadyExists(`${rpc}: ${staging} already has something else mounted (${current.source}${current.root})`);
          }
          await mounter.bind(dir, staging);
          if (READ_ONLY_MODES.includes(String(req.volumeCapability?.accessMode?.mode))) {
            try {
              await mounter.remount(staging, ['ro']);
            } catch (err) {
              // Never leave a read-only stage writable: a retry would take it as done.
              await mounter.unmount(staging).catch(() => undefined);
              throw err;
            }
          }
          logger.info('staged volume', { volumeId: v.id, staging });
          return {};
        });
      },

      NodeUnstageVolume: (req) => {
        const rpc = 'NodeUnstageVolume';
        requireField(req.volumeId, 'volume_id', rpc);
        requireField(req.stagingTargetPath, 'staging_target_path', rpc);
        const staging = requireAbsolute(req.stagingTargetPath, 'staging_target_path', rpc);
        return this.exclusive(req.volumeId, rpc, async () => {
          // The path is the caller's: clear it first, so even a volume this
          // plugin no longer knows (NOT_FOUND below) leaves no mount behind.
          await this.unmountAll(staging, rpc);
          await removeDir(staging);
          await this.volume(req.volumeId, rpc);
          logger.info('unstaged volume', { volumeId: req.volumeId, staging });
          return {};
        });
      },

      NodePublishVolume: (req) => {
        const rpc = 'NodePublishVolume';
        requireField(req.volumeId, 'volume_id', rpc);
        requireField(req.targetPath, 'target_path', rpc);
        const target = requireAbsolute(req.targetPath, 'target_path', rpc);
        if (!req.stagingTargetPath) throw csiStatus.failedPrecondition(`${rpc}: staging_target_path is required: this plugin has STAGE_UNSTAGE_VOLUME; call NodeStageVolume first`);
        const staging = requireAbsolute(req.stagingTargetPath, 'staging_target_path', rpc);
        const why = unsupported(req.volumeCapability, rpc);
        if (why) throw csiStatus.failedPrecondition(`${rpc}: ${why}`);
        const flags = (req.volumeCapability?.mount?.mountFlags ?? []).filter((f) => f !== 'ro' && f !== 'rw');
        const readonly = req.readonly || (req.volumeCapability?.mount?.mountFlags ?? []).includes('ro') || READ_ONLY_MODES.includes(String(req.volumeCapability?.accessMode?.mode));
        return this.exclusive(req.volumeId, rpc, async () => {
          const v = await this.volume(req.volumeId, rpc);
          const mounts = await mounter.mounts();
          const want = backingOf(mounts, store.dirOf(v.id));
          if (!sameBacking(topMountAt(mounts, await resolved(staging)), want)) {
            throw csiStatus.failedPrecondition(`${rpc}: volume "${v.id}" is not staged at ${staging}; call NodeStageVolume first`);
          }
          const current = topMountAt(mounts, await resolved(target));
          if (current) {
            const isRo = current.options.includes('ro');
            if (sameBacking(current, want) && isRo === readonly) return {}; // already published like this
            throw csiStatus.alreadyExists(`${rpc}: ${target} is already mounted ${sameBacking(current, want) ? `with readonly=${isRo}` : `from ${current.source}${current.root}`}; unpublish it first`);
          }
          await fs.mkdir(target, { recursive: true });
          await mounter.bind(staging, target);
          if (readonly || flags.length) {
            try {
              await mounter.remount(target, [readonly ? 'ro' : 'rw', ...flags]);
            } catch (err) {
              await mounter.unmount(target).catch(() => undefined);
              throw err;
            }
          }
          logger.info('published volume', { volumeId: v.id, target, readonly });
          return {};
        });
      },

      NodeUnpublishVolume: (req) => {
        const rpc = 'NodeUnpublishVolume';
        requireField(req.volumeId, 'volume_id', rpc);
        requireField(req.targetPath, 'target_path', rpc);
        const target = requireAbsolute(req.targetPath, 'target_path', rpc);
        return this.exclusive(req.volumeId, rpc, async () => {
          await this.unmountAll(target, rpc);
          await removeDir(target);
          await this.volume(req.volumeId, rpc);
          logger.info('unpublished volume', { volumeId: req.volumeId, target });
          return {};
        });
      },

      NodeGetVolumeStats: async (req) => {
        const rpc = 'NodeGetVolumeStats';
        requireField(req.volumeId, 'volume_id', rpc);
        requireField(req.volumePath, 'volume_path', rpc);
        const p = requireAbsolute(req.volumePath, 'volume_path', rpc);
        const v = await this.volume(req.volumeId, rpc);
        let st;
        try {
          st = await fs.statfs(p, { bigint: true });
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw csiStatus.notFound(`${rpc}: volume path ${p} does not exist`);
          throw err;
        }
        return {
          usage: [
            { unit: 'BYTES' as const, total: String(st.blocks * st.bsize), available: String(st.bavail * st.bsize), used: String((st.blocks - st.bfree) * st.bsize) },
            { unit: 'INODES' as const, total: String(st.files), available: String(st.ffree), used: String(st.files - st.ffree) },
          ],
          volumeCondition: await conditionAt(p, store.dirOf(v.id)),
        };
      },
    };
  }

  /** Unmounts whatever is stacked at `p`; a path that is not mounted is fine. */
  private async unmountAll(p: string, rpc: string): Promise<void> {
    for (let i = 0; i < 16; i++) {
      if (!topMountAt(await this.deps.mounter.mounts(), await resolved(p))) return;
      await this.deps.mounter.unmount(p);
    }
    throw csiStatus.internal(`${rpc}: ${p} is still mounted after 16 unmounts`);
  }
}

/**
 * VOLUME_CONDITION of a staged or published path: abnormal when it no longer
 * shows the volume's backing directory — the same device and inode (a bind
 * mount shows its source's) — e.g. the directory was replaced or removed
 * while the mount stayed, holding the old one.
 */
async function conditionAt(p: string, backing: string): Promise<{ abnormal: boolean; message: string }> {
  const [at, want] = await Promise.all([fs.stat(p, { bigint: true }), fs.stat(backing, { bigint: true }).catch(() => undefined)]);
  if (!want) return { abnormal: true, message: `the backing directory ${backing} of the volume is gone; ${p} shows what was mounted before` };
  if (at.dev !== want.dev || at.ino !== want.ino) {
    return { abnormal: true, message: `${p} no longer shows the backing directory ${backing} (device:inode ${at.dev}:${at.ino}, expected ${want.dev}:${want.ino}); unpublish (and unstage) it and mount it again` };
  }
  return { abnormal: false, message: `${p} shows the backing directory ${backing}` };
}

/**
 * The path as the kernel lists it in mountinfo (symlinks resolved); the path
 * itself when it does not exist (nothing can be mounted there).
 */
async function resolved(p: string): Promise<string> {
  try {
    return await fs.realpath(p);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return p;
    throw err;
  }
}

async function removeDir(p: string): Promise<void> {
  try {
    await fs.rmdir(p);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return;
    if (code === 'ENOTDIR') return fs.rm(p, { force: true });
    throw err;
  }
}
