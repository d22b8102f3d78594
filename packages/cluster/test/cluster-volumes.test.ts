// The cluster's volume catalog on a real etcd (one member): an id added
// once, a reservation made while a plugin creates the volume and then
// finished or cancelled only by the node that holds it, a volume removed only
// while no claim on it is held, and records no one wrote left out.
import { MemoryLogger } from '@csiplug/core';
import { EtcdVolumeClaims } from '../src/claims';
import { ClusterVolumeExistsError, EtcdClusterVolumes, type ClusterVolumeRecord } from '../src/cluster-volumes';
import { connectEtcd, type EtcdConnection } from '../src/connect';
import { EtcdTestCluster } from '../src/testing';
import { T0, caps, request, volumeRecord, type TestVolume } from './support/records';

jest.setTimeout(120_000);

const record = volumeRecord;
const reservation = (id: string, origin: string): ClusterVolumeRecord<TestVolume> =>
  record(id, origin, { state: 'creating', volume: { id, pluginId: 'hostpath', externalId: '' } });

describe('the cluster volume catalog in etcd', () => {
  let etcd: EtcdTestCluster;
  let conn: EtcdConnection;
  let logger: MemoryLogger;
  let volumes: EtcdClusterVolumes<TestVolume>;
  let claimsOf: EtcdVolumeClaims;

  beforeAll(async () => {
    etcd = await EtcdTestCluster.start(1);
    conn = connectEtcd({ endpoints: etcd.endpoints, prefix: 'test-volumes/', dialTimeoutMs: 5_000 });
    logger = new MemoryLogger();
    volumes = new EtcdClusterVolumes(conn, logger);
    claimsOf = new EtcdVolumeClaims(conn);
  });
  afterAll(async () => {
    conn?.close();
    await etcd?.stop();
  });

  it('adds a volume once: a second add of the id, from any node, names the node that has it', async () => {
    const revision = await volumes.add(record('data', 'n1'));
    expect((await conn.kv.get('volumes/data').exec()).kvs[0]?.mod_revision).toBe(revision);
    expect(await volumes.get('data')).toEqual(record('data', 'n1'));
    const again = await volumes.add(record('data', 'n2')).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(ClusterVolumeExistsError);
    expect((again as Error).message).toBe(
      'volume "data" exists in the cluster already (registered by node n1); pick another id, or deregister it first',
    );
    // The first one's record stands.
    expect((await volumes.get('data'))?.origin).toBe('n1');
    await volumes.add(record('alpha', 'n3'));
    expect((await volumes.list()).map((v) => v.id)).toEqual(['alpha', 'data']);
  });

  it('a reservation holds the id against every other add, and only its node finishes it into the volume as made', async () => {
    await volumes.add(reservation('made', 'n1'));
    expect((await volumes.get('made'))?.state).toBe('creating');
    // Another node creating the same id meanwhile, or the same node twice: refused, naming the holder.
    for (const other of [reservation('made', 'n2'), record('made', 'n2'), reservation('made', 'n1')]) {
      const err = await volumes.add(other).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ClusterVolumeExistsError);
      expect((err as Error).message).toContain('registered by node n1');
    }

    // Another node's finish is no finish: the reservation stands.
    expect(await volumes.finish(record('made', 'n2'))).toBe(false);
    expect(await volumes.get('made')).toEqual(reservation('made', 'n1'));

    // Its own: the volume as made, with no state left on it (a state given with it is dropped).
    expect(await volumes.finish({ ...record('made', 'n1', { capabilities: caps('single-node-writer') }), state: 'creating' })).toBe(true);
    const made = await volumes.get('made');
    expect(made).toEqual(record('made', 'n1', { capabilities: caps('single-node-writer') }));
    expect(made).not.toHaveProperty('state');
    // Finished once: a second finish finds no reservation.
    expect(await volumes.finish(record('made', 'n1', { createdAt: T0 + 1 }))).toBe(false);
    expect((await volumes.get('made'))?.createdAt).toBe(T0);
    // Nothing to finish at all.
    expect(await volumes.finish(record('never-reserved', 'n1'))).toBe(false);
    expect(await volumes.get('never-reserved')).toBeUndefined();
  });

  it('a reservation is cancelled only by its own node, and a finished volume never by cancel', async () => {
    await volumes.add(reservation('failed', 'n1'));
    await volumes.cancel('failed', 'n2');
    expect(await volumes.get('failed')).toEqual(reservation('failed', 'n1'));
    await volumes.cancel('failed', 'n1');
    expect(await volumes.get('failed')).toBeUndefined();
    // The id is free again.
    await volumes.add(reservation('failed', 'n2'));
    expect((await volumes.get('failed'))?.origin).toBe('n2');

    await volumes.add(record('there', 'n1'));
    await volumes.cancel('there', 'n1');
    await volumes.cancel('there', 'n2');
    expect(await volumes.get('there')).toEqual(record('there', 'n1'));
    // Cancelling what is not there changes nothing.
    await volumes.cancel('nothing', 'n1');
    expect(await volumes.get('nothing')).toBeUndefined();
  });

  it('refuses to remove a volume while a claim on it is held anywhere; removes it once none is', async () => {
    await volumes.add(record('held', 'n1'));
    await claimsOf.claim(
      { id: 'held', capabilities: caps('multi-node-multi-writer') },
      request('held', 'a1', 'multi-node-multi-writer'),
      'n2',
    );
    expect(await volumes.remove('held')).toBe(false);
    expect(await volumes.get('held')).toBeDefined();

    // Released: the claims key is still there, empty.
    await claimsOf.release('held', 'a1');
    expect(await conn.kv.get('claims/held').string()).toBe(JSON.stringify({ claims: [] }));
    expect(await volumes.remove('held')).toBe(true);
    expect(await volumes.get('held')).toBeUndefined();

    // Never claimed: no claims key at all.
    await volumes.add(record('unused', 'n1'));
    expect(await volumes.remove('unused')).toBe(true);
    expect(await volumes.get('unused')).toBeUndefined();

    // Claims no one can read are taken as held: never a volume removed under a claim.
    await volumes.add(record('unreadable', 'n1'));
    await conn.kv.put('claims/unreadable').value('not json');
    expect(await volumes.remove('unreadable')).toBe(false);
    expect(await volumes.get('unreadable')).toBeDefined();
  });

  it("a record no one wrote (not JSON, another id than its key's, no plugin, a state it cannot have) is left out and said", async () => {
    const before = (await volumes.list()).map((v) => v.id);
    await conn.kv.put('volumes/junk-text').value('not json');
    await conn.kv.put('volumes/junk-id').value(JSON.stringify(record('someone-else', 'n1')));
    await conn.kv.put('volumes/junk-plugin').value(JSON.stringify(record('junk-plugin', 'n1', { pluginId: '' })));
    await conn.kv.put('volumes/junk-state').value(JSON.stringify({ ...record('junk-state', 'n1'), state: 'deleting' }));
    expect((await volumes.list()).map((v) => v.id)).toEqual(before);
    expect(await volumes.get('junk-id')).toBeUndefined();
    const said = logger.records.filter((r) => r.level === 'warn').map((r) => r.fields['key']);
    expect(said).toEqual(expect.arrayContaining(['volumes/junk-text', 'volumes/junk-id', 'volumes/junk-plugin', 'volumes/junk-state']));
    // A reservation no one wrote cannot be finished into a volume either.
    expect(await volumes.finish(record('junk-state', 'n1'))).toBe(false);
  });
});
