// VolumeCatalog: the agent's local volume catalog. It keeps volumes (Nomad's
// volume specs plus what the plugin said about them) and their claims in the
// client state (`volumes/<id>`, written through before any call returns),
// creates and deletes volumes through the controller plugin, and grants
// claims by access mode (claim-rules.ts), publishing through the controller
// when it advertises PUBLISH_UNPUBLISH_VOLUME. Mutations of one volume run
// one at a time (a snapshot in a lane of its own: volume-lanes.ts); events
// fire after the lock is released. Every spec it is given goes through the
// bound IVolumeSpecValidator first. Create, expand and delete write their
// intent before the plugin call (volume-op-intent.ts); VolumeOpResumer
// settles those an agent left.
import { Disposable, Emitter, Event, IClock, ILogger, Logger, ValidationError, abortReason, crashPoint, errorMessage } from '@csiplug/core';
import { CreateVolumeRequest, isNotFound } from '@csiplug/csi';
import { ICSIManager, volumeCapabilityFor } from '@csiplug/csimanager';
import { IPluginRegistry, PluginTypeCSIController, PluginTypeCSINode } from '@csiplug/registry';
import { IVolumeStateStore } from '@csiplug/state';
import { inject, injectable } from 'tsyringe';
import { checkClaim, claimModeOf } from './claim-rules';
import { csiVolumeName } from './csi-volume-name';
import {
  VolumeBeingDeletedError,
  VolumeExistsError,
  VolumeInUseError,
  VolumeNotFoundError,
  VolumePluginError,
  VolumeUnchangedError,
  VolumeUnsupportedError,
} from './errors';
import { assertExternalIdFree } from './external-id-holder';
import { IVolumeSpecValidator } from './tokens';
import type {
  ExternalVolumeView,
  Page,
  PageRequest,
  SnapshotCallOptions,
  SnapshotView,
  VolumeCatalogEvent,
  VolumeCatalogService,
  VolumeExpansion,
} from './volume-catalog-service';
import { ClaimError, type ClaimableVolume, type VolumeClaimRequest, type VolumeClaimResult } from './volume-claimer';
import { VolumeOpIntents, type VolumeOpView } from './volume-op-intent';
import { VolumeOpResumer } from './volume-op-resumer';
import { checkWithPlugin } from './register-check';
import { externalIdToRegister, mergeRegistered, registerUpdateGrowth } from './register-update';
import { VolumeRecord, isVolumeRecord, recordOfCreated, toClaimable, toVolumeView } from './volume-record';
import type { VolumeSpec, VolumeSpecValidator } from './volume-spec';
import { VolumeLanes, type VolumeLane, type LaneOutcome as Outcome } from './volume-lanes';
import { ControllerHoldings, int64 } from './controller-holdings';
import { VolumePlacement } from './volume-placement';
import { ControllerCalls } from './controller-calls';
import type { VolumeClaimView, VolumeView } from './volume-view';

/** A copy of `map` without `key`; undefined when nothing is left. */
function withoutKey(map: Record<string, string> | undefined, key: string): Record<string, string> | undefined {
  if (!map) return undefined;
  const { [key]: _gone, ...rest } = map;
  return Object.keys(rest).length ? rest : undefined;
}

@injectable()
export class VolumeCatalog implements VolumeCatalogService, Disposable {
  private readonly log: Logger;
  private readonly lanes = new VolumeLanes();
  /** The calls to a volume's controller plugin (waits, publish, unpublish), with the catalog's errors. */
  private readonly controllers: ControllerCalls;
  /** Topology and max_volumes_per_node, checked at claim time. */
  private readonly placement: VolumePlacement;
  /** A controller's snapshots and volumes, made and listed on request. */
  private readonly holdings: ControllerHoldings;
  private readonly changeEmitter: Emitter<VolumeCatalogEvent>;
  readonly onDidChange: Event<VolumeCatalogEvent>;
  private readonly intents: VolumeOpIntents;
  private readonly resumer: VolumeOpResumer;

