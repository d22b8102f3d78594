// A node is its identity, not its name (issue 25, item 2): real etcd, real
// agent processes. Agent A (its own data dir) runs a single-node-writer
// workload under node name n1 and is killed -9; it stays down past
// heartbeat_ttl (within disconnect_grace). Agent B — another data dir, the
// same node_name, as a cloned VM would have — tries to join: it is refused,
// with a message naming A's identity and `node purge`, and A's claim in
// etcd is untouched (before identities, B joined once A's lease ran out and
// its claim sweep released A's claim). A comes back and rejoins under its
// own name, its task, mount and claim as they were. Then `node purge`:
// placements alone still hold a down name; purged, it is free for B, and A,
// back, is the one refused.
import { connectEtcd, EtcdVolumeClaims } from '@csiplug/cluster';
import { EtcdTestCluster } from '@csiplug/cluster/testing';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ApiError } from '@csiplug/api';
import { hostpathPluginJobHcl } from '../src/commands/specs';
import { jobToNomadJson, parseJobspec, parseVolumeSpec, volumeSpecToDocument } from '@csiplug/jobspec';
import { AgentHarness, isAlive, mountsUnder, pollUntil, runningAlloc, sleeperHcl, volumeSpec, workloadJob } from './support/agent-process';

jest.setTimeout(300_000);

async function rejection(p: Promise<unknown>): Promise<ApiError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  if (!(e instanceof ApiError)) throw new Error(`expected an API error, got ${String(e)}`);
  return e;
}

