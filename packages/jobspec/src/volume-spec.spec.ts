import { ValidationError } from '@csiplug/core';
import { type VolumeSpec, checkVolumeSpec, parseVolumeSpec, validateVolumeSpec, volumeSpecToDocument } from './volume-spec';

function errorOf(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return err as ValidationError;
  }
  throw new Error('expected a ValidationError');
}

const FULL_HCL = `
id           = "vol-1"
name         = "database"
type         = "csi"
plugin_id    = "hostpath"
external_id  = "ext-123"
capacity_min = "1GiB"
capacity_max = "2GB"

capability {
  access_mode     = "single-node-writer"
  attachment_mode = "file-system"
}

capability {
  access_mode     = "single-node-reader-only"
  attachment_mode = "block-device"
}

mount_options {
  fs_type     = "ext4"
  mount_flags = ["noatime"]
}

parameters {
  speed = "fast"
}

secrets {
  password = "hunter2"
}

context {
  zone = "a"
}
`;

const FULL: VolumeSpec = {
  id: 'vol-1',
  name: 'database',
  type: 'csi',
  pluginId: 'hostpath',
  externalId: 'ext-123',
  capabilities: [
    { accessMode: 'single-node-writer', attachmentMode: 'file-system' },
    { accessMode: 'single-node-reader-only', attachmentMode: 'block-device' },
  ],
  mountOptions: { fsType: 'ext4', mountFlags: ['noatime'] },
  capacityMin: 1024 ** 3,
  capacityMax: 2e9,
  parameters: { speed: 'fast' },
  secrets: { password: 'hunter2' },
  context: { zone: 'a' },
};

const MINIMAL = { id: 'v', type: 'csi', plugin_id: 'p', capability: { access_mode: 'single-node-writer' } };
const V = 'volume "v"';

describe('parseVolumeSpec', () => {
  it('parses every field from HCL', async () => {
    expect(await parseVolumeSpec(FULL_HCL, 'vol.hcl')).toEqual(FULL);
  });

  it('parses the same spec from natural JSON', async () => {
    const natural = {
      id: 'vol-1',
      name: 'database',
      type: 'csi',
      plugin_id: 'hostpath',
      external_id: 'ext-123',
      capacity_min: 1073741824,
      capacity_max: '2GB',
      capability: [
        { access_mode: 'single-node-writer', attachment_mode: 'file-system' },
        { access_mode: 'single-node-reader-only', attachment_mode: 'block-device' },
      ],
      mount_options: { fs_type: 'ext4', mount_flags: ['noatime'] },
      parameters: { speed: 'fast' },
      secrets: { password: 'hunter2' },
      context: { zone: 'a' },
    };
    expect(await parseVolumeSpec(JSON.stringify(natural), 'vol.json')).toEqual(FULL);
  });

  it('reads capabilities with the two single-node writer modes of CSI (Nomad names)', async () => {
    const hcl =
      'id = "v"\ntype = "csi"\nplugin_id = "p"\n' +
      'capability {\n access_mode = "single-node-single-writer"\n attachment_mode = "file-system"\n}\n' +
      'capability {\n access_mode = "single-node-multi-writer"\n attachment_mode = "file-system"\n}\n';
    expect((await parseVolumeSpec(hcl, 'v.hcl')).capabilities).toEqual([
      { accessMode: 'single-node-single-writer', attachmentMode: 'file-system' },
      { accessMode: 'single-node-multi-writer', attachmentMode: 'file-system' },
    ]);
  });

  it('fills defaults: name from id, file-system, empty maps', () => {
    expect(validateVolumeSpec(MINIMAL)).toEqual({
      id: 'v',
      name: 'v',
      type: 'csi',
      pluginId: 'p',
      capabilities: [{ accessMode: 'single-node-writer', attachmentMode: 'file-system' }],
      parameters: {},
      secrets: {},
      context: {},
    });
  });

  it('accepts { Volume: … } and round-trips through volumeSpecToDocument', () => {
    expect(validateVolumeSpec({ Volume: MINIMAL }).id).toBe('v');
    expect(validateVolumeSpec(volumeSpecToDocument(FULL))).toEqual(FULL);
    expect(volumeSpecToDocument(FULL).capacity_min).toBe('1GiB');
  });

  it('prefixes errors with the file name', async () => {
    await expect(parseVolumeSpec('id = "v"\ntype = "csi"\n', 'vol.hcl')).rejects.toThrow('vol.hcl: volume "v": plugin_id is required');
  });

  it.each<[string, unknown, string]>([
    ['not an object', [], 'a volume spec must be an object like { "id": "…", "plugin_id": "…", … }'],
    ['no id', { ...MINIMAL, id: undefined }, 'id is required'],
    ['an id with a slash', { ...MINIMAL, id: 'a/b' }, 'volume "a/b": id "a/b" is not allowed: it may not contain "/", "..", or NUL'],
    [
      'an unknown field',
      { ...MINIMAL, datacenter: 'dc1' },
      `${V}: datacenter is not a known field (known: id, name, type, plugin_id, external_id, capability, mount_options, capacity_min, capacity_max, parameters, secrets, context, snapshot_id, clone_id, topology_request)`,
    ],
    [
      'a snapshot_id with an external_id',
      { ...MINIMAL, external_id: 'e', snapshot_id: 's' },
      `${V}: snapshot_id is for creating a volume from a source; a volume with external_id is registered as it is`,
    ],
    [
      'both snapshot_id and clone_id',
      { ...MINIMAL, snapshot_id: 's', clone_id: 'c' },
      `${V}: clone_id and snapshot_id are two sources for the new volume; give at most one`,
    ],
    [
      'an empty topology_request',
      { ...MINIMAL, topology_request: {} },
      `${V}: topology_request.required or preferred is required in a topology_request`,
    ],
    [
      'a topology with no segments',
      { ...MINIMAL, topology_request: { required: { topology: [{ segments: {} }] } } },
      `${V}: topology_request.required.topology.segments needs at least one segment, like segments = { "rack" = "r1" }`,
    ],
    ['type host', { ...MINIMAL, type: 'host' }, `${V}: type must be one of csi (got "host")`],
    ['no type', { ...MINIMAL, type: undefined }, `${V}: type is required (one of csi)`],
    ['no plugin_id', { ...MINIMAL, plugin_id: undefined }, `${V}: plugin_id is required`],
    [
      'a plugin_id with ..',
      { ...MINIMAL, plugin_id: 'a..b' },
      `${V}: plugin_id is not usable: plugin id "a..b" is not allowed: it may not contain "/", "..", or NUL`,
    ],
    ['an empty external_id', { ...MINIMAL, external_id: '' }, `${V}: external_id may not be empty; leave it out when creating a volume`],
    [
      'no capability',
      { ...MINIMAL, capability: undefined },
      `${V}: capability is required: give at least one capability { access_mode = "…", attachment_mode = "…" } block`,
    ],
    [
      'a capability without access_mode',
      { ...MINIMAL, capability: {} },
      `${V}: capability.access_mode is required (one of single-node-writer, single-node-reader-only, multi-node-reader-only, multi-node-single-writer, multi-node-multi-writer, single-node-single-writer, single-node-multi-writer)`,
    ],
    [
      'a bad attachment_mode in the second capability',
      { ...MINIMAL, capability: [{ access_mode: 'single-node-writer' }, { access_mode: 'single-node-writer', attachment_mode: 'disk' }] },
      `${V}: capability[1].attachment_mode must be one of file-system, block-device (got "disk")`,
    ],
    [
      'an unknown capability field',
      { ...MINIMAL, capability: { access_mode: 'single-node-writer', mode: 'x' } },
      `${V}: capability.mode is not a known field (known: access_mode, attachment_mode)`,
    ],
    [
      'mount_options with only block devices',
      { ...MINIMAL, capability: { access_mode: 'single-node-writer', attachment_mode: 'block-device' }, mount_options: {} },
      `${V}: mount_options needs a capability with attachment_mode file-system`,
    ],
    [
      'a bad capacity',
      { ...MINIMAL, capacity_min: '10 gigs' },
      `${V}: capacity_min: cannot parse size "10 gigs"; use bytes or a number with a unit, like "512MiB", "10GiB" or "100MB"`,
    ],
    ['a capacity of the wrong type', { ...MINIMAL, capacity_max: true }, `${V}: capacity_max must be a size like "10GiB" (got true)`],
    ['a fractional byte count', { ...MINIMAL, capacity_max: 1.5 }, `${V}: capacity_max: 1.5 is not a whole, non-negative number of bytes`],
    [
      'capacity_min over capacity_max',
      { ...MINIMAL, capacity_min: '2GiB', capacity_max: '1GiB' },
      `${V}: capacity_min (2GiB) must not exceed capacity_max (1GiB)`,
    ],
    ['a numeric parameter', { ...MINIMAL, parameters: { replicas: 3 } }, `${V}: parameters.replicas must be a string (got 3); quote it`],
    ['secrets not a block', { ...MINIMAL, secrets: 'x' }, `${V}: secrets must be a block (got "x")`],
  ])('rejects %s', (_name, raw, message) => {
    expect(errorOf(() => validateVolumeSpec(raw)).message).toBe(message);
  });
});