  constructor(
    @inject(IVolumeStateStore) private readonly state: IVolumeStateStore,
    @inject(ICSIManager) private readonly csi: ICSIManager,
    @inject(IPluginRegistry) registry: IPluginRegistry,
    @inject(IClock) private readonly clock: IClock,
    @inject(ILogger) logger: ILogger,
    @inject(IVolumeSpecValidator) private readonly validateSpec: VolumeSpecValidator,
  ) {
    this.log = logger.child({ component: 'volume-catalog' });
    this.changeEmitter = new Emitter({
      onListenerError: (err) =>
        this.log.error('a volume catalog event listener threw; the other listeners still ran', { error: errorMessage(err) }),
    });
    this.onDidChange = this.changeEmitter.event;
    this.intents = new VolumeOpIntents(state);
    this.controllers = new ControllerCalls(csi, registry, this.log);
    this.placement = new VolumePlacement(csi, state);
    this.holdings = new ControllerHoldings(
      csi,
      state,
      clock,
      this.log,
      (id) => this.read(id),
      (p, fn) => this.controllers.withController(p, fn),
      (lane, id, signal, fn) => this.inLanes(lane, id, signal, fn),
    );
    this.resumer = new VolumeOpResumer(
      this.intents,
      state,
      csi,
      {
        locked: (id, fn) => this.inLanes('both', id, undefined, fn),
        withController: (p, fn) => this.controllers.withController(p, fn),
        now: () => clock.now(),
      },
      this.log,
    );
  }

  dispose(): void {
    this.resumer.dispose();
    this.changeEmitter.dispose();
  }

  /** Settles the creates, expands and deletes a previous agent cut short, each once its controller plugin is ready (volumesModule.start). */
  resumeInterruptedOps(): void {
    this.resumer.start();
  }

  interruptedOp(volumeId: string): VolumeOpView | undefined {
    const intent = this.intents.get(volumeId);
    return intent && { op: intent.op, since: intent.since };
  }

  // ---- reading ---------------------------------------------------------------

  listVolumes(): VolumeView[] {
    return this.state
      .listVolumes<unknown>()
      .filter((r): r is VolumeRecord => this.checkRecord(r))
      .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      .map((r) => toVolumeView(r, this.schedulable(r)));
  }

  getVolume(id: string): VolumeView | undefined {
    const record = this.read(id);
    return record && toVolumeView(record, this.schedulable(record));
  }

  async lookup(volumeId: string): Promise<ClaimableVolume> {
    const record = this.read(volumeId);
    if (!record) throw this.notRegistered(volumeId);
    return toClaimable(record);
  }

  // ---- register, create, deregister, delete ---------------------------------

  async registerVolume(spec: VolumeSpec): Promise<VolumeView> {
    const checked = this.checkSpec(spec);
    return this.locked(checked.id, undefined, async () => {
      const existing = this.read(checked.id);
      const externalId = externalIdToRegister(checked, existing);
      // Nomad's register of a volume it has updates it (register-update.ts says what may change).
      if (existing) return this.updateRegistered(existing, checked);
      for (const [field, value] of [
        ['snapshot_id', checked.snapshotId],
        ['clone_id', checked.cloneId],
      ] as const) {
        if (value !== undefined)
          throw new ValidationError(
            `volume "${checked.id}": ${field} is for "csiplug volume create" (a new volume from a source); an existing volume is registered by its external_id`,
            field,
          );
      }
      await checkWithPlugin(
        { csi: this.csi, log: this.log, withController: (p, fn) => this.controllers.withController(p, fn) },
        checked,
        externalId,
      );
      assertExternalIdFree(this.state.listVolumes<unknown>().filter(isVolumeRecord), checked.id, checked.pluginId, externalId);
      const record: VolumeRecord = { ...checked, externalId, claims: [], createdAt: this.clock.now() };
      const required = checked.topologyRequest?.required;
      if (required?.length) record.accessibleTopology = required.map((t) => ({ segments: { ...t.segments } }));
      this.state.putVolume(record.id, record);
      this.log.info('volume registered', { volume_id: record.id, plugin_id: record.pluginId, external_id: externalId });
      return {
        value: this.view(record),
        event: {
          volumeId: record.id,
          kind: 'registered',
          message: `volume "${record.id}" registered (plugin ${record.pluginId}, external id ${externalId})`,
        },
      };
    });
  }

