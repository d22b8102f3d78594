// The hostpath CSI plugin: volumes are directories under the state dir;
// NodeStageVolume bind-mounts the volume at the staging path and
// NodePublishVolume bind-mounts staging onto the target (read-only when
// asked). A volume's capacity is a quota it is measured against (stats,
// volume condition), grown by ControllerExpandVolume; snapshots are tar
// archives of a volume's directory; a volume can be created from a snapshot
// (restore) or from another volume (clone). Every call is idempotent and
// answers with the status code the CSI spec names for each failure.
import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { type Logger, sameStringMap } from '@csiplug/core';
import {
  type CsiServerHandlers,
  type NodeServerHandlers,
  type ControllerServerHandlers,
  type IdentityServerHandlers,
  csiStatus,
} from '@csiplug/csi';
import { TOPOLOGY_KEY, type PluginConfig } from './config';
import { archiveDir, bytesIn, copyDir, extractArchive } from './data';
import type { AttachmentStore } from './faults';
import { type Mounter } from './mounter';
import { backingOf, topMountAt } from './mountinfo';
import { otherWriterTarget } from './single-writer';
import {
  READ_ONLY_MODES,
  requireField,
  requireAbsolute,
  unsupported,
  capacityRange,
  page,
  byCreation,
  showTopology,
  contentSourceOf,
  describeSource,
  dataFailure,
  refuseUnsupported,
  sameBacking,
} from './rpc-checks';
import { type ContentSourceRecord, type PublishedStore, type SnapshotRecord, type VolumeRecord, type VolumeStore } from './volume-store';

export { TOPOLOGY_KEY };

export interface HostPathPluginDeps {
  config: PluginConfig;
  store: VolumeStore;
  /** Where this node publishes volumes (and, read, where every node does). */
  published: PublishedStore;
  /** The controller's attachments when controller publish is on (faults.ts): their nodes count as published nodes. */
  attachments?: AttachmentStore;
  mounter: Mounter;
  logger: Logger;
  version: string;
  /** When Probe starts answering ready (ms since epoch). */
  readyAt: () => number;
}

export class HostPathPlugin {
  private readonly busy = new Set<string>();
  /** Keys read by operations under way (a snapshot or clone reading a volume's data, a restore reading a snapshot). */
  private readonly readers = new Map<string, number>();

  constructor(private readonly deps: HostPathPluginDeps) {}

  handlers(): CsiServerHandlers {
    const { mode } = this.deps.config;
    return {
      identity: this.identity(),
      controller: mode === 'node' ? undefined : this.controller(),
      node: mode === 'controller' ? undefined : this.node(),
    };
  }

  /**
   * Serialises work per key (a volume id, a name, a snapshot): a second call
   * while one is in flight — or while `key` is being read (shared) — gets
   * ABORTED, as the spec allows.
   */
  private async exclusive<T>(key: string, rpc: string, fn: () => Promise<T>): Promise<T> {
    if (this.busy.has(key) || this.readers.has(key))
      throw csiStatus.aborted(`${rpc}: an operation on ${key} is already in progress; retry later`);
    this.busy.add(key);
    try {
      return await fn();
    } finally {
      this.busy.delete(key);
    }
  }

  /** Runs `fn` while reading `key`: many readers at once, but not while an exclusive operation (e.g. a delete) holds it (ABORTED). */
  private async shared<T>(key: string, rpc: string, fn: () => Promise<T>): Promise<T> {
    if (this.busy.has(key)) throw csiStatus.aborted(`${rpc}: an operation on ${key} is already in progress; retry later`);
    this.readers.set(key, (this.readers.get(key) ?? 0) + 1);
    try {
      return await fn();
    } finally {
      const left = (this.readers.get(key) ?? 1) - 1;
      if (left > 0) this.readers.set(key, left);
      else this.readers.delete(key);
    }
  }

  private async volume(id: string, rpc: string): Promise<VolumeRecord> {
    const v = await this.deps.store.get(id);
    if (!v) throw csiStatus.notFound(`${rpc}: volume "${id}" does not exist`);
    return v;
  }

  /** Walks of volumes under way: stats calls of one volume at once share one walk rather than pile up. */
  private readonly walks = new Map<string, Promise<bigint>>();

