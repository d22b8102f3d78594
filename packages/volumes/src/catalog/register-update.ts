// `volume register` of a volume the catalog has already: Nomad updates it
// (nomad/structs/csi.go CSIVolume.Merge, called by CSIVolume.Register), so a
// spec written for `volume create` can be sent again to change what may
// change — and the Terraform provider relies on it. What may change, and
// what is refused, follows Merge:
// - secrets are replaced, always (claimed or not);
// - context is replaced when the spec gives any (none given keeps it);
// - capabilities are replaced, but each mode a claim holds now must stay
//   among them;
// - mount options are replaced only while no alloc claims the volume;
// - parameters cannot change (given and different is refused);
// - the plugin, external id, name, snapshot and clone ids cannot change
//   (left out is no change);
// - a volume with a topology keeps it: the topology request must stay equal;
//   a volume without one keeps none (Merge checks a topology request only
//   when the volume has topologies, and otherwise ignores it);
// - capacity_min and capacity_max are recorded when given; capacity_max may
//   not be below capacity_min nor below the capacity the volume has (volumes
//   only grow). Growing to a capacity_min above that capacity is the
//   agent's (as Nomad's Register expands after Merge): it checks with
//   registerUpdateGrowth first, grows, and only then stores the update, so a
//   refused or failed update stores nothing.
// Claims, controller publishes and mount records are the catalog's and are
// kept as they are.
import { ValidationError } from '@csiplug/core';
import { VolumeUpdateRefusedError } from './errors';
import type { Topology, TopologyRequest } from './volume-spec';
import type { VolumeRecord } from './volume-record';
import type { VolumeSpec } from './volume-spec';

function sameMap(a: Record<string, string> | undefined, b: Record<string, string> | undefined): boolean {
  const ka = Object.keys(a ?? {});
  const kb = Object.keys(b ?? {});
  return ka.length === kb.length && ka.every((k) => (b ?? {})[k] === (a ?? {})[k]);
}

function sameTopologies(a: readonly Topology[] | undefined, b: readonly Topology[] | undefined): boolean {
  const x = a ?? [];
  const y = b ?? [];
  return x.length === y.length && x.every((t, i) => sameMap(t.segments, y[i]!.segments));
}

function sameTopologyRequest(a: TopologyRequest | undefined, b: TopologyRequest | undefined): boolean {
  return sameTopologies(a?.required, b?.required) && sameTopologies(a?.preferred, b?.preferred);
}

/** Nomad's CSIMountOptions.Equal: the fs type, and the mount flags as a set (their order is no change). */
function sameMountOptions(a: VolumeSpec['mountOptions'], b: VolumeSpec['mountOptions']): boolean {
  const fa = new Set(a?.mountFlags ?? []);
  const fb = new Set(b?.mountFlags ?? []);
  return (a?.fsType ?? '') === (b?.fsType ?? '') && fa.size === fb.size && [...fa].every((f) => fb.has(f));
}

/** The capacity a volume has, as far as the catalog knows (what its plugin said, else what it was asked for). */
export function knownCapacity(volume: { capacityBytes?: number; capacityMin?: number }): number {
  return volume.capacityBytes ?? volume.capacityMin ?? 0;
}

/** The capacity a register update must grow `existing` to first: its capacity_min when above the capacity the volume has, else none. */
export function registerUpdateGrowth(existing: { capacityBytes?: number; capacityMin?: number }, spec: VolumeSpec): number | undefined {
  return spec.capacityMin !== undefined && spec.capacityMin > knownCapacity(existing) ? spec.capacityMin : undefined;
}

/**
 * The record `existing` becomes when `spec` registers it again, claims and
 * publishes kept; a VolumeUpdateRefusedError listing every change Nomad
 * refuses (all of them, not the first), with what to do.
 */
