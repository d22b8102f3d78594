// Nodes on Nomad's wire (api/nodes.go Node, NodeListStub, DriverInfo,
// NodePurgeResponse) and back into csiplug's NodeView, NodeList and
// NodePurgeResult. A node's CSI plugins are Nomad's CSIControllerPlugins and
// CSINodePlugins (CSIInfo per plugin ID); what Nomad has no field for (the
// agent's data dir, its start, its alloc counts, a list entry's record
// time) rides in `Csiplug`. Pure functions: the routes encode, the
// ApiClient decodes.
import type { NodeList, NodePurgeResult, NodeView } from '../service';
import { csiplugField } from './agent-wire';
import { type NomadCSIInfo, decodeMaxVolumes, encodeMaxVolumes } from './plugin-wire';

/** Nomad's DriverInfo (api/nodes.go); csiplug fingerprints no driver attributes and keeps no update time. */
export interface NomadDriverInfo {
  Detected: boolean;
  /** Left out in a node list entry: the cluster's records list the detected drivers alone. */
  Healthy?: boolean;
  HealthDescription?: string;
}

/** What csiplug adds to a node. */
export interface NodeExtras {
  /** The csiplug agent's version. */
  version: string;
  dataDir: string;
  /** ms since the epoch. */
  startedAt: number;
  allocs: { running: number; pending: number; dead: number };
}

/** Nomad's Node (api/nodes.go), as far as csiplug knows it. */
export interface NomadNode {
  ID: string;
  Name: string;
  Datacenter?: string;
  NodeClass?: string;
  Attributes?: Record<string, string>;
  Meta?: Record<string, string>;
  /** csiplug has no drain or eligibility switch: a node takes work while it is ready. */
  SchedulingEligibility: 'eligible';
  Drain: false;
  Status: 'ready' | 'down';
  Drivers: Record<string, NomadDriverInfo>;
  CSIControllerPlugins: Record<string, NomadCSIInfo>;
  CSINodePlugins: Record<string, NomadCSIInfo>;
  Csiplug: NodeExtras & { region?: string };
}

/** What csiplug adds to a node list entry. */
export interface NodeListExtras {
  /** Whether the answering agent runs in cluster mode. */
  cluster: boolean;
  /** The entry is the answering agent's own node. */
  self: boolean;
  /** The node's identity (the instance id kept in its agent's data dir); absent on a record written before identities. */
  identity?: string;
  /** The agent's API address, as it registered it. */
  address?: string;
  /** ms since the epoch: when the node last wrote its record. */
  updatedAt?: number;
  /** Its CSI plugin instances, as its record lists them. */
  plugins: { id: string; type: string; healthy: boolean }[];
}

/** Nomad's NodeListStub (api/nodes.go), as far as csiplug knows it. */
export interface NomadNodeListStub {
  ID: string;
  Name: string;
  Datacenter?: string;
  NodeClass: string;
  SchedulingEligibility: 'eligible';
  Drain: false;
  Status: 'ready' | 'down';
  Drivers: Record<string, NomadDriverInfo>;
  Csiplug: NodeListExtras;
}

/** Nomad's NodePurgeResponse (api/nodes.go): csiplug makes no evaluations; what the purge released is in Csiplug. */
export interface NomadNodePurgeResponse {
  EvalIDs: string[];
  Csiplug: NodePurgeResult;
}

const DRIVER_NAMES = ['exec', 'raw_exec', 'docker', 'podman'] as const;

/** This node as Nomad's Node. */
export function encodeNode(view: NodeView): NomadNode {
  const drivers = Object.fromEntries(
    Object.entries(view.drivers).map(([name, d]) => [name, { Detected: d.detected, Healthy: d.healthy, HealthDescription: d.description }]),
  );
  // Keyed by plugin ID (any text, `__proto__` too): Maps, made into objects with Object.fromEntries.
  const controllers = new Map<string, NomadCSIInfo>();
  const nodes = new Map<string, NomadCSIInfo>();
  for (const p of view.plugins) {
    const info: NomadCSIInfo = { PluginID: p.id, Healthy: p.healthy, HealthDescription: p.description };
    // As in a CSIPlugin's maps: the group of the instance's kind is always sent (Nomad's CLI reads it without a nil check).
    if (p.type === 'csi-controller') info.ControllerInfo = {};
    else info.NodeInfo = {};
    if (p.nodeId !== undefined || p.maxVolumes !== undefined || p.topology !== undefined) {
      info.NodeInfo = {
        ...(p.nodeId !== undefined ? { ID: p.nodeId } : {}),
        ...(p.maxVolumes !== undefined ? { MaxVolumes: encodeMaxVolumes(p.maxVolumes) } : {}),
        ...(p.topology !== undefined ? { AccessibleTopology: { Segments: Object.fromEntries(Object.entries(p.topology)) } } : {}),
      };
    }
    (p.type === 'csi-controller' ? controllers : nodes).set(p.id, info);
  }
  return {
    ID: view.id,
    Name: view.name,
    ...(view.datacenter !== undefined ? { Datacenter: view.datacenter } : {}),
    ...(view.nodeClass !== undefined ? { NodeClass: view.nodeClass } : {}),
    ...(view.attributes !== undefined ? { Attributes: { ...view.attributes } } : {}),
    ...(view.meta !== undefined ? { Meta: { ...view.meta } } : {}),
    SchedulingEligibility: 'eligible',
    Drain: false,
    Status: view.status,
    Drivers: drivers,
    CSIControllerPlugins: Object.fromEntries(controllers),
    CSINodePlugins: Object.fromEntries(nodes),
    Csiplug: {
      version: view.version,
      dataDir: view.dataDir,
      startedAt: view.startedAt,
      allocs: { ...view.allocs },
      ...(view.region !== undefined ? { region: view.region } : {}),
    },
  };
}