  checkRegisterUpdate(spec: VolumeSpec): { growTo?: number } {
    const checked = this.checkSpec(spec);
    const existing = this.read(checked.id);
    if (!existing) return {};
    if (this.intents.get(existing.id)?.op === 'delete') throw new VolumeBeingDeletedError(existing.id, 'update');
    mergeRegistered(existing, checked);
    const growTo = registerUpdateGrowth(existing, checked);
    return growTo !== undefined ? { growTo } : {};
  }

  /** A register of a volume the catalog has: checked with the plugin as a new one is, then written over, its claims kept. */
  private async updateRegistered(existing: VolumeRecord, spec: VolumeSpec): Promise<Outcome<VolumeView>> {
    if (this.intents.get(existing.id)?.op === 'delete') throw new VolumeBeingDeletedError(existing.id, 'update');
    const next = mergeRegistered(existing, spec);
    await checkWithPlugin(
      { csi: this.csi, log: this.log, withController: (p, fn) => this.controllers.withController(p, fn) },
      next,
      next.externalId,
    );
    this.state.putVolume(next.id, next);
    // Which fields, never their values: the secrets are among them.
    this.log.info('volume updated', { volume_id: next.id, plugin_id: next.pluginId, claims: next.claims.length });
    return {
      value: this.view(next),
      event: {
        volumeId: next.id,
        kind: 'updated',
        message: `volume "${next.id}" updated by a new register (secrets, context, capabilities${next.claims.length ? '' : ', mount options'}); its ${next.claims.length} claim${next.claims.length === 1 ? '' : 's'} kept`,
      },
    };
  }