// checkVolumeSpec is the agent's IVolumeSpecValidator: the catalog
// (@csiplug/volumes) runs every spec it is given through it.
describe('checkVolumeSpec', () => {
  const spec = (over: Partial<VolumeSpec> = {}): VolumeSpec => ({
    id: 'data',
    name: 'data',
    type: 'csi',
    pluginId: 'hp',
    externalId: 'ext-data',
    capabilities: [{ accessMode: 'single-node-writer', attachmentMode: 'file-system' }],
    parameters: {},
    secrets: { token: 's3cret' },
    context: { zone: 'a' },
    ...over,
  });

  it('passes a good spec through unchanged', () => {
    expect(checkVolumeSpec(FULL)).toEqual(FULL);
    expect(checkVolumeSpec(spec())).toEqual(spec());
  });

  it('refuses what no spec file could hold', () => {
    expect(errorOf(() => checkVolumeSpec(spec({ id: 'v3', capabilities: [] }))).message).toMatch(/capability is required/);
    expect(errorOf(() => checkVolumeSpec(spec({ id: '../etc' }))).message).toMatch(/id "..\/etc" is not allowed/);
    expect(
      errorOf(() =>
        checkVolumeSpec(spec({ id: 'v4', capabilities: [{ accessMode: 'everyone-writes' as never, attachmentMode: 'file-system' }] })),
      ).message,
    ).toMatch(/access_mode/);
    expect(errorOf(() => checkVolumeSpec(spec({ id: 'v5', capacityMin: 10, capacityMax: 5 }))).message).toMatch(/capacity_min/);
    expect(errorOf(() => checkVolumeSpec(null)).message).toBe('a volume spec is required');
    expect(errorOf(() => checkVolumeSpec({ id: 'x', capabilities: 'all' })).message).toMatch(/^not a volume spec: /);
  });
});
