// `csiplug node status`: this node — its id, task drivers, and what its CSI
// plugins' fingerprints found (node id, topology, volume limit) — or, for an
// agent in a cluster, every node of it, ready or down (as Nomad lists them;
// `-self` shows this one). `csiplug node purge NODE`: a down node of the
// cluster gone for good (its claims released, its record removed).
import { ApiError } from '@csiplug/api/client';
import type { NodeList, NodeView } from '@csiplug/api/client';
import { type Command, VERBOSE_FLAG } from './command';
import { formatKV, formatTable, formatTime, orNone } from './format';

function describe(n: NodeView): string {
  const kv = formatKV([
    ['ID', n.id],
    ['Name', n.name],
    ['Status', n.status],
    ['Version', n.version],
    ['Data Dir', n.dataDir],
    ['Started', formatTime(n.startedAt)],
    ['Allocations', `${n.allocs.running} running, ${n.allocs.pending} pending, ${n.allocs.dead} dead`],
  ]);
  const drivers = formatTable(
    ['Driver', 'Detected', 'Healthy', 'Description'],
    Object.entries(n.drivers).map(([name, d]) => [name, String(d.detected), String(d.healthy), d.description]),
  );
  const plugins = n.plugins.length
    ? formatTable(
        ['Plugin ID', 'Type', 'Healthy', 'Node ID', 'Topology', 'Max Volumes', 'Description'],
        n.plugins.map((p) => [
          p.id,
          p.type,
          String(p.healthy),
          orNone(p.nodeId),
          orNone(
            p.topology &&
              Object.entries(p.topology)
                .map(([k, v]) => `${k}=${v}`)
                .join(','),
          ),
          p.maxVolumes === undefined ? '-' : String(p.maxVolumes),
          p.description,
        ]),
      )
    : 'No CSI plugins';
  return `${kv}\n\nDrivers\n${drivers}\n\nCSI Plugins\n${plugins}`;
}

/** As Nomad lists node ids: the first 8 characters, the whole id with -verbose. */
function shortId(id: string | undefined, verbose: boolean): string {
  if (!id) return '-';
  return verbose ? id : id.slice(0, 8);
}

function listNodes(list: NodeList, verbose: boolean): string {
  return formatTable(
    ['ID', 'Name', 'Class', 'Status', 'Drivers', 'Plugins (healthy/all)', 'Address', 'Updated'],
    list.nodes.map((n) => [
      shortId(n.identity, verbose),
      n.self ? `${n.name} (this node)` : n.name,
      orNone(n.nodeClass),
      n.status,
      orNone(n.drivers.join(',')),
      `${n.plugins.filter((p) => p.healthy).length}/${n.plugins.length}`,
      orNone(n.address),
      n.updatedAt ? formatTime(n.updatedAt) : '-',
    ]),
  );
}

const nodeStatus: Command = {
  name: 'node status',
  usageArgs: '',
  synopsis: 'Show this node (its id, task drivers and CSI plugins), or every node of its cluster',
  help:
    "On its own, shows the agent's node: its id, status, task drivers (exec, docker and podman need runc) and each CSI plugin instance with what its fingerprint found (node id, topology, max volumes). " +
    "In cluster mode (config cluster { … }), lists every node of the cluster, ready or down (a node whose lease in etcd ran out is down), each with its ID: the identity kept in its agent's data dir (the first 8 characters; -verbose: all of it). -self shows this node as above.",
  minArgs: 0,
  maxArgs: 0,
  api: true,
  json: true,
  flags: [
    VERBOSE_FLAG,
    { name: 'self', kind: 'bool', help: 'This node, in detail (in a cluster; on its own that is what node status shows anyway).' },
  ],
  async run(ctx) {
    const client = ctx.client();
    if (!ctx.flag('self')) {
      // An agent from before cluster mode has no /v1/nodes: it is one node on its own.
      const list = await client.listNodes().catch((err: unknown) => {
        if (err instanceof ApiError && err.status === 404) return undefined;
        throw err;
      });
      if (list?.cluster) {
        if (ctx.json) ctx.printJson(list);
        else ctx.out(listNodes(list, ctx.verbose));
        return 0;
      }
    }
    const node = await client.node();
    if (ctx.json) ctx.printJson(node);
    else ctx.out(describe(node));
    return 0;
  },
};

const nodePurge: Command = {
  name: 'node purge',
  usageArgs: 'NODE',
  synopsis: 'Remove a down node of the cluster for good',
  help:
    'Cluster mode: the node NODE (by name) is gone for good. What was published to it is unpublished (through a controller of the plugin), its claims are released, and its record is removed, so its name is free for another machine: ' +
    'a node name whose record belongs to another identity is refused while that node holds claims or placements. A ready node is never purged: stop its agent first. Its alloc slots move as for any down node.',
  minArgs: 1,
  maxArgs: 1,
  api: true,
  json: true,
  async run(ctx) {
    const result = await ctx.client().purgeNode(ctx.args[0]!);
    if (ctx.json) {
      ctx.printJson(result);
      return 0;
    }
    const released = result.releasedVolumes.length ? `; claims released on ${result.releasedVolumes.join(', ')}` : '; it held no claims';
    ctx.out(`==> Node "${result.name}" (identity ${result.identity ?? 'unknown'}) purged${released}`);
    return 0;
  },
};

export const NODE_COMMANDS: Command[] = [nodeStatus, nodePurge];
