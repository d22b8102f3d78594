// The scheduler as a pure function: which nodes may take a group (ready,
// the node's cap on a job's allocs, drivers, and each CSI volume's catalog
// entry, node plugin, topology, capabilities, readable claims, max volumes
// and access mode, writers counted by mode), how service slots spread, what
// happens to slots on a node down within and past the disconnect grace (as
// counted here, or as etcd measured it), and what a stopped job, a smaller
// count or a new job version (one its node cannot run included) turns into.
import type { ClusterClaim } from './claims';
import type { ClusterNodeView, NodePluginInfo } from './node-registry';
import {
  schedule,
  type GroupDemand,
  type Placement,
  type SchedJob,
  type SchedVolume,
  type SchedulerInput,
  type VolumeDemand,
} from './scheduler';

const NOW = 1_700_000_000_000;
const GRACE = 60_000;

const plugin = (over: Partial<NodePluginInfo> = {}): NodePluginInfo => ({ id: 'hostpath', type: 'csi-node', healthy: true, ...over });

const node = (name: string, over: Partial<ClusterNodeView> = {}): ClusterNodeView => ({
  name,
  nodeClass: 'default',
  meta: {},
  drivers: ['raw_exec'],
  plugins: [plugin({ topology: { zone: name } })],
  version: '0.1.0',
  registeredAt: 0,
  updatedAt: 0,
  status: 'ready',
  ...over,
});

const group = (name: string, count: number, over: Partial<GroupDemand> = {}): GroupDemand => ({
  name,
  count,
  drivers: ['raw_exec'],
  volumes: [],
  ...over,
});
const service = (id: string, groups: GroupDemand[], version = 0): SchedJob => ({ id, type: 'service', version, stopped: false, groups });
const system = (id: string, groups: GroupDemand[], version = 0): SchedJob => ({ id, type: 'system', version, stopped: false, groups });
const demand = (volumeId: string, accessMode: string, readOnly = false): VolumeDemand => ({ volumeId, accessMode, readOnly });
const volume = (id: string, over: Partial<SchedVolume> = {}): SchedVolume => ({ id, pluginId: 'hostpath', ...over });
const claim = (allocId: string, nodeId: string, accessMode: string, mode: 'read' | 'write'): ClusterClaim => ({
  allocId,
  nodeId,
  mode,
  accessMode,
  attachmentMode: 'file-system',
  since: NOW - 1_000,
});

const placed = (jobId: string, slot: string, nodeName: string, over: Partial<Placement> = {}): Placement => {
  const [groupName, rest] = slot.split('/') as [string, string];
  return {
    slot,
    jobId,
    group: groupName,
    index: rest.startsWith('@') ? 0 : Number(rest),
    node: nodeName,
    jobVersion: 0,
    placedAt: NOW - 10_000,
    ...over,
  };
};

const three = (): ClusterNodeView[] => [node('n1'), node('n2'), node('n3')];

function input(over: Partial<SchedulerInput>): SchedulerInput {
  return { jobs: [], placements: [], nodes: three(), downSince: {}, volumes: {}, claims: {}, now: NOW, disconnectGraceMs: GRACE, ...over };
}

/** slot → node, for comparing what was placed where. */
const where = (ps: Placement[]): Record<string, string> => Object.fromEntries(ps.map((p) => [`${p.jobId}:${p.slot}`, p.node]));
const perNode = (ps: Placement[]): Record<string, number> =>
  ps.reduce<Record<string, number>>((acc, p) => ({ ...acc, [p.node]: (acc[p.node] ?? 0) + 1 }), {});

describe('schedule: system jobs', () => {
  it('places one slot on every ready node that has the drivers, none on a down node or one without the driver, and reports none of them', () => {
    const nodes = [
      node('n1', { drivers: ['docker'] }),
      node('n2', { drivers: ['docker'], status: 'down' }),
      node('n3'),
      node('n4', { drivers: ['raw_exec', 'docker'] }),
    ];
    const result = schedule(input({ nodes, jobs: [system('agent', [group('agent', 1, { drivers: ['docker'] })], 2)] }));
    expect(result.put).toEqual([
      { slot: 'agent/@n1', jobId: 'agent', group: 'agent', index: 0, node: 'n1', jobVersion: 2, placedAt: NOW },
      { slot: 'agent/@n4', jobId: 'agent', group: 'agent', index: 0, node: 'n4', jobVersion: 2, placedAt: NOW },
    ]);
    expect(result.remove).toEqual([]);
    // A node that cannot take a system job is not a failure to place it.
    expect(result.unplaced).toEqual([]);
  });

  it("keeps a placement on a node down past the grace where it is (it is that node's), and writes nothing for it", () => {
    const nodes = [node('n1'), node('n2', { status: 'down' })];
    const placements = [placed('agent', 'agent/@n1', 'n1'), placed('agent', 'agent/@n2', 'n2')];
    const result = schedule(
      input({ nodes, placements, jobs: [system('agent', [group('agent', 1)])], downSince: { n2: NOW - 10 * GRACE } }),
    );
    expect(result).toEqual({ put: [], remove: [], unplaced: [] });
  });

  it('places it on a node that joins, and leaves the nodes that have it alone', () => {
    const placements = [placed('agent', 'agent/@n1', 'n1'), placed('agent', 'agent/@n2', 'n2')];
    const result = schedule(input({ placements, jobs: [system('agent', [group('agent', 1)])] }));
    expect(where(result.put)).toEqual({ 'agent:agent/@n3': 'n3' });
    expect(result.remove).toEqual([]);
  });
});

