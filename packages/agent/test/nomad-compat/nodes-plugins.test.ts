// Nomad compatibility: plugins, nodes, the agent, its status and the event
// stream, read as a Nomad tool reads them (nomad-api.ts imports nothing of
// csiplug). A real agent process runs the real hostpath plugin job; every
// answer is checked for Nomad's field names and types, its status code and
// X-Nomad-Index. The shapes are declared below with Nomad's names, copied
// from the structs named.
import type * as http from 'http';
import { jobToNomadJson, parseJobspec } from '@csiplug/jobspec';
import { hostpathPluginJobHcl } from '../../src/commands/specs';
import { AgentHarness, pollUntil } from '../support/agent-process';
import { NomadApi, NomadResponseError } from './nomad-api';

jest.setTimeout(180_000);

/** api/nodes.go CSINodeInfo. */
interface CSINodeInfo {
  ID: string;
  MaxVolumes: number;
  AccessibleTopology?: { Segments: Record<string, string> };
  RequiresNodeStageVolume: boolean;
  SupportsStats: boolean;
  SupportsExpand: boolean;
  SupportsCondition: boolean;
}

/** api/nodes.go CSIControllerInfo (the fields read here). */
interface CSIControllerInfo {
  SupportsCreateDelete: boolean;
  SupportsAttachDetach: boolean;
  SupportsListVolumes: boolean;
  SupportsCreateDeleteSnapshot: boolean;
}

/** api/nodes.go CSIInfo. */
interface CSIInfo {
  PluginID: string;
  AllocID: string;
  Healthy: boolean;
  HealthDescription: string;
  ControllerInfo?: CSIControllerInfo;
  NodeInfo?: CSINodeInfo;
}

/** api/csi.go CSIPluginListStub. */
interface CSIPluginListStub {
  ID: string;
  Provider: string;
  ControllerRequired: boolean;
  ControllersHealthy: number;
  ControllersExpected: number;
  NodesHealthy: number;
  NodesExpected: number;
}

/** api/csi.go CSIPlugin (the fields read here). */
interface CSIPlugin extends CSIPluginListStub {
  Version: string;
  Controllers: Record<string, CSIInfo>;
  Nodes: Record<string, CSIInfo>;
  /** api/allocations.go AllocationListStub (the fields read here). */
  Allocations: { ID: string; NodeID: string; JobID: string; TaskGroup: string; ClientStatus: string; CreateTime: number }[];
}

/** api/nodes.go DriverInfo. */
interface DriverInfo {
  Detected: boolean;
  Healthy: boolean;
  HealthDescription: string;
}

/** api/nodes.go NodeListStub (the fields read here). */
interface NodeListStub {
  ID: string;
  Name: string;
  Datacenter: string;
  NodeClass: string;
  Status: string;
  SchedulingEligibility: string;
  Drain: boolean;
  Drivers: Record<string, { Detected: boolean }>;
}

/** api/nodes.go Node (the fields read here). */
interface Node {
  ID: string;
  Name: string;
  Datacenter: string;
  NodeClass: string;
  Status: string;
  SchedulingEligibility: string;
  Attributes: Record<string, string>;
  Meta: Record<string, string>;
  Drivers: Record<string, DriverInfo>;
  CSIControllerPlugins: Record<string, CSIInfo>;
  CSINodePlugins: Record<string, CSIInfo>;
}

/** api/allocations.go Allocation (the fields read here). */
interface Allocation {
  ID: string;
  NodeID: string;
  JobID: string;
  TaskGroup: string;
  ClientStatus: string;
  Job: { ID: string };
}

/** api/agent.go AgentSelf (the parts the nomad CLI reads). */
interface AgentSelf {
  config: { Region: string; Datacenter: string; NodeName: string; Version: { Version: string } };
  member: { Name: string; Status: string; Tags: Record<string, string> };
  stats: Record<string, Record<string, string>>;
}

/** api/agent.go AgentHealthResponse. */
interface AgentHealthResponse {
  client?: { ok: boolean; message: string };
  server?: { ok: boolean; message: string };
}

/** api/event_stream.go Event and Events. */
interface NomadEvent {
  Topic: string;
  Type: string;
  Key: string;
  FilterKeys: string[];
  Index: number;
  Payload: Record<string, unknown>;
}
interface Events {
  Index: number;
  Events?: NomadEvent[];
}

