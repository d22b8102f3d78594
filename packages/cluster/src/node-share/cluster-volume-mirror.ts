// The cluster's volumes (volumes/<id> in etcd) in this node's catalog, for
// cluster mode's passes (cluster-jobs.ts): registered here as they appear,
// deregistered here once they are gone from etcd and unclaimed here — those
// this agent saw in etcd during this run (a volume removed while the agent
// was down stays), so an alloc placed here finds its volume — and the ids
// this node reserves in etcd before its plugin makes a volume under one
// (a CSI create is idempotent by name: a second maker could not tell the
// volume from its own), finished or given back by it or by a later pass.
import { ClusterVolumeExistsError, externalIdOf, type ClusterVolumeRecord, type EtcdClusterVolumes } from '../cluster-volumes';
import { errorMessage, type Clock, type Logger } from '@csiplug/core';
import { assertExternalIdFree, type VolumeCatalogService, type VolumeSpec, type VolumeView } from '@csiplug/volumes';

export class ClusterVolumeMirror {
  /** Volumes whose delete, cut short by an agent restart, the catalog finished: still to be removed from etcd (so no pass registers them again). */
  private readonly resumedDeletes = new Map<string, { pluginId: string; externalId: string }>();
  /** Volumes of the cluster this node registered (or found registered) in its catalog during this run. */
  private readonly mirrored = new Set<string>();
  /** Volumes whose registration here failed, with the reason last logged (said once per reason). */
  private readonly mirrorFailures = new Map<string, string>();

