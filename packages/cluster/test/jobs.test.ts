// Jobs and placements on a real etcd (one member: these are about
// transactions and leases, not about members failing): a job's versions,
// stop and purge; scheduling passes over hand-made node views whose ready
// nodes hold real alive keys (a placement commits only on a node alive at
// commit); passes serialised by the epoch, same views or different; the
// disconnect grace measured by a lease in etcd, the claims of a node past it
// released once, and a node back meanwhile keeping its slot even against a
// stale view; records no one can read (a job, a slot, a node, claims) that
// never stop a pass; a job too big for one transaction; a job record over
// a submission's limits, left out and said once per revision; a purge's
// tombstone on an etcd lease, whatever the clocks of the agents say; a pass
// of an agent shutting down stopping before it writes.
import { MemoryLogger, RealClock } from '@csiplug/core';
import type { Namespace } from 'etcd3';
import { EtcdVolumeClaims } from '../src/claims';
import { ClusterVolumeClaimer } from '../src/cluster-claimer';
import { connectEtcd, type EtcdConnection } from '../src/connect';
import { EtcdJobs, type ReconcileOptions, type ReconcileResult } from '../src/jobs';
import { EtcdNodeRegistry, type ClusterNodeView } from '../src/node-registry';
import type { GroupDemand, Placement, VolumeDemand } from '../src/scheduler';
import { EtcdTestCluster } from '../src/testing';
import { T0, caps, request, volumeRecord } from './support/records';

jest.setTimeout(120_000);

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
const n1Down = (): ClusterNodeView[] => [node('n1', { status: 'down' }), node('n2'), node('n3')];
const group = (name: string, count: number, over: Partial<GroupDemand> = {}): GroupDemand => ({
  name,
  count,
  drivers: ['raw_exec'],
  volumes: [],
  ...over,
});
const demand = (volumeId: string, accessMode: string, readOnly = false): VolumeDemand => ({ volumeId, accessMode, readOnly });
const pass = (nodes: ClusterNodeView[], now: number, over: Partial<ReconcileOptions> = {}): ReconcileOptions => ({
  nodes,
  now,
  disconnectGraceMs: GRACE,
  ...over,
});

const perNode = (ps: Placement[]): Record<string, number> =>
  ps.reduce<Record<string, number>>((acc, p) => ({ ...acc, [p.node]: (acc[p.node] ?? 0) + 1 }), {});
const slots = (ps: Placement[], jobId: string): string[] =>
  ps
    .filter((p) => p.jobId === jobId)
    .map((p) => p.slot)
    .sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
const byKey = (ps: Placement[]): Placement[] => [...ps].sort((a, b) => `${a.jobId}/${a.slot}`.localeCompare(`${b.jobId}/${b.slot}`));
const wrote = (r: ReconcileResult): boolean => r.put.length + r.remove.length > 0 && r.conflicts === 0;

/** What a node registry's agents would hold: an alive key for each node the views say is ready, none for a down one. */
async function aliveAs(conn: EtcdConnection, nodes: ClusterNodeView[]): Promise<void> {
  for (const n of nodes) {
    if (n.status === 'ready') await conn.kv.put(`alive/${n.name}`).value(JSON.stringify({ instance: `agent-${n.name}`, since: T0 }));
    else await conn.kv.delete().key(`alive/${n.name}`);
  }
}

