// readMountUsage (mount-usage.ts) on a small host of its own: which records
// are read (wanted mounted and published, of the alloc or volume asked for),
// what each NodeGetVolumeStats call is given (the catalog's view of the
// volume, the target as host path, the reconciler's lifetime as signal), and
// what each mount's view says — its usage, a plugin without stats, a late
// answer (the call goes on), or the call's error.
import { formatDuration } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import type { CSIManager, CSIVolumeRef, UsageOptions, VolumeUsage } from '@csiplug/csimanager';
import type { ClaimableVolume } from '../catalog/volume-claimer';
import { mountKey, type VolumeMountRecord } from './mount-record';
import { readMountUsage, type MountUsageHost } from './mount-usage';
import { UsageReader } from './usage-reader';
import { RW, mountedRecord } from '../../test/support/mount-records';

const USAGE: VolumeUsage = { bytes: { total: 1000, used: 10, available: 990 } };
const WAIT_MS = 5_000;

const record = mountedRecord;

interface UsageCall {
  pluginId: string;
  volume: CSIVolumeRef;
  allocId: string;
  usage: UsageOptions;
  options: { hostPath?: string; signal?: AbortSignal };
}

class Host implements MountUsageHost {
  readonly records = new Map<string, VolumeMountRecord>();
  readonly volumes = new Map<string, ClaimableVolume>();
  readonly clock = new FakeClock();
  readonly reader = new UsageReader(this.clock, WAIT_MS);
  readonly stop = new AbortController();
  readonly stopping = this.stop.signal;
  readonly calls: UsageCall[] = [];
  answer: (call: UsageCall) => Promise<VolumeUsage | undefined> = async () => structuredClone(USAGE);
  readonly csi = {
    volumeManager: (pluginId: string) => ({
      volumeUsage: (volume: CSIVolumeRef, allocId: string, usage: UsageOptions, options: UsageCall['options'] = {}) => {
        const call = { pluginId, volume, allocId, usage, options };
        this.calls.push(call);
        return this.answer(call);
      },
    }),
  } as unknown as CSIManager;

  constructor(...records: VolumeMountRecord[]) {
    for (const r of records) this.records.set(mountKey(r.allocId, r.name), r);
  }
}

describe('readMountUsage', () => {
  test('reads the mounts wanted mounted and published, of the alloc or the volume asked for', async () => {
    const host = new Host(
      record('a1'),
      record('a1', { name: 'logs', volumeId: 'vol2', targetPath: '/t/a1-logs' }),
      record('a2'),
      record('a3', { published: false, targetPath: undefined }),
      record('a4', { desired: 'unmounted' }),
    );
    const ids = (views: { allocId: string; name: string }[]) => views.map((v) => `${v.allocId}/${v.name}`);
    expect(ids(await readMountUsage(host, { allocId: 'a1' }))).toEqual(['a1/data', 'a1/logs']);
    expect(ids(await readMountUsage(host, { volumeId: 'vol1' }))).toEqual(['a1/data', 'a2/data']);
    expect(ids(await readMountUsage(host, { allocId: 'a1', volumeId: 'vol1' }))).toEqual(['a1/data']);
    expect(ids(await readMountUsage(host, {}))).toEqual(['a1/data', 'a1/logs', 'a2/data']);
    expect(await readMountUsage(host, { allocId: 'a4' })).toEqual([]);
    expect(await readMountUsage(host, { volumeId: 'nope' })).toEqual([]);
  });

  test("each call is asked of the mount's plugin, at its target, with the catalog's view of the volume and the reconciler's lifetime", async () => {
    const host = new Host(record('a1', { pluginId: 'nfs' }));
    host.volumes.set(mountKey('a1', 'data'), { id: 'vol1', externalId: 'old', pluginId: 'nfs', secrets: { key: 'k' } });
    expect(await readMountUsage(host, { allocId: 'a1' })).toEqual([
      { allocId: 'a1', name: 'data', volumeId: 'vol1', pluginId: 'nfs', targetPath: '/t/a1', usage: USAGE },
    ]);
    expect(host.calls).toEqual([
      {
        pluginId: 'nfs',
        volume: { id: 'vol1', externalId: 'ext-vol1', pluginId: 'nfs', secrets: { key: 'k' } },
        allocId: 'a1',
        usage: RW,
        options: { hostPath: '/t/a1', signal: host.stopping },
      },
    ]);
  });

  test('a mount with no target recorded is read without a host path, and its view names none', async () => {
    const host = new Host(record('a1', { targetPath: undefined }));
    const [view] = await readMountUsage(host, { allocId: 'a1' });
    expect(view).toEqual({ allocId: 'a1', name: 'data', volumeId: 'vol1', pluginId: 'hostpath', usage: USAGE });
    expect(view).not.toHaveProperty('targetPath');
    expect(host.calls[0]!.options).toEqual({ signal: host.stopping });
    expect(host.calls[0]!.options).not.toHaveProperty('hostPath');
  });

  test('a plugin without stats says so', async () => {
    const host = new Host(record('a1'));
    host.answer = async () => undefined;
    expect(await readMountUsage(host, { allocId: 'a1' })).toEqual([
      {
        allocId: 'a1',
        name: 'data',
        volumeId: 'vol1',
        pluginId: 'hostpath',
        targetPath: '/t/a1',
        error: 'plugin "hostpath" does not report volume stats (no GET_VOLUME_STATS)',
      },
    ]);
  });

  test("a failed call is that mount's error; the others are still read", async () => {
    const host = new Host(record('a1'), record('a2'));
    host.answer = async (call) => {
      if (call.allocId === 'a1') throw new Error('NodeGetVolumeStats: NOT_FOUND');
      return USAGE;
    };
    expect(await readMountUsage(host, { volumeId: 'vol1' })).toEqual([
      { allocId: 'a1', name: 'data', volumeId: 'vol1', pluginId: 'hostpath', targetPath: '/t/a1', error: 'NodeGetVolumeStats: NOT_FOUND' },
      { allocId: 'a2', name: 'data', volumeId: 'vol1', pluginId: 'hostpath', targetPath: '/t/a2', usage: USAGE },
    ]);
  });

  test('a plugin that hangs: the view says late after the wait, the call goes on, and a read meanwhile joins it', async () => {
    const host = new Host(record('a1'));
    let answer!: (u: VolumeUsage) => void;
    host.answer = () => new Promise<VolumeUsage>((resolve) => (answer = resolve));
    const first = readMountUsage(host, { allocId: 'a1' });
    await host.clock.advance(WAIT_MS);
    expect(await first).toEqual([
      {
        allocId: 'a1',
        name: 'data',
        volumeId: 'vol1',
        pluginId: 'hostpath',
        targetPath: '/t/a1',
        late: true,
        error: `plugin "hostpath" has not answered NodeGetVolumeStats within ${formatDuration(WAIT_MS)}: the usage is late (the call goes on; ask again later)`,
      },
    ]);
    const second = readMountUsage(host, { allocId: 'a1' });
    expect(host.calls).toHaveLength(1);
    expect(host.reader.pending).toBe(1);
    answer(USAGE);
    expect(await second).toEqual([
      { allocId: 'a1', name: 'data', volumeId: 'vol1', pluginId: 'hostpath', targetPath: '/t/a1', usage: USAGE },
    ]);
  });
});
