// The cluster's scheduler: a pure function from what etcd holds (jobs,
// their placements, nodes, volumes, claims) to the placements to write.
// Feasibility first, then spread:
//   - a node is feasible for a group when it is ready, runs fewer of the
//     job's allocs than its max_allocs_per_job, has every driver the group's
//     tasks use, and for each CSI volume of the group: the volume is in the
//     cluster's catalog (made, not just reserved), its plugin's node
//     instance is healthy there, the node's topology is one the volume is
//     accessible from, the volume offers the requested access and
//     attachment modes, its claims can be read, the node is under the
//     plugin's max volumes, a single-node access mode is not held (claimed
//     or placed) on another node, and a single-writer mode has no writer yet;
//   - among feasible nodes, the one with the fewest of this job's placements
//     wins, then the fewest placements overall, then the name.
// `system` jobs get one placement per group on every ready feasible node;
// `service` jobs get `count` placements per group. A service placement on a
// node down for longer than the disconnect grace is placed again elsewhere;
// a system placement stays where it is (it is that node's). A kept slot
// whose new job version its node cannot run (a driver, a volume it lacks)
// moves (service; or stays, pending, when no node can) or goes (system).
// Nothing here talks to etcd: jobs.ts reads the inputs and commits the
// result with compare-and-swap on the revisions it read.
import { datacenterMatches } from '@csiplug/jobspec';
import { SINGLE_WRITER_ACCESS_MODES } from '@csiplug/volumes';
import type { ClusterClaim } from './claims';
import type { ClusterNodeView } from './node-registry';

export type ClusterJobType = 'service' | 'system';

/** What the scheduler needs of one CSI volume request of a group. */
export interface VolumeDemand {
  volumeId: string;
  accessMode: string;
  /** Absent in records written before it was: not checked. */
  attachmentMode?: string;
  readOnly: boolean;
}

/** What the scheduler needs of a group: how many, which drivers, which volumes. */
export interface GroupDemand {
  name: string;
  count: number;
  drivers: string[];
  volumes: VolumeDemand[];
  /** The job's datacenters (Nomad's, `*` wildcards): only nodes in one of them. Absent: every datacenter. */
  datacenters?: string[];
}

/** A volume as the cluster's catalog holds it (volumes.ts), what placement needs of it. */
export interface SchedVolume {
  id: string;
  pluginId: string;
  /** Where the volume may be used: a node matches when one segment set is wholly in its topology. Empty or absent: anywhere. */
  accessibleTopology?: Array<Record<string, string>>;
  /** The access and attachment modes the volume offers; absent: not checked here (the claim checks them). */
  capabilities?: Array<{ accessMode: string; attachmentMode: string }>;
}

/** One alloc's place: which job, group and index, on which node. */
export interface Placement {
  /** The alloc slot: `<group>/<index>` (service) or `<group>/@<node>` (system). */
  slot: string;
  jobId: string;
  group: string;
  /** The index in the group's count (service); 0 for system. */
  index: number;
  node: string;
  /** The job version it was placed for. */
  jobVersion: number;
  /** ms since the epoch. */
  placedAt: number;
  /** The node it was placed on before, when it was moved off a node down past its grace. */
  movedFrom?: string;
}

export interface SchedJob {
  id: string;
  type: ClusterJobType;
  version: number;
  stopped: boolean;
  groups: GroupDemand[];
}

export interface SchedulerInput {
  jobs: SchedJob[];
  /** Every placement, of every job. */
  placements: Placement[];
  nodes: ClusterNodeView[];
  /** When each down node was first seen down (ms since the epoch). */
  downSince: Record<string, number>;
  volumes: Record<string, SchedVolume>;
  claims: Record<string, ClusterClaim[]>;
  now: number;
  disconnectGraceMs: number;
  /**
   * The down nodes whose grace has ended, as etcd measured it (jobs.ts: a
   * key on a lease of the grace's length, gone when it ends). When given,
   * it decides, and downSince/now/disconnectGraceMs do not.
   */
  expired?: readonly string[];
  /** Volumes whose claims cannot be read: no placement may use them (their holders are unknown). */
  unreadableClaims?: readonly string[];
}

/** A slot no node can take now, and why not on each node. */
export interface Unplaced {
  jobId: string;
  group: string;
  slot: string;
  /** Node name → why not there ("no ready node" when the map is empty). */
  reasons: Record<string, string>;
}

export interface SchedulerResult {
  /** Placements to write (new slots, and slots moved off a node down past its grace). */
  put: Placement[];
  /** Slots to delete (a stopped job, a smaller count, a removed group). */
  remove: Placement[];
  unplaced: Unplaced[];
}

