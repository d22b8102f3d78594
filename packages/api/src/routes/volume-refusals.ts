// A refusal of a register or create body in the body's own words: the checks
// left to @csiplug/jobspec's validateVolumeSpec name csiplug's volume spec
// fields (capability.access_mode, mount_options, capacity_min…); the client
// sent Nomad's CSIVolume, so the field is given back as its path in the body
// (Volumes[0].RequestedCapabilities[0].AccessMode, Volumes[0].MountOptions…).
import { ValidationError } from '@csiplug/core';
import { ApiError } from '../api-error';

/** A volume spec document's field → the CSIVolume field it was read from (wire/volume-wire.ts nomadVolumeToDocument). */
export const NOMAD_VOLUME_FIELD: Readonly<Record<string, string>> = Object.freeze({
  id: 'ID',
  name: 'Name',
  type: 'Type',
  plugin_id: 'PluginID',
  external_id: 'ExternalID',
  capability: 'RequestedCapabilities',
  access_mode: 'AccessMode',
  attachment_mode: 'AttachmentMode',
  mount_options: 'MountOptions',
  fs_type: 'FSType',
  mount_flags: 'MountFlags',
  capacity_min: 'RequestedCapacityMin',
  capacity_max: 'RequestedCapacityMax',
  parameters: 'Parameters',
  secrets: 'Secrets',
  context: 'Context',
  snapshot_id: 'SnapshotID',
  clone_id: 'CloneID',
  topology_request: 'RequestedTopologies',
  required: 'Required',
  preferred: 'Preferred',
  segments: 'Segments',
});

/**
 * A spec field path (`capability[1].attachment_mode`, `capability.access_mode`,
 * `topology_request.required.topology[0].segments`) as the CSIVolume's
 * (`RequestedCapabilities[1].AttachmentMode`, `RequestedCapabilities[0].AccessMode`,
 * `RequestedTopologies.Required[0].Segments`); undefined when a part is not in the table.
 */
export function nomadVolumePath(specField: string): string | undefined {
  const parts = specField.split('.');
  const out: string[] = [];
  for (let i = 0; i < parts.length; i++) {
    const m = /^([a-z_]+)(\[\d+\])?$/.exec(parts[i]!);
    if (!m) return undefined;
    const [, name, index = ''] = m;
    // The document's topology_request.required is { topology: [...] }; the body's Required is the list itself.
    if (name === 'topology' && out.length > 0) {
      out[out.length - 1] += index;
      continue;
    }
    const nomad = NOMAD_VOLUME_FIELD[name!];
    if (nomad === undefined) return undefined;
    // One capability is named `capability` alone; in the body it is the list's first.
    const first = name === 'capability' && index === '' && i < parts.length - 1 ? '[0]' : '';
    out.push(nomad + (index || first));
  }
  return out.join('.');
}

/** Runs `check` (validateVolumeSpec of the body's Volumes[0]); its refusal names the body's field, as the reader's own do. */
export function inBodyTerms<T>(check: () => T, where = 'Volumes[0]'): T {
  try {
    return check();
  } catch (err) {
    if (!(err instanceof ValidationError) || err.field === undefined) throw err;
    const path = nomadVolumePath(err.field);
    // "volume "v": capability.access_mode must be one of …" → "Volumes[0].RequestedCapabilities[0].AccessMode must be one of …"
    const at = err.message.indexOf(`${err.field} `);
    if (path === undefined || at < 0) throw err;
    throw ApiError.badRequest(`${where}.${path} ${err.message.slice(at + err.field.length + 1)}`);
  }
}