describe('schedule: service jobs', () => {
  it('spreads a count of 3 over 3 nodes one per node', () => {
    const result = schedule(input({ jobs: [service('web', [group('web', 3)])] }));
    expect(where(result.put)).toEqual({ 'web:web/0': 'n1', 'web:web/1': 'n2', 'web:web/2': 'n3' });
    expect(result.put.map((p) => p.index)).toEqual([0, 1, 2]);
    expect(result.unplaced).toEqual([]);
  });

  it('spreads a count of 5 over 3 nodes 2/2/1', () => {
    const result = schedule(input({ jobs: [service('web', [group('web', 5)])] }));
    expect(perNode(result.put)).toEqual({ n1: 2, n2: 2, n3: 1 });
    expect(result.put.map((p) => p.slot)).toEqual(['web/0', 'web/1', 'web/2', 'web/3', 'web/4']);
  });

  it("spreads by the job's own placements first, then by every placement on the node", () => {
    // n1 carries another job's two slots and n2 one: the new job starts on the emptiest node.
    const placements = [placed('other', 'other/0', 'n1'), placed('other', 'other/1', 'n2'), placed('other', 'other/2', 'n1')];
    const result = schedule(input({ placements, jobs: [service('other', [group('other', 3)]), service('web', [group('web', 4)])] }));
    expect(where(result.put)).toEqual({ 'web:web/0': 'n3', 'web:web/1': 'n2', 'web:web/2': 'n1', 'web:web/3': 'n3' });
  });

  it("skips a node without the group's driver; when no node has it, each slot is unplaced with every node's reason", () => {
    const nodes = [node('n1'), node('n2', { drivers: ['docker'] }), node('n3', { drivers: ['docker', 'raw_exec'] })];
    const fits = schedule(input({ nodes, jobs: [service('web', [group('web', 2, { drivers: ['docker'] })])] }));
    expect(where(fits.put)).toEqual({ 'web:web/0': 'n2', 'web:web/1': 'n3' });
    expect(fits.unplaced).toEqual([]);

    const none = schedule(
      input({
        nodes: [node('n1'), node('n2', { status: 'down', drivers: ['docker'] })],
        jobs: [service('web', [group('web', 2, { drivers: ['docker', 'exec'] })])],
      }),
    );
    expect(none.put).toEqual([]);
    const reasons = { n1: 'no docker, exec driver on the node', n2: 'the node is down' };
    expect(none.unplaced).toEqual([
      { jobId: 'web', group: 'web', slot: 'web/0', reasons },
      { jobId: 'web', group: 'web', slot: 'web/1', reasons },
    ]);
  });

  it("places only on nodes in one of the job's datacenters (Nomad's globs); a system job too; a node without one takes only jobs for every datacenter", () => {
    const nodes = [node('n1', { datacenter: 'eu-west' }), node('n2', { datacenter: 'us-east' }), node('n3')];
    const dcs = { datacenters: ['eu-*'] };
    const fits = schedule(input({ nodes, jobs: [service('web', [group('web', 2, dcs)]), system('agent', [group('agent', 1, dcs)])] }));
    expect(where(fits.put)).toEqual({ 'web:web/0': 'n1', 'web:web/1': 'n1', 'agent:agent/@n1': 'n1' });
    expect(fits.unplaced).toEqual([]);
    const anywhere = schedule(input({ nodes, jobs: [system('agent', [group('agent', 1)])] }));
    expect(anywhere.put.map((p) => p.node).sort()).toEqual(['n1', 'n2', 'n3']);

    const none = schedule(input({ nodes, jobs: [service('web', [group('web', 1, { datacenters: ['dc1'] })])] }));
    expect(none.put).toEqual([]);
    expect(none.unplaced).toEqual([
      {
        jobId: 'web',
        group: 'web',
        slot: 'web/0',
        reasons: {
          n1: 'the node is in datacenter "eu-west", not one of the job\'s datacenters ["dc1"]',
          n2: 'the node is in datacenter "us-east", not one of the job\'s datacenters ["dc1"]',
          n3: 'the node\'s record names no datacenter (an agent from before datacenters), and the job runs only in ["dc1"]',
        },
      },
    ]);
  });

  it('with no node at all, the slot is unplaced with no reasons (no ready node)', () => {
    const result = schedule(input({ nodes: [], jobs: [service('web', [group('web', 1)])] }));
    expect(result.unplaced).toEqual([{ jobId: 'web', group: 'web', slot: 'web/0', reasons: {} }]);
  });

  it("a second pass over the first one's placements writes nothing", () => {
    const jobs = [service('web', [group('web', 5), group('db', 1)]), system('agent', [group('agent', 1)])];
    const first = schedule(input({ jobs }));
    expect(first.put).toHaveLength(9);
    expect(schedule(input({ jobs, placements: first.put, now: NOW + 1_000 }))).toEqual({ put: [], remove: [], unplaced: [] });
  });
});

