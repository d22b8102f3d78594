// Cluster mode end to end: a real 3-member etcd cluster and 3 agents on this
// machine (separate data dirs and node names), each running the hostpath
// plugin. Every agent lists the three nodes ready; a volume claimed by a
// workload on one node is refused on another with a message that names the
// holder; kill -9 of the etcd leader kills no task and loses no claim; with
// every etcd member down, tasks and mounts are untouched and `node status`
// says etcd does not answer, and everything is back once etcd is.
import { EtcdVolumeClaims, connectEtcd } from '@csiplug/cluster';
import { EtcdTestCluster } from '@csiplug/cluster/testing';
import { ApiError } from '../src/api';
import { jobToDocument, parseJobspec, parseVolumeSpec, volumeSpecToDocument } from '../src/spec';
import { AgentHarness, PLUGIN_JOB, isAlive, mountsUnder, pollUntil, volumeSpec, workloadJob } from './support/agent-process';

jest.setTimeout(240_000);

describe('three agents on one etcd cluster', () => {
  let etcd: EtcdTestCluster;
  const agents: AgentHarness[] = [];

  beforeAll(async () => {
    etcd = await EtcdTestCluster.start(3);
    const endpoints = etcd.endpoints.map((e) => JSON.stringify(e)).join(', ');
    for (const name of ['n1', 'n2', 'n3']) {
      agents.push(
        new AgentHarness(`node_id = "${name}"
claim_gc_interval = "1s"
cluster {
  etcd {
    endpoints = [${endpoints}]
    prefix    = "e2e"
  }
  node_class    = "storage"
  heartbeat_ttl = "3s"
}`),
      );
    }
    await Promise.all(agents.map((a) => a.start()));
    const plugin = jobToDocument(await parseJobspec(PLUGIN_JOB, 'plugin.hcl'));
    await Promise.all(agents.map((a) => a.api.runJob(plugin).then(() => undefined)));
    await Promise.all(agents.map((a) => pollUntil('hostpath healthy', async () => ((await a.api.getPlugin('hostpath').catch(() => undefined))?.nodesHealthy === 1 ? true : undefined), 60_000)));
  });

  afterAll(async () => {
    for (const a of agents) {
      const { leftMounts } = await a.cleanup();
      expect(leftMounts).toEqual([]);
    }
    await etcd?.stop();
  });

  it('every agent lists the three nodes ready, each with its healthy plugin', async () => {
    for (const [i, a] of agents.entries()) {
      const list = await pollUntil('three nodes ready with their plugin', async () => {
        const l = await a.api.listNodes();
        return l.nodes.length === 3 && l.nodes.every((n) => n.status === 'ready' && n.plugins.some((p) => p.id === 'hostpath' && p.healthy)) ? l : undefined;
      }, 30_000);
      expect(list.cluster).toBe(true);
      expect(list.nodes.map((n) => n.name)).toEqual(['n1', 'n2', 'n3']);
      expect(list.nodes.filter((n) => n.self).map((n) => n.name)).toEqual([`n${i + 1}`]);
      expect(list.nodes[0]).toMatchObject({ nodeClass: 'storage', drivers: expect.arrayContaining(['raw_exec']) });
    }
    // Plugin status across the cluster, from any agent: 3/3 nodes and controllers (a monolith is both), each node named.
    for (const a of agents) {
      const plugin = await pollUntil('hostpath 3/3 across the cluster', async () => {
        const p = await a.api.getPlugin('hostpath');
        const c = p.cluster;
        return c && c.nodesHealthy === 3 && c.nodesExpected === 3 && c.controllersHealthy === 3 && c.controllersExpected === 3 ? p : undefined;
      }, 30_000);
      // One node instance and one controller instance on each node.
      expect(plugin.cluster!.instances).toHaveLength(6);
      expect([...new Set(plugin.cluster!.instances.map((i) => i.node))]).toEqual(['n1', 'n2', 'n3']);
      // Here, on this node: its own instance, 1/1, as on its own.
      expect(plugin.nodesHealthy).toBe(1);
    }
  });

  it('a volume claimed by a workload on one node is refused on another, with the holder named; kill -9 of the etcd leader kills no task and loses no claim', async () => {
    const [one, two] = agents as [AgentHarness, AgentHarness];
    // Each node's catalog is its own for now (the cluster-wide catalog is still to come), so each creates the volume
    // on its own hostpath plugin; the claim on the id is cluster-wide, and that is what this shows.
    const spec = volumeSpecToDocument(await parseVolumeSpec(volumeSpec('shared'), 'shared.hcl'));
    await one.api.createVolume(spec);
    await two.api.createVolume(spec);
    const { allocIds: [mine] } = await one.api.runJob(jobToDocument(await parseJobspec(workloadJob('writer-1', 'shared'), 'w1.hcl')));
    await pollUntil('the workload on n1 running', async () => ((await one.api.getAlloc(mine!)).clientStatus === 'running' ? true : undefined), 60_000);

    const { allocIds: [theirs] } = await two.api.runJob(jobToDocument(await parseJobspec(workloadJob('writer-2', 'shared'), 'w2.hcl')));
    const refused = await pollUntil('n2 told why it cannot claim', async () => {
      const a = await two.api.getAlloc(theirs!);
      return Object.values(a.tasks)
        .flatMap((t) => t.events)
        .find((e) => /is claimed on node n1 by alloc/.test(e.message));
    }, 60_000);
    expect(refused.message).toContain(`volume "shared" (single-node-writer) is claimed on node n1 by alloc ${mine}`);
    expect((await two.api.getAlloc(theirs!)).clientStatus).not.toBe('running');

    // The claim as etcd holds it, read by a client of our own.
    const conn = connectEtcd({ endpoints: etcd.endpoints, prefix: 'e2e/', dialTimeoutMs: 2_000 });
    try {
      const claims = new EtcdVolumeClaims(conn);
      expect((await claims.claims('shared')).map((c) => [c.allocId, c.nodeId])).toEqual([[mine, 'n1']]);
      const pid = one.taskPid(mine!, 'writer');
      const leader = await etcd.leader();
      await etcd.kill(leader, 'SIGKILL');
      // Past the node leases' TTL and an election: nothing here was stopped for it.
      await new Promise((r) => setTimeout(r, 3_000));
      expect(isAlive(pid)).toBe(true);
      const after = await pollUntil('the claim read after the leader died', async () => claims.claims('shared').catch(() => undefined), 30_000);
      expect(after.map((c) => [c.allocId, c.nodeId])).toEqual([[mine, 'n1']]);
      expect((await one.api.getAlloc(mine!)).clientStatus).toBe('running');
      await etcd.restart(leader);
    } finally {
      conn.close();
    }
    await two.api.stopJob('writer-2');
    await one.api.stopJob('writer-1');
    const conn2 = connectEtcd({ endpoints: etcd.endpoints, prefix: 'e2e/', dialTimeoutMs: 2_000 });
    try {
      await pollUntil('the claim released in etcd', async () => ((await new EtcdVolumeClaims(conn2).claims('shared')).length === 0 ? true : undefined), 30_000);
    } finally {
      conn2.close();
    }
  });

  it('the claim sweep releases in etcd the claims of this node that no alloc here holds, and no other node\'s', async () => {
    const conn = connectEtcd({ endpoints: etcd.endpoints, prefix: 'e2e/', dialTimeoutMs: 2_000 });
    try {
      const claims = new EtcdVolumeClaims(conn);
      const volume = { id: 'ghostly', capabilities: [{ accessMode: 'multi-node-multi-writer' as const, attachmentMode: 'file-system' as const }] };
      const req = (allocId: string) => ({ volumeId: 'ghostly', allocId, accessMode: 'multi-node-multi-writer', attachmentMode: 'file-system', readOnly: false });
      // A claim left in etcd for n3 by an alloc n3 does not have (a release that reached only its catalog), and one of a node no agent runs.
      await claims.claim(volume, req('ghost-on-n3'), 'n3');
      await claims.claim(volume, req('ghost-on-n9'), 'n9');
      await pollUntil('n3\'s sweep released its ghost', async () => ((await claims.claims('ghostly')).some((c) => c.allocId === 'ghost-on-n3') ? undefined : true), 30_000);
      expect((await claims.claims('ghostly')).map((c) => c.allocId)).toEqual(['ghost-on-n9']);
    } finally {
      conn.close();
    }
  });

  it('a second machine given a node name already in use is refused: it never claims, and n1 keeps its record', async () => {
    const endpoints = etcd.endpoints.map((e) => JSON.stringify(e)).join(', ');
    const impostor = new AgentHarness(`node_id = "n1"
cluster {
  etcd {
    endpoints = [${endpoints}]
    prefix    = "e2e"
  }
  node_class    = "impostor"
  heartbeat_ttl = "3s"
}`);
    try {
      await impostor.start();
      await pollUntil('the refusal in its log', async () => (/node name \\"n1\\" is in use by another live agent/.test(impostor.log) ? true : undefined), 30_000);
      await impostor.api.runJob(jobToDocument(await parseJobspec(PLUGIN_JOB, 'plugin.hcl')));
      await pollUntil('its plugin healthy', async () => ((await impostor.api.getPlugin('hostpath').catch(() => undefined))?.nodesHealthy === 1 ? true : undefined), 60_000);
      await impostor.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeSpec('not-mine'), 'not-mine.hcl')));
      const { allocIds: [alloc] } = await impostor.api.runJob(jobToDocument(await parseJobspec(workloadJob('impostor-work', 'not-mine'), 'iw.hcl')));
      const waiting = await pollUntil('its claim told to wait', async () => {
        const a = await impostor.api.getAlloc(alloc!);
        return Object.values(a.tasks).flatMap((t) => t.events).find((e) => /does not hold node "n1" in the cluster yet/.test(e.message));
      }, 60_000);
      expect(waiting.message).toContain('the claim waits until it does');
      // n1's record is the real agent's, not the refused machine's.
      const n1 = (await agents[1]!.api.listNodes()).nodes.find((n) => n.name === 'n1')!;
      expect(n1).toMatchObject({ status: 'ready', nodeClass: 'storage' });
    } finally {
      await impostor.cleanup();
    }
  });

  it('every etcd member down: tasks and mounts untouched, node status says etcd does not answer; back once etcd is', async () => {
    const [one] = agents as [AgentHarness];
    const { allocIds: [alloc] } = await one.api.runJob(jobToDocument(await parseJobspec(workloadJob('through', 'shared'), 'through.hcl')));
    await pollUntil('the workload running', async () => ((await one.api.getAlloc(alloc!)).clientStatus === 'running' ? true : undefined), 60_000);
    const pid = one.taskPid(alloc!, 'writer');
    for (let i = 0; i < etcd.size; i++) await etcd.kill(i, 'SIGKILL');
    const down = await one.api.listNodes().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(down).toBeInstanceOf(ApiError);
    expect((down as ApiError).status).toBe(503);
    expect((down as Error).message).toMatch(/the cluster's etcd did not answer .*tasks and mounts are untouched/);
    await new Promise((r) => setTimeout(r, 5_000));
    expect(isAlive(pid)).toBe(true);
    expect((await one.api.getAlloc(alloc!)).clientStatus).toBe('running');
    // Its volume is still mounted where the task sees it.
    expect(mountsUnder(one.dataDir).some((m) => m.includes(alloc!))).toBe(true);
    expect((await one.api.health()).ok).toBe(true);
    // A job stopped meanwhile stops, and unmounts here; only the release in etcd waits (retried in the background).
    await one.api.stopJob('through');
    expect(isAlive(pid)).toBe(false);
    expect(mountsUnder(one.dataDir).some((m) => m.includes(alloc!))).toBe(false);
    await Promise.all(Array.from({ length: etcd.size }, (_, i) => etcd.restart(i)));
    await pollUntil('three nodes ready again', async () => {
      const l = await one.api.listNodes().catch(() => undefined);
      return l && l.nodes.length === 3 && l.nodes.every((n) => n.status === 'ready') ? true : undefined;
    }, 60_000);
    // Once etcd answers, the claim is released there too.
    const conn = connectEtcd({ endpoints: etcd.endpoints, prefix: 'e2e/', dialTimeoutMs: 2_000 });
    try {
      await pollUntil('the claim released in etcd after it came back', async () => ((await new EtcdVolumeClaims(conn).claims('shared')).some((c) => c.allocId === alloc) ? undefined : true), 60_000);
    } finally {
      conn.close();
    }
  });
});