/** Nomad's Node back into the NodeView it was made from. */
export function decodeNode(wire: NomadNode): NodeView {
  const drivers = {} as NodeView['drivers'];
  for (const name of DRIVER_NAMES) {
    const d = wire.Drivers?.[name];
    drivers[name] = { detected: d?.Detected ?? false, healthy: d?.Healthy ?? false, description: d?.HealthDescription ?? '' };
  }
  const plugins: NodeView['plugins'] = [];
  for (const [type, map] of [
    ['csi-controller', wire.CSIControllerPlugins ?? {}],
    ['csi-node', wire.CSINodePlugins ?? {}],
  ] as const) {
    for (const [id, info] of Object.entries(map)) {
      const n = info.NodeInfo;
      plugins.push({
        id,
        type,
        healthy: info.Healthy,
        description: info.HealthDescription ?? '',
        ...(n?.ID !== undefined ? { nodeId: n.ID } : {}),
        ...(n?.MaxVolumes !== undefined ? { maxVolumes: decodeMaxVolumes(n.MaxVolumes) } : {}),
        ...(n?.AccessibleTopology ? { topology: { ...n.AccessibleTopology.Segments } } : {}),
      });
    }
  }
  plugins.sort((a, b) => a.id.localeCompare(b.id) || a.type.localeCompare(b.type));
  const extras = csiplugField<NomadNode['Csiplug']>(wire, 'GET /v1/node/self');
  return {
    id: wire.ID,
    name: wire.Name,
    version: extras.version,
    dataDir: extras.dataDir,
    startedAt: extras.startedAt,
    status: wire.Status,
    ...(wire.Datacenter !== undefined ? { datacenter: wire.Datacenter } : {}),
    ...(extras.region !== undefined ? { region: extras.region } : {}),
    ...(wire.NodeClass !== undefined ? { nodeClass: wire.NodeClass } : {}),
    ...(wire.Attributes !== undefined ? { attributes: { ...wire.Attributes } } : {}),
    ...(wire.Meta !== undefined ? { meta: { ...wire.Meta } } : {}),
    drivers,
    plugins,
    allocs: { ...extras.allocs },
  };
}

/**
 * The node list as Nomad's []NodeListStub. A cluster node's ID is its node name (the
 * cluster's records, claims and placements go by it; /v1/node/self, the
 * agent's node_id and Allocation.NodeID give the same).
 */
export function encodeNodeList(list: NodeList): NomadNodeListStub[] {
  return list.nodes.map((n) => ({
    ID: n.id ?? n.name,
    Name: n.name,
    ...(n.datacenter !== undefined ? { Datacenter: n.datacenter } : {}),
    NodeClass: n.nodeClass,
    SchedulingEligibility: 'eligible',
    Drain: false,
    Status: n.status,
    Drivers: Object.fromEntries(n.drivers.map((d) => [d, { Detected: true }])),
    Csiplug: {
      cluster: list.cluster,
      self: n.self,
      ...(n.identity !== undefined ? { identity: n.identity } : {}),
      ...(n.address !== undefined ? { address: n.address } : {}),
      ...(n.updatedAt !== undefined ? { updatedAt: n.updatedAt } : {}),
      plugins: n.plugins.map((p) => ({ ...p })),
    },
  }));
}

/** []NodeListStub back into the NodeList (an empty list reads as an agent on its own). */
export function decodeNodeList(wire: NomadNodeListStub[]): NodeList {
  return {
    cluster: wire[0]?.Csiplug?.cluster ?? false,
    nodes: wire.map((n) => {
      const extras = n.Csiplug;
      return {
        ...(n.ID !== n.Name ? { id: n.ID } : {}),
        name: n.Name,
        ...(extras?.identity !== undefined ? { identity: extras.identity } : {}),
        status: n.Status,
        nodeClass: n.NodeClass ?? '',
        ...(n.Datacenter !== undefined ? { datacenter: n.Datacenter } : {}),
        drivers: Object.entries(n.Drivers ?? {})
          .filter(([, d]) => d.Detected)
          .map(([name]) => name),
        plugins: (extras?.plugins ?? []).map((p) => ({ ...p })),
        ...(extras?.address !== undefined ? { address: extras.address } : {}),
        ...(extras?.updatedAt !== undefined ? { updatedAt: extras.updatedAt } : {}),
        self: extras?.self ?? false,
      };
    }),
  };
}

export function encodeNodePurge(result: NodePurgeResult): NomadNodePurgeResponse {
  return { EvalIDs: [], Csiplug: { ...result, releasedVolumes: [...result.releasedVolumes] } };
}

export function decodeNodePurge(wire: NomadNodePurgeResponse): NodePurgeResult {
  const r = csiplugField<NodePurgeResult>(wire, 'PUT /v1/node/:id/purge');
  return { name: r.name, ...(r.identity !== undefined ? { identity: r.identity } : {}), releasedVolumes: [...r.releasedVolumes] };
}
