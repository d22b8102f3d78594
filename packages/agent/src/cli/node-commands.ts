// `csiplug node status`: this node — its id, task drivers, and what its CSI
// plugins' fingerprints found (node id, topology, volume limit).
import type { NodeView } from '../service';
import { Command, VERBOSE_FLAG } from './command';
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
          orNone(p.topology && Object.entries(p.topology).map(([k, v]) => `${k}=${v}`).join(',')),
          p.maxVolumes === undefined ? '-' : String(p.maxVolumes),
          p.description,
        ]),
      )
    : 'No CSI plugins';
  return `${kv}\n\nDrivers\n${drivers}\n\nCSI Plugins\n${plugins}`;
}

const nodeStatus: Command = {
  name: 'node status',
  usageArgs: '',
  synopsis: 'Show this node: its id, task drivers and CSI plugins',
  help: "Shows the agent's node: its id, status, task drivers (exec needs runc) and each CSI plugin instance with what its fingerprint found (node id, topology, max volumes).",
  minArgs: 0,
  maxArgs: 0,
  api: true,
  json: true,
  flags: [VERBOSE_FLAG, { name: 'self', kind: 'bool', help: 'This node (the only one an agent knows; accepted as Nomad spells it).' }],
  async run(ctx) {
    const node = await ctx.client().node();
    if (ctx.json) ctx.printJson(node);
    else ctx.out(describe(node));
    return 0;
  },
};

export const NODE_COMMANDS: Command[] = [nodeStatus];
