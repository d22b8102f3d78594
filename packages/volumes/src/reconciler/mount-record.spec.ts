// The mount record's helpers (mount-record.ts): how this agent reads the
// optional fields a newer agent may have written (stalePolicyOf,
// remountIntentOf, unknownFieldValues), the store and staging keys, whether a
// record still holds anything, and the shape check a decoded record must pass
// to be used — one test per field it guards.
import { bareMountRecord, fullMountRecord } from '../testing/mount-store-contract';
import {
  REMOUNT_INTENTS,
  holdsAnything,
  isVolumeMountRecord,
  mountKey,
  remountIntentOf,
  stagingKey,
  stalePolicyOf,
  unknownFieldValues,
  type VolumeMountRecord,
} from './mount-record';

/** A record with a field set to a value the type does not allow (as a store may hold). */
const odd = (change: Record<string, unknown>) => ({ ...bareMountRecord('a1', 'data'), ...change }) as VolumeMountRecord;

describe('stalePolicyOf', () => {
  test('a known policy as it is; absent, or unknown (a newer agent), is remount', () => {
    expect(stalePolicyOf({ onStaleMount: 'restart' })).toBe('restart');
    expect(stalePolicyOf({ onStaleMount: 'keep' })).toBe('keep');
    expect(stalePolicyOf({ onStaleMount: 'remount' })).toBe('remount');
    expect(stalePolicyOf({})).toBe('remount');
    expect(stalePolicyOf(odd({ onStaleMount: 'reboot' }))).toBe('remount');
  });
});

describe('remountIntentOf', () => {
  test('none when absent; a known intent as it is; an unknown one is remount', () => {
    expect(REMOUNT_INTENTS).toEqual(['remount', 'restart']);
    expect(remountIntentOf({})).toBeUndefined();
    expect(remountIntentOf({ remounting: 'restart' })).toBe('restart');
    expect(remountIntentOf({ remounting: 'remount' })).toBe('remount');
    expect(remountIntentOf(odd({ remounting: 'rebuild' }))).toBe('remount');
  });
});

describe('unknownFieldValues', () => {
  test('names each optional field holding a value this agent does not know, and how it is read', () => {
    expect(unknownFieldValues(fullMountRecord('a1', 'data'))).toEqual([]);
    expect(unknownFieldValues(bareMountRecord('a1', 'data'))).toEqual([]);
    expect(unknownFieldValues(fullMountRecord('a1', 'data', { onStaleMount: 'keep', remounting: 'remount' }))).toEqual([]);
    expect(unknownFieldValues(odd({ onStaleMount: 'reboot' }))).toEqual(['onStaleMount "reboot" (read as "remount")']);
    expect(unknownFieldValues(odd({ remounting: 'rebuild' }))).toEqual(['remounting "rebuild" (read as "remount")']);
    expect(unknownFieldValues(odd({ onStaleMount: 'reboot', remounting: 'rebuild' }))).toEqual([
      'onStaleMount "reboot" (read as "remount")',
      'remounting "rebuild" (read as "remount")',
    ]);
  });
});

describe('keys', () => {
  test('mountKey: the alloc id, then the name escaped', () => {
    expect(mountKey('a1', 'data')).toBe('a1/data');
    expect(mountKey('a1', 'a/b c%')).toBe('a1/a%2Fb%20c%25');
  });

  test('stagingKey: plugin, volume and the usage as a path, apart by NUL', () => {
    const r = fullMountRecord('a1', 'data');
    expect(stagingKey(r)).toBe('hostpath\0vol1\0rw-file-system-single-node-writer');
    expect(stagingKey(bareMountRecord('a2', 'logs'))).toBe('hostpath\0vol2\0ro-file-system-multi-node-reader-only');
    // The alloc and name do not matter; the plugin, volume and usage do.
    const other: VolumeMountRecord = { ...r, allocId: 'a9', name: 'x' };
    expect(stagingKey(other)).toBe(stagingKey(r));
    expect(stagingKey({ ...r, pluginId: 'other' })).not.toBe(stagingKey(r));
  });
});

describe('holdsAnything', () => {
  test('any of claimed, staged, published; none of them is nothing', () => {
    const none = bareMountRecord('a1', 'data', { claimed: false, staged: false, published: false });
    expect(holdsAnything(none)).toBe(false);
    expect(holdsAnything({ ...none, claimed: true })).toBe(true);
    expect(holdsAnything({ ...none, staged: true })).toBe(true);
    expect(holdsAnything({ ...none, published: true })).toBe(true);
  });
});

describe('isVolumeMountRecord', () => {
  test('a full record and a bare one pass; so do optional fields of a newer agent holding strings it does not know', () => {
    expect(isVolumeMountRecord(fullMountRecord('a1', 'data'))).toBe(true);
    expect(isVolumeMountRecord(bareMountRecord('a1', 'data'))).toBe(true);
    expect(isVolumeMountRecord(odd({ onStaleMount: 'reboot', remounting: 'rebuild', expandTo: 1024 }))).toBe(true);
    expect(isVolumeMountRecord(odd({ desired: 'unmounted' }))).toBe(true);
  });

  test.each([null, undefined, 'a record', 42, [], [bareMountRecord('a1', 'data')]])('not an object: %j', (v) => {
    expect(isVolumeMountRecord(v)).toBe(false);
  });

  test.each([
    ['allocId', 1],
    ['name', undefined],
    ['volumeId', null],
    ['externalId', 7],
    ['pluginId', false],
    ['desired', 'gone'],
    ['desired', undefined],
    ['claimed', 'true'],
    ['staged', 1],
    ['published', undefined],
    ['attempts', '0'],
    ['since', '2026-01-01'],
    ['onStaleMount', 1],
    ['onStaleMount', null],
    ['remounting', true],
    ['expandTo', '1G'],
    ['usage', undefined],
    ['usage', null],
    ['usage', []],
    ['usage', 'rw'],
  ])('fails with %s = %j', (field, value) => {
    expect(isVolumeMountRecord(odd({ [field]: value }))).toBe(false);
  });

  test.each([
    ['readOnly', 'false'],
    ['readOnly', undefined],
    ['attachmentMode', 1],
    ['attachmentMode', undefined],
    ['accessMode', null],
    ['accessMode', undefined],
  ])('fails with usage.%s = %j', (field, value) => {
    const r = bareMountRecord('a1', 'data');
    expect(isVolumeMountRecord({ ...r, usage: { ...r.usage, [field]: value } })).toBe(false);
  });
});
