// VolumeOpResumer: finishes or undoes the catalog's volume operations that
// an agent left between their intent and their outcome (volume-op-intent.ts
// says what each intent means). It runs when the volume's controller plugin
// is ready — at start for one that is already, else when the CSI manager
// says it became ready (started, found again after the restart, recovered) —
// and after a live call whose outcome is unknown (a deadline, a dropped
// connection). Each intent is taken under the volume's lock, re-read there
// (a newer operation may have replaced it), and settled one way or the
// other; what it did is logged and fired as a catalog event (the agent's
// `Volume` event stream). An intent whose call fails in a way that may pass
// (the plugin away again) stays for the next ready plugin.
import { type Disposable, DisposableStore, type Logger, errorMessage } from '@csiplug/core';
import { type CSIClient, isNotFound } from '@csiplug/csi';
import { type ICSIManager, volumeCapabilityFor } from '@csiplug/csimanager';
import { PluginTypeCSIController } from '@csiplug/registry';
import type { IVolumeStateStore } from '@csiplug/state';
import type { VolumeCatalogEvent } from './volume-catalog-service';
import {
  mayHaveHappened,
  type CreateIntent,
  type DeleteIntent,
  type ExpandIntent,
  type VolumeOpIntent,
  type VolumeOpIntents,
} from './volume-op-intent';
import { isVolumeRecord, recordOfCreated, type VolumeRecord } from './volume-record';

/** What the resumer needs of the catalog: its per-volume lock (which fires the event after) and its controller clients. */
export interface VolumeOpHost {
  locked<T>(volumeId: string, fn: () => Promise<{ value: T; event?: VolumeCatalogEvent }>): Promise<T>;
  withController<T>(pluginId: string, fn: (client: CSIClient) => Promise<T>): Promise<T>;
  now(): number;
}

type Settled = { value: undefined; event?: VolumeCatalogEvent };

const AFTER_RESTART = 'cut short by an agent restart or a lost answer';

