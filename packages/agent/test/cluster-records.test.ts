// Cluster mode against a bad job record written straight into etcd (not
// through any agent's API): two real agents on one etcd member. A 195-byte
// record asking for 100000 allocs is held to the limits a `job run` is held
// to (limits { max_allocs_per_job } times the nodes): each agent leaves it
// out with one error naming its key and the limit, keeps answering its API,
// keeps placing and running other jobs, and stops on SIGTERM by itself
// (not by the shutdown limit giving up). And a purge decided by an agent
// whose clock is two days behind (written here as that agent would write
// it) is still honoured by a node that was away: the other agent's passes
// keep its tombstone (etcd's lease of a day measures it, not a clock).
import { EtcdJobs, connectEtcd } from '@csiplug/cluster';
import { MemoryLogger } from '@csiplug/core';
import { EtcdTestCluster } from '@csiplug/cluster/testing';
import { jobToNomadJson, parseJobspec } from '@csiplug/jobspec';
import { AgentHarness, isAlive, pollUntil, runningAlloc, sleeperHcl } from './support/agent-process';

jest.setTimeout(300_000);

const NAMES = ['n1', 'n2'] as const;

/** The agent's JSON log lines at level error (pino's 50) that name `key`. */
function errorsAbout(log: string, key: string): Array<{ msg: string; error?: string }> {
  const out: Array<{ msg: string; error?: string }> = [];
  for (const line of log.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const entry = JSON.parse(line) as { level?: number; msg: string; key?: string; error?: string };
      if (entry.level === 50 && entry.key === key) out.push(entry);
    } catch {
      // a line cut in two by the pipe: not ours to read
    }
  }
  return out;
}

