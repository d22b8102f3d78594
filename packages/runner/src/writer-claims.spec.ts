// The refusal of a run whose new allocs would wait for a write claim a live
// alloc holds, through the job updater over a fake agent: refused with the
// holder's alloc, job and group and what to do, nothing placed or stopped;
// queued when asked; no refusal for the job's own alloc the run replaces,
// for a reader, for a multi-writer mode, or for a holder that is stopping.
import { ConflictError } from '@csiplug/core';
import { flushMicrotasks } from '@csiplug/core/testing';
import type { JobSpec } from '@csiplug/jobspec';
import { FakeAgent, makeJob, type FakeAlloc } from '../test/support/deploy-fakes';
import { JobUpdater } from './job-updater';

const open = () => undefined;
const FAST = { min_healthy_time: '1s', healthy_deadline: '30s' };
const refuse = { refuseHeldWriterClaims: true };

async function running(agent: FakeAgent, updater: JobUpdater<FakeAlloc>, job: JobSpec): Promise<FakeAlloc> {
  await updater.run(job, open, refuse);
  const [alloc] = agent.allocsOf(job.id);
  alloc!.run();
  await flushMicrotasks(50);
  await agent.clock.advance(1_000);
  await flushMicrotasks(50);
  agent.timeline.length = 0;
  return alloc!;
}

async function refusal(p: Promise<unknown>): Promise<ConflictError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof ConflictError)) throw new Error(`expected a ConflictError, got ${String(err)}`);
  return err;
}

describe('a run whose new allocs need a write claim a live alloc holds', () => {
  let agent: FakeAgent;
  let updater: JobUpdater<FakeAlloc>;

  beforeEach(() => {
    agent = new FakeAgent();
    updater = new JobUpdater(agent);
  });

  it.each(['single-node-writer', 'single-node-single-writer', 'multi-node-single-writer'])(
    '%s: a second writer of another job is refused, naming the holder and what to do; nothing is placed',
    async (accessMode) => {
      const holder = await running(agent, updater, makeJob('first', { app: { volume: { source: 'vol-a', accessMode }, update: FAST } }));
      const second = makeJob('second', { web: { volume: { source: 'vol-a', accessMode } } });
      const err = await refusal(updater.run(second, open, refuse));
      expect(err.code).toBe('ECONFLICT');
      expect(err.message).toBe(
        `job "second" was not run, nothing was placed: group "web" writes to volume "vol-a" (${accessMode}: one writer at a time), ` +
          `and alloc ${holder.alloc.id} (first.app[0], job "first", group "app") holds its write claim. ` +
          `To run it, stop the holder first (csiplug job stop first); or run it with -detach (the API's queue=true) to queue the placement until the claim is free`,
      );
      expect(agent.allocsOf('second')).toEqual([]);
      expect(agent.timeline).toEqual([]);
      // Queued: placed, to wait for the claim.
      const queued = await updater.run(second, open);
      expect(queued.allocIds).toHaveLength(1);
      expect(agent.timeline).toEqual(['place second.web[0] v0']);
    },
  );

  it("the job's own alloc replaced by the run (stop-before-start) is no holder", async () => {
    const volume = { source: 'vol-a' };
    const first = await running(agent, updater, makeJob('web', { app: { volume, update: FAST } }));
    // A new version: the old alloc stops before its replacement claims the volume.
    const result = await updater.run(makeJob('web', { app: { volume, update: FAST, env: { V: '2' } } }), open, refuse);
    expect(result.plan.groups[0]).toMatchObject({ updates: { 'create/destroy': 1 }, order: { kind: 'stop-before-start' } });
    await flushMicrotasks(50);
    expect(agent.timeline[0]).toBe(`stop web.app[0] v0`);
    expect(first.alloc.desiredStatus).toBe('stop');
  });

  it('a count raised past one writer is refused, naming the alloc the job keeps', async () => {
    const volume = { source: 'vol-a' };
    const kept = await running(agent, updater, makeJob('web', { app: { volume, update: FAST } }));
    const err = await refusal(updater.run(makeJob('web', { app: { count: 2, volume, update: FAST } }), open, refuse));
    expect(err.message).toContain(`alloc ${kept.alloc.id} (web.app[0], job "web", group "app") holds its write claim`);
    expect(err.message).toContain(
      `keep one writer of the volume in job "web" (a count of 1 for the group that writes to it, or read_only = true for the others)`,
    );
    expect(agent.allocsOf('web')).toHaveLength(1);
  });

  it('a writer still starting (or queued for the claim) is named as such, and refuses the next one too', async () => {
    await updater.run(makeJob('first', { app: { volume: { source: 'vol-q' } } }), open);
    const [pending] = agent.allocsOf('first');
    expect(pending!.alloc.clientStatus).toBe('pending');
    const err = await refusal(updater.run(makeJob('second', { app: { volume: { source: 'vol-q' } } }), open, refuse));
    expect(err.message).toContain(
      `alloc ${pending!.alloc.id} (first.app[0], job "first", group "app") is starting with its write claim, held or first in line for it`,
    );
  });

  it('no refusal for a reader, a multi-writer mode, or a holder already stopping', async () => {
    await running(agent, updater, makeJob('w1', { app: { volume: { source: 'vol-a' }, update: FAST } }));
    await updater.run(makeJob('reader', { app: { volume: { source: 'vol-a', readOnly: true } } }), open, refuse);
    expect(agent.allocsOf('reader')).toHaveLength(1);

    await running(
      agent,
      updater,
      makeJob('m1', { app: { volume: { source: 'vol-m', accessMode: 'single-node-multi-writer' }, update: FAST } }),
    );
    await updater.run(makeJob('m2', { app: { volume: { source: 'vol-m', accessMode: 'single-node-multi-writer' } } }), open, refuse);
    expect(agent.allocsOf('m2')).toHaveLength(1);

    const stopping = await running(agent, updater, makeJob('s1', { app: { volume: { source: 'vol-s' }, update: FAST } }));
    stopping.alloc.desiredStatus = 'stop';
    await updater.run(makeJob('s2', { app: { volume: { source: 'vol-s' } } }), open, refuse);
    expect(agent.allocsOf('s2')).toHaveLength(1);
  });
});