export const slotOf = (group: string, index: number): string => `${group}/${index}`;
export const systemSlotOf = (group: string, node: string): string => `${group}/@${node}`;

/** Whether a node's topology segments hold one of the volume's segment sets (or the volume says nothing of topology). */
export function topologyMatches(volume: SchedVolume, nodeTopology: Record<string, string> | undefined): boolean {
  const wanted = volume.accessibleTopology ?? [];
  if (wanted.length === 0) return true;
  return wanted.some((segments) => Object.entries(segments).every(([k, v]) => nodeTopology?.[k] === v));
}

/** Whether the node has been down for longer than the grace (a service placement there is placed again). */
export function pastGrace(
  node: string,
  input: Pick<SchedulerInput, 'nodes' | 'downSince' | 'now' | 'disconnectGraceMs' | 'expired'>,
): boolean {
  const view = input.nodes.find((n) => n.name === node);
  if (view?.status === 'ready') return false;
  if (input.expired) return input.expired.includes(node);
  const since = input.downSince[node];
  // A node never seen down (or no longer known at all) is given the grace from now on: its record tells nothing of when.
  return since !== undefined && input.now - since >= input.disconnectGraceMs;
}

class Tally {
  /** node → volumes in use there (claimed or placed), by plugin. */
  private readonly volumesOn = new Map<string, Map<string, Set<string>>>();
  /** volume → nodes holding it with a single-node mode. */
  private readonly singleHolders = new Map<string, Set<string>>();
  /** volume → the writers it has (claimed or placed), for the single-writer modes. */
  private readonly writers = new Map<string, number>();
  /** node → every placement there; job → node → count. */
  private readonly total = new Map<string, number>();
  private readonly perJob = new Map<string, Map<string, number>>();

  constructor(private readonly volumes: Record<string, SchedVolume>) {}

  useVolume(node: string, volumeId: string, accessMode: string, writes: boolean): void {
    if (writes) this.writers.set(volumeId, (this.writers.get(volumeId) ?? 0) + 1);
    const plugin = this.volumes[volumeId]?.pluginId ?? '';
    const byPlugin = this.volumesOn.get(node) ?? new Map<string, Set<string>>();
    const set = byPlugin.get(plugin) ?? new Set<string>();
    set.add(volumeId);
    byPlugin.set(plugin, set);
    this.volumesOn.set(node, byPlugin);
    if (accessMode.startsWith('single-node-')) {
      const holders = this.singleHolders.get(volumeId) ?? new Set<string>();
      holders.add(node);
      this.singleHolders.set(volumeId, holders);
    }
  }

  place(p: Placement): void {
    this.total.set(p.node, (this.total.get(p.node) ?? 0) + 1);
    const job = this.perJob.get(p.jobId) ?? new Map<string, number>();
    job.set(p.node, (job.get(p.node) ?? 0) + 1);
    this.perJob.set(p.jobId, job);
  }

  volumesOfPlugin(node: string, plugin: string): Set<string> {
    return this.volumesOn.get(node)?.get(plugin) ?? new Set();
  }

  writersOf(volumeId: string): number {
    return this.writers.get(volumeId) ?? 0;
  }

  holdersOf(volumeId: string): Set<string> {
    return this.singleHolders.get(volumeId) ?? new Set();
  }

  count(jobId: string, node: string): number {
    return this.perJob.get(jobId)?.get(node) ?? 0;
  }

  totalOn(node: string): number {
    return this.total.get(node) ?? 0;
  }
}

/**
 * Why `node` cannot run `group`, or undefined when it can. Without a tally,
 * only what the node itself offers is checked (a slot kept there, whose own
 * use of its volumes is in the tally already).
 */