describe('schedule: CSI volumes', () => {
  const rw = (id = 'data') => demand(id, 'multi-node-multi-writer');

  it("a volume missing from the cluster's catalog: unplaced, and every ready node says so", () => {
    const result = schedule(input({ jobs: [service('web', [group('web', 1, { volumes: [rw()] })])] }));
    expect(result.put).toEqual([]);
    const why = 'volume "data" is not in the cluster\'s catalog';
    expect(result.unplaced).toEqual([{ jobId: 'web', group: 'web', slot: 'web/0', reasons: { n1: why, n2: why, n3: why } }]);
  });

  it("needs the volume's node plugin there and healthy, and a topology the volume is accessible from", () => {
    const nodes = [
      node('n1', { plugins: [plugin({ id: 'other' }), plugin({ type: 'csi-controller' })] }),
      node('n2', { plugins: [plugin({ healthy: false, topology: { zone: 'a' } })] }),
      node('n3', { plugins: [plugin({ topology: { zone: 'b', rack: 'r1' } })] }),
      node('n4', { plugins: [plugin({ topology: { zone: 'a', rack: 'r2' } })] }),
    ];
    const volumes = { data: volume('data', { accessibleTopology: [{ zone: 'a' }, { zone: 'b', rack: 'r9' }] }) };
    const jobs = [service('web', [group('web', 1, { volumes: [rw()] })])];
    const result = schedule(input({ nodes, volumes, jobs }));
    expect(where(result.put)).toEqual({ 'web:web/0': 'n4' });

    const without = schedule(input({ nodes: nodes.slice(0, 3), volumes, jobs }));
    expect(without.unplaced).toEqual([
      {
        jobId: 'web',
        group: 'web',
        slot: 'web/0',
        reasons: {
          n1: 'no node plugin "hostpath" on the node',
          n2: 'node plugin "hostpath" is not healthy on the node',
          n3: 'volume "data" is not accessible from the node\'s topology',
        },
      },
    ]);
  });

  it('a volume with no accessible topology may be used anywhere', () => {
    const result = schedule(
      input({
        volumes: { data: volume('data', { accessibleTopology: [] }) },
        jobs: [service('web', [group('web', 3, { volumes: [rw()] })])],
      }),
    );
    expect(perNode(result.put)).toEqual({ n1: 1, n2: 1, n3: 1 });
  });

  it("a node at its plugin's max volumes is refused, unless it holds this very volume already", () => {
    const nodes = three().map((n) => ({ ...n, plugins: [plugin({ maxVolumes: 1 })] }));
    const volumes = { data: volume('data'), other: volume('other'), elsewhere: volume('elsewhere', { pluginId: 'nfs' }) };
    // n1 holds another hostpath volume; n2 holds this one; n3 holds a volume of another plugin, which does not count.
    const claims = {
      other: [claim('a1', 'n1', 'multi-node-multi-writer', 'write')],
      data: [claim('a2', 'n2', 'multi-node-multi-writer', 'write')],
      elsewhere: [claim('a3', 'n3', 'single-node-writer', 'write')],
    };
    const jobs = [service('web', [group('web', 4, { volumes: [rw()] })])];
    const result = schedule(input({ nodes, volumes, claims, jobs }));
    expect(perNode(result.put)).toEqual({ n2: 2, n3: 2 });
    expect(result.unplaced).toEqual([]);

    const full = schedule(
      input({ nodes: nodes.slice(0, 1), volumes, claims, jobs: [service('web', [group('web', 1, { volumes: [rw()] })])] }),
    );
    expect(full.unplaced[0]?.reasons).toEqual({ n1: 'node plugin "hostpath" is at its max of 1 volumes on the node' });
  });

  it('a single-node volume claimed on n1: only n1 may take it, and every other node names n1', () => {
    const volumes = { data: volume('data') };
    const claims = { data: [claim('reader', 'n1', 'single-node-reader-only', 'read')] };
    const jobs = [service('web', [group('web', 3, { volumes: [demand('data', 'single-node-reader-only', true)] })])];
    // No spread: all three on the one node that may use it.
    expect(perNode(schedule(input({ volumes, claims, jobs })).put)).toEqual({ n1: 3 });

    const nodes = [node('n1', { drivers: ['docker'] }), node('n2'), node('n3')];
    const result = schedule(
      input({
        nodes,
        volumes,
        claims,
        jobs: [service('web', [group('web', 1, { volumes: [demand('data', 'single-node-reader-only', true)] })])],
      }),
    );
    expect(result.put).toEqual([]);
    expect(result.unplaced[0]?.reasons).toEqual({
      n1: 'no raw_exec driver on the node',
      n2: 'volume "data" (single-node-reader-only) is in use on node n1',
      n3: 'volume "data" (single-node-reader-only) is in use on node n1',
    });
  });

  it('a single-node volume placed in this pass holds its node for the next job too', () => {
    const volumes = { data: volume('data') };
    const ro = demand('data', 'single-node-reader-only', true);
    const result = schedule(
      input({ volumes, jobs: [service('a', [group('a', 1, { volumes: [ro] })]), service('b', [group('b', 2, { volumes: [ro] })])] }),
    );
    expect(where(result.put)).toEqual({ 'a:a/0': 'n1', 'b:b/0': 'n1', 'b:b/1': 'n1' });
  });

  it('a single-node-writer volume with its writer already: a second writer is unplaced, everywhere', () => {
    const volumes = { data: volume('data') };
    const claims = { data: [claim('w1', 'n1', 'single-node-writer', 'write')] };
    const result = schedule(
      input({ volumes, claims, jobs: [service('web', [group('web', 1, { volumes: [demand('data', 'single-node-writer')] })])] }),
    );
    expect(result.put).toEqual([]);
    expect(result.unplaced[0]?.reasons).toEqual({
      n1: 'volume "data" (single-node-writer) has its one writer already',
      n2: 'volume "data" (single-node-writer) is in use on node n1',
      n3: 'volume "data" (single-node-writer) is in use on node n1',
    });
    // A reader of it may join the writer on its node.
    const reader = schedule(
      input({ volumes, claims, jobs: [service('web', [group('web', 1, { volumes: [demand('data', 'single-node-writer', true)] })])] }),
    );
    expect(where(reader.put)).toEqual({ 'web:web/0': 'n1' });
  });

  it('a multi-node-single-writer volume takes one writer in the cluster, and readers anywhere', () => {
    const volumes = { data: volume('data') };
    const writers = schedule(
      input({ volumes, jobs: [service('web', [group('web', 2, { volumes: [demand('data', 'multi-node-single-writer')] })])] }),
    );
    expect(where(writers.put)).toEqual({ 'web:web/0': 'n1' });
    expect(writers.unplaced.map((u) => u.slot)).toEqual(['web/1']);
    expect(Object.values(writers.unplaced[0]!.reasons)).toEqual(
      Array(3).fill('volume "data" (multi-node-single-writer) has its one writer already'),
    );
    const readers = schedule(
      input({ volumes, jobs: [service('web', [group('web', 3, { volumes: [demand('data', 'multi-node-single-writer', true)] })])] }),
    );
    expect(perNode(readers.put)).toEqual({ n1: 1, n2: 1, n3: 1 });
  });

  it('a read-only demand on a multi-node-reader-only volume fits every node, with readers claimed already', () => {
    const volumes = { data: volume('data') };
    const claims = { data: [claim('r1', 'n1', 'multi-node-reader-only', 'read'), claim('r2', 'n2', 'multi-node-reader-only', 'read')] };
    const ro = demand('data', 'multi-node-reader-only', true);
    const result = schedule(
      input({
        volumes,
        claims,
        jobs: [service('web', [group('web', 3, { volumes: [ro] })]), system('agent', [group('agent', 1, { volumes: [ro] })])],
      }),
    );
    expect(perNode(result.put.filter((p) => p.jobId === 'web'))).toEqual({ n1: 1, n2: 1, n3: 1 });
    expect(result.put.filter((p) => p.jobId === 'agent').map((p) => p.node)).toEqual(['n1', 'n2', 'n3']);
    expect(result.unplaced).toEqual([]);
  });

  it('a reader claim on a node does not stand for a writer kept there: a second writer of a multi-node-single-writer volume is refused', () => {
    const volumes = { data: volume('data') };
    // n1 holds a reader's claim; the writer placed there has not claimed yet. Its place still counts as the one writer.
    const claims = { data: [claim('r1', 'n1', 'multi-node-single-writer', 'read')] };
    const jobs = [service('web', [group('web', 2, { volumes: [demand('data', 'multi-node-single-writer')] })])];
    const result = schedule(input({ volumes, claims, jobs, placements: [placed('web', 'web/0', 'n1')] }));
    expect(result.put).toEqual([]);
    expect(result.unplaced).toEqual([
      {
        jobId: 'web',
        group: 'web',
        slot: 'web/1',
        reasons: Object.fromEntries(
          ['n1', 'n2', 'n3'].map((n) => [n, 'volume "data" (multi-node-single-writer) has its one writer already']),
        ),
      },
    ]);
  });

  it("single-node-single-writer is a single-writer mode: a second writer is refused, a reader joins on the writer's node", () => {
    const volumes = { data: volume('data') };
    const claims = { data: [claim('w1', 'n1', 'single-node-single-writer', 'write')] };
    const writer = schedule(
      input({ volumes, claims, jobs: [service('web', [group('web', 1, { volumes: [demand('data', 'single-node-single-writer')] })])] }),
    );
    expect(writer.put).toEqual([]);
    expect(writer.unplaced[0]?.reasons).toEqual({
      n1: 'volume "data" (single-node-single-writer) has its one writer already',
      n2: 'volume "data" (single-node-single-writer) is in use on node n1',
      n3: 'volume "data" (single-node-single-writer) is in use on node n1',
    });
    const reader = schedule(
      input({
        volumes,
        claims,
        jobs: [service('web', [group('web', 1, { volumes: [demand('data', 'single-node-single-writer', true)] })])],
      }),
    );
    expect(where(reader.put)).toEqual({ 'web:web/0': 'n1' });
  });

  it("single-node-multi-writer: more writers join on the writers' node, and no other node takes it", () => {
    const volumes = { data: volume('data') };
    const claims = { data: [claim('w1', 'n2', 'single-node-multi-writer', 'write')] };
    const result = schedule(
      input({ volumes, claims, jobs: [service('web', [group('web', 2, { volumes: [demand('data', 'single-node-multi-writer')] })])] }),
    );
    expect(where(result.put)).toEqual({ 'web:web/0': 'n2', 'web:web/1': 'n2' });
    expect(result.unplaced).toEqual([]);
  });

  it('a volume that does not offer the access mode (or the attachment mode) asked for is refused everywhere; one that says nothing of its modes is not checked here', () => {
    const volumes = { data: volume('data', { capabilities: [{ accessMode: 'multi-node-reader-only', attachmentMode: 'file-system' }] }) };
    const one = (d: VolumeDemand) => [service('web', [group('web', 1, { volumes: [d] })])];
    const everywhere = (why: string) => ({ n1: why, n2: why, n3: why });

    const writer = schedule(input({ volumes, jobs: one(demand('data', 'multi-node-multi-writer')) }));
    expect(writer.unplaced[0]?.reasons).toEqual(everywhere('volume "data" offers no multi-node-multi-writer capability'));
    const block = schedule(input({ volumes, jobs: one({ ...demand('data', 'multi-node-reader-only', true), attachmentMode: 'block' }) }));
    expect(block.unplaced[0]?.reasons).toEqual(everywhere('volume "data" offers no multi-node-reader-only/block capability'));

    expect(
      where(
        schedule(input({ volumes, jobs: one({ ...demand('data', 'multi-node-reader-only', true), attachmentMode: 'file-system' }) })).put,
      ),
    ).toEqual({ 'web:web/0': 'n1' });
    // A demand from before attachment modes were recorded: the access mode alone is checked.
    expect(where(schedule(input({ volumes, jobs: one(demand('data', 'multi-node-reader-only', true)) })).put)).toEqual({
      'web:web/0': 'n1',
    });
    expect(where(schedule(input({ volumes: { data: volume('data') }, jobs: one(demand('data', 'multi-node-multi-writer')) })).put)).toEqual(
      { 'web:web/0': 'n1' },
    );
  });

  it('a volume whose claims cannot be read is refused everywhere (its holders are unknown); other volumes are not', () => {
    const volumes = { data: volume('data'), logs: volume('logs') };
    const jobs = [
      service('web', [group('web', 1, { volumes: [rw('data')] })]),
      service('ship', [group('ship', 1, { volumes: [rw('logs')] })]),
    ];
    const result = schedule(input({ volumes, jobs, unreadableClaims: ['data'] }));
    expect(where(result.put)).toEqual({ 'ship:ship/0': 'n1' });
    const why = 'the claims of volume "data" in etcd cannot be read';
    expect(result.unplaced).toEqual([{ jobId: 'web', group: 'web', slot: 'web/0', reasons: { n1: why, n2: why, n3: why } }]);
  });
});