  private bytesOf(volumeId: string, dir: string): Promise<bigint> {
    const under = this.walks.get(volumeId);
    if (under) return under;
    const walk = bytesIn(dir);
    this.walks.set(volumeId, walk);
    const done = () => {
      if (this.walks.get(volumeId) === walk) this.walks.delete(volumeId);
    };
    walk.then(done, done);
    return walk;
  }

  private topology() {
    return { segments: { ...this.deps.config.topology } };
  }

  /** Whether this node is in `segments`: every key of it has the node's value (keys are case-insensitive). */
  private inTopology(segments: Record<string, string> | null | undefined): boolean {
    const mine = new Map(Object.entries(this.deps.config.topology).map(([k, v]) => [k.toLowerCase(), v]));
    return Object.entries(segments ?? {}).every(([k, v]) => mine.get(k.toLowerCase()) === v);
  }

  private toVolume(v: VolumeRecord) {
    const contentSource = v.contentSource
      ? v.contentSource.type === 'snapshot'
        ? { snapshot: { snapshotId: v.contentSource.id } }
        : { volume: { volumeId: v.contentSource.id } }
      : null;
    return {
      volumeId: v.id,
      capacityBytes: v.capacityBytes,
      volumeContext: { name: v.name },
      accessibleTopology: [v.topology ? { segments: { ...v.topology } } : this.topology()],
      contentSource,
    };
  }

