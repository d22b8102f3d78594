// Plugins through Nomad's CSIPlugin and back: nothing of csiplug's view is
// lost, and what Nomad has a field for is in that field.
import type { PluginView } from '../service';
import {
  type NomadCSIPlugin,
  UNLIMITED_MAX_VOLUMES,
  decodeMaxVolumes,
  decodePlugin,
  encodeMaxVolumes,
  encodePlugin,
  encodePluginStub,
} from './plugin-wire';
import type { NomadAllocationListStub } from './alloc-wire';

const NODE_ID = 'node-1a2b';

/** encode → JSON text → decode, as the route and the ApiClient do it. */
function roundTrip(view: PluginView): PluginView {
  return decodePlugin(JSON.parse(JSON.stringify(encodePlugin(view, NODE_ID))) as NomadCSIPlugin);
}

const FULL: PluginView = {
  id: 'hostpath',
  provider: 'csi.hostpath.example',
  version: '1.2.3',
  controllerRequired: true,
  controllersHealthy: 1,
  controllersExpected: 1,
  nodesHealthy: 0,
  nodesExpected: 1,
  controller: {
    healthy: true,
    allocId: 'alloc-c',
    description: 'healthy',
    version: '1.2.3',
    info: {
      'Last Error': 'probe timed out once',
      'Create/Delete Volumes': true,
      'Attach/Detach (ControllerPublish)': true,
      'List Volumes': false,
      'List Volumes Published Nodes': true,
      'Get Capacity': false,
      Snapshots: true,
      'List Snapshots': true,
      Clone: false,
      Expand: true,
      'Accessibility Constraints': true,
      'Volume Expansion': 'online, offline',
    },
    routed: { node: 'other-node' },
  },
  node: {
    healthy: false,
    allocId: 'alloc-n',
    description: 'probe failed: connection refused',
    version: '1.2.2',
    info: {
      'Node ID': 'csi-node-7',
      'Max Volumes': 'unlimited',
      Topology: 'zone=a, rack=r1',
      'Requires Staging': true,
      'Volume Stats': true,
      'Volume Condition': false,
      Expand: false,
    },
  },
  allocs: ['alloc-c', 'alloc-n'],
  cluster: {
    controllersHealthy: 2,
    controllersExpected: 2,
    nodesHealthy: 1,
    nodesExpected: 3,
    instances: [
      { node: 'alpha', type: 'csi-controller', healthy: true, nodeStatus: 'ready' },
      { node: 'alpha', type: 'csi-node', healthy: true, nodeStatus: 'ready' },
      { node: 'beta', type: 'csi-node', healthy: false, nodeStatus: 'down' },
    ],
    readAt: 1_733_325_000_123,
  },
};

const BARE: PluginView = {
  id: 'lonely',
  controllerRequired: false,
  controllersHealthy: 0,
  controllersExpected: 0,
  nodesHealthy: 0,
  nodesExpected: 0,
  allocs: [],
};

