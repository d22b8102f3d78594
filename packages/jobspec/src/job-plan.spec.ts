// planJob: what a run would do to each alloc, and the version it makes.
import { makeAlloc, makeJob } from './testing';
import type { Alloc } from './model';
import * as jobDiff from './job-diff';
import { planJob, type JobPlan } from './job-plan';

/** Each group's allocs as `update name`, in the plan's order. */
function updates(plan: JobPlan): string[] {
  return plan.groups.flatMap((g) => g.allocs.map((a) => `${a.update} ${a.name}`));
}

describe('planJob', () => {
  const v0 = makeJob('web', { app: { count: 2 } });

  it('plans a new job as creates of version 0', () => {
    const plan = planJob(v0, []);
    expect(plan).toMatchObject({ jobId: 'web', changed: true, version: { to: 0 }, fields: [] });
    expect(plan.version.from).toBeUndefined();
    expect(plan.groups[0]).toMatchObject({ name: 'app', change: 'added', count: { from: 0, to: 2 }, updates: { create: 2, ignore: 0 } });
    expect(plan.groups[0]!.allocs.map((a) => a.reason)).toEqual(['new job', 'new job']);
  });

  it('diffs a group once per version its allocs run, not once per alloc', () => {
    const v1 = makeJob('web', { app: { count: 40, env: { A: '1' } } });
    const allocs = Array.from({ length: 40 }, (_, i) => makeAlloc(makeJob('web', { app: { count: 40 } }), 'app', i));
    const spy = jest.spyOn(jobDiff, 'diffGroup');
    try {
      const plan = planJob(v1, allocs);
      expect(plan.groups[0]!.updates['create/destroy']).toBe(40);
      // Every alloc runs version 0 (each with its own copy of the spec, as restored from the state): one diff.
      expect(spy).toHaveBeenCalledTimes(1);
      // The changes are given once, as the group's fields, not repeated on each alloc.
      expect(plan.groups[0]!.fields).toHaveLength(1);
      expect(plan.groups[0]!.allocs.filter((a) => a.changes)).toEqual([]);
    } finally {
      spy.mockRestore();
    }
  });

  it('changes nothing when the spec is the current version and every alloc runs it', () => {
    const allocs = [makeAlloc(v0, 'app', 0), makeAlloc(v0, 'app', 1)];
    const plan = planJob(makeJob('web', { app: { count: 2 } }), allocs);
    expect(plan.changed).toBe(false);
    expect(plan.version).toEqual({ from: 0, to: 0 });
    expect(updates(plan)).toEqual(['ignore web.app[0]', 'ignore web.app[1]']);
    expect(plan.groups[0]!.change).toBe('none');
  });

  it('creates for a larger count and leaves the others be (updated in place to the new version)', () => {
    const allocs = [makeAlloc(v0, 'app', 0), makeAlloc(v0, 'app', 1)];
    const plan = planJob(makeJob('web', { app: { count: 3 } }), allocs);
    expect(plan.version).toEqual({ from: 0, to: 1 });
    expect(updates(plan)).toEqual(['in-place web.app[0]', 'in-place web.app[1]', 'create web.app[2]']);
    expect(plan.groups[0]).toMatchObject({ change: 'edited', count: { from: 2, to: 3 }, fields: [] });
    expect(plan.groups[0]!.allocs[2]!.reason).toBe('count 2 => 3');
    expect(plan.groups[0]!.allocs[0]!.reason).toBe('version 0 => 1; nothing this group runs changed');
  });

  it('destroys the highest indexes first for a smaller count', () => {
    const big = makeJob('web', { app: { count: 4 } });
    const allocs = [0, 1, 2, 3].map((i) => makeAlloc(big, 'app', i));
    const plan = planJob(makeJob('web', { app: { count: 2 } }), allocs);
    expect(updates(plan)).toEqual(['in-place web.app[0]', 'in-place web.app[1]', 'destroy web.app[2]', 'destroy web.app[3]']);
    const destroys = plan.groups[0]!.allocs.filter((a) => a.update === 'destroy');
    expect(destroys.map((a) => a.reason)).toEqual(['count 4 => 2', 'count 4 => 2']);
  });

  it('replaces every alloc of a group whose task changed, naming the change', () => {
    const allocs = [makeAlloc(v0, 'app', 0), makeAlloc(v0, 'app', 1)];
    const plan = planJob(makeJob('web', { app: { count: 2, env: { MODE: 'fast' } } }), allocs);
    expect(updates(plan)).toEqual(['create/destroy web.app[0]', 'create/destroy web.app[1]']);
    expect(plan.groups[0]!.allocs[0]).toMatchObject({ allocId: allocs[0]!.id, version: 0, reason: 'task "main" env.MODE: added ("fast")' });
    expect(plan.groups[0]!.order).toEqual({
      kind: 'stop-before-start',
      reason: "the old alloc stops before the new one starts (Nomad's order without canaries)",
    });
  });

  it('updates in place for an update block change: a new version, no new process', () => {
    const allocs = [makeAlloc(v0, 'app', 0), makeAlloc(v0, 'app', 1)];
    const plan = planJob(makeJob('web', { app: { count: 2, update: { max_parallel: 2 } } }), allocs);
    expect(plan.version).toEqual({ from: 0, to: 1 });
    expect(updates(plan)).toEqual(['in-place web.app[0]', 'in-place web.app[1]']);
    expect(plan.groups[0]!.allocs[0]!.reason).toBe('update.max_parallel: 1 => 2');
  });

  it('stops the allocs of a removed group and creates those of a new one', () => {
    const two = makeJob('web', { app: {}, old: {} });
    const allocs = [makeAlloc(two, 'app', 0), makeAlloc(two, 'old', 0)];
    const plan = planJob(makeJob('web', { app: {}, fresh: {} }), allocs);
    expect(plan.groups.map((g) => `${g.name} ${g.change}`)).toEqual(['app none', 'fresh added', 'old removed']);
    expect(updates(plan)).toEqual(['in-place web.app[0]', 'create web.fresh[0]', 'destroy web.old[0]']);
    expect(plan.groups[1]!.allocs[0]!.reason).toBe('group "fresh" is new');
    expect(plan.groups[2]!.allocs[0]!.reason).toBe('group "old" is no longer in the job');
  });

  it('replaces a failed alloc even when the spec is unchanged, without a new version', () => {
    const failed = makeAlloc(v0, 'app', 1, { clientStatus: 'failed' });
    const plan = planJob(v0, [makeAlloc(v0, 'app', 0), failed]);
    expect(plan).toMatchObject({ changed: true, version: { from: 0, to: 0 } });
    expect(plan.groups[0]!.allocs[1]).toMatchObject({
      update: 'create',
      index: 1,
      replaces: failed.id,
      reason: `replaces alloc ${failed.id.slice(0, 8)}, which is failed`,
    });
  });

  it('ignores stopped allocs, and runs a stopped job again at its version', () => {
    const stopped = [
      makeAlloc(v0, 'app', 0, { desiredStatus: 'stop', clientStatus: 'complete' }),
      makeAlloc(v0, 'app', 1, { desiredStatus: 'stop', clientStatus: 'complete' }),
    ];
    const plan = planJob(v0, stopped);
    expect(plan.version).toEqual({ from: 0, to: 0 });
    expect(updates(plan)).toEqual(['create web.app[0]', 'create web.app[1]']);
    expect(plan.groups[0]!.allocs[0]!.reason).toBe('no alloc holds index 0');
  });

  it('judges each alloc on its own when a failed rollout left two versions running', () => {
    const v1 = makeJob('web', { app: { count: 2, env: { V: '1' } } });
    const allocs = [makeAlloc(v1, 'app', 0, { jobVersion: 1 }), makeAlloc(v0, 'app', 1, { jobVersion: 0 })];
    const again = planJob(v1, allocs);
    expect(again.version).toEqual({ from: 1, to: 1 });
    expect(updates(again)).toEqual(['ignore web.app[0]', 'create/destroy web.app[1]']);
    const back = planJob(v0, allocs);
    expect(back.version).toEqual({ from: 1, to: 2 });
    expect(updates(back)).toEqual(['create/destroy web.app[0]', 'in-place web.app[1]']);
  });

  it('keeps one alloc per index: the one at the new version, else the one that needs no replacing, else the oldest', () => {
    const v1 = makeJob('web', { app: { env: { V: '1' } } });
    const old = makeAlloc(v0, 'app', 0, { jobVersion: 0, createdAt: 1 });
    const fresh = makeAlloc(v1, 'app', 0, { jobVersion: 1, createdAt: 2 });
    // Resumed at version 1: the new one stays, the old one goes once it is proven.
    const resumed = planJob(v1, [old, fresh]);
    expect(resumed.groups[0]!.allocs.map((a) => `${a.update} ${a.allocId}`)).toEqual([`ignore ${fresh.id}`, `destroy ${old.id}`]);
    expect(resumed.groups[0]!.allocs[1]).toMatchObject({ keeps: fresh.id });
    // Going back to version 0's spec: the old one needs nothing new.
    expect(planJob(makeJob('web', { app: { count: 1 } }), [old, fresh]).groups[0]!.allocs.map((a) => `${a.update} ${a.allocId}`)).toEqual([
      `in-place ${old.id}`,
      `destroy ${fresh.id}`,
    ]);
    // A third spec: both need replacing; the oldest is the one proven.
    const third = planJob(makeJob('web', { app: { env: { V: '3' } } }), [old, fresh]);
    expect(third.groups[0]!.allocs.map((a) => `${a.update} ${a.allocId}`)).toEqual([`create/destroy ${old.id}`, `destroy ${fresh.id}`]);
  });

  it('names the replacement order of a plugin group: create before destroy', () => {
    const p0 = makeJob('plug', { plugin: { plugin: 'hostpath' } });
    const plan = planJob(makeJob('plug', { plugin: { plugin: 'hostpath', env: { LOG: 'debug' } } }), [makeAlloc(p0, 'plugin', 0)]);
    expect(plan.groups[0]!.order?.kind).toBe('create-before-destroy');
    expect(plan.groups[0]!.update).toEqual({ maxParallel: 1, minHealthyTime: 10_000, healthyDeadline: 300_000, autoRevert: false });
  });

  it('reads allocs saved before versions existed as version 0', () => {
    const legacy: Alloc = makeAlloc(v0, 'app', 0);
    delete legacy.jobVersion;
    const plan = planJob(makeJob('web', { app: { count: 1 } }), [legacy]);
    expect(plan.version).toEqual({ from: 0, to: 1 });
  });

  it('counts a job name change as a new version, updated in place', () => {
    const plan = planJob(makeJob('web', { app: { count: 2 } }, { name: 'Web site' }), [makeAlloc(v0, 'app', 0), makeAlloc(v0, 'app', 1)]);
    expect(plan.fields.map((f) => f.field)).toEqual(['name']);
    expect(plan.version).toEqual({ from: 0, to: 1 });
    expect(updates(plan)).toEqual(['in-place web.app[0]', 'in-place web.app[1]']);
  });
});
