// Node-side expansion (node-expansion.ts) on a small host of its own: which
// records owe the expansion (the volume's, wanted mounted), what each one
// owes (never less than it owed already), which are expanded now (published,
// the plugin expanding online) and what each answer says; and expandOwed's
// own rule — an answer clears what is owed unless a larger size was asked
// meanwhile, a failure keeps it owed, is logged and is thrown.
import { AbortError, MemoryLogger } from '@csiplug/core';
import { KeyedMutex, type CSIManager, type CSIVolumeRef, type UsageOptions } from '@csiplug/csimanager';
import type { ClaimableVolume } from '../catalog/volume-claimer';
import { mountKey, type VolumeMountRecord } from './mount-record';
import { expandMountedVolume, expandOwed, type ExpansionHost } from './node-expansion';
import { RW, mountedRecord } from '../../test/support/mount-records';

const record = mountedRecord;

interface ExpandCall {
  pluginId: string;
  volume: CSIVolumeRef;
  allocId: string;
  usage: UsageOptions;
  capacityBytes: number;
  signal: AbortSignal | undefined;
}

/** A host over `records`, whose plugin answers each NodeExpandVolume with `answer` (by default the size asked for). */
class Host implements ExpansionHost {
  readonly records = new Map<string, VolumeMountRecord>();
  readonly volumes = new Map<string, ClaimableVolume>();
  readonly queue = new KeyedMutex();
  readonly log = new MemoryLogger();
  readonly expands: ExpandCall[] = [];
  /** Every change written, as `<alloc> <field>=<value>,…`. */
  readonly updates: string[] = [];
  answer: (call: ExpandCall) => Promise<number | undefined> = async (call) => call.capacityBytes;
  readonly csi = {
    volumeManager: (pluginId: string) => ({
      expandVolume: (
        volume: CSIVolumeRef,
        allocId: string,
        usage: UsageOptions,
        capacityBytes: number,
        options: { signal?: AbortSignal } = {},
      ) => {
        const call = { pluginId, volume, allocId, usage, capacityBytes, signal: options.signal };
        this.expands.push(call);
        return this.answer(call);
      },
    }),
  } as unknown as CSIManager;

  constructor(...records: VolumeMountRecord[]) {
    for (const r of records) this.records.set(mountKey(r.allocId, r.name), r);
  }

  update(key: string, change: Partial<VolumeMountRecord>): VolumeMountRecord {
    const next = { ...this.records.get(key)!, ...change };
    this.records.set(key, next);
    this.updates.push(
      `${next.allocId} ${Object.entries(change)
        .map(([k, v]) => `${k}=${String(v)}`)
        .join(',')}`,
    );
    return next;
  }

  wanted(key: string): VolumeMountRecord {
    const r = this.records.get(key);
    if (!r || r.desired !== 'mounted') throw new AbortError(`${key} is not wanted mounted`);
    return r;
  }

  owed(allocId: string): number | undefined {
    return this.records.get(mountKey(allocId, 'data'))!.expandTo;
  }
}