  async createVolume(spec: VolumeSpec, options: { signal?: AbortSignal } = {}): Promise<VolumeView> {
    const { signal } = options;
    const checked = this.checkSpec(spec);
    if (checked.externalId !== undefined) {
      throw new ValidationError(
        `volume "${checked.id}": external_id names an existing volume; leave it out to create one (the plugin picks the id), or use "csiplug volume register"`,
        'external_id',
      );
    }
    if (checked.snapshotId !== undefined && checked.cloneId !== undefined) {
      throw new ValidationError(`volume "${checked.id}": snapshot_id and clone_id are two sources; give at most one`, 'snapshot_id');
    }
    return this.locked(checked.id, signal, async () => {
      if (this.read(checked.id)) throw new VolumeExistsError(checked.id);
      const controller = await this.controllers.controllerFor(checked.id, checked.pluginId, 'create', signal);
      if (checked.snapshotId !== undefined && !controller.supportsSnapshots) {
        throw new VolumeUnsupportedError(
          checked.id,
          checked.pluginId,
          `cannot restore snapshot "${checked.snapshotId}" into volume "${checked.id}": the controller of plugin "${checked.pluginId}" does not offer CREATE_DELETE_SNAPSHOT`,
        );
      }
      if (checked.cloneId !== undefined && !controller.supportsClone) {
        throw new VolumeUnsupportedError(
          checked.id,
          checked.pluginId,
          `cannot clone volume "${checked.cloneId}" into volume "${checked.id}": the controller of plugin "${checked.pluginId}" does not offer CLONE_VOLUME`,
        );
      }

      const request: CreateVolumeRequest = {
        // Derived from the id, never the display name two volumes may share: CSI makes it the idempotency key.
        name: csiVolumeName(checked.id),
        volumeCapabilities: checked.capabilities.map((c) =>
          volumeCapabilityFor({ readOnly: false, accessMode: c.accessMode, attachmentMode: c.attachmentMode }, checked.mountOptions),
        ),
        parameters: { ...checked.parameters },
        secrets: { ...checked.secrets },
      };
      if (checked.capacityMin !== undefined || checked.capacityMax !== undefined) {
        request.capacityRange = { requiredBytes: checked.capacityMin ?? 0, limitBytes: checked.capacityMax ?? 0 };
      }
      if (checked.snapshotId !== undefined) request.volumeContentSource = { snapshot: { snapshotId: checked.snapshotId } };
      if (checked.cloneId !== undefined) request.volumeContentSource = { volume: { volumeId: checked.cloneId } };
      const wanted = checked.topologyRequest;
      if (wanted?.required?.length || wanted?.preferred?.length) {
        request.accessibilityRequirements = {
          requisite: (wanted.required ?? []).map((t) => ({ segments: { ...t.segments } })),
          preferred: (wanted.preferred ?? []).map((t) => ({ segments: { ...t.segments } })),
        };
      }
      this.intents.put({ op: 'create', volumeId: checked.id, pluginId: checked.pluginId, spec: checked, request, since: this.clock.now() });
      crashPoint('catalog.create.before-call');
      let created;
      try {
        created = (await this.controllers.withController(checked.pluginId, (c) => c.createVolume(request, { signal }))).volume;
        crashPoint('catalog.create.after-call');
      } catch (err) {
        this.resumer.settleFailed(checked.id, checked.pluginId, err);
        if (signal?.aborted) throw abortReason(signal);
        throw new VolumePluginError(
          checked.id,
          checked.pluginId,
          `could not create volume "${checked.id}" on plugin "${checked.pluginId}": ${errorMessage(err)}`,
          {
            cause: err,
          },
        );
      }
      if (!created?.volumeId) {
        throw new VolumePluginError(
          checked.id,
          checked.pluginId,
          `plugin "${checked.pluginId}" answered CreateVolume for "${checked.id}" without a volume id; the plugin is broken`,
        );
      }
      const record = recordOfCreated(checked, created, this.clock.now());
      // Another volume's storage (a name used by a volume created before names came from ids): refused, and not deleted — it is that volume's
      // (nor by the next agent: the intent goes, so nothing resumes it).
      try {
        assertExternalIdFree(this.state.listVolumes<unknown>().filter(isVolumeRecord), record.id, record.pluginId, record.externalId);
      } catch (err) {
        this.resumer.drop(record.id);
        throw err;
      }
      try {
        this.state.putVolume(record.id, record);
      } catch (err) {
        // The volume exists on the plugin but not here. Not deleted: its name comes from the id alone, so it may be storage a
        // deregister kept on purpose; a create of the id again takes it up. Its intent, left, has the next agent record it.
        this.log.error('could not save a created volume; it is left on the plugin (create it again to take it up)', {
          volume_id: record.id,
          external_id: record.externalId,
          error: errorMessage(err),
        });
        throw err;
      }
      this.resumer.drop(record.id);
      this.log.info('volume created', {
        volume_id: record.id,
        plugin_id: record.pluginId,
        external_id: record.externalId,
        capacity_bytes: record.capacityBytes,
      });
      const size = record.capacityBytes !== undefined ? `, ${record.capacityBytes} bytes` : '';
      return {
        value: this.view(record),
        event: {
          volumeId: record.id,
          kind: 'created',
          message: `volume "${record.id}" created by plugin ${record.pluginId} (external id ${record.externalId}${size})`,
        },
      };
    });
  }

  async deregisterVolume(id: string, options: { force?: boolean } = {}): Promise<void> {
    await this.locked(id, undefined, async () => {
      const record = this.read(id);
      if (!record) throw new VolumeNotFoundError(id);
      const holders = record.claims.map((c) => c.allocId);
      if (holders.length > 0 && !options.force) throw new VolumeInUseError(id, holders, 'deregister');
      this.state.deleteVolume(id);
      this.resumer.forget(id);
      if (holders.length > 0) {
        this.log.warn('claimed volume deregistered by force; its claims are dropped without unpublishing', {
          volume_id: id,
          alloc_ids: holders,
        });
      } else {
        this.log.info('volume deregistered', { volume_id: id });
      }
      const forced = holders.length > 0 ? ` (forced; claims of ${holders.join(', ')} dropped)` : '';
      return { value: undefined, event: { volumeId: id, kind: 'deregistered', message: `volume "${id}" deregistered${forced}` } };
    });
  }

