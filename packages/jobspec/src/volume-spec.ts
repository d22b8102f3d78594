// Volume specifications (`csiplug volume register|create FILE`), Nomad's
// shape in HCL or JSON: top-level attributes plus capability, mount_options,
// parameters, secrets and context blocks. The VolumeSpec type is core's,
// shared with the volume catalog; reading and checking specs is done here, and
// checkVolumeSpec is what the agent binds as the catalog's
// IVolumeSpecValidator.
import { ValidationError, assertPathSafeId, errorMessage } from '@csiplug/core';
import type { Topology, TopologyRequest, VolumeCapability, VolumeSpec } from '@csiplug/core';
import { BlockReader, Where, isBody, loadDocument, withPrefix } from './document';
import { ACCESS_MODES, ATTACHMENT_MODES } from './modes';
import { formatSize, parseSize } from './size';

export type { VolumeCapability, VolumeSpec } from '@csiplug/core';

/** The JSON form of a volume spec: the file's attributes and blocks as keys. */
export interface VolumeSpecDocument {
  id: string;
  name?: string;
  type: 'csi';
  plugin_id: string;
  external_id?: string;
  capability: Array<{ access_mode: string; attachment_mode: string }> | { access_mode: string; attachment_mode: string };
  mount_options?: { fs_type?: string; mount_flags?: string[] };
  capacity_min?: string | number;
  capacity_max?: string | number;
  parameters?: Record<string, string>;
  secrets?: Record<string, string>;
  context?: Record<string, string>;
  snapshot_id?: string;
  clone_id?: string;
  topology_request?: {
    required?: { topology: Array<{ segments: Record<string, string> }> };
    preferred?: { topology: Array<{ segments: Record<string, string> }> };
  };
}

const FIELDS = [
  'id',
  'name',
  'type',
  'plugin_id',
  'external_id',
  'capability',
  'mount_options',
  'capacity_min',
  'capacity_max',
  'parameters',
  'secrets',
  'context',
  'snapshot_id',
  'clone_id',
  'topology_request',
];

/** `required { topology { segments = {…} } … }` (or `preferred`): the topologies, each with at least one segment. */
function readTopologies(b: BlockReader): Topology[] {
  const list = b.blocks('topology').map((body, i, all): Topology => {
    const t = new BlockReader(body, b.where.block(all.length > 1 ? `topology[${i}]` : 'topology'), ['segments']);
    const segments = t.stringMap('segments');
    if (Object.keys(segments).length === 0) t.fail('segments', 'needs at least one segment, like segments = { "rack" = "r1" }');
    return { segments };
  });
  if (list.length === 0) b.fail('topology', 'is required: give at least one topology { segments = { … } } block');
  return list;
}

/** Parses a volume spec file (HCL or JSON). Errors start with the file name and name the field. */
export async function parseVolumeSpec(text: string, filename: string): Promise<VolumeSpec> {
  const doc = await loadDocument(text, filename);
  return withPrefix(filename, () => validateVolumeSpec(doc));
}