function infeasible(
  node: ClusterNodeView,
  group: GroupDemand,
  input: SchedulerInput,
  tally: Tally | undefined,
  jobId?: string,
): string | undefined {
  // Without a tally (a slot kept where it is, checked against a new version), a plugin's health is not a reason: a node's record
  // says its restored plugins unhealthy until their first check after a restart, and moving a running alloc for that would stop it.
  const keptSlot = tally === undefined;
  if (node.status !== 'ready') return 'the node is down';
  if (group.datacenters && !(node.datacenter !== undefined && datacenterMatches(group.datacenters, node.datacenter)))
    return node.datacenter === undefined
      ? `the node's record names no datacenter (an agent from before datacenters), and the job runs only in ${JSON.stringify(group.datacenters)}`
      : `the node is in datacenter "${node.datacenter}", not one of the job's datacenters ${JSON.stringify(group.datacenters)}`;
  if (tally && jobId !== undefined && node.maxAllocsPerJob !== undefined && tally.count(jobId, node.name) >= node.maxAllocsPerJob) {
    return `the node runs at most ${node.maxAllocsPerJob} allocs of a job (its limits { max_allocs_per_job })`;
  }
  const missing = group.drivers.filter((d) => !node.drivers.includes(d));
  if (missing.length) return `no ${missing.join(', ')} driver on the node`;
  for (const v of group.volumes) {
    const volume = input.volumes[v.volumeId];
    if (!volume) return `volume "${v.volumeId}" is not in the cluster's catalog`;
    const plugin = node.plugins.find((p) => p.id === volume.pluginId && p.type === 'csi-node');
    if (!plugin) return `no node plugin "${volume.pluginId}" on the node`;
    if (!plugin.healthy && !keptSlot) return `node plugin "${volume.pluginId}" is not healthy on the node`;
    if (!topologyMatches(volume, plugin.topology)) return `volume "${v.volumeId}" is not accessible from the node's topology`;
    if (
      volume.capabilities &&
      !volume.capabilities.some(
        (c) => c.accessMode === v.accessMode && (v.attachmentMode === undefined || c.attachmentMode === v.attachmentMode),
      )
    ) {
      return `volume "${v.volumeId}" offers no ${v.accessMode}${v.attachmentMode ? `/${v.attachmentMode}` : ''} capability`;
    }
    if (input.unreadableClaims?.includes(v.volumeId)) return `the claims of volume "${v.volumeId}" in etcd cannot be read`;
    if (!tally) continue;
    const inUse = tally.volumesOfPlugin(node.name, volume.pluginId);
    if (plugin.maxVolumes !== undefined && plugin.maxVolumes > 0 && !inUse.has(v.volumeId) && inUse.size >= plugin.maxVolumes) {
      return `node plugin "${volume.pluginId}" is at its max of ${plugin.maxVolumes} volumes on the node`;
    }
    if (v.accessMode.startsWith('single-node-')) {
      const elsewhere = [...tally.holdersOf(v.volumeId)].filter((n) => n !== node.name);
      if (elsewhere.length) return `volume "${v.volumeId}" (${v.accessMode}) is in use on node ${elsewhere.join(', ')}`;
    }
    if (!v.readOnly && SINGLE_WRITER_ACCESS_MODES.includes(v.accessMode) && tally.writersOf(v.volumeId) > 0) {
      return `volume "${v.volumeId}" (${v.accessMode}) has its one writer already`;
    }
  }
  return undefined;
}

function pick(candidates: ClusterNodeView[], jobId: string, tally: Tally): ClusterNodeView | undefined {
  return [...candidates].sort(
    (a, b) =>
      tally.count(jobId, a.name) - tally.count(jobId, b.name) ||
      tally.totalOn(a.name) - tally.totalOn(b.name) ||
      a.name.localeCompare(b.name),
  )[0];
}

/**
 * What to write so every job has its placements: new slots placed, slots of
 * a service job on a node down past the grace moved, slots of stopped jobs
 * and beyond a group's count removed. Deterministic for one input.
 */
