// CSI plugins on Nomad's wire (api/csi.go CSIPlugin and CSIPluginListStub,
// api/nodes.go CSIInfo, CSIControllerInfo, CSINodeInfo) and back into
// csiplug's PluginView. The fingerprint facts Nomad has a field for go in
// ControllerInfo/NodeInfo; the rest, and the cluster's per-node records, in
// `Csiplug`. Pure functions: the routes encode, the ApiClient decodes.
import type { PluginInstanceView, PluginView } from '../service';
import type { NomadAllocationListStub } from './alloc-wire';

/** Nomad's CSITopology (api/nodes.go). */
export interface NomadCSITopology {
  Segments: Record<string, string>;
}

/** Nomad's CSIControllerInfo (api/nodes.go); a field the fingerprint did not find is left out. */
export interface NomadCSIControllerInfo {
  SupportsCreateDelete?: boolean;
  SupportsAttachDetach?: boolean;
  SupportsListVolumes?: boolean;
  SupportsGetCapacity?: boolean;
  SupportsCreateDeleteSnapshot?: boolean;
  SupportsListSnapshots?: boolean;
  SupportsClone?: boolean;
  SupportsReadOnlyAttach?: boolean;
  SupportsExpand?: boolean;
  SupportsListVolumesAttachedNodes?: boolean;
  SupportsCondition?: boolean;
  SupportsGet?: boolean;
}

/** Nomad's CSINodeInfo (api/nodes.go); a field the fingerprint did not find is left out. */
export interface NomadCSINodeInfo {
  ID?: string;
  MaxVolumes?: number;
  AccessibleTopology?: NomadCSITopology;
  RequiresNodeStageVolume?: boolean;
  SupportsStats?: boolean;
  SupportsExpand?: boolean;
  SupportsCondition?: boolean;
}

/** What csiplug adds to one plugin instance. */
export interface CSIInfoExtras {
  /** The instance on the node that answered (its fingerprint is this node's). */
  thisNode?: true;
  /** The plugin's version as its instance reported it. */
  version?: string;
  /** Fingerprint facts with no field of Nomad's (last error, expansion modes…), name → value. */
  info?: Record<string, string | number | boolean>;
  /** A controller routed to other nodes (cluster mode): the node whose controller answered last. */
  routed?: { node?: string };
  /** An instance known from its node's cluster record: whether that node is ready or down. */
  nodeStatus?: 'ready' | 'down';
  /** This node's own instance as its cluster record has it too: whether the record says healthy (Healthy is the live fingerprint's). */
  recordHealthy?: boolean;
}

/** Nomad's CSIInfo (api/nodes.go): one plugin instance on one node. */
export interface NomadCSIInfo {
  PluginID: string;
  AllocID?: string;
  Healthy: boolean;
  HealthDescription?: string;
  RequiresTopologies?: boolean;
  ControllerInfo?: NomadCSIControllerInfo;
  NodeInfo?: NomadCSINodeInfo;
  Csiplug?: CSIInfoExtras;
}

/** What csiplug adds to a plugin. */
export interface CSIPluginExtras {
  /** In cluster mode (Nomad's counts are then the cluster's): this node's own counts. */
  thisNode?: { controllersHealthy: number; controllersExpected: number; nodesHealthy: number; nodesExpected: number };
  /** In cluster mode: when the nodes' records were read (ms since the epoch). */
  clusterReadAt?: number;
}

/** Nomad's CSIPlugin (api/csi.go). Controllers and Nodes are keyed by node: this node's ID, another node's name. */
export interface NomadCSIPlugin {
  ID: string;
  Provider?: string;
  Version?: string;
  ControllerRequired: boolean;
  Controllers: Record<string, NomadCSIInfo>;
  Nodes: Record<string, NomadCSIInfo>;
  /** The allocs running the plugin's tasks, as AllocationListStubs; one this agent does not hold (gone meanwhile) has its ID alone. */
  Allocations: (Pick<NomadAllocationListStub, 'ID'> & Partial<NomadAllocationListStub>)[];
  ControllersHealthy: number;
  ControllersExpected: number;
  NodesHealthy: number;
  NodesExpected: number;
  Csiplug?: CSIPluginExtras;
}

/** Nomad's CSIPluginListStub (api/csi.go). */
export interface NomadCSIPluginListStub {
  ID: string;
  Provider?: string;
  ControllerRequired: boolean;
  ControllersHealthy: number;
  ControllersExpected: number;
  NodesHealthy: number;
  NodesExpected: number;
}

/**
 * Nomad's CSINodeInfo.MaxVolumes for a plugin that sets no limit. Nomad
 * sends MaxInt64, which a JavaScript number cannot hold exactly (and Go
 * would refuse as out of range once rounded): the largest safe integer is
 * sent instead, and anything from it up reads back as unlimited.
 */
