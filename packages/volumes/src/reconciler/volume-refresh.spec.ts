// The refresh of a volume's kept copy after a register updated it
// (volume-refresh.ts): each live mount of the volume gets what the catalog
// has now, other volumes' mounts keep theirs, and a volume the catalog
// cannot give keeps the old copy (an unmount still needs its secrets). The
// node expansion after it sends the new secrets.
import { MemoryLogger } from '@csiplug/core';
import { KeyedMutex, type CSIManager, type CSIVolumeRef } from '@csiplug/csimanager';
import type { ClaimableVolume } from '../catalog/volume-claimer';
import { mountKey, type VolumeMountRecord } from './mount-record';
import { expandMountedVolume } from './node-expansion';
import { refreshVolume } from './volume-refresh';
import { mountedRecord } from '../../test/support/mount-records';

function volume(id: string, secrets: Record<string, string>): ClaimableVolume {
  return { id, externalId: `ext-${id}`, pluginId: 'hostpath', secrets, context: {} };
}

class Host {
  readonly records = new Map<string, VolumeMountRecord>();
  readonly volumes = new Map<string, ClaimableVolume>();
  readonly log = new MemoryLogger();
  readonly queue = new KeyedMutex();
  /** What the catalog has now, by volume id (absent: not registered). */
  readonly catalog = new Map<string, ClaimableVolume>();
  readonly expanded: CSIVolumeRef[] = [];
  readonly claimer = {
    lookup: async (id: string) => {
      const v = this.catalog.get(id);
      if (!v) throw new Error(`volume "${id}" is not registered`);
      return v;
    },
  };
  readonly csi = {
    volumeManager: () => ({
      expandVolume: async (v: CSIVolumeRef, _alloc: string, _usage: unknown, capacityBytes: number) => {
        this.expanded.push(v);
        return capacityBytes;
      },
    }),
  } as unknown as CSIManager;

  mount(allocId: string, volumeId: string, kept: ClaimableVolume): void {
    const key = mountKey(allocId, 'data');
    this.records.set(key, mountedRecord(allocId, { volumeId, externalId: `ext-${volumeId}` }));
    this.volumes.set(key, kept);
  }

  update(key: string, change: Partial<VolumeMountRecord>): VolumeMountRecord {
    const next = { ...this.records.get(key)!, ...change };
    this.records.set(key, next);
    return next;
  }

  wanted(key: string): VolumeMountRecord {
    return this.records.get(key)!;
  }
}

describe('refreshVolume', () => {
  test("each mount of the updated volume gets the catalog's new copy; another volume's mount keeps its own; the next node expansion sends the new secrets", async () => {
    const h = new Host();
    h.mount('a1', 'vol1', volume('vol1', { userKey: 'first-key' }));
    h.mount('a2', 'vol1', volume('vol1', { userKey: 'first-key' }));
    h.mount('b1', 'vol2', volume('vol2', { userKey: 'other' }));
    h.catalog.set('vol1', volume('vol1', { userKey: 'rotated-key' }));
    h.catalog.set('vol2', volume('vol2', { userKey: 'changed-but-not-updated' }));

    await refreshVolume(h, 'vol1');

    expect(h.volumes.get(mountKey('a1', 'data'))!.secrets).toEqual({ userKey: 'rotated-key' });
    expect(h.volumes.get(mountKey('a2', 'data'))!.secrets).toEqual({ userKey: 'rotated-key' });
    expect(h.volumes.get(mountKey('b1', 'data'))!.secrets).toEqual({ userKey: 'other' });
    await expandMountedVolume(h, 'vol1', 5000, { online: true });
    expect(h.expanded.map((v) => v.secrets)).toEqual([{ userKey: 'rotated-key' }, { userKey: 'rotated-key' }]);
  });

  test('a volume the catalog cannot give keeps the old copy and says so in the log; a volume with no mounts here reads nothing', async () => {
    const h = new Host();
    h.mount('a1', 'vol1', volume('vol1', { userKey: 'first-key' }));
    const lookup = jest.spyOn(h.claimer, 'lookup');
    await expect(refreshVolume(h, 'vol1')).resolves.toBeUndefined();
    expect(h.volumes.get(mountKey('a1', 'data'))!.secrets).toEqual({ userKey: 'first-key' });
    expect(h.log.records.map((e) => e.msg)).toContain('could not read an updated volume again for its mounts; they keep what they had');
    lookup.mockClear();
    await refreshVolume(h, 'vol9');
    expect(lookup).not.toHaveBeenCalled();
  });
});
