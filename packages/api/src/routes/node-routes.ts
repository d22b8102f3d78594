// The agent, node and plugin routes: health, this node, the nodes, a down
// node's purge, the plugins, and (cluster mode, agent to agent) a CSI call
// routed to this node's own controller of a plugin.
import { ApiError } from '../api-error';
import { csiTypeParam } from '../route-params';
import type { AgentService } from '../service';
import { type Handler, READS_CLUSTER, type RouteTable, addEach } from './route-context';

export function addNodeRoutes(r: RouteTable, s: AgentService): void {
  r.add('GET', '/v1/agent/health', () => {
    const health = s.health();
    return { status: health.ok ? 200 : 503, body: health };
  });
  r.add('GET', '/v1/node/self', () => ({ body: s.node() }));
  r.add('GET', '/v1/nodes', async () => ({ body: await s.listNodes() }), READS_CLUSTER);
  // Nomad's PUT /v1/node/:node_id/purge (here by node name): a down node gone for good.
  const purgeNode: Handler = async ({ params }) => ({ body: await s.purgeNode(params.name!) });
  addEach(r, ['PUT', 'POST'], '/v1/node/:name/purge', purgeNode);
  // Cluster mode, agent to agent (@csiplug/cluster's routed controllers): a CSI call made on this node's own controller of the plugin.
  r.add('POST', '/v1/cluster/csi/:plugin/:service/:rpc', async (ctx) => {
    const body = await ctx.json();
    const request = (body as { request?: unknown } | null)?.request;
    return { body: await s.answerRoutedCall(ctx.params.plugin!, ctx.params.service!, ctx.params.rpc!, request, ctx.signal) };
  });
  r.add('GET', '/v1/plugins', ({ query }) => {
    csiTypeParam(query);
    return { body: s.listPlugins() };
  });
  r.add('GET', '/v1/plugin/csi/:id', ({ params }) => {
    const plugin = s.getPlugin(params.id!);
    if (!plugin) throw ApiError.notFound(`plugin "${params.id}" not found`);
    return { body: plugin };
  });
}
