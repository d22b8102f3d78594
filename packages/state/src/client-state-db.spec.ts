// ClientStateDB over both backends, and what opening does with files that
// are corrupt, foreign, older or newer than this build.
import { MemoryLogger } from '@csiplug/core';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import type { ClientStateDB, PendingUnmountRecord, RegistryStateRecord, VolumeMountStub, VolumeUsageRecord } from './client-state';
import { BoltClientStateDB, openClientState } from './client-state-db';
import { DB } from './db';
import { ErrCorrupt, ErrInvalid } from './errors';
import { CLIENT_STATE_SCHEMA_VERSION } from './layout';
import { BACKENDS, tempDir, thrown } from '../test/support/backends';

const usage = { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' };

describe.each(BACKENDS)('ClientStateDB (%s)', (kind) => {
  let dir: string;
  let state: BoltClientStateDB;
  const logger = new MemoryLogger();
  const open = (): BoltClientStateDB => (kind === 'memory' ? openClientState({ memory: true, logger }) : openClientState({ path: path.join(dir, 'state.db'), logger }));

  beforeEach(() => {
    dir = tempDir();
    state = open();
  });
  afterEach(() => {
    state.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('a new store is at the current schema version with the full layout', () => {
    expect(state.schemaVersion).toBe(CLIENT_STATE_SCHEMA_VERSION);
    expect(state.path).toBe(kind === 'memory' ? undefined : path.join(dir, 'state.db'));
    const names = state.raw.view((tx) => {
      const out: string[] = [];
      tx.forEach((n) => out.push(n.toString()));
      return out;
    });
    expect(names).toEqual(['allocations', 'csi', 'dynamicplugins', 'meta', 'volumes']);
    expect(state.raw.view((tx) => JSON.parse(tx.bucket('meta')!.get('version')!.toString()))).toBe(1);
  });

  test('registry state round-trips', () => {
    expect(state.getRegistryState()).toBeUndefined();
    const reg: RegistryStateRecord = {
      plugins: {
        'csi-node': {
          hostpath: [{ type: 'csi-node', name: 'hostpath', version: '1.0.0', allocId: 'a1', socketPath: '/x/csi.sock', options: { MountPoint: '/csi' } }],
        },
      },
    };
    state.putRegistryState(reg);
    expect(state.getRegistryState()).toEqual(reg);
  });

  test('allocations with volume stubs and tasks, deleted as a whole', () => {
    const stub: VolumeMountStub = { name: 'data', volumeId: 'vol1', pluginId: 'hostpath', targetPath: '/t', usage };
    state.putAllocation('a1', { id: 'a1', job: { id: 'web' } });
    state.putAllocation('a2', { id: 'a2' });
    state.putVolumeStubs('a1', { data: stub });
    state.putTaskHandle('a1', 'web', { pid: 42 });
    state.putTaskState('a1', 'web', { state: 'running', events: [{ type: 'Started' }] });
    state.putTaskState('a1', 'sidecar', { state: 'dead' });
    expect(state.getAllocation('a1')).toEqual({ id: 'a1', job: { id: 'web' } });
    expect(state.getVolumeStubs('a1')).toEqual({ data: stub });
    expect(state.getTaskHandle('a1', 'web')).toEqual({ pid: 42 });
    expect(state.getTaskState<{ state: string }>('a1', 'web')!.state).toBe('running');
    expect(state.listAllocations()).toEqual({
      allocs: [
        { allocId: 'a1', alloc: { id: 'a1', job: { id: 'web' } } },
        { allocId: 'a2', alloc: { id: 'a2' } },
      ],
      failures: [],
    });
    state.deleteTask('a1', 'sidecar');
    expect(state.getTaskState('a1', 'sidecar')).toBeUndefined();
    expect(state.getTaskHandle('a1', 'web')).toEqual({ pid: 42 });
    state.deleteTask('a1', 'never-there');
    state.deleteAllocation('a1');
    state.deleteAllocation('never-there');
    expect(state.getAllocation('a1')).toBeUndefined();
    expect(state.getTaskHandle('a1', 'web')).toBeUndefined();
    expect(state.getVolumeStubs('a1')).toBeUndefined();
    expect(state.listAllocations().allocs.map((a) => a.allocId)).toEqual(['a2']);
    expect(state.raw.check()).toEqual([]);
  });

  test('listAllocations reports records it cannot decode instead of dropping them', () => {
    state.putAllocation('good', { id: 'good' });
    state.putAllocation('bad', { id: 'bad' });
    state.raw.update((tx) => {
      const allocs = tx.bucket('allocations')!;
      allocs.bucket('bad')!.put('alloc', Buffer.from('{"id": "bad", trunc'));
      allocs.createBucket('no-alloc').put('volumes', Buffer.from('{}'));
    });
    const { allocs, failures } = state.listAllocations();
    expect(allocs).toEqual([{ allocId: 'good', alloc: { id: 'good' } }]);
    expect(failures.map((f) => f.key)).toEqual(['bad', 'no-alloc']);
    expect(failures[0]!.error).toMatch(/cannot decode allocations\/bad\/alloc/);
    expect(logger.find('alloc record skipped').length).toBeGreaterThanOrEqual(2);
    expect(thrown(() => state.getAllocation('bad')).code).toBe('ErrDecode');
  });

  test('volume usage per plugin and volume; an empty list removes the entry', () => {
    const users: VolumeUsageRecord[] = [
      { allocId: 'a1', usage },
      { allocId: 'a2', usage: { ...usage, readOnly: true } },
    ];
    expect(state.getVolumeUsage('hostpath', 'vol1')).toEqual([]);
    state.putVolumeUsage('hostpath', 'vol1', users);
    state.putVolumeUsage('hostpath', 'vol2', [users[0]!]);
    state.putVolumeUsage('other', 'vol9', [users[1]!]);
    expect(state.getVolumeUsage('hostpath', 'vol1')).toEqual(users);
    expect(state.listVolumeUsage()).toEqual([
      { pluginId: 'hostpath', volumeId: 'vol1', users },
      { pluginId: 'hostpath', volumeId: 'vol2', users: [users[0]] },
      { pluginId: 'other', volumeId: 'vol9', users: [users[1]] },
    ]);
    state.putVolumeUsage('hostpath', 'vol1', []);
    state.putVolumeUsage('other', 'vol9', []);
    state.putVolumeUsage('nobody', 'volX', []);
    expect(state.listVolumeUsage().map((u) => `${u.pluginId}/${u.volumeId}`)).toEqual(['hostpath/vol2']);
    expect(state.raw.view((tx) => tx.bucket('csi')!.bucket('usage')!.bucket('other'))).toBeUndefined();
  });

  test('pending unmounts', () => {
    const rec = (id: string): PendingUnmountRecord => ({ id, allocId: 'a1', pluginId: 'p', volumeId: id, usage, attempts: 1, since: 1000 });
    state.putPendingUnmount(rec('u2'));
    state.putPendingUnmount(rec('u1'));
    state.putPendingUnmount({ ...rec('u2'), attempts: 2, lastError: 'busy' });
    expect(state.listPendingUnmounts()).toEqual([rec('u1'), { ...rec('u2'), attempts: 2, lastError: 'busy' }]);
    state.deletePendingUnmount('u1');
    state.deletePendingUnmount('never-there');
    expect(state.listPendingUnmounts().map((r) => r.id)).toEqual(['u2']);
  });

  test('volume catalog; undecodable entries are skipped with a log line', () => {
    state.putVolume('v1', { id: 'v1', claims: [] });
    state.putVolume('v2', { id: 'v2', claims: ['a1'] });
    expect(state.getVolume('v2')).toEqual({ id: 'v2', claims: ['a1'] });
    state.raw.update((tx) => tx.bucket('volumes')!.put('v3', Buffer.from('not json')));
    expect(state.listVolumes()).toEqual([
      { id: 'v1', claims: [] },
      { id: 'v2', claims: ['a1'] },
    ]);
    expect(logger.find('undecodable record skipped').some((r) => String(r.fields.where).includes('volumes/v3'))).toBe(true);
    state.deleteVolume('v1');
    expect(state.getVolume('v1')).toBeUndefined();
  });

  test('values that are not JSON are refused before anything is written', () => {
    expect(() => state.putAllocation('a', undefined)).toThrow(TypeError);
    expect(state.getAllocation('a')).toBeUndefined();
  });

  test('a closed store refuses work; closing twice is harmless', () => {
    const other: ClientStateDB = kind === 'memory' ? openClientState({ memory: true }) : openClientState({ path: path.join(dir, 'other.db') });
    other.dispose();
    other.close();
    expect(thrown(() => other.getRegistryState()).code).toBe('ErrDatabaseNotOpen');
  });
});

describe('ClientStateDB on disk', () => {
  let dir: string;
  let file: string;
  beforeEach(() => {
    dir = tempDir();
    file = path.join(dir, 'state.db');
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  const digest = (f: string) => crypto.createHash('sha256').update(fs.readFileSync(f)).digest('hex');

  test('state survives a reopen', () => {
    const a = openClientState({ path: file });
    a.putAllocation('a1', { id: 'a1' });
    a.putTaskHandle('a1', 'web', { pid: 7 });
    a.close();
    const b = openClientState({ path: file });
    expect(b.getTaskHandle('a1', 'web')).toEqual({ pid: 7 });
    expect(b.listAllocations().allocs).toHaveLength(1);
    b.close();
  });

  test('creates a missing data dir', () => {
    const deep = path.join(dir, 'data', 'nested', 'state.db');
    openClientState({ path: deep }).close();
    expect(fs.existsSync(deep)).toBe(true);
  });

  test('a second open of the same file fails with ErrTimeout that names the data dir', () => {
    const a = openClientState({ path: file });
    try {
      const err = thrown(() => openClientState({ path: file, timeout: 50 }));
      expect(err.code).toBe('ErrTimeout');
      expect(err.message).toContain(dir);
    } finally {
      a.close();
    }
  });

  test('a file of random bytes is refused with an error naming it, and left untouched', () => {
    fs.writeFileSync(file, crypto.randomBytes(32 * 1024));
    const before = digest(file);
    const err = thrown(() => openClientState({ path: file }));
    expect(err).toBeInstanceOf(ErrInvalid);
    expect(err.message).toContain(file);
    expect(digest(file)).toBe(before);
  });

  test('a truncated store is refused with an error naming it, and left untouched', () => {
    const a = openClientState({ path: file });
    for (let i = 0; i < 300; i++) a.putAllocation(`alloc-${i}`, { id: i, pad: 'x'.repeat(500) });
    a.close();
    fs.truncateSync(file, Math.floor(fs.statSync(file).size / 2));
    const before = digest(file);
    const err = thrown(() => openClientState({ path: file }));
    expect(err).toBeInstanceOf(ErrCorrupt);
    expect(err.message).toContain(file);
    expect(digest(file)).toBe(before);
  });

  test('a garbled store is refused with an error naming it, and left untouched', () => {
    const a = openClientState({ path: file });
    for (let i = 0; i < 300; i++) a.putAllocation(`alloc-${i}`, { id: i, pad: 'x'.repeat(500) });
    a.close();
    const fd = fs.openSync(file, 'r+');
    fs.writeSync(fd, Buffer.alloc(4096 * 4, 0xa5), 0, 4096 * 4, 4096 * 3);
    fs.closeSync(fd);
    const before = digest(file);
    const err = thrown(() => openClientState({ path: file }));
    expect([ErrCorrupt, ErrInvalid].some((c) => err instanceof c)).toBe(true);
    expect(err.message).toContain(file);
    expect(digest(file)).toBe(before);
  });

  test('a store is never silently replaced: a foreign SQLite file is refused', () => {
    const db = DB.open(file);
    db.close();
    fs.writeFileSync(file, Buffer.from('SQLite format 3\0'.padEnd(4096, '\u0001')));
    expect(thrown(() => openClientState({ path: file })).message).toContain(file);
  });
});
