// The cluster claimer over a real etcd (one member is enough here) and a
// stand-in for the local catalog: the claim is taken in etcd first, and given
// back when the local claim fails; a release goes here first, then in etcd;
// a node's refusal comes before anything is asked of the local catalog.
import {
  ClaimError,
  type ClaimableVolume,
  type VolumeCapability,
  type VolumeClaimRequest,
  type VolumeClaimResult,
  type VolumeClaimView,
} from '@csiplug/volumes';
import { EtcdVolumeClaims } from '../src/claims';
import { ClusterVolumeClaimer, type LocalCatalog } from '../src/cluster-claimer';
import { connectEtcd, type EtcdConnection } from '../src/connect';
import { EtcdTestCluster } from '../src/testing';

jest.setTimeout(60_000);

class LocalStandIn implements LocalCatalog {
  calls: string[] = [];
  failNextClaim: Error | undefined;
  readonly volumes = new Map<string, { capabilities: VolumeCapability[]; claims: VolumeClaimView[] }>([
    ['v', { capabilities: [{ accessMode: 'single-node-writer', attachmentMode: 'file-system' }], claims: [] }],
  ]);
  getVolume(id: string) {
    return this.volumes.get(id);
  }
  async lookup(id: string): Promise<ClaimableVolume> {
    this.calls.push(`lookup ${id}`);
    if (!this.volumes.has(id)) throw new ClaimError(`volume "${id}" is not registered`, false);
    return { id, externalId: id, pluginId: 'p' };
  }
  async claim(r: VolumeClaimRequest): Promise<VolumeClaimResult> {
    this.calls.push(`claim ${r.volumeId} ${r.allocId}`);
    const fail = this.failNextClaim;
    this.failNextClaim = undefined;
    if (fail) throw fail;
    return { volume: await this.lookup(r.volumeId) };
  }
  async release(volumeId: string, allocId: string): Promise<void> {
    this.calls.push(`release ${volumeId} ${allocId}`);
  }
}

const request = (allocId: string): VolumeClaimRequest => ({
  volumeId: 'v',
  allocId,
  accessMode: 'single-node-writer',
  attachmentMode: 'file-system',
  readOnly: false,
});

