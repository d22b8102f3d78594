// Nodes through Nomad's Node, NodeListStub and NodePurgeResponse and back:
// nothing of csiplug's views is lost.
import type { NodeList, NodePurgeResult, NodeView } from '../service';
import {
  type NomadNode,
  type NomadNodeListStub,
  type NomadNodePurgeResponse,
  decodeNode,
  decodeNodeList,
  decodeNodePurge,
  encodeNode,
  encodeNodeList,
  encodeNodePurge,
} from './node-wire';

const viaJson = <T>(value: unknown): T => JSON.parse(JSON.stringify(value)) as T;

const DRIVERS: NodeView['drivers'] = {
  exec: { detected: true, healthy: true, description: 'isolated tasks on runc' },
  raw_exec: { detected: false, healthy: false, description: 'disabled' },
  docker: { detected: true, healthy: true, description: 'OCI images' },
  podman: { detected: true, healthy: false, description: 'OCI images' },
};

const FULL: NodeView = {
  id: 'node-1a2b',
  name: 'host-a',
  version: '0.1.0',
  dataDir: '/var/lib/csiplug',
  startedAt: 1_733_325_000_123,
  status: 'ready',
  datacenter: 'dc2',
  region: 'eu',
  nodeClass: 'storage',
  attributes: { 'kernel.name': 'linux', 'cpu.numcores': '2' },
  meta: { rack: 'r1' },
  drivers: DRIVERS,
  plugins: [
    { id: 'hostpath', type: 'csi-controller', healthy: true, description: 'healthy' },
    {
      id: 'hostpath',
      type: 'csi-node',
      healthy: true,
      description: 'healthy',
      nodeId: 'csi-7',
      topology: { zone: 'a' },
      maxVolumes: 'unlimited',
    },
    { id: 'other', type: 'csi-node', healthy: false, description: 'probe failed', nodeId: 'csi-8', maxVolumes: 12 },
  ],
  allocs: { running: 2, pending: 1, dead: 3 },
};

const BARE: NodeView = {
  id: 'node-1a2b',
  name: 'host-a',
  version: '0.1.0',
  dataDir: '/d',
  startedAt: 0,
  status: 'down',
  drivers: DRIVERS,
  plugins: [],
  allocs: { running: 0, pending: 0, dead: 0 },
};