export const UNLIMITED_MAX_VOLUMES = Number.MAX_SAFE_INTEGER;

/** A value Go's int64 could not read back exactly (MaxInt64 as a JavaScript number, Infinity) is sent as unlimited. */
export function encodeMaxVolumes(value: number | 'unlimited'): number {
  return value === 'unlimited' || !Number.isSafeInteger(value) || value >= UNLIMITED_MAX_VOLUMES ? UNLIMITED_MAX_VOLUMES : value;
}

export function decodeMaxVolumes(value: number): number | 'unlimited' {
  return value >= UNLIMITED_MAX_VOLUMES ? 'unlimited' : value;
}

type Group = 'NodeInfo' | 'ControllerInfo';

/** The fingerprint facts (agent's plugin-views.ts) Nomad has a boolean field for. 'Expand' is in both groups. */
const BOOLEAN_FACTS: readonly { fact: string; group: Group; field: string }[] = [
  { fact: 'Requires Staging', group: 'NodeInfo', field: 'RequiresNodeStageVolume' },
  { fact: 'Volume Stats', group: 'NodeInfo', field: 'SupportsStats' },
  { fact: 'Volume Condition', group: 'NodeInfo', field: 'SupportsCondition' },
  { fact: 'Expand', group: 'NodeInfo', field: 'SupportsExpand' },
  { fact: 'Create/Delete Volumes', group: 'ControllerInfo', field: 'SupportsCreateDelete' },
  { fact: 'Attach/Detach (ControllerPublish)', group: 'ControllerInfo', field: 'SupportsAttachDetach' },
  { fact: 'List Volumes', group: 'ControllerInfo', field: 'SupportsListVolumes' },
  { fact: 'List Volumes Published Nodes', group: 'ControllerInfo', field: 'SupportsListVolumesAttachedNodes' },
  { fact: 'Get Capacity', group: 'ControllerInfo', field: 'SupportsGetCapacity' },
  { fact: 'Snapshots', group: 'ControllerInfo', field: 'SupportsCreateDeleteSnapshot' },
  { fact: 'List Snapshots', group: 'ControllerInfo', field: 'SupportsListSnapshots' },
  { fact: 'Clone', group: 'ControllerInfo', field: 'SupportsClone' },
  { fact: 'Expand', group: 'ControllerInfo', field: 'SupportsExpand' },
];
const NODE_ONLY_FACTS = new Set(['Node ID', 'Max Volumes', 'Topology', 'Requires Staging', 'Volume Stats', 'Volume Condition']);
const CONTROLLER_ONLY_FACTS = new Set(BOOLEAN_FACTS.filter((f) => f.group === 'ControllerInfo' && f.fact !== 'Expand').map((f) => f.fact));
const ACCESSIBILITY_FACT = 'Accessibility Constraints';

/** "zone=a, rack=1" (the Topology fact) as segments, when it reads back exactly; otherwise undefined. */
function topologySegments(text: string): Record<string, string> | undefined {
  const pairs: [string, string][] = [];
  for (const pair of text.split(', ')) {
    const eq = pair.indexOf('=');
    if (eq <= 0) return undefined;
    pairs.push([pair.slice(0, eq), pair.slice(eq + 1)]);
  }
  const segments = Object.fromEntries(pairs);
  return topologyText(segments) === text ? segments : undefined;
}

function topologyText(segments: Record<string, string>): string {
  return Object.entries(segments)
    .map(([k, v]) => `${k}=${v}`)
    .join(', ');
}