describe('per_alloc volumes: each alloc writes to its own volume id', () => {
  let agent: FakeAgent;
  let updater: JobUpdater<FakeAlloc>;

  beforeEach(() => {
    agent = new FakeAgent();
    updater = new JobUpdater(agent);
  });

  it('a per_alloc writer holds db[<its index>], and a new writer of that id is refused, naming it', async () => {
    const holder = await running(agent, updater, makeJob('first', { app: { volume: { source: 'db', perAlloc: true }, update: FAST } }));
    const err = await refusal(updater.run(makeJob('second', { web: { volume: { source: 'db[0]' } } }), open, refuse));
    expect(err.message).toContain(`group "web" writes to volume "db[0]"`);
    expect(err.message).toContain(`alloc ${holder.alloc.id} (first.app[0], job "first", group "app") holds its write claim`);
    // A per_alloc writer of another job is checked against its own ids too.
    const err2 = await refusal(updater.run(makeJob('third', { web: { volume: { source: 'db', perAlloc: true } } }), open, refuse));
    expect(err2.message).toContain(`group "web" writes to volume "db[0]"`);
  });

  it('a per_alloc writer is no holder of the plain source id, nor of another index', async () => {
    await running(agent, updater, makeJob('first', { app: { volume: { source: 'db', perAlloc: true }, update: FAST } }));
    await updater.run(makeJob('plain', { web: { volume: { source: 'db' } } }), open, refuse);
    expect(agent.allocsOf('plain')).toHaveLength(1);
    await updater.run(makeJob('other', { web: { volume: { source: 'db[1]' } } }), open, refuse);
    expect(agent.allocsOf('other')).toHaveLength(1);
  });

  it('a per_alloc group of count 2 is no writer pair: each alloc has its own volume', async () => {
    const result = await updater.run(makeJob('pa', { app: { count: 2, volume: { source: 'db', perAlloc: true } } }), open, refuse);
    expect(result.allocIds).toHaveLength(2);
  });
});

describe("a run whose own new allocs would wait on each other's write claim", () => {
  let agent: FakeAgent;
  let updater: JobUpdater<FakeAlloc>;

  beforeEach(() => {
    agent = new FakeAgent();
    updater = new JobUpdater(agent);
  });

  it('a new job with count 2 writing to a single-writer volume is refused, saying to keep one writer', async () => {
    const err = await refusal(updater.run(makeJob('web', { app: { count: 2, volume: { source: 'vol-a' } } }), open, refuse));
    expect(err.message).toBe(
      `job "web" was not run, nothing was placed: group "app" writes to volume "vol-a" (single-node-writer: one writer at a time), ` +
        `and so would web.app[0] (group "app"), which this run places too: the two would wait on each other. ` +
        `To run it, keep one writer of the volume in job "web" (a count of 1 for the group that writes to it, or read_only = true for the others); ` +
        `or run it with -detach (the API's queue=true) to queue the placement until the claim is free`,
    );
    expect(agent.allocsOf('web')).toEqual([]);
  });

  it('two groups of one job writing to the same single-writer volume are refused', async () => {
    const volume = { source: 'vol-a', accessMode: 'single-node-single-writer' };
    const err = await refusal(updater.run(makeJob('web', { a: { volume }, b: { volume } }), open, refuse));
    expect(err.message).toContain(
      `group "b" writes to volume "vol-a" (single-node-single-writer: one writer at a time), and so would web.a[0]`,
    );
    expect(err.message).toContain(`keep one writer of the volume in job "web"`);
    expect(agent.allocsOf('web')).toEqual([]);
  });

  it('a reader group beside the writer, or a multi-writer mode, is no conflict', async () => {
    await updater.run(
      makeJob('rw', { a: { volume: { source: 'vol-a' } }, b: { volume: { source: 'vol-a', readOnly: true } } }),
      open,
      refuse,
    );
    expect(agent.allocsOf('rw')).toHaveLength(2);
    await updater.run(
      makeJob('mw', { a: { count: 2, volume: { source: 'vol-m', accessMode: 'single-node-multi-writer' } } }),
      open,
      refuse,
    );
    expect(agent.allocsOf('mw')).toHaveLength(2);
  });
});

