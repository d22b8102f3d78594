// Jobs, placements and the cluster's volume catalog on a real etcd (one
// member: these are about transactions, not about members failing): a job's
// versions, stop and purge, scheduling passes over hand-made node views, two
// passes from two connections racing without ever both committing, a node
// down past its disconnect grace giving up its claims before its service
// slot moves, a job too big for one transaction, and a volume that cannot be
// added twice or removed while claimed.
import { MemoryLogger } from '@csiplug/core';
import type { VolumeCapability, VolumeClaimRequest } from '@csiplug/volumes';
import { ClusterVolumeExistsError, EtcdClusterVolumes, type ClusterVolumeRecord } from '../src/cluster-volumes';
import { EtcdVolumeClaims } from '../src/claims';
import { connectEtcd, type EtcdConnection } from '../src/connect';
import { EtcdJobs, type ReconcileOptions } from '../src/jobs';
import type { ClusterNodeView } from '../src/node-registry';
import type { GroupDemand, Placement } from '../src/scheduler';
import { EtcdTestCluster } from '../src/testing';

jest.setTimeout(120_000);

const T0 = 1_700_000_000_000;
const GRACE = 60_000;

interface Spec {
  image: string;
  count?: number;
}

const node = (name: string, over: Partial<ClusterNodeView> = {}): ClusterNodeView => ({
  name,
  nodeClass: 'default',
  meta: {},
  drivers: ['raw_exec'],
  plugins: [{ id: 'hostpath', type: 'csi-node', healthy: true, topology: { zone: name } }],
  version: '0.1.0',
  registeredAt: T0,
  updatedAt: T0,
  status: 'ready',
  ...over,
});
const three = (): ClusterNodeView[] => [node('n1'), node('n2'), node('n3')];
const group = (name: string, count: number, over: Partial<GroupDemand> = {}): GroupDemand => ({ name, count, drivers: ['raw_exec'], volumes: [], ...over });
const pass = (nodes: ClusterNodeView[], now: number, over: Partial<ReconcileOptions> = {}): ReconcileOptions => ({ nodes, now, disconnectGraceMs: GRACE, ...over });

const caps = (accessMode: string): VolumeCapability[] => [{ accessMode: accessMode as VolumeCapability['accessMode'], attachmentMode: 'file-system' }];
const request = (volumeId: string, allocId: string, accessMode: string, readOnly = false): VolumeClaimRequest => ({ volumeId, allocId, accessMode, attachmentMode: 'file-system', readOnly });
const volumeRecord = (id: string, origin: string): ClusterVolumeRecord<{ externalId: string }> => ({ id, pluginId: 'hostpath', origin, createdAt: T0, volume: { externalId: `ext-${id}` } });

const perNode = (ps: Placement[]): Record<string, number> => ps.reduce<Record<string, number>>((acc, p) => ({ ...acc, [p.node]: (acc[p.node] ?? 0) + 1 }), {});
const slots = (ps: Placement[], jobId: string): string[] =>
  ps
    .filter((p) => p.jobId === jobId)
    .map((p) => p.slot)
    .sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));