/** Waits until etcd lets `key` go (the lease it is on ran out); polls, and names the key if it never goes. */
async function untilGone(conn: EtcdConnection, key: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (await conn.kv.get(key).exists()) {
    if (Date.now() > deadline) throw new Error(`${key} is still in etcd after ${timeoutMs} ms: the lease it is on never ran out`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The connection, with every placement commit (a transaction that compares
 * sched/epoch) held until `release` resolves, after telling `arrived`: two
 * passes are stopped there until both have read everything they plan from.
 */
function holdCommits(conn: EtcdConnection, arrived: () => void, release: Promise<void>): EtcdConnection {
  const kv = new Proxy(conn.kv, {
    get(target, prop) {
      if (prop !== 'if') {
        const value = Reflect.get(target, prop, target) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      }
      return (...args: Parameters<Namespace['if']>) => {
        const txn = target.if(...args);
        if (String(args[0]) !== 'sched/epoch') return txn;
        const commit = txn.commit.bind(txn);
        txn.commit = async () => {
          arrived();
          await release;
          return commit();
        };
        return txn;
      };
    },
  });
  return { ...conn, kv };
}

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
  const fresh = (options: { tombstoneTtlSeconds?: number } = {}) => {
    const prefix = `test-jobs-${++prefixes}/`;
    const conn = connect(prefix);
    const logger = new MemoryLogger();
    const jobs = new EtcdJobs<Spec>(conn, logger, () => T0, options);
    /** A pass over `nodes`, with etcd's alive keys made to agree with them first. */
    const run = async (nodes: ClusterNodeView[], now: number, over: Partial<ReconcileOptions> = {}): Promise<ReconcileResult<Spec>> => {
      await aliveAs(conn, nodes);
      return jobs.reconcile(pass(nodes, now, over));
    };
    const raw = async (key: string) => (await conn.kv.get(key).exec()).kvs[0];
    return { conn, prefix, jobs, logger, run, raw };
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
    expect(first.record).toEqual({
      id: 'web',
      type: 'service',
      version: 0,
      stopped: false,
      submittedAt: T0,
      groups: [group('web', 2)],
      spec: { image: 'web:1' },
    });

    const same = await jobs.submit('web', 'service', [group('web', 2)], { image: 'web:1' }, T0 + 1_000);
    expect(same.unchanged).toBe(true);
    // The same version, run again: only its submit time is new (every node runs its share again, replacing what failed).
    expect(same.record).toEqual({ ...first.record, submittedAt: T0 + 1_000 });

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
    const { jobs, run } = fresh();
    await jobs.submit('web', 'service', [group('web', 2)], { image: 'web:1' }, T0);
    const placed = await run(three(), T0);
    expect(placed.put.map((p) => [p.slot, p.node])).toEqual([
      ['web/0', 'n1'],
      ['web/1', 'n2'],
    ]);
    expect(await jobs.placements()).toHaveLength(2);

    await jobs.stop('web', false, T0 + 1_000);
    expect(await jobs.placements()).toHaveLength(2);
    const stopped = await run(three(), T0 + 2_000);
    expect(stopped.remove.map((p) => p.slot)).toEqual(['web/0', 'web/1']);
    expect(stopped.conflicts).toBe(0);
    expect(stopped.placements).toEqual([]);
    expect(await jobs.placements()).toEqual([]);
    expect((await jobs.status('web'))?.record.stopped).toBe(true);
  });

  it("a purge leaves a tombstone, its placements go at the next pass, and the tombstone when its lease runs out (whatever a pass's clock says)", async () => {
    // The tombstone's lease as short as a test can wait for; in an agent it is a day.
    const { conn, jobs, run } = fresh({ tombstoneTtlSeconds: 2 });
    await jobs.submit('web', 'service', [group('web', 1)], { image: 'web:1' }, T0);
    await jobs.submit('keep', 'service', [group('keep', 1)], { image: 'keep:1' }, T0);
    await run(three(), T0);
    expect(slots(await jobs.placements(), 'web')).toEqual(['web/0']);
    const purged = await jobs.stop('web', true, T0 + 1_000);
    expect(purged).toMatchObject({ id: 'web', stopped: true, purged: true });
    // Gone for `status`, still listed for the nodes that must purge their allocs.
    expect(await jobs.status('web')).toBeUndefined();
    expect((await jobs.jobs()).find((j) => j.id === 'web')).toMatchObject({ purged: true });
    expect(await jobs.stop('web', true, T0 + 1_500)).toBeUndefined();

    await run(three(), T0 + 2_000);
    expect((await jobs.placements()).map((p) => p.jobId)).toEqual(['keep']);
    expect((await jobs.jobs()).map((j) => j.id)).toEqual(['keep', 'web']);
    // A pass whose clock says a day went by changes nothing: etcd measures the tombstone's day.
    await run(three(), T0 + 1_000 + 24 * 3_600_000 + 1);
    expect((await jobs.jobs()).map((j) => j.id)).toEqual(['keep', 'web']);
    await untilGone(conn, 'jobs/web');
    expect((await jobs.jobs()).map((j) => j.id)).toEqual(['keep']);

    // Submitted again after its purge: a new job, version 0.
    expect((await jobs.submit('web', 'service', [group('web', 1)], { image: 'web:1' }, T0 + 2 * 24 * 3_600_000)).record.version).toBe(0);
  });

  it('a purge decided by an agent whose clock is two days behind is kept by a pass with a right clock, for a node back later to see, and a tombstone an older agent left without a lease is put on one', async () => {
    const { conn, prefix, jobs: right, run } = fresh({ tombstoneTtlSeconds: 2 });
    const DAY = 24 * 3_600_000;
    const now = Date.now();
    // Another agent on the same keys, its clock two days behind.
    const skewed = new EtcdJobs<Spec>(connect(prefix), new MemoryLogger(), () => now - 2 * DAY, { tombstoneTtlSeconds: 2 });
    await right.submit('web', 'service', [group('web', 1)], { image: 'web:1' }, now);
    await run(three(), now);
    expect(await skewed.stop('web', true, now - 2 * DAY)).toMatchObject({ purged: true, submittedAt: now - 2 * DAY });

    // The right agent's passes: the tombstone stays (its slot goes), as a node away would need it to.
    await run(three(), now + 1_000);
    await run(three(), now + 2_000);
    expect(await right.placements()).toEqual([]);
    expect((await right.jobs()).map((j) => [j.id, j.purged])).toEqual([['web', true]]);
    // Gone only when etcd's lease on it runs out.
    await untilGone(conn, 'jobs/web');

    // A tombstone written without a lease (an agent before this one) goes on one at the next pass, and then when it runs out.
    await conn.kv.put('jobs/old').value(
      JSON.stringify({
        id: 'old',
        type: 'service',
        version: 0,
        stopped: true,
        purged: true,
        submittedAt: now - 3 * DAY,
        groups: [group('old', 1)],
        spec: { image: 'old:1' },
      }),
    );
    await run(three(), now + 3_000);
    const rewritten = (await conn.kv.get('jobs/old').exec()).kvs[0];
    expect(rewritten?.lease).not.toBe('0');
    await untilGone(conn, 'jobs/old');
  });

  it('a 195-byte job record asking for 100000 allocs, put straight into etcd, is left out with one error naming its key and the limit; other jobs are placed; written again, it is said again', async () => {
    const { conn, jobs, run, logger } = fresh();
    const limited = (): ClusterNodeView[] => three().map((n) => ({ ...n, maxAllocsPerJob: 256 }));
    const body = JSON.stringify({
      id: 'big',
      type: 'service',
      version: 0,
      stopped: false,
      submittedAt: T0,
      groups: [{ name: 'g', count: 100_000, drivers: ['raw_exec'], volumes: [] }],
      spec: { pad: 'x'.repeat(17) },
    });
    expect(Buffer.byteLength(body)).toBe(195);
    await conn.kv.put('jobs/big').value(body);
    await jobs.submit('web', 'service', [group('web', 2)], { image: 'web:1' }, T0);

    for (let i = 0; i < 3; i++) {
      const result = await run(limited(), T0 + i * 1_000);
      expect(result.conflicts).toBe(0);
      expect(result.records.map((r) => r.id)).toEqual(['web']);
      expect(result.unplaced).toEqual([]);
    }
    expect(slots(await jobs.placements(), 'web')).toEqual(['web/0', 'web/1']);
    expect(await conn.kv.getAll().prefix('placements/big/').keys()).toEqual([]);
    const said = () => logger.records.filter((r) => r.level === 'error' && r.fields['key'] === 'jobs/big');
    expect(said()).toHaveLength(1);
    expect(String(said()[0]!.fields['error'])).toContain('asks for 100000 allocs');
    expect(String(said()[0]!.fields['error'])).toContain('at most 768 of a job in all');

    // A new revision of the same bad record is said once more.
    await conn.kv.put('jobs/big').value(body);
    await run(limited(), T0 + 5_000);
    await run(limited(), T0 + 6_000);
    expect(said()).toHaveLength(2);
  });

  it('a job placed while the cluster was bigger, over the limit once a node is gone, still stops: its slots go when it is stopped', async () => {
    const { jobs, run } = fresh();
    // Three nodes running 2 of a job each: 5 allocs is within what a job run lets through (6).
    const limited = (names: string[]): ClusterNodeView[] => names.map((n) => node(n, { maxAllocsPerJob: 2 }));
    await jobs.submit('web', 'service', [group('web', 5)], { image: 'web:1' }, T0);
    await run(limited(['n1', 'n2', 'n3']), T0);
    expect(slots(await jobs.placements(), 'web')).toHaveLength(5);
    // n3's record is gone (node purge): two nodes, 4 allocs of a job at most; the running job is over the limit now.
    await jobs.stop('web', false, T0 + 1_000);
    await run(limited(['n1', 'n2']), T0 + 2_000);
    // A stopped job asks nothing of a pass but its slots' removal: they go.
    expect(slots(await jobs.placements(), 'web')).toEqual([]);
  });

  it('a pass whose agent is shutting down (its signal aborted) stops before it writes; the next pass places', async () => {
    const { jobs, run } = fresh();
    await jobs.submit('web', 'service', [group('web', 2)], { image: 'web:1' }, T0);
    const stopping = new AbortController();
    stopping.abort(new Error('the agent is shutting down'));
    await expect(run(three(), T0, { signal: stopping.signal })).rejects.toThrow('the agent is shutting down');
    expect(await jobs.placements()).toEqual([]);
    expect(slots((await run(three(), T0 + 1_000)).placements, 'web')).toEqual(['web/0', 'web/1']);
  });

  it('a pass over three ready nodes puts a system job on each and spreads a service job, and returns what it read and wrote; the next pass writes nothing', async () => {
    const { jobs, run } = fresh();
    await jobs.submit('agent', 'system', [group('agent', 1)], { image: 'agent:1' }, T0);
    await jobs.submit('web', 'service', [group('web', 5)], { image: 'web:1' }, T0);
    const first = await run(three(), T0);
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
    // What the pass returns is what etcd holds after it.
    expect(byKey(first.placements)).toEqual(byKey(placements));
    expect(first.records.map((r) => [r.id, r.version])).toEqual([
      ['agent', 0],
      ['web', 0],
    ]);

    const status = await jobs.status('web');
    expect(status?.placements.map((p) => p.slot).sort()).toEqual(['web/0', 'web/1', 'web/2', 'web/3', 'web/4']);
    expect(status?.pending).toEqual([]);

    const second = await run(three(), T0 + 5_000);
    expect(second).toMatchObject({ put: [], remove: [], unplaced: [], conflicts: 0 });
    expect(byKey(second.placements)).toEqual(byKey(placements));
    expect(await jobs.placements()).toEqual(placements);
  });

  it('status lists what no node can take and why, grouped by reasons, until a node that can joins', async () => {
    const { jobs, run } = fresh();
    await jobs.submit('vm', 'service', [group('vm', 2, { drivers: ['qemu'] })], { image: 'vm:1' }, T0);
    const nodes = [node('n1'), node('n2', { status: 'down' })];
    await run(nodes, T0);
    const stuck = await jobs.status('vm');
    expect(stuck?.placements).toEqual([]);
    expect(stuck?.pending).toEqual([
      { group: 'vm', count: 2, slots: ['vm/0', 'vm/1'], reasons: { n1: 'no qemu driver on the node', n2: 'the node is down' } },
    ]);

    await run([...nodes, node('n3', { drivers: ['qemu'] })], T0 + 1_000);
    const placed = await jobs.status('vm');
    expect(placed?.placements.map((p) => [p.slot, p.node])).toEqual([
      ['vm/0', 'n3'],
      ['vm/1', 'n3'],
    ]);
    expect(placed?.pending).toEqual([]);
  });

  it('a node placed on must be alive at commit: a view that calls a node ready without its alive key commits nothing', async () => {
    const { conn, jobs, run } = fresh();
    await jobs.submit('web', 'service', [group('web', 1)], { image: 'web:1' }, T0);
    await aliveAs(conn, [node('n2'), node('n3')]);
    // n1 first by name, and ready by the view: but its lease is gone.
    const stale = await jobs.reconcile(pass(three(), T0));
    expect(stale.put.map((p) => p.node)).toEqual(['n1']);
    expect(stale.conflicts).toBe(1);
    expect(stale.placements).toEqual([]);
    expect(await jobs.placements()).toEqual([]);

    const fixed = await run(three(), T0 + 1_000);
    expect(fixed.conflicts).toBe(0);
    expect((await jobs.placements()).map((p) => p.node)).toEqual(['n1']);
  });

  it("the per-node cap on a job's allocs (max_allocs_per_job in the node's view) leaves the excess pending, with the reason", async () => {
    const { jobs, run } = fresh();
    await jobs.submit('web', 'service', [group('web', 5)], { image: 'web:1' }, T0);
    // Three nodes known, the most generous running 2 of a job: a job run could have asked for 6 (record-limits.ts); n3 is down.
    const nodes = [
      node('n1', { maxAllocsPerJob: 2 }),
      node('n2', { maxAllocsPerJob: 1 }),
      node('n3', { maxAllocsPerJob: 1, status: 'down' }),
    ];
    const result = await run(nodes, T0);
    expect(perNode(await jobs.placements())).toEqual({ n1: 2, n2: 1 });
    const capped = {
      n1: 'the node runs at most 2 allocs of a job (its limits { max_allocs_per_job })',
      n2: 'the node runs at most 1 allocs of a job (its limits { max_allocs_per_job })',
      n3: 'the node is down',
    };
    expect(result.unplaced.map((u) => [u.slot, u.reasons])).toEqual([
      ['web/3', capped],
      ['web/4', capped],
    ]);
    expect((await jobs.status('web'))?.pending).toEqual([{ group: 'web', count: 2, slots: ['web/3', 'web/4'], reasons: capped }]);
  });

  it('two passes from two connections at once: exactly one commits each round, and every job has exactly its slots (20 rounds)', async () => {
    const { conn, prefix, jobs: a } = fresh();
    // The other agent: a client of its own on the same prefix.
    const b = new EtcdJobs<Spec>(connect(prefix), new MemoryLogger(), () => T0);
    const nodes = three();
    await aliveAs(conn, nodes);
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
      // Both read the same state and decide the same writes: one commits them, the other's compare fails (at most one
      // chunk tried) or it finds nothing left to do. Two passes both committing writes would mean a stale pass got through.
      expect(results.filter(wrote)).toHaveLength(1);
      for (const r of results) expect(r.conflicts).toBeLessThanOrEqual(1);

      const placements = await a.placements();
      for (const [id, { count, version }] of expected) {
        const want = id === 'agent' ? nodes.map((n) => `agent/@${n.name}`) : Array.from({ length: count }, (_, i) => `${id}/${i}`);
        expect(slots(placements, id)).toEqual(want);
        expect(placements.filter((p) => p.jobId === id).every((p) => p.jobVersion === version)).toBe(true);
      }
      expect(placements).toHaveLength([...expected.values()].reduce((n, e) => n + e.count, 0));
    }
  });

  it('two passes held at their commit with different views of a node, writing different keys: the epoch lets exactly one through', async () => {
    const { conn, prefix, jobs } = fresh();
    await jobs.submit('vm', 'service', [group('vm', 1, { drivers: ['qemu'] })], { image: 'vm:1' }, T0);
    await jobs.submit('box', 'service', [group('box', 1, { drivers: ['docker'] })], { image: 'box:1' }, T0);
    await aliveAs(conn, [node('n1')]);
    // n1's record changed between two agents' reads: one sees qemu there, the other docker. Each would place only its
    // own job, on keys the other does not touch; only the epoch tells the two passes apart.
    let arrivals = 0;
    let open!: () => void;
    const release = new Promise<void>((r) => (open = r));
    const arrived = () => void (++arrivals === 2 && open());
    const a = new EtcdJobs<Spec>(holdCommits(connect(prefix), arrived, release), new MemoryLogger(), () => T0);
    const b = new EtcdJobs<Spec>(holdCommits(connect(prefix), arrived, release), new MemoryLogger(), () => T0);
    const [ra, rb] = await Promise.all([
      a.reconcile(pass([node('n1', { drivers: ['qemu'] })], T0)),
      b.reconcile(pass([node('n1', { drivers: ['docker'] })], T0)),
    ]);
    expect(ra.put.map((p) => p.jobId)).toEqual(['vm']);
    expect(rb.put.map((p) => p.jobId)).toEqual(['box']);
    expect([ra, rb].filter(wrote)).toHaveLength(1);
    const [winner, loser] = wrote(ra) ? [ra, rb] : [rb, ra];
    expect(loser.conflicts).toBe(1);
    expect(loser.placements).toEqual([]);
    expect(await jobs.placements()).toEqual(winner.put);
    // The loser's view is the one that holds now: its next pass reads again and commits (the gate stays open).
    const loserJobs = winner === ra ? b : a;
    const loserView = winner === ra ? [node('n1', { drivers: ['docker'] })] : [node('n1', { drivers: ['qemu'] })];
    const after = await loserJobs.reconcile(pass(loserView, T0 + 1_000));
    expect(after.conflicts).toBe(0);
    expect((await jobs.placements()).map((p) => p.jobId).sort()).toEqual(['box', 'vm']);
    expect(await conn.kv.get('sched/epoch').string()).toBe(String(T0 + 1_000));
  });

  it("a node down: the first pass marks it and starts its grace on a lease in etcd; the slot moves only once the lease ran out, after the node's claims were released, once", async () => {
    const { conn, jobs, run, raw } = fresh();
    await jobs.volumes.add(volumeRecord('data', 'n1'));
    await jobs.volumes.add(volumeRecord('logs', 'n1'));
    await jobs.submit('db', 'service', [group('db', 1, { volumes: [demand('data', 'single-node-writer')] })], { image: 'db:1' }, T0);
    await run(three(), T0);
    expect((await jobs.placements()).map((p) => [p.slot, p.node])).toEqual([['db/0', 'n1']]);
    // The alloc on n1 claimed the volume, and its controller published it to n1 (the controller-publish state, in etcd too).
    await jobs.claims.claim(
      { id: 'data', capabilities: caps('single-node-writer') },
      request('data', 'db-alloc', 'single-node-writer'),
      'n1',
    );
    await jobs.claims.markPublished('data', 'db-alloc', { csiNodeId: 'csi-n1', context: { device: '/dev/x' } });
    expect((await jobs.claims.claims('data'))[0]!.published).toEqual({ csiNodeId: 'csi-n1', context: { device: '/dev/x' } });
    // Claimed again by the same alloc on the same node (asserted after a restart): the publish state and start stay.
    const before = (await jobs.claims.claims('data'))[0]!;
    await jobs.claims.claim(
      { id: 'data', capabilities: caps('single-node-writer') },
      request('data', 'db-alloc', 'single-node-writer'),
      'n1',
    );
    expect((await jobs.claims.claims('data'))[0]).toEqual(before);

    const released: Array<[string, string[]]> = [];
    const onNodeReleased = (n: string, volumes: string[]) => void released.push([n, volumes]);
    // Before its claims go: what was published to it, for a controller elsewhere to unpublish (the claim still held while asked).
    const unpublish: Array<[string, string, string, number]> = [];
    const beforeRelease = async (
      n: string,
      published: Array<{ volumeId: string; claim: { allocId: string; published?: { csiNodeId: string } } }>,
    ) => {
      for (const p of published)
        unpublish.push([n, p.volumeId, p.claim.published!.csiNodeId, (await jobs.claims.claims(p.volumeId)).length]);
      return true;
    };
    const marked = await run(n1Down(), T0 + 10_000, { disconnectGraceMs: 1_000, onNodeReleased, beforeRelease });
    expect(marked.put).toEqual([]);
    expect(JSON.parse((await conn.kv.get('down/n1').string())!)).toEqual({ since: T0 + 10_000 });
    // The grace is a key on a lease of its length (in whole seconds): etcd, not any agent's clock, says when it ends.
    const grace = await raw('grace/n1');
    expect(grace).toBeDefined();
    expect((await conn.client.leaseClient.leaseTimeToLive({ ID: grace!.lease })).grantedTTL).toBe('1');
    expect((await jobs.claims.claims('data')).map((c) => c.nodeId)).toEqual(['n1']);
    expect(released).toEqual([]);

    await untilGone(conn, 'grace/n1');
    // Past it, whatever `now` says: n1's claim goes first, or n2 could not take a single-node-writer volume n1 still held.
    expect(unpublish).toEqual([]);
    // An agent that cannot unpublish them (no controller of the plugin there, another node has one) leaves the release to one that can.
    const cannot = await run(n1Down(), T0 + 10_000, { disconnectGraceMs: 1_000, onNodeReleased, beforeRelease: async () => false });
    expect(released).toEqual([]);
    expect((await jobs.claims.claims('data')).map((c) => c.nodeId)).toEqual(['n1']);
    expect(JSON.parse((await conn.kv.get('down/n1').string())!)).toEqual({ since: T0 + 10_000 });
    expect(cannot.put).toEqual([]);
    const moved = await run(n1Down(), T0 + 10_000, { disconnectGraceMs: 1_000, onNodeReleased, beforeRelease });
    expect(unpublish).toEqual([['n1', 'data', 'csi-n1', 1]]);
    expect(released).toEqual([['n1', ['data']]]);
    expect(await jobs.claims.claims('data')).toEqual([]);
    expect(JSON.parse((await conn.kv.get('down/n1').string())!)).toEqual({ since: T0 + 10_000, released: true });
    expect(moved.put).toEqual([expect.objectContaining({ slot: 'db/0', node: 'n2', movedFrom: 'n1', placedAt: T0 + 10_000 })]);
    expect(moved.conflicts).toBe(0);
    expect((await jobs.placements()).map((p) => [p.slot, p.node, p.movedFrom])).toEqual([['db/0', 'n2', 'n1']]);

    // Released once: the mark says so, and a later pass does not go through the claims again for n1.
    await conn.kv.put('claims/logs').value(
      JSON.stringify({
        claims: [
          {
            allocId: 'late',
            nodeId: 'n1',
            mode: 'write',
            accessMode: 'multi-node-multi-writer',
            attachmentMode: 'file-system',
            since: T0,
          },
        ],
      }),
    );
    await run(n1Down(), T0 + 20_000, { disconnectGraceMs: 1_000, onNodeReleased });
    expect(released).toEqual([['n1', ['data']]]);
    expect((await jobs.claims.claims('logs')).map((c) => c.allocId)).toEqual(['late']);

    // n1 back: its mark goes, and the slot stays where it moved.
    await run(three(), T0 + 30_000);
    expect(await conn.kv.get('down/n1').string()).toBeNull();
    expect((await jobs.placements()).map((p) => p.node)).toEqual(['n2']);
  });

  it("a node's pass releases another node's claims past its grace through the releaseNode it was given (its ClusterVolumeClaimer, the one writer), not by the claims handle alone", async () => {
    const conn = connect(`test-jobs-${++prefixes}/`);
    // n2's agent: its one claims handle, and its claimer over it (releaseNode never asks the local catalog).
    const handle = new EtcdVolumeClaims(conn, () => T0);
    const claimer = new ClusterVolumeClaimer(
      () => {
        throw new Error('releaseNode asked the local catalog');
      },
      handle,
      'n2',
    );
    const viaClaimer = jest.spyOn(claimer, 'releaseNode');
    const byHandle = jest.spyOn(handle, 'releaseNode');
    const jobs = new EtcdJobs<Spec>(conn, new MemoryLogger(), () => T0, { claims: handle, releaseNode: (n) => claimer.releaseNode(n) });
    await jobs.volumes.add(volumeRecord('data', 'n1'));
    await handle.claim({ id: 'data', capabilities: caps('single-node-writer') }, request('data', 'n1-alloc', 'single-node-writer'), 'n1');
    await aliveAs(conn, n1Down());
    await jobs.reconcile(pass(n1Down(), T0, { disconnectGraceMs: 1_000 }));
    expect(viaClaimer).not.toHaveBeenCalled();
    await untilGone(conn, 'grace/n1');
    await jobs.reconcile(pass(n1Down(), T0 + 10_000, { disconnectGraceMs: 1_000 }));
    expect(viaClaimer.mock.calls).toEqual([['n1']]);
    // The handle wrote the release once: the claimer's own call, nothing beside it.
    expect(byHandle.mock.calls).toEqual([['n1']]);
    expect(await handle.claims('data')).toEqual([]);
  });

  it('within the grace etcd measures, a slot stays however late `now` says it is', async () => {
    const { conn, jobs, run } = fresh();
    await jobs.submit('web', 'service', [group('web', 1)], { image: 'web:1' }, T0);
    await run(three(), T0);
    await run(n1Down(), T0 + 1_000);
    expect(await conn.kv.get('grace/n1').exists()).toBe(true);
    // This agent's clock is far ahead; the lease of the grace (60 s) is not near its end.
    const late = await run(n1Down(), T0 + 100 * GRACE);
    expect(late).toMatchObject({ put: [], remove: [], unplaced: [], conflicts: 0 });
    expect((await jobs.placements()).map((p) => p.node)).toEqual(['n1']);
  });

  it("a disconnect grace of 0 is still one second of etcd's; a view calling a node down while its alive key is there starts no grace at all", async () => {
    const { conn, jobs, run } = fresh();
    await jobs.volumes.add(volumeRecord('data', 'n1'));
    await jobs.submit('db', 'service', [group('db', 1, { volumes: [demand('data', 'single-node-writer')] })], { image: 'db:1' }, T0);
    await run(three(), T0);
    await jobs.claims.claim(
      { id: 'data', capabilities: caps('single-node-writer') },
      request('data', 'db-alloc', 'single-node-writer'),
      'n1',
    );

    // A stale view: n1's alive key is there. No mark, no grace, its claim kept, its slot where it is.
    await aliveAs(conn, three());
    const stale = await jobs.reconcile(pass(n1Down(), T0 + 1_000, { disconnectGraceMs: 0 }));
    expect(stale).toMatchObject({ put: [], remove: [], unplaced: [], conflicts: 0 });
    expect(await conn.kv.get('down/n1').exists()).toBe(false);
    expect(await conn.kv.get('grace/n1').exists()).toBe(false);
    expect((await jobs.claims.claims('data')).map((c) => c.allocId)).toEqual(['db-alloc']);

    // Gone for real: the first pass marks it and moves nothing; once the one-second lease ran out, the slot moves.
    expect((await run(n1Down(), T0 + 2_000, { disconnectGraceMs: 0 })).put).toEqual([]);
    await untilGone(conn, 'grace/n1');
    const moved = await run(n1Down(), T0 + 3_000, { disconnectGraceMs: 0 });
    expect(moved.put.map((p) => [p.slot, p.node, p.movedFrom])).toEqual([['db/0', 'n2', 'n1']]);
    expect(await jobs.claims.claims('data')).toEqual([]);
    expect((await jobs.status('db'))?.pending).toEqual([]);
  });

  it('a node back before its slot moved keeps it; a move planned from a stale view after it came back fails its compare and writes nothing', async () => {
    const { conn, jobs, run, raw } = fresh();
    await jobs.volumes.add(volumeRecord('shared', 'n1'));
    await jobs.submit(
      'web',
      'service',
      [group('web', 1, { volumes: [demand('shared', 'multi-node-multi-writer')] })],
      { image: 'web:1' },
      T0,
    );
    await run(three(), T0);
    await jobs.claims.claim(
      { id: 'shared', capabilities: caps('multi-node-multi-writer') },
      request('shared', 'web-alloc', 'multi-node-multi-writer'),
      'n1',
    );

    // Down, then back within its grace: the mark and the grace go, the slot stays.
    await run(n1Down(), T0 + 1_000, { disconnectGraceMs: 1_000 });
    expect(await conn.kv.get('down/n1').exists()).toBe(true);
    const back = await run(three(), T0 + 2_000, { disconnectGraceMs: 1_000 });
    expect(back).toMatchObject({ put: [], remove: [], conflicts: 0 });
    expect(await conn.kv.get('down/n1').exists()).toBe(false);
    expect(await conn.kv.get('grace/n1').exists()).toBe(false);
    expect((await jobs.placements()).map((p) => p.node)).toEqual(['n1']);

    // Down again, past its grace; then back, while another agent still holds a view from before.
    await run(n1Down(), T0 + 3_000, { disconnectGraceMs: 1_000 });
    await untilGone(conn, 'grace/n1');
    const stale = n1Down();
    await conn.kv.put('alive/n1').value(JSON.stringify({ instance: 'agent-n1', since: T0 }));
    const before = await raw('placements/web/web/0');
    const released: string[] = [];
    const result = await jobs.reconcile(
      pass(stale, T0 + 4_000, { disconnectGraceMs: 1_000, onNodeReleased: (n) => void released.push(n) }),
    );
    expect(result.put.map((p) => [p.slot, p.node, p.movedFrom])).toEqual([['web/0', 'n2', 'n1']]);
    expect(result.conflicts).toBe(1);
    expect(result.placements.map((p) => p.node)).toEqual(['n1']);
    expect((await raw('placements/web/web/0'))?.mod_revision).toBe(before?.mod_revision);
    // Its claims are its own still, and its mark does not say they were released.
    expect(released).toEqual([]);
    expect((await jobs.claims.claims('shared')).map((c) => [c.allocId, c.nodeId])).toEqual([['web-alloc', 'n1']]);
    expect(JSON.parse((await conn.kv.get('down/n1').string())!)).toEqual({ since: T0 + 3_000 });

    // A pass that sees it ready clears the mark; nothing moves.
    const fresh2 = await run(three(), T0 + 5_000, { disconnectGraceMs: 1_000 });
    expect(fresh2).toMatchObject({ put: [], remove: [], conflicts: 0 });
    expect(await conn.kv.get('down/n1').exists()).toBe(false);
    expect((await jobs.placements()).map((p) => p.node)).toEqual(['n1']);
  });

  it('a job record no one can read (not JSON, the wrong shape, another id) does not stop the pass, and its slots are left as they are', async () => {
    const { conn, jobs, run, raw, logger } = fresh();
    await jobs.submit('web', 'service', [group('web', 2)], { image: 'web:1' }, T0);
    const slotOn = (jobId: string, n: string): Placement => ({
      slot: `${jobId}/0`,
      jobId,
      group: jobId,
      index: 0,
      node: n,
      jobVersion: 0,
      placedAt: T0,
    });
    await conn.kv.put('jobs/text').value('not json {');
    await conn.kv
      .put('jobs/shape')
      .value(JSON.stringify({ id: 'shape', type: 'batch', version: 0, stopped: false, submittedAt: T0, groups: [], spec: {} }));
    await conn.kv.put('jobs/other').value(
      JSON.stringify({
        id: 'someone-else',
        type: 'service',
        version: 0,
        stopped: false,
        submittedAt: T0,
        groups: [group('other', 1)],
        spec: {},
      }),
    );
    for (const id of ['text', 'shape', 'other']) await conn.kv.put(`placements/${id}/${id}/0`).value(JSON.stringify(slotOn(id, 'n3')));
    const mods = await Promise.all(['text', 'shape', 'other'].map(async (id) => (await raw(`placements/${id}/${id}/0`))?.mod_revision));

    const result = await run(three(), T0);
    expect(result.conflicts).toBe(0);
    expect(result.records.map((r) => r.id)).toEqual(['web']);
    expect(slots(await jobs.placements(), 'web')).toEqual(['web/0', 'web/1']);
    // Not removed as slots of an unknown job: untouched, and counted as they are.
    expect(await Promise.all(['text', 'shape', 'other'].map(async (id) => (await raw(`placements/${id}/${id}/0`))?.mod_revision))).toEqual(
      mods,
    );
    expect(byKey(result.placements).map((p) => `${p.jobId}/${p.slot}`)).toEqual([
      'other/other/0',
      'shape/shape/0',
      'text/text/0',
      'web/web/0',
      'web/web/1',
    ]);
    const said = logger.records.filter((r) => r.level === 'error').map((r) => r.fields['key']);
    expect(said).toEqual(expect.arrayContaining(['jobs/text', 'jobs/shape', 'jobs/other']));
    expect(await jobs.status('other')).toBeUndefined();
    expect((await jobs.jobs()).map((j) => j.id)).toEqual(['web']);
  });

  it('a placement no one can read is deleted and its slot placed again; one of a slot the job does not have is deleted', async () => {
    const { conn, jobs, run, logger } = fresh();
    await jobs.submit('web', 'service', [group('web', 3)], { image: 'web:1' }, T0);
    await run(three(), T0);
    expect(slots(await jobs.placements(), 'web')).toEqual(['web/0', 'web/1', 'web/2']);
    await conn.kv.put('placements/web/web/0').value('garbage');
    // A body that names another job than its key does.
    await conn.kv
      .put('placements/web/web/1')
      .value(JSON.stringify({ slot: 'web/1', jobId: 'db', group: 'web', index: 1, node: 'n2', jobVersion: 0, placedAt: T0 }));
    await conn.kv.put('placements/web/web/7').value('{}');
    await conn.kv.put('placements/loose').value('{}');

    const result = await run(three(), T0 + 1_000);
    expect(result.conflicts).toBe(0);
    expect(result.put.map((p) => p.slot)).toEqual(['web/0', 'web/1']);
    const after = await jobs.placements();
    expect(slots(after, 'web')).toEqual(['web/0', 'web/1', 'web/2']);
    expect(await conn.kv.getAll().prefix('placements/').keys()).toEqual([
      'placements/web/web/0',
      'placements/web/web/1',
      'placements/web/web/2',
    ]);
    expect(byKey(result.placements)).toEqual(byKey(after));
    const warned = logger.records.filter((r) => r.level === 'warn').map((r) => r.fields['key']);
    expect(warned).toEqual(
      expect.arrayContaining(['placements/web/web/0', 'placements/web/web/1', 'placements/web/web/7', 'placements/loose']),
    );
    // And the next pass has nothing left to do.
    expect(await run(three(), T0 + 2_000)).toMatchObject({ put: [], remove: [], unplaced: [], conflicts: 0 });
  });

  it('claims no one can read make their volume unplaceable, named in the reason; other volumes are placed', async () => {
    const { conn, jobs, run } = fresh();
    await jobs.volumes.add(volumeRecord('bad', 'n1'));
    await jobs.volumes.add(volumeRecord('good', 'n1'));
    await conn.kv.put('claims/bad').value(JSON.stringify({ claims: [{ allocId: 'a1', nodeId: 'n1' }] }));
    await jobs.submit('x', 'service', [group('x', 1, { volumes: [demand('bad', 'multi-node-multi-writer')] })], { image: 'x:1' }, T0);
    await jobs.submit('y', 'service', [group('y', 1, { volumes: [demand('good', 'multi-node-multi-writer')] })], { image: 'y:1' }, T0);
    const result = await run(three(), T0);
    expect(result.conflicts).toBe(0);
    expect((await jobs.placements()).map((p) => p.jobId)).toEqual(['y']);
    const why = 'the claims of volume "bad" in etcd cannot be read';
    expect((await jobs.status('x'))?.pending).toEqual([{ group: 'x', count: 1, slots: ['x/0'], reasons: { n1: why, n2: why, n3: why } }]);
  });

  it("a node record whose name is not its key's is left out of the nodes, so no pass places on it", async () => {
    const { conn, jobs, run, logger } = fresh();
    const registry = new EtcdNodeRegistry(conn, 10_000, new RealClock(), logger, 'test-reader');
    const record = (name: string) => {
      const { status: _status, ...r } = node(name);
      return JSON.stringify(r);
    };
    await conn.kv.put('nodes/n1').value(record('n1'));
    await conn.kv.put('nodes/n2').value(record('n3'));
    await conn.kv.put('nodes/n4').value('not json');
    await aliveAs(conn, [node('n1'), node('n2'), node('n4')]);
    const nodes = await registry.list();
    expect(nodes.map((n) => [n.name, n.status])).toEqual([['n1', 'ready']]);
    expect(logger.records.filter((r) => r.level === 'warn').map((r) => r.fields['key'])).toEqual(['nodes/n2', 'nodes/n4']);

    await jobs.submit('web', 'service', [group('web', 2)], { image: 'web:1' }, T0);
    await run(nodes, T0);
    expect(perNode(await jobs.placements())).toEqual({ n1: 2 });
  });

  it('a volume whose id is reserved while its plugin makes it is not placeable until it is made', async () => {
    const { jobs, run } = fresh();
    await jobs.volumes.add(volumeRecord('data', 'n1', { state: 'creating' }));
    await jobs.submit('db', 'service', [group('db', 1, { volumes: [demand('data', 'multi-node-multi-writer')] })], { image: 'db:1' }, T0);
    await run(three(), T0);
    const why = 'volume "data" is not in the cluster\'s catalog';
    expect((await jobs.status('db'))?.pending).toEqual([
      { group: 'db', count: 1, slots: ['db/0'], reasons: { n1: why, n2: why, n3: why } },
    ]);

    expect(await jobs.volumes.finish(volumeRecord('data', 'n1'))).toBe(true);
    await run(three(), T0 + 1_000);
    expect((await jobs.placements()).map((p) => [p.slot, p.node])).toEqual([['db/0', 'n1']]);
    expect((await jobs.status('db'))?.pending).toEqual([]);
  });

  it('a job of more writes than one transaction holds is placed, and shrunk, in full', async () => {
    const { jobs, run } = fresh();
    await jobs.submit('big', 'service', [group('big', 150)], { image: 'big:1' }, T0);
    const placed = await run(three(), T0);
    expect(placed.put).toHaveLength(150);
    expect(placed.conflicts).toBe(0);
    const all = await jobs.placements();
    expect(all).toHaveLength(150);
    expect(perNode(all)).toEqual({ n1: 50, n2: 50, n3: 50 });

    // 145 removes and 5 slots written again at the new version: several transactions again.
    await jobs.submit('big', 'service', [group('big', 5)], { image: 'big:2' }, T0 + 1_000);
    const shrunk = await run(three(), T0 + 1_000);
    expect(shrunk.remove).toHaveLength(145);
    expect(shrunk.put).toHaveLength(5);
    expect(shrunk.conflicts).toBe(0);
    const left = await jobs.placements();
    expect(slots(left, 'big')).toEqual(['big/0', 'big/1', 'big/2', 'big/3', 'big/4']);
    expect(left.every((p) => p.jobVersion === 1)).toBe(true);
  });
});