describe('write claims the volume catalog records for allocs no longer live', () => {
  it('are holders, named by alloc id and what they wait for; a live alloc is not named twice', async () => {
    const agent = new FakeAgent();
    const updater = new JobUpdater(agent);
    const recorded = [{ volumeId: 'vol-a', allocId: 'gone-alloc', waitingFor: 'its unmount, which waits for plugin "hostpath"' }];
    const err = await refusal(
      updater.run(makeJob('web', { app: { volume: { source: 'vol-a' } } }), open, { ...refuse, recordedWriteClaims: () => recorded }),
    );
    expect(err.message).toBe(
      `job "web" was not run, nothing was placed: group "app" writes to volume "vol-a" (single-node-writer: one writer at a time), ` +
        `and alloc gone-alloc, no longer running, still holds its write claim in the volume catalog, waiting for its unmount, which waits for plugin "hostpath". ` +
        `To run it, let the unmount of alloc gone-alloc finish first (start the volume's plugin if it is away); ` +
        `or run it with -detach (the API's queue=true) to queue the placement until the claim is free`,
    );
    // Another volume's claim holds nothing back.
    await updater.run(makeJob('other', { app: { volume: { source: 'vol-b' } } }), open, { ...refuse, recordedWriteClaims: () => recorded });
    expect(agent.allocsOf('other')).toHaveLength(1);
    // The live alloc's own recorded claim is not a second holder.
    const [live] = agent.allocsOf('other');
    const again = await refusal(
      updater.run(makeJob('third', { app: { volume: { source: 'vol-b' } } }), open, {
        ...refuse,
        recordedWriteClaims: () => [{ volumeId: 'vol-b', allocId: live!.alloc.id, waitingFor: 'x' }],
      }),
    );
    expect(again.message).not.toContain('volume catalog');
  });
});

describe("the job's own stopping alloc with its claim recorded", () => {
  it('holds back no run of the same job while its unmount is under way with its plugin here; it does while the plugin is away', async () => {
    const agent = new FakeAgent();
    const updater = new JobUpdater(agent);
    const old = await running(agent, updater, makeJob('web', { app: { volume: { source: 'vol-a' }, update: FAST } }));
    // Stopped (job stop, or the job's own rollout): its unmount and release are under way.
    old.alloc.desiredStatus = 'stop';
    const claim = { volumeId: 'vol-a', allocId: old.alloc.id, waitingFor: 'its unmount by node plugin "hostpath"' };
    const away = await refusal(
      updater.run(makeJob('web', { app: { volume: { source: 'vol-a' }, count: 1 } }, { name: 'web-v2' }), open, {
        ...refuse,
        recordedWriteClaims: () => [{ ...claim, waitingFor: 'its unmount, which waits for node plugin "hostpath"', pluginAway: true }],
      }),
    );
    expect(away.message).toContain(`alloc ${old.alloc.id}, no longer running, still holds its write claim in the volume catalog`);
    // Its plugin here: the run goes ahead (the claim is let go shortly).
    await expect(
      updater.run(makeJob('web', { app: { volume: { source: 'vol-a' }, count: 1 } }, { name: 'web-v2' }), open, {
        ...refuse,
        recordedWriteClaims: () => [claim],
      }),
    ).resolves.toMatchObject({ jobId: 'web' });
    // Another job is held back by it all the same.
    const other = await refusal(
      updater.run(makeJob('other', { app: { volume: { source: 'vol-a' } } }), open, { ...refuse, recordedWriteClaims: () => [claim] }),
    );
    expect(other.message).toContain('volume "vol-a"');
  });
});

describe('two runs at once for two jobs writing the same single-writer volume', () => {
  it('do not both pass: the check runs again right before the plan is applied', async () => {
    const agent = new FakeAgent();
    const updater = new JobUpdater(agent);
    const runs = await Promise.allSettled([
      updater.run(makeJob('one', { app: { volume: { source: 'vol-a' } } }), open, refuse),
      updater.run(makeJob('two', { app: { volume: { source: 'vol-a' } } }), open, refuse),
    ]);
    expect(runs.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    expect(agent.allocsOf('one').length + agent.allocsOf('two').length).toBe(1);
    const refused = runs.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    expect(refused.reason).toBeInstanceOf(ConflictError);
  });
});