describe('jobs and placements in etcd', () => {
  let etcd: EtcdTestCluster;
  const conns: EtcdConnection[] = [];
  let prefixes = 0;

  /** A client of its own on a prefix of its own (each test sees only its keys); `prefix` shares one. */
  const connect = (prefix: string): EtcdConnection => {
    const c = connectEtcd({ endpoints: etcd.endpoints, prefix, dialTimeoutMs: 5_000 });
    conns.push(c);
    return c;
  };
  const fresh = (): { conn: EtcdConnection; prefix: string; jobs: EtcdJobs<Spec>; logger: MemoryLogger } => {
    const prefix = `test-jobs-${++prefixes}/`;
    const conn = connect(prefix);
    const logger = new MemoryLogger();
    return { conn, prefix, jobs: new EtcdJobs<Spec>(conn, logger, () => T0), logger };
  };

  beforeAll(async () => {
    etcd = await EtcdTestCluster.start(1);
  });
  afterAll(async () => {
    for (const c of conns) c.close();
    await etcd?.stop();
  });

  it('a job is version 0 when new, unchanged when the same spec comes again, one version more when it changes or runs again after a stop', async () => {
    const { jobs } = fresh();
    const first = await jobs.submit('web', 'service', [group('web', 2)], { image: 'web:1' }, T0);
    expect(first.unchanged).toBe(false);
    expect(first.record).toEqual({ id: 'web', type: 'service', version: 0, stopped: false, submittedAt: T0, groups: [group('web', 2)], spec: { image: 'web:1' } });

    const same = await jobs.submit('web', 'service', [group('web', 2)], { image: 'web:1' }, T0 + 1_000);
    expect(same.unchanged).toBe(true);
    expect(same.record).toEqual(first.record);

    const changed = await jobs.submit('web', 'service', [group('web', 3)], { image: 'web:2' }, T0 + 2_000);
    expect(changed.unchanged).toBe(false);
    expect(changed.record.version).toBe(1);
    expect((await jobs.status('web'))?.record).toEqual(changed.record);

    const stopped = await jobs.stop('web', false, T0 + 3_000);
    expect(stopped).toMatchObject({ version: 1, stopped: true, submittedAt: T0 + 3_000 });
    expect(stopped?.purged).toBeUndefined();
    // The same spec after a stop runs it again: a change, not "unchanged".
    const again = await jobs.submit('web', 'service', [group('web', 3)], { image: 'web:2' }, T0 + 4_000);
    expect(again).toMatchObject({ unchanged: false, record: { version: 2, stopped: false } });

    expect(await jobs.stop('nope', false, T0)).toBeUndefined();
  });

  it('a stopped job keeps its placements until the next pass, which removes every one', async () => {
    const { jobs } = fresh();
    await jobs.submit('web', 'service', [group('web', 2)], { image: 'web:1' }, T0);
    const placed = await jobs.reconcile(pass(three(), T0));
    expect(placed.put.map((p) => [p.slot, p.node])).toEqual([
      ['web/0', 'n1'],
      ['web/1', 'n2'],
    ]);
    expect(await jobs.placements()).toHaveLength(2);

    await jobs.stop('web', false, T0 + 1_000);
    expect(await jobs.placements()).toHaveLength(2);
    const stopped = await jobs.reconcile(pass(three(), T0 + 2_000));
    expect(stopped.remove.map((p) => p.slot)).toEqual(['web/0', 'web/1']);
    expect(stopped.conflicts).toBe(0);
    expect(await jobs.placements()).toEqual([]);
    expect((await jobs.status('web'))?.record.stopped).toBe(true);
  });

  it('a purge leaves a tombstone, its placements go at the next pass, and the tombstone a day later', async () => {
    const { jobs } = fresh();
    await jobs.submit('web', 'service', [group('web', 1)], { image: 'web:1' }, T0);
    await jobs.submit('keep', 'service', [group('keep', 1)], { image: 'keep:1' }, T0);
    await jobs.reconcile(pass(three(), T0));
    const purged = await jobs.stop('web', true, T0 + 1_000);
    expect(purged).toMatchObject({ id: 'web', stopped: true, purged: true });
    // Gone for `status`, still listed for the nodes that must purge their allocs.
    expect(await jobs.status('web')).toBeUndefined();
    expect((await jobs.jobs()).find((j) => j.id === 'web')).toMatchObject({ purged: true });
    expect(await jobs.stop('web', true, T0 + 1_500)).toBeUndefined();

    await jobs.reconcile(pass(three(), T0 + 2_000));
    expect((await jobs.placements()).map((p) => p.jobId)).toEqual(['keep']);
    expect((await jobs.jobs()).map((j) => j.id)).toEqual(['keep', 'web']);
    await jobs.reconcile(pass(three(), T0 + 1_000 + 24 * 3_600_000 + 1));
    expect((await jobs.jobs()).map((j) => j.id)).toEqual(['keep']);

    // Submitted again after its purge: a new job, version 0.
    expect((await jobs.submit('web', 'service', [group('web', 1)], { image: 'web:1' }, T0 + 2 * 24 * 3_600_000)).record.version).toBe(0);
  });

  it('a pass over three ready nodes puts a system job on each and spreads a service job; the next pass writes nothing', async () => {
    const { jobs } = fresh();
    await jobs.submit('agent', 'system', [group('agent', 1)], { image: 'agent:1' }, T0);
    await jobs.submit('web', 'service', [group('web', 5)], { image: 'web:1' }, T0);
    const first = await jobs.reconcile(pass(three(), T0));
    expect(first.conflicts).toBe(0);
    expect(first.unplaced).toEqual([]);

    const placements = await jobs.placements();
    expect(placements.filter((p) => p.jobId === 'agent').map((p) => [p.slot, p.node])).toEqual([
      ['agent/@n1', 'n1'],
      ['agent/@n2', 'n2'],
      ['agent/@n3', 'n3'],
    ]);
    expect(perNode(placements.filter((p) => p.jobId === 'web'))).toEqual({ n1: 2, n2: 2, n3: 1 });
    expect(placements.every((p) => p.jobVersion === 0 && p.placedAt === T0)).toBe(true);

    const status = await jobs.status('web');
    expect(status?.placements.map((p) => p.slot).sort()).toEqual(['web/0', 'web/1', 'web/2', 'web/3', 'web/4']);
    expect(status?.pending).toEqual([]);

    const second = await jobs.reconcile(pass(three(), T0 + 5_000));
    expect(second).toEqual({ put: [], remove: [], unplaced: [], conflicts: 0 });
    expect(await jobs.placements()).toEqual(placements);
  });

  it('status lists what no node can take and why, until a node that can joins', async () => {
    const { jobs } = fresh();
    await jobs.submit('vm', 'service', [group('vm', 1, { drivers: ['qemu'] })], { image: 'vm:1' }, T0);
    const nodes = [node('n1'), node('n2', { status: 'down' })];
    await jobs.reconcile(pass(nodes, T0));
    const stuck = await jobs.status('vm');
    expect(stuck?.placements).toEqual([]);
    expect(stuck?.pending).toEqual([{ jobId: 'vm', group: 'vm', slot: 'vm/0', reasons: { n1: 'no qemu driver on the node', n2: 'the node is down' } }]);

    await jobs.reconcile(pass([...nodes, node('n3', { drivers: ['qemu'] })], T0 + 1_000));
    const placed = await jobs.status('vm');
    expect(placed?.placements.map((p) => [p.slot, p.node])).toEqual([['vm/0', 'n3']]);
    expect(placed?.pending).toEqual([]);
  });

  it('two passes from two connections at once: exactly one commits each round, and every job has exactly its slots (20 rounds)', async () => {
    const { prefix, jobs: a } = fresh();
    // The other agent: a client of its own on the same prefix.
    const b = new EtcdJobs<Spec>(connect(prefix), new MemoryLogger(), () => T0);
    const nodes = three();
    const expected = new Map<string, { count: number; version: number }>();
    const submit = async (id: string, type: 'service' | 'system', count: number, image: string) => {
      const { record } = await a.submit(id, type, [group(id, count)], { image, count }, T0);
      expected.set(id, { count: type === 'system' ? nodes.length : count, version: record.version });
    };
    await submit('agent', 'system', 1, 'agent:1');
    const counts = [4, 1, 6, 2, 5, 3];
    for (let round = 0; round < 20; round++) {
      // Every other round a job no one has placed yet (slots created from nothing); between them, one job's count
      // and version change (slots re-written, added and removed).
      if (round % 2 === 0) await submit(`fresh-${round}`, 'service', (round % 4) + 1, 'fresh:1');
      else await submit('race', 'service', counts[(round >> 1) % counts.length]!, `race:${round}`);

      const results = await Promise.all([a.reconcile(pass(nodes, T0 + round)), b.reconcile(pass(nodes, T0 + round))]);
      // Both read the same state and decide the same writes: one commits them, the other's compare fails or it finds
      // nothing left to do. Two passes both committing writes would mean the compare-and-swap let a stale pass through.
      const committed = results.filter((r) => r.put.length + r.remove.length > 0 && r.conflicts === 0);
      expect(committed).toHaveLength(1);

      const placements = await a.placements();
      for (const [id, { count, version }] of expected) {
        const want = id === 'agent' ? nodes.map((n) => `agent/@${n.name}`) : Array.from({ length: count }, (_, i) => `${id}/${i}`);
        expect(slots(placements, id)).toEqual(want);
        expect(placements.filter((p) => p.jobId === id).every((p) => p.jobVersion === version)).toBe(true);
      }
      expect(placements).toHaveLength([...expected.values()].reduce((n, e) => n + e.count, 0));
    }
  });

  it('a node down: the first pass marks it, a service slot there stays within the grace, and past it the node\'s claims are released before the slot moves', async () => {
    const { conn, jobs } = fresh();
    await jobs.volumes.add(volumeRecord('data', 'n1'));
    await jobs.submit('db', 'service', [group('db', 1, { volumes: [{ volumeId: 'data', accessMode: 'single-node-writer', readOnly: false }] })], { image: 'db:1' }, T0);
    await jobs.reconcile(pass(three(), T0));
    expect((await jobs.placements()).map((p) => [p.slot, p.node])).toEqual([['db/0', 'n1']]);
    // The alloc on n1 claimed the volume (n1 has no alive/ key here: its node view is all there is of it).
    await jobs.claims.claim({ id: 'data', capabilities: caps('single-node-writer') }, request('data', 'db-alloc', 'single-node-writer'), 'n1');

    const released: Array<[string, string[]]> = [];
    const onNodeReleased = (n: string, volumes: string[]) => void released.push([n, volumes]);
    const down = [node('n1', { status: 'down' }), node('n2'), node('n3')];
    const marked = await jobs.reconcile(pass(down, T0 + 10_000, { onNodeReleased }));
    expect(JSON.parse((await conn.kv.get('down/n1').string())!)).toEqual({ since: T0 + 10_000 });
    expect(marked.put).toEqual([]);
    expect((await jobs.claims.claims('data')).map((c) => c.nodeId)).toEqual(['n1']);

    // Still within the grace, counted from the mark (not from this pass).
    const within = await jobs.reconcile(pass(down, T0 + 10_000 + GRACE - 1, { onNodeReleased }));
    expect(within.put).toEqual([]);
    expect(JSON.parse((await conn.kv.get('down/n1').string())!)).toEqual({ since: T0 + 10_000 });
    expect(released).toEqual([]);

    // Past it: n1's claim goes first, or n2 could not take a single-node-writer volume n1 still held.
    const moved = await jobs.reconcile(pass(down, T0 + 10_000 + GRACE, { onNodeReleased }));
    expect(released).toEqual([['n1', ['data']]]);
    expect(await jobs.claims.claims('data')).toEqual([]);
    expect(moved.put).toEqual([expect.objectContaining({ slot: 'db/0', node: 'n2', movedFrom: 'n1', placedAt: T0 + 10_000 + GRACE })]);
    expect(moved.conflicts).toBe(0);
    expect((await jobs.placements()).map((p) => [p.slot, p.node, p.movedFrom])).toEqual([['db/0', 'n2', 'n1']]);

    // n1 back: its mark goes, and the slot stays where it moved.
    await jobs.reconcile(pass(three(), T0 + 20 * GRACE));
    expect(await conn.kv.get('down/n1').string()).toBeNull();
    expect((await jobs.placements()).map((p) => p.node)).toEqual(['n2']);
  });

  it('with no grace, the first pass over a down node moves its slot — but not while the node still has its alive key', async () => {
    const { conn, jobs } = fresh();
    await jobs.volumes.add(volumeRecord('data', 'n1'));
    const volumes = [{ volumeId: 'data', accessMode: 'single-node-writer', readOnly: false }];
    await jobs.submit('db', 'service', [group('db', 1, { volumes })], { image: 'db:1' }, T0);
    await jobs.reconcile(pass(three(), T0));
    await jobs.claims.claim({ id: 'data', capabilities: caps('single-node-writer') }, request('data', 'db-alloc', 'single-node-writer'), 'n1');
    const down = [node('n1', { status: 'down' }), node('n2'), node('n3')];

    // A stale view: n1's lease is alive again. Its claim is kept, so no other node may take the volume.
    await conn.kv.put('alive/n1').value('{}');
    const kept = await jobs.reconcile(pass(down, T0 + 1_000, { disconnectGraceMs: 0 }));
    expect(kept.put).toEqual([]);
    expect(kept.unplaced[0]?.reasons).toEqual({
      n1: 'the node is down',
      n2: 'volume "data" (single-node-writer) is in use on node n1',
      n3: 'volume "data" (single-node-writer) is in use on node n1',
    });
    expect((await jobs.claims.claims('data')).map((c) => c.allocId)).toEqual(['db-alloc']);
    expect((await jobs.placements()).map((p) => p.node)).toEqual(['n1']);

    await conn.kv.delete().key('alive/n1');
    const moved = await jobs.reconcile(pass(down, T0 + 2_000, { disconnectGraceMs: 0 }));
    expect(moved.put.map((p) => [p.slot, p.node, p.movedFrom])).toEqual([['db/0', 'n2', 'n1']]);
    expect(await jobs.claims.claims('data')).toEqual([]);
    expect((await jobs.status('db'))?.pending).toEqual([]);
  });

  it('a job of more writes than one transaction holds is placed, and shrunk, in full', async () => {
    const { jobs } = fresh();
    await jobs.submit('big', 'service', [group('big', 150)], { image: 'big:1' }, T0);
    const placed = await jobs.reconcile(pass(three(), T0));
    expect(placed.put).toHaveLength(150);
    expect(placed.conflicts).toBe(0);
    const all = await jobs.placements();
    expect(all).toHaveLength(150);
    expect(perNode(all)).toEqual({ n1: 50, n2: 50, n3: 50 });

    // 145 removes and 5 slots written again at the new version: three transactions again.
    await jobs.submit('big', 'service', [group('big', 5)], { image: 'big:2' }, T0 + 1_000);
    const shrunk = await jobs.reconcile(pass(three(), T0 + 1_000));
    expect(shrunk.remove).toHaveLength(145);
    expect(shrunk.put).toHaveLength(5);
    expect(shrunk.conflicts).toBe(0);
    const left = await jobs.placements();
    expect(slots(left, 'big')).toEqual(['big/0', 'big/1', 'big/2', 'big/3', 'big/4']);
    expect(left.every((p) => p.jobVersion === 1)).toBe(true);
  });
});

