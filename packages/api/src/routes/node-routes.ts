// The agent, node and plugin routes, answered in Nomad's shapes (wire/):
// the agent's health and itself, the status of its leader and peers, this
// node, the nodes, a down node's purge, the plugins, and (cluster mode,
// agent to agent) a CSI call routed to this node's own controller of a plugin.
import { ApiError } from '../api-error';
import { csiTypeParam } from '../route-params';
import type { AgentService } from '../service';
import { type HealthPart, encodeAgentHealth, encodeAgentSelf, encodeStatusLeader } from '../wire/agent-wire';
import { encodeAlloc, encodeAllocStub } from '../wire/alloc-wire';
import { encodeNode, encodeNodeList, encodeNodePurge } from '../wire/node-wire';
import { encodePlugin, encodePluginStub } from '../wire/plugin-wire';
import { allocNode } from './alloc-routes';
import { type Handler, READS_CLUSTER, type RouteTable, addEach } from './route-context';

/** Where this agent's API answers (`http://host:port`), once it listens. */
export type ApiUrl = () => string | undefined;

export function addNodeRoutes(r: RouteTable, s: AgentService, apiUrl: ApiUrl): void {
  // Nomad's: 200 when ok, else 500 with the same body. `?type=` other than client and server is ignored, as Nomad's
  // (asking only for others answers neither part, 200).
  r.add('GET', '/v1/agent/health', ({ query }) => {
    const asked = query.getAll('type');
    const parts = asked.filter((t): t is HealthPart => t === 'client' || t === 'server');
    return encodeAgentHealth(s.health(), asked.length ? parts : undefined);
  });
  r.add('GET', '/v1/agent/self', () => ({ body: encodeAgentSelf(s.health(), s.node()) }));
  // One agent leads itself: its own API address (wire/agent-wire.ts says why not an RPC port).
  r.add('GET', '/v1/status/leader', () => ({ body: encodeStatusLeader(apiUrl()) }));
  r.add('GET', '/v1/status/peers', () => {
    const leader = encodeStatusLeader(apiUrl());
    return { body: leader === '' ? [] : [leader] };
  });
  // Nomad's GET /v1/node/:node_id for this node (by its ID, its name, or `self`); other nodes are in /v1/nodes.
  const thisNode = (id: string) => {
    const node = s.node();
    if (id !== 'self' && id !== node.id && id !== node.name)
      throw ApiError.notFound(
        `node "${id}" not found: this agent answers for its own node (ID ${node.id}); list the cluster's nodes with GET /v1/nodes`,
      );
    return node;
  };
  r.add('GET', '/v1/node/:id', ({ params }) => ({ body: encodeNode(thisNode(params.id!)) }));
  // Nomad's GET /v1/node/:node_id/allocations: this node's allocs as full Allocations.
  r.add('GET', '/v1/node/:id/allocations', ({ params }) => {
    thisNode(params.id!);
    const node = allocNode(s);
    return { body: s.listAllocs().map((a) => encodeAlloc(a, node)) };
  });
  // Nomad's ?prefix= keeps the nodes whose ID starts with it (how `nomad node status ID` finds a short ID).
  r.add(
    'GET',
    '/v1/nodes',
    async ({ query }) => {
      const prefix = query.get('prefix') ?? '';
      return { body: encodeNodeList(await s.listNodes()).filter((n) => n.ID.startsWith(prefix)) };
    },
    READS_CLUSTER,
  );
  // Nomad's PUT /v1/node/:node_id/purge, by the node's ID (its identity) or its name: a down node gone for good.
  const purgeNode: Handler = async ({ params }) => {
    const named = params.id!;
    const byIdentity = (await s.listNodes()).nodes.find((n) => n.identity === named && n.name !== named);
    return { body: encodeNodePurge(await s.purgeNode(byIdentity?.name ?? named)) };
  };
  addEach(r, ['PUT', 'POST'], '/v1/node/:id/purge', purgeNode);
  // Cluster mode, agent to agent (@csiplug/cluster's routed controllers): a CSI call made on this node's own controller of the plugin.
  r.add('POST', '/v1/cluster/csi/:plugin/:service/:rpc', async (ctx) => {
    const body = await ctx.json();
    const request = (body as { request?: unknown } | null)?.request;
    return { body: await s.answerRoutedCall(ctx.params.plugin!, ctx.params.service!, ctx.params.rpc!, request, ctx.signal) };
  });
  // Nomad's ?prefix= keeps the plugins whose ID starts with it (how `nomad plugin status ID` finds a short ID).
  r.add('GET', '/v1/plugins', ({ query }) => {
    csiTypeParam(query);
    const prefix = query.get('prefix') ?? '';
    return { body: s.listPlugins().flatMap((p) => (p.id.startsWith(prefix) ? [encodePluginStub(p)] : [])) };
  });
  r.add('GET', '/v1/plugin/csi/:id', ({ params }) => {
    const plugin = s.getPlugin(params.id!);
    if (!plugin) throw ApiError.notFound(`plugin "${params.id}" not found`);
    const node = allocNode(s);
    const allocStub = (id: string) => {
      const alloc = s.getAlloc(id);
      return alloc && encodeAllocStub(alloc, node);
    };
    return { body: encodePlugin(plugin, node.id, allocStub) };
  });
}
