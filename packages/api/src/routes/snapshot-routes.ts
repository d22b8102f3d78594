// The snapshot routes (Nomad's /v1/volumes/snapshot, CSISnapshot as
// wire/volume-wire.ts encodes it): list one page of a
// plugin's snapshots, take snapshots of volumes (a handful per request, all
// checked before any is taken), delete one. Per-call secrets come as Nomad
// sends them: in a create's body (Snapshots[].Secrets, with .Parameters), in
// the X-Nomad-CSI-Secrets header for a list or delete (csi-secrets.ts).
import type * as http from 'http';
import { ApiError } from '../api-error';
import { CSI_SECRETS_HEADER, parseCsiSecrets } from '../csi-secrets';
import { MAX_SNAPSHOTS_PER_REQUEST, intParam, isRecord } from '../route-params';
import type { AgentService } from '../service';
import { encodeSnapshot, type NomadCSISnapshotCreateResponse, type NomadCSISnapshotListResponse } from '../wire/volume-wire';
import { CALLS_PLUGIN, type Handler, type Lookups, type RouteTable, addEach } from './route-context';

/** Nomad's X-Nomad-CSI-Secrets header of a request, as the service takes it (nothing when absent); repeated, the first counts (Node would join them with ", "). */
export function secretsOf(req: http.IncomingMessage): { secrets?: Record<string, string> } {
  const secrets = parseCsiSecrets(req.headersDistinct[CSI_SECRETS_HEADER.toLowerCase()]);
  return secrets ? { secrets } : {};
}

/** A body field that must be a map of strings (CSISnapshot's Secrets, Parameters); undefined when absent. */
function stringMap(value: unknown, where: string): Record<string, string> | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isRecord(value) || Object.values(value).some((v) => typeof v !== 'string'))
    throw ApiError.badRequest(`${where} must be an object of string values, e.g. { "key": "value" }`);
  return { ...(value as Record<string, string>) };
}

/** Nomad's paging query (plugin_id, per_page, next_token) as the service takes it. */
export function pageOf(query: URLSearchParams): { pluginId?: string; perPage?: number; nextToken?: string } {
  return {
    ...(query.get('plugin_id') ? { pluginId: query.get('plugin_id')! } : {}),
    ...(query.get('per_page') ? { perPage: intParam(query, 'per_page', 0) } : {}),
    ...(query.get('next_token') ? { nextToken: query.get('next_token')! } : {}),
  };
}

export function addSnapshotRoutes(r: RouteTable, s: AgentService, find: Lookups): void {
  r.add(
    'GET',
    '/v1/volumes/snapshot',
    async ({ query, req }) => {
      const page = await s.listSnapshots({ ...pageOf(query), ...secretsOf(req) });
      return {
        body: { Snapshots: page.items.map(encodeSnapshot), NextToken: page.nextToken ?? '' } satisfies NomadCSISnapshotListResponse,
      };
    },
    CALLS_PLUGIN,
  );
  const createSnapshots: Handler = async (ctx) => {
    const body = await ctx.json();
    const list = isRecord(body) && Array.isArray(body['Snapshots']) ? (body['Snapshots'] as unknown[]) : [body];
    if (list.length === 0)
      throw ApiError.badRequest('no snapshot to create: give { "Snapshots": [{ "SourceVolumeID": "…", "Name": "…" }] }');
    // Each is a full copy of a volume on the plugin's side: a handful per request, all checked before any is taken.
    if (list.length > MAX_SNAPSHOTS_PER_REQUEST)
      throw ApiError.badRequest(`at most ${MAX_SNAPSHOTS_PER_REQUEST} snapshots per request, got ${list.length}`);
    const wanted = list.map((item, i) => {
      if (!isRecord(item) || typeof item['SourceVolumeID'] !== 'string' || item['SourceVolumeID'] === '')
        throw ApiError.badRequest(`Snapshots[${i}].SourceVolumeID is required: the id of the volume to snapshot`);
      const name = item['Name'];
      if (name !== undefined && typeof name !== 'string') throw ApiError.badRequest(`Snapshots[${i}].Name must be a string`);
      const secrets = stringMap(item['Secrets'], `Snapshots[${i}].Secrets`);
      const parameters = stringMap(item['Parameters'], `Snapshots[${i}].Parameters`);
      return {
        volumeId: find.volume(item['SourceVolumeID']).id,
        name: name || undefined,
        options: { ...(secrets ? { secrets } : {}), ...(parameters ? { parameters } : {}) },
      };
    });
    const made = [];
    for (const w of wanted) made.push(await s.createSnapshot(w.volumeId, w.name, w.options));
    return { body: { Snapshots: made.map(encodeSnapshot) } satisfies NomadCSISnapshotCreateResponse };
  };
  addEach(r, ['PUT', 'POST'], '/v1/volumes/snapshot', createSnapshots);
  r.add('DELETE', '/v1/volumes/snapshot', async ({ query, req }) => {
    const pluginId = query.get('plugin_id');
    const snapshotId = query.get('snapshot_id');
    if (!pluginId || !snapshotId) throw ApiError.badRequest('query parameters plugin_id and snapshot_id are required');
    await s.deleteSnapshot(pluginId, snapshotId, secretsOf(req));
    // Nomad answers a snapshot delete with no body; `null` is that nothing as JSON.
    return { body: null };
  });
}