describe('expandMountedVolume', () => {
  test("every record of the volume wanted mounted owes the expansion; the published ones are expanded now and say the plugin's answer", async () => {
    const host = new Host(
      record('a1'),
      record('a2', { published: false, targetPath: undefined }),
      record('a3', { volumeId: 'vol2' }),
      record('a4', { desired: 'unmounted' }),
    );
    const out = await expandMountedVolume(host, 'vol1', 5000, { online: true });
    expect(out).toEqual([{ allocId: 'a1', name: 'data', capacityBytes: 5000 }]);
    expect(host.expands.map((c) => `${c.pluginId} ${c.volume.id} ${c.volume.externalId} ${c.allocId} ${c.capacityBytes}`)).toEqual([
      'hostpath vol1 ext-vol1 a1 5000',
    ]);
    expect(host.expands[0]!.usage).toEqual(RW);
    // a1 is expanded and owes nothing; a2, not published yet, owes it for after its publish; the others owe nothing.
    expect(host.owed('a1')).toBeUndefined();
    expect(host.owed('a2')).toBe(5000);
    expect(host.records.get(mountKey('a3', 'data'))!.expandTo).toBeUndefined();
    expect(host.records.get(mountKey('a4', 'data'))!.expandTo).toBeUndefined();
    expect(host.updates).toEqual(['a1 expandTo=5000', 'a1 expandTo=undefined', 'a2 expandTo=5000']);
  });

  test("the call carries the catalog's view of the volume (secrets, context) over the record's ids", async () => {
    const host = new Host(record('a1'));
    host.volumes.set(mountKey('a1', 'data'), {
      id: 'vol1',
      externalId: 'stale-ext',
      pluginId: 'other',
      secrets: { key: 'k' },
      context: { zone: 'z' },
    });
    await expandMountedVolume(host, 'vol1', 5000, { online: true });
    expect(host.expands[0]!.volume).toEqual({
      id: 'vol1',
      externalId: 'ext-vol1',
      pluginId: 'hostpath',
      secrets: { key: 'k' },
      context: { zone: 'z' },
    });
  });

  test('a record never owes less than it owed already', async () => {
    const host = new Host(record('a1', { published: false, expandTo: 9000 }), record('a2', { published: false, expandTo: 3000 }));
    expect(await expandMountedVolume(host, 'vol1', 5000, { online: true })).toEqual([]);
    expect(host.owed('a1')).toBe(9000);
    expect(host.owed('a2')).toBe(5000);
    expect(host.expands).toEqual([]);
  });

  test('a plugin that expands offline only: every published mount is deferred, owing the expansion, and no call is made', async () => {
    const host = new Host(record('a1'), record('a2'));
    expect(await expandMountedVolume(host, 'vol1', 8000, { online: false })).toEqual([
      { allocId: 'a1', name: 'data', deferred: true },
      { allocId: 'a2', name: 'data', deferred: true },
    ]);
    expect(host.owed('a1')).toBe(8000);
    expect(host.owed('a2')).toBe(8000);
    expect(host.expands).toEqual([]);
  });

  test('a plugin without node-side expansion: noNodeExpansion, and nothing is owed after', async () => {
    const host = new Host(record('a1'));
    host.answer = async () => undefined;
    expect(await expandMountedVolume(host, 'vol1', 5000, { online: true })).toEqual([
      { allocId: 'a1', name: 'data', noNodeExpansion: true },
    ]);
    expect(host.owed('a1')).toBeUndefined();
  });

  test('a failure is said for its mount alone, keeps it owed, and the next mount is still expanded', async () => {
    const host = new Host(record('a1'), record('a2'));
    host.answer = async (call) => {
      if (call.allocId === 'a1') throw new Error('NodeExpandVolume: resize2fs failed');
      return 6000;
    };
    expect(await expandMountedVolume(host, 'vol1', 5000, { online: true })).toEqual([
      { allocId: 'a1', name: 'data', error: 'NodeExpandVolume: resize2fs failed' },
      { allocId: 'a2', name: 'data', capacityBytes: 6000 },
    ]);
    expect(host.owed('a1')).toBe(5000);
    expect(host.owed('a2')).toBeUndefined();
  });

  test('each record is read again after the previous expansion: one unmounted or gone meanwhile is left alone', async () => {
    const host = new Host(record('a1'), record('a2'), record('a3'));
    host.answer = async (call) => {
      host.records.set(mountKey('a2', 'data'), { ...host.records.get(mountKey('a2', 'data'))!, desired: 'unmounted' });
      host.records.delete(mountKey('a3', 'data'));
      return call.capacityBytes;
    };
    expect(await expandMountedVolume(host, 'vol1', 5000, { online: true })).toEqual([{ allocId: 'a1', name: 'data', capacityBytes: 5000 }]);
    expect(host.expands.map((c) => c.allocId)).toEqual(['a1']);
    expect(host.owed('a2')).toBeUndefined();
    expect(host.updates).toEqual(['a1 expandTo=5000', 'a1 expandTo=undefined']);
  });

  test('the signal goes to the queue and to the call: aborted, the mount says so and stays owed', async () => {
    const host = new Host(record('a1'));
    const ac = new AbortController();
    const seen: (AbortSignal | undefined)[] = [];
    host.answer = async (call) => {
      seen.push(call.signal);
      return call.capacityBytes;
    };
    await expandMountedVolume(host, 'vol1', 5000, { online: true, signal: ac.signal });
    expect(seen).toEqual([ac.signal]);

    ac.abort(new AbortError('agent stopping'));
    const out = await expandMountedVolume(host, 'vol1', 7000, { online: true, signal: ac.signal });
    expect(out).toEqual([{ allocId: 'a1', name: 'data', error: 'agent stopping' }]);
    expect(host.expands).toHaveLength(1);
    expect(host.owed('a1')).toBe(7000);
  });
});

