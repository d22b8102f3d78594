// Cluster mode end to end: a real 3-member etcd cluster and 3 agents on this
// machine (separate data dirs and node names). The hostpath plugin is one
// system job, run once against one agent, and runs on every node; its
// volumes live in one state dir the three share (network storage, as far
// as the plugin can tell: one topology zone). Shown here:
//   - every agent lists the three nodes ready; plugin status says 3/3;
//   - a volume is created once and every node knows it; a service job run
//     against any agent is placed on one node, and a second writer of its
//     single-node-writer volume is pending, every node saying why not;
//   - kill -9 of the etcd leader kills no task and loses no claim;
//   - every etcd member down for 30 s: tasks and mounts untouched, a new job
//     waits (pending) and is placed once etcd is back;
//   - kill -9 of the agent running a service alloc, past disconnect_grace:
//     the alloc runs on another node with its volume; the old node, when it
//     returns, stops its copy, and the claim stays with the new one.
import { EtcdVolumeClaims, connectEtcd } from '@csiplug/cluster';
import { EtcdTestCluster } from '@csiplug/cluster/testing';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ApiError } from '@csiplug/api';
import { hostpathPluginJobHcl } from '../src/commands/specs';
import { jobToNomadJson, parseJobspec, parseVolumeSpec, volumeSpecToDocument } from '@csiplug/jobspec';
import { AgentHarness, isAlive, mountsUnder, pollUntil, runningAlloc, sleeperHcl, volumeSpec, workloadJob } from './support/agent-process';

jest.setTimeout(480_000);

const NAMES = ['n1', 'n2', 'n3'] as const;

/** The hostpath plugin as a system job, its volumes in `stateDir` (shared by every node) and one topology zone. */
function systemPluginJob(stateDir: string): string {
  const hcl = hostpathPluginJobHcl({ restartDelay: '100ms', extraArgs: ['--topology', 'example.com/zone=z1'] })
    .replace('"${CSIPLUG_PLUGIN_DATA_DIR}/state"', JSON.stringify(stateDir))
    .replace('job "hostpath-plugin" {', 'job "hostpath-plugin" {\n  type = "system"');
  if (!hcl.includes('type = "system"') || !hcl.includes(stateDir))
    throw new Error('the plugin job template changed: this test must follow it');
  return hcl;
}

async function rejection(p: Promise<unknown>): Promise<ApiError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  if (!(e instanceof ApiError)) throw new Error(`expected an API error, got ${String(e)}`);
  return e;
}

const running = runningAlloc;