describe('ClusterVolumeClaimer', () => {
  let etcd: EtcdTestCluster;
  let conn: EtcdConnection;
  let claims: EtcdVolumeClaims;
  beforeAll(async () => {
    etcd = await EtcdTestCluster.start(1);
    conn = connectEtcd({ endpoints: etcd.endpoints, prefix: 'claimer/', dialTimeoutMs: 2_000 });
    claims = new EtcdVolumeClaims(conn);
  });
  afterAll(async () => {
    conn?.close();
    await etcd?.stop();
  });

  it('claims in etcd, then here; releases here, then in etcd', async () => {
    const local = new LocalStandIn();
    const n1 = new ClusterVolumeClaimer(() => local, claims, 'n1');
    await n1.claim(request('a1'));
    expect(local.calls).toEqual(['claim v a1', 'lookup v']);
    expect((await claims.claims('v')).map((c) => [c.allocId, c.nodeId])).toEqual([['a1', 'n1']]);
    await n1.release('v', 'a1');
    expect(local.calls.at(-1)).toBe('release v a1');
    expect(await claims.claims('v')).toEqual([]);
  });

  it('another node is refused by etcd before its local catalog is asked anything', async () => {
    const here = new LocalStandIn();
    const there = new LocalStandIn();
    await new ClusterVolumeClaimer(() => here, claims, 'n1').claim(request('a1'));
    const refused = await new ClusterVolumeClaimer(() => there, claims, 'n2').claim(request('a2')).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ClaimError);
    expect((refused as ClaimError).retryable).toBe(true);
    expect(there.calls).toEqual([]);
    await new ClusterVolumeClaimer(() => here, claims, 'n1').release('v', 'a1');
  });

  it('a local claim that fails keeps the cluster-wide claim for the release that undoes it (a half-done publish is unpublished first)', async () => {
    const local = new LocalStandIn();
    local.failNextClaim = new ClaimError('ControllerPublishVolume failed', true);
    const claimer = new ClusterVolumeClaimer(() => local, claims, 'n1');
    await expect(claimer.claim(request('a3'))).rejects.toThrow(/ControllerPublishVolume failed/);
    // Held in etcd while this node may still have the volume attached: another node is refused.
    expect((await claims.claims('v')).map((c) => c.allocId)).toEqual(['a3']);
    await expect(new ClusterVolumeClaimer(() => new LocalStandIn(), claims, 'n2').claim(request('a9'))).rejects.toThrow(
      /claimed on node n1/,
    );
    // The reconciler's undo: release, here then in etcd.
    await claimer.release('v', 'a3');
    expect(local.calls.at(-1)).toBe('release v a3');
    expect(await claims.claims('v')).toEqual([]);
  });

  it('the etcd claim is there before the local catalog is asked', async () => {
    const local = new LocalStandIn();
    let seen: string[] = [];
    local.claim = async (r: VolumeClaimRequest) => {
      seen = (await claims.claims(r.volumeId)).map((c) => c.allocId);
      return { volume: { id: r.volumeId, externalId: r.volumeId, pluginId: 'p' } };
    };
    const claimer = new ClusterVolumeClaimer(() => local, claims, 'n1');
    await claimer.claim(request('a5'));
    expect(seen).toEqual(['a5']);
    await claimer.release('v', 'a5');
  });

  it("a volume this node does not know is the local catalog's refusal, not retryable", async () => {
    const local = new LocalStandIn();
    const err = await new ClusterVolumeClaimer(() => local, claims, 'n1')
      .claim({ ...request('a4'), volumeId: 'nope' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ClaimError);
    expect((err as ClaimError).retryable).toBe(false);
    expect((err as Error).message).toBe('volume "nope" is not registered');
    expect(await claims.claims('nope')).toEqual([]);
  });

  it('a stale mount may come back up only while the node may claim (held, and settled since it joined)', () => {
    let may = false;
    const claimer = new ClusterVolumeClaimer(
      () => new LocalStandIn(),
      claims,
      'n1',
      () => may,
    );
    expect(claimer.remountRefusal('v')).toMatch(
      /^volume "v": this agent does not hold node "n1" in the cluster yet .*a stale mount is brought back up once it does$/,
    );
    may = true;
    expect(claimer.remountRefusal('v')).toBeUndefined();
  });

  it("reassert claims in etcd what the catalog holds, gives back one the catalog let go of meanwhile; ownClaims lists this identity's alone", async () => {
    const local = new LocalStandIn();
    const held = { allocId: 'r1', mode: 'write' as const, accessMode: 'single-node-writer', attachmentMode: 'file-system', since: 1 };
    local.volumes.get('v')!.claims.push(held);
    const mine = new EtcdVolumeClaims(conn, Date.now, 'id-n1');
    const claimer = new ClusterVolumeClaimer(
      () => local,
      mine,
      'n1',
      () => true,
      undefined,
      (c) => c.nodeId === 'n1' && c.nodeIdentity === 'id-n1',
    );
    await claimer.reassert('v', 'r1');
    expect((await claims.claims('v')).map((c) => [c.allocId, c.nodeId, c.nodeIdentity])).toEqual([['r1', 'n1', 'id-n1']]);
    // Nothing asked of the local catalog: the claim is asserted in etcd only.
    expect(local.calls).toEqual([]);
    // Another machine under the same name: its claim is not this agent's to sweep.
    await new EtcdVolumeClaims(conn, Date.now, 'id-other').claim(
      { id: 'w', capabilities: [{ accessMode: 'multi-node-multi-writer', attachmentMode: 'file-system' }] },
      { ...request('x1'), volumeId: 'w', accessMode: 'multi-node-multi-writer' },
      'n1',
    );
    expect(await claimer.ownClaims()).toEqual([{ volumeId: 'v', allocId: 'r1' }]);
    // Released here while it was asserted there: given back in etcd too.
    const claimEtcd = mine.claim.bind(mine);
    mine.claim = async (...args) => {
      const after = await claimEtcd(...args);
      local.volumes.get('v')!.claims.length = 0;
      return after;
    };
    await claimer.reassert('v', 'r1');
    expect(await claims.claims('v')).toEqual([]);
    // A claim the catalog does not hold is never written to etcd.
    await claimer.reassert('v', 'r1');
    expect(await claims.claims('v')).toEqual([]);
    await claims.release('w', 'x1');
  });
});