export function mergeRegistered(existing: VolumeRecord, spec: VolumeSpec): VolumeRecord {
  const refused: string[] = [];
  const id = existing.id;
  if (spec.pluginId !== existing.pluginId)
    refused.push(`its plugin cannot change (it is "${existing.pluginId}", the spec says "${spec.pluginId}")`);
  if (spec.externalId !== undefined && spec.externalId !== existing.externalId)
    refused.push(`its external id cannot change (it is "${existing.externalId}", the spec says "${spec.externalId}")`);
  // The name defaults to the id when a spec leaves it out: only another name given is a change.
  if (spec.name !== existing.name && spec.name !== spec.id)
    refused.push(`its name cannot change (it is "${existing.name}", the spec says "${spec.name}")`);
  for (const [field, given, held] of [
    ['snapshot_id', spec.snapshotId, existing.snapshotId],
    ['clone_id', spec.cloneId, existing.cloneId],
  ] as const) {
    if (given !== undefined && given !== held)
      refused.push(`its ${field} cannot change (it is ${held === undefined ? 'not set' : `"${held}"`}, the spec says "${given}")`);
  }
  const claims = existing.claims;
  const claimedBy = claims.map((c) => c.allocId);
  const inUse = claimedBy.length > 0;
  // Every mode a claim holds must still be offered: a claim is never left on a mode the volume no longer has.
  const missing = [
    ...new Set(
      claims
        .filter((c) => !spec.capabilities.some((k) => k.accessMode === c.accessMode && k.attachmentMode === c.attachmentMode))
        .map((c) => `${c.accessMode}/${c.attachmentMode} (alloc ${c.allocId})`),
    ),
  ];
  if (missing.length)
    refused.push(
      `its capabilities must keep the modes in use: ${missing.join(', ')}; add ${missing.length > 1 ? 'them' : 'it'} back as a capability, or stop the alloc first`,
    );
  if (existing.accessibleTopology?.length && !sameTopologyRequest(existing.topologyRequest, spec.topologyRequest))
    refused.push('its topology request cannot change once the volume has a topology; give the topology_request it was registered with');
  if (inUse && !sameMountOptions(existing.mountOptions, spec.mountOptions))
    refused.push(`its mount options cannot change while it is in use (claimed by ${claimedBy.join(', ')}); stop the allocs first`);
  if (Object.keys(spec.parameters).length > 0 && !sameMap(existing.parameters, spec.parameters))
    refused.push('its parameters cannot change; give the parameters it has, or none');
  const current = knownCapacity(existing);
  if (spec.capacityMax !== undefined && spec.capacityMin !== undefined && spec.capacityMax < spec.capacityMin)
    refused.push(
      `its capacity_max ${spec.capacityMax} is below its capacity_min ${spec.capacityMin}; give a capacity_max at or above capacity_min`,
    );
  else if (spec.capacityMax !== undefined && spec.capacityMax < current)
    refused.push(
      `its capacity_max ${spec.capacityMax} is below the ${current} bytes it has: volumes only grow; give a capacity_max of at least ${current}`,
    );
  if (refused.length) throw new VolumeUpdateRefusedError(id, refused);

  const next: VolumeRecord = { ...existing, capabilities: spec.capabilities.map((c) => ({ ...c })), secrets: { ...spec.secrets } };
  if (Object.keys(spec.context).length > 0) next.context = { ...spec.context };
  if (!inUse) {
    if (spec.mountOptions) next.mountOptions = structuredClone(spec.mountOptions);
    else delete next.mountOptions;
  }
  // As Merge: the range asked for is recorded (a lower capacity_min, another capacity_max); the capacity itself changes only by growing.
  if (spec.capacityMin !== undefined) next.capacityMin = spec.capacityMin;
  if (spec.capacityMax !== undefined) next.capacityMax = spec.capacityMax;
  return next;
}

/** The external id a register names: required for a new volume, optional (no change) for one the catalog has. */
export function externalIdToRegister(spec: VolumeSpec, existing: VolumeRecord | undefined): string {
  if (existing) return spec.externalId ?? existing.externalId;
  if (spec.externalId === undefined)
    throw new ValidationError(
      `volume "${spec.id}": external_id is required to register an existing volume (the plugin's own id for it); to make a new volume, use "csiplug volume create"`,
      'external_id',
    );
  return spec.externalId;
}
