// In which order a destructive update replaces one alloc of a group: start
// the new one first and stop the old one once the new is healthy
// (create-before-destroy), or stop the old one — its tasks, then its
// volumes' unmounts and releases — before the new one starts
// (stop-before-start).
//
// 1. Volumes first: if the new alloc would claim a volume the old one holds
//    in a way the catalog refuses while the old claim stands — a second
//    writer of a single-writer mode (single-node-writer,
//    single-node-single-writer, multi-node-single-writer), or any other
//    access or attachment mode than the old claim's — the old alloc must
//    let go first. Starting the new one first would only have it retry a
//    refused claim until the old one is gone.
// 2. A group that runs a CSI plugin (a task with a `csi_plugin` block) is
//    replaced create-before-destroy: the new plugin registers healthy, the
//    registry makes the newest registration the active one, and only then
//    does the old plugin stop, so the plugin never goes away and the
//    volumes mounted through the old one stay served (the volume
//    reconciler reaches them by plugin name).
// 3. Anything else stops before its replacement starts. This is Nomad's
//    order for service jobs without canaries, and the safe one here: two
//    copies of a workload on one node may share ports, files or locks the
//    jobspec does not declare, and this agent has no canaries to prove a
//    new version before the old one goes.
import { SINGLE_WRITER_ACCESS_MODES } from '@csiplug/core';
import type { GroupSpec, VolumeRequest } from './model';

export type ReplacementKind = 'create-before-destroy' | 'stop-before-start';

export interface ReplacementOrder {
  kind: ReplacementKind;
  /** One sentence: why this order. */
  reason: string;
}

/** The volume id `v` names in a reason: a per_alloc source "db" is "db[<index>]", each alloc's own. */
function shownId(v: VolumeRequest): string {
  return v.perAlloc ? `${v.source}[<index>]` : v.source;
}

/** Why a claim of `next` would be refused while `held` is claimed by the old alloc; undefined when both can stand. */
function claimConflict(held: VolumeRequest, next: VolumeRequest): string | undefined {
  if (held.accessMode !== next.accessMode || held.attachmentMode !== next.attachmentMode) {
    return `volume "${next.name}" (${shownId(next)}) is asked for as ${next.accessMode}/${next.attachmentMode} and the old alloc holds it as ${held.accessMode}/${held.attachmentMode}; the old claim must go first`;
  }
  if (!held.readOnly && !next.readOnly && SINGLE_WRITER_ACCESS_MODES.includes(next.accessMode)) {
    return `volume "${next.name}" (${shownId(next)}) is ${next.accessMode}: one writer at a time, so the old alloc releases it before the new one claims it`;
  }
  return undefined;
}

/**
 * Whether an alloc of the old group and one of the new at the same index may
 * claim one volume: the same source, or a per_alloc source "db" and a plain
 * "db[<index>]" (erring on the side of the safe order).
 */
function maySameVolume(a: VolumeRequest, b: VolumeRequest): boolean {
  if (a.source === b.source) return true;
  const ownOf = (p: VolumeRequest, o: VolumeRequest) => p.perAlloc === true && !o.perAlloc && o.source.startsWith(`${p.source}[`);
  return ownOf(a, b) || ownOf(b, a);
}

/** How an alloc of `before` gives way to one of `after`. */
export function replacementOrder(before: GroupSpec, after: GroupSpec): ReplacementOrder {
  for (const next of after.volumes) {
    for (const held of before.volumes.filter((v) => v.type === next.type && maySameVolume(v, next))) {
      const conflict = claimConflict(held, next);
      if (conflict) return { kind: 'stop-before-start', reason: conflict };
    }
  }
  const plugin = after.tasks.find((t) => t.csiPlugin);
  if (plugin?.csiPlugin) {
    return {
      kind: 'create-before-destroy',
      reason: `task "${plugin.name}" runs CSI plugin "${plugin.csiPlugin.id}": the new alloc registers healthy before the old one stops`,
    };
  }
  return { kind: 'stop-before-start', reason: "the old alloc stops before the new one starts (Nomad's order without canaries)" };
}