  async deleteVolume(id: string, options: { signal?: AbortSignal; secrets?: Record<string, string> } = {}): Promise<void> {
    const { signal } = options;
    await this.inLanes('both', id, signal, async () => {
      const record = this.read(id);
      if (!record) throw new VolumeNotFoundError(id);
      const holders = record.claims.map((c) => c.allocId);
      if (holders.length > 0) throw new VolumeInUseError(id, holders, 'delete');
      await this.controllers.controllerFor(id, record.pluginId, 'delete', signal);
      // From here the volume is deleting: not schedulable, no new claims, and a next agent finishes the delete.
      this.intents.put({ op: 'delete', volumeId: id, pluginId: record.pluginId, externalId: record.externalId, since: this.clock.now() });
      // The call's own secrets, for a resume of this delete by this agent (never stored: they are not the volume's).
      this.resumer.keepCallSecrets(id, options.secrets);
      crashPoint('catalog.delete.before-call');
      try {
        await this.controllers.withController(record.pluginId, (c) =>
          c.deleteVolume({ volumeId: record.externalId, secrets: { ...record.secrets, ...options.secrets } }, { signal }),
        );
        crashPoint('catalog.delete.after-call');
      } catch (err) {
        if (!isNotFound(err)) this.resumer.settleFailed(id, record.pluginId, err);
        if (signal?.aborted) throw abortReason(signal);
        if (!isNotFound(err)) {
          throw new VolumePluginError(
            id,
            record.pluginId,
            `could not delete volume "${id}" (external id ${record.externalId}) on plugin "${record.pluginId}": ${errorMessage(err)}`,
            {
              cause: err,
            },
          );
        }
        this.log.info('volume was gone on the plugin already', { volume_id: id, external_id: record.externalId });
      }
      this.state.deleteVolume(id);
      this.resumer.drop(id);
      this.log.info('volume deleted', { volume_id: id, plugin_id: record.pluginId, external_id: record.externalId });
      return {
        value: undefined,
        event: { volumeId: id, kind: 'deleted', message: `volume "${id}" deleted through plugin ${record.pluginId}` },
      };
    });
  }

  // ---- claims -------------------------------------------------------------------

  async claim(request: VolumeClaimRequest, options: { signal?: AbortSignal } = {}): Promise<VolumeClaimResult> {
    const { signal } = options;
    if (typeof request.allocId !== 'string' || request.allocId === '')
      throw new ClaimError(`a claim of volume "${request.volumeId}" needs an alloc id`, false);
    return this.locked(request.volumeId, signal, async () => {
      const record = this.read(request.volumeId);
      if (!record) throw this.notRegistered(request.volumeId, request.allocId);
      if (this.intents.get(record.id)?.op === 'delete')
        throw new ClaimError(
          `volume "${record.id}" is being deleted (its delete is finished once its controller plugin is ready); alloc ${request.allocId} cannot claim it`,
          false,
        );
      const mode = claimModeOf(request);
      const own = record.claims.find((c) => c.allocId === request.allocId);
      const publishedTo = record.controllerPublished?.[request.allocId];
      if (own && own.mode === mode && own.accessMode === request.accessMode && own.attachmentMode === request.attachmentMode) {
        // The same claim again (a retried prerun, a restore): grant it as it stands.
        return { value: this.claimResult(record, request.allocId) };
      }
      checkClaim(record, request);
      const unreserve = this.placement.check(record, request.allocId);
      try {
        let published: { nodeId: string; context: Record<string, string> } | undefined;
        let current = record;
        if (publishedTo === undefined) {
          published = await this.controllers.controllerPublish(record, request, signal, (nodeId) => {
            // Recorded before the call goes out: a publish cut short (an abort, a
            // crash) may still have attached the volume, and release must then
            // unpublish it. A retried claim publishes again (it is idempotent).
            current = { ...record, publishing: { ...record.publishing, [request.allocId]: nodeId } };
            this.state.putVolume(current.id, current);
            crashPoint('catalog.claim.after-publishing-write');
          });
        }

        if (published) crashPoint('catalog.claim.after-controller-publish');
        const claim: VolumeClaimView = {
          allocId: request.allocId,
          mode,
          accessMode: request.accessMode,
          attachmentMode: request.attachmentMode,
          since: own?.since ?? this.clock.now(),
        };
        const next: VolumeRecord = { ...current, claims: [...current.claims.filter((c) => c.allocId !== request.allocId), claim] };
        if (published) {
          next.controllerPublished = { ...current.controllerPublished, [request.allocId]: published.nodeId };
          next.publishContexts = { ...current.publishContexts, [request.allocId]: published.context };
          next.publishing = withoutKey(current.publishing, request.allocId);
          if (next.publishing === undefined) delete next.publishing;
        }
        try {
          this.state.putVolume(next.id, next);
        } catch (err) {
          if (published) await this.controllers.undoPublish(next, request.allocId, published.nodeId);
          throw new ClaimError(
            `could not save the claim of volume "${next.id}" for alloc ${request.allocId}: ${errorMessage(err)}`,
            false,
            { cause: err },
          );
        }
        crashPoint('catalog.claim.after-write');
        this.log.info('volume claimed', {
          volume_id: next.id,
          alloc_id: request.allocId,
          mode,
          access_mode: request.accessMode,
          published_to: published?.nodeId,
        });
        const where = published ? `; published to node ${published.nodeId}` : '';
        return {
          value: this.claimResult(next, request.allocId),
          event: {
            volumeId: next.id,
            kind: 'claimed',
            allocId: request.allocId,
            message: `volume "${next.id}" claimed by alloc ${request.allocId} (${mode}, ${request.accessMode}/${request.attachmentMode})${where}`,
          },
        };
      } finally {
        unreserve?.();
      }
    });
  }