/** A protobuf int64 (a decimal string or number) as a number; undefined when absent or not a count. */
function int64(v: unknown): number | undefined {
  const n = typeof v === 'string' || typeof v === 'number' ? Number(v) : NaN;
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

export class VolumeOpResumer implements Disposable {
  private readonly subscriptions = new DisposableStore();
  /** Per plugin, the pass under way (passes of one plugin run one after another). */
  private readonly passes = new Map<string, Promise<void>>();
  /**
   * The per-call secrets of a delete or expand under way, by volume, in
   * memory only: a delete's `volume delete -secret` (sent over the volume's),
   * an expand's a register update's secrets, checked and not stored yet
   * (sent instead of the volume's). An operation this agent resumes sends
   * them again. Never written to the client state (they are not the
   * volume's, or not yet). After an agent restart they are gone: the resumed
   * call sends the volume's own secrets only, and a plugin that needs the
   * call's refuses it — the intent is then dropped and said, and the
   * operator runs the command again.
   */
  private readonly callSecrets = new Map<string, Record<string, string>>();
  private disposed = false;

  constructor(
    private readonly intents: VolumeOpIntents,
    private readonly state: IVolumeStateStore,
    private readonly csi: ICSIManager,
    private readonly host: VolumeOpHost,
    private readonly log: Logger,
  ) {}

  /** Reads the intents a previous agent left, says so, and resumes each as soon as its controller plugin is ready. */
  start(): void {
    const { intents, failures } = this.intents.list();
    for (const f of failures) {
      this.log.error(
        'a volume operation intent in the client state cannot be read; it is left as it is: check the volume with "csiplug volume status" and its plugin, then remove the intent',
        { key: f.key, error: f.error },
      );
    }
    if (intents.length > 0) {
      this.log.warn('volume operations cut short by the previous agent: each is finished or undone once its controller plugin is ready', {
        operations: intents.map(
          (i) => `${i.op}${i.op === 'create' && i.undo ? ' (undo)' : ''} of volume ${i.volumeId} on plugin ${i.pluginId}`,
        ),
      });
    }
    this.subscriptions.add(
      this.csi.onDidBecomeReady((e) => {
        if (e.info.type === PluginTypeCSIController) void this.kick(e.info.name);
      }),
    );
    for (const pluginId of new Set(intents.map((i) => i.pluginId))) {
      if (this.csi.pluginInfo(PluginTypeCSIController, pluginId)?.healthy) void this.kick(pluginId);
    }
  }

  dispose(): void {
    this.disposed = true;
    this.subscriptions.dispose();
  }

  /** Resumes the intents of `pluginId`'s volumes (after any pass under way). Never rejects. */
  kick(pluginId: string): Promise<void> {
    const previous = this.passes.get(pluginId) ?? Promise.resolve();
    const next = previous.then(() => this.pass(pluginId));
    this.passes.set(pluginId, next);
    void next.finally(() => {
      if (this.passes.get(pluginId) === next) this.passes.delete(pluginId);
    });
    return next;
  }

  /** Keeps a delete's or expand's own secrets for a resume of it within this agent run (see callSecrets); none given, none kept. */
  keepCallSecrets(volumeId: string, secrets: Record<string, string> | undefined): void {
    if (secrets && Object.keys(secrets).length > 0) this.callSecrets.set(volumeId, { ...secrets });
    else this.callSecrets.delete(volumeId);
  }

  /** Removes a settled operation's intent; one that cannot be removed (a full disk) is found settled by the next pass, which reads the record. */
  drop(volumeId: string): void {
    this.callSecrets.delete(volumeId);
    try {
      this.intents.delete(volumeId);
    } catch (err) {
      this.log.warn('could not remove the intent of a finished volume operation; the next pass finds it done', {
        volume_id: volumeId,
        error: errorMessage(err),
      });
    }
  }

  /**
   * After a deregister: a delete, expand or create of the volume cut short is
   * dropped with it, so no pass acts on storage the catalog forgot (kept by
   * the deregister, maybe registered again since).
   */
  forget(volumeId: string): void {
    const pending = this.intents.get(volumeId);
    this.callSecrets.delete(volumeId);
    if (!pending) return;
    this.drop(volumeId);
    this.log.warn(`a deregistered volume's ${pending.op} ${AFTER_RESTART} is dropped with it: its storage is left as the plugin has it`, {
      volume_id: volumeId,
      plugin_id: pending.pluginId,
    });
  }

  /**
   * After a failed create, expand or delete call (its caller is told it
   * failed): the intent is dropped when the plugin surely did nothing; else it
   * is kept — a create's marked `undo`, since its caller does not expect the
   * volume (it is then left on the plugin, reported, never deleted) — and
   * resumed once the volume's lock is free.
   */
  settleFailed(volumeId: string, pluginId: string, err: unknown): void {
    const intent = this.intents.get(volumeId);
    if (!intent) return;
    if (!mayHaveHappened(err)) return this.drop(volumeId);
    if (intent.op === 'create') {
      try {
        this.intents.put({ ...intent, undo: true });
      } catch (err) {
        // Left wanted: the next pass records the volume instead of deleting it — the catalog and the plugin agree either way.
        this.log.warn('could not mark a failed create to be undone; if the plugin made the volume, it is recorded instead', {
          volume_id: volumeId,
          error: errorMessage(err),
        });
      }
    }
    this.log.warn(`the plugin may have carried out the volume ${intent.op} whose call failed; it is settled through the plugin next`, {
      volume_id: volumeId,
      plugin_id: pluginId,
      error: errorMessage(err),
    });
    void this.kick(pluginId);
  }

  /** Resolves once no pass is under way (for tests and an orderly stop). */
  async idle(): Promise<void> {
    while (this.passes.size > 0) await Promise.all([...this.passes.values()]);
  }

  private async pass(pluginId: string): Promise<void> {
    if (this.disposed) return;
    const mine = this.intents.list().intents.filter((i) => i.pluginId === pluginId);
    for (const intent of mine) {
      if (this.disposed) return;
      try {
        await this.host.locked(intent.volumeId, () => this.resume(intent));
      } catch (err) {
        this.log.warn(
          `could not finish a volume ${intent.op} ${AFTER_RESTART}; it is tried again when the controller of plugin ${pluginId} is next ready`,
          {
            volume_id: intent.volumeId,
            plugin_id: pluginId,
            error: errorMessage(err),
          },
        );
      }
    }
  }

  /** One intent, under its volume's lock; nothing when it was replaced or settled meanwhile. */
  private async resume(seen: VolumeOpIntent): Promise<Settled> {
    const intent = this.intents.get(seen.volumeId);
    if (!intent || intent.op !== seen.op || intent.since !== seen.since) return { value: undefined };
    switch (intent.op) {
      case 'create':
        return this.resumeCreate(intent);
      case 'expand':
        return this.resumeExpand(intent);
      case 'delete':
        return this.resumeDelete(intent);
    }
  }

  private async resumeCreate(intent: CreateIntent): Promise<Settled> {
    const { volumeId: id, pluginId } = intent;
    let created;
    try {
      // CSI: CreateVolume is idempotent by name — the volume made before, or a new one when the first call never arrived.
      created = (await this.host.withController(pluginId, (c) => c.createVolume(intent.request))).volume;
    } catch (err) {
      if (mayHaveHappened(err)) throw err;
      return this.abandon(
        intent,
        `plugin ${pluginId} refused CreateVolume "${intent.request.name}" again (${errorMessage(err)}); nothing was made and nothing is recorded`,
      );
    }
    if (!created?.volumeId)
      throw new Error(
        `plugin "${pluginId}" answered CreateVolume "${intent.request.name}" for volume "${id}" without a volume id; the plugin is broken`,
      );
    // The plugin answered with storage another catalog volume has (a volume created before CSI names came from ids,
    // whose name happens to be this one's): that volume's data — never deleted, never recorded under this id too.
    const holder = this.holderOf(id, pluginId, created.volumeId);
    if (holder) {
      this.intents.delete(id);
      const why = `plugin ${pluginId} answered CreateVolume "${intent.request.name}" with volume ${created.volumeId}, which is volume "${holder.id}" already; it is left to that volume and nothing is recorded for "${id}"`;
      this.log.error(`a volume create ${AFTER_RESTART} found another volume's storage`, {
        volume_id: id,
        plugin_id: pluginId,
        external_id: created.volumeId,
        holder: holder.id,
      });
      return { value: undefined, event: { volumeId: id, kind: 'resume-failed', message: `volume "${id}": ${why}` } };
    }
    const existing = this.read(id);
    if (existing && existing.pluginId === pluginId && existing.externalId === created.volumeId) {
      this.intents.delete(id);
      this.log.info(`a volume create ${AFTER_RESTART} was recorded already; nothing to do`, {
        volume_id: id,
        plugin_id: pluginId,
        external_id: created.volumeId,
      });
      return { value: undefined };
    }
    if (intent.undo || existing) {
      // Not wanted: its caller was told the create failed, or the id is another volume's now. Left on the plugin, never deleted:
      // the name comes from the id alone, so this may be storage a deregister kept on purpose (a create of the id again takes it up).
      this.intents.delete(id);
      const why = intent.undo
        ? 'its create had failed as far as its caller knows'
        : `the catalog's volume "${id}" is another one (external id ${existing!.externalId})`;
      this.log.warn(`left on the plugin a volume whose create was ${AFTER_RESTART} and is not recorded`, {
        volume_id: id,
        plugin_id: pluginId,
        external_id: created.volumeId,
        reason: why,
      });
      return {
        value: undefined,
        event: {
          volumeId: id,
          kind: 'create-undone',
          message:
            `volume "${id}": plugin ${pluginId} has volume ${created.volumeId} (CSI name "${intent.request.name}") from a create ${AFTER_RESTART}; it is not recorded (${why}) and is left on the plugin, never deleted here: ` +
            `create "${id}" again to take it up, or delete it on the storage side`,
        },
      };
    }
    const record = recordOfCreated(intent.spec, created, this.host.now());
    this.state.putVolume(id, record);
    this.intents.delete(id);
    this.log.warn(`finished a volume create ${AFTER_RESTART}: the volume is recorded`, {
      volume_id: id,
      plugin_id: pluginId,
      external_id: record.externalId,
      capacity_bytes: record.capacityBytes,
    });
    const size = record.capacityBytes !== undefined ? `, ${record.capacityBytes} bytes` : '';
    return {
      value: undefined,
      event: {
        volumeId: id,
        kind: 'created',
        message: `volume "${id}" created by plugin ${pluginId} (external id ${record.externalId}${size}): a create ${AFTER_RESTART}, finished`,
        resumed: { op: 'create', pluginId, externalId: record.externalId },
      },
    };
  }

  private async resumeExpand(intent: ExpandIntent): Promise<Settled> {
    const { volumeId: id, pluginId } = intent;
    const record = this.read(id);
    if (!record || record.externalId !== intent.externalId) {
      this.callSecrets.delete(id);
      this.intents.delete(id);
      this.log.info(`a volume expand ${AFTER_RESTART} has nothing left to finish: the volume is gone from the catalog or is another one`, {
        volume_id: id,
        plugin_id: pluginId,
      });
      return { value: undefined };
    }
    if ((record.capacityBytes ?? 0) >= intent.toBytes) {
      this.callSecrets.delete(id);
      this.intents.delete(id);
      this.log.info(`a volume expand ${AFTER_RESTART} was recorded already; nothing to do`, {
        volume_id: id,
        capacity_bytes: record.capacityBytes,
      });
      return { value: undefined };
    }
    let response;
    try {
      response = await this.host.withController(pluginId, (c) =>
        c.controllerExpandVolume({
          volumeId: record.externalId,
          capacityRange: { requiredBytes: intent.toBytes, limitBytes: intent.limitBytes ?? 0 },
          // A register update's secrets (this agent run only) go instead of the volume's, as on the first try.
          secrets: { ...(this.callSecrets.get(id) ?? record.secrets) },
          ...(record.capabilities[0]
            ? { volumeCapability: volumeCapabilityFor({ readOnly: false, ...record.capabilities[0] }, record.mountOptions) }
            : {}),
        }),
      );
    } catch (err) {
      if (mayHaveHappened(err)) throw err;
      return this.abandon(
        intent,
        `plugin ${pluginId} refused ControllerExpandVolume to ${intent.toBytes} bytes (${errorMessage(err)}); the catalog keeps ${record.capacityBytes ?? intent.fromBytes} bytes`,
      );
    }
    const capacityBytes = int64(response.capacityBytes) || intent.toBytes;
    const next: VolumeRecord = { ...record, capacityBytes, capacityMin: intent.toBytes };
    if (intent.limitBytes !== undefined) next.capacityMax = intent.limitBytes;
    if (response.nodeExpansionRequired === true) next.nodeExpandTo = capacityBytes;
    else delete next.nodeExpandTo;
    this.state.putVolume(id, next);
    this.callSecrets.delete(id);
    this.intents.delete(id);
    this.log.warn(`finished a volume expand ${AFTER_RESTART}: the new capacity is recorded`, {
      volume_id: id,
      plugin_id: pluginId,
      from_bytes: intent.fromBytes,
      to_bytes: capacityBytes,
    });
    const node = response.nodeExpansionRequired === true ? '; its node plugin expands it where it is next published' : '';
    return {
      value: undefined,
      event: {
        volumeId: id,
        kind: 'expanded',
        message: `volume "${id}" expanded from ${intent.fromBytes} to ${capacityBytes} bytes by plugin ${pluginId}: an expand ${AFTER_RESTART}, finished${node}`,
        resumed: { op: 'expand', pluginId, externalId: record.externalId },
      },
    };
  }

  private async resumeDelete(intent: DeleteIntent): Promise<Settled> {
    const { volumeId: id, pluginId } = intent;
    const record = this.read(id);
    const ours = record !== undefined && record.externalId === intent.externalId;
    // Its storage registered as another catalog volume since (deregistered, then registered again): that volume's data, never deleted.
    const holder = this.holderOf(id, pluginId, intent.externalId);
    // The call's own secrets (this agent run only) go over the volume's, as on the first try; settled one way or the other, they are forgotten.
    const callSecrets = this.callSecrets.get(id) ?? {};
    if (holder) {
      this.callSecrets.delete(id);
      this.intents.delete(id);
      this.log.error(`a volume delete ${AFTER_RESTART} names another volume's storage; it is not deleted`, {
        volume_id: id,
        plugin_id: pluginId,
        external_id: intent.externalId,
        holder: holder.id,
      });
      return {
        value: undefined,
        event: {
          volumeId: id,
          kind: 'resume-failed',
          message: `volume "${id}": its delete ${AFTER_RESTART} was dropped: plugin ${pluginId} volume ${intent.externalId} is volume "${holder.id}" now, and is left to it`,
        },
      };
    }
    try {
      await this.host.withController(pluginId, (c) =>
        c.deleteVolume({ volumeId: intent.externalId, secrets: { ...(ours ? record.secrets : {}), ...callSecrets } }),
      );
    } catch (err) {
      if (!isNotFound(err)) {
        if (mayHaveHappened(err)) throw err;
        this.callSecrets.delete(id);
        return this.abandon(
          intent,
          `plugin ${pluginId} refused DeleteVolume of external id ${intent.externalId} (${errorMessage(err)}); the volume stays registered and can be claimed again: delete it again once the cause is fixed`,
        );
      }
    }
    if (ours) this.state.deleteVolume(id);
    this.callSecrets.delete(id);
    this.intents.delete(id);
    this.log.warn(`finished a volume delete ${AFTER_RESTART}: the volume is gone from the plugin and the catalog`, {
      volume_id: id,
      plugin_id: pluginId,
      external_id: intent.externalId,
    });
    return {
      value: undefined,
      event: {
        volumeId: id,
        kind: 'deleted',
        message: `volume "${id}" deleted through plugin ${pluginId}: a delete ${AFTER_RESTART}, finished`,
        resumed: { op: 'delete', pluginId, externalId: intent.externalId },
      },
    };
  }

  /** Drops an intent the plugin refused to carry out: said in the log and as an event. */
  private abandon(intent: VolumeOpIntent, why: string): Settled {
    this.callSecrets.delete(intent.volumeId);
    this.intents.delete(intent.volumeId);
    this.log.error(`could not finish a volume ${intent.op} ${AFTER_RESTART}; it is dropped`, {
      volume_id: intent.volumeId,
      plugin_id: intent.pluginId,
      reason: why,
    });
    return {
      value: undefined,
      event: {
        volumeId: intent.volumeId,
        kind: 'resume-failed',
        message: `volume "${intent.volumeId}": a ${intent.op} ${AFTER_RESTART} could not be finished: ${why}`,
      },
    };
  }

  /** The catalog volume other than `id` that has plugin `pluginId`'s volume `externalId`, if any. */
  private holderOf(id: string, pluginId: string, externalId: string): VolumeRecord | undefined {
    return this.state
      .listVolumes<unknown>()
      .filter(isVolumeRecord)
      .find((v) => v.id !== id && v.pluginId === pluginId && v.externalId === externalId);
  }

  private read(id: string): VolumeRecord | undefined {
    const raw = this.state.getVolume<unknown>(id);
    return isVolumeRecord(raw) ? raw : undefined;
  }
}