describe('three agents on one etcd cluster', () => {
  let etcd: EtcdTestCluster;
  const agents: AgentHarness[] = [];
  let shared: string;
  let conn: ReturnType<typeof connectEtcd>;
  let claims: EtcdVolumeClaims;
  const byName = (name: string) => agents[NAMES.indexOf(name as (typeof NAMES)[number])]!;

  const config = (name: string, endpoints: string, nodeClass = 'storage') => `node_id = "${name}"
claim_gc_interval = "1s"
cluster {
  etcd {
    endpoints = [${endpoints}]
    prefix    = "e2e"
  }
  node_class       = "${nodeClass}"
  heartbeat_ttl    = "3s"
  disconnect_grace = "6s"
}`;

  beforeAll(async () => {
    etcd = await EtcdTestCluster.start(3);
    shared = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-shared-'));
    const endpoints = etcd.endpoints.map((e) => JSON.stringify(e)).join(', ');
    for (const name of NAMES) agents.push(new AgentHarness(config(name, endpoints)));
    await Promise.all(agents.map((a) => a.start()));
    conn = connectEtcd({ endpoints: etcd.endpoints, prefix: 'e2e/', dialTimeoutMs: 2_000 });
    claims = new EtcdVolumeClaims(conn);
    // Once, against one agent: every node runs it.
    await pollUntil(
      'the plugin job accepted',
      async () => agents[0]!.api.runJob(jobToNomadJson(await parseJobspec(systemPluginJob(shared), 'plugin.hcl'))).catch(() => undefined),
      30_000,
    );
    await Promise.all(
      agents.map((a) =>
        pollUntil(
          'hostpath healthy on every node',
          async () => ((await a.api.getPlugin('hostpath').catch(() => undefined))?.nodesHealthy === 1 ? true : undefined),
          90_000,
        ),
      ),
    );
  });

  afterAll(async () => {
    conn?.close();
    for (const a of agents) {
      const { leftMounts } = await a.cleanup();
      expect(leftMounts).toEqual([]);
    }
    await etcd?.stop();
    if (shared) fs.rmSync(shared, { recursive: true, force: true });
  });

  it('every agent lists the three nodes ready; the system job runs once on each; plugin status says 3/3', async () => {
    for (const [i, a] of agents.entries()) {
      const list = await pollUntil(
        'three nodes ready with their plugin',
        async () => {
          const l = await a.api.listNodes();
          return l.nodes.length === 3 &&
            l.nodes.every((n) => n.status === 'ready' && n.plugins.some((p) => p.id === 'hostpath' && p.healthy))
            ? l
            : undefined;
        },
        30_000,
      );
      expect(list.cluster).toBe(true);
      expect(list.nodes.map((n) => n.name)).toEqual([...NAMES]);
      expect(list.nodes.filter((n) => n.self).map((n) => n.name)).toEqual([NAMES[i]]);
      expect(list.nodes[0]).toMatchObject({ nodeClass: 'storage', drivers: expect.arrayContaining(['raw_exec']) });
      // The system job: one slot per node, and this node runs one alloc of it.
      const job = await pollUntil(
        "the plugin job's three placements seen",
        async () => {
          const j = await a.api.getJob('hostpath-plugin');
          return j.cluster?.placements.length === 3 ? j : undefined;
        },
        30_000,
      );
      expect(job.cluster!.type).toBe('system');
      expect(job.cluster!.placements.map((p) => [p.slot, p.node])).toEqual(NAMES.map((n) => [`plugin/@${n}`, n]));
      expect(job.allocs.filter((x) => x.desiredStatus === 'run')).toHaveLength(1);
    }
    for (const a of agents) {
      const plugin = await pollUntil(
        'hostpath 3/3 across the cluster',
        async () => {
          const p = await a.api.getPlugin('hostpath');
          const c = p.cluster;
          return c && c.nodesHealthy === 3 && c.nodesExpected === 3 && c.controllersHealthy === 3 && c.controllersExpected === 3
            ? p
            : undefined;
        },
        30_000,
      );
      expect(plugin.cluster!.instances).toHaveLength(6);
      expect([...new Set(plugin.cluster!.instances.map((i) => i.node))]).toEqual([...NAMES]);
      expect(plugin.nodesHealthy).toBe(1);
    }
  });

  let writer: { node: string; allocId: string; pid: number };

  it('a volume made once is known on every node; a service job run against any agent is placed; a second writer is pending with every node saying why; kill -9 of the etcd leader kills no task and loses no claim', async () => {
    const spec = volumeSpecToDocument(await parseVolumeSpec(volumeSpec('shared'), 'shared.hcl'));
    await agents[2]!.api.createVolume(spec);
    for (const a of agents)
      await pollUntil('the volume known on every node', async () => a.api.getVolume('shared').catch(() => undefined), 30_000);
    // Another node has it too now: creating it there again is Nomad's "exists already" (only a larger capacity would change it).
    const again = await rejection(agents[0]!.api.createVolume(spec));
    expect(again.status).toBe(409);
    expect(again.message).toContain('volume "shared" exists with 10485760 bytes already');
    // Its plugin volume registered under another id, on another node: a 409 naming it; nothing is kept.
    const { externalId } = await agents[1]!.api.getVolume('shared');
    const twice = await rejection(
      agents[1]!.api.registerVolume(
        volumeSpecToDocument(await parseVolumeSpec(`${volumeSpec('shared-again')}\nexternal_id = "${externalId}"\n`, 'again.hcl')),
      ),
    );
    expect(twice.status).toBe(409);
    expect(twice.message).toBe(
      `volume "shared-again": plugin "hostpath" volume "${externalId}" is volume "shared" already; use volume "shared", or deregister it first`,
    );
    expect(
      await agents[1]!.api.getVolume('shared-again').then(
        () => 200,
        (e: { status: number }) => e.status,
      ),
    ).toBe(404);

    const run = await agents[1]!.api.runJob(jobToNomadJson(await parseJobspec(workloadJob('writer-1', 'shared'), 'w1.hcl')));
    expect(run.cluster!.placements).toHaveLength(1);
    const node = run.cluster!.placements[0]!.node;
    const holder = byName(node);
    const alloc = await pollUntil(
      'writer-1 running where it was placed',
      async () => running(await holder.api.getJob('writer-1').catch(() => undefined)),
      60_000,
    );
    writer = { node, allocId: alloc.id, pid: holder.taskPid(alloc.id, 'writer') };
    expect((await claims.claims('shared')).map((c) => [c.allocId, c.nodeId])).toEqual([[alloc.id, node]]);

    await agents[0]!.api.runJob(jobToNomadJson(await parseJobspec(workloadJob('writer-2', 'shared'), 'w2.hcl')));
    const pending = await pollUntil(
      'writer-2 pending, with a reason from every node',
      async () => {
        const j = await agents[0]!.api.getJob('writer-2');
        const p = j.cluster?.pending[0];
        return p && Object.keys(p.reasons).length === 3 ? p : undefined;
      },
      30_000,
    );
    expect(pending.reasons[node]).toBe('volume "shared" (single-node-writer) has its one writer already');
    for (const other of NAMES.filter((n) => n !== node))
      expect(pending.reasons[other]).toBe(`volume "shared" (single-node-writer) is in use on node ${node}`);
    expect((await agents[0]!.api.getJob('writer-2')).cluster!.placements).toEqual([]);

    const leader = await etcd.leader();
    await etcd.kill(leader, 'SIGKILL');
    // Past the node leases' TTL and an election: nothing here was stopped for it.
    await new Promise((r) => setTimeout(r, 4_000));
    expect(isAlive(writer.pid)).toBe(true);
    const after = await pollUntil(
      'the claim read after the leader died',
      async () => claims.claims('shared').catch(() => undefined),
      30_000,
    );
    expect(after.map((c) => [c.allocId, c.nodeId])).toEqual([[alloc.id, node]]);
    expect(running(await holder.api.getJob('writer-1'))?.id).toBe(alloc.id);
    await etcd.restart(leader);
    await agents[0]!.api.stopJob('writer-2');
  });

  it("the claim sweep releases in etcd the claims of this node (its identity) that no alloc here holds, and no other node's or identity's", async () => {
    const volume = {
      id: 'ghostly',
      capabilities: [{ accessMode: 'multi-node-multi-writer' as const, attachmentMode: 'file-system' as const }],
    };
    const req = (allocId: string) => ({
      volumeId: 'ghostly',
      allocId,
      accessMode: 'multi-node-multi-writer',
      attachmentMode: 'file-system',
      readOnly: false,
    });
    // n3's identity, as node status lists it: its claims carry it.
    const n3 = (await agents[2]!.api.listNodes()).nodes.find((n) => n.name === 'n3')!;
    expect(n3.identity).toMatch(/^[0-9a-f-]{36}$/);
    // A claim left in etcd for n3 by an alloc n3 does not have (a release that reached only its catalog), one under n3's name by
    // another machine (another identity), one from before identities (unknown), and one of a node no agent runs.
    await new EtcdVolumeClaims(conn, Date.now, n3.identity).claim(volume, req('ghost-on-n3'), 'n3');
    await new EtcdVolumeClaims(conn, Date.now, 'another-machine').claim(volume, req('other-machine-on-n3'), 'n3');
    await claims.claim(volume, req('unknown-on-n3'), 'n3');
    await claims.claim(volume, req('ghost-on-n9'), 'n9');
    await pollUntil(
      "n3's sweep released its ghost",
      async () => ((await claims.claims('ghostly')).some((c) => c.allocId === 'ghost-on-n3') ? undefined : true),
      30_000,
    );
    expect((await claims.claims('ghostly')).map((c) => c.allocId)).toEqual(['other-machine-on-n3', 'unknown-on-n3', 'ghost-on-n9']);
    for (const id of ['other-machine-on-n3', 'unknown-on-n3', 'ghost-on-n9']) await claims.release('ghostly', id);
  });

  it('a second machine given a node name already in use is refused: it changes nothing in the cluster, and n1 keeps its record', async () => {
    const endpoints = etcd.endpoints.map((e) => JSON.stringify(e)).join(', ');
    const impostor = new AgentHarness(config('n1', endpoints, 'impostor'));
    try {
      await impostor.start();
      await pollUntil(
        'the refusal in its log',
        async () => (/node name \\"n1\\" is in use by another live agent/.test(impostor.log) ? true : undefined),
        30_000,
      );
      const refused = await rejection(impostor.api.runJob(jobToNomadJson(await parseJobspec(sleeperHcl('impostor-work'), 'iw.hcl'))));
      expect(refused.status).toBe(409);
      expect(refused.message).toContain('node name "n1" is in use by another live agent');
      expect((await agents[1]!.api.listJobs()).map((j) => j.id)).not.toContain('impostor-work');
      // It runs none of n1's placements either: the system job is not run there.
      expect((await impostor.api.listJobs()).flatMap((j) => j.allocs)).toEqual([]);
      const n1 = (await agents[1]!.api.listNodes()).nodes.find((n) => n.name === 'n1')!;
      expect(n1).toMatchObject({ status: 'ready', nodeClass: 'storage' });
    } finally {
      await impostor.cleanup();
    }
  });

  it('every etcd member down for 30 s: tasks and mounts untouched, a new job waits pending; after, it is placed and runs', async () => {
    const holder = byName(writer.node);
    for (let i = 0; i < etcd.size; i++) await etcd.kill(i, 'SIGKILL');
    const down = await rejection(holder.api.listNodes());
    expect(down.status).toBe(503);
    expect(down.message).toMatch(/the cluster's etcd did not answer .*tasks and mounts are untouched/);
    // A job run meanwhile, against another agent: it waits there, pending, saying why.
    const other = agents.find((a) => a !== holder)!;
    const queued = await other.api.runJob(jobToNomadJson(await parseJobspec(sleeperHcl('late'), 'late.hcl')));
    expect(queued.cluster!.placements).toEqual([]);
    expect(queued.cluster!.pending[0]!.reasons.etcd).toMatch(/^waiting on this agent for the cluster's etcd to answer/);
    expect((await other.api.getJob('late')).status).toBe('pending');
    await new Promise((r) => setTimeout(r, 30_000));
    expect(isAlive(writer.pid)).toBe(true);
    expect(running(await holder.api.getJob('writer-1'))?.id).toBe(writer.allocId);
    expect(mountsUnder(holder.dataDir).some((m) => m.includes(writer.allocId))).toBe(true);
    expect((await holder.api.health()).ok).toBe(true);
    await Promise.all(Array.from({ length: etcd.size }, (_, i) => etcd.restart(i)));
    await pollUntil(
      'three nodes ready again',
      async () => {
        const l = await holder.api.listNodes().catch(() => undefined);
        return l && l.nodes.length === 3 && l.nodes.every((n) => n.status === 'ready') ? true : undefined;
      },
      60_000,
    );
    const placed = await pollUntil(
      'the waiting job placed and running',
      async () => {
        for (const a of agents) {
          const alloc = running(await a.api.getJob('late').catch(() => undefined));
          if (alloc) return alloc;
        }
        return undefined;
      },
      60_000,
    );
    expect(placed.name).toContain('late');
    // Nothing moved for the outage: the writer is where it was, its claim too.
    expect(isAlive(writer.pid)).toBe(true);
    expect((await claims.claims('shared')).map((c) => [c.allocId, c.nodeId])).toEqual([[writer.allocId, writer.node]]);
    await other.api.stopJob('late');
  });

  it('kill -9 of the agent running a service alloc, restarted before its disconnect_grace ran out: the same task, the same mount, the same claim; nothing moved', async () => {
    const holder = byName(writer.node);
    await holder.kill('SIGKILL');
    await holder.start();
    // Joined and settled again (a whole pass since the join): its node ready, the share taken as running, nothing replaced.
    await pollUntil(
      'the node ready again',
      async () =>
        (await holder.api.listNodes().catch(() => undefined))?.nodes.find((n) => n.name === writer.node)?.status === 'ready'
          ? true
          : undefined,
      30_000,
    );
    await new Promise((r) => setTimeout(r, 3_000));
    expect(isAlive(writer.pid)).toBe(true);
    expect(holder.taskPid(writer.allocId, 'writer')).toBe(writer.pid);
    // Its view of the cluster comes with its first pass after the restart.
    const job = await pollUntil(
      'the restarted agent passing again',
      async () => {
        const j = await holder.api.getJob('writer-1');
        return j.cluster ? j : undefined;
      },
      30_000,
    );
    expect(job.allocs.filter((a) => a.desiredStatus === 'run').map((a) => a.id)).toEqual([writer.allocId]);
    expect(job.cluster!.placements.map((p) => p.node)).toEqual([writer.node]);
    expect(mountsUnder(holder.dataDir).some((m) => m.includes(writer.allocId))).toBe(true);
    expect((await claims.claims('shared')).map((c) => [c.allocId, c.nodeId])).toEqual([[writer.allocId, writer.node]]);
  });

  it('kill -9 of the agent running a service alloc, past disconnect_grace: the alloc runs on another node with its volume; the old node, back, stops its copy and the claim stays moved', async () => {
    const old = byName(writer.node);
    await old.kill('SIGKILL');
    // Its task runs on (the agent is gone, not the node's processes); the cluster sees the node go down, then past the grace moves the slot.
    const moved = await pollUntil(
      'writer-1 running on another node',
      async () => {
        for (const a of agents) {
          if (a === old) continue;
          const alloc = running(await a.api.getJob('writer-1').catch(() => undefined));
          if (alloc) return { agent: a, alloc };
        }
        return undefined;
      },
      90_000,
    );
    const newNode = NAMES[agents.indexOf(moved.agent)]!;
    const job = await moved.agent.api.getJob('writer-1');
    expect(job.cluster!.placements).toEqual([expect.objectContaining({ node: newNode, movedFrom: writer.node })]);
    expect((await claims.claims('shared')).map((c) => [c.allocId, c.nodeId])).toEqual([[moved.alloc.id, newNode]]);
    // The volume is mounted for it there.
    expect(mountsUnder(moved.agent.dataDir).some((m) => m.includes(moved.alloc.id))).toBe(true);

    // The old node comes back: it stops its copy, and the claim never goes back to it.
    const seen: string[] = [];
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const c = await claims.claims('shared').catch(() => undefined);
        if (c) seen.push(...c.map((x) => `${x.allocId}@${x.nodeId}`));
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    try {
      await old.start();
      await pollUntil('the old copy stopped', async () => (!isAlive(writer.pid) ? true : undefined), 60_000);
      await pollUntil(
        'the old copy unmounted',
        async () => (mountsUnder(old.dataDir).some((m) => m.includes(writer.allocId)) ? undefined : true),
        60_000,
      );
      const oldJob = await old.api.getJob('writer-1');
      expect(oldJob.allocs.find((a) => a.id === writer.allocId)?.desiredStatus).toBe('stop');
      expect(running(oldJob)).toBeUndefined();
    } finally {
      watching = false;
      await watcher;
    }
    expect(seen.length).toBeGreaterThan(0);
    expect([...new Set(seen)]).toEqual([`${moved.alloc.id}@${newNode}`]);
    expect(running(await moved.agent.api.getJob('writer-1'))?.id).toBe(moved.alloc.id);
    await agents[0]!.api.stopJob('writer-1');
    await pollUntil(
      'the claim released once the job stopped',
      async () => ((await claims.claims('shared')).length === 0 ? true : undefined),
      60_000,
    );
  });
});