describe("schedule: a node's cap on a job's allocs", () => {
  it("counts the job's own slots on the node (kept ones too), not other jobs'", () => {
    const nodes = [node('n1', { maxAllocsPerJob: 1 }), node('n2', { maxAllocsPerJob: 1 }), node('n3')];
    const placements = [placed('other', 'other/0', 'n2'), placed('other', 'other/1', 'n2'), placed('web', 'web/0', 'n1')];
    const result = schedule(input({ nodes, placements, jobs: [service('other', [group('other', 2)]), service('web', [group('web', 4)])] }));
    // n1 has its one (web/0); n2 takes one of web though it runs two of another job; the rest go to n3, which has no cap.
    expect(where(result.put)).toEqual({ 'web:web/1': 'n3', 'web:web/2': 'n2', 'web:web/3': 'n3' });
    expect(result.unplaced).toEqual([]);
  });

  it('leaves what no node may take any more pending, with the cap as the reason', () => {
    const nodes = [node('n1', { maxAllocsPerJob: 2 }), node('n2', { maxAllocsPerJob: 1 })];
    const result = schedule(input({ nodes, jobs: [service('web', [group('web', 4)])] }));
    expect(perNode(result.put)).toEqual({ n1: 2, n2: 1 });
    expect(result.unplaced).toEqual([
      {
        jobId: 'web',
        group: 'web',
        slot: 'web/3',
        reasons: {
          n1: 'the node runs at most 2 allocs of a job (its limits { max_allocs_per_job })',
          n2: 'the node runs at most 1 allocs of a job (its limits { max_allocs_per_job })',
        },
      },
    ]);
  });
});

