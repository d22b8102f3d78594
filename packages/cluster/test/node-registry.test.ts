// Nodes under leases in a real 3-member etcd cluster: each agent's node is
// ready while it renews its lease, down once it stops for the TTL (still
// listed), ready again when an agent takes it over — with the time it was
// first registered kept — and back after every etcd member was down.
import { MemoryLogger, RealClock } from '@csiplug/core';
import { connectEtcd, type EtcdConnection } from '../src/connect';
import { EtcdVolumeClaims } from '../src/claims';
import { NodeNameHeldError } from '../src/node-identity';
import { EtcdNodeRegistry, type NodeInfo } from '../src/node-registry';
import { EtcdTestCluster } from '../src/testing';

jest.setTimeout(120_000);

/** The node lease's TTL in these tests: short, with room for a loaded machine. */
const TTL_MS = 3_000;

const info = (name: string): NodeInfo => ({
  name,
  nodeClass: 'storage',
  meta: { rack: name === 'n1' ? 'r1' : 'r2' },
  drivers: ['raw_exec'],
  plugins: [{ id: 'hostpath', type: 'csi-node', healthy: true, topology: { zone: name }, maxVolumes: 10 }],
  version: '0.1.0',
});

async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const v = await Promise.race([check(), new Promise<undefined>((r) => setTimeout(() => r(undefined), 2_000))]);
      if (v !== undefined) return v;
    } catch {
      // etcd away for a moment: ask again
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('nodes in etcd', () => {
  let etcd: EtcdTestCluster;
  const conns: EtcdConnection[] = [];
  const registries: EtcdNodeRegistry[] = [];
  const connect = () => {
    const c = connectEtcd({ endpoints: etcd.endpoints, prefix: 'test-nodes/', dialTimeoutMs: 2_000 });
    conns.push(c);
    return c;
  };
  const registry = (c: EtcdConnection, instance = 'instance-a', adoptsUnknown = false) => {
    const r = new EtcdNodeRegistry(c, TTL_MS, new RealClock(), new MemoryLogger(), instance, adoptsUnknown);
    registries.push(r);
    return r;
  };

  beforeAll(async () => {
    etcd = await EtcdTestCluster.start(3);
  });
  afterAll(async () => {
    for (const r of registries) await r.dispose().catch(() => undefined);
    for (const c of conns) c.close();
    await etcd?.stop();
  });

  it('ready while renewed, down after the TTL once not, ready again when an agent takes the node over', async () => {
    const one = registry(connect(), 'agent-on-n1');
    const two = registry(connect(), 'agent-on-n2');
    await one.start(info('n1'));
    await two.start(info('n2'));
    const both = await one.list();
    expect(both.map((n) => [n.name, n.status])).toEqual([
      ['n1', 'ready'],
      ['n2', 'ready'],
    ]);
    expect(both[0]).toMatchObject({
      nodeClass: 'storage',
      meta: { rack: 'r1' },
      drivers: ['raw_exec'],
      plugins: [{ id: 'hostpath', healthy: true, topology: { zone: 'n1' } }],
    });
    // Renewed past more than a TTL: still ready.
    await new Promise((r) => setTimeout(r, TTL_MS + 1_000));
    expect((await two.get('n1'))?.status).toBe('ready');

    // n1's agent goes away without a word (its lease no longer renewed): down after the TTL, still listed.
    const registeredAt = both[0]!.registeredAt;
    await one.dispose();
    await until('n1 down', async () => ((await two.get('n1'))?.status === 'down' ? true : undefined));
    expect((await two.list()).map((n) => [n.name, n.status])).toEqual([
      ['n1', 'down'],
      ['n2', 'ready'],
    ]);

    // The next agent on n1 takes the node over: ready, first registration kept, what it says now written.
    const again = registry(connect(), 'agent-on-n1');
    await again.start({ ...info('n1'), drivers: ['exec', 'raw_exec'] });
    const back = await until('n1 ready again', async () => {
      const n = await two.get('n1');
      return n?.status === 'ready' ? n : undefined;
    });
    expect(back.registeredAt).toBe(registeredAt);
    expect(back.drivers).toEqual(['exec', 'raw_exec']);

    // Leaving on purpose ends the lease at once.
    await again.leave();
    expect((await two.get('n1'))?.status).toBe('down');
  });

  it("a node name is one agent's: another machine is refused and writes nothing; the same agent instance takes its node over", async () => {
    const first = registry(connect(), 'agent-on-n9');
    await first.start(info('n9'));
    const impostor = registry(connect(), 'another-machine');
    await expect(impostor.start({ ...info('n9'), nodeClass: 'impostor', drivers: ['exec'] })).rejects.toThrow(
      /node name "n9" is in use by another live agent \(instance agent-on-n9\)/,
    );
    expect(impostor.holdsNode).toBe(false);
    // Its record is untouched by the refused machine.
    expect(await first.get('n9')).toMatchObject({ status: 'ready', nodeClass: 'storage', drivers: ['raw_exec'] });
    // The same instance (an agent restarted on the same data dir) takes the node over: its lease now holds the name.
    const restarted = registry(connect(), 'agent-on-n9');
    await restarted.start(info('n9'));
    expect(restarted.holdsNode).toBe(true);
    await first.dispose();
    await new Promise((r) => setTimeout(r, TTL_MS + 1_000));
    expect((await restarted.get('n9'))?.status).toBe('ready');
    await restarted.leave();
  });

  it("a down node whose record is another identity's, with a claim under its name: another machine is refused (naming that identity and node purge), the claim untouched; the node itself rejoins; once purged, the name is free", async () => {
    const conn = connect();
    const owner = registry(conn, 'identity-of-n7');
    await owner.start(info('n7'));
    expect(await owner.get('n7')).toMatchObject({ status: 'ready', identity: 'identity-of-n7' });
    const claims = new EtcdVolumeClaims(conn, Date.now, 'identity-of-n7');
    const volume = { id: 'vol-n7', capabilities: [{ accessMode: 'single-node-writer' as const, attachmentMode: 'file-system' as const }] };
    await claims.claim(
      volume,
      { volumeId: 'vol-n7', allocId: 'alloc-on-n7', accessMode: 'single-node-writer', attachmentMode: 'file-system', readOnly: false },
      'n7',
    );
    // The owner's agent dies: its lease runs out, its record and claim stay.
    await owner.dispose();
    await until('n7 down', async () => ((await owner.get('n7'))?.status === 'down' ? true : undefined));

    const clone = registry(connect(), 'identity-of-a-clone');
    const refused = await clone.start({ ...info('n7'), nodeClass: 'clone' }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(NodeNameHeldError);
    expect((refused as Error).message).toContain(
      'node name "n7" belongs to node identity identity-of-n7, not to this agent (node identity identity-of-a-clone',
    );
    expect((refused as Error).message).toContain('csiplug node purge n7');
    expect(clone.holdsNode).toBe(false);
    expect(clone.refusal).toBe(refused);
    expect(await clone.get('n7')).toMatchObject({ status: 'down', identity: 'identity-of-n7', nodeClass: 'storage' });
    expect((await claims.claims('vol-n7')).map((c) => [c.allocId, c.nodeId, c.nodeIdentity])).toEqual([
      ['alloc-on-n7', 'n7', 'identity-of-n7'],
    ]);

    // The node itself (its data dir's identity) rejoins under its name.
    const back = registry(connect(), 'identity-of-n7');
    await back.start(info('n7'));
    expect(await back.get('n7')).toMatchObject({ status: 'ready', identity: 'identity-of-n7' });
    // Purge refuses a live node.
    expect(await back.purgeRecord('n7')).toBe('alive');
    await back.leave();
    // Down and purged (its claims released first, as node purge does): the name is free for the other machine.
    await claims.releaseNode('n7');
    expect(await back.purgeRecord('n7')).toMatchObject({ name: 'n7', identity: 'identity-of-n7' });
    expect(await back.get('n7')).toBeUndefined();
    const clone2 = registry(connect(), 'identity-of-a-clone');
    await clone2.start(info('n7'));
    expect(await clone2.get('n7')).toMatchObject({ status: 'ready', identity: 'identity-of-a-clone' });
    await clone2.leave();
  });

  it('a node down past its TTL and upgraded to identities takes its record and claims from before identities back; a machine new to the cluster is refused them', async () => {
    const c = connect();
    // What an agent before node identities left: a record and a claim that name no identity, and no alive key (down).
    await c.kv.put('nodes/n8').value(JSON.stringify({ ...info('n8'), registeredAt: 1, updatedAt: 1 }));
    const legacyClaims = new EtcdVolumeClaims(c, Date.now);
    const volume = { id: 'vol-n8', capabilities: [{ accessMode: 'single-node-writer' as const, attachmentMode: 'file-system' as const }] };
    await legacyClaims.claim(
      volume,
      { volumeId: 'vol-n8', allocId: 'alloc-on-n8', accessMode: 'single-node-writer', attachmentMode: 'file-system', readOnly: false },
      'n8',
    );

    // A fresh data dir (its id made at this start) adopts nothing.
    const fresh = registry(connect(), 'identity-made-now', false);
    const refused = await fresh.start(info('n8')).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(NodeNameHeldError);
    expect((refused as Error).message).toContain('unknown identity (its record was written before node identities)');
    expect(fresh.adoptedUnknown).toBe(false);

    // The upgraded node (its id was in its data dir before): its own record, stamped; the claim stands, now its own.
    const upgraded = registry(connect(), 'identity-of-n8', true);
    await upgraded.start(info('n8'));
    expect(upgraded.adoptedUnknown).toBe(true);
    expect(await upgraded.get('n8')).toMatchObject({ status: 'ready', identity: 'identity-of-n8' });
    expect((await legacyClaims.claims('vol-n8')).map((x) => [x.allocId, x.nodeId])).toEqual([['alloc-on-n8', 'n8']]);
    await upgraded.leave();
    await legacyClaims.releaseNode('n8');
    await upgraded.purgeRecord('n8');
  });

  it('a claims key no one can read does not keep a new node name (no record: nothing to purge) out of the cluster', async () => {
    const c = connect();
    // Some volume's claims, not a list of claims (written by hand, or by a broken writer): its holders are unknown.
    await c.kv.put('claims/vol-corrupt').value('{"claims": "not a list"}');
    try {
      const fresh = registry(c, 'identity-of-n5');
      // Refused before, naming an identity that does not exist and a `node purge n5` that answers 404 (n5 has no record).
      await fresh.start(info('n5'));
      expect(await fresh.get('n5')).toMatchObject({ status: 'ready', identity: 'identity-of-n5' });
      await fresh.leave();
    } finally {
      await c.kv.delete().key('claims/vol-corrupt');
    }
  });

  it("an agent whose name another machine holds now (its own lease lost, not yet noticed) never writes over that node's record", async () => {
    const c = connect();
    const first = registry(c, 'identity-of-first-n6');
    await first.start(info('n6'));
    // The first agent's alive key gone (its lease ran out in a partition), and another machine joined the name (nothing held under it).
    await c.kv.delete().key('alive/n6');
    const second = registry(connect(), 'identity-of-second-n6');
    await second.start({ ...info('n6'), nodeClass: 'second' });
    expect(await second.get('n6')).toMatchObject({ status: 'ready', identity: 'identity-of-second-n6', nodeClass: 'second' });
    // The first agent's plugins' health changes: what it says of itself is not written over the node it no longer holds
    // (on main its identity and address replaced the second's: that record would let it back in later as its own).
    await first.update({ ...info('n6'), nodeClass: 'first' });
    expect(await second.get('n6')).toMatchObject({ status: 'ready', identity: 'identity-of-second-n6', nodeClass: 'second' });
    // The holder's own updates still go in.
    await second.update({ ...info('n6'), nodeClass: 'second-updated' });
    expect(await second.get('n6')).toMatchObject({ identity: 'identity-of-second-n6', nodeClass: 'second-updated' });
    await second.leave();
  });

  it('a lease revoked under the agent (etcd lost it): the node registers again with a new lease', async () => {
    const c = connect();
    const node = registry(c, 'agent-on-n4');
    await node.start(info('n4'));
    const leaseOf = async () => (await c.kv.get('alive/n4').exec()).kvs[0]?.lease;
    const before = await leaseOf();
    expect(before).toBeTruthy();
    // Revoked from outside, through a member's HTTP gateway: the keep-alive learns the lease is gone.
    const res = await fetch(`${etcd.endpoint(0)}/v3/lease/revoke`, { method: 'POST', body: JSON.stringify({ ID: before }) });
    expect(res.status).toBe(200);
    const after = await until('a new lease on alive/n4', async () => {
      const lease = await leaseOf();
      return lease && lease !== before ? lease : undefined;
    });
    expect(after).not.toBe(before);
    expect((await node.get('n4'))?.status).toBe('ready');
    expect(node.holdsNode).toBe(true);
  });

  it('every etcd member down for a while: the node is ready again once they are back', async () => {
    const c = connect();
    const node = registry(c);
    await node.start(info('n3'));
    for (let i = 0; i < etcd.size; i++) await etcd.kill(i, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 3_000));
    await Promise.all(Array.from({ length: etcd.size }, (_, i) => etcd.restart(i)));
    await until('n3 ready after etcd came back', async () => ((await node.get('n3'))?.status === 'ready' ? true : undefined), 60_000);
    // Not only the old lease's grace after an election: still ready well past a TTL, so the node was registered again.
    await new Promise((r) => setTimeout(r, TTL_MS * 2 + 1_000));
    expect((await node.get('n3'))?.status).toBe('ready');
  });
});
