// The checks validateVolumeSpec makes on a register or create body come
// back naming the body's CSIVolume field (Nomad's path), not csiplug's spec
// field: the table both ways, and the real refusals rewritten.
import { validateVolumeSpec } from '@csiplug/jobspec';
import { ApiError } from '../api-error';
import { nomadVolumeToDocument } from '../wire/volume-wire';
import { inBodyTerms, nomadVolumePath } from './volume-refusals';

describe("a spec field as the body's CSIVolume path", () => {
  it.each([
    ['capability', 'RequestedCapabilities'],
    ['capability.access_mode', 'RequestedCapabilities[0].AccessMode'],
    ['capability[1].attachment_mode', 'RequestedCapabilities[1].AttachmentMode'],
    ['mount_options', 'MountOptions'],
    ['mount_options.fs_type', 'MountOptions.FSType'],
    ['mount_options.mount_flags', 'MountOptions.MountFlags'],
    ['capacity_min', 'RequestedCapacityMin'],
    ['capacity_max', 'RequestedCapacityMax'],
    ['snapshot_id', 'SnapshotID'],
    ['clone_id', 'CloneID'],
    ['external_id', 'ExternalID'],
    ['plugin_id', 'PluginID'],
    ['id', 'ID'],
    ['topology_request.required.topology[0].segments', 'RequestedTopologies.Required[0].Segments'],
  ])('%s → %s', (spec, nomad) => {
    expect(nomadVolumePath(spec)).toBe(nomad);
  });

  it('a field not in the table is left as it was', () => {
    expect(nomadVolumePath('datacenter')).toBeUndefined();
  });
});

describe("validateVolumeSpec's refusals of a body, in the body's terms", () => {
  const base = { ID: 'v', PluginID: 'p', RequestedCapabilities: [{ AccessMode: 'single-node-writer', AttachmentMode: 'file-system' }] };
  const refusalOf = (volume: Record<string, unknown>): ApiError => {
    try {
      inBodyTerms(() => validateVolumeSpec(nomadVolumeToDocument({ ...base, ...volume }, 'Volumes[0]')));
    } catch (err) {
      return err as ApiError;
    }
    throw new Error('it was accepted');
  };

  it.each<[string, Record<string, unknown>, RegExp]>([
    [
      'an unknown access mode',
      { RequestedCapabilities: [{ AccessMode: 'bogus', AttachmentMode: 'file-system' }] },
      /^Volumes\[0\]\.RequestedCapabilities\[0\]\.AccessMode must be one of single-node-writer, .* \(got "bogus"\)$/,
    ],
    [
      "the second capability's attachment mode",
      { RequestedCapabilities: [base.RequestedCapabilities[0], { AccessMode: 'single-node-writer', AttachmentMode: 'nope' }] },
      /^Volumes\[0\]\.RequestedCapabilities\[1\]\.AttachmentMode must be one of file-system, block-device/,
    ],
    [
      'mount options on a block device',
      { RequestedCapabilities: [{ AccessMode: 'single-node-writer', AttachmentMode: 'block-device' }], MountOptions: { FSType: 'ext4' } },
      /^Volumes\[0\]\.MountOptions needs a capability with attachment_mode file-system$/,
    ],
    [
      'a minimum over the maximum',
      { RequestedCapacityMin: 10, RequestedCapacityMax: 5 },
      /^Volumes\[0\]\.RequestedCapacityMin \(10B\) must not exceed/,
    ],
    ['two sources', { SnapshotID: 's', CloneID: 'c' }, /^Volumes\[0\]\.CloneID and snapshot_id are two sources/],
  ])('%s', (_, volume, message) => {
    const err = refusalOf(volume);
    expect(err).toBeInstanceOf(ApiError);
    expect(err.status).toBe(400);
    expect(err.message).toMatch(message);
  });
});
