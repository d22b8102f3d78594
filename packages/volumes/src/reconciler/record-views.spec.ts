// What a mount record is shown as (record-views.ts): the CSI volume reference
// a node step is called with — what the catalog said of the volume, under the
// record's own ids — and the MountedVolumeInfo a mount answers with.
import type { ClaimableVolume } from '../catalog/volume-claimer';
import type { VolumeMountRecord } from './mount-record';
import { mountedInfo, volumeRef } from './record-views';

const RECORD: VolumeMountRecord = {
  allocId: 'a1',
  name: 'data',
  volumeId: 'vol1',
  externalId: 'ext-vol1',
  pluginId: 'hostpath',
  usage: { readOnly: true, attachmentMode: 'file-system', accessMode: 'multi-node-reader-only' },
  desired: 'mounted',
  claimed: true,
  staged: true,
  published: true,
  targetPath: '/t/a1',
  stagingPath: '/s/vol1',
  attempts: 0,
  since: 0,
};

describe('volumeRef', () => {
  test("the catalog's secrets, context and mount options, under the record's ids", () => {
    const volume: ClaimableVolume = {
      id: 'other-id',
      externalId: 'other-ext',
      pluginId: 'other-plugin',
      secrets: { token: 's' },
      context: { pool: 'p' },
      mountOptions: { mountFlags: ['noatime'] },
    };
    expect(volumeRef(RECORD, volume)).toEqual({
      secrets: { token: 's' },
      context: { pool: 'p' },
      mountOptions: { mountFlags: ['noatime'] },
      id: 'vol1',
      externalId: 'ext-vol1',
      pluginId: 'hostpath',
    });
  });

  test('without what the catalog said (not in this run): the ids alone', () => {
    expect(volumeRef(RECORD)).toEqual({ id: 'vol1', externalId: 'ext-vol1', pluginId: 'hostpath' });
  });
});

describe('mountedInfo', () => {
  test('names the volume, its paths and read-only usage; restored and pluginAway as asked (pluginAway false by default)', () => {
    expect(mountedInfo(RECORD, true, true)).toEqual({
      name: 'data',
      volumeId: 'vol1',
      pluginId: 'hostpath',
      targetPath: '/t/a1',
      stagingPath: '/s/vol1',
      readOnly: true,
      restored: true,
      pluginAway: true,
    });
    expect(mountedInfo(RECORD, false)).toMatchObject({ restored: false, pluginAway: false });
  });

  test('a record without a staging path (a plugin that does not stage) answers none', () => {
    const { stagingPath: _s, ...unstaged } = RECORD;
    expect(mountedInfo(unstaged, false)).not.toHaveProperty('stagingPath');
  });
});
