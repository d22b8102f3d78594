// ControllerHoldings: what a controller plugin holds beyond the catalog's
// records, made and listed on request for the volume commands — snapshots
// (create, delete, list) and the plugin's own list of volumes, each tied back
// to the catalog's volume ids where it knows them. Interactive: nothing here
// waits for a controller that is not ready now.
import { abortReason, errorMessage, ValidationError, type IClock, type Logger } from '@csiplug/core';
import { CSIError, GrpcStatus, isNotFound, type CSIClient } from '@csiplug/csi';
import type { ControllerPluginInfo, ICSIManager } from '@csiplug/csimanager';
import { PluginTypeCSIController } from '@csiplug/registry';
import type { IVolumeStateStore } from '@csiplug/state';
import {
  VolumeNotFoundError,
  VolumePluginError,
  VolumePluginNotFoundError,
  VolumePluginUnavailableError,
  VolumeUnsupportedError,
} from './errors';
import { topologiesOf } from './topology';
import type { ExternalVolumeView, Page, PageRequest, SnapshotCallOptions, SnapshotView } from './volume-catalog-service';
import type { LaneOutcome, VolumeLane } from './volume-lanes';
import { isVolumeRecord, type VolumeRecord } from './volume-record';

/** A protobuf int64 (a decimal string or number) as a number; undefined when absent or not a count. */
export function int64(v: unknown): number | undefined {
  const n = typeof v === 'string' || typeof v === 'number' ? Number(v) : NaN;
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

/** A plugin that cannot list its snapshots: an error naming it, never an empty list (which would say it has none). */
function doesNotListSnapshots(pluginId: string, why: string, cause?: unknown): VolumeUnsupportedError {
  return new VolumeUnsupportedError(
    '',
    pluginId,
    `plugin "${pluginId}" does not list snapshots (${why}); the snapshots it holds cannot be shown here: see them on the storage system itself`,
    cause === undefined ? undefined : { cause },
  );
}

export class ControllerHoldings {
  constructor(
    private readonly csi: ICSIManager,
    private readonly state: IVolumeStateStore,
    private readonly clock: IClock,
    private readonly log: Logger,
    /** The catalog's record of a volume, undefined when there is none (or it is malformed). */
    private readonly read: (id: string) => VolumeRecord | undefined,
    /** A client for the plugin's active controller registration, disposed after `fn`. */
    private readonly withController: <T>(pluginId: string, fn: (client: CSIClient) => Promise<T>) => Promise<T>,
    /** Runs `fn` holding the volume's lane, then fires its event. */
    private readonly inLanes: <T>(
      lane: VolumeLane,
      volumeId: string,
      signal: AbortSignal | undefined,
      fn: () => Promise<LaneOutcome<T>>,
    ) => Promise<T>,
  ) {}

  async createSnapshot(
    volumeId: string,
    name?: string,
    options: SnapshotCallOptions & { parameters?: Record<string, string> } = {},
  ): Promise<SnapshotView> {
    const { signal } = options;
    const snapshotName = name ?? `${volumeId}-snapshot-${this.clock.now()}`;
    if (typeof snapshotName !== 'string' || snapshotName.trim() === '' || snapshotName.length > 128) {
      throw new ValidationError(`a snapshot name must be 1 to 128 characters, got ${JSON.stringify(name)}`, 'name');
    }
    return this.inLanes('snapshot', volumeId, signal, async () => {
      const record = this.read(volumeId);
      if (!record) throw new VolumeNotFoundError(volumeId);
      this.readyController(record.pluginId, `snapshot volume "${volumeId}"`, 'supportsSnapshots', 'CREATE_DELETE_SNAPSHOT', volumeId);
      let snapshot;
      try {
        snapshot = (
          await this.withController(record.pluginId, (c) =>
            c.createSnapshot(
              {
                sourceVolumeId: record.externalId,
                name: snapshotName,
                // Nomad's CreateSnapshot: the call's secrets over the volume's, the call's parameters.
                secrets: { ...record.secrets, ...options.secrets },
                parameters: { ...options.parameters },
              },
              { signal },
            ),
          )
        ).snapshot;
      } catch (err) {
        if (signal?.aborted) throw abortReason(signal);
        throw new VolumePluginError(
          volumeId,
          record.pluginId,
          `could not snapshot volume "${volumeId}" (external id ${record.externalId}) on plugin "${record.pluginId}": ${errorMessage(err)}`,
          { cause: err },
        );
      }
      if (!snapshot?.snapshotId)
        throw new VolumePluginError(
          volumeId,
          record.pluginId,
          `plugin "${record.pluginId}" answered CreateSnapshot for volume "${volumeId}" without a snapshot id; the plugin is broken`,
        );
      const view = this.snapshotView(record.pluginId, snapshot);
      this.log.info('snapshot created', {
        volume_id: volumeId,
        plugin_id: record.pluginId,
        snapshot_id: view.id,
        size_bytes: view.sizeBytes,
      });
      return {
        value: view,
        event: {
          volumeId,
          kind: 'snapshot-created',
          message: `snapshot "${view.id}" of volume "${volumeId}" created by plugin ${record.pluginId} (${view.sizeBytes} bytes)`,
        },
      };
    });
  }

  async deleteSnapshot(pluginId: string, snapshotId: string, options: SnapshotCallOptions = {}): Promise<void> {
    const { signal } = options;
    if (typeof snapshotId !== 'string' || snapshotId === '') throw new ValidationError('a snapshot id is required', 'snapshot_id');
    this.readyController(pluginId, `delete snapshot "${snapshotId}"`, 'supportsSnapshots', 'CREATE_DELETE_SNAPSHOT');
    try {
      await this.withController(pluginId, (c) => c.deleteSnapshot({ snapshotId, secrets: { ...options.secrets } }, { signal }));
    } catch (err) {
      if (signal?.aborted) throw abortReason(signal);
      // Gone already: deleted, as CSI says.
      if (isNotFound(err)) return;
      throw new VolumePluginError('', pluginId, `could not delete snapshot "${snapshotId}" on plugin "${pluginId}": ${errorMessage(err)}`, {
        cause: err,
      });
    }
    this.log.info('snapshot deleted', { plugin_id: pluginId, snapshot_id: snapshotId });
  }

  async listSnapshots(
    pluginId: string,
    request: PageRequest & { sourceVolumeId?: string; secrets?: Record<string, string> } = {},
  ): Promise<Page<SnapshotView>> {
    try {
      this.readyController(pluginId, 'list snapshots', 'capabilities.listSnapshots', 'LIST_SNAPSHOTS');
    } catch (err) {
      if (err instanceof VolumeUnsupportedError) throw doesNotListSnapshots(pluginId, 'its controller does not offer LIST_SNAPSHOTS');
      throw err;
    }
    let sourceExternal: string | undefined;
    if (request.sourceVolumeId !== undefined) {
      const source = this.read(request.sourceVolumeId);
      if (!source) throw new VolumeNotFoundError(request.sourceVolumeId);
      sourceExternal = source.externalId;
    }
    let response;
    try {
      response = await this.withController(pluginId, (c) =>
        c.listSnapshots(
          {
            maxEntries: this.perPage(request.perPage),
            startingToken: request.nextToken ?? '',
            sourceVolumeId: sourceExternal ?? '',
            snapshotId: '',
            secrets: { ...request.secrets },
          },
          { signal: request.signal },
        ),
      );
    } catch (err) {
      if (request.signal?.aborted) throw abortReason(request.signal);
      // Offered, then refused (democratic-csi's local-hostpath does): the plugin does not list them, which is no empty list.
      if (err instanceof CSIError && !err.local && err.grpcCode === GrpcStatus.UNIMPLEMENTED)
        throw doesNotListSnapshots(pluginId, 'its controller answered the list with UNIMPLEMENTED', err);
      throw new VolumePluginError('', pluginId, `could not list the snapshots of plugin "${pluginId}": ${errorMessage(err)}`, {
        cause: err,
      });
    }
    const ours = this.byExternalId(pluginId);
    const items = (response.entries ?? []).flatMap((e) => (e.snapshot?.snapshotId ? [this.snapshotView(pluginId, e.snapshot, ours)] : []));
    return { items, ...(response.nextToken ? { nextToken: response.nextToken } : {}) };
  }

  async listExternalVolumes(pluginId: string, request: PageRequest = {}): Promise<Page<ExternalVolumeView>> {
    this.readyController(pluginId, 'list its volumes', 'supportsListVolumes', 'LIST_VOLUMES');
    let response;
    try {
      response = await this.withController(pluginId, (c) =>
        c.listVolumes({ maxEntries: this.perPage(request.perPage), startingToken: request.nextToken ?? '' }, { signal: request.signal }),
      );
    } catch (err) {
      if (request.signal?.aborted) throw abortReason(request.signal);
      throw new VolumePluginError('', pluginId, `could not list the volumes of plugin "${pluginId}": ${errorMessage(err)}`, { cause: err });
    }
    const ours = this.byExternalId(pluginId);
    const items = (response.entries ?? []).flatMap((e): ExternalVolumeView[] => {
      const v = e.volume;
      if (!v?.volumeId) return [];
      const capacity = int64(v.capacityBytes);
      const reachable = topologiesOf(v.accessibleTopology);
      const published = e.status?.publishedNodeIds ?? [];
      const condition = e.status?.volumeCondition;
      return [
        {
          pluginId,
          externalId: v.volumeId,
          ...(capacity ? { capacityBytes: capacity } : {}),
          ...(reachable ? { accessibleTopology: reachable } : {}),
          ...(published.length ? { publishedNodeIds: [...published] } : {}),
          ...(condition ? { condition: { abnormal: condition.abnormal === true, message: condition.message ?? '' } } : {}),
          ...(ours.has(v.volumeId) ? { volumeId: ours.get(v.volumeId)! } : {}),
        },
      ];
    });
    return { items, ...(response.nextToken ? { nextToken: response.nextToken } : {}) };
  }

  /** A page size for a plugin list: a non-negative integer (0: the plugin's choice). */
  private perPage(n: number | undefined): number {
    if (n === undefined) return 0;
    if (!Number.isInteger(n) || n < 0 || n > 2 ** 31 - 1)
      throw new ValidationError(`per_page must be a whole number of 0 or more, got ${n}`, 'per_page');
    return n;
  }

  /** The catalog's volumes of `pluginId` by their external id. */
  private byExternalId(pluginId: string): Map<string, string> {
    const out = new Map<string, string>();
    for (const v of this.state.listVolumes<unknown>()) if (isVolumeRecord(v) && v.pluginId === pluginId) out.set(v.externalId, v.id);
    return out;
  }

  private snapshotView(
    pluginId: string,
    s: {
      snapshotId?: string;
      sourceVolumeId?: string;
      sizeBytes?: unknown;
      creationTime?: { seconds?: unknown; nanos?: number } | null;
      readyToUse?: boolean;
    },
    catalogued: Map<string, string> = this.byExternalId(pluginId),
  ): SnapshotView {
    const seconds = int64(s.creationTime?.seconds);
    const source = s.sourceVolumeId ?? '';
    const ours = catalogued.get(source);
    return {
      pluginId,
      id: s.snapshotId ?? '',
      externalSourceVolumeId: source,
      ...(ours !== undefined ? { sourceVolumeId: ours } : {}),
      sizeBytes: int64(s.sizeBytes) ?? 0,
      ...(seconds !== undefined ? { createTime: seconds * 1000 + Math.floor((s.creationTime?.nanos ?? 0) / 1e6) } : {}),
      ready: s.readyToUse === true,
    };
  }

  /**
   * The plugin's controller, registered and healthy now, offering `capability`
   * (a ControllerPluginInfo flag, or `capabilities.<name>`); a
   * VolumePluginError that says which is missing otherwise. For the
   * interactive volume commands: they do not wait for a controller.
   */
  private readyController(pluginId: string, what: string, flag: string, capability: string, volumeId = ''): ControllerPluginInfo {
    const info = this.csi.pluginInfo(PluginTypeCSIController, pluginId);
    if (!info?.controller)
      throw new VolumePluginNotFoundError(
        volumeId,
        pluginId,
        `cannot ${what}: no controller of plugin "${pluginId}" is registered on this node (run the plugin's controller or monolith job)`,
      );
    if (!info.healthy)
      throw new VolumePluginUnavailableError(
        volumeId,
        pluginId,
        `cannot ${what}: the controller of plugin "${pluginId}" is not healthy (${info.description})`,
      );
    const offered = flag.startsWith('capabilities.')
      ? (info.controller.capabilities as unknown as Record<string, boolean>)[flag.slice('capabilities.'.length)]
      : (info.controller as unknown as Record<string, boolean>)[flag];
    if (!offered)
      throw new VolumeUnsupportedError(
        volumeId,
        pluginId,
        `cannot ${what}: the controller of plugin "${pluginId}" does not offer ${capability}`,
      );
    return info.controller;
  }
}
