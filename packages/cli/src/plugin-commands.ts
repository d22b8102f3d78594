// `csiplug plugin status [ID]`.
import type { PluginInstanceView, PluginView } from '@csiplug/api/client';
import { type Command, VERBOSE_FLAG } from './command';
import { formatKV, formatTable, formatTime, formatValue, orNone, shortId } from './format';
import { printList } from './print-list';

function instance(title: string, inst: PluginInstanceView | undefined, verbose: boolean): string {
  if (!inst) return `${title}\nNone`;
  const info = Object.entries(inst.info ?? {}).map(([k, v]): [string, string] => [k, formatValue(v)]);
  return `${title}\n${formatKV([
    ['Healthy', String(inst.healthy)],
    // A routed controller has no alloc here: it is another node's, reached through the cluster.
    ...(inst.routed
      ? ([
          [
            'Routed To',
            inst.routed.node ? `node ${inst.routed.node} (the last to answer)` : 'a node with a healthy controller (none asked yet)',
          ],
        ] as [string, string][])
      : [['Alloc ID', shortId(inst.allocId, verbose)] as [string, string]]),
    ['Description', orNone(inst.description)],
    ['Version', orNone(inst.version)],
    ...info,
  ])}`;
}

function describe(p: PluginView, verbose: boolean): string {
  const sections = [
    formatKV([
      ['ID', p.id],
      ['Provider', orNone(p.provider)],
      ['Version', orNone(p.version)],
      ['Controllers Healthy', String(p.controllersHealthy)],
      ['Controllers Expected', String(p.controllersExpected)],
      ['Nodes Healthy', String(p.nodesHealthy)],
      ['Nodes Expected', String(p.nodesExpected)],
    ]),
  ];
  if (p.cluster) {
    const c = p.cluster;
    sections.push(
      `Cluster (nodes read ${formatTime(c.readAt)})\n${formatKV([
        ['Controllers Healthy', `${c.controllersHealthy}/${c.controllersExpected}`],
        ['Nodes Healthy', `${c.nodesHealthy}/${c.nodesExpected}`],
      ])}\n\n${
        c.instances.length
          ? formatTable(
              ['Node', 'Type', 'Healthy', 'Node Status'],
              c.instances.map((i) => [i.node, i.type, String(i.healthy), i.nodeStatus]),
            )
          : 'No instances on any node'
      }`,
    );
  }
  if (p.controller || p.controllerRequired || p.controllersExpected > 0) sections.push(instance('Controller', p.controller, verbose));
  sections.push(instance('Node', p.node, verbose));
  sections.push(
    `Allocations\n${
      p.allocs.length
        ? formatTable(
            ['ID'],
            p.allocs.map((a) => [shortId(a, verbose)]),
          )
        : 'No allocations'
    }`,
  );
  return sections.join('\n\n');
}

const pluginStatus: Command = {
  name: 'plugin status',
  usageArgs: '[ID]',
  synopsis: 'Show CSI plugins, or one plugin with its node and controller details',
  help:
    'Without ID, lists every CSI plugin with its healthy and expected controllers and nodes (in cluster mode, across every node of the cluster). ' +
    'With ID, shows the plugin, its instances on each node of the cluster (in cluster mode), its node and controller instances here as fingerprinted, and the allocations running it here.',
  minArgs: 0,
  maxArgs: 1,
  api: true,
  json: true,
  flags: [VERBOSE_FLAG],
  async run(ctx) {
    const client = ctx.client();
    const id = ctx.args[0];
    if (id === undefined) {
      const plugins = await client.listPlugins();
      printList(ctx, {
        answer: plugins,
        items: plugins,
        empty: 'No CSI plugins',
        header: ['ID', 'Provider', 'Controllers Healthy/Expected', 'Nodes Healthy/Expected'],
        // In a cluster, the counts are the cluster's (every node's record); on its own, this node's.
        row: (p) => {
          const n = p.cluster ?? p;
          return [p.id, orNone(p.provider), `${n.controllersHealthy}/${n.controllersExpected}`, `${n.nodesHealthy}/${n.nodesExpected}`];
        },
      });
      return 0;
    }
    const plugin = await client.getPlugin(id);
    if (ctx.json) ctx.printJson(plugin);
    else ctx.out(describe(plugin, ctx.verbose));
    return 0;
  },
};

export const PLUGIN_COMMANDS: Command[] = [pluginStatus];
