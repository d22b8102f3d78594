import * as os from 'os';
import { parseAgentConfig } from './agent-config';

const parse = (body: string) => parseAgentConfig(`data_dir = "/var/lib/csiplug"\nnode_id = "n1"\n${body}\n`, 'agent.hcl');
const CLUSTER = (rest: string) => `cluster {\n  etcd {\n    endpoints = ["http://e:2379"]\n  }\n${rest}\n}`;

describe("the node's part of the agent config (name, datacenter, region, client {})", () => {
  it("has Nomad's defaults: the host name, dc1, global, no class, no meta", async () => {
    expect((await parse('')).node).toEqual({ name: os.hostname(), datacenter: 'dc1', region: 'global', nodeClass: '', meta: {} });
  });

  it('reads client { node_class meta network_interface } and the top-level name, datacenter, region', async () => {
    const c = await parse(
      'name = "s7"\ndatacenter = "dc2"\nregion = "eu"\nclient {\n  node_class = "storage"\n  meta {\n    rack = "r1"\n  }\n  network_interface = "ens3"\n}',
    );
    expect(c.node).toEqual({
      name: 's7',
      datacenter: 'dc2',
      region: 'eu',
      nodeClass: 'storage',
      meta: { rack: 'r1' },
      networkInterface: 'ens3',
    });
  });

  it("in a cluster, the cluster's node_name, class and meta count, merged with client {}", async () => {
    const c = await parse(
      `client {\n  meta {\n    zone = "a"\n  }\n}\n${CLUSTER('  node_name = "cn1"\n  node_class = "fast"\n  meta = { rack = "r7" }')}`,
    );
    expect(c.node).toEqual({ name: 'cn1', datacenter: 'dc1', region: 'global', nodeClass: 'fast', meta: { rack: 'r7', zone: 'a' } });
    // …and the cluster's node record says the same.
    expect(c.cluster).toMatchObject({ nodeName: 'cn1', nodeClass: 'fast', meta: { rack: 'r7', zone: 'a' } });
    // The top-level name wins over the cluster's node_name (which stays the node's id in the cluster).
    expect((await parse(`name = "shown"\n${CLUSTER('  node_name = "cn1"')}`)).node.name).toBe('shown');
  });

  it.each<[string, string, RegExp]>([
    [
      'a meta key the cluster gives another value',
      `client {\n  meta {\n    rack = "r1"\n  }\n}\n${CLUSTER('  meta = { rack = "r7" }')}`,
      /client\.meta rack is "r1" here but "r7" in cluster \{ meta \}: give it one value/,
    ],
    [
      'two node classes',
      `client {\n  node_class = "a"\n}\n${CLUSTER('  node_class = "b"')}`,
      /client\.node_class is "a" but cluster \{ node_class \} is "b": set it in one place/,
    ],
    [
      'client { enabled = false }',
      'client {\n  enabled = false\n}',
      /client\.enabled may not be false: a csiplug agent is always a client/,
    ],
    ['client { servers }', 'client {\n  servers = ["1.2.3.4"]\n}', /client\.servers is not supported: a csiplug agent joins no servers/],
    ['a datacenter with a space', 'datacenter = "dc 1"', /datacenter "dc 1" must be letters, digits/],
    ['a name with a slash', 'name = "a/b"', /name "a\/b" must be a node name without spaces or slashes/],
    [
      'a bad interface name',
      'client {\n  network_interface = "eth0 eth1"\n}',
      /client\.network_interface "eth0 eth1" is not a network interface name/,
    ],
  ])('refuses %s', async (_what, body, message) => {
    await expect(parse(body)).rejects.toThrow(message);
  });
});