describe("nodes on Nomad's wire", () => {
  it('a node with every field set, and with none, comes back as it was', () => {
    for (const view of [FULL, BARE]) expect(decodeNode(viaJson<NomadNode>(encodeNode(view)))).toEqual(view);
  });

  it("puts the drivers and the plugins in Nomad's maps", () => {
    const wire = encodeNode(FULL);
    expect(wire).toMatchObject({
      ID: 'node-1a2b',
      Name: 'host-a',
      Datacenter: 'dc2',
      NodeClass: 'storage',
      Status: 'ready',
      Meta: { rack: 'r1' },
    });
    expect(wire.Drivers.exec).toEqual({ Detected: true, Healthy: true, HealthDescription: 'isolated tasks on runc' });
    expect(Object.keys(wire.CSIControllerPlugins)).toEqual(['hostpath']);
    expect(wire.CSINodePlugins.other).toEqual({
      PluginID: 'other',
      Healthy: false,
      HealthDescription: 'probe failed',
      NodeInfo: { ID: 'csi-8', MaxVolumes: 12 },
    });
    expect(wire.Csiplug).toEqual({
      version: '0.1.0',
      dataDir: '/var/lib/csiplug',
      startedAt: 1_733_325_000_123,
      allocs: FULL.allocs,
      region: 'eu',
    });
  });

  it('the node list comes back as it was: a cluster with every field, an agent on its own with none', () => {
    const cluster: NodeList = {
      cluster: true,
      nodes: [
        {
          name: 'alpha',
          identity: 'id-alpha',
          status: 'ready',
          nodeClass: 'storage',
          datacenter: 'dc2',
          drivers: ['exec', 'docker'],
          plugins: [{ id: 'hostpath', type: 'csi-node', healthy: true }],
          address: 'http://10.0.0.1:4646',
          updatedAt: 1_733_325_000_123,
          self: true,
        },
        { name: 'beta', status: 'down', nodeClass: '', drivers: [], plugins: [], self: false },
      ],
    };
    const alone: NodeList = {
      cluster: false,
      nodes: [{ name: 'node-1a2b', status: 'ready', nodeClass: '', drivers: [], plugins: [], self: true }],
    };
    const aloneNamed: NodeList = {
      cluster: false,
      nodes: [{ id: 'node-1a2b', name: 'host-a', status: 'ready', nodeClass: 'gpu', drivers: [], plugins: [], self: true }],
    };
    for (const list of [cluster, alone, aloneNamed])
      expect(decodeNodeList(viaJson<NomadNodeListStub[]>(encodeNodeList(list)))).toEqual(list);
    const [alpha, beta] = encodeNodeList(cluster);
    // A cluster node's ID is its node name (what its record, claims and placements carry), its identity in Csiplug.
    expect(alpha).toMatchObject({
      ID: 'alpha',
      Name: 'alpha',
      Datacenter: 'dc2',
      Csiplug: { identity: 'id-alpha' },
      NodeClass: 'storage',
      Status: 'ready',
      SchedulingEligibility: 'eligible',
    });
    expect(alpha!.Drivers).toEqual({ exec: { Detected: true }, docker: { Detected: true } });
    expect(beta).toMatchObject({ ID: 'beta', Name: 'beta' });
    expect(beta!.Csiplug.identity).toBeUndefined();
    // An agent on its own: its node_id as ID, its name as Name.
    expect(encodeNodeList(aloneNamed)[0]).toMatchObject({ ID: 'node-1a2b', Name: 'host-a', NodeClass: 'gpu' });
  });

  it('every controller plugin has a ControllerInfo and every node plugin a NodeInfo', () => {
    const wire = encodeNode(FULL);
    expect(wire.CSIControllerPlugins['hostpath']!.ControllerInfo).toEqual({});
    expect(wire.CSINodePlugins['other']!.NodeInfo).toMatchObject({ ID: 'csi-8', MaxVolumes: 12 });
    const plain: NodeView = { ...BARE, plugins: [{ id: 'p', type: 'csi-node', healthy: false, description: 'starting' }] };
    expect(encodeNode(plain).CSINodePlugins['p']!.NodeInfo).toEqual({});
    expect(decodeNode(viaJson<NomadNode>(encodeNode(plain)))).toEqual(plain);
  });

  it('a plugin ID or topology key "__proto__" is kept as a key like any other', () => {
    const odd: NodeView = {
      ...BARE,
      id: '__proto__',
      plugins: [{ id: '__proto__', type: 'csi-node', healthy: true, description: '', topology: { ['__proto__']: 'x' } }], // a computed key: an own property
    };
    const text = JSON.stringify(encodeNode(odd));
    expect(text).toContain('"CSINodePlugins":{"__proto__":{"PluginID":"__proto__"');
    expect(text).toContain('"Segments":{"__proto__":"x"}');
    expect(decodeNode(viaJson<NomadNode>(encodeNode(odd)))).toEqual(odd);
  });

  it("a purge's answer comes back as it was", () => {
    const results: NodePurgeResult[] = [
      { name: 'beta', identity: 'id-beta', releasedVolumes: ['vol-1', 'vol-2'] },
      { name: 'gamma', releasedVolumes: [] },
    ];
    for (const r of results) {
      const wire = encodeNodePurge(r);
      expect(wire.EvalIDs).toEqual([]);
      expect(decodeNodePurge(viaJson<NomadNodePurgeResponse>(wire))).toEqual(r);
    }
  });
});