  constructor(
    private readonly records: EtcdClusterVolumes,
    private readonly catalog: VolumeCatalogService,
    /** This node's name in the cluster. */
    private readonly node: () => string,
    /** Throws when this machine was refused its node name: it changes nothing in the cluster. */
    private readonly assertMember: () => void,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /** A delete an agent restart cut short, finished by the catalog: the volume leaves etcd at the next pass. */
  resumedDelete(id: string, was: { pluginId: string; externalId: string }): void {
    this.resumedDeletes.set(id, was);
  }

  /**
   * Registers here the cluster's volumes this catalog lacks; finishes a
   * reservation this node made whose volume it has (its create was done,
   * etcd was away for the last write); deregisters here the volumes gone
   * from etcd that this run registered and that are unclaimed here.
   * True when nothing failed for want of etcd.
   */
  async mirror(): Promise<boolean> {
    for (const [id, was] of [...this.resumedDeletes]) {
      await this.records.remove(id, (r) => r.state === undefined && r.pluginId === was.pluginId && externalIdOf(r) === was.externalId);
      this.resumedDeletes.delete(id);
      this.logger.info('removed from the cluster a volume whose delete, cut short by an agent restart, this node finished', {
        volume_id: id,
      });
    }
    const records = await this.records.list();
    const ids = new Set(records.map((r) => r.id));
    for (const record of records) {
      try {
        await this.mirrorOne(record);
      } catch (err) {
        this.warn(record.id, `could not bring the cluster's volume here: ${errorMessage(err)}`);
      }
    }
    for (const id of [...this.mirrored]) {
      if (ids.has(id)) continue;
      const local = this.catalog.getVolume(id);
      if (!local) {
        this.mirrored.delete(id);
        continue;
      }
      if (local.claims.length > 0) continue;
      try {
        await this.catalog.deregisterVolume(id);
        this.mirrored.delete(id);
        this.logger.info('deregistered here a volume the cluster no longer has', { volume_id: id });
      } catch (err) {
        this.logger.debug('could not deregister here a volume the cluster no longer has; the next pass tries again', {
          volume_id: id,
          error: errorMessage(err),
        });
      }
    }
    return true;
  }

  /** One cluster volume brought into this node's catalog (or its reservation seen to). */
  private async mirrorOne(record: ClusterVolumeRecord<unknown>): Promise<void> {
    const volume = record.volume as VolumeView;
    const local = this.catalog.getVolume(record.id);
    if (record.state === 'creating') {
      // Another node's reservation, or this node's make still under way (it finishes it itself): nothing to do here.
      if (record.origin !== this.node() || this.making.has(record.id)) return;
      // A create the last agent cut short, its intent still held: the catalog settles it first (records the volume or deletes it
      // again on the plugin), and a next pass finishes or gives back the reservation by what it finds then.
      if (this.catalog.interruptedOp?.(record.id)?.op === 'create') return;
      // This node's reservation, its make not under way (an agent killed in the middle, a finish or cancel etcd did not take):
      // finished when the volume is here, given back when not (a backend volume made before the kill is not known here: the plugin's own list shows it).
      if (local) await this.finish(local).catch(() => undefined);
      else await this.cancel(record.id).catch(() => undefined);
      return;
    }
    if (local) {
      // The same volume (its plugin and the plugin's id for it), or a volume of this node's own under the same id: never taken for the cluster's.
      if (local.pluginId === record.pluginId && local.externalId === volume.externalId) this.mirrored.add(record.id);
      else
        this.warn(
          record.id,
          `this node's catalog has a volume "${record.id}" of its own (plugin ${local.pluginId}, external id ${local.externalId}); the cluster's (plugin ${record.pluginId}, external id ${volume.externalId}, from node ${record.origin}) cannot be used here until one is renamed`,
        );
      return;
    }
    // Deleted here after an agent restart cut its delete short: leaving etcd, not to be brought back.
    if (this.resumedDeletes.has(record.id)) return;
    const spec: VolumeSpec = {
      id: volume.id,
      name: volume.name,
      type: 'csi',
      pluginId: volume.pluginId,
      externalId: volume.externalId,
      capabilities: volume.capabilities,
      ...(volume.mountOptions ? { mountOptions: volume.mountOptions } : {}),
      ...(volume.capacityBytes !== undefined ? { capacityMin: volume.capacityBytes } : {}),
      parameters: volume.parameters ?? {},
      secrets: volume.secrets ?? {},
      context: volume.context ?? {},
      ...(volume.accessibleTopology?.length
        ? { topologyRequest: { required: volume.accessibleTopology.map((t) => ({ segments: { ...t.segments } })) } }
        : {}),
    };
    try {
      await this.catalog.registerVolume(spec);
      this.mirrored.add(record.id);
      this.mirrorFailures.delete(record.id);
      this.logger.info("registered a volume of the cluster in this node's catalog", { volume_id: record.id, origin: record.origin });
    } catch (err) {
      this.warn(
        record.id,
        `could not register the cluster's volume here; allocs placed here cannot use it until it is: ${errorMessage(err)}`,
      );
    }
  }

  private warn(id: string, why: string): void {
    if (this.mirrorFailures.get(id) === why) return;
    this.mirrorFailures.set(id, why);
    this.logger.warn(why, { volume_id: id });
  }

  /**
   * Reserves the volume's id in the cluster before this node's plugin makes
   * it: no other node makes one under the same id meanwhile (a CSI create
   * is idempotent by name, so a second maker would get the same volume and
   * could not tell it from its own). Throws ClusterVolumeExistsError when
   * the id is taken or reserved, and VolumeExternalIdInUseError when a
   * register names a plugin volume another cluster volume has (checked
   * against the records read, not in the reservation's transaction: two
   * nodes registering one at the same instant both pass here, and the
   * second's is refused by each node's catalog when it mirrors it).
   */
  async reserve(spec: VolumeSpec): Promise<void> {
    this.assertMember();
    if (spec.externalId !== undefined) {
      const made = (await this.records.list())
        .filter((r) => r.state === undefined)
        .map((r) => ({ id: r.id, pluginId: r.pluginId, externalId: externalIdOf(r) }));
      assertExternalIdFree(made, spec.id, spec.pluginId, spec.externalId);
    }
    const reservation: ClusterVolumeRecord<unknown> = {
      id: spec.id,
      pluginId: spec.pluginId,
      origin: this.node(),
      createdAt: this.clock.now(),
      state: 'creating',
      volume: { id: spec.id, pluginId: spec.pluginId },
    };
    try {
      await this.records.add(reservation);
    } catch (err) {
      // This node's own reservation whose make is not under way (an earlier try cut short): taken over (a CSI create is idempotent by name).
      const held = err instanceof ClusterVolumeExistsError ? await this.records.get(spec.id) : undefined;
      if (held?.state !== 'creating' || held.origin !== this.node() || this.making.has(spec.id)) throw err;
      await this.records.cancel(spec.id, this.node());
      await this.records.add(reservation);
    }
    this.making.add(spec.id);
  }

  /** The make under way here is over (made, or failed): a pass may see to its reservation again. */
  made(id: string): void {
    this.making.delete(id);
  }

  /** Volume ids whose make is under way on this agent (reserved here, not yet finished or given back). */
  private readonly making = new Set<string>();

  /** The reservation is given up (the create failed here). */
  cancel(id: string): Promise<void> {
    return this.records.cancel(id, this.node());
  }

  /**
   * The volume this node made replaces its reservation, with what other
   * nodes need to use it — its secrets too: etcd holds them, as a Nomad
   * server's state does (protect etcd: TLS, and no one else's access). The
   * reservation gone (false): the volume is not the cluster's.
   */
  async finish(volume: VolumeView): Promise<boolean> {
    const done = await this.records.finish({
      id: volume.id,
      pluginId: volume.pluginId,
      ...(volume.accessibleTopology?.length ? { accessibleTopology: volume.accessibleTopology.map((t) => ({ ...t.segments })) } : {}),
      capabilities: volume.capabilities.map((c) => ({ accessMode: c.accessMode, attachmentMode: c.attachmentMode })),
      origin: this.node(),
      createdAt: this.clock.now(),
      volume: { ...volume, claims: [] },
    });
    if (done) this.mirrored.add(volume.id);
    return done;
  }
}