  async release(volumeId: string, allocId: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const { signal } = options;
    await this.locked(volumeId, signal, async () => {
      const record = this.read(volumeId);
      const claimed = record?.claims.some((c) => c.allocId === allocId) ?? false;
      // A publish under way or cut short counts as published: unpublishing what never attached is harmless.
      const nodeId = record?.controllerPublished?.[allocId] ?? record?.publishing?.[allocId];
      if (!record || (!claimed && nodeId === undefined)) {
        this.log.debug('release of a claim that is gone; nothing to do', { volume_id: volumeId, alloc_id: allocId });
        return { value: undefined };
      }
      // Unpublish first: until the controller lets go, the claim stands, so
      // nobody else is granted a volume still attached for this alloc.
      if (nodeId !== undefined) await this.controllers.controllerUnpublish(record, allocId, nodeId, signal);
      if (nodeId !== undefined) crashPoint('catalog.release.after-controller-unpublish');
      const next: VolumeRecord = { ...record, claims: record.claims.filter((c) => c.allocId !== allocId) };
      if (record.controllerPublished) {
        const { [allocId]: _node, ...rest } = record.controllerPublished;
        next.controllerPublished = rest;
      }
      if (record.publishContexts) {
        const { [allocId]: _ctx, ...rest } = record.publishContexts;
        next.publishContexts = rest;
      }
      if (record.publishing) {
        next.publishing = withoutKey(record.publishing, allocId);
        if (next.publishing === undefined) delete next.publishing;
      }
      this.state.putVolume(next.id, next);
      crashPoint('catalog.release.after-write');
      this.log.info('volume claim released', { volume_id: volumeId, alloc_id: allocId, unpublished_from: nodeId });
      const where = nodeId !== undefined ? `; unpublished from node ${nodeId}` : '';
      return {
        value: undefined,
        event: { volumeId, kind: 'released', allocId, message: `volume "${volumeId}" released by alloc ${allocId}${where}` },
      };
    });
  }

  volumesHeldBy(allocId: string): string[] {
    return this.state
      .listVolumes<unknown>()
      .filter((r): r is VolumeRecord => this.checkRecord(r))
      .filter(
        (r) =>
          r.claims.some((c) => c.allocId === allocId) ||
          r.controllerPublished?.[allocId] !== undefined ||
          r.publishing?.[allocId] !== undefined,
      )
      .map((r) => r.id);
  }

  // ---- expansion, snapshots, what the plugin holds ------------------------------------

