import { ValidationError } from '@csiplug/core';
import { accessModeToCSI, assertUsage, copyUsage, sameUsage, usageToFS, volumeCapabilityFor } from './usage';

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

describe('usage options: validation, copies and merges', () => {
  const base = { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' };
  const refusal = (usage: unknown) => {
    try {
      assertUsage(usage as never);
    } catch (e) {
      return { name: (e as Error).name, message: (e as Error).message, field: (e as ValidationError).field };
    }
    return undefined;
  };

  it('refuses a malformed usage with a ValidationError naming the field', () => {
    expect(refusal(null)).toEqual({ name: 'ValidationError', message: 'volume usage is required', field: 'usage' });
    expect(refusal('rw')).toEqual({ name: 'ValidationError', message: 'volume usage is required', field: 'usage' });
    expect(refusal({ ...base, readOnly: 'no' })).toEqual({
      name: 'ValidationError',
      message: 'volume usage: readOnly must be a boolean',
      field: 'readOnly',
    });
    expect(refusal({ ...base, attachmentMode: undefined })).toMatchObject({
      message: 'unknown volume attachment mode "undefined"; known: file-system, block-device',
      field: 'attachmentMode',
    });
    expect(refusal({ ...base, accessMode: 'everyone' })).toEqual({
      name: 'ValidationError',
      message:
        'unknown volume access mode "everyone"; known: single-node-writer, single-node-reader-only, multi-node-reader-only, ' +
        'multi-node-single-writer, multi-node-multi-writer, single-node-single-writer, single-node-multi-writer',
      field: 'accessMode',
    });
    expect(refusal({ ...base, mountOptions: { fsType: 4 } })).toEqual({
      name: 'ValidationError',
      message: 'volume usage: mountOptions.fsType must be a string',
      field: 'fsType',
    });
    for (const mountFlags of ['noatime', ['noatime', 7]]) {
      expect(refusal({ ...base, mountOptions: { mountFlags } })).toEqual({
        name: 'ValidationError',
        message: 'volume usage: mountOptions.mountFlags must be a list of strings',
        field: 'mountFlags',
      });
    }
  });

  it('accepts both attachment modes, either read-only flag and mount options that are absent or well formed', () => {
    expect(refusal({ ...base, readOnly: true, attachmentMode: 'block-device' })).toBeUndefined();
    expect(refusal({ ...base, mountOptions: {} })).toBeUndefined();
    expect(refusal({ ...base, mountOptions: { fsType: 'ext4', mountFlags: [] } })).toBeUndefined();
    expect(refusal({ ...base, mountOptions: { mountFlags: ['noatime', 'nodev'] } })).toBeUndefined();
  });

  it('tells usages apart by each field, and mount flags by order', () => {
    expect(sameUsage(base, { ...base })).toBe(true);
    expect(sameUsage(base, { ...base, readOnly: true })).toBe(false);
    expect(sameUsage(base, { ...base, attachmentMode: 'block-device' })).toBe(false);
    expect(sameUsage(base, { ...base, accessMode: 'multi-node-multi-writer' })).toBe(false);
    expect(sameUsage(base, { ...base, mountOptions: { fsType: 'xfs' } })).toBe(false);
    expect(sameUsage({ ...base, mountOptions: { fsType: 'xfs' } }, base)).toBe(false);
    const flags = (mountFlags: string[]) => ({ ...base, mountOptions: { mountFlags } });
    expect(sameUsage(flags(['a', 'b']), flags(['a', 'b']))).toBe(true);
    expect(sameUsage(flags(['a', 'b']), flags(['b', 'a']))).toBe(false);
    expect(sameUsage(flags(['a']), flags(['a', 'b']))).toBe(false);
    expect(sameUsage(base, flags(['a']))).toBe(false);
  });

  it('copies a usage plainly: its own flag list, no mount options or fs type it did not have', () => {
    const flags = ['noatime'];
    const copy = copyUsage({ ...base, mountOptions: { fsType: 'ext4', mountFlags: flags } });
    expect(copy).toEqual({ ...base, mountOptions: { fsType: 'ext4', mountFlags: ['noatime'] } });
    expect(copy.mountOptions!.mountFlags).not.toBe(flags);
    expect(copyUsage({ ...base, extra: 1 } as never)).toStrictEqual(base);
    expect(copyUsage({ ...base, mountOptions: { mountFlags: [] } })).toStrictEqual({ ...base, mountOptions: { mountFlags: [] } });
    expect(copyUsage({ ...base, mountOptions: { fsType: 'xfs' } })).toStrictEqual({ ...base, mountOptions: { fsType: 'xfs' } });
  });

  it("merges mount options as Nomad does: the usage's fs type and non-empty flags win, else the volume's, else none", () => {
    expect(
      volumeCapabilityFor({ ...base, mountOptions: { fsType: 'ext4', mountFlags: [] } }, { fsType: 'xfs', mountFlags: ['ro'] }),
    ).toEqual({
      mount: { fsType: 'ext4', mountFlags: ['ro'], volumeMountGroup: '' },
      accessMode: { mode: 'SINGLE_NODE_WRITER' },
    });
    expect(volumeCapabilityFor({ ...base, mountOptions: { fsType: '' } }, { fsType: 'xfs' })).toEqual({
      mount: { fsType: 'xfs', mountFlags: [], volumeMountGroup: '' },
      accessMode: { mode: 'SINGLE_NODE_WRITER' },
    });
    expect(volumeCapabilityFor({ ...base, accessMode: 'single-node-reader-only' })).toEqual({
      mount: { fsType: '', mountFlags: [], volumeMountGroup: '' },
      accessMode: { mode: 'SINGLE_NODE_READER_ONLY' },
    });
    expect(() => volumeCapabilityFor({ ...base, attachmentMode: 'nfs' })).toThrow(ValidationError);
  });
});