/** Checks a volume spec in its JSON form; also accepts it wrapped as `{ "Volume": … }` (HTTP API bodies). */
export function validateVolumeSpec(raw: unknown): VolumeSpec {
  let doc = raw;
  if (isBody(doc) && Object.keys(doc).length === 1 && 'Volume' in doc) doc = doc.Volume;
  if (!isBody(doc)) throw new ValidationError('a volume spec must be an object like { "id": "…", "plugin_id": "…", … }');
  const named = typeof doc.id === 'string' && doc.id !== '';
  const r: BlockReader = new BlockReader(doc, new Where(named ? `volume ${JSON.stringify(doc.id)}` : ''), FIELDS);
  const id = r.requiredString('id');
  withPrefix(r.where.prefix, () => assertPathSafeId(id, 'id'));

  const name = r.string('name', id);
  const type = r.oneOf('type', ['csi'] as const);
  const pluginId = r.requiredString('plugin_id');
  try {
    assertPathSafeId(pluginId, 'plugin id');
  } catch (err) {
    r.fail('plugin_id', `is not usable: ${(err as Error).message}`);
  }
  const externalId = r.string('external_id');
  if (externalId === '') r.fail('external_id', 'may not be empty; leave it out when creating a volume');

  const capabilities = r.blocks('capability').map((body, i, all): VolumeCapability => {
    const c = new BlockReader(body, r.where.block(all.length > 1 ? `capability[${i}]` : 'capability'), ['access_mode', 'attachment_mode']);
    return {
      accessMode: c.oneOf('access_mode', ACCESS_MODES),
      attachmentMode: c.oneOf('attachment_mode', ATTACHMENT_MODES, 'file-system'),
    };
  });
  if (capabilities.length === 0)
    r.fail('capability', 'is required: give at least one capability { access_mode = "…", attachment_mode = "…" } block');

  const spec: VolumeSpec = {
    id,
    name,
    type,
    pluginId,
    ...(externalId !== undefined ? { externalId } : {}),
    capabilities,
    parameters: r.stringMap('parameters'),
    secrets: r.stringMap('secrets'),
    context: r.stringMap('context'),
  };

  const mo = r.block('mount_options', ['fs_type', 'mount_flags']);
  if (mo) {
    if (!capabilities.some((c) => c.attachmentMode === 'file-system'))
      r.fail('mount_options', 'needs a capability with attachment_mode file-system');
    const fsType = mo.string('fs_type');
    spec.mountOptions = {
      ...(fsType !== undefined ? { fsType } : {}),
      ...(mo.has('mount_flags') ? { mountFlags: mo.stringList('mount_flags') } : {}),
    };
  }

  const size = (key: string): number | undefined => {
    const v = r.raw(key);
    if (v === undefined) return undefined;
    if (typeof v !== 'string' && typeof v !== 'number') r.fail(key, `must be a size like "10GiB" (got ${JSON.stringify(v)})`);
    return withPrefix(r.where.prefix, () => parseSize(v, key));
  };
  const capacityMin = size('capacity_min');
  const capacityMax = size('capacity_max');
  if (capacityMin !== undefined) spec.capacityMin = capacityMin;
  if (capacityMax !== undefined) spec.capacityMax = capacityMax;
  if (capacityMin !== undefined && capacityMax !== undefined && capacityMin > capacityMax) {
    r.fail('capacity_min', `(${formatSize(capacityMin)}) must not exceed capacity_max (${formatSize(capacityMax)})`);
  }

  for (const [key, field] of [
    ['snapshot_id', 'snapshotId'],
    ['clone_id', 'cloneId'],
  ] as const) {
    const v = r.string(key);
    if (v === undefined) continue;
    if (v === '') r.fail(key, 'may not be empty; leave it out');
    if (externalId !== undefined) r.fail(key, 'is for creating a volume from a source; a volume with external_id is registered as it is');
    spec[field] = v;
  }
  if (spec.snapshotId !== undefined && spec.cloneId !== undefined)
    r.fail('clone_id', 'and snapshot_id are two sources for the new volume; give at most one');

  const tr = r.block('topology_request', ['required', 'preferred']);
  if (tr) {
    const request: TopologyRequest = {};
    for (const key of ['required', 'preferred'] as const) {
      const b = tr.block(key, ['topology']);
      if (b) request[key] = readTopologies(b);
    }
    if (!request.required && !request.preferred) tr.fail('required', 'or preferred is required in a topology_request');
    spec.topologyRequest = request;
  }
  return spec;
}

/**
 * Re-checks a VolumeSpec that may not have come through the parser (HTTP
 * bodies, code) and returns it in canonical form; throws ValidationError.
 * The agent binds it as the volume catalog's IVolumeSpecValidator.
 */
export function checkVolumeSpec(spec: unknown): VolumeSpec {
  if (typeof spec !== 'object' || spec === null) throw new ValidationError('a volume spec is required', 'spec');
  let doc;
  try {
    doc = volumeSpecToDocument(spec as VolumeSpec);
  } catch (err) {
    throw new ValidationError(`not a volume spec: ${errorMessage(err)}`, 'spec');
  }
  // The round trip is exact for a good spec (see volumeSpecToDocument).
  return validateVolumeSpec(doc);
}

/** The canonical JSON form of a VolumeSpec. validateVolumeSpec(volumeSpecToDocument(v)) deep-equals v. */
export function volumeSpecToDocument(spec: VolumeSpec): VolumeSpecDocument {
  return {
    id: spec.id,
    name: spec.name,
    type: spec.type,
    plugin_id: spec.pluginId,
    ...(spec.externalId !== undefined ? { external_id: spec.externalId } : {}),
    capability: spec.capabilities.map((c) => ({ access_mode: c.accessMode, attachment_mode: c.attachmentMode })),
    ...(spec.mountOptions
      ? {
          mount_options: {
            ...(spec.mountOptions.fsType !== undefined ? { fs_type: spec.mountOptions.fsType } : {}),
            ...(spec.mountOptions.mountFlags !== undefined ? { mount_flags: [...spec.mountOptions.mountFlags] } : {}),
          },
        }
      : {}),
    ...(spec.capacityMin !== undefined ? { capacity_min: formatSize(spec.capacityMin) } : {}),
    ...(spec.capacityMax !== undefined ? { capacity_max: formatSize(spec.capacityMax) } : {}),
    parameters: { ...spec.parameters },
    secrets: { ...spec.secrets },
    context: { ...spec.context },
    ...(spec.snapshotId !== undefined ? { snapshot_id: spec.snapshotId } : {}),
    ...(spec.cloneId !== undefined ? { clone_id: spec.cloneId } : {}),
    ...(spec.topologyRequest
      ? {
          topology_request: {
            ...(spec.topologyRequest.required
              ? { required: { topology: spec.topologyRequest.required.map((t) => ({ segments: { ...t.segments } })) } }
              : {}),
            ...(spec.topologyRequest.preferred
              ? { preferred: { topology: spec.topologyRequest.preferred.map((t) => ({ segments: { ...t.segments } })) } }
              : {}),
          },
        }
      : {}),
  };
}