describe('schedule: nodes down', () => {
  const web = service('web', [group('web', 3)]);
  const spread = () => [placed('web', 'web/0', 'n1'), placed('web', 'web/1', 'n2'), placed('web', 'web/2', 'n3')];
  const n1Down = () => [node('n1', { status: 'down' }), node('n2'), node('n3')];

  it('a service slot on a node down past the grace moves to another node, saying where it was', () => {
    const result = schedule(input({ nodes: n1Down(), placements: spread(), jobs: [web], downSince: { n1: NOW - GRACE } }));
    expect(result.put).toEqual([
      { slot: 'web/0', jobId: 'web', group: 'web', index: 0, node: 'n2', jobVersion: 0, placedAt: NOW, movedFrom: 'n1' },
    ]);
    // Written over in place (the same slot key), not removed.
    expect(result.remove).toEqual([]);
  });

  it('a service slot on a node down within the grace stays', () => {
    const result = schedule(input({ nodes: n1Down(), placements: spread(), jobs: [web], downSince: { n1: NOW - GRACE + 1 } }));
    expect(result).toEqual({ put: [], remove: [], unplaced: [] });
  });

  it('a node down with no record of since when stays until its grace is counted; a node ready again keeps its slots', () => {
    expect(schedule(input({ nodes: n1Down(), placements: spread(), jobs: [web] }))).toEqual({ put: [], remove: [], unplaced: [] });
    expect(schedule(input({ placements: spread(), jobs: [web], downSince: { n1: NOW - 10 * GRACE } }))).toEqual({
      put: [],
      remove: [],
      unplaced: [],
    });
  });

  it('the grace etcd measured decides when given: a node it names has its slots moved, one it does not keeps them, whatever downSince says', () => {
    const kept = schedule(input({ nodes: n1Down(), placements: spread(), jobs: [web], downSince: { n1: NOW - 10 * GRACE }, expired: [] }));
    expect(kept).toEqual({ put: [], remove: [], unplaced: [] });
    const moved = schedule(input({ nodes: n1Down(), placements: spread(), jobs: [web], expired: ['n1'] }));
    expect(moved.put.map((p) => [p.slot, p.node, p.movedFrom])).toEqual([['web/0', 'n2', 'n1']]);
    // A node ready in the view keeps its slots even if named (a view newer than the grace's end).
    expect(schedule(input({ placements: spread(), jobs: [web], expired: ['n1'] }))).toEqual({ put: [], remove: [], unplaced: [] });
  });

  it('a slot that cannot move stays where it is and is reported unplaced', () => {
    const nodes = [node('n1', { status: 'down' }), node('n2', { drivers: [] })];
    const result = schedule(
      input({
        nodes,
        placements: [placed('web', 'web/0', 'n1')],
        jobs: [service('web', [group('web', 1)])],
        downSince: { n1: NOW - GRACE },
      }),
    );
    expect(result.put).toEqual([]);
    expect(result.remove).toEqual([]);
    expect(result.unplaced).toEqual([
      { jobId: 'web', group: 'web', slot: 'web/0', reasons: { n1: 'the node is down', n2: 'no raw_exec driver on the node' } },
    ]);
  });
});

