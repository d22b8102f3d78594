// VolumePlacement: the placement facts a node plugin reported, enforced when
// the catalog grants a claim — the node lies in one of the volume's
// accessible topologies, and holds fewer volumes of the plugin than its
// max_volumes_per_node, counting the claims being granted right now.
import type { ICSIManager } from '@csiplug/csimanager';
import { PluginTypeCSINode } from '@csiplug/registry';
import type { IVolumeStateStore } from '@csiplug/state';
import { formatTopology, topologyContains } from './topology';
import { ClaimError } from './volume-claimer';
import { isVolumeRecord, type VolumeRecord } from './volume-record';

export class VolumePlacement {
  /** Per plugin, the volumes a claim is being granted for right now (counted against max_volumes_per_node until written). */
  private readonly placing = new Map<string, Set<string>>();

  constructor(
    private readonly csi: ICSIManager,
    private readonly state: IVolumeStateStore,
  ) {}

  /**
   * Placement facts the node plugin reported, enforced at claim time: the
   * node must lie in one of the volume's accessible topologies, and hold
   * fewer volumes of the plugin than its max_volumes_per_node. Returns what
   * frees the reservation once the claim is written (or refused).
   */
  check(record: VolumeRecord, allocId: string): (() => void) | undefined {
    const node = this.csi.pluginInfo(PluginTypeCSINode, record.pluginId)?.node;
    if (!node) return undefined;
    if (record.accessibleTopology?.length) {
      const here = node.topology ?? {};
      if (!record.accessibleTopology.some((t) => topologyContains(t, here))) {
        throw new ClaimError(
          `volume "${record.id}" is accessible from topology ${record.accessibleTopology.map((t) => formatTopology(t.segments)).join(' or ')} only; ` +
            `node ${node.nodeId} of plugin "${record.pluginId}" has topology ${formatTopology(here)}: alloc ${allocId} cannot claim it here`,
          false,
        );
      }
    }
    // A volume already claimed here is on the node already: another claim of it adds nothing.
    if (Number.isFinite(node.maxVolumes) && node.maxVolumes > 0 && record.claims.length === 0) {
      // Claims of other volumes under way (their locks are their own) count too: two at once must not both pass a limit.
      const reserved = this.placing.get(record.pluginId) ?? new Set<string>();
      const held = new Set([
        ...this.state
          .listVolumes<unknown>()
          .filter(
            (v): v is VolumeRecord => isVolumeRecord(v) && v.pluginId === record.pluginId && v.id !== record.id && v.claims.length > 0,
          )
          .map((v) => v.id),
        ...[...reserved].filter((v) => v !== record.id),
      ]).size;
      if (held >= node.maxVolumes) {
        // Retryable: a release elsewhere (an old alloc of a rolling update) frees the room.
        throw new ClaimError(
          `node ${node.nodeId} holds ${held} volume${held === 1 ? '' : 's'} of plugin "${record.pluginId}" and its limit (max_volumes_per_node) is ${node.maxVolumes}: alloc ${allocId} cannot claim volume "${record.id}" here`,
          true,
        );
      }
      reserved.add(record.id);
      this.placing.set(record.pluginId, reserved);
      return () => {
        reserved.delete(record.id);
        if (reserved.size === 0 && this.placing.get(record.pluginId) === reserved) this.placing.delete(record.pluginId);
      };
    }
    return undefined;
  }
}
