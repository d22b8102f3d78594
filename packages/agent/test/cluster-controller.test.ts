// Controller RPCs routed across the cluster, end to end: real etcd, three
// agents sharing one ACL token, the hostpath plugin split as real CSI
// drivers deploy — a node plugin on every node (a system job) and two
// controllers (a service job of count 2, with ControllerPublish on) — all on
// one state dir the nodes share. The node without a controller routes its
// controller calls to one that has it, over HTTP with the token: its plugin
// status shows a healthy controller, a volume created through it is made,
// a workload placed there is published to it (ControllerPublishVolume on
// another node's controller, naming this node); kill -9 of the agent whose
// controller answered — its node still listed ready, its lease not yet run
// out — and the next call goes to the other controller. While no node has
// a controller, none is routed (a node-only plugin claims without one).
import { EtcdVolumeClaims, connectEtcd } from '@csiplug/cluster';
import { EtcdTestCluster } from '@csiplug/cluster/testing';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { hostpathPluginJobHcl } from '../src/commands/specs';
import { jobToNomadJson, parseJobspec, parseVolumeSpec, volumeSpecToDocument } from '@csiplug/jobspec';
import { AgentHarness, isAlive, pollUntil, runningAlloc, volumeSpec, workloadJob } from './support/agent-process';

jest.setTimeout(300_000);

const TOKEN = 'cluster-routing-token-0123456789abcdef';
const NAMES: readonly string[] = ['n1', 'n2', 'n3'];

/** The hostpath plugin as `mode` (node or controller), on the shared state dir, as a job of the given type and count. */
function pluginJob(stateDir: string, mode: 'node' | 'controller', jobId: string, type: 'system' | 'service', count: number): string {
  const hcl = hostpathPluginJobHcl({
    restartDelay: '100ms',
    jobId,
    extraArgs: ['--topology', 'example.com/zone=z1', ...(mode === 'controller' ? ['--controller-publish', 'true'] : [])],
  })
    .replace('"${CSIPLUG_PLUGIN_DATA_DIR}/state"', JSON.stringify(stateDir))
    .replace('"--mode", "monolith"', `"--mode", "${mode}"`)
    .replace('type = "monolith"', `type = "${mode}"`)
    .replace(`job "${jobId}" {`, `job "${jobId}" {\n  type = "${type}"`)
    .replace('group "plugin" {', `group "plugin" {\n    count = ${count}`);
  for (const part of [stateDir, `"--mode", "${mode}"`, `type = "${mode}"`, `type = "${type}"`, `count = ${count}`]) {
    if (!hcl.includes(part)) throw new Error(`the plugin job template changed (no ${part}): this test must follow it`);
  }
  return hcl;
}

const running = runningAlloc;