/** One instance's fingerprint facts into CSIInfo's fields, and what is left for Csiplug. */
function encodeFacts(facts: Record<string, string | number | boolean>): {
  fields: Pick<NomadCSIInfo, 'ControllerInfo' | 'NodeInfo' | 'RequiresTopologies'>;
  rest: Record<string, string | number | boolean>;
} {
  const rest: Record<string, string | number | boolean> = { ...facts };
  const names = Object.keys(facts);
  const hasNode = names.some((n) => NODE_ONLY_FACTS.has(n));
  const hasController = names.some((n) => CONTROLLER_ONLY_FACTS.has(n));
  const node: NomadCSINodeInfo = {};
  const controller: Record<string, boolean> = {};
  const nodeId = facts['Node ID'];
  if (typeof nodeId === 'string') {
    node.ID = nodeId;
    delete rest['Node ID'];
  }
  const max = facts['Max Volumes'];
  if (typeof max === 'number' || max === 'unlimited') {
    node.MaxVolumes = encodeMaxVolumes(max);
    delete rest['Max Volumes'];
  }
  const topology = facts['Topology'];
  const segments = typeof topology === 'string' ? topologySegments(topology) : undefined;
  if (segments) {
    node.AccessibleTopology = { Segments: segments };
    delete rest['Topology'];
  }
  let expandPlaced = false;
  for (const { fact, group, field } of BOOLEAN_FACTS) {
    const value = facts[fact];
    if (typeof value !== 'boolean') continue;
    // 'Expand' goes where the instance's kind is; with neither known, into NodeInfo.
    const groupPresent = group === 'NodeInfo' ? hasNode || !hasController : hasController;
    if (!groupPresent) continue;
    if (group === 'NodeInfo') (node as Record<string, unknown>)[field] = value;
    else controller[field] = value;
    if (fact === 'Expand') expandPlaced = true;
    delete rest[fact];
  }
  if (!expandPlaced && typeof facts['Expand'] === 'boolean') node.SupportsExpand = facts['Expand'];
  const fields: Pick<NomadCSIInfo, 'ControllerInfo' | 'NodeInfo' | 'RequiresTopologies'> = {};
  const accessibility = facts[ACCESSIBILITY_FACT];
  if (typeof accessibility === 'boolean') {
    fields.RequiresTopologies = accessibility;
    delete rest[ACCESSIBILITY_FACT];
  }
  if (Object.keys(controller).length > 0) fields.ControllerInfo = controller;
  if (Object.keys(node).length > 0) fields.NodeInfo = node;
  return { fields, rest };
}

function decodeFacts(info: NomadCSIInfo): Record<string, string | number | boolean> {
  const facts: Record<string, string | number | boolean> = { ...(info.Csiplug?.info ?? {}) };
  const node = info.NodeInfo;
  if (node?.ID !== undefined) facts['Node ID'] = node.ID;
  if (node?.MaxVolumes !== undefined) facts['Max Volumes'] = decodeMaxVolumes(node.MaxVolumes);
  if (node?.AccessibleTopology) facts['Topology'] = topologyText(node.AccessibleTopology.Segments ?? {});
  for (const { fact, group, field } of BOOLEAN_FACTS) {
    const value = (info[group] as Record<string, unknown> | undefined)?.[field];
    if (typeof value === 'boolean') facts[fact] = value;
  }
  if (info.RequiresTopologies !== undefined) facts[ACCESSIBILITY_FACT] = info.RequiresTopologies;
  return facts;
}

/**
 * Nomad's CLI (`plugin status -verbose`) reads ControllerInfo of every
 * Controllers entry and NodeInfo of every Nodes entry without a nil check:
 * the group of the map an instance is in is always sent, empty when the
 * fingerprint found nothing for it.
 */
function withInfoGroup(kind: PluginKind, info: NomadCSIInfo): NomadCSIInfo {
  if (kind === 'csi-controller') return { ...info, ControllerInfo: info.ControllerInfo ?? {} };
  return { ...info, NodeInfo: info.NodeInfo ?? {} };
}

type PluginKind = 'csi-controller' | 'csi-node';

function encodeInstance(pluginId: string, view: PluginInstanceView, kind: PluginKind): NomadCSIInfo {
  const { fields, rest } = encodeFacts(view.info);
  const extras: CSIInfoExtras = { thisNode: true, version: view.version };
  if (Object.keys(rest).length > 0) extras.info = rest;
  if (view.routed) extras.routed = { ...view.routed };
  return withInfoGroup(kind, {
    PluginID: pluginId,
    AllocID: view.allocId,
    Healthy: view.healthy,
    HealthDescription: view.description,
    ...fields,
    Csiplug: extras,
  });
}

function decodeInstance(info: NomadCSIInfo): PluginInstanceView {
  return {
    healthy: info.Healthy,
    allocId: info.AllocID ?? '',
    description: info.HealthDescription ?? '',
    version: info.Csiplug?.version ?? '',
    info: decodeFacts(info),
    ...(info.Csiplug?.routed ? { routed: { ...info.Csiplug.routed } } : {}),
  };
}

/**
 * A plugin as Nomad's CSIPlugin. `nodeId` is this node's ID, the key of its
 * own instances. In cluster mode the maps also hold each instance the
 * cluster's node records list, keyed by node name, and Nomad's counts are
 * the cluster's (this node's own in Csiplug.thisNode).
 */
