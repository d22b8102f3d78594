// Nomad's JSON job format into csiplug's JobSpec: Nomad's documented
// examples, durations in nanoseconds, and each refusal with its path.
import { ValidationError } from '@csiplug/core';
import {
  CREATE_JOB_PAYLOAD,
  CREATE_JOB_PAYLOAD_TRIMMED,
  JSON_JOBS_SYNTAX_EXAMPLE,
  JSON_JOBS_SYNTAX_REFUSED,
  READ_JOB_REFUSED,
  READ_JOB_RESPONSE,
  jsonJobsSyntaxTrimmed,
  readJobTrimmed,
} from '../../test/fixtures/nomad-json/nomad-docs-examples';
import { ValidationProblems, parseJobspec } from '../jobspec';
import { jobFromNomadJson } from './from-nomad-json';
import { jobToNomadJson } from './to-nomad-json';

const S = 1_000_000_000;

/** The message of what `read` throws (a ValidationError: anything else fails the test). */
function refusal(read: () => unknown): string {
  try {
    read();
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return (err as Error).message;
  }
  throw new Error('expected a refusal, got a job');
}

/** A minimal job in Nomad's JSON, with `task` merged into its one task and `group` into its one group. */
function nomadJob(task: Record<string, unknown> = {}, group: Record<string, unknown> = {}, job: Record<string, unknown> = {}) {
  return {
    ID: 'web',
    TaskGroups: [
      { Name: 'app', Tasks: [{ Name: 'server', Driver: 'raw_exec', Config: { command: '/bin/sleep', args: ['60'] }, ...task }], ...group },
    ],
    ...job,
  };
}

describe("jobFromNomadJson with Nomad's documented examples", () => {
  it("reads json-jobs.mdx's example job once the fields csiplug refuses are out", () => {
    const job = jobFromNomadJson(jsonJobsSyntaxTrimmed());
    expect(job).toMatchObject({ id: 'example', name: 'example' });
    const group = job.groups[0]!;
    expect(group).toMatchObject({
      name: 'cache',
      count: 1,
      restart: { interval: 30 * 60_000, attempts: 2, delay: 15_000, mode: 'fail' },
      update: { maxParallel: 1, minHealthyTime: 10_000, healthyDeadline: 180_000, autoRevert: false },
    });
    expect(group.tasks[0]).toMatchObject({
      name: 'redis',
      driver: 'docker',
      image: { ref: 'redis:7' },
      resources: { cpu: 500, memoryMB: 256 },
    });
  });

  it('refuses the untrimmed json-jobs.mdx example, naming each field csiplug refuses by its path', () => {
    const message = refusal(() => jobFromNomadJson(JSON_JOBS_SYNTAX_EXAMPLE.Job));
    for (const path of JSON_JOBS_SYNTAX_REFUSED) expect(message).toContain(`${path} is not supported: `);
    expect(message.split('\n')).toHaveLength(JSON_JOBS_SYNTAX_REFUSED.length);
  });

  it("reads jobs.mdx's Create Job payload trimmed, and refuses it whole", () => {
    const job = jobFromNomadJson(CREATE_JOB_PAYLOAD_TRIMMED.Job);
    expect(job.groups[0]!.tasks[0]).toMatchObject({ name: 'redis', driver: 'docker', image: { ref: 'redis:7' } });
    // Datacenters are Nomad's: the nodes of those datacenters may run it (a node elsewhere refuses it at run).
    expect(job.datacenters).toEqual(['dc1']);
    expect(jobToNomadJson(job).Datacenters).toEqual(['dc1']);
    const message = refusal(() => jobFromNomadJson(CREATE_JOB_PAYLOAD.Job));
    expect(message).not.toContain('Datacenters');
    expect(message).toContain('Job.NodePool is not supported');
    expect(message).toContain('Job.TaskGroups[0].Networks is not supported: csiplug assigns no ports or networks');
    expect(message).toContain('Job.TaskGroups[0].Services is not supported: csiplug registers no services');
  });

  it("reads jobs.mdx's Read Job response trimmed (a template in nanoseconds, logs, kill timeout), and refuses it whole", () => {
    const job = jobFromNomadJson(readJobTrimmed());
    const group = job.groups[0]!;
    expect(group.restart).toEqual({ attempts: 10, interval: 300_000, delay: 25_000, mode: 'delay' });
    expect(group.tasks[0]).toMatchObject({
      name: 'redis',
      user: 'foo-user',
      env: { foo: 'bar', baz: 'pipe' },
      killTimeout: 5_000,
      logs: { maxFiles: 10, maxFileSizeMB: 10 },
      templates: [
        {
          source: 'local/config.conf.tpl',
          destination: 'local/config.conf',
          changeMode: 'signal',
          changeSignal: 'SIGUSR1',
          splay: 5_000,
          perms: '0644',
        },
      ],
    });
    const message = refusal(() => jobFromNomadJson(READ_JOB_RESPONSE));
    for (const path of READ_JOB_REFUSED) expect(message).toContain(`\n${path} is not supported: `.slice(message.startsWith(path) ? 1 : 0));
    expect(message.split('\n')).toHaveLength(READ_JOB_REFUSED.length);
  });
});

