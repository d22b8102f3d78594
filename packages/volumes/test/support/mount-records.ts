// Mount records for the reconciler's small-host specs: one published,
// staged, claimed record of volume vol1 on plugin hostpath, wanted mounted,
// with whatever a test overrides. The same shape TestNode's mounts write.
import type { UsageOptions } from '@csiplug/csimanager';
import type { VolumeMountRecord } from '../../src/reconciler/mount-record';

export const RW: UsageOptions = { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' };

export const mountedRecord = (allocId: string, over: Partial<VolumeMountRecord> = {}): VolumeMountRecord => ({
  allocId,
  name: 'data',
  volumeId: 'vol1',
  externalId: 'ext-vol1',
  pluginId: 'hostpath',
  usage: RW,
  desired: 'mounted',
  claimed: true,
  staged: true,
  published: true,
  attempts: 0,
  since: 0,
  targetPath: `/t/${allocId}`,
  ...over,
});