describe('expandOwed', () => {
  test('answered: what is owed is cleared, and the capacity the plugin reached is returned', async () => {
    const host = new Host(record('a1', { expandTo: 5000 }));
    host.answer = async () => 5120;
    expect(await expandOwed(host, mountKey('a1', 'data'), 5000, undefined)).toBe(5120);
    expect(host.owed('a1')).toBeUndefined();
  });

  test('a larger expansion asked while the call ran stays owed; an equal one is cleared', async () => {
    const host = new Host(record('a1', { expandTo: 5000 }), record('a2', { expandTo: 5000 }));
    host.answer = async (call) => {
      host.update(mountKey(call.allocId, 'data'), { expandTo: call.allocId === 'a1' ? 9000 : 5000 });
      return call.capacityBytes;
    };
    expect(await expandOwed(host, mountKey('a1', 'data'), 5000, undefined)).toBe(5000);
    expect(host.owed('a1')).toBe(9000);
    expect(await expandOwed(host, mountKey('a2', 'data'), 5000, undefined)).toBe(5000);
    expect(host.owed('a2')).toBeUndefined();
  });

  test('a record gone while the call ran is not written again', async () => {
    const host = new Host(record('a1', { expandTo: 5000 }));
    host.answer = async (call) => {
      host.records.delete(mountKey('a1', 'data'));
      return call.capacityBytes;
    };
    expect(await expandOwed(host, mountKey('a1', 'data'), 5000, undefined)).toBe(5000);
    expect(host.records.has(mountKey('a1', 'data'))).toBe(false);
    expect(host.updates).toEqual([]);
  });

  test('a record no longer wanted mounted is not expanded', async () => {
    const host = new Host(record('a1', { desired: 'unmounted', expandTo: 5000 }));
    await expect(expandOwed(host, mountKey('a1', 'data'), 5000, undefined)).rejects.toBeInstanceOf(AbortError);
    expect(host.expands).toEqual([]);
    expect(host.owed('a1')).toBe(5000);
  });

  test('a failure keeps it owed, is logged with the mount and the size, and is thrown', async () => {
    const host = new Host(record('a1', { expandTo: 5000 }));
    const ac = new AbortController();
    host.answer = async () => {
      throw new Error('NodeExpandVolume: resize2fs failed');
    };
    await expect(expandOwed(host, mountKey('a1', 'data'), 5000, ac.signal)).rejects.toThrow('NodeExpandVolume: resize2fs failed');
    expect(host.expands[0]!.signal).toBe(ac.signal);
    expect(host.owed('a1')).toBe(5000);
    expect(host.updates).toEqual([]);
    const warned = host.log.find('node-side expansion failed; it is made after the next publish', 'warn');
    expect(warned.map((l) => l.fields)).toEqual([
      { alloc_id: 'a1', volume_id: 'vol1', capacity_bytes: 5000, error: 'NodeExpandVolume: resize2fs failed' },
    ]);
  });
});