describe('schedule: job changes', () => {
  it('a stopped job has every slot removed, and nothing placed', () => {
    const placements = [placed('web', 'web/0', 'n1'), placed('web', 'web/1', 'n2'), placed('agent', 'agent/@n1', 'n1')];
    const jobs = [
      { ...service('web', [group('web', 2)]), stopped: true },
      { ...system('agent', [group('agent', 1)]), stopped: true },
    ];
    const result = schedule(input({ placements, jobs }));
    expect(result.remove).toEqual(placements);
    expect(result.put).toEqual([]);
    expect(result.unplaced).toEqual([]);
  });

  it('the slots of a job no longer known, and of a group no longer in the job, are removed', () => {
    const placements = [placed('gone', 'gone/0', 'n1'), placed('web', 'web/0', 'n1'), placed('web', 'cache/0', 'n2')];
    const result = schedule(input({ placements, jobs: [service('web', [group('web', 1)])] }));
    expect(result.remove).toEqual([placements[0], placements[2]]);
    expect(result.put).toEqual([]);
  });

  it('a smaller count removes the slots at and past it', () => {
    const placements = [0, 1, 2, 3, 4].map((i) => placed('web', `web/${i}`, `n${(i % 3) + 1}`));
    const result = schedule(input({ placements, jobs: [service('web', [group('web', 2)])] }));
    expect(result.remove.map((p) => p.slot)).toEqual(['web/2', 'web/3', 'web/4']);
    expect(result.put).toEqual([]);
  });

  it('a new job version writes every kept slot again with it, where it is', () => {
    const placements = [
      placed('web', 'web/0', 'n1'),
      placed('web', 'web/1', 'n2'),
      placed('web', 'web/2', 'n3'),
      placed('agent', 'agent/@n2', 'n2'),
    ];
    const result = schedule(input({ placements, jobs: [service('web', [group('web', 2)], 1), system('agent', [group('agent', 1)], 4)] }));
    expect(result.remove.map((p) => p.slot)).toEqual(['web/2']);
    // Jobs in id order: agent's slots (new ones placed now, the kept one re-written), then web's.
    expect(result.put).toEqual([
      { ...placed('agent', 'agent/@n1', 'n1'), jobVersion: 4, placedAt: NOW },
      { ...placements[3], jobVersion: 4 },
      { ...placed('agent', 'agent/@n3', 'n3'), jobVersion: 4, placedAt: NOW },
      { ...placements[0], jobVersion: 1 },
      { ...placements[1], jobVersion: 1 },
    ]);
  });

  it('a kept service slot whose new version its node cannot run moves to a node that can, saying where it was', () => {
    const nodes = [node('n1'), node('n2', { drivers: ['docker'] }), node('n3', { drivers: ['docker'] })];
    const result = schedule(
      input({ nodes, placements: [placed('web', 'web/0', 'n1')], jobs: [service('web', [group('web', 1, { drivers: ['docker'] })], 1)] }),
    );
    expect(result.put).toEqual([
      { slot: 'web/0', jobId: 'web', group: 'web', index: 0, node: 'n2', jobVersion: 1, placedAt: NOW, movedFrom: 'n1' },
    ]);
    expect(result.remove).toEqual([]);
    expect(result.unplaced).toEqual([]);
  });

  it("with no node that can run the new version, the slot stays at its old version and the new one is pending, its own node's reason with the rest", () => {
    const nodes = [node('n1'), node('n2')];
    const result = schedule(
      input({ nodes, placements: [placed('web', 'web/0', 'n1')], jobs: [service('web', [group('web', 1, { drivers: ['docker'] })], 1)] }),
    );
    expect(result.put).toEqual([]);
    expect(result.remove).toEqual([]);
    expect(result.unplaced).toEqual([
      { jobId: 'web', group: 'web', slot: 'web/0', reasons: { n1: 'no docker driver on the node', n2: 'no docker driver on the node' } },
    ]);
  });

  it('a kept system slot whose new version its node cannot run goes; the nodes that can run it keep theirs at the new version', () => {
    const nodes = [node('n1', { drivers: ['docker'] }), node('n2'), node('n3')];
    const placements = [placed('agent', 'agent/@n1', 'n1'), placed('agent', 'agent/@n2', 'n2')];
    const result = schedule(input({ nodes, placements, jobs: [system('agent', [group('agent', 1, { drivers: ['docker'] })], 1)] }));
    expect(result.put).toEqual([{ ...placements[0], jobVersion: 1 }]);
    expect(result.remove).toEqual([placements[1]]);
    expect(result.unplaced).toEqual([]);
  });

  it("a kept slot is not moved for its node plugin's health alone (a restarted node says its restored plugins unhealthy until checked)", () => {
    const vol = { v: volume('v') };
    const nodes = [node('n1', { plugins: [plugin({ topology: { zone: 'n1' }, healthy: false })] }), node('n2'), node('n3')];
    const job = service('web', [group('app', 1, { volumes: [demand('v', 'single-node-writer')] })], 1);
    const r = schedule(
      input({
        jobs: [job],
        nodes,
        volumes: vol,
        placements: [placed('web', 'app/0', 'n1')],
        claims: { v: [claim('a1', 'n1', 'single-node-writer', 'write')] },
      }),
    );
    expect(r.put).toEqual([placed('web', 'app/0', 'n1', { jobVersion: 1 })]);
    expect(r.unplaced).toEqual([]);
    // A new slot is still placed only where the plugin is healthy.
    const fresh = schedule(
      input({
        jobs: [service('api', [group('app', 1, { volumes: [demand('w', 'multi-node-multi-writer')] })])],
        nodes,
        volumes: { w: volume('w') },
      }),
    );
    expect(fresh.put.map((p) => p.node)).not.toContain('n1');
  });

  it("a job submitted again as the other type keeps none of its old type's slots", () => {
    // system → service: the per-node slots go, the count is placed.
    const fromSystem = schedule(
      input({
        placements: [placed('web', 'web/@n1', 'n1'), placed('web', 'web/@n2', 'n2'), placed('web', 'web/@n3', 'n3')],
        jobs: [service('web', [group('web', 1)], 1)],
      }),
    );
    expect(fromSystem.remove.map((p) => p.slot)).toEqual(['web/@n1', 'web/@n2', 'web/@n3']);
    expect(fromSystem.put.map((p) => [p.slot, p.jobVersion])).toEqual([['web/0', 1]]);
    // service → system: the indexed slots go, every node gets its own.
    const fromService = schedule(
      input({ placements: [placed('web', 'web/0', 'n1'), placed('web', 'web/1', 'n2')], jobs: [system('web', [group('web', 1)], 1)] }),
    );
    expect(fromService.remove.map((p) => p.slot)).toEqual(['web/0', 'web/1']);
    expect(fromService.put.map((p) => p.slot)).toEqual(['web/@n1', 'web/@n2', 'web/@n3']);
  });
});

