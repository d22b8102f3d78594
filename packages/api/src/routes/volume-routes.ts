// The volume routes: list, read, register, create, deregister, delete,
// detach from a node, usage, and the plugins' own lists of volumes. Bodies
// are validated in full before the service is called; secrets are never
// sent back (route-params.ts redactSecrets).
import { validateVolumeSpec } from '@csiplug/jobspec';
import { ApiError } from '../api-error';
import type { VolumeDeleted } from '../protocol';
import { unwrapEnvelope } from '../request-body';
import { boolParam, csiTypeParam, redactSecrets } from '../route-params';
import type { AgentService } from '../service';
import { CALLS_PLUGIN, type Handler, type Lookups, type RouteTable, addEach } from './route-context';
import { pageOf, secretsOf } from './snapshot-routes';

export function addVolumeRoutes(r: RouteTable, s: AgentService, find: Lookups): void {
  r.add('GET', '/v1/volumes', ({ query }) => {
    csiTypeParam(query);
    const pluginId = query.get('plugin_id');
    const volumes = s.listVolumes().filter((v) => !pluginId || v.pluginId === pluginId);
    return { body: volumes.map(redactSecrets) };
  });
  r.add('GET', '/v1/volume/csi/:id', ({ params }) => ({ body: redactSecrets(find.volume(params.id!)) }));
  const writeVolume =
    (how: 'register' | 'create'): Handler =>
    async (ctx) => {
      const spec = validateVolumeSpec(unwrapEnvelope(await ctx.json(), 'Volume'));
      if (spec.id !== ctx.params.id) {
        throw ApiError.badRequest(`the volume id in the path ("${ctx.params.id}") does not match the id in the body ("${spec.id}")`);
      }
      // forwarded: another agent of the cluster routed the create here (its node has no healthy controller); it goes no further.
      return {
        body: redactSecrets(
          how === 'register' ? await s.registerVolume(spec) : await s.createVolume(spec, { forwarded: boolParam(ctx.query, 'forwarded') }),
        ),
      };
    };
  addEach(r, ['PUT', 'POST'], '/v1/volume/csi/:id', writeVolume('register'));
  addEach(r, ['PUT', 'POST'], '/v1/volume/csi/:id/create', writeVolume('create'));
  r.add('DELETE', '/v1/volume/csi/:id', async ({ params, query }) => {
    const force = boolParam(query, 'force');
    const volume = find.volume(params.id!);
    await s.deregisterVolume(volume.id, { force });
    return { body: { id: volume.id } satisfies VolumeDeleted };
  });
  r.add('DELETE', '/v1/volume/csi/:id/delete', async ({ params, query, req }) => {
    const volume = find.volume(params.id!);
    // forwarded: another agent of the cluster routed the delete here (its node has no controller); it goes no further.
    // Nomad's `volume delete -secret`: the X-Nomad-CSI-Secrets header.
    await s.deleteVolume(volume.id, { forwarded: boolParam(query, 'forwarded'), ...secretsOf(req) });
    return { body: { id: volume.id } satisfies VolumeDeleted };
  });
  r.add('DELETE', '/v1/volume/csi/:id/detach', async ({ params, query }) => {
    const node = query.get('node');
    if (!node) throw ApiError.badRequest('query parameter node is required: the node to detach the volume from');
    return { body: await s.detachVolume(find.volume(params.id!).id, node) };
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
      return { body: { Volumes: page.items, NextToken: page.nextToken ?? '' } };
    },
    CALLS_PLUGIN,
  );
}