  async expandVolume(
    id: string,
    capacity: { capacityMin?: number; capacityMax?: number },
    options: { signal?: AbortSignal; secrets?: Record<string, string> } = {},
  ): Promise<VolumeExpansion> {
    const { signal } = options;
    return this.inLanes('both', id, signal, async () => {
      const record = this.read(id);
      if (!record) throw new VolumeNotFoundError(id);
      if (this.intents.get(id)?.op === 'delete') throw new VolumeBeingDeletedError(id, 'expand');
      const current = record.capacityBytes ?? record.capacityMin ?? 0;
      // capacity_min is a floor: the volume grows only when it is above what the volume has (a plugin may have rounded up); capacity_max below it would shrink it.
      if (capacity.capacityMax !== undefined && capacity.capacityMax < current) {
        throw new ValidationError(
          `volume "${id}" has ${current} bytes; capacity_max ${capacity.capacityMax} would shrink it: volumes only grow (create a new, smaller volume and copy the data)`,
          'capacity_max',
        );
      }
      const want = capacity.capacityMin;
      if (want === undefined || want <= current) {
        // A node-side expansion still owed (a mount whose expansion failed, an agent killed midway) is driven again; else nothing changes.
        if (record.nodeExpandTo !== undefined)
          return { value: { volume: this.view(record), capacityBytes: current, nodeExpansionRequired: true } };
        throw new VolumeUnchangedError(id, current);
      }
      const node = this.csi.pluginInfo(PluginTypeCSINode, record.pluginId);
      // CSI: a plugin that does not expand ONLINE may only be asked with the volume unpublished everywhere.
      if (record.claims.length > 0 && node?.pluginCapabilities?.onlineExpansion !== true) {
        throw new VolumeInUseError(
          id,
          record.claims.map((c) => c.allocId),
          'expand',
        );
      }
      const controller = await this.controllers.controllerIfAny(record, `expand volume "${id}"`, signal);
      let capacityBytes = want;
      let nodeExpansionRequired = true;
      if (controller?.supportsExpand) {
        this.intents.put({
          op: 'expand',
          volumeId: id,
          pluginId: record.pluginId,
          externalId: record.externalId,
          fromBytes: current,
          toBytes: want,
          ...(capacity.capacityMax !== undefined ? { limitBytes: capacity.capacityMax } : {}),
          since: this.clock.now(),
        });
        // A register update's secrets, for a resume of this expand by this agent (not stored until the update is).
        this.resumer.keepCallSecrets(id, options.secrets);
        crashPoint('catalog.expand.before-call');
        try {
          const response = await this.controllers.withController(record.pluginId, (c) =>
            c.controllerExpandVolume(
              {
                volumeId: record.externalId,
                capacityRange: { requiredBytes: want, limitBytes: capacity.capacityMax ?? 0 },
                secrets: { ...(options.secrets ?? record.secrets) },
                ...(record.capabilities[0]
                  ? { volumeCapability: volumeCapabilityFor({ readOnly: false, ...record.capabilities[0] }, record.mountOptions) }
                  : {}),
              },
              { signal },
            ),
          );
          crashPoint('catalog.expand.after-call');
          capacityBytes = int64(response.capacityBytes) || want;
          nodeExpansionRequired = response.nodeExpansionRequired === true;
        } catch (err) {
          this.resumer.settleFailed(id, record.pluginId, err);
          if (signal?.aborted) throw abortReason(signal);
          throw new VolumePluginError(
            id,
            record.pluginId,
            `could not expand volume "${id}" (external id ${record.externalId}) to ${want} bytes on plugin "${record.pluginId}": ${errorMessage(err)}`,
            { cause: err },
          );
        }
      } else if (!node?.node?.supportsExpand) {
        throw new VolumeUnsupportedError(
          id,
          record.pluginId,
          `cannot expand volume "${id}": plugin "${record.pluginId}" offers EXPAND_VOLUME on neither its controller nor its node side`,
        );
      }
      const next: VolumeRecord = { ...record, capacityBytes };
      if (nodeExpansionRequired) next.nodeExpandTo = capacityBytes;
      else delete next.nodeExpandTo;
      if (capacity.capacityMin !== undefined) next.capacityMin = capacity.capacityMin;
      if (capacity.capacityMax !== undefined) next.capacityMax = capacity.capacityMax;
      this.state.putVolume(id, next);
      this.resumer.drop(id);
      this.log.info('volume expanded', {
        volume_id: id,
        plugin_id: record.pluginId,
        from_bytes: current,
        to_bytes: capacityBytes,
        node_expansion_required: nodeExpansionRequired,
      });
      return {
        value: { volume: this.view(next), capacityBytes, nodeExpansionRequired },
        event: {
          volumeId: id,
          kind: 'expanded',
          message: `volume "${id}" expanded from ${current} to ${capacityBytes} bytes by plugin ${record.pluginId}${nodeExpansionRequired ? '; its node plugin expands it where it is mounted' : ''}`,
        },
      };
    });
  }