describe('two machines under one node name', () => {
  let etcd: EtcdTestCluster;
  let shared: string;
  let a: AgentHarness;
  let b: AgentHarness | undefined;
  let conn: ReturnType<typeof connectEtcd>;
  let claims: EtcdVolumeClaims;

  const config = (endpoints: string) => `node_id = "n1"
claim_gc_interval = "1s"
cluster {
  etcd {
    endpoints = [${endpoints}]
    prefix    = "ident"
  }
  heartbeat_ttl    = "3s"
  disconnect_grace = "10m"
}`;

  beforeAll(async () => {
    etcd = await EtcdTestCluster.start(1);
    shared = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-ident-'));
    conn = connectEtcd({ endpoints: etcd.endpoints, prefix: 'ident/', dialTimeoutMs: 2_000 });
    claims = new EtcdVolumeClaims(conn);
  });

  afterAll(async () => {
    conn?.close();
    if (b) await b.cleanup();
    const left = a ? (await a.cleanup()).leftMounts : [];
    await etcd?.stop();
    if (shared) fs.rmSync(shared, { recursive: true, force: true });
    expect(left).toEqual([]);
  });

  it("refuses the second machine once the first is down past heartbeat_ttl, naming the first's identity and node purge; the claim stays; the first rejoins", async () => {
    const endpoints = etcd.endpoints.map((e) => JSON.stringify(e)).join(', ');
    a = new AgentHarness(config(endpoints));
    await a.start();
    const plugin = hostpathPluginJobHcl({ restartDelay: '100ms' }).replace('"${CSIPLUG_PLUGIN_DATA_DIR}/state"', JSON.stringify(shared));
    await pollUntil(
      'the plugin job accepted',
      async () => a.api.runJob(jobToNomadJson(await parseJobspec(plugin, 'plugin.hcl'))).catch(() => undefined),
      30_000,
    );
    await pollUntil(
      'hostpath healthy',
      async () => ((await a.api.getPlugin('hostpath').catch(() => undefined))?.nodesHealthy === 1 ? true : undefined),
      90_000,
    );
    await a.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeSpec('solo'), 'solo.hcl')));
    await a.api.runJob(jobToNomadJson(await parseJobspec(workloadJob('writer', 'solo'), 'writer.hcl')));
    const alloc = await pollUntil(
      'the writer running on A',
      async () => runningAlloc(await a.api.getJob('writer').catch(() => undefined)),
      60_000,
    );
    const pid = a.taskPid(alloc.id, 'writer');

    // A's identity: the id kept in its data dir (its record and its claim carry it: checked once A is back).
    const identityA = fs.readFileSync(path.join(a.dataDir, 'cluster-instance'), 'utf8').trim();
    const claimOfA = [[alloc.id, 'n1']];
    const claimsNow = async () => (await claims.claims('solo')).map((c) => [c.allocId, c.nodeId]);
    expect(await claimsNow()).toEqual(claimOfA);

    // A dies without a word and stays down past heartbeat_ttl: its lease runs out, its task runs on.
    await a.kill('SIGKILL');
    await pollUntil("A's lease run out", async () => ((await conn.kv.get('alive/n1').exists()) ? undefined : true), 30_000);

    // B: another data dir, the same node name.
    b = new AgentHarness(config(endpoints));
    await b.start();
    const bAgent = b;
    const refusal = new RegExp(`node name \\\\"n1\\\\" belongs to node identity ${identityA}, not to this agent`, 'g');
    // Whichever comes first: the refusal, or (before identities) B holding n1 and its sweep releasing A's claim.
    await pollUntil(
      "B refused, or A's claim gone",
      async () => {
        if (bAgent.log.match(refusal)) return true;
        return (await claimsNow()).length === 0 ? true : undefined;
      },
      60_000,
    );
    expect(await claimsNow()).toEqual(claimOfA);
    expect(b.log).toMatch(refusal);
    expect(b.log).toContain('csiplug node purge n1');
    // Refused again on its next attempts (B retries, each a chance for a sweep): the claim is still A's.
    await pollUntil('B refused three times', async () => ((b!.log.match(refusal) ?? []).length >= 3 ? true : undefined), 60_000);
    expect(await claimsNow()).toEqual(claimOfA);
    // B changes nothing in the cluster, says why, and runs nothing.
    const refused = await rejection(b.api.runJob(jobToNomadJson(await parseJobspec(sleeperHcl('clone-work'), 'cw.hcl'))));
    expect(refused.status).toBe(409);
    expect(refused.message).toContain(`belongs to node identity ${identityA}`);
    expect(refused.message).toContain('csiplug node purge n1');
    expect((await b.api.listJobs()).flatMap((j) => j.allocs)).toEqual([]);
    expect(mountsUnder(b.dataDir)).toEqual([]);
    // node status on B: n1 down, A's identity, not B itself.
    const seenByB = (await b.api.listNodes()).nodes.find((n) => n.name === 'n1');
    expect(seenByB).toMatchObject({ status: 'down', identity: identityA, self: false });
    await b.cleanup();
    b = undefined;

    // A comes back on its data dir: it rejoins under its own name; the same task, mount and claim.
    expect(isAlive(pid)).toBe(true);
    await a.start();
    await pollUntil(
      'n1 ready again, A itself',
      async () =>
        (await a.api.listNodes().catch(() => undefined))?.nodes.find((n) => n.name === 'n1' && n.status === 'ready' && n.self)
          ? true
          : undefined,
      60_000,
    );
    expect((await a.api.listNodes()).nodes.find((n) => n.name === 'n1')).toMatchObject({
      identity: identityA,
      status: 'ready',
      self: true,
    });
    expect(a.taskPid(alloc.id, 'writer')).toBe(pid);
    expect(isAlive(pid)).toBe(true);
    expect(mountsUnder(a.dataDir).some((m) => m.includes(alloc.id))).toBe(true);
    expect(await claimsNow()).toEqual(claimOfA);
    // A's identity in node status and on its claim.
    expect((await claims.claims('solo')).map((c) => c.nodeIdentity)).toEqual([identityA]);
    // node purge refuses a ready node.
    const purge = await rejection(a.api.purgeNode('n1'));
    expect(purge.status).toBe(409);
    expect(purge.message).toContain(`node "n1" (identity ${identityA}) is ready`);
    expect((await rejection(a.api.purgeNode('n9'))).status).toBe(404);
  });

  it('once its workload stopped and it is down, its placements still hold the name; node purge frees it and the other machine joins; the first, back, is refused', async () => {
    const endpoints = etcd.endpoints.map((e) => JSON.stringify(e)).join(', ');
    await a.api.stopJob('writer', { purge: true });
    await pollUntil("the writer's claim released", async () => ((await claims.claims('solo')).length === 0 ? true : undefined), 60_000);
    const identityA = fs.readFileSync(path.join(a.dataDir, 'cluster-instance'), 'utf8').trim();
    await a.kill('SIGKILL');
    await pollUntil("A's lease run out", async () => ((await conn.kv.get('alive/n1').exists()) ? undefined : true), 30_000);

    // No claim is left, but the plugin's system slot is still placed on n1: B is refused all the same.
    b = new AgentHarness(config(endpoints));
    await b.start();
    const bAgent = b;
    await pollUntil('B refused', async () => (bAgent.log.includes(`belongs to node identity ${identityA}`) ? true : undefined), 60_000);
    expect(b.log).toContain('0 claim(s) and 1 placement(s)');
    // The operator says A is gone for good: purged (from B's API, which reads etcd though B is not a member).
    const purged = await b.api.purgeNode('n1');
    expect(purged).toEqual({ name: 'n1', identity: identityA, releasedVolumes: [] });
    const identityB = fs.readFileSync(path.join(b.dataDir, 'cluster-instance'), 'utf8').trim();
    expect(identityB).not.toBe(identityA);
    // B joins under the name on its next attempt.
    await pollUntil(
      'B holds n1',
      async () =>
        (await bAgent.api.listNodes().catch(() => undefined))?.nodes.find(
          (n) => n.name === 'n1' && n.status === 'ready' && n.self && n.identity === identityB,
        )
          ? true
          : undefined,
      60_000,
    );

    // A comes back: n1 is B's now, and A is refused (its lease-holder is alive).
    await a.start();
    await pollUntil('A refused', async () => (/node name \\"n1\\" is in use by another live agent/.test(a.log) ? true : undefined), 60_000);
    expect((await a.api.listNodes()).nodes.find((n) => n.name === 'n1')).toMatchObject({
      status: 'ready',
      identity: identityB,
      self: false,
    });
  });
});
