// The volume routes in Nomad's shapes (api/csi.go, wire/volume-wire.ts):
// list (CSIVolumeListStub), read (CSIVolume), register and create
// (CSIVolumeRegisterRequest → CSIVolumeRegisterResponse), deregister,
// delete, detach from a node, the plugins' own lists of volumes, and
// csiplug's usage route. Bodies are validated in full before the service is
// called (refusals name the body's fields, volume-refusals.ts); answers are
// sanitized as Nomad's (Secrets null, mount flags "[REDACTED]").
import { validateVolumeSpec } from '@csiplug/jobspec';
import { ApiError } from '../api-error';
import { boolParam, csiTypeParam, goBoolParam, namespaceParam } from '../route-params';
import type { AgentService, PluginView, VolumeView } from '../service';
import {
  encodeExternalVolume,
  encodeVolume,
  encodeVolumeStub,
  requestedVolumeDocument,
  type NomadCSIVolumeWriteResponse,
  type VolumePluginHealth,
  type VolumeWireContext,
} from '../wire/volume-wire';
import { encodeAllocStub } from '../wire/alloc-wire';
import { CALLS_PLUGIN, type Handler, type Lookups, type RouteTable } from './route-context';
import { pageOf, secretsOf } from './snapshot-routes';
import { inBodyTerms } from './volume-refusals';

/** A plugin's health as a volume carries it: the cluster's counts in a cluster, this node's otherwise. */
function pluginHealth(plugin: PluginView | undefined): VolumePluginHealth | undefined {
  if (!plugin) return undefined;
  const counts = plugin.cluster ?? plugin;
  return {
    ...(plugin.provider !== undefined ? { provider: plugin.provider } : {}),
    ...(plugin.version !== undefined ? { version: plugin.version } : {}),
    controllerRequired: plugin.controllerRequired,
    controllersHealthy: counts.controllersHealthy,
    controllersExpected: counts.controllersExpected,
    nodesHealthy: counts.nodesHealthy,
    nodesExpected: counts.nodesExpected,
  };
}

/** What a volume's CSIVolume is encoded with: this node (every claim of its catalog is on it), the plugin, the claiming allocs. */
function wireContext(s: AgentService, volume: VolumeView): VolumeWireContext {
  const { id, name } = s.node();
  return {
    nodeId: s.health().nodeId,
    plugin: pluginHealth(s.getPlugin(volume.pluginId)),
    allocOf: (allocId) => {
      const alloc = s.getAlloc(allocId);
      return alloc ? encodeAllocStub(alloc, { id, name }) : undefined;
    },
  };
}

/** Nomad's `?namespace=` on every volume route: csiplug has one namespace, "default" ("*", all of them, reads it too). */
function inDefaultNamespace(method: string, handler: Handler): Handler {
  return (ctx) => {
    namespaceParam(ctx.query, { wildcard: method === 'GET' });
    return handler(ctx);
  };
}

export function addVolumeRoutes(table: RouteTable, s: AgentService, find: Lookups): void {
  const r = {
    add: (method: string, path: string, handler: Handler, options?: typeof CALLS_PLUGIN) =>
      table.add(method, path, inDefaultNamespace(method, handler), options),
  };
  const encoded = (volume: VolumeView) => encodeVolume(volume, wireContext(s, volume));
  r.add('GET', '/v1/volumes', ({ query }) => {
    // `nomad volume status` lists host volumes first: csiplug has none.
    if (query.get('type') === 'host') return { body: [] };
    csiTypeParam(query);
    const pluginId = query.get('plugin_id');
    const nodeId = query.get('node_id');
    const prefix = query.get('prefix') ?? '';
    // Every claim of this agent's catalog is on this node: node_id picks the claimed volumes when it names this node.
    const claimedHere = nodeId ? nodeId === s.health().nodeId : undefined;
    const volumes = s
      .listVolumes()
      .filter((v) => v.id.startsWith(prefix) && (!pluginId || v.pluginId === pluginId))
      .filter((v) => claimedHere === undefined || (claimedHere && v.claims.length > 0));
    return { body: volumes.map((v) => encodeVolumeStub(v, { plugin: pluginHealth(s.getPlugin(v.pluginId)) })) };
  });
  r.add('GET', '/v1/volume/csi/:id', ({ params }) => ({ body: encoded(find.volume(params.id!)) }));
  const writeVolume =
    (how: 'register' | 'create'): Handler =>
    async (ctx) => {
      const document = requestedVolumeDocument(await ctx.json(), ctx.params.id!);
      const spec = inBodyTerms(() => validateVolumeSpec(document));
      // forwarded: another agent of the cluster routed the create here (its node has no healthy controller); it goes no further.
      const volume =
        how === 'register' ? await s.registerVolume(spec) : await s.createVolume(spec, { forwarded: boolParam(ctx.query, 'forwarded') });
      return { body: { Volumes: [encoded(volume)], Warnings: '' } satisfies NomadCSIVolumeWriteResponse };
    };
  for (const method of ['PUT', 'POST']) {
    r.add(method, '/v1/volume/csi/:id', writeVolume('register'));
    r.add(method, '/v1/volume/csi/:id/create', writeVolume('create'));
  }
  // Nomad answers a deregister, a delete and a detach with no body; `null` is that nothing as JSON.
  r.add('DELETE', '/v1/volume/csi/:id', async ({ params, query }) => {
    await s.deregisterVolume(find.volume(params.id!).id, { force: goBoolParam(query, 'force') });
    return { body: null };
  });
  r.add('DELETE', '/v1/volume/csi/:id/delete', async ({ params, query, req }) => {
    const volume = find.volume(params.id!);
    // forwarded: another agent of the cluster routed the delete here (its node has no controller); it goes no further.
    // Nomad's `volume delete -secret`: the X-Nomad-CSI-Secrets header.
    await s.deleteVolume(volume.id, { forwarded: boolParam(query, 'forwarded'), ...secretsOf(req) });
    return { body: null };
  });
  r.add('DELETE', '/v1/volume/csi/:id/detach', async ({ params, query }) => {
    const node = query.get('node');
    if (!node) throw ApiError.badRequest('query parameter node is required: the node to detach the volume from');
    const result = await s.detachVolume(find.volume(params.id!).id, node);
    // Nomad's own clients read nothing here; csiplug's reads which claims were released.
    return { body: { Csiplug: { released: result.released } } };
  });
  r.add(
    'GET',
    '/v1/volume/csi/:id/usage',
    async ({ params }) => ({
      body: await s.volumeUsage({ volumeId: find.volume(params.id!).id }),
    }),
    CALLS_PLUGIN,
  );
  r.add(
    'GET',
    '/v1/volumes/external',
    async ({ query }) => {
      const page = await s.listExternalVolumes(pageOf(query));
      return { body: { Volumes: page.items.map(encodeExternalVolume), NextToken: page.nextToken ?? '' } };
    },
    CALLS_PLUGIN,
  );
}
