// checkOneNamePerVolume (one-name-per-volume.ts): one name per (alloc,
// volume). A name already used for another volume is refused, and so is a
// second name for a volume the alloc already uses; both are ClaimErrors that
// are not retried, saying which names and volumes clash.
import { ClaimError } from '../catalog/volume-claimer';
import { mountKey, type VolumeMountRecord } from './mount-record';
import { checkOneNamePerVolume } from './one-name-per-volume';
import type { VolumeMountRequest } from './reconciler-service';

const RW = { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' } as const;

function rec(allocId: string, name: string, volumeId: string): VolumeMountRecord {
  return {
    allocId,
    name,
    volumeId,
    externalId: `ext-${volumeId}`,
    pluginId: 'hostpath',
    usage: RW,
    desired: 'mounted',
    claimed: true,
    staged: true,
    published: true,
    attempts: 0,
    since: 0,
  };
}

const records = new Map(
  [rec('a1', 'data', 'vol1'), rec('a2', 'data', 'vol2'), rec('a2', 'logs', 'vol1')].map((r) => [mountKey(r.allocId, r.name), r]),
);
const req = (allocId: string, name: string, volumeId: string): VolumeMountRequest => ({ allocId, name, volumeId, usage: RW });
const check = (r: VolumeMountRequest) => () => checkOneNamePerVolume(records, mountKey(r.allocId, r.name), r);

test('the same name for the same volume again, a new name for a new volume, or a volume another alloc uses: allowed', () => {
  expect(check(req('a1', 'data', 'vol1'))).not.toThrow();
  expect(check(req('a1', 'logs', 'vol2'))).not.toThrow();
  expect(check(req('a3', 'data', 'vol1'))).not.toThrow();
  expect(check(req('a2', 'data', 'vol2'))).not.toThrow();
});

test('a name the alloc already uses for another volume: refused, not retried', () => {
  let err: unknown;
  try {
    check(req('a1', 'data', 'vol2'))();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(ClaimError);
  expect(err).toMatchObject({
    retryable: false,
    code: 'ECLAIM',
    message: 'alloc a1 already has volume "vol1" as "data"; it cannot also mount "vol2" under that name',
  });
});

test('a second name for a volume the alloc already uses: refused, not retried, naming the first', () => {
  let err: unknown;
  try {
    check(req('a1', 'other', 'vol1'))();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(ClaimError);
  expect(err).toMatchObject({
    retryable: false,
    code: 'ECLAIM',
    message:
      'alloc a1 already uses volume "vol1" as "data"; a group may use a volume once (mount that one volume into several tasks instead)',
  });
  expect(check(req('a2', 'more', 'vol1'))).toThrow('alloc a2 already uses volume "vol1" as "logs"');
});