describe('schedule: determinism', () => {
  it('gives the same answer for the same input, whatever the order of its nodes, jobs and claims', () => {
    const nodes = [
      node('n1'),
      node('n2', { status: 'down' }),
      node('n3', { drivers: ['raw_exec', 'docker'] }),
      node('n4', { plugins: [plugin({ maxVolumes: 1 })] }),
    ];
    const volumes = { data: volume('data'), logs: volume('logs') };
    const claims = {
      data: [claim('x', 'n3', 'single-node-writer', 'write')],
      logs: [claim('y', 'n1', 'multi-node-multi-writer', 'write'), claim('z', 'n4', 'multi-node-multi-writer', 'write')],
    };
    const jobs = [
      service('web', [group('web', 7), group('db', 2, { volumes: [demand('data', 'single-node-writer', true)] })], 3),
      system('agent', [group('agent', 1, { drivers: ['docker'] })]),
      service('logs', [group('ship', 4, { volumes: [demand('logs', 'multi-node-multi-writer')] })]),
      service('blocked', [group('b', 1, { drivers: ['qemu'] })]),
    ];
    const placements = [placed('web', 'web/0', 'n2'), placed('web', 'web/1', 'n4'), placed('old', 'old/0', 'n1')];
    const base = input({ nodes, volumes, claims, jobs, placements, downSince: { n2: NOW - 2 * GRACE } });
    const first = schedule(base);
    expect(schedule(structuredClone(base))).toEqual(first);
    const shuffled = schedule({
      ...base,
      nodes: [...nodes].reverse(),
      jobs: [...jobs].reverse(),
      claims: { logs: [...claims.logs].reverse(), data: claims.data },
    });
    expect(shuffled).toEqual(first);
    // And it did decide something of every kind, so the comparison means something.
    expect(first.put.some((p) => p.movedFrom === 'n2')).toBe(true);
    expect(first.remove.map((p) => p.jobId)).toEqual(['old']);
    expect(first.unplaced.map((u) => u.jobId)).toContain('blocked');
  });
});