/** Reads an event stream's lines until `enough` says so (or the deadline passes), then closes it. */
async function readEvents(
  res: http.IncomingMessage,
  enough: (events: NomadEvent[]) => boolean,
  ms = 60_000,
): Promise<{ lines: Events[]; events: NomadEvent[] }> {
  const lines: Events[] = [];
  const events: NomadEvent[] = [];
  res.setEncoding('utf8');
  let pending = '';
  const deadline = setTimeout(
    () => res.destroy(new Error(`the stream gave too few events within ${ms} ms: ${JSON.stringify(events)}`)),
    ms,
  );
  try {
    for await (const chunk of res as AsyncIterable<string>) {
      pending += chunk;
      let nl: number;
      while ((nl = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        const parsed = JSON.parse(line) as Events;
        lines.push(parsed);
        events.push(...(parsed.Events ?? []));
      }
      if (enough(events)) break;
    }
  } finally {
    clearTimeout(deadline);
    res.destroy();
  }
  return { lines, events };
}

describe('Nomad compatibility: plugins, nodes, agent, status, event stream', () => {
  let h: AgentHarness;
  let nomad: NomadApi;
  let pluginJob: string;
  let allocStream: Promise<{ lines: Events[]; events: NomadEvent[] }>;
  let jobStream: Promise<{ lines: Events[]; events: NomadEvent[] }>;

  beforeAll(async () => {
    h = new AgentHarness();
    await h.start();
    nomad = new NomadApi(`http://127.0.0.1:${h.port}`);
    // Two streams opened before anything runs: every Allocation event, and only those of the plugin's job (by its ID).
    const job = await parseJobspec(hostpathPluginJobHcl({ restartDelay: '100ms' }), 'plugin.hcl');
    pluginJob = job.id;
    const all = await nomad.stream('/v1/event/stream', { topic: 'Allocation:*' });
    const filtered = await nomad.stream('/v1/event/stream', { topic: `Allocation:${pluginJob}` });
    allocStream = readEvents(all, (events) => events.some((e) => e.Type === 'Alloc running'));
    jobStream = readEvents(filtered, (events) => events.some((e) => e.Type === 'Alloc running'));
    await nomad.put('/v1/jobs', { Job: jobToNomadJson(job) });
    await pollUntil('plugin hostpath healthy', async () => {
      const p = await nomad.get<CSIPlugin>('/v1/plugin/csi/hostpath').catch(() => undefined);
      return p && p.body.NodesHealthy === 1 && p.body.ControllersHealthy === 1 ? p : undefined;
    });
  });

  afterAll(async () => {
    await h?.cleanup();
  });

  it("GET /v1/plugins?type=csi: Nomad's []CSIPluginListStub", async () => {
    const r = await nomad.get<CSIPluginListStub[]>('/v1/plugins', { type: 'csi' });
    expect(r.status).toBe(200);
    expect(r.lastIndex).toBeGreaterThan(0);
    expect(r.body).toEqual([
      expect.objectContaining({
        ID: 'hostpath',
        ControllerRequired: expect.any(Boolean),
        ControllersHealthy: 1,
        ControllersExpected: 1,
        NodesHealthy: 1,
        NodesExpected: 1,
      }),
    ]);
  });

  it("GET /v1/plugin/csi/:id: Nomad's CSIPlugin, its instances keyed by node ID; an unknown plugin is a 404", async () => {
    const node = (await nomad.get<Node>('/v1/node/self')).body;
    const r = await nomad.get<CSIPlugin>('/v1/plugin/csi/hostpath');
    expect(r.lastIndex).toBeGreaterThan(0);
    const p = r.body;
    expect(p).toMatchObject({ ID: 'hostpath', Provider: expect.any(String), Version: expect.any(String) });
    expect(Object.keys(p.Controllers)).toEqual([node.ID]);
    expect(Object.keys(p.Nodes)).toEqual([node.ID]);
    const nodeInstance = p.Nodes[node.ID]!;
    expect(nodeInstance).toMatchObject({
      PluginID: 'hostpath',
      AllocID: expect.any(String),
      Healthy: true,
      HealthDescription: expect.any(String),
    });
    expect(nodeInstance.NodeInfo).toMatchObject({
      ID: expect.any(String),
      MaxVolumes: expect.any(Number),
      RequiresNodeStageVolume: expect.any(Boolean),
      SupportsStats: expect.any(Boolean),
    });
    // The hostpath plugin creates and deletes volumes and takes snapshots.
    expect(p.Controllers[node.ID]!.ControllerInfo).toMatchObject({ SupportsCreateDelete: true, SupportsCreateDeleteSnapshot: true });
    expect(p.Allocations.map((a) => a.ID).sort()).toEqual([...new Set([p.Controllers[node.ID]!.AllocID, nodeInstance.AllocID])].sort());
    // Full AllocationListStubs, as `nomad plugin status` lists them.
    for (const a of p.Allocations)
      expect(a).toMatchObject({
        NodeID: node.ID,
        JobID: pluginJob,
        TaskGroup: expect.any(String),
        ClientStatus: 'running',
        CreateTime: expect.any(Number),
      });
    const missing = await nomad.get('/v1/plugin/csi/nope').catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(NomadResponseError);
    expect(missing).toMatchObject({ status: 404, message: 'Unexpected response code: 404 (plugin "nope" not found)' });
  });

  it("GET /v1/nodes and /v1/node/:id: Nomad's NodeListStub and Node, the plugins in CSIControllerPlugins and CSINodePlugins", async () => {
    const list = await nomad.get<NodeListStub[]>('/v1/nodes');
    expect(list.lastIndex).toBeGreaterThan(0);
    expect(list.body).toHaveLength(1);
    const stub = list.body[0]!;
    expect(stub).toMatchObject({
      ID: expect.any(String),
      Name: expect.any(String),
      NodeClass: '',
      Status: 'ready',
      SchedulingEligibility: 'eligible',
      Drain: false,
    });
    expect(stub.Drivers['raw_exec']).toEqual({ Detected: true });
    const r = await nomad.get<Node>(`/v1/node/${stub.ID}`);
    expect(r.lastIndex).toBeGreaterThan(0);
    const node = r.body;
    expect(node).toMatchObject({
      ID: stub.ID,
      Status: 'ready',
      SchedulingEligibility: 'eligible',
      Datacenter: expect.any(String),
      NodeClass: '',
    });
    expect(node.Attributes['kernel.name']).toBe('linux');
    expect(node.Attributes['unique.hostname']).toEqual(expect.any(String));
    expect(node.Meta).toEqual(expect.any(Object));
    expect(node.Drivers['raw_exec']).toMatchObject({ Detected: true, Healthy: true, HealthDescription: expect.any(String) });
    expect(node.CSIControllerPlugins['hostpath']).toMatchObject({ PluginID: 'hostpath', Healthy: true });
    expect(node.CSINodePlugins['hostpath']).toMatchObject({
      PluginID: 'hostpath',
      Healthy: true,
      NodeInfo: { ID: expect.any(String), MaxVolumes: expect.any(Number) },
    });
    expect((await nomad.get<Node>('/v1/node/self')).body.ID).toBe(node.ID);
    await expect(nomad.get('/v1/node/not-a-node')).rejects.toMatchObject({ status: 404 });
  });

  it("GET /v1/agent/self: Nomad's AgentSelf with the config and member the nomad CLI reads", async () => {
    const r = await nomad.get<AgentSelf>('/v1/agent/self');
    expect(r.status).toBe(200);
    const node = (await nomad.get<Node>('/v1/node/self')).body;
    expect(r.body.config).toMatchObject({
      Region: expect.any(String),
      Datacenter: node.Datacenter,
      NodeName: node.Name,
      Version: { Version: expect.any(String) },
    });
    expect(r.body.member).toMatchObject({
      Name: node.Name,
      Status: 'alive',
      Tags: { build: r.body.config.Version.Version, dc: node.Datacenter },
    });
    expect(r.body.stats['client']).toMatchObject({ node_id: node.ID });
  });

  it("GET /v1/agent/health: Nomad's AgentHealthResponse, both parts ok; ?type=client as Nomad's docs ask", async () => {
    const r = await nomad.get<AgentHealthResponse>('/v1/agent/health');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ client: { ok: true, message: 'ok' }, server: { ok: true, message: 'ok' } });
    expect((await nomad.get<AgentHealthResponse>('/v1/agent/health', { type: 'client' })).body.client).toEqual({ ok: true, message: 'ok' });
  });

  it('GET /v1/status/leader and /v1/status/peers: the agent leads itself, at its own address', async () => {
    const leader = await nomad.get<string>('/v1/status/leader');
    expect(leader.status).toBe(200);
    expect(leader.body).toBe(`127.0.0.1:${h.port}`);
    expect((await nomad.get<string[]>('/v1/status/peers')).body).toEqual([`127.0.0.1:${h.port}`]);
  });

  it("GET /v1/event/stream: Nomad's Events envelope; ?topic=Allocation:* and ?topic=Allocation:<job ID> filter as Nomad's do", async () => {
    const all = await allocStream;
    for (const line of all.lines) {
      expect(line.Index).toEqual(expect.any(Number));
      for (const e of line.Events ?? []) expect(e.Index).toBe(line.Index);
    }
    expect(all.events.length).toBeGreaterThan(0);
    for (const e of all.events) {
      expect(e).toMatchObject({ Topic: 'Allocation', Type: expect.any(String), Key: expect.any(String), Payload: expect.any(Object) });
      expect(e.FilterKeys).toContain(pluginJob);
    }
    expect(all.events.some((e) => e.Type === 'Alloc received')).toBe(true);
    const indexes = all.events.map((e) => e.Index);
    expect(indexes).toEqual([...indexes].sort((a, b) => a - b));
    const byJob = await jobStream;
    expect(byJob.events.length).toBeGreaterThan(0);
    for (const e of byJob.events) expect(e.FilterKeys).toContain(pluginJob);
    // A topic csiplug does not send is accepted as Nomad's (ACLs off): a stream of heartbeats.
    const unknown = await nomad.stream('/v1/event/stream', { topic: 'NoSuchTopic:*' });
    expect(unknown.statusCode).toBe(200);
    unknown.destroy();
  });

  it('one node ID everywhere: the list, the node, the agent, the allocs and the plugin maps; ?prefix= finds it', async () => {
    const [stub] = (await nomad.get<NodeListStub[]>('/v1/nodes')).body;
    const node = (await nomad.get<Node>('/v1/node/self')).body;
    expect(node.ID).toBe(stub!.ID);
    expect(node.Name).toBe(stub!.Name);
    expect(stub!.Datacenter).toBe(node.Datacenter);
    expect(stub!.NodeClass).toBe(node.NodeClass);
    expect((await nomad.get<AgentSelf>('/v1/agent/self')).body.stats['client']!['node_id']).toBe(node.ID);
    const plugin = (await nomad.get<CSIPlugin>('/v1/plugin/csi/hostpath')).body;
    expect(Object.keys(plugin.Controllers)).toEqual([node.ID]);
    expect(Object.keys(plugin.Nodes)).toEqual([node.ID]);
    const alloc = (await nomad.get<Allocation>(`/v1/allocation/${plugin.Nodes[node.ID]!.AllocID}`)).body;
    expect(alloc.NodeID).toBe(node.ID);
    // Nomad's CLI looks a node up by prefix first (`nomad node status <ID>`): ?prefix= keeps the nodes whose ID starts with it.
    expect((await nomad.get<NodeListStub[]>('/v1/nodes', { prefix: node.ID.slice(0, 4) })).body.map((n) => n.ID)).toEqual([node.ID]);
    expect((await nomad.get<NodeListStub[]>('/v1/nodes', { prefix: `${node.ID}-no-such` })).body).toEqual([]);
    expect((await nomad.get<CSIPluginListStub[]>('/v1/plugins', { type: 'csi', prefix: 'host' })).body.map((p) => p.ID)).toEqual([
      'hostpath',
    ]);
    expect((await nomad.get<CSIPluginListStub[]>('/v1/plugins', { type: 'csi', prefix: 'nope' })).body).toEqual([]);
  });

  it("GET /v1/node/:id/allocations: the node's allocs as Nomad's full Allocations", async () => {
    const node = (await nomad.get<Node>('/v1/node/self')).body;
    const r = await nomad.get<Allocation[]>(`/v1/node/${node.ID}/allocations`);
    expect(r.status).toBe(200);
    expect(r.lastIndex).toBeGreaterThan(0);
    const plugin = (await nomad.get<CSIPlugin>('/v1/plugin/csi/hostpath')).body;
    expect(r.body.map((a) => a.ID).sort()).toEqual(plugin.Allocations.map((a) => a.ID).sort());
    for (const a of r.body) {
      expect(a).toMatchObject({ NodeID: node.ID, JobID: pluginJob, TaskGroup: expect.any(String), ClientStatus: expect.any(String) });
      expect(a.Job).toMatchObject({ ID: pluginJob });
    }
    await expect(nomad.get('/v1/node/not-a-node/allocations')).rejects.toMatchObject({ status: 404 });
  });

  it('an unknown ?type= on /v1/agent/health is ignored as Nomad does: 200 with neither part', async () => {
    const r = await nomad.get<AgentHealthResponse>('/v1/agent/health', { type: 'bogus' });
    expect(r.status).toBe(200);
    expect(r.body.client).toBeUndefined();
    expect(r.body.server).toBeUndefined();
  });

  it('every Controllers entry of a CSIPlugin has a ControllerInfo and every Nodes entry a NodeInfo (`nomad plugin status -verbose`)', async () => {
    const plugin = (await nomad.get<CSIPlugin>('/v1/plugin/csi/hostpath')).body;
    for (const c of Object.values(plugin.Controllers)) expect(c.ControllerInfo).toEqual(expect.any(Object));
    for (const n of Object.values(plugin.Nodes)) expect(n.NodeInfo).toEqual(expect.any(Object));
    const node = (await nomad.get<Node>('/v1/node/self')).body;
    for (const c of Object.values(node.CSIControllerPlugins)) expect(c.ControllerInfo).toEqual(expect.any(Object));
    for (const n of Object.values(node.CSINodePlugins)) expect(n.NodeInfo).toEqual(expect.any(Object));
  });
});
