// Nomad's per_alloc naming: source "db" and alloc index i name db[i].
import { perAllocVolumeId, requestedVolumeId, requestsOfAlloc } from './per-alloc-volume';
import type { VolumeRequest } from './volume-request';

const request = (extra: Partial<VolumeRequest> = {}): VolumeRequest => ({
  name: 'data',
  type: 'csi',
  source: 'db',
  accessMode: 'single-node-writer',
  attachmentMode: 'file-system',
  readOnly: false,
  ...extra,
});

describe('per_alloc volume ids', () => {
  it('suffixes the source with the alloc index in brackets, as Nomad', () => {
    expect([0, 1, 2].map((i) => perAllocVolumeId('db', i))).toEqual(['db[0]', 'db[1]', 'db[2]']);
    expect(requestedVolumeId(request({ perAlloc: true }), 2)).toBe('db[2]');
    expect(requestedVolumeId(request(), 2)).toBe('db');
  });

  it("gives an alloc's hooks its own ids, per_alloc dropped so they are not suffixed twice; other requests as they are", () => {
    const plain = request({ name: 'shared', source: 'cfg' });
    const [own, same] = requestsOfAlloc([request({ perAlloc: true }), plain], 1);
    expect(own).toEqual(request({ source: 'db[1]' }));
    expect(own).not.toHaveProperty('perAlloc');
    expect(same).toBe(plain);
    expect(requestsOfAlloc(requestsOfAlloc([request({ perAlloc: true })], 1), 1)[0]!.source).toBe('db[1]');
  });
});
