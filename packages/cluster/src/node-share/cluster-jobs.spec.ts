// What the scheduler is told of a job, and the share of a cluster job a node runs.
import type { Placement } from '../scheduler';
import { demandOf, projectJob } from './cluster-jobs';
import type { GroupSpec, JobSpec, TaskSpec } from '@csiplug/jobspec';
import { DEFAULT_RESTART, DEFAULT_UPDATE } from '@csiplug/jobspec';

const task = (name: string, isolated: boolean): TaskSpec => ({
  name,
  driver: isolated ? 'exec' : 'raw_exec',
  isolated,
  config: { command: '/bin/true', args: [] },
  env: {},
  volumeMounts: [],
  restart: DEFAULT_RESTART,
  killSignal: 'SIGTERM',
  killTimeout: 5_000,
});
const group = (name: string, count: number, tasks: TaskSpec[], volumes: GroupSpec['volumes'] = []): GroupSpec => ({
  name,
  count,
  tasks,
  volumes,
  restart: DEFAULT_RESTART,
  update: DEFAULT_UPDATE,
});
const placement = (jobId: string, g: string, index: number, node: string): Placement => ({
  slot: `${g}/${index}`,
  jobId,
  group: g,
  index,
  node,
  jobVersion: 0,
  placedAt: 0,
});

describe('demandOf', () => {
  it("names each group's drivers (once, sorted) and volumes; a system group counts one", () => {
    const job: JobSpec = {
      id: 'web',
      name: 'web',
      groups: [
        group(
          'app',
          3,
          [task('a', true), task('b', false), task('c', true)],
          [
            {
              name: 'data',
              type: 'csi',
              source: 'vol-1',
              accessMode: 'single-node-writer',
              attachmentMode: 'file-system',
              readOnly: false,
            },
          ],
        ),
        group('side', 1, [task('s', false)]),
      ],
    };
    expect(demandOf(job)).toEqual([
      {
        name: 'app',
        count: 3,
        drivers: ['exec', 'raw_exec'],
        volumes: [{ volumeId: 'vol-1', accessMode: 'single-node-writer', readOnly: false }],
      },
      { name: 'side', count: 1, drivers: ['raw_exec'], volumes: [] },
    ]);
    expect(demandOf({ ...job, type: 'system' }).map((g) => g.count)).toEqual([1, 1]);
  });

  it('asks for the image driver a docker or podman task names (a node with only exec does not take it)', () => {
    const image = { ref: 'r/p:1', forcePull: false, pullTimeout: 1, mounts: [] };
    const job: JobSpec = {
      id: 'img',
      name: 'img',
      groups: [
        group('g', 1, [{ ...task('d', true), driver: 'docker', image }, { ...task('p', true), driver: 'podman', image }, task('e', true)]),
      ],
    };
    expect(demandOf(job)[0]!.drivers).toEqual(['docker', 'exec', 'podman']);
  });
});

describe('projectJob', () => {
  const job: JobSpec = { id: 'web', name: 'web', groups: [group('app', 5, [task('a', false)]), group('side', 2, [task('s', false)])] };

  it('gives each group the count of its slots placed on this node, and drops groups with none here', () => {
    const placements = [
      placement('web', 'app', 0, 'n1'),
      placement('web', 'app', 1, 'n2'),
      placement('web', 'app', 2, 'n1'),
      placement('web', 'side', 0, 'n2'),
      placement('other', 'app', 0, 'n1'),
    ];
    expect(projectJob(job, placements, 'n1')).toEqual({ ...job, groups: [{ ...job.groups[0]!, count: 2 }] });
    expect(projectJob(job, placements, 'n2')!.groups.map((g) => [g.name, g.count])).toEqual([
      ['app', 1],
      ['side', 1],
    ]);
  });

  it('is undefined on a node with nothing of the job placed there', () => {
    expect(projectJob(job, [placement('web', 'app', 0, 'n1')], 'n3')).toBeUndefined();
    expect(projectJob(job, [], 'n1')).toBeUndefined();
  });
});