export function encodePlugin(
  view: PluginView,
  nodeId: string,
  /** The AllocationListStub of an alloc of the plugin's, when the agent holds it. */
  allocStub: (id: string) => NomadAllocationListStub | undefined = () => undefined,
): NomadCSIPlugin {
  // Maps keyed by node ID (any text, `__proto__` too): a Map, made into an object with Object.fromEntries.
  const controllers = new Map<string, NomadCSIInfo>();
  const nodes = new Map<string, NomadCSIInfo>();
  if (view.controller) controllers.set(nodeId, encodeInstance(view.id, view.controller, 'csi-controller'));
  if (view.node) nodes.set(nodeId, encodeInstance(view.id, view.node, 'csi-node'));
  const local = {
    controllersHealthy: view.controllersHealthy,
    controllersExpected: view.controllersExpected,
    nodesHealthy: view.nodesHealthy,
    nodesExpected: view.nodesExpected,
  };
  const cluster = view.cluster;
  for (const instance of cluster?.instances ?? []) {
    const kind: PluginKind = instance.type === 'csi-controller' ? 'csi-controller' : 'csi-node';
    const map = kind === 'csi-controller' ? controllers : nodes;
    const own = map.get(instance.node);
    // This node's record lists its own instance too (a cluster node's name is its node ID): one entry, both sources.
    if (own?.Csiplug?.thisNode) own.Csiplug = { ...own.Csiplug, nodeStatus: instance.nodeStatus, recordHealthy: instance.healthy };
    else
      map.set(
        instance.node,
        withInfoGroup(kind, { PluginID: view.id, Healthy: instance.healthy, Csiplug: { nodeStatus: instance.nodeStatus } }),
      );
  }
  const counts = cluster ?? local;
  return {
    ID: view.id,
    ...(view.provider !== undefined ? { Provider: view.provider } : {}),
    ...(view.version !== undefined ? { Version: view.version } : {}),
    ControllerRequired: view.controllerRequired,
    Controllers: Object.fromEntries(controllers),
    Nodes: Object.fromEntries(nodes),
    Allocations: view.allocs.map((id) => allocStub(id) ?? { ID: id }),
    ControllersHealthy: counts.controllersHealthy,
    ControllersExpected: counts.controllersExpected,
    NodesHealthy: counts.nodesHealthy,
    NodesExpected: counts.nodesExpected,
    ...(cluster ? { Csiplug: { thisNode: local, clusterReadAt: cluster.readAt } } : {}),
  };
}

/** Nomad's CSIPlugin back into the PluginView it was made from. */
export function decodePlugin(wire: NomadCSIPlugin): PluginView {
  let controller: PluginInstanceView | undefined;
  let node: PluginInstanceView | undefined;
  const instances: NonNullable<PluginView['cluster']>['instances'] = [];
  for (const [type, map] of [
    ['csi-controller', wire.Controllers ?? {}],
    ['csi-node', wire.Nodes ?? {}],
  ] as const) {
    for (const [key, info] of Object.entries(map)) {
      const x = info.Csiplug;
      if (x?.thisNode) {
        if (type === 'csi-controller') controller = decodeInstance(info);
        else node = decodeInstance(info);
        if (x.nodeStatus !== undefined)
          instances.push({ node: key, type, healthy: x.recordHealthy ?? info.Healthy, nodeStatus: x.nodeStatus });
      } else {
        instances.push({ node: key, type, healthy: info.Healthy, nodeStatus: x?.nodeStatus ?? 'ready' });
      }
    }
  }
  const counts = {
    controllersHealthy: wire.ControllersHealthy,
    controllersExpected: wire.ControllersExpected,
    nodesHealthy: wire.NodesHealthy,
    nodesExpected: wire.NodesExpected,
  };
  const extras = wire.Csiplug;
  const inCluster = extras?.clusterReadAt !== undefined;
  const local = inCluster && extras?.thisNode ? extras.thisNode : counts;
  return {
    id: wire.ID,
    ...(wire.Provider !== undefined ? { provider: wire.Provider } : {}),
    ...(wire.Version !== undefined ? { version: wire.Version } : {}),
    controllerRequired: wire.ControllerRequired,
    ...local,
    ...(controller ? { controller } : {}),
    ...(node ? { node } : {}),
    allocs: (wire.Allocations ?? []).map((a) => a.ID),
    ...(inCluster ? { cluster: { ...counts, instances: sortInstances(instances), readAt: extras!.clusterReadAt! } } : {}),
  };
}

/** Cluster instances in the order the agent lists them: by node, then type. */
export function sortInstances<T extends { node: string; type: string }>(instances: T[]): T[] {
  return [...instances].sort((a, b) => a.node.localeCompare(b.node) || a.type.localeCompare(b.type));
}

/** A plugin as Nomad's CSIPluginListStub (GET /v1/plugins). */
export function encodePluginStub(view: PluginView): NomadCSIPluginListStub {
  const counts = view.cluster ?? view;
  return {
    ID: view.id,
    ...(view.provider !== undefined ? { Provider: view.provider } : {}),
    ControllerRequired: view.controllerRequired,
    ControllersHealthy: counts.controllersHealthy,
    ControllersExpected: counts.controllersExpected,
    NodesHealthy: counts.nodesHealthy,
    NodesExpected: counts.nodesExpected,
  };
}
