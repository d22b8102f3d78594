// Nomad compatibility, cluster mode: one node ID everywhere when the node's
// cluster name is not its node_id. A real agent process on real etcd with
// cluster.node_name "store-a" and node_id "n1" runs the real hostpath
// plugin job; /v1/nodes, /v1/node/self, the agent's node_id, the allocs'
// NodeID and the keys of the CSIPlugin's maps all give the cluster's name
// (what its record, claims and placements carry), and its own instances,
// listed by its record too, are one entry each. Shapes as nodes-plugins.test.ts
// declares them (api/nodes.go, api/csi.go, api/agent.go, api/allocations.go).
import { EtcdTestCluster } from '@csiplug/cluster/testing';
import { jobToNomadJson, parseJobspec } from '@csiplug/jobspec';
import { hostpathPluginJobHcl } from '../../src/commands/specs';
import { AgentHarness, pollUntil } from '../support/agent-process';
import { NomadApi } from './nomad-api';

jest.setTimeout(240_000);

/** api/nodes.go NodeListStub and Node (the fields read here). */
interface NodeListStub {
  ID: string;
  Name: string;
  Status: string;
}

/** api/nodes.go CSIInfo (the fields read here). */
interface CSIInfo {
  AllocID: string;
  Healthy: boolean;
  ControllerInfo?: Record<string, unknown>;
  NodeInfo?: Record<string, unknown>;
  /** csiplug's: nodeStatus is there once the entry is known from the node's cluster record. */
  Csiplug?: { nodeStatus?: string };
}

/** api/csi.go CSIPlugin (the fields read here). */
interface CSIPlugin {
  Controllers: Record<string, CSIInfo>;
  Nodes: Record<string, CSIInfo>;
  NodesHealthy: number;
  ControllersHealthy: number;
}

describe('Nomad compatibility, cluster mode: a node whose cluster name is not its node_id', () => {
  let etcd: EtcdTestCluster;
  let h: AgentHarness;
  let nomad: NomadApi;

  beforeAll(async () => {
    etcd = await EtcdTestCluster.start(1);
    const endpoints = etcd.endpoints.map((e) => JSON.stringify(e)).join(', ');
    h = new AgentHarness(`node_id = "n1"
cluster {
  node_name = "store-a"
  etcd {
    endpoints = [${endpoints}]
    prefix    = "nodeid"
  }
  heartbeat_ttl = "3s"
}`);
    await h.start();
    nomad = new NomadApi(`http://127.0.0.1:${h.port}`);
    const job = await parseJobspec(hostpathPluginJobHcl({ restartDelay: '100ms' }), 'plugin.hcl');
    await pollUntil(
      'the plugin job accepted',
      async () => nomad.put('/v1/jobs', { Job: jobToNomadJson(job) }).catch(() => undefined),
      30_000,
    );
    await pollUntil(
      "hostpath healthy, its node's record listing it",
      async () => {
        const p = (await nomad.get<CSIPlugin>('/v1/plugin/csi/hostpath').catch(() => undefined))?.body;
        return p && p.NodesHealthy === 1 && p.ControllersHealthy === 1 ? p : undefined;
      },
      90_000,
    );
  });

  afterAll(async () => {
    await h?.cleanup();
    await etcd?.stop();
  });

  it('gives the cluster name as the node ID in the list, the node, the agent, the allocs and the plugin maps, each instance once', async () => {
    const list = (await nomad.get<NodeListStub[]>('/v1/nodes')).body;
    expect(list.map((n) => ({ ID: n.ID, Name: n.Name, Status: n.Status }))).toEqual([{ ID: 'store-a', Name: 'store-a', Status: 'ready' }]);
    const node = (await nomad.get<NodeListStub>('/v1/node/self')).body;
    expect({ ID: node.ID, Name: node.Name }).toEqual({ ID: 'store-a', Name: 'store-a' });
    expect((await nomad.get<NodeListStub>('/v1/node/store-a')).body.ID).toBe('store-a');
    const self = (await nomad.get<{ stats: Record<string, Record<string, string>> }>('/v1/agent/self')).body;
    expect(self.stats['client']!['node_id']).toBe('store-a');
    const plugin = await pollUntil(
      'the plugin map with the record read',
      async () => {
        const p = (await nomad.get<CSIPlugin>('/v1/plugin/csi/hostpath')).body;
        const fromRecord = (m: Record<string, CSIInfo>) => Object.values(m).some((i) => i.Csiplug?.nodeStatus !== undefined);
        return fromRecord(p.Nodes) && fromRecord(p.Controllers) ? p : undefined;
      },
      30_000,
    );
    expect(Object.keys(plugin.Nodes)).toEqual(['store-a']);
    expect(Object.keys(plugin.Controllers)).toEqual(['store-a']);
    expect(plugin.Nodes['store-a']!.NodeInfo).toEqual(expect.any(Object));
    expect(plugin.Controllers['store-a']!.ControllerInfo).toEqual(expect.any(Object));
    const alloc = (await nomad.get<{ NodeID: string }>(`/v1/allocation/${plugin.Nodes['store-a']!.AllocID}`)).body;
    expect(alloc.NodeID).toBe('store-a');
    const onNode = (await nomad.get<{ ID: string; NodeID: string }[]>('/v1/node/store-a/allocations')).body;
    expect(onNode.map((a) => a.NodeID)).toEqual(onNode.map(() => 'store-a'));
    expect(onNode.map((a) => a.ID)).toContain(plugin.Nodes['store-a']!.AllocID);
  });

  it('detaches a volume from the node by the node ID the routes give (as `nomad volume detach VOL NODE` sends it)', async () => {
    // Nomad's CSIVolumeCreateRequest, as `nomad volume create` sends it.
    await nomad.put('/v1/volume/csi/detach-me/create', {
      Volumes: [
        {
          ID: 'detach-me',
          Name: 'detach-me',
          PluginID: 'hostpath',
          RequestedCapabilities: [{ AccessMode: 'single-node-writer', AttachmentMode: 'file-system' }],
        },
      ],
    });
    const detached = await nomad.delete<unknown>('/v1/volume/csi/detach-me/detach', { node: 'store-a' });
    expect(detached.status).toBe(200);
    // Another node's ID is still refused, naming this node's.
    const other = await nomad.delete<unknown>('/v1/volume/csi/detach-me/detach', { node: 'store-b' }).catch((e: Error) => e);
    expect(String(other)).toContain('node "store-b" is not this node (store-a');
  });
});
