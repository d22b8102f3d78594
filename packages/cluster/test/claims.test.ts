// Cluster-wide claims against a real 3-member etcd cluster on loopback: two
// nodes racing for one single-node-writer volume never both win (200
// rounds), the multi-node access modes across nodes, and claims intact when
// an etcd member — the leader included — is killed with SIGKILL.
import { ClaimError } from '@csiplug/volumes';
import { connectEtcd, type EtcdConnection } from '../src/connect';
import { EtcdVolumeClaims } from '../src/claims';
import { EtcdTestCluster } from '../src/testing';
import { caps, request } from './support/records';

jest.setTimeout(120_000);

describe('cluster-wide claims in etcd', () => {
  let etcd: EtcdTestCluster;
  let a: EtcdConnection;
  let b: EtcdConnection;
  let onA: EtcdVolumeClaims;
  let onB: EtcdVolumeClaims;

  beforeAll(async () => {
    etcd = await EtcdTestCluster.start(3);
    // Two agents: two clients of their own, as two machines would have.
    const options = (i: number) => ({
      endpoints: [etcd.endpoint(i), ...etcd.endpoints.filter((_, j) => j !== i)],
      prefix: 'test-claims/',
      dialTimeoutMs: 5_000,
    });
    a = connectEtcd(options(0));
    b = connectEtcd(options(1));
    onA = new EtcdVolumeClaims(a);
    onB = new EtcdVolumeClaims(b);
  });

  afterAll(async () => {
    a?.close();
    b?.close();
    await etcd?.stop();
  });

  it('two nodes racing for a single-node-writer volume: exactly one wins, every round of 200', async () => {
    const wins = { n1: 0, n2: 0 };
    for (let round = 0; round < 200; round++) {
      // Every other round on a volume no one has claimed yet: the race for a key that does not exist is the other path.
      const id = round % 2 === 0 ? 'race' : `race-${round}`;
      const volume = { id, capabilities: caps('single-node-writer') };
      const results = await Promise.allSettled([
        onA.claim(volume, request(id, `a-${round}`, 'single-node-writer'), 'n1'),
        onB.claim(volume, request(id, `b-${round}`, 'single-node-writer'), 'n2'),
      ]);
      const won = results.filter((r) => r.status === 'fulfilled');
      expect(won).toHaveLength(1);
      const lost = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
      expect(lost.reason).toBeInstanceOf(ClaimError);
      // Refused for the winner's claim, not for etcd being away.
      expect((lost.reason as ClaimError).code).not.toBe('ECLAIM_ETCD_UNAVAILABLE');
      expect((lost.reason as Error).message).toMatch(/is claimed on node n[12] by alloc [ab]-\d+/);
      const claims = await onA.claims(id);
      expect(claims).toHaveLength(1);
      const winner = claims[0]!;
      wins[winner.nodeId as 'n1' | 'n2']++;
      await (winner.nodeId === 'n1' ? onA : onB).release(id, winner.allocId);
      expect(await onB.claims(id)).toEqual([]);
    }
    // Both nodes won some rounds: the race was real, not one node always first.
    expect(wins.n1 + wins.n2).toBe(200);
    expect(wins.n1).toBeGreaterThan(0);
    expect(wins.n2).toBeGreaterThan(0);
  });

  it('a volume claimed on one node is refused on another, with a message that names both', async () => {
    const volume = { id: 'web-data', capabilities: caps('single-node-writer') };
    await onA.claim(volume, request('web-data', 'alloc-1', 'single-node-writer'), 'n1');
    // Even a reader on another node: single-node means one node.
    const refused = await onB.claim(volume, request('web-data', 'alloc-2', 'single-node-writer', true), 'n2').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ClaimError);
    expect((refused as Error).message).toBe(
      'volume "web-data" (single-node-writer) is claimed on node n1 by alloc alloc-1; a single-node volume is used on one node at a time: alloc alloc-2 on node n2 can claim it once they release it',
    );
    // A reader on the same node may join.
    await onA.claim(volume, request('web-data', 'alloc-3', 'single-node-writer', true), 'n1');
    await onA.release('web-data', 'alloc-1');
    await onA.release('web-data', 'alloc-3');
    await onB.claim(volume, request('web-data', 'alloc-2', 'single-node-writer', true), 'n2');
    expect((await onA.claims('web-data')).map((c) => [c.allocId, c.nodeId, c.mode])).toEqual([['alloc-2', 'n2', 'read']]);
  });

  it('multi-node modes across nodes: readers anywhere; one writer anywhere; many writers anywhere', async () => {
    const ro = { id: 'ro', capabilities: caps('multi-node-reader-only') };
    await onA.claim(ro, request('ro', 'r1', 'multi-node-reader-only', true), 'n1');
    await onB.claim(ro, request('ro', 'r2', 'multi-node-reader-only', true), 'n2');
    await expect(onB.claim(ro, request('ro', 'w1', 'multi-node-reader-only'), 'n2')).rejects.toThrow(/allows read-only claims only/);

    const sw = { id: 'sw', capabilities: caps('multi-node-single-writer') };
    await onA.claim(sw, request('sw', 'w1', 'multi-node-single-writer'), 'n1');
    await onB.claim(sw, request('sw', 'r1', 'multi-node-single-writer', true), 'n2');
    await expect(onB.claim(sw, request('sw', 'w2', 'multi-node-single-writer'), 'n2')).rejects.toThrow(
      /allows one writer at a time and alloc w1 holds the write claim/,
    );

    const mw = { id: 'mw', capabilities: caps('multi-node-multi-writer') };
    await Promise.all([
      onA.claim(mw, request('mw', 'x1', 'multi-node-multi-writer'), 'n1'),
      onB.claim(mw, request('mw', 'x2', 'multi-node-multi-writer'), 'n2'),
      onA.claim(mw, request('mw', 'x3', 'multi-node-multi-writer'), 'n3'),
    ]);
    expect((await onB.claims('mw')).map((c) => c.allocId).sort()).toEqual(['x1', 'x2', 'x3']);
  });

  it("a node gone for good has its claims released, and no one else's; a node alive again keeps its own", async () => {
    const alive = connectEtcd({ endpoints: etcd.endpoints, prefix: 'test-claims/', dialTimeoutMs: 5_000 });
    try {
      const mw0 = { id: 'kept', capabilities: caps('multi-node-multi-writer') };
      await onA.claim(mw0, request('kept', 'k1', 'multi-node-multi-writer'), 'n7');
      await alive.kv.put('alive/n7').value('{}');
      expect(await onB.releaseNode('n7')).toEqual([]);
      expect((await onB.claims('kept')).map((c) => c.allocId)).toEqual(['k1']);
    } finally {
      alive.close();
    }
    const mw = { id: 'gone', capabilities: caps('multi-node-multi-writer') };
    await onA.claim(mw, request('gone', 'g1', 'multi-node-multi-writer'), 'n1');
    await onB.claim(mw, request('gone', 'g2', 'multi-node-multi-writer'), 'n2');
    expect(await onB.releaseNode('n1')).toContain('gone');
    expect((await onA.claims('gone')).map((c) => c.allocId)).toEqual(['g2']);
  });

  it('kill -9 of an etcd member, the leader included: claims intact, and claiming goes on', async () => {
    const volume = { id: 'survivor', capabilities: caps('single-node-writer') };
    await onA.claim(volume, request('survivor', 'keep', 'single-node-writer'), 'n1');
    const leader = await etcd.leader();
    await etcd.kill(leader, 'SIGKILL');
    // Both clients still reach the two members left (one of them now leads).
    const seen = await pollClaims(() => onB.claims('survivor'));
    expect(seen.map((c) => c.allocId)).toEqual(['keep']);
    // While the cluster settles a claim may be told to wait (etcd did not answer); once it answers, the holder refuses it.
    const refused = await pollUntilRefused(() => onB.claim(volume, request('survivor', 'other', 'single-node-writer'), 'n2'));
    expect(refused.message).toMatch(/is claimed on node n1 by alloc keep/);
    await pollClaims(() => onA.release('survivor', 'keep'));
    await pollClaims(() => onB.claim(volume, request('survivor', 'other', 'single-node-writer'), 'n2'));
    await etcd.restart(leader);
    expect((await onA.claims('survivor')).map((c) => c.allocId)).toEqual(['other']);
  });
});

/** Reads until the cluster answers again after losing a member (the client moves to another). */
async function pollClaims<T>(read: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      return await read();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/** Claims until the answer is a refusal by the access mode (not etcd being away); returns that refusal. */
async function pollUntilRefused(claim: () => Promise<unknown>): Promise<ClaimError> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const err = await claim().then(
      () => new Error('the claim was granted'),
      (e: unknown) => e as Error,
    );
    if (err instanceof ClaimError && err.code !== 'ECLAIM_ETCD_UNAVAILABLE') return err;
    if (!(err instanceof ClaimError) || Date.now() > deadline) throw err;
    await new Promise((r) => setTimeout(r, 200));
  }
}