export function schedule(input: SchedulerInput): SchedulerResult {
  const tally = new Tally(input.volumes);
  const jobs = new Map(input.jobs.map((j) => [j.id, j]));
  const demandOf = (p: Placement) => jobs.get(p.jobId)?.groups.find((g) => g.name === p.group);
  const put: Placement[] = [];
  const remove: Placement[] = [];
  const unplaced: Unplaced[] = [];
  const kept = new Map<string, Placement>();
  /** Slots moving off a node down past its grace, by job and slot (looked up once per slot: no scan per slot). */
  const moving = new Map<string, Placement>();

  // What stays: every placement of a live job within its group's count, unless its node is gone past the grace (service).
  for (const p of input.placements) {
    const job = jobs.get(p.jobId);
    const group = demandOf(p);
    const beyond = job?.type === 'service' ? p.index >= (group?.count ?? 0) : false;
    // A slot of the other type (the job was submitted again as system after service, or back) is none of its slots now.
    const otherType = job?.type === 'system' ? p.slot !== systemSlotOf(p.group, p.node) : p.slot !== slotOf(p.group, p.index);
    if (!job || job.stopped || !group || beyond || otherType) {
      remove.push(p);
      continue;
    }
    if (job.type === 'service' && pastGrace(p.node, input)) {
      moving.set(`${p.jobId}\u0000${p.slot}`, p);
      continue;
    }
    kept.set(`${p.jobId}\u0000${p.slot}`, p);
  }
  // Claims count where they are held; kept placements count where they will be, unless their node holds a claim of the same
  // kind on the volume already (a claim names its alloc, not its slot: such a claim is taken to be that placement's).
  const claimedBy = (node: string, volumeId: string, writes: boolean): boolean =>
    (input.claims[volumeId] ?? []).some((c) => c.nodeId === node && (c.mode === 'write') === writes);
  for (const [volumeId, claims] of Object.entries(input.claims))
    for (const c of claims) tally.useVolume(c.nodeId, volumeId, c.accessMode, c.mode === 'write');
  for (const p of kept.values()) {
    tally.place(p);
    // A claim it holds already counted it.
    for (const v of demandOf(p)!.volumes)
      if (!claimedBy(p.node, v.volumeId, !v.readOnly)) tally.useVolume(p.node, v.volumeId, v.accessMode, !v.readOnly);
  }

  /** Slots `place` put somewhere this run. */
  const placedNow = new Set<string>();
  const place = (
    job: SchedJob,
    group: GroupDemand,
    slot: string,
    index: number,
    candidates: ClusterNodeView[],
    movedFrom?: string,
  ): void => {
    const reasons: Record<string, string> = {};
    const feasible: ClusterNodeView[] = [];
    for (const n of candidates) {
      const why = infeasible(n, group, input, tally, job.id);
      if (why) reasons[n.name] = why;
      else feasible.push(n);
    }
    const node = pick(feasible, job.id, tally);
    if (!node) {
      unplaced.push({ jobId: job.id, group: group.name, slot, reasons });
      return;
    }
    const p: Placement = {
      slot,
      jobId: job.id,
      group: group.name,
      index,
      node: node.name,
      jobVersion: job.version,
      placedAt: input.now,
      ...(movedFrom ? { movedFrom } : {}),
    };
    put.push(p);
    placedNow.add(`${job.id}\u0000${slot}`);
    tally.place(p);
    for (const v of group.volumes) tally.useVolume(node.name, v.volumeId, v.accessMode, !v.readOnly);
  };

  const nodes = [...input.nodes].sort((a, b) => a.name.localeCompare(b.name));
  for (const job of [...input.jobs].sort((a, b) => a.id.localeCompare(b.id))) {
    if (job.stopped) continue;
    for (const group of job.groups) {
      if (job.type === 'system') {
        for (const node of nodes) {
          const slot = systemSlotOf(group.name, node.name);
          const existing = kept.get(`${job.id}\u0000${slot}`);
          if (existing) {
            if (existing.jobVersion === job.version) continue;
            // A new version the node cannot run (a driver, a volume it lacks): the node's slot goes.
            if (infeasible(node, group, input, undefined) && node.status === 'ready') remove.push(existing);
            else put.push({ ...existing, jobVersion: job.version });
            continue;
          }
          // A system job runs where it can; a node that cannot take it is not a failure to report (Nomad's system scheduler).
          if (node.status === 'ready' && !infeasible(node, group, input, tally)) place(job, group, slot, 0, [node]);
        }
        continue;
      }
      for (let index = 0; index < group.count; index++) {
        const slot = slotOf(group.name, index);
        const existing = kept.get(`${job.id}\u0000${slot}`);
        if (existing) {
          if (existing.jobVersion === job.version) continue;
          // A new version its node cannot run (a driver, a volume it lacks) is placed elsewhere; one it can stays, at the new version.
          const node = nodes.find((n) => n.name === existing.node);
          const why = node && node.status === 'ready' ? infeasible(node, group, input, undefined) : undefined;
          if (!why) {
            put.push({ ...existing, jobVersion: job.version });
            continue;
          }
          place(
            job,
            group,
            slot,
            index,
            nodes.filter((n) => n.name !== existing.node),
            existing.node,
          );
          if (!placedNow.has(`${job.id}\u0000${slot}`)) {
            // Nowhere else either: it stays where it is, at its version, and the new version is pending with why.
            const last = unplaced[unplaced.length - 1];
            if (last?.jobId === job.id && last.slot === slot) last.reasons[existing.node] = why;
          }
          continue;
        }
        const moved = moving.get(`${job.id}\u0000${slot}`);
        place(job, group, slot, index, nodes, moved?.node);
      }
    }
  }
  return { put, remove, unplaced };
}
