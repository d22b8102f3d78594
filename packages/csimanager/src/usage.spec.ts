import { ValidationError } from '@csiplug/core';
import { accessModeToCSI, sameUsage, usageToFS, volumeCapabilityFor } from './usage';

describe('usage options', () => {
  it.each([
    ['single-node-writer', 'SINGLE_NODE_WRITER'],
    ['single-node-reader-only', 'SINGLE_NODE_READER_ONLY'],
    ['multi-node-reader-only', 'MULTI_NODE_READER_ONLY'],
    ['multi-node-single-writer', 'MULTI_NODE_SINGLE_WRITER'],
    ['multi-node-multi-writer', 'MULTI_NODE_MULTI_WRITER'],
    ['single-node-single-writer', 'SINGLE_NODE_SINGLE_WRITER'],
    ['single-node-multi-writer', 'SINGLE_NODE_MULTI_WRITER'],
  ])('maps %s to %s', (nomad, csi) => {
    expect(accessModeToCSI(nomad)).toBe(csi);
  });

  it('rejects unknown modes naming the known ones', () => {
    expect(() => accessModeToCSI('toString')).toThrow(ValidationError);
    expect(() => usageToFS({ readOnly: true, attachmentMode: 'nfs', accessMode: 'single-node-writer' })).toThrow(
      /unknown volume attachment mode "nfs"; known: file-system, block-device/,
    );
  });

  it('names the usage path component like Nomad', () => {
    expect(usageToFS({ readOnly: true, attachmentMode: 'file-system', accessMode: 'single-node-writer' })).toBe(
      'ro-file-system-single-node-writer',
    );
    expect(usageToFS({ readOnly: false, attachmentMode: 'block-device', accessMode: 'multi-node-multi-writer' })).toBe(
      'rw-block-device-multi-node-multi-writer',
    );
  });

  it('compares by value', () => {
    const a = {
      readOnly: false,
      attachmentMode: 'file-system',
      accessMode: 'single-node-writer',
      mountOptions: { fsType: 'ext4', mountFlags: ['noatime'] },
    };
    expect(sameUsage(a, JSON.parse(JSON.stringify(a)))).toBe(true);
    expect(sameUsage(a, { ...a, mountOptions: { fsType: 'ext4', mountFlags: [] } })).toBe(false);
    expect(sameUsage({ ...a, mountOptions: undefined }, { ...a, mountOptions: { fsType: '', mountFlags: [] } })).toBe(true);
  });

  it('builds the capability, the usage mount options overriding the volume', () => {
    const u = {
      readOnly: false,
      attachmentMode: 'file-system',
      accessMode: 'single-node-writer',
      mountOptions: { mountFlags: ['noatime'] },
    };
    expect(volumeCapabilityFor(u, { fsType: 'xfs', mountFlags: ['ro'] })).toEqual({
      mount: { fsType: 'xfs', mountFlags: ['noatime'], volumeMountGroup: '' },
      accessMode: { mode: 'SINGLE_NODE_WRITER' },
    });
    expect(volumeCapabilityFor({ ...u, attachmentMode: 'block-device' })).toEqual({
      block: {},
      accessMode: { mode: 'SINGLE_NODE_WRITER' },
    });
  });
});