describe('jobFromNomadJson', () => {
  it('converts nanoseconds exactly, fractions of a millisecond included', () => {
    const job = jobFromNomadJson(nomadJob({ KillTimeout: 1_500_001, RestartPolicy: { Delay: 250 * 1_000_000, Interval: 90 * S } }));
    const task = job.groups[0]!.tasks[0]!;
    expect(task.killTimeout).toBe(1.500001);
    expect(task.restart).toMatchObject({ delay: 250, interval: 90_000 });
    expect(jobToNomadJson(job).TaskGroups[0]!.Tasks[0]!.KillTimeout).toBe(1_500_001);
  });

  it('reads a job as HCL reads the same job', async () => {
    const hcl = await parseJobspec(
      `job "web" {
        group "app" {
          volume "data" {
            type        = "csi"
            source      = "vol-1"
            access_mode = "single-node-writer"
          }
          task "server" {
            driver = "raw_exec"
            config {
              command = "/bin/sleep"
              args    = ["60"]
            }
            volume_mount {
              volume      = "data"
              destination = "data"
            }
          }
        }
      }`,
      'web.nomad.hcl',
    );
    const json = jobFromNomadJson(
      nomadJob(
        // What Nomad's Canonicalize writes for fields the jobspec left out.
        {
          VolumeMounts: [{ Volume: 'data', Destination: 'data', ReadOnly: false, PropagationMode: 'private', SELinuxLabel: '' }],
          Leader: false,
          KillSignal: '',
          User: '',
        },
        {
          Volumes: {
            data: {
              Name: 'data',
              Type: 'csi',
              Source: 'vol-1',
              AccessMode: 'single-node-writer',
              AttachmentMode: '',
              ReadOnly: false,
              Sticky: false,
              PerAlloc: false,
              MountOptions: null,
            },
          },
        },
        {
          Region: 'global',
          Namespace: 'default',
          Priority: 50,
          Datacenters: ['*'],
          Stop: false,
          Version: 3,
          CreateIndex: 10,
          Csiplug: { allocs: [] },
        },
      ),
    );
    expect(json).toEqual(hcl);
  });

  it("takes a plugin job as Nomad's Canonicalize writes it (every default spelled out)", () => {
    const update = {
      Stagger: 30 * S,
      MaxParallel: 1,
      HealthCheck: 'checks',
      MinHealthyTime: 10 * S,
      HealthyDeadline: 300 * S,
      ProgressDeadline: 600 * S,
      AutoRevert: false,
      Canary: 0,
      AutoPromote: false,
    };
    const restart = { Interval: 1800 * S, Attempts: 2, Delay: 15 * S, Mode: 'fail', RenderTemplates: false };
    const job = jobFromNomadJson({
      Region: 'global',
      Namespace: 'default',
      ID: 'plugin',
      Name: 'plugin',
      Type: 'service',
      Priority: 50,
      AllAtOnce: false,
      Datacenters: ['*'],
      NodePool: 'default',
      Update: update,
      Stop: false,
      ParentID: '',
      Dispatched: false,
      Status: '',
      StatusDescription: '',
      Stable: false,
      Version: 0,
      CreateIndex: 0,
      ModifyIndex: 0,
      JobModifyIndex: 0,
      ConsulNamespace: '',
      VaultNamespace: '',
      NomadTokenID: '',
      Meta: null,
      Constraints: null,
      Affinities: null,
      Spreads: null,
      Periodic: null,
      ParameterizedJob: null,
      Reschedule: null,
      Migrate: null,
      Multiregion: null,
      TaskGroups: [
        {
          Name: 'plugin',
          Count: 1,
          Update: update,
          RestartPolicy: restart,
          ReschedulePolicy: { Attempts: 0, Interval: 0, Delay: 30 * S, DelayFunction: 'exponential', MaxDelay: 3600 * S, Unlimited: true },
          Migrate: { MaxParallel: 1, HealthCheck: 'checks', MinHealthyTime: 10 * S, HealthyDeadline: 300 * S },
          EphemeralDisk: { Sticky: false, Migrate: false, SizeMB: 300 },
          Volumes: null,
          Networks: null,
          Services: null,
          Consul: null,
          Scaling: null,
          ShutdownDelay: null,
          Tasks: [
            {
              Name: 'plugin',
              Driver: 'raw_exec',
              User: '',
              Config: { command: '/usr/local/bin/hostpath', args: ['--endpoint=unix://csi/csi.sock'] },
              Env: null,
              Resources: {
                CPU: 100,
                Cores: 0,
                MemoryMB: 300,
                MemoryMaxMB: null,
                DiskMB: null,
                Networks: null,
                Devices: null,
                NUMA: null,
                IOPS: null,
              },
              RestartPolicy: restart,
              KillTimeout: 5 * S,
              KillSignal: '',
              LogConfig: { MaxFiles: 10, MaxFileSizeMB: 10, Disabled: false },
              CSIPluginConfig: {
                ID: 'hostpath',
                Type: 'monolith',
                MountDir: '/csi',
                StagePublishBaseDir: '/local/csi',
                HealthTimeout: 30 * S,
              },
              Leader: false,
              ShutdownDelay: 0,
              Kind: '',
              Lifecycle: null,
              Templates: null,
              Artifacts: null,
              VolumeMounts: null,
              Vault: null,
              Identities: null,
            },
          ],
        },
      ],
    });
    expect(job.groups[0]!.update).toEqual({ maxParallel: 1, minHealthyTime: 10_000, healthyDeadline: 300_000, autoRevert: false });
    expect(job.groups[0]!.tasks[0]).toMatchObject({
      killTimeout: 5_000,
      killSignal: 'SIGTERM',
      resources: { cpu: 100, memoryMB: 300 },
      csiPlugin: { id: 'hostpath', type: 'monolith', mountDir: '/csi', stagePublishBaseDir: '/local/csi', healthTimeout: 30_000 },
    });
  });

  it('refuses an unknown field with its path and the fields csiplug reads there', () => {
    expect(refusal(() => jobFromNomadJson(nomadJob({ Drvier: 'exec' })))).toBe(
      'Job.TaskGroups[0].Tasks[0].Drvier is not a field csiplug knows here (the fields it reads: Name, Driver, User, Config, Env, Resources, RestartPolicy, KillTimeout, KillSignal, LogConfig, Templates, VolumeMounts, CSIPluginConfig)',
    );
  });

  it('refuses a supported field of the wrong type with its path', () => {
    expect(refusal(() => jobFromNomadJson(nomadJob({}, { Count: '2' })))).toBe('Job.TaskGroups[0].Count must be a whole number (got "2")');
    expect(refusal(() => jobFromNomadJson(nomadJob({ KillTimeout: '5s' })))).toBe(
      'Job.TaskGroups[0].Tasks[0].KillTimeout must be a duration in nanoseconds, a whole number of at least 0 (got "5s") — Nomad\'s JSON gives durations in nanoseconds, like 30000000000 for "30s"',
    );
    expect(refusal(() => jobFromNomadJson(nomadJob({ Env: { N: 1 } })))).toBe(
      'Job.TaskGroups[0].Tasks[0].Env["N"] must be a string (got 1); quote it',
    );
    expect(refusal(() => jobFromNomadJson({ ...nomadJob(), TaskGroups: {} }))).toBe('Job.TaskGroups must be a list (got {})');
  });

  it('refuses a field csiplug does not support, unless it holds what Nomad writes for a jobspec that left it out', () => {
    expect(() =>
      jobFromNomadJson(nomadJob({ Services: [] }, { EphemeralDisk: { Sticky: false, Migrate: false, SizeMB: 300 } })),
    ).not.toThrow();
    expect(refusal(() => jobFromNomadJson(nomadJob({}, { EphemeralDisk: { SizeMB: 500 } })))).toMatch(
      /^Job\.TaskGroups\[0\]\.EphemeralDisk is not supported: /,
    );
    // PerAlloc is read: alloc i mounts "<Source>[i]", as the HCL per_alloc.
    expect(
      jobFromNomadJson(
        nomadJob(
          {},
          { Volumes: { d: { Type: 'csi', Source: 'v', AccessMode: 'single-node-writer', AttachmentMode: 'file-system', PerAlloc: true } } },
        ),
      ).groups[0]!.volumes.find((v) => v.name === 'd')?.perAlloc,
    ).toBe(true);
    expect(refusal(() => jobFromNomadJson(nomadJob({}, {}, { Update: { MaxParallel: 1, Canary: 1 } })))).toMatch(
      /^Job\.Update\.Canary is not supported: /,
    );
  });

  it("leaves the job's own checks to the jobspec reader, which names job, group and task", () => {
    expect(refusal(() => jobFromNomadJson(nomadJob({}, {}, { Type: 'batch' })))).toMatch(/^job "web": type "batch" is not supported/);
    expect(refusal(() => jobFromNomadJson(nomadJob({ Driver: 'java' })))).toMatch(
      /^job "web" group "app" task "server": driver "java" is not supported/,
    );
  });

  it('refuses a job without ID, groups or tasks named, and names a group or task given twice', () => {
    expect(refusal(() => jobFromNomadJson({ TaskGroups: [] }))).toBe('Job.ID is required: the job\'s id, like "web"');
    const twice = nomadJob();
    twice.TaskGroups.push(structuredClone(twice.TaskGroups[0]!));
    expect(refusal(() => jobFromNomadJson(twice))).toBe(
      'Job.TaskGroups[1].Name "app" is the name of TaskGroups[0] too; give each group its own',
    );
    const err = (() => {
      try {
        jobFromNomadJson({ ID: 'web', TaskGroups: [{ Count: 1 }, { Name: 'b', Tasks: [{ Driver: 'exec' }] }] });
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(ValidationProblems);
    expect((err as ValidationProblems).problems.map((p) => p.field)).toEqual(['Job.TaskGroups[0].Name', 'Job.TaskGroups[1].Tasks[0].Name']);
  });

  it('reads PropagationMode "private" of a raw_exec task as none (what Nomad writes when the jobspec gave none)', () => {
    const job = jobFromNomadJson(
      nomadJob(
        { VolumeMounts: [{ Volume: 'd', Destination: 'd', PropagationMode: 'private' }] },
        { Volumes: { d: { Type: 'csi', Source: 'v', AccessMode: 'single-node-writer' } } },
      ),
    );
    expect(job.groups[0]!.tasks[0]!.volumeMounts).toEqual([{ volume: 'd', destination: 'd', readOnly: false }]);
  });
});