  async createSnapshot(
    volumeId: string,
    name?: string,
    options: SnapshotCallOptions & { parameters?: Record<string, string> } = {},
  ): Promise<SnapshotView> {
    return this.holdings.createSnapshot(volumeId, name, options);
  }

  async deleteSnapshot(pluginId: string, snapshotId: string, options: SnapshotCallOptions = {}): Promise<void> {
    return this.holdings.deleteSnapshot(pluginId, snapshotId, options);
  }

  async listSnapshots(
    pluginId: string,
    request: PageRequest & { sourceVolumeId?: string; secrets?: Record<string, string> } = {},
  ): Promise<Page<SnapshotView>> {
    return this.holdings.listSnapshots(pluginId, request);
  }

  async listExternalVolumes(pluginId: string, request: PageRequest = {}): Promise<Page<ExternalVolumeView>> {
    return this.holdings.listExternalVolumes(pluginId, request);
  }

  // ---- helpers ----------------------------------------------------------------------

  /** Runs `fn` under the volume's lock, then fires its event (outside the lock). */
  private locked<T>(volumeId: string, signal: AbortSignal | undefined, fn: () => Promise<Outcome<T>>): Promise<T> {
    return this.inLanes('volume', volumeId, signal, fn);
  }

  /** Runs `fn` holding the volume's `lane` (volume-lanes.ts: a snapshot holds no claim or release), then fires its event (outside the lanes). */
  private async inLanes<T>(lane: VolumeLane, volumeId: string, signal: AbortSignal | undefined, fn: () => Promise<Outcome<T>>): Promise<T> {
    const outcome = await this.lanes.run(lane, volumeId, fn, signal);
    if (outcome.event) this.changeEmitter.fire(outcome.event);
    return outcome.value;
  }

  private claimResult(record: VolumeRecord, allocId: string): VolumeClaimResult {
    const result: VolumeClaimResult = { volume: toClaimable(record) };
    const publishedTo = record.controllerPublished?.[allocId];
    if (publishedTo !== undefined) {
      result.publishContext = { ...(record.publishContexts?.[allocId] ?? {}) };
      result.publishedTo = publishedTo;
    }
    return result;
  }

  private notRegistered(volumeId: string, allocId?: string): ClaimError {
    const who = allocId ? ` before alloc ${allocId} can use it` : '';
    return new ClaimError(
      `volume "${volumeId}" is not registered; register it ("csiplug volume register FILE") or create it ("csiplug volume create FILE")${who}`,
      false,
    );
  }

  private read(id: string): VolumeRecord | undefined {
    const raw = this.state.getVolume<unknown>(id);
    if (raw === undefined) return undefined;
    return this.checkRecord(raw) ? raw : undefined;
  }

  private checkRecord(raw: unknown): raw is VolumeRecord {
    if (isVolumeRecord(raw)) return true;
    const id = typeof raw === 'object' && raw !== null ? (raw as { id?: unknown }).id : undefined;
    this.log.error('volume record in the client state is malformed; ignoring it (register the volume again to replace it)', {
      volume_id: id,
    });
    return false;
  }

  private view(record: VolumeRecord): VolumeView {
    return toVolumeView(record, this.schedulable(record));
  }

  /** Usable now: the node plugin is healthy, and so is its controller when the plugin has one. */
  private schedulable(record: VolumeRecord): boolean {
    if (this.intents.get(record.id)?.op === 'delete') return false;
    const node = this.csi.pluginInfo(PluginTypeCSINode, record.pluginId);
    if (!node?.healthy) return false;
    if (node.pluginCapabilities?.controllerService) return this.csi.pluginInfo(PluginTypeCSIController, record.pluginId)?.healthy === true;
    return true;
  }

  /** Re-checks a spec that may not have come through the parser (HTTP bodies, code); stores what the validator returns. */
  private checkSpec(spec: VolumeSpec): VolumeSpec {
    return this.validateSpec(spec);
  }
}