describe("plugins on Nomad's wire", () => {
  it('a plugin with every field set comes back as it was', () => {
    expect(roundTrip(FULL)).toEqual(FULL);
  });

  it('a plugin with no optional field set comes back as it was', () => {
    expect(roundTrip(BARE)).toEqual(BARE);
    const wire = encodePlugin(BARE, NODE_ID);
    expect(wire).toEqual({
      ID: 'lonely',
      ControllerRequired: false,
      Controllers: {},
      Nodes: {},
      Allocations: [],
      ControllersHealthy: 0,
      ControllersExpected: 0,
      NodesHealthy: 0,
      NodesExpected: 0,
    });
  });

  it("puts what Nomad has a field for in Nomad's fields, keyed by node, and the rest in Csiplug", () => {
    const wire = encodePlugin(FULL, NODE_ID);
    // Nomad's counts are the cluster's; this node's own are csiplug's.
    expect(wire).toMatchObject({ ControllersHealthy: 2, NodesExpected: 3, Csiplug: { thisNode: { nodesExpected: 1 } } });
    expect(wire.Allocations).toEqual([{ ID: 'alloc-c' }, { ID: 'alloc-n' }]);
    expect(wire.Nodes[NODE_ID]).toMatchObject({
      PluginID: 'hostpath',
      AllocID: 'alloc-n',
      Healthy: false,
      HealthDescription: 'probe failed: connection refused',
      NodeInfo: {
        ID: 'csi-node-7',
        MaxVolumes: UNLIMITED_MAX_VOLUMES,
        AccessibleTopology: { Segments: { zone: 'a', rack: 'r1' } },
        RequiresNodeStageVolume: true,
        SupportsStats: true,
        SupportsCondition: false,
        SupportsExpand: false,
      },
    });
    expect(wire.Nodes[NODE_ID]!.ControllerInfo).toBeUndefined();
    expect(wire.Controllers[NODE_ID]).toMatchObject({
      RequiresTopologies: true,
      ControllerInfo: {
        SupportsCreateDelete: true,
        SupportsAttachDetach: true,
        SupportsListVolumes: false,
        SupportsListVolumesAttachedNodes: true,
        SupportsCreateDeleteSnapshot: true,
        SupportsExpand: true,
      },
      Csiplug: { info: { 'Last Error': 'probe timed out once', 'Volume Expansion': 'online, offline' }, routed: { node: 'other-node' } },
    });
    expect(Object.keys(wire.Controllers[NODE_ID]!.Csiplug!.info!)).toEqual(['Last Error', 'Volume Expansion']);
    expect(wire.Nodes['beta']).toEqual({ PluginID: 'hostpath', Healthy: false, NodeInfo: {}, Csiplug: { nodeStatus: 'down' } });
  });

  it("this node's own instance, listed by its cluster record too under the same key, is one entry and reads back as both", () => {
    const view: PluginView = {
      ...FULL,
      cluster: {
        ...FULL.cluster!,
        instances: [
          { node: 'beta', type: 'csi-node', healthy: false, nodeStatus: 'down' },
          { node: NODE_ID, type: 'csi-controller', healthy: false, nodeStatus: 'ready' },
          { node: NODE_ID, type: 'csi-node', healthy: true, nodeStatus: 'ready' },
        ],
      },
    };
    const wire = encodePlugin(view, NODE_ID);
    expect(Object.keys(wire.Nodes).sort()).toEqual(['beta', NODE_ID].sort());
    expect(wire.Controllers[NODE_ID]).toMatchObject({
      AllocID: 'alloc-c',
      Healthy: true,
      Csiplug: { thisNode: true, nodeStatus: 'ready', recordHealthy: false },
    });
    expect(roundTrip(view)).toEqual(view);
  });

  it('a topology that would not read back the same stays a fact of csiplug', () => {
    const odd: PluginView = {
      ...BARE,
      node: { healthy: true, allocId: 'a', description: '', version: '', info: { Topology: 'a=b, , c' } },
    };
    expect(encodePlugin(odd, NODE_ID).Nodes[NODE_ID]!.Csiplug!.info).toEqual({ Topology: 'a=b, , c' });
    expect(roundTrip(odd)).toEqual(odd);
  });

  it("the list's stub carries the counts Nomad's list has", () => {
    expect(encodePluginStub(FULL)).toEqual({
      ID: 'hostpath',
      Provider: 'csi.hostpath.example',
      ControllerRequired: true,
      ControllersHealthy: 2,
      ControllersExpected: 2,
      NodesHealthy: 1,
      NodesExpected: 3,
    });
  });

  it('every Controllers entry has a ControllerInfo and every Nodes entry a NodeInfo, even when the fingerprint found nothing', () => {
    // Nomad's `plugin status -verbose` reads them without a nil check (command/plugin_status_csi.go).
    const empty: PluginView = {
      ...BARE,
      controller: { healthy: false, allocId: 'a', description: 'starting', version: '', info: {} },
      node: { healthy: false, allocId: 'a', description: 'starting', version: '', info: {} },
      cluster: {
        controllersHealthy: 0,
        controllersExpected: 2,
        nodesHealthy: 0,
        nodesExpected: 2,
        instances: [
          { node: 'beta', type: 'csi-controller', healthy: false, nodeStatus: 'down' },
          { node: 'beta', type: 'csi-node', healthy: false, nodeStatus: 'down' },
        ],
        readAt: 1,
      },
    };
    const wire = encodePlugin(empty, NODE_ID);
    for (const key of [NODE_ID, 'beta']) {
      expect(wire.Controllers[key]!.ControllerInfo).toEqual({});
      expect(wire.Nodes[key]!.NodeInfo).toEqual({});
    }
    expect(roundTrip(empty)).toEqual(empty);
  });

  it('a Max Volumes Go could not read back (MaxInt64 as a number, Infinity) is sent as unlimited', () => {
    // 2^63-1 as a JavaScript number prints as 9223372036854776000, which Go's int64 refuses.
    for (const huge of [9223372036854775807, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER + 2, Infinity, 1.5, NaN]) {
      expect(encodeMaxVolumes(huge)).toBe(UNLIMITED_MAX_VOLUMES);
      expect(Number.isSafeInteger(encodeMaxVolumes(huge))).toBe(true);
    }
    expect(encodeMaxVolumes(12)).toBe(12);
    expect(decodeMaxVolumes(encodeMaxVolumes(9223372036854775807))).toBe('unlimited');
    const plugin: PluginView = {
      ...BARE,
      node: { healthy: true, allocId: 'a', description: '', version: '', info: { 'Max Volumes': 9223372036854775807 } },
    };
    expect(JSON.stringify(encodePlugin(plugin, NODE_ID))).toContain(`"MaxVolumes":${Number.MAX_SAFE_INTEGER}`);
  });

  it('a node ID or topology key "__proto__" is kept as a key like any other', () => {
    const odd: PluginView = {
      ...BARE,
      node: { healthy: true, allocId: 'a', description: '', version: '', info: { Topology: '__proto__=x' } },
      cluster: {
        controllersHealthy: 0,
        controllersExpected: 0,
        nodesHealthy: 1,
        nodesExpected: 2,
        instances: [{ node: '__proto__', type: 'csi-node', healthy: true, nodeStatus: 'ready' }],
        readAt: 1,
      },
    };
    const text = JSON.stringify(encodePlugin(odd, NODE_ID));
    expect(text).toContain('"__proto__":{"PluginID":"lonely"');
    expect(text).toContain('"Segments":{"__proto__":"x"}');
    expect(Object.keys(encodePlugin(odd, '__proto__').Nodes)).toEqual(['__proto__']);
    expect(roundTrip(odd)).toEqual(odd);
  });

  it("Allocations are the agent's AllocationListStubs; one it does not hold keeps its ID alone", () => {
    const stub = { ID: 'alloc-c', JobID: 'plugin', ClientStatus: 'running' } as NomadAllocationListStub;
    const wire = encodePlugin(FULL, NODE_ID, (id) => (id === 'alloc-c' ? stub : undefined));
    expect(wire.Allocations).toEqual([stub, { ID: 'alloc-n' }]);
    expect(decodePlugin(JSON.parse(JSON.stringify(wire)) as NomadCSIPlugin).allocs).toEqual(['alloc-c', 'alloc-n']);
  });
});
