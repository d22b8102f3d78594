// `csiplug plugin status [ID]`.
import type { PluginInstanceView, PluginView } from '../service';
import { Command, VERBOSE_FLAG } from './command';
import { formatKV, formatTable, formatValue, orNone, shortId } from './format';

function instance(title: string, inst: PluginInstanceView | undefined, verbose: boolean): string {
  if (!inst) return `${title}\nNone`;
  const info = Object.entries(inst.info ?? {}).map(([k, v]): [string, string] => [k, formatValue(v)]);
  return `${title}\n${formatKV([
    ['Healthy', String(inst.healthy)],
    ['Alloc ID', shortId(inst.allocId, verbose)],
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
  if (p.controller || p.controllerRequired || p.controllersExpected > 0) sections.push(instance('Controller', p.controller, verbose));
  sections.push(instance('Node', p.node, verbose));
  sections.push(`Allocations\n${p.allocs.length ? formatTable(['ID'], p.allocs.map((a) => [shortId(a, verbose)])) : 'No allocations'}`);
  return sections.join('\n\n');
}

const pluginStatus: Command = {
  name: 'plugin status',
  usageArgs: '[ID]',
  synopsis: 'Show CSI plugins, or one plugin with its node and controller details',
  help: 'Without ID, lists every CSI plugin with its healthy and expected controllers and nodes. With ID, shows the plugin, its node and controller instances as fingerprinted, and the allocations running it.',
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
      if (ctx.json) ctx.printJson(plugins);
      else if (plugins.length === 0) ctx.out('No CSI plugins');
      else {
        ctx.out(
          formatTable(
            ['ID', 'Provider', 'Controllers Healthy/Expected', 'Nodes Healthy/Expected'],
            plugins.map((p) => [p.id, orNone(p.provider), `${p.controllersHealthy}/${p.controllersExpected}`, `${p.nodesHealthy}/${p.nodesExpected}`]),
          ),
        );
      }
      return 0;
    }
    const plugin = await client.getPlugin(id);
    if (ctx.json) ctx.printJson(plugin);
    else ctx.out(describe(plugin, ctx.verbose));
    return 0;
  },
};

export const PLUGIN_COMMANDS: Command[] = [pluginStatus];
