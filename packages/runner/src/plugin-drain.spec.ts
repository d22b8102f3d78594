import { FakeClock } from '@csiplug/core/testing';
import type { TaskEvent } from '@csiplug/hooks';
import type { VolumeMountRecord } from '@csiplug/volumes';
import { EVENT_PLUGIN_DRAINING, EVENT_PLUGIN_LEAVES_MOUNTS, type PluginDrainDeps, drainBeforePluginStop } from './plugin-drain';

const PLUGIN_ALLOC = 'p0000000-0000-4000-8000-000000000000';

function record(allocId: string, volumeId: string, desired: 'mounted' | 'unmounted', pluginId = 'hostpath'): VolumeMountRecord {
  return {
    allocId,
    name: 'data',
    volumeId,
    externalId: volumeId,
    pluginId,
    usage: { accessMode: 'single-node-writer', attachmentMode: 'file-system', readOnly: false },
    desired,
    claimed: true,
    staged: true,
    published: desired === 'mounted',
    attempts: 0,
    since: 0,
  } as VolumeMountRecord;
}

describe('drainBeforePluginStop: a node plugin waits for the unmounts that need it', () => {
  let clock: FakeClock;
  let records: VolumeMountRecord[];
  let ending: Set<string>;
  let others: number;
  let healthy: boolean | undefined;
  let events: TaskEvent[];
  let retried: string[];
  let leaving: boolean;

  beforeEach(() => {
    clock = new FakeClock();
    records = [];
    ending = new Set();
    others = 0;
    healthy = true;
    events = [];
    retried = [];
    leaving = false;
  });

  const deps = (): PluginDrainDeps => ({
    clock,
    records: () => records,
    allocEnding: (id) => ending.has(id),
    otherInstances: () => others,
    healthy: () => healthy,
    retryNow: (p) => retried.push(p),
    leaving: () => leaving,
    limitMs: 10_000,
    pollMs: 100,
  });
  const drain = (signal = new AbortController().signal, monolith = false) =>
    drainBeforePluginStop(deps(), PLUGIN_ALLOC, [{ id: 'hostpath', monolith }], (e) => events.push(e), signal);
  /** Resolves to true once `p` settled, after `ms` of the fake clock. */
  const settledAfter = async (p: Promise<void>, ms: number) => {
    let done = false;
    void p.then(() => (done = true));
    await clock.advance(ms);
    return done;
  };

  it('waits while a pending unmount or an ending alloc still needs the plugin, and goes on once they are done', async () => {
    records = [record('a1', 'vol-a', 'unmounted'), record('a2', 'vol-b', 'mounted')];
    ending.add('a2');
    const p = drain();
    expect(await settledAfter(p, 500)).toBe(false);
    expect(events.map((e) => e.type)).toEqual([EVENT_PLUGIN_DRAINING]);
    expect(events[0]!.message).toMatch(/vol-a \(alloc a1\), vol-b \(alloc a2\)/);
    records = [record('a2', 'vol-b', 'unmounted')];
    expect(await settledAfter(p, 500)).toBe(false);
    records = [];
    expect(await settledAfter(p, 200)).toBe(true);
    expect(events).toHaveLength(1);
    // Each pending unmount is retried at once when first seen, not at its backoff.
    expect(retried).toEqual(['hostpath', 'hostpath']);
  });

  it('waits for a plugin not judged yet (a restarted agent finishing a teardown), and stops waiting for an unmount that failed twice meanwhile', async () => {
    healthy = undefined;
    records = [record('a1', 'vol-a', 'unmounted')];
    const p = drain();
    expect(await settledAfter(p, 500)).toBe(false);
    healthy = true;
    records = [{ ...record('a1', 'vol-a', 'unmounted'), attempts: 1 }];
    expect(await settledAfter(p, 500)).toBe(false);
    records = [{ ...record('a1', 'vol-a', 'unmounted'), attempts: 2, lastError: 'rpc error: code = Internal desc = boom' }];
    expect(await settledAfter(p, 200)).toBe(true);
    expect(events.map((e) => e.type)).toEqual([EVENT_PLUGIN_DRAINING, EVENT_PLUGIN_LEAVES_MOUNTS]);
    expect(events[1]!.message).toMatch(/failed again while it waited \(rpc error: code = Internal desc = boom\): vol-a/);
  });

  it('waits for a claim left to release only when it serves the controller too (a monolith)', async () => {
    const claimOnly = { ...record('a1', 'vol-a', 'unmounted'), staged: false, published: false };
    records = [claimOnly];
    await drain();
    expect(events).toEqual([]);
    const p = drain(undefined, true);
    expect(await settledAfter(p, 500)).toBe(false);
    records = [];
    expect(await settledAfter(p, 200)).toBe(true);
  });

  it('looks again at the other instances: one registered while it waits serves the unmounts, and the stop goes on', async () => {
    records = [record('a1', 'vol-a', 'unmounted')];
    const p = drain();
    expect(await settledAfter(p, 500)).toBe(false);
    others = 1;
    expect(await settledAfter(p, 200)).toBe(true);
    expect(events.map((e) => e.type)).toEqual([EVENT_PLUGIN_DRAINING]);
  });

  it('does not wait when another instance of the plugin serves (an upgrade), or when nothing needs it', async () => {
    others = 1;
    records = [record('a1', 'vol-a', 'unmounted')];
    await drain();
    others = 0;
    records = [record('a1', 'vol-a', 'unmounted', 'other-plugin')];
    await drain();
    expect(events).toEqual([]);
  });

  it('does not wait for an unhealthy plugin (waiting cannot help), and says what it leaves', async () => {
    healthy = false;
    records = [record('a1', 'vol-a', 'unmounted')];
    await drain();
    expect(events.map((e) => e.type)).toEqual([EVENT_PLUGIN_LEAVES_MOUNTS]);
    expect(events[0]!.message).toMatch(/not healthy.*vol-a \(alloc a1\).*runs on this node again/);
    // Not retried through a plugin that cannot serve it (that would only count a failure and lengthen its backoff).
    expect(retried).toEqual([]);
  });

  it('gives up after one failure on an unmount that was already failing when first seen (its next retry is far off)', async () => {
    records = [{ ...record('a1', 'vol-a', 'unmounted'), attempts: 6 }];
    const p = drain();
    expect(await settledAfter(p, 500)).toBe(false);
    expect(retried).toEqual(['hostpath']);
    records = [{ ...record('a1', 'vol-a', 'unmounted'), attempts: 7, lastError: 'busy' }];
    expect(await settledAfter(p, 200)).toBe(true);
    expect(events.map((e) => e.type)).toEqual([EVENT_PLUGIN_DRAINING, EVENT_PLUGIN_LEAVES_MOUNTS]);
  });

  it('stops waiting at its bound and says what was not done', async () => {
    records = [record('a1', 'vol-a', 'unmounted')];
    const p = drain();
    expect(await settledAfter(p, 9_000)).toBe(false);
    expect(await settledAfter(p, 1_200)).toBe(true);
    expect(events.map((e) => e.type)).toEqual([EVENT_PLUGIN_DRAINING, EVENT_PLUGIN_LEAVES_MOUNTS]);
    expect(events[1]!.message).toMatch(/not done within 10s/);
  });

  it('does not wait for the live mounts of allocs that are not ending, but says they stay', async () => {
    records = [record('a1', 'vol-a', 'mounted'), record(PLUGIN_ALLOC, 'vol-self', 'mounted')];
    await drain();
    expect(events.map((e) => e.type)).toEqual([EVENT_PLUGIN_LEAVES_MOUNTS]);
    expect(events[0]!.message).toMatch(/^1 volume\(s\) stay mounted through it for allocs that are not stopping: vol-a \(alloc a1\)/);
  });

  it('ends at once when its runner is detached (its signal), saying nothing more', async () => {
    records = [record('a1', 'vol-a', 'unmounted')];
    const ac = new AbortController();
    const p = drain(ac.signal);
    await clock.advance(100);
    ac.abort(new Error('the agent is shutting down'));
    await p;
    expect(events.map((e) => e.type)).toEqual([EVENT_PLUGIN_DRAINING]);
  });

  it('ends at its next look when the agent goes away leaving its tasks running, saying nothing more', async () => {
    records = [record('a1', 'vol-a', 'unmounted')];
    const p = drain();
    expect(await settledAfter(p, 100)).toBe(false);
    leaving = true;
    expect(await settledAfter(p, 100)).toBe(true);
    expect(events.map((e) => e.type)).toEqual([EVENT_PLUGIN_DRAINING]);
  });
});
