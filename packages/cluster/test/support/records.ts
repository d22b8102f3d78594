// What the cluster package's etcd tests build their records from: claim
// requests, volume capabilities, and the cluster catalog's volume records.
import type { VolumeCapability, VolumeClaimRequest } from '@csiplug/volumes';
import type { ClusterVolumeRecord } from '../../src/cluster-volumes';

/** A fixed "now" for records whose times the tests compare. */
export const T0 = 1_700_000_000_000;

/** The volume a cluster record carries, as these tests make it. */
export type TestVolume = { id: string; pluginId: string; externalId: string };

/** File-system capabilities, one per access mode. */
export const caps = (...modes: string[]): VolumeCapability[] =>
  modes.map((accessMode) => ({ accessMode: accessMode as VolumeCapability['accessMode'], attachmentMode: 'file-system' }));

export const request = (volumeId: string, allocId: string, accessMode: string, readOnly = false): VolumeClaimRequest => ({
  volumeId,
  allocId,
  accessMode,
  attachmentMode: 'file-system',
  readOnly,
});

/** A made hostpath volume's record, added by `origin`. */
export const volumeRecord = (
  id: string,
  origin: string,
  over: Partial<ClusterVolumeRecord<TestVolume>> = {},
): ClusterVolumeRecord<TestVolume> => ({
  id,
  pluginId: 'hostpath',
  origin,
  createdAt: T0,
  volume: { id, pluginId: 'hostpath', externalId: `ext-${id}` },
  ...over,
});
