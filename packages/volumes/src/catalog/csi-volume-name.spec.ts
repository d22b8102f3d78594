// The CSI name of a created volume: a pure, stable function of the volume id.
// The expected names are written out: a change of the form would make a
// retried create (or a cluster's other node) make a second volume, so it
// must fail here first.
import { CSI_VOLUME_NAME_PREFIX, csiVolumeName } from './csi-volume-name';

describe('csiVolumeName', () => {
  test('a DNS-label id is the prefix and the id', () => {
    expect(csiVolumeName('data')).toBe('csiplug-data');
    expect(csiVolumeName('pg-0')).toBe('csiplug-pg-0');
    expect(csiVolumeName('a'.repeat(55))).toBe(`csiplug-${'a'.repeat(55)}`);
  });

  test('any other id: a slug and 32 hex digits of its SHA-256, after a doubled dash', () => {
    expect(csiVolumeName('Data')).toBe('csiplug--data-cec3a9b89b2e391393d0f68e4bc12a9f');
    expect(csiVolumeName('my_vol.1')).toBe('csiplug--my-vol-1-7c4fc4b010ee66aca9d53c3c6e82f214');
    expect(csiVolumeName('a'.repeat(56))).toMatch(/^csiplug--a{20}-[0-9a-f]{32}$/);
    expect(csiVolumeName('é')).toMatch(/^csiplug--[0-9a-f]{32}$/);
  });

  test('the same id is always the same name; different ids are different names, within a DNS label', () => {
    const ids = [
      'data',
      'Data',
      'DATA',
      'data-',
      '-data',
      'd',
      'd.',
      'd_',
      'x'.repeat(255),
      'x'.repeat(254),
      'vol 1',
      'vol-1',
      'h-0123',
      'Vol@1',
    ];
    const names = ids.map(csiVolumeName);
    expect(ids.map(csiVolumeName)).toEqual(names);
    expect(new Set(names).size).toBe(ids.length);
    for (const name of names) {
      expect(name.startsWith(CSI_VOLUME_NAME_PREFIX)).toBe(true);
      expect(name).toMatch(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/);
      expect(name.length).toBeLessThanOrEqual(63);
    }
  });
});
