// Which changes of a group need a new process, and how they are named.
import { makeJob } from './testing';
import type { GroupSpec, JobSpec } from './model';
import { validateJob } from './jobspec';
import { describeChange, diffGroup, diffJobFields, isDestructive, sameJob } from './job-diff';

const group = (job: JobSpec, name = 'app'): GroupSpec => job.groups.find((g) => g.name === name)!;

function diff(before: JobSpec, after: JobSpec) {
  return diffGroup(after, group(before), group(after));
}

describe('diffGroup', () => {
  it('names every added task once, however many (its cost per task is measured by bench/deploy/run.js)', () => {
    const tasks = (n: number) =>
      Object.fromEntries(
        Array.from({ length: n }, (_, i) => [
          `t${i}`,
          { driver: 'exec', config: { command: '/bin/sleep', args: ['1000'] }, env: { N: String(i) } },
        ]),
      );
    const before = validateJob({ job: { web: { group: { app: { task: tasks(1) } } } } });
    const after = validateJob({ job: { web: { group: { app: { task: tasks(751) } } } } });
    const changes = diffGroup(after, group(before), group(after));
    expect(changes).toHaveLength(750);
    expect(changes.every((c) => c.kind === 'added' && /^task "t\d+"$/.test(c.field))).toBe(true);
  });

  it('finds nothing between equal groups, whatever order env keys were written in', () => {
    const a = makeJob('web', { app: { env: { A: '1', B: '2' } } });
    const b = makeJob('web', { app: { env: { B: '2', A: '1' } } });
    expect(diff(a, b)).toEqual([]);
  });

  it('leaves count out: the plan handles it', () => {
    expect(diff(makeJob('web', { app: { count: 1 } }), makeJob('web', { app: { count: 3 } }))).toEqual([]);
  });

  it('names an env change per key, and calls it destructive', () => {
    const changes = diff(makeJob('web', { app: { env: { A: '1', B: '2' } } }), makeJob('web', { app: { env: { A: '9', C: '3' } } }));
    expect(changes).toEqual([
      { field: 'task "main" env.A', kind: 'changed', old: '"1"', new: '"9"', effect: 'destructive' },
      { field: 'task "main" env.B', kind: 'removed', old: '"2"', effect: 'destructive' },
      { field: 'task "main" env.C', kind: 'added', new: '"3"', effect: 'destructive' },
    ]);
    expect(changes.map(describeChange)).toEqual([
      'task "main" env.A: "1" => "9"',
      'task "main" env.B: removed (was "2")',
      'task "main" env.C: added ("3")',
    ]);
    expect(isDestructive(changes)).toBe(true);
  });

  it('updates in place a change of the update block or the group restart block', () => {
    const before = makeJob('web', { app: {} });
    const changes = diff(before, makeJob('web', { app: { update: { max_parallel: 3, min_healthy_time: '1s' } } }));
    expect(changes).toEqual([
      { field: 'update.max_parallel', kind: 'changed', old: '1', new: '3', effect: 'in-place' },
      { field: 'update.min_healthy_time', kind: 'changed', old: '"10s"', new: '"1s"', effect: 'in-place' },
    ]);
    expect(isDestructive(changes)).toBe(false);
  });

  it('shows a group restart change in place for the group block, and destructive for the task that inherits it', () => {
    const base = makeJob('web', { app: {} });
    const restart = makeJob('web', { app: { restart: { attempts: 7 } } });
    const changes = diff(base, restart);
    expect(changes.map((c) => `${c.field} ${c.effect}`)).toEqual(['restart.attempts in-place', 'task "main" restart.attempts destructive']);
  });

  it('replaces for any task field: command, args, csi_plugin, kill_timeout', () => {
    const a = makeJob('p', { plugin: { plugin: 'hostpath' } });
    const b = structuredClone(a);
    const task = b.groups[0]!.tasks[0]!;
    task.config.args = ['2000'];
    task.csiPlugin = { ...task.csiPlugin!, healthTimeout: 60_000 };
    task.killTimeout = 9_000;
    expect(diffGroup(b, group(a, 'plugin'), group(b, 'plugin'))).toEqual([
      { field: 'task "main" config.args', kind: 'changed', old: '["1000"]', new: '["2000"]', effect: 'destructive' },
      { field: 'task "main" csi_plugin.health_timeout', kind: 'changed', old: '"30s"', new: '"1m"', effect: 'destructive' },
      { field: 'task "main" kill_timeout', kind: 'changed', old: '"5s"', new: '"9s"', effect: 'destructive' },
    ]);
  });

  it('names a task or volume that came or went once, not field by field', () => {
    const one = makeJob('web', { app: { volume: { source: 'v1' } } });
    const two = validateJob({
      job: {
        web: {
          group: {
            app: {
              task: {
                main: { driver: 'raw_exec', config: { command: '/bin/sleep', args: ['1000'] } },
                side: { driver: 'raw_exec', config: { command: '/bin/true' } },
              },
            },
          },
        },
      },
    });
    const changes = diff(one, two);
    expect(changes.map(describeChange)).toEqual([
      'task "main" volume_mount: [{"volume":"data","destination":"data","read_only":false}] => []',
      'task "side": added',
      'volume "data": removed',
    ]);
    expect(changes.every((c) => c.effect === 'destructive')).toBe(true);
  });

  it('calls a volume change destructive: its mounts are made when the alloc starts', () => {
    const changes = diff(makeJob('web', { app: { volume: { source: 'v1' } } }), makeJob('web', { app: { volume: { source: 'v2' } } }));
    expect(changes).toEqual([{ field: 'volume "data" source', kind: 'changed', old: '"v1"', new: '"v2"', effect: 'destructive' }]);
  });

  it('reads a group saved before update blocks existed as the defaults', () => {
    const now = makeJob('web', { app: {} });
    const old = structuredClone(now);
    delete old.groups[0]!.update;
    expect(diff(old, now)).toEqual([]);
  });
});

describe('diffJobFields', () => {
  it('updates the job name in place', () => {
    const a = makeJob('web', { app: {} });
    expect(diffJobFields(a, makeJob('web', { app: {} }, { name: 'Web' }))).toEqual([
      { field: 'name', kind: 'changed', old: '"web"', new: '"Web"', effect: 'in-place' },
    ]);
    expect(diffJobFields(a, a)).toEqual([]);
  });

  it('updates the datacenters in place (none is every datacenter, as ["*"]), and a job differing only there is not the same job', () => {
    const a = makeJob('web', { app: {} });
    const dc1 = makeJob('web', { app: {} }, { datacenters: ['dc1'] });
    expect(diffJobFields(a, dc1).map((c) => [c.effect, describeChange(c)])).toEqual([['in-place', expect.stringMatching(/^datacenters/)]]);
    expect(diffJobFields(a, makeJob('web', { app: {} }, { datacenters: ['*'] }))).toEqual([]);
    expect(sameJob(a, dc1)).toBe(false);
    expect(sameJob(dc1, makeJob('web', { app: {} }, { datacenters: ['dc1'] }))).toBe(true);
  });
});
