// Topology helpers of the catalog: where a volume can be reached from, as
// plugins answer it (CreateVolume, ListVolumes) and as claims check it
// against the node's segments.
import type { Topology } from './volume-spec';

/** `{a=1, b=2}`: a topology's segments for a message. */
export function formatTopology(segments: Readonly<Record<string, string>>): string {
  const entries = Object.entries(segments);
  return entries.length ? `{${entries.map(([k, v]) => `${k}=${v}`).join(', ')}}` : '{}';
}

/** Whether a node with `node` segments lies in `topology`: every segment of the topology has the node's value. */
export function topologyContains(topology: Topology, node: Readonly<Record<string, string>>): boolean {
  return Object.entries(topology.segments).every(([k, v]) => node[k] === v);
}

/** The topologies a plugin answered (CreateVolume, ListVolumes), as the catalog keeps them; undefined for none. */
export function topologiesOf(list: readonly { segments?: Record<string, string> | null }[] | null | undefined): Topology[] | undefined {
  const out = (list ?? []).map((t) => ({ segments: { ...(t.segments ?? {}) } })).filter((t) => Object.keys(t.segments).length > 0);
  return out.length ? out : undefined;
}
