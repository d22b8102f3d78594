// ClientStateDB over both backends, and what opening does with files that
// are corrupt, foreign, older or newer than this build.
import { MemoryLogger } from '@csiplug/core';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import type { ClientStateDB } from './client-state';
import type { PendingUnmountRecord, VolumeMountStub, VolumeUsageRecord } from './legacy-volume-records';
import { type BoltClientStateDB, openClientState } from './client-state-db';
import { DB } from './db';
import { ErrCorrupt, ErrInvalid } from './errors';
import { CLIENT_STATE_SCHEMA_VERSION } from './layout';
import { BACKENDS, tempDir, thrown } from '../test/support/backends';

const usage = { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' };

describe.each(BACKENDS)('ClientStateDB (%s)', (kind) => {
  let dir: string;
  let state: BoltClientStateDB;
  const logger = new MemoryLogger();
  const open = (): BoltClientStateDB =>
    kind === 'memory' ? openClientState({ memory: true, logger }) : openClientState({ path: path.join(dir, 'state.db'), logger });

  beforeEach(() => {
    dir = tempDir();
    state = open();
  });
  afterEach(() => {
    state.dispose();
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
    const csi = state.raw.view((tx) => {
      const out: string[] = [];
      tx.bucket('csi')!.forEachBucket((n) => out.push(n.toString()));
      return out;
    });
    expect(csi).toEqual(['mounts', 'pending', 'usage']);
    expect(state.raw.view((tx) => JSON.parse(tx.bucket('meta')!.get('version')!.toString()))).toBe(CLIENT_STATE_SCHEMA_VERSION);
  });

  test('the registry document round-trips as JSON; the state does not look inside it', () => {
    expect(state.getRegistryState()).toBeUndefined();
    const reg = {
      plugins: {
        'csi-node': {
          hostpath: [
            {
              type: 'csi-node',
              name: 'hostpath',
              version: '1.0.0',
              allocId: 'a1',
              socketPath: '/x/csi.sock',
              options: { MountPoint: '/csi' },
            },
          ],
        },
      },
    };
    state.putRegistryState(reg);
    expect(state.getRegistryState<typeof reg>()).toEqual(reg);
    state.putRegistryState(['any', 'json', 1]);
    expect(state.getRegistryState()).toEqual(['any', 'json', 1]);
    expect(() => state.putRegistryState(undefined)).toThrow(TypeError);
    expect(state.getRegistryState()).toEqual(['any', 'json', 1]);
    state.raw.update((tx) => tx.bucket('dynamicplugins')!.put('registry_state', Buffer.from('{"plugins": tru')));
    expect(thrown(() => state.getRegistryState()).code).toBe('ErrDecode');
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

  test('task states of several allocs in one write: all of them, or none when one cannot be encoded', () => {
    state.putTaskState('a1', 'web', { state: 'pending' });
    state.putTaskStates([
      { allocId: 'a1', task: 'web', state: { state: 'running' } },
      { allocId: 'a2', task: 'db', state: { state: 'dead' } },
    ]);
    expect(state.getTaskState('a1', 'web')).toEqual({ state: 'running' });
    expect(state.getTaskState('a2', 'db')).toEqual({ state: 'dead' });
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    expect(() =>
      state.putTaskStates([
        { allocId: 'a1', task: 'web', state: { state: 'dead' } },
        { allocId: 'a3', task: 'x', state: cyclic },
      ]),
    ).toThrow(TypeError);
    expect(state.getTaskState('a1', 'web')).toEqual({ state: 'running' });
    expect(state.listAllocationIds()).toEqual(['a1', 'a2']);
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

  test('volume mounts in csi/mounts: put, get, overwrite, delete, listed in key order', () => {
    // A new store has the bucket (schema 2), empty.
    expect(state.raw.view((tx) => tx.bucket('csi')!.bucket('mounts'))).toBeDefined();
    expect(state.listVolumeMounts()).toEqual({ records: [], failures: [] });
    // A store without it (removed by hand) still reads as empty, and the first write brings it back.
    state.raw.update((tx) => tx.bucket('csi')!.deleteBucket('mounts'));
    expect(state.raw.view((tx) => tx.bucket('csi')!.bucket('mounts'))).toBeUndefined();
    expect(state.listVolumeMounts()).toEqual({ records: [], failures: [] });
    expect(state.getVolumeMount('hostpath/vol1/a1')).toBeUndefined();
    state.deleteVolumeMount('never-there');

    state.putVolumeMount('hostpath/vol2/a1', { volumeId: 'vol2', allocId: 'a1', targetPath: '/t2' });
    state.putVolumeMount('hostpath/vol1/a1', { volumeId: 'vol1', allocId: 'a1', targetPath: '/t1' });
    state.putVolumeMount('hostpath/vol1/a2', { volumeId: 'vol1', allocId: 'a2', targetPath: '/t3' });
    state.putVolumeMount('hostpath/vol1/a1', { volumeId: 'vol1', allocId: 'a1', targetPath: '/t1', readOnly: true });
    expect(state.getVolumeMount<{ readOnly?: boolean }>('hostpath/vol1/a1')?.readOnly).toBe(true);
    expect(state.listVolumeMounts<{ targetPath: string }>().records.map((r) => [r.key, r.record.targetPath])).toEqual([
      ['hostpath/vol1/a1', '/t1'],
      ['hostpath/vol1/a2', '/t3'],
      ['hostpath/vol2/a1', '/t2'],
    ]);
    state.deleteVolumeMount('hostpath/vol1/a2');
    state.deleteVolumeMount('hostpath/vol1/a2');
    expect(state.getVolumeMount('hostpath/vol1/a2')).toBeUndefined();
    expect(state.listVolumeMounts().records.map((r) => r.key)).toEqual(['hostpath/vol1/a1', 'hostpath/vol2/a1']);
    // Other buckets are not touched, and deleting an alloc leaves its mount records to their owner.
    state.putAllocation('a1', { id: 'a1' });
    state.deleteAllocation('a1');
    expect(state.listVolumeMounts().records).toHaveLength(2);
    expect(() => state.putVolumeMount('', {})).toThrow(expect.objectContaining({ code: 'ErrKeyRequired' }));
    expect(() => state.putVolumeMount('k', undefined)).toThrow(TypeError);
    expect(state.getVolumeMount('k')).toBeUndefined();
    expect(state.raw.check()).toEqual([]);
  });

  test('listVolumeMounts reports a corrupt mount record and a stray bucket, and returns the good ones', () => {
    state.putVolumeMount('good-1', { n: 1 });
    state.putVolumeMount('bad', { n: 2 });
    state.putVolumeMount('good-2', { n: 3 });
    state.raw.update((tx) => {
      const mounts = tx.bucket('csi')!.bucket('mounts')!;
      mounts.put('bad', Buffer.from('{"n": 2, trunc'));
      mounts.createBucket('stray').put('x', Buffer.from('1'));
    });
    const before = logger.find('volume mount record skipped').length;
    const { records, failures } = state.listVolumeMounts<{ n: number }>();
    expect(records).toEqual([
      { key: 'good-1', record: { n: 1 } },
      { key: 'good-2', record: { n: 3 } },
    ]);
    expect(failures.map((f) => f.key)).toEqual(['bad', 'stray']);
    expect(failures[0]!.error).toMatch(/cannot decode csi\/mounts\/bad/);
    expect(failures[1]!.error).toMatch(/csi\/mounts\/stray is a nested bucket/);
    expect(logger.find('volume mount record skipped').length - before).toBe(2);
    expect(thrown(() => state.getVolumeMount('bad')).code).toBe('ErrDecode');
    // The corrupt record is left in place for whoever repairs it, and can be replaced or removed.
    state.deleteVolumeMount('bad');
    expect(state.listVolumeMounts().failures.map((f) => f.key)).toEqual(['stray']);
  });

  test('volume operation intents (csi/volume-ops): put, get, list in id order, delete; a corrupt one is reported, not dropped', () => {
    expect(state.listVolumeOps()).toEqual({ records: [], failures: [] });
    state.putVolumeOp('v2', { op: 'delete' });
    state.putVolumeOp('v1', { op: 'create' });
    expect(state.getVolumeOp('v1')).toEqual({ op: 'create' });
    state.raw.update((tx) => tx.bucket('csi')!.bucket('volume-ops')!.put('v3', Buffer.from('{"op": tr')));
    const { records, failures } = state.listVolumeOps();
    expect(records).toEqual([
      { key: 'v1', record: { op: 'create' } },
      { key: 'v2', record: { op: 'delete' } },
    ]);
    expect(failures.map((f) => f.key)).toEqual(['v3']);
    expect(logger.find('volume operation intent skipped').length).toBe(1);
    state.deleteVolumeOp('v1');
    state.deleteVolumeOp('v1');
    expect(state.getVolumeOp('v1')).toBeUndefined();
    // Mount records are another bucket.
    expect(state.listVolumeMounts().records).toEqual([]);
  });

  test('the legacy volume readers work for a one-time adoption, then clear', () => {
    const users: VolumeUsageRecord[] = [{ allocId: 'a1', usage }];
    state.putVolumeUsage('hostpath', 'vol1', users);
    state.putPendingUnmount({
      id: 'u1',
      allocId: 'a1',
      pluginId: 'hostpath',
      volumeId: 'vol1',
      usage,
      attempts: 1,
      since: 1,
    } satisfies PendingUnmountRecord);
    state.putAllocation('a1', { id: 'a1' });
    state.putVolumeStubs('a1', {
      data: { name: 'data', volumeId: 'vol1', pluginId: 'hostpath', targetPath: '/t', usage } satisfies VolumeMountStub,
    });

    // What an adopter reads, as plain JSON of its own choosing.
    const adopted = {
      usage: state.listVolumeUsage<unknown>(),
      pending: state.listPendingUnmounts<unknown>(),
      stubs: state.getVolumeStubs<Record<string, unknown>>('a1'),
    };
    expect(adopted.usage).toEqual([{ pluginId: 'hostpath', volumeId: 'vol1', users }]);
    expect(adopted.pending).toEqual([expect.objectContaining({ id: 'u1' })]);
    expect(Object.keys(adopted.stubs!)).toEqual(['data']);
    for (const [key, record] of Object.entries(adopted.stubs!)) state.putVolumeMount(`a1/${key}`, record);

    state.putVolumeUsage('hostpath', 'vol1', []);
    state.deletePendingUnmount('u1');
    state.putVolumeStubs('a1', {});
    expect(state.listVolumeUsage()).toEqual([]);
    expect(state.listPendingUnmounts()).toEqual([]);
    expect(state.getVolumeStubs('a1')).toEqual({});
    expect(state.listVolumeMounts().records.map((r) => r.key)).toEqual(['a1/data']);
  });

  test('putAllocations saves every record in one write, or none when one cannot be written', () => {
    state.putAllocations([
      { allocId: 'a1', alloc: { id: 'a1' } },
      { allocId: 'a2', alloc: { id: 'a2' } },
    ]);
    expect(state.listAllocations().allocs.map((a) => a.allocId)).toEqual(['a1', 'a2']);
    expect(state.listAllocationIds()).toEqual(['a1', 'a2']);
    // The second key is over the key limit: the write fails inside the transaction, and a3 goes with it.
    const err = thrown(() =>
      state.putAllocations([
        { allocId: 'a3', alloc: { id: 'a3' } },
        { allocId: 'x'.repeat(40_000), alloc: { id: 'big' } },
      ]),
    );
    expect(err.code).toBe('ErrKeyTooLarge');
    expect(state.getAllocation('a3')).toBeUndefined();
    expect(state.listAllocations().allocs.map((a) => a.allocId)).toEqual(['a1', 'a2']);
  });

  test('values that are not JSON are refused before anything is written', () => {
    expect(() => state.putAllocation('a', undefined)).toThrow(TypeError);
    expect(state.getAllocation('a')).toBeUndefined();
  });

  test('a disposed store refuses work; disposing twice is harmless', () => {
    const other: ClientStateDB =
      kind === 'memory' ? openClientState({ memory: true }) : openClientState({ path: path.join(dir, 'other.db') });
    other.dispose();
    other.dispose();
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
    a.putVolumeMount('hostpath/vol1/a1', { targetPath: '/t' });
    a.dispose();
    const b = openClientState({ path: file });
    expect(b.getTaskHandle('a1', 'web')).toEqual({ pid: 7 });
    expect(b.listAllocations().allocs).toHaveLength(1);
    expect(b.listVolumeMounts()).toEqual({ records: [{ key: 'hostpath/vol1/a1', record: { targetPath: '/t' } }], failures: [] });
    expect(b.schemaVersion).toBe(CLIENT_STATE_SCHEMA_VERSION);
    b.dispose();
  });

  test('creates a missing data dir', () => {
    const deep = path.join(dir, 'data', 'nested', 'state.db');
    openClientState({ path: deep }).dispose();
    expect(fs.existsSync(deep)).toBe(true);
  });

  test('a new file is no finding: foundEmpty is unset, and a store with state reopens without it too', () => {
    const a = openClientState({ path: file });
    expect(a.foundEmpty).toBeUndefined();
    a.putAllocation('a1', { id: 'a1' });
    a.dispose();
    const b = openClientState({ path: file });
    expect(b.foundEmpty).toBeUndefined();
    b.dispose();
  });

  test('says when it created the file (a first start, or a deleted state.db), and not when it opened one', () => {
    const a = openClientState({ path: file });
    expect(a.createdNew).toBe(true);
    a.dispose();
    const b = openClientState({ path: file });
    expect(b.createdNew).toBe(false);
    b.dispose();
    const m = openClientState({ memory: true });
    expect(m.createdNew).toBe(false);
    m.dispose();
  });

  test('a 0-byte state file is started empty, never silently: foundEmpty names it and a warning is logged', () => {
    const a = openClientState({ path: file });
    a.putAllocation('a1', { id: 'a1' });
    a.dispose();
    fs.truncateSync(file, 0);
    for (const side of ['-wal', '-shm']) fs.rmSync(file + side, { force: true });
    const logger = new MemoryLogger();
    const b = openClientState({ path: file, logger });
    try {
      expect(b.foundEmpty).toEqual({ file, bytes: 0, why: `${file} was there but empty (0 bytes)` });
      expect(b.listAllocations().allocs).toEqual([]);
      expect(logger.records).toContainEqual(
        expect.objectContaining({
          level: 'warn',
          msg: expect.stringContaining('held no state'),
          fields: expect.objectContaining({ file, bytes: 0 }),
        }),
      );
      // It is a working store from now on: what is written stays, and the next open finds it.
      b.putAllocation('a2', { id: 'a2' });
    } finally {
      b.dispose();
    }
    const c = openClientState({ path: file });
    expect(c.foundEmpty).toBeUndefined();
    expect(c.getAllocation('a2')).toEqual({ id: 'a2' });
    c.dispose();
  });

  test('a store file with no client state in it (no schema version, no records) is found empty too', () => {
    DB.open(file).close(); // the store's tables, but not a byte of client state
    const size = fs.statSync(file).size;
    expect(size).toBeGreaterThan(0);
    const b = openClientState({ path: file });
    try {
      expect(b.foundEmpty).toMatchObject({ file, bytes: size, why: expect.stringContaining('held no client state') });
    } finally {
      b.dispose();
    }
  });

  test('the in-memory store is never found empty: it is empty by design', () => {
    const m = openClientState({ memory: true });
    expect(m.foundEmpty).toBeUndefined();
    m.dispose();
  });

  test('a second open of the same file fails with ErrTimeout that names the data dir', () => {
    const a = openClientState({ path: file });
    try {
      const err = thrown(() => openClientState({ path: file, timeout: 50 }));
      expect(err.code).toBe('ErrTimeout');
      expect(err.message).toContain(dir);
    } finally {
      a.dispose();
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
    a.dispose();
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
    a.dispose();
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