describe('the cluster volume catalog in etcd', () => {
  let etcd: EtcdTestCluster;
  let conn: EtcdConnection;
  let volumes: EtcdClusterVolumes<{ externalId: string }>;
  let claimsOf: EtcdVolumeClaims;

  beforeAll(async () => {
    etcd = await EtcdTestCluster.start(1);
    conn = connectEtcd({ endpoints: etcd.endpoints, prefix: 'test-volumes/', dialTimeoutMs: 5_000 });
    volumes = new EtcdClusterVolumes(conn, new MemoryLogger());
    claimsOf = new EtcdVolumeClaims(conn);
  });
  afterAll(async () => {
    conn?.close();
    await etcd?.stop();
  });

  it('adds a volume once: a second add of the id, from any node, names the node that has it', async () => {
    await volumes.add(volumeRecord('data', 'n1'));
    expect(await volumes.get('data')).toEqual(volumeRecord('data', 'n1'));
    const again = await volumes.add(volumeRecord('data', 'n2')).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(ClusterVolumeExistsError);
    expect((again as Error).message).toBe('volume "data" exists in the cluster already (registered by node n1); pick another id, or deregister it first');
    // The first one's record stands.
    expect((await volumes.get('data'))?.origin).toBe('n1');
    await volumes.add(volumeRecord('alpha', 'n3'));
    expect((await volumes.list()).map((v) => v.id)).toEqual(['alpha', 'data']);
  });

  it('refuses to remove a volume while a claim on it is held anywhere; removes it once none is', async () => {
    await volumes.add(volumeRecord('held', 'n1'));
    await claimsOf.claim({ id: 'held', capabilities: caps('multi-node-multi-writer') }, request('held', 'a1', 'multi-node-multi-writer'), 'n2');
    expect(await volumes.remove('held')).toBe(false);
    expect(await volumes.get('held')).toBeDefined();

    // Released: the claims key is still there, empty.
    await claimsOf.release('held', 'a1');
    expect(await conn.kv.get('claims/held').string()).toBe(JSON.stringify({ claims: [] }));
    expect(await volumes.remove('held')).toBe(true);
    expect(await volumes.get('held')).toBeUndefined();

    // Never claimed: no claims key at all.
    await volumes.add(volumeRecord('unused', 'n1'));
    expect(await volumes.remove('unused')).toBe(true);
    expect(await volumes.get('unused')).toBeUndefined();

    // Claims no one can read are taken as held: never a volume removed under a claim.
    await volumes.add(volumeRecord('unreadable', 'n1'));
    await conn.kv.put('claims/unreadable').value('not json');
    expect(await volumes.remove('unreadable')).toBe(false);
    expect(await volumes.get('unreadable')).toBeDefined();
  });
});
