import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { VolumeStore } from './volume-store';

describe('VolumeStore', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-hpstore-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('keeps every volume when many are written at once', async () => {
    const store = new VolumeStore(dir);
    await store.init();
    const ids = Array.from({ length: 50 }, (_, i) => `v${i}`);
    await Promise.all(ids.map((id) => store.put({ id, name: id, capacityBytes: '0', parameters: {}, createdAt: '' })));
    expect((await store.list()).map((v) => v.id).sort()).toEqual([...ids].sort());
    await Promise.all(ids.slice(0, 25).map((id) => store.remove(id)));
    expect((await store.list()).map((v) => v.id).sort()).toEqual(ids.slice(25).sort());
    expect(fs.readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });
});
