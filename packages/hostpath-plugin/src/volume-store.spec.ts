import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { PublishedStore, VolumeStore } from './volume-store';

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

  it('keeps volumes and snapshots when both are written at once, and updates a record as it is on disk', async () => {
    const store = new VolumeStore(dir);
    await store.init();
    const ids = Array.from({ length: 30 }, (_, i) => `x${i}`);
    await Promise.all([
      ...ids.map((id) => store.put({ id, name: id, capacityBytes: '1', parameters: {}, createdAt: '' })),
      ...ids.map((id) =>
        store.putSnapshot({ id, name: id, sourceVolumeId: id, sourceCapacityBytes: '1', sizeBytes: '10', createdAt: '', readyToUse: true }),
      ),
      ...ids.map((id) => store.update(id, (v) => ({ ...v, capacityBytes: '2' }))),
    ]);
    expect((await store.list()).map((v) => [v.id, v.capacityBytes]).sort()).toEqual(ids.map((id) => [id, '2']).sort());
    expect((await store.snapshots()).map((s) => s.id).sort()).toEqual([...ids].sort());
    expect(await store.update('missing', (v) => v)).toBeUndefined();
    await Promise.all(ids.slice(0, 10).map((id) => store.removeSnapshot(id)));
    expect((await store.snapshots()).length).toBe(20);
    expect((await store.list()).length).toBe(30);
    expect((await store.snapshotByName('x15'))?.sourceVolumeId).toBe('x15');
    expect(store.archiveOf('x15')).toBe(path.join(dir, 'snapshots', 'x15.tar'));
  });

  it('reads a volume file without snapshots (as written before snapshots existed)', async () => {
    fs.writeFileSync(
      path.join(dir, 'volumes.json'),
      JSON.stringify({ version: 1, volumes: [{ id: 'old', name: 'old', capacityBytes: '0', parameters: {}, createdAt: '' }] }),
    );
    const store = new VolumeStore(dir);
    expect((await store.list()).map((v) => v.id)).toEqual(['old']);
    expect(await store.snapshots()).toEqual([]);
  });

  it('records where each node publishes, one file per node', async () => {
    const n1 = new PublishedStore(dir, 'n1');
    const n2 = new PublishedStore(dir, 'n2');
    expect(await n1.nodesByVolume()).toEqual(new Map());
    await Promise.all([n1.add('v1', '/t/a'), n1.add('v1', '/t/b'), n1.add('v2', '/t/c'), n2.add('v1', '/u/a'), n1.add('v1', '/t/a')]);
    expect(await n1.targets('v1')).toEqual(['/t/a', '/t/b']);
    expect(await n1.nodesByVolume()).toEqual(
      new Map([
        ['v1', ['n1', 'n2']],
        ['v2', ['n1']],
      ]),
    );
    await n1.remove('v1', '/t/a');
    await n1.remove('v1', '/t/zzz');
    expect(await n1.nodesByVolume()).toEqual(
      new Map([
        ['v1', ['n1', 'n2']],
        ['v2', ['n1']],
      ]),
    );
    await Promise.all([n1.remove('v1', '/t/b'), n2.remove('v1', '/u/a')]);
    expect(await n2.nodesByVolume()).toEqual(new Map([['v2', ['n1']]]));
    expect(fs.readdirSync(path.join(dir, 'published')).sort()).toEqual(['n1.json', 'n2.json']);
  });
});