  private toSnapshot(s: SnapshotRecord) {
    const ms = Date.parse(s.createdAt);
    return {
      snapshotId: s.id,
      sourceVolumeId: s.sourceVolumeId,
      sizeBytes: s.sizeBytes,
      creationTime: { seconds: String(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 },
      readyToUse: s.readyToUse,
    };
  }

  /** Node ids where each volume is published: NodePublishVolume's records of every node, and controller attachments when on. */
  private async publishedNodes(): Promise<Map<string, string[]>> {
    const nodes = await this.deps.published.nodesByVolume();
    if (this.deps.attachments) {
      for (const [volumeId, attached] of Object.entries(this.deps.attachments.read())) {
        nodes.set(volumeId, [...new Set([...(nodes.get(volumeId) ?? []), ...attached])].sort());
      }
    }
    return nodes;
  }

  /** The controller's view of a volume's condition: cheap, its backing directory is there. */
  private async controllerCondition(v: VolumeRecord): Promise<{ abnormal: boolean; message: string }> {
    const dir = this.deps.store.dirOf(v.id);
    const st = await fs.stat(dir).catch(() => undefined);
    if (!st?.isDirectory()) return { abnormal: true, message: `the backing directory ${dir} of volume "${v.id}" is gone` };
    return { abnormal: false, message: `the backing directory ${dir} is there` };
  }

  private async volumeStatus(v: VolumeRecord, published: Map<string, string[]>) {
    return { publishedNodeIds: published.get(v.id) ?? [], volumeCondition: await this.controllerCondition(v) };
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
          // A directory's quota grows while it is in use: nothing to unmount.
          { volumeExpansion: { type: 'ONLINE' as const } },
        ],
      }),
      Probe: () => ({ ready: { value: Date.now() >= this.deps.readyAt() } }),
    };
  }

  // -------------------------------------------------------------- controller

  /**
   * Creates a new volume named `name`, filled from `source` when given (the
   * caller holds the source, so it is not deleted meanwhile). Its capacity
   * is what was asked for, at least what the source held.
   */
  private async createVolume(
    name: string,
    required: bigint,
    limit: bigint,
    parameters: Record<string, string>,
    source: ContentSourceRecord | undefined,
  ) {
    const rpc = 'CreateVolume';
    const { store, logger } = this.deps;
    let sourceCapacity = 0n;
    if (source?.type === 'snapshot') {
      const snap = await store.snapshot(source.id);
      if (!snap) throw csiStatus.notFound(`${rpc}: snapshot "${source.id}" (volume_content_source) does not exist`);
      sourceCapacity = BigInt(snap.sourceCapacityBytes);
    } else if (source?.type === 'volume') {
      const src = await store.get(source.id);
      if (!src) throw csiStatus.notFound(`${rpc}: volume "${source.id}" (volume_content_source) does not exist`);
      sourceCapacity = BigInt(src.capacityBytes);
    }
    if (limit > 0n && sourceCapacity > limit) {
      throw csiStatus.outOfRange(
        `${rpc}: limit_bytes ${limit} is smaller than the ${sourceCapacity} bytes of its source ${describeSource(source)}`,
      );
    }
    const asked = required > 0n ? required : limit;
    const record: VolumeRecord = {
      id: randomUUID(),
      name,
      capacityBytes: String(asked > sourceCapacity ? asked : sourceCapacity),
      parameters: { ...parameters },
      createdAt: new Date().toISOString(),
      ...(source ? { contentSource: source } : {}),
      topology: { ...this.deps.config.topology },
    };
    const dir = store.dirOf(record.id);
    // Filled under another name, then renamed: a failed restore or clone leaves no half volume.
    const filling = path.join(store.volumesDir, `.creating-${record.id}`);
    await fs.mkdir(filling, { mode: 0o777 });
    try {
      await fs.chmod(filling, 0o777);
      try {
        if (source?.type === 'snapshot') {
          // A snapshot whose archive is gone (deleted by hand, a crash midway through its delete) is gone: NOT_FOUND, not INTERNAL.
          if (!(await fs.stat(store.archiveOf(source.id)).catch(() => undefined)))
            throw csiStatus.notFound(`${rpc}: snapshot "${source.id}" has no archive any more`);
          await extractArchive(store.archiveOf(source.id), filling);
        } else if (source?.type === 'volume') {
          const warning = await copyDir(store.dirOf(source.id), filling);
          if (warning) logger.warn('clone of a volume in use: a file changed while it was copied', { volumeId: source.id, tar: warning });
        }
      } catch (err) {
        throw dataFailure(err, rpc, source?.type === 'snapshot' ? `restore snapshot "${source.id}"` : `clone volume "${source?.id}"`);
      }
      await fs.rename(filling, dir);
    } catch (err) {
      await fs.rm(filling, { recursive: true, force: true });
      throw err;
    }
    try {
      await store.put(record);
    } catch (err) {
      await fs.rm(dir, { recursive: true, force: true });
      throw err;
    }
    logger.info('created volume', {
      volumeId: record.id,
      name: record.name,
      capacityBytes: record.capacityBytes,
      contentSource: record.contentSource,
    });
    return { volume: this.toVolume(record) };
  }

  /** Cuts a snapshot named `name` of volume `sourceVolumeId` (the caller holds the volume's data). */
  private async createSnapshot(name: string, sourceVolumeId: string) {
    const rpc = 'CreateSnapshot';
    const { store, logger } = this.deps;
    const v = await store.get(sourceVolumeId);
    if (!v) throw csiStatus.notFound(`${rpc}: source volume "${sourceVolumeId}" does not exist`);
    const record: SnapshotRecord = {
      id: randomUUID(),
      name,
      sourceVolumeId: v.id,
      sourceCapacityBytes: v.capacityBytes,
      sizeBytes: '0',
      createdAt: new Date().toISOString(),
      readyToUse: true,
    };
    const archive = store.archiveOf(record.id);
    await fs.mkdir(store.snapshotsDir, { recursive: true, mode: 0o700 });
    let warning: string | undefined;
    try {
      warning = await archiveDir(store.dirOf(v.id), archive);
    } catch (err) {
      throw dataFailure(err, rpc, `archive volume "${v.id}"`);
    }
    if (warning)
      logger.warn('snapshot of a volume in use: a file changed while it was archived', {
        volumeId: v.id,
        snapshotId: record.id,
        tar: warning,
      });
    try {
      // CSI's size_bytes: what a restore must get at least — the source's capacity (the archive holds headers too); the archive's size when there is none.
      record.sizeBytes = BigInt(v.capacityBytes) > 0n ? v.capacityBytes : String((await fs.stat(archive)).size);
      await store.putSnapshot(record);
    } catch (err) {
      await fs.rm(archive, { force: true });
      throw err;
    }
    logger.info('created snapshot', { snapshotId: record.id, name: record.name, sourceVolumeId: v.id, sizeBytes: record.sizeBytes });
    return { snapshot: this.toSnapshot(record) };
  }

  private controller(): ControllerServerHandlers {
    const { store, logger } = this.deps;
    return {
      ControllerGetCapabilities: () => ({
        capabilities: (
          [
            'CREATE_DELETE_VOLUME',
            'LIST_VOLUMES',
            'GET_CAPACITY',
            'SINGLE_NODE_MULTI_WRITER',
            'EXPAND_VOLUME',
            'CREATE_DELETE_SNAPSHOT',
            'LIST_SNAPSHOTS',
            'CLONE_VOLUME',
            'LIST_VOLUMES_PUBLISHED_NODES',
            'GET_VOLUME',
            'VOLUME_CONDITION',
          ] as const
        ).map((type) => ({ rpc: { type } })),
      }),

      CreateVolume: (req) => {
        const rpc = 'CreateVolume';
        requireField(req.name, 'name', rpc);
        if (!req.volumeCapabilities.length)
          throw csiStatus.invalidArgument(`${rpc}: volume_capabilities must list at least one capability`);
        for (const cap of req.volumeCapabilities) {
          const why = unsupported(cap, rpc);
          if (why) throw csiStatus.invalidArgument(`${rpc}: ${why}`);
        }
        const { required, limit } = capacityRange(req.capacityRange, rpc);
        // Volumes live on this node only: a requisite topology must include it (preferred ones are only a preference).
        const requisite = req.accessibilityRequirements?.requisite ?? [];
        if (requisite.length && !requisite.some((t) => this.inTopology(t.segments))) {
          throw csiStatus.resourceExhausted(
            `${rpc}: cannot provision in the requested topology ${requisite.map((t) => showTopology(t.segments)).join(' or ')}: this plugin offers only ${showTopology(this.deps.config.topology)}`,
          );
        }
        const source = contentSourceOf(req.volumeContentSource, rpc);
        return this.exclusive(`name ${req.name}`, rpc, async () => {
          const existing = await store.byName(req.name);
          if (existing) {
            const cap = BigInt(existing.capacityBytes);
            const fits = cap >= required && (limit === 0n || cap <= limit);
            if (!fits || !sameStringMap(existing.parameters, req.parameters)) {
              throw csiStatus.alreadyExists(
                `${rpc}: volume "${req.name}" exists (id ${existing.id}, ${cap} bytes) with a different capacity or parameters`,
              );
            }
            if (existing.contentSource?.type !== source?.type || existing.contentSource?.id !== source?.id) {
              throw csiStatus.alreadyExists(
                `${rpc}: volume "${req.name}" exists (id ${existing.id}) from ${describeSource(existing.contentSource)}, not from ${describeSource(source)}`,
              );
            }
            return { volume: this.toVolume(existing) };
          }
          // The source is held (read) from its lookup to the end of the copy: no delete in between.
          const holdSource = <T>(fn: () => Promise<T>): Promise<T> =>
            source?.type === 'snapshot'
              ? this.shared(`snapshot ${source.id}`, rpc, fn)
              : source?.type === 'volume'
                ? this.shared(`data of volume ${source.id}`, rpc, fn)
                : fn();
          return holdSource(() => this.createVolume(req.name, required, limit, req.parameters ?? {}, source));
        });
      },

      DeleteVolume: (req) => {
        const rpc = 'DeleteVolume';
        requireField(req.volumeId, 'volume_id', rpc);
        // Not while a snapshot or clone reads its data (ABORTED; retry).
        return this.exclusive(req.volumeId, rpc, () =>
          this.exclusive(`data of volume ${req.volumeId}`, rpc, async () => {
            const v = await store.get(req.volumeId);
            if (!v) return {}; // already gone: success, per spec
            const dir = store.dirOf(v.id);
            const mounts = await this.deps.mounter.mounts();
            const backing = backingOf(mounts, dir);
            const users = mounts.filter((m) => sameBacking(m, backing) && m.mountPoint !== dir).map((m) => m.mountPoint);
            if (users.length)
              throw csiStatus.failedPrecondition(
                `${rpc}: volume "${v.id}" is still mounted at ${users.join(', ')}; unpublish and unstage it first`,
              );
            await fs.rm(dir, { recursive: true, force: true });
            await store.remove(v.id);
            logger.info('deleted volume', { volumeId: v.id, name: v.name });
            return {};
          }),
        );
      },

      ValidateVolumeCapabilities: async (req) => {
        const rpc = 'ValidateVolumeCapabilities';
        requireField(req.volumeId, 'volume_id', rpc);
        if (!req.volumeCapabilities.length)
          throw csiStatus.invalidArgument(`${rpc}: volume_capabilities must list at least one capability`);
        const v = await this.volume(req.volumeId, rpc);
        for (const cap of req.volumeCapabilities) {
          const why = unsupported(cap, rpc);
          if (why) return { message: why };
        }
        return {
          confirmed: {
            volumeContext: req.volumeContext,
            volumeCapabilities: req.volumeCapabilities,
            parameters: { ...v.parameters, ...req.parameters },
          },
        };
      },

      ListVolumes: async (req) => {
        const { items, nextToken } = page((await store.list()).sort(byCreation), req, 'ListVolumes');
        const published = await this.publishedNodes();
        return {
          entries: await Promise.all(items.map(async (v) => ({ volume: this.toVolume(v), status: await this.volumeStatus(v, published) }))),
          nextToken,
        };
      },

      ControllerGetVolume: async (req) => {
        const rpc = 'ControllerGetVolume';
        requireField(req.volumeId, 'volume_id', rpc);
        const v = await this.volume(req.volumeId, rpc);
        return { volume: this.toVolume(v), status: await this.volumeStatus(v, await this.publishedNodes()) };
      },

      GetCapacity: async (req) => {
        for (const cap of req.volumeCapabilities) if (unsupported(cap, 'GetCapacity')) return { availableCapacity: '0' };
        // Nothing can be provisioned outside this node's topology.
        if (req.accessibleTopology && !this.inTopology(req.accessibleTopology.segments)) return { availableCapacity: '0' };
        const st = await fs.statfs(this.deps.store.volumesDir, { bigint: true });
        return { availableCapacity: String(st.bavail * st.bsize) };
      },

      ControllerExpandVolume: (req) => {
        const rpc = 'ControllerExpandVolume';
        requireField(req.volumeId, 'volume_id', rpc);
        if (!req.capacityRange) throw csiStatus.invalidArgument(`${rpc}: capacity_range is required`);
        const { required } = capacityRange(req.capacityRange, rpc);
        refuseUnsupported(req.volumeCapability, rpc);
        return this.exclusive(req.volumeId, rpc, async () => {
          const v = await this.volume(req.volumeId, rpc);
          const current = BigInt(v.capacityBytes);
          // Already that large (or larger): success at the current size; a volume never shrinks.
          if (required <= current) return { capacityBytes: String(current), nodeExpansionRequired: true };
          const updated = await store.update(v.id, (r) => ({ ...r, capacityBytes: String(required) }));
          if (!updated) throw csiStatus.notFound(`${rpc}: volume "${v.id}" does not exist`);
          logger.info('expanded volume', { volumeId: v.id, from: String(current), to: updated.capacityBytes });
          return { capacityBytes: updated.capacityBytes, nodeExpansionRequired: true };
        });
      },

      CreateSnapshot: (req) => {
        const rpc = 'CreateSnapshot';
        requireField(req.name, 'name', rpc);
        requireField(req.sourceVolumeId, 'source_volume_id', rpc);
        return this.exclusive(`snapshot name ${req.name}`, rpc, async () => {
          const existing = await store.snapshotByName(req.name);
          if (existing) {
            if (existing.sourceVolumeId !== req.sourceVolumeId) {
              throw csiStatus.alreadyExists(
                `${rpc}: snapshot "${req.name}" exists (id ${existing.id}) of volume "${existing.sourceVolumeId}", not of "${req.sourceVolumeId}"`,
              );
            }
            return { snapshot: this.toSnapshot(existing) };
          }
          // The source is held (read) from its lookup to the end of the archive: no delete in between.
          return this.shared(`data of volume ${req.sourceVolumeId}`, rpc, () => this.createSnapshot(req.name, req.sourceVolumeId));
        });
      },

      DeleteSnapshot: (req) => {
        const rpc = 'DeleteSnapshot';
        requireField(req.snapshotId, 'snapshot_id', rpc);
        // Not while a volume is restored from it (ABORTED; retry).
        return this.exclusive(`snapshot ${req.snapshotId}`, rpc, async () => {
          const s = await store.snapshot(req.snapshotId);
          if (!s) return {}; // unknown or already gone: success, per spec
          // The record first: a crash in between leaves an archive nobody lists, never a listed snapshot with no archive.
          await store.removeSnapshot(s.id);
          await fs.rm(store.archiveOf(s.id), { force: true });
          logger.info('deleted snapshot', { snapshotId: s.id, name: s.name });
          return {};
        });
      },

      ListSnapshots: async (req) => {
        const all = (await store.snapshots())
          .filter((s) => (!req.snapshotId || s.id === req.snapshotId) && (!req.sourceVolumeId || s.sourceVolumeId === req.sourceVolumeId))
          .sort(byCreation);
        const { items, nextToken } = page(all, req, 'ListSnapshots');
        return { entries: items.map((s) => ({ snapshot: this.toSnapshot(s) })), nextToken };
      },
    };
  }

  // -------------------------------------------------------------------- node

  private node(): NodeServerHandlers {
    const { store, mounter, logger, config, published } = this.deps;
    return {
      NodeGetCapabilities: () => ({
        capabilities: (
          ['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'VOLUME_CONDITION', 'SINGLE_NODE_MULTI_WRITER', 'EXPAND_VOLUME'] as const
        ).map((type) => ({ rpc: { type } })),
      }),

      NodeGetInfo: () => ({
        nodeId: config.nodeId,
        maxVolumesPerNode: String(config.maxVolumesPerNode),
        accessibleTopology: this.topology(),
      }),

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
        if (!req.stagingTargetPath)
          throw csiStatus.failedPrecondition(
            `${rpc}: staging_target_path is required: this plugin has STAGE_UNSTAGE_VOLUME; call NodeStageVolume first`,
          );
        const staging = requireAbsolute(req.stagingTargetPath, 'staging_target_path', rpc);
        const why = unsupported(req.volumeCapability, rpc);
        if (why) throw csiStatus.failedPrecondition(`${rpc}: ${why}`);
        const flags = (req.volumeCapability?.mount?.mountFlags ?? []).filter((f) => f !== 'ro' && f !== 'rw');
        const readonly =
          req.readonly ||
          (req.volumeCapability?.mount?.mountFlags ?? []).includes('ro') ||
          READ_ONLY_MODES.includes(String(req.volumeCapability?.accessMode?.mode));
        return this.exclusive(req.volumeId, rpc, async () => {
          const v = await this.volume(req.volumeId, rpc);
          const mounts = await mounter.mounts();
          const want = backingOf(mounts, store.dirOf(v.id));
          if (!sameBacking(topMountAt(mounts, await resolved(staging)), want)) {
            throw csiStatus.failedPrecondition(`${rpc}: volume "${v.id}" is not staged at ${staging}; call NodeStageVolume first`);
          }
          const mode = String(req.volumeCapability?.accessMode?.mode);
          const targets = await published.targets(v.id);
          // Checked before the idempotent case too: a new target that resolves to the
          // writer's own published path (a symlink to it) is a second writer, not a retry.
          const writer = await otherWriterTarget({ mode, readonly, target, targets, mounts, backing: want, resolve: resolved });
          if (writer)
            throw csiStatus.failedPrecondition(
              `${rpc}: volume "${v.id}" is SINGLE_NODE_SINGLE_WRITER and already published read-write at ${writer}; unpublish it there first`,
            );
          const current = topMountAt(mounts, await resolved(target));
          if (current) {
            const isRo = current.options.includes('ro');
            if (sameBacking(current, want) && isRo === readonly) {
              await published.add(v.id, target); // already published like this (recorded, should a crash have come between)
              return {};
            }
            throw csiStatus.alreadyExists(
              `${rpc}: ${target} is already mounted ${sameBacking(current, want) ? `with readonly=${isRo}` : `from ${current.source}${current.root}`}; unpublish it first`,
            );
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
          try {
            await published.add(v.id, target);
          } catch (err) {
            await mounter.unmount(target).catch(() => undefined);
            throw err;
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
          await published.remove(req.volumeId, target);
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
        const backing = store.dirOf(v.id);
        // The capacity is a quota: what the volume's files hold is measured against it.
        const capacity = BigInt(v.capacityBytes);
        const used = await this.bytesOf(v.id, backing);
        const fsAvailable = st.bavail * st.bsize;
        const total = capacity > 0n ? capacity : st.blocks * st.bsize;
        let available = capacity > 0n ? capacity - used : fsAvailable;
        if (available > fsAvailable) available = fsAvailable; // the quota cannot give what the disk has not got
        if (available < 0n) available = 0n;
        let condition = await conditionAt(p, backing);
        if (capacity > 0n && used > capacity) {
          const over = `volume "${v.id}" uses ${used} bytes, over its capacity of ${capacity} bytes`;
          condition = { abnormal: true, message: condition.abnormal ? `${condition.message}; ${over}` : over };
        }
        return {
          usage: [
            { unit: 'BYTES' as const, total: String(total), available: String(available), used: String(used) },
            { unit: 'INODES' as const, total: String(st.files), available: String(st.ffree), used: String(st.files - st.ffree) },
          ],
          volumeCondition: condition,
        };
      },

      NodeExpandVolume: (req) => {
        const rpc = 'NodeExpandVolume';
        requireField(req.volumeId, 'volume_id', rpc);
        requireField(req.volumePath, 'volume_path', rpc);
        const volumePath = requireAbsolute(req.volumePath, 'volume_path', rpc);
        const staging = req.stagingTargetPath ? requireAbsolute(req.stagingTargetPath, 'staging_target_path', rpc) : undefined;
        const { required } = capacityRange(req.capacityRange, rpc);
        refuseUnsupported(req.volumeCapability, rpc);
        return this.exclusive(req.volumeId, rpc, async () => {
          const v = await this.volume(req.volumeId, rpc);
          await this.mustShow(volumePath, v, 'volume_path', rpc);
          if (staging) await this.mustShow(staging, v, 'staging_target_path', rpc);
          // A directory has nothing to resize: the quota the controller recorded is the capacity (0: none).
          const capacity = BigInt(v.capacityBytes);
          if (capacity > 0n && required > capacity) {
            throw csiStatus.outOfRange(
              `${rpc}: required_bytes ${required} is more than the ${capacity} bytes volume "${v.id}" has; call ControllerExpandVolume first`,
            );
          }
          logger.info('expanded volume on the node', { volumeId: v.id, volumePath, capacityBytes: v.capacityBytes });
          return { capacityBytes: v.capacityBytes };
        });
      },
    };
  }

  /** NOT_FOUND unless `p` exists and shows the volume's backing directory (a mount of it, or the directory itself). */
  private async mustShow(p: string, v: VolumeRecord, field: string, rpc: string): Promise<void> {
    const backing = this.deps.store.dirOf(v.id);
    const [at, want] = await Promise.all([
      fs.stat(p, { bigint: true }).catch(() => undefined),
      fs.stat(backing, { bigint: true }).catch(() => undefined),
    ]);
    if (!at) throw csiStatus.notFound(`${rpc}: ${field} ${p} does not exist`);
    if (!want) throw csiStatus.notFound(`${rpc}: the backing directory ${backing} of volume "${v.id}" is gone`);
    if (at.dev !== want.dev || at.ino !== want.ino)
      throw csiStatus.notFound(`${rpc}: ${field} ${p} does not show volume "${v.id}" (not staged or published there)`);
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
  if (!want)
    return { abnormal: true, message: `the backing directory ${backing} of the volume is gone; ${p} shows what was mounted before` };
  if (at.dev !== want.dev || at.ino !== want.ino) {
    return {
      abnormal: true,
      message: `${p} no longer shows the backing directory ${backing} (device:inode ${at.dev}:${at.ino}, expected ${want.dev}:${want.ino}); unpublish (and unstage) it and mount it again`,
    };
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