describe('job records read from etcd (two agents)', () => {
  let etcd: EtcdTestCluster;
  const agents: AgentHarness[] = [];
  let conn: ReturnType<typeof connectEtcd>;
  /** Task processes a test saw: killed at the end if still there (a failed test may leave one whose agent is gone). */
  const taskPids: number[] = [];

  const config = (name: string, endpoints: string) => `node_id = "${name}"
limits {
  max_allocs_per_job = 8
}
cluster {
  etcd {
    endpoints = [${endpoints}]
    prefix    = "e2e"
  }
  heartbeat_ttl    = "3s"
  disconnect_grace = "30s"
}`;

  beforeAll(async () => {
    etcd = await EtcdTestCluster.start(1);
    const endpoints = etcd.endpoints.map((e) => JSON.stringify(e)).join(', ');
    for (const name of NAMES) agents.push(new AgentHarness(config(name, endpoints)));
    await Promise.all(agents.map((a) => a.start()));
    conn = connectEtcd({ endpoints: etcd.endpoints, prefix: 'e2e/', dialTimeoutMs: 2_000 });
    await Promise.all(
      agents.map((a) =>
        pollUntil(
          'both nodes ready',
          async () =>
            (await a.api.listNodes().catch(() => undefined))?.nodes.filter((n) => n.status === 'ready').length === 2 ? true : undefined,
          60_000,
        ),
      ),
    );
  });

  afterAll(async () => {
    conn?.close();
    for (const a of agents) await a.cleanup();
    for (const pid of taskPids) if (isAlive(pid)) process.kill(pid, 'SIGKILL');
    await etcd?.stop();
  });

  it('a 195-byte record asking for 100000 allocs is left out with one error naming its key and the limit; the agents answer, place other jobs, and stop on SIGTERM', async () => {
    const body = JSON.stringify({
      id: 'big',
      type: 'service',
      version: 0,
      stopped: false,
      submittedAt: 0,
      groups: [{ name: 'g', count: 100_000, drivers: ['raw_exec'], volumes: [] }],
      spec: { pad: 'x'.repeat(29) },
    });
    expect(Buffer.byteLength(body)).toBe(195);
    await conn.kv.put('jobs/big').value(body);

    // Each agent says it once (its passes run every second: the same record, the same revision, is not said again).
    for (const a of agents)
      await pollUntil(
        'the record said to be over the limit',
        async () => (errorsAbout(a.log, 'jobs/big').length > 0 ? true : undefined),
        60_000,
      );
    for (const a of agents) expect((await a.api.health()).ok).toBe(true);

    // Other jobs go on: placed, and run where placed.
    const other = await agents[0]!.api.runJob(jobToNomadJson(await parseJobspec(sleeperHcl('other'), 'other.hcl')));
    expect(other.cluster?.placements).toHaveLength(1);
    const node = other.cluster!.placements[0]!.node;
    const runner = agents[NAMES.indexOf(node as (typeof NAMES)[number])]!;
    await pollUntil(
      'the other job running where it was placed',
      async () => runningAlloc(await runner.api.getJob('other').catch(() => undefined)),
      60_000,
    );
    for (const a of agents) {
      expect((await a.api.health()).ok).toBe(true);
      const said = errorsAbout(a.log, 'jobs/big');
      expect(said).toHaveLength(1);
      // 8 per node (limits { max_allocs_per_job }) times the 2 nodes.
      expect(said[0]!.error).toContain('asks for 100000 allocs');
      expect(said[0]!.error).toContain('at most 16 of a job in all');
    }

    // SIGTERM: the agent stops by itself (its shutdown finished), not because the shutdown limit gave up on it.
    const proc = agents[1]!.proc!;
    const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
    proc.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(agents[1]!.log).toContain('csiplug agent stopped');
    expect(agents[1]!.log).not.toContain('leaving now');
  });

  it('a purge decided by an agent whose clock is two days behind is kept by the passes of an agent with a right clock, and the node that was away purges its alloc when it comes back', async () => {
    if (!agents[1]!.proc || agents[1]!.proc.exitCode !== null) await agents[1]!.start();
    await Promise.all(
      agents.map((a) =>
        pollUntil(
          'both nodes ready',
          async () =>
            (await a.api.listNodes().catch(() => undefined))?.nodes.filter((n) => n.status === 'ready').length === 2 ? true : undefined,
          60_000,
        ),
      ),
    );
    const run = await agents[0]!.api.runJob(jobToNomadJson(await parseJobspec(sleeperHcl('gone'), 'gone.hcl')));
    const awayName = run.cluster!.placements[0]!.node;
    const away = agents[NAMES.indexOf(awayName as (typeof NAMES)[number])]!;
    const alloc = await pollUntil(
      'the job running where it was placed',
      async () => runningAlloc(await away.api.getJob('gone').catch(() => undefined)),
      60_000,
    );
    const pid = away.taskPid(alloc.id, 'main');
    taskPids.push(pid);

    // The node goes away (its task runs on), and an agent two days behind purges the job.
    await away.kill('SIGTERM');
    const DAY = 24 * 3_600_000;
    const skewed = new EtcdJobs(conn, new MemoryLogger(), () => Date.now() - 2 * DAY);
    expect(await skewed.stop('gone', true, Date.now() - 2 * DAY)).toMatchObject({ purged: true });
    // The other agent's passes remove the job's slot; the tombstone stays.
    await pollUntil(
      "the purged job's slot removed",
      async () => ((await conn.kv.getAll().prefix('placements/gone/').keys()).length === 0 ? true : undefined),
      60_000,
    );
    expect(await conn.kv.get('jobs/gone').exists()).toBe(true);

    // Back: it purges what it still ran of the job.
    await away.start();
    await pollUntil("the purged job's task stopped on the node that was away", async () => (isAlive(pid) ? undefined : true), 60_000);
    await pollUntil(
      'the purged job gone from the node that was away',
      async () => ((await away.api.getJob('gone').catch(() => undefined)) === undefined ? true : undefined),
      60_000,
    );
    expect(away.log).not.toContain('a job runs here that the cluster does not know');
  });
});