describe('controller calls routed to another node', () => {
  let etcd: EtcdTestCluster;
  const agents: AgentHarness[] = [];
  let shared: string;

  beforeAll(async () => {
    etcd = await EtcdTestCluster.start(1);
    shared = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-shared-'));
    const endpoints = etcd.endpoints.map((e) => JSON.stringify(e)).join(', ');
    for (const name of NAMES) {
      agents.push(
        new AgentHarness(`node_id = "${name}"
acl {
  token = "${TOKEN}"
}
cluster {
  etcd {
    endpoints = [${endpoints}]
    prefix    = "routing"
  }
  heartbeat_ttl    = "15s"
  disconnect_grace = "3s"
}`),
      );
    }
    await Promise.all(agents.map((a) => a.start(TOKEN)));
    const [one] = agents as [AgentHarness];
    await pollUntil(
      'joined',
      async () => ((await one.api.listNodes().catch(() => undefined))?.nodes.length === 3 ? true : undefined),
      30_000,
    );
    await one.api.runJob(jobToNomadJson(await parseJobspec(pluginJob(shared, 'node', 'hostpath-nodes', 'system', 1), 'nodes.hcl')));
    // Node plugins only, so far: every node healthy, and no controller anywhere, so none routed either.
    for (const a of agents) {
      await pollUntil(
        'the node plugin healthy, in every node record',
        async () => {
          const p = await a.api.getPlugin('hostpath').catch(() => undefined);
          return p?.nodesHealthy === 1 && p.cluster?.nodesHealthy === 3 ? true : undefined;
        },
        90_000,
      );
    }
    await new Promise((r) => setTimeout(r, 2_000));
    for (const a of agents) expect((await a.api.getPlugin('hostpath')).controller).toBeUndefined();
    await one.api.runJob(
      jobToNomadJson(await parseJobspec(pluginJob(shared, 'controller', 'hostpath-controllers', 'service', 2), 'controllers.hcl')),
    );
  });

  afterAll(async () => {
    for (const a of agents) {
      const { leftMounts } = await a.cleanup();
      expect(leftMounts).toEqual([]);
    }
    await etcd?.stop();
    if (shared) fs.rmSync(shared, { recursive: true, force: true });
  });

  it('the node without a controller routes to one: its controller is healthy there, and never counted as a third', async () => {
    const placed = await pollUntil(
      'two controllers placed',
      async () => {
        const j = await agents[0]!.api.getJob('hostpath-controllers');
        return j.cluster?.placements.length === 2 ? j.cluster.placements : undefined;
      },
      30_000,
    );
    const withController = new Set(placed.map((p) => p.node));
    expect(withController.size).toBe(2);
    const lone = NAMES.find((n) => !withController.has(n))!;
    const agent = agents[NAMES.indexOf(lone)]!;
    const plugin = await pollUntil(
      'the routed controller healthy on the node without one',
      async () => {
        const p = await agent.api.getPlugin('hostpath').catch(() => undefined);
        return p?.controller?.healthy && p.nodesHealthy === 1 ? p : undefined;
      },
      90_000,
    );
    expect(plugin.controller!.allocId).toBe('cluster-controller:hostpath');
    // Fingerprinted through the route: the real controller's capabilities.
    expect(plugin.controller!.info['Attach/Detach (ControllerPublish)']).toBe(true);
    expect(plugin.allocs.some((a) => a.startsWith('cluster-controller:'))).toBe(false);
    // Across the cluster: two controllers (the routed one is not a third), three node plugins.
    const cluster = await pollUntil(
      '2 controllers and 3 nodes across the cluster',
      async () => {
        const c = (await agent.api.getPlugin('hostpath')).cluster;
        return c && c.controllersHealthy === 2 && c.controllersExpected === 2 && c.nodesHealthy === 3 ? c : undefined;
      },
      30_000,
    );
    expect(
      cluster.instances
        .filter((i) => i.type === 'csi-controller')
        .map((i) => i.node)
        .sort(),
    ).toEqual([...withController].sort());
  });

  it("a volume created through the node without a controller is made; a workload placed there is published to it by another node's controller; kill -9 of that agent and the next call goes to the other controller", async () => {
    const controllers = (await agents[0]!.api.getJob('hostpath-controllers')).cluster!.placements.map((p) => p.node);
    const lone = NAMES.find((n) => !controllers.includes(n))!;
    const agent = agents[NAMES.indexOf(lone)]!;
    await agent.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeSpec('routed'), 'routed.hcl')));
    expect((await agent.api.getVolume('routed')).externalId).not.toBe('');

    // The workload goes where there is least: the node without a controller (one alloc there, two elsewhere).
    const run = await agents[0]!.api.runJob(jobToNomadJson(await parseJobspec(workloadJob('routed-writer', 'routed'), 'w.hcl')));
    expect(run.cluster!.placements.map((p) => p.node)).toEqual([lone]);
    const alloc = await pollUntil(
      'the workload running on the node without a controller',
      async () => running(await agent.api.getJob('routed-writer').catch(() => undefined)),
      90_000,
    );
    // ControllerPublishVolume was made by a controller on another node, for this node.
    const attachments = () => JSON.parse(fs.readFileSync(path.join(shared, 'attachments.json'), 'utf8')) as Record<string, unknown>;
    expect(JSON.stringify(attachments())).toContain(lone);
    const volume = await agent.api.getVolume('routed');
    expect(volume.claims.map((c) => c.allocId)).toEqual([alloc.id]);
    // The controller-publish state is the cluster's too: the claim in etcd says where the volume was published.
    const conn = connectEtcd({ endpoints: etcd.endpoints, prefix: 'routing/', dialTimeoutMs: 2_000 });
    try {
      const claim = await pollUntil(
        'the publish recorded in etcd',
        async () => (await new EtcdVolumeClaims(conn).claims('routed')).find((c) => c.published),
        30_000,
      );
      expect(claim).toMatchObject({ allocId: alloc.id, nodeId: lone, published: { csiNodeId: lone } });
    } finally {
      conn.close();
    }

    // The node whose controller answered; its agent dies (its plugin process lives on, but no call reaches it through that agent).
    const answered = (await agent.api.getPlugin('hostpath')).controller!.routed!.node!;
    expect(controllers).toContain(answered);
    const other = controllers.find((n) => n !== answered)!;
    await agents[NAMES.indexOf(answered)]!.kill('SIGKILL');
    try {
      // Its lease has not run out: every node still lists it ready, with its healthy controller; the call must go elsewhere all the same.
      expect((await agent.api.listNodes()).nodes.find((n) => n.name === answered)?.status).toBe('ready');
      // Unpublish on stop, and a new create: both through the other controller.
      await agent.api.stopJob('routed-writer');
      await pollUntil(
        'the claim released (unpublished) after the job stopped',
        async () => ((await agent.api.getVolume('routed')).claims.length === 0 ? true : undefined),
        60_000,
      );
      expect(JSON.stringify(attachments())).not.toContain(lone);
      expect((await agent.api.getPlugin('hostpath')).controller!.routed!.node).toBe(other);
      await agent.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeSpec('routed-2'), 'routed-2.hcl')));
      expect((await agent.api.getVolume('routed-2')).pluginId).toBe('hostpath');
    } finally {
      await agents[NAMES.indexOf(answered)]!.start(TOKEN);
    }
  });

  it("a node that dies with a volume published to it: past its grace another node's controller unpublishes it, then the claim goes and the alloc is published where it moves; back, the node stops its copy", async () => {
    // Every agent back in the cluster (the last test restarted one): each has read the jobs in a pass of its own.
    for (const a of agents)
      await pollUntil(
        'the agent passing again',
        async () =>
          (await a.api.getJob('hostpath-controllers').catch(() => undefined))?.cluster?.placements.length === 2 ? true : undefined,
        60_000,
      );
    const controllers = (await agents[0]!.api.getJob('hostpath-controllers')).cluster!.placements.map((p) => p.node);
    const lone = NAMES.find((n) => !controllers.includes(n))!;
    const agent = agents[NAMES.indexOf(lone)]!;
    await agents[0]!.api.runJob(jobToNomadJson(await parseJobspec(workloadJob('mover', 'routed'), 'mover.hcl')));
    const placed = await pollUntil(
      'the mover placed',
      async () => {
        const nodes = (await agents[0]!.api.getJob('mover').catch(() => undefined))?.cluster?.placements.map((p) => p.node);
        return nodes?.length ? nodes : undefined;
      },
      30_000,
    );
    expect(placed).toEqual([lone]);
    const alloc = await pollUntil(
      'the workload running on the node without a controller',
      async () => running(await agent.api.getJob('mover').catch(() => undefined)),
      90_000,
    );
    const attachments = () => JSON.parse(fs.readFileSync(path.join(shared, 'attachments.json'), 'utf8')) as Record<string, string[]>;
    const attachedTo = () => Object.values(attachments()).flat();
    expect(attachedTo()).toContain(lone);
    const pid = agent.taskPid(alloc.id, 'writer');

    await agent.kill('SIGKILL');
    const moved = await pollUntil(
      'the alloc running where it moved',
      async () => {
        for (const name of controllers) {
          const a = running(await agents[NAMES.indexOf(name)]!.api.getJob('mover').catch(() => undefined));
          if (a) return { node: name, alloc: a };
        }
        return undefined;
      },
      120_000,
    );
    // Unpublished from the dead node before its claim went, and published to the node it moved to.
    expect(attachedTo()).not.toContain(lone);
    expect(attachedTo()).toContain(moved.node);
    try {
      await agent.start(TOKEN);
      await pollUntil('the old copy stopped', async () => (!isAlive(pid) ? true : undefined), 60_000);
      expect(running(await agent.api.getJob('mover'))).toBeUndefined();
      expect(attachedTo()).not.toContain(lone);
    } finally {
      await agents[0]!.api.stopJob('mover');
    }
  });
});
