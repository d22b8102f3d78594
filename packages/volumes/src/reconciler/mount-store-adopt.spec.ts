// adoptLegacyVolumeState against a real (in-memory) client state: the mount
// stubs, staging usage and pending unmounts an agent from before the
// reconciler left, written with the state's own deprecated methods, turned
// into mount records in a StateMountStore over the same state — with a bad
// entry left where it is, a record already stored kept over its legacy
// entry, and a staging user without a stub dropped with a warning. The last
// test goes through registerVolumeReconciler, as the agent does.
import { IClock, ILogger, MemoryLogger } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import type { UsageOptions } from '@csiplug/csimanager';
import { IClientStateDB, openClientState, registerState, type BoltClientStateDB } from '@csiplug/state';
import { container as rootContainer } from 'tsyringe';
import { mountKey, type VolumeMountRecord } from './mount-record';
import { adoptLegacyVolumeState, StateMountStore, type MountStore } from './mount-store';
import { registerVolumeReconciler } from './register';
import { IMountStore } from './tokens';

const PLUGIN = 'hostpath';
const NOW = Date.UTC(2026, 0, 1);
const RW: UsageOptions = { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' };
const RO: UsageOptions = { readOnly: true, attachmentMode: 'file-system', accessMode: 'multi-node-reader-only' };
const target = (allocId: string, volumeId: string) =>
  `/var/lib/csiplug/csi/node/${PLUGIN}/per-alloc/${allocId}/${volumeId}/rw-file-system-single-node-writer`;
const STAGING_VOL1 = `/var/lib/csiplug/csi/node/${PLUGIN}/staging/vol1/rw-file-system-single-node-writer`;

/**
 * What an older agent left: alloc a1 with two mounted volumes (data staged,
 * as its staging path says; logs staged, as a usage entry says), alloc a3
 * with one on a plugin that does not stage, and two unmounts of alloc a2
 * still pending (one stored without its group name).
 */
function putLegacyState(db: BoltClientStateDB): void {
  db.putAllocation('a1', { id: 'a1' });
  db.putVolumeStubs('a1', {
    data: {
      name: 'data',
      volumeId: 'vol1',
      externalId: 'ext-vol1',
      pluginId: PLUGIN,
      stagingPath: STAGING_VOL1,
      targetPath: target('a1', 'vol1'),
      usage: RW,
      publishContext: { attached: 'yes' },
    },
    logs: { name: 'logs', volumeId: 'vol2', pluginId: PLUGIN, targetPath: target('a1', 'vol2'), usage: RO },
  });
  db.putVolumeUsage(PLUGIN, 'vol2', [{ allocId: 'a1', usage: RO }]);
  db.putAllocation('a3', { id: 'a3' });
  db.putVolumeStubs('a3', {
    scratch: { name: 'scratch', volumeId: 'vol3', pluginId: PLUGIN, targetPath: target('a3', 'vol3'), usage: RW },
  });
  db.putPendingUnmount({
    id: 'pending-1',
    allocId: 'a2',
    pluginId: PLUGIN,
    volumeId: 'vol1',
    externalId: 'ext-vol1',
    volumeName: 'data',
    usage: RW,
    attempts: 3,
    lastError: 'plugin "hostpath" of type csi-node not found',
    since: 1_000,
  });
  db.putPendingUnmount({ id: 'pending-2', allocId: 'a2', pluginId: PLUGIN, volumeId: 'vol2', usage: RO, attempts: 0, since: 2_000 });
}

/** The records putLegacyState's entries become, by key. */
function adoptedRecords(now: number): Record<string, VolumeMountRecord> {
  const records: VolumeMountRecord[] = [
    {
      allocId: 'a1',
      name: 'data',
      volumeId: 'vol1',
      externalId: 'ext-vol1',
      pluginId: PLUGIN,
      usage: RW,
      desired: 'mounted',
      claimed: true,
      publishContext: { attached: 'yes' },
      staged: true,
      published: true,
      targetPath: target('a1', 'vol1'),
      stagingPath: STAGING_VOL1,
      attempts: 0,
      since: now,
    },
    {
      allocId: 'a1',
      name: 'logs',
      volumeId: 'vol2',
      externalId: 'vol2',
      pluginId: PLUGIN,
      usage: RO,
      desired: 'mounted',
      claimed: true,
      staged: true,
      published: true,
      targetPath: target('a1', 'vol2'),
      attempts: 0,
      since: now,
    },
    {
      allocId: 'a3',
      name: 'scratch',
      volumeId: 'vol3',
      externalId: 'vol3',
      pluginId: PLUGIN,
      usage: RW,
      desired: 'mounted',
      claimed: true,
      staged: false,
      published: true,
      targetPath: target('a3', 'vol3'),
      attempts: 0,
      since: now,
    },
    {
      allocId: 'a2',
      name: 'data',
      volumeId: 'vol1',
      externalId: 'ext-vol1',
      pluginId: PLUGIN,
      usage: RW,
      desired: 'unmounted',
      claimed: true,
      staged: true,
      published: true,
      attempts: 3,
      lastError: 'plugin "hostpath" of type csi-node not found',
      since: 1_000,
    },
    {
      allocId: 'a2',
      name: 'vol2',
      volumeId: 'vol2',
      externalId: 'vol2',
      pluginId: PLUGIN,
      usage: RO,
      desired: 'unmounted',
      claimed: true,
      staged: true,
      published: true,
      attempts: 0,
      since: 2_000,
    },
  ];
  return Object.fromEntries(records.map((r) => [mountKey(r.allocId, r.name), r]));
}

function stored(store: MountStore): Record<string, VolumeMountRecord> {
  const { records, failures } = store.list();
  expect(failures).toEqual([]);
  return Object.fromEntries(records.map((r) => [mountKey(r.allocId, r.name), r]));
}

let db: BoltClientStateDB;
let store: StateMountStore;
let log: MemoryLogger;
beforeEach(() => {
  db = openClientState({ memory: true });
  store = new StateMountStore(db);
  log = new MemoryLogger();
});
afterEach(() => db.dispose());

describe('adoptLegacyVolumeState', () => {
  test.each([
    ['usage', { name: 'bad', volumeId: 'vol4', pluginId: PLUGIN, targetPath: target('a4', 'vol4') }],
    ['plugin', { name: 'bad', volumeId: 'vol4', targetPath: target('a4', 'vol4'), usage: RW }],
  ])(
    'stubs become records wanted mounted with every step done, pending unmounts records wanted unmounted, the legacy entries are cleared; a stub whose %s is missing is logged and left in place',
    (_, badStub) => {
      putLegacyState(db);
      db.putAllocation('a4', { id: 'a4' });
      db.putVolumeStubs('a4', { bad: badStub });

      expect(adoptLegacyVolumeState(db, store, NOW, log)).toBe(5);

      expect(stored(store)).toEqual(adoptedRecords(NOW));
      expect(db.getVolumeStubs('a1')).toEqual({});
      expect(db.getVolumeStubs('a3')).toEqual({});
      expect(db.listPendingUnmounts()).toEqual([]);
      expect(db.listVolumeUsage()).toEqual([]);
      // The bad stub: not adopted, still there for a look (and the next start), and said so.
      expect(db.getVolumeStubs('a4')).toEqual({ bad: badStub });
      const errors = log.find('a legacy mount stubs entry could not be adopted; left in the state untouched', 'error');
      expect(errors).toHaveLength(1);
      expect(errors[0]!.fields.entry).toContain('"a4"');
      expect(errors[0]!.fields.error).toEqual(expect.any(String));
      expect(log.find('adopted the volume state of an older agent', 'info').map((r) => r.fields)).toEqual([{ records: 5 }]);
      // logs' staging user has its stub: nothing is dropped.
      expect(log.find('dropping a staging user', 'warn')).toEqual([]);
    },
  );

  test('a record already in the store is kept over its legacy entry (the clearing failed on an earlier start, and the reconciler has moved on)', () => {
    putLegacyState(db);
    expect(adoptLegacyVolumeState(db, store, NOW, log)).toBe(5);
    // The alloc unmounted a1's data since, and its first attempt failed.
    const { targetPath: _gone, ...data } = stored(store)[mountKey('a1', 'data')]!;
    const movedOn: VolumeMountRecord = {
      ...data,
      desired: 'unmounted',
      published: false,
      attempts: 1,
      lastError: 'unstage failed',
      since: NOW + 5_000,
    };
    store.put(movedOn);
    // The legacy entries are still there, as when clearing them failed.
    putLegacyState(db);

    expect(adoptLegacyVolumeState(db, store, NOW + 60_000, log)).toBe(0);

    expect(stored(store)).toEqual({ ...adoptedRecords(NOW), [mountKey('a1', 'data')]: movedOn });
    expect(db.getVolumeStubs('a1')).toEqual({});
    expect(db.listPendingUnmounts()).toEqual([]);
    expect(log.find('adopted the volume state of an older agent', 'info').map((r) => r.fields)).toEqual([{ records: 5 }, { records: 0 }]);
  });

  test('a staging user with no mount stub (its mount was under way) is dropped with a warning and cleared', () => {
    db.putVolumeUsage(PLUGIN, 'vol9', [{ allocId: 'a5', usage: RW }]);

    expect(adoptLegacyVolumeState(db, store, NOW, log)).toBe(0);

    expect(store.list()).toEqual({ records: [], failures: [] });
    expect(db.listVolumeUsage()).toEqual([]);
    expect(log.find('dropping a staging user left by an older agent without a mount stub', 'warn').map((r) => r.fields)).toEqual([
      { alloc_id: 'a5', volume_id: 'vol9', plugin_id: PLUGIN },
    ]);
  });

  test('the mount store registerVolumeReconciler binds adopts the legacy state of the client state when first resolved', () => {
    putLegacyState(db);
    const container = rootContainer.createChildContainer();
    container.registerInstance(IClientStateDB, db);
    registerState(container, { backend: 'memory' });
    container.registerInstance(ILogger, log);
    container.registerInstance(IClock, new FakeClock(NOW));
    registerVolumeReconciler(container);

    const resolved = container.resolve<MountStore>(IMountStore);

    expect(stored(resolved)).toEqual(adoptedRecords(NOW));
    expect(stored(store)).toEqual(adoptedRecords(NOW));
    expect(db.getVolumeStubs('a1')).toEqual({});
    expect(db.listPendingUnmounts()).toEqual([]);
    expect(db.listVolumeUsage()).toEqual([]);
  });
});
