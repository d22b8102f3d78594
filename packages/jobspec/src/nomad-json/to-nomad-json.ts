// csiplug's JobSpec in Nomad's JSON job format: Nomad's field names and
// types (api.Job, durations as nanoseconds), what GET /v1/job/:id answers
// and what the CLI sends to POST /v1/jobs. jobFromNomadJson(jobToNomadJson(j))
// deep-equals j. Fields csiplug does not support are written as Nomad's
// JSON has them for a jobspec that left them out, so a Nomad client reads
// the job as the one it is.
import { DEFAULT_UPDATE, jobToDocument } from '../jobspec';
import type { GroupSpec, JobSpec, RestartPolicy, TaskSpec, TaskTemplate, UpdateStrategy, VolumeRequest } from '../model';
import { msToNanos } from './nomad-reader';

/** api.RestartPolicy */
export interface NomadRestartPolicy {
  Interval: number;
  Attempts: number;
  Delay: number;
  Mode: string;
}

/** api.UpdateStrategy (the fields csiplug has) */
export interface NomadUpdateStrategy {
  MaxParallel: number;
  MinHealthyTime: number;
  HealthyDeadline: number;
  AutoRevert: boolean;
}

/** api.VolumeRequest, with csiplug's OnStaleMount added when set. */
export interface NomadVolumeRequest {
  Name: string;
  Type: string;
  Source: string;
  ReadOnly: boolean;
  AccessMode: string;
  AttachmentMode: string;
  MountOptions: { FSType?: string; MountFlags?: string[] } | null;
  PerAlloc: boolean;
  OnStaleMount?: string;
}

/** api.Template */
export interface NomadTemplate {
  SourcePath: string | null;
  DestPath: string;
  EmbeddedTmpl: string | null;
  ChangeMode: string;
  ChangeSignal: string | null;
  Splay: number;
  Perms: string;
  Uid: number | null;
  Gid: number | null;
  LeftDelim: string;
  RightDelim: string;
  Envvars: boolean;
  ErrMissingKey: boolean;
}

/** api.Task (the fields csiplug has) */
export interface NomadTask {
  Name: string;
  Driver: string;
  User: string;
  Config: Record<string, unknown>;
  Env: Record<string, string>;
  Resources: { CPU?: number; MemoryMB?: number } | null;
  RestartPolicy: NomadRestartPolicy;
  KillTimeout: number;
  KillSignal: string;
  LogConfig: { MaxFiles: number; MaxFileSizeMB: number } | null;
  Templates: NomadTemplate[] | null;
  VolumeMounts: { Volume: string; Destination: string; ReadOnly: boolean; PropagationMode?: string }[] | null;
  CSIPluginConfig?: { ID: string; Type: string; MountDir: string; StagePublishBaseDir: string; HealthTimeout: number };
}

/** api.TaskGroup (the fields csiplug has) */
export interface NomadTaskGroup {
  Name: string;
  Count: number;
  Tasks: NomadTask[];
  Volumes: Record<string, NomadVolumeRequest> | null;
  RestartPolicy: NomadRestartPolicy;
  Update: NomadUpdateStrategy;
}

/** api.Job (the fields csiplug has, and the placement fields at what a one-node agent means by them) */
export interface NomadJob {
  Region: string;
  Namespace: string;
  ID: string;
  Name: string;
  Type: string;
  Priority: number;
  AllAtOnce: boolean;
  Datacenters: string[];
  NodePool: string;
  TaskGroups: NomadTaskGroup[];
  Update: NomadUpdateStrategy | null;
}

const restart = (r: RestartPolicy): NomadRestartPolicy => ({
  Interval: msToNanos(r.interval),
  Attempts: r.attempts,
  Delay: msToNanos(r.delay),
  Mode: r.mode,
});

const update = (u: UpdateStrategy): NomadUpdateStrategy => ({
  MaxParallel: u.maxParallel,
  MinHealthyTime: msToNanos(u.minHealthyTime),
  HealthyDeadline: msToNanos(u.healthyDeadline),
  AutoRevert: u.autoRevert,
});

function volume(v: VolumeRequest): NomadVolumeRequest {
  const mo = v.mountOptions;
  return {
    Name: v.name,
    Type: v.type,
    Source: v.source,
    ReadOnly: v.readOnly,
    AccessMode: v.accessMode,
    AttachmentMode: v.attachmentMode,
    MountOptions: mo
      ? { ...(mo.fsType !== undefined ? { FSType: mo.fsType } : {}), ...(mo.mountFlags ? { MountFlags: [...mo.mountFlags] } : {}) }
      : null,
    PerAlloc: v.perAlloc === true,
    ...(v.onStaleMount !== undefined ? { OnStaleMount: v.onStaleMount } : {}),
  };
}

const template = (t: TaskTemplate): NomadTemplate => ({
  SourcePath: t.source ?? null,
  DestPath: t.destination,
  EmbeddedTmpl: t.data ?? null,
  ChangeMode: t.changeMode,
  ChangeSignal: t.changeSignal ?? null,
  Splay: msToNanos(t.splay),
  Perms: t.perms,
  Uid: t.uid ?? null,
  Gid: t.gid ?? null,
  LeftDelim: t.leftDelimiter,
  RightDelim: t.rightDelimiter,
  Envvars: t.env,
  ErrMissingKey: t.errorOnMissingKey,
});

function task(t: TaskSpec, config: Record<string, unknown>, driver: string): NomadTask {
  return {
    Name: t.name,
    Driver: driver,
    User: t.user ?? '',
    Config: config,
    Env: { ...t.env },
    Resources: t.resources
      ? {
          ...(t.resources.cpu !== undefined ? { CPU: t.resources.cpu } : {}),
          ...(t.resources.memoryMB !== undefined ? { MemoryMB: t.resources.memoryMB } : {}),
        }
      : null,
    RestartPolicy: restart(t.restart),
    KillTimeout: msToNanos(t.killTimeout),
    KillSignal: t.killSignal,
    LogConfig: t.logs ? { MaxFiles: t.logs.maxFiles, MaxFileSizeMB: t.logs.maxFileSizeMB } : null,
    Templates: t.templates?.length ? t.templates.map(template) : null,
    VolumeMounts: t.volumeMounts.length
      ? t.volumeMounts.map((m) => ({
          Volume: m.volume,
          Destination: m.destination,
          ReadOnly: m.readOnly,
          ...(m.propagation !== undefined ? { PropagationMode: m.propagation } : {}),
        }))
      : null,
    ...(t.csiPlugin
      ? {
          CSIPluginConfig: {
            ID: t.csiPlugin.id,
            Type: t.csiPlugin.type,
            MountDir: t.csiPlugin.mountDir,
            StagePublishBaseDir: t.csiPlugin.stagePublishBaseDir,
            HealthTimeout: msToNanos(t.csiPlugin.healthTimeout),
          },
        }
      : {}),
  };
}

/** The job in Nomad's JSON job format (the `Job` object of Nomad's API). */
export function jobToNomadJson(job: JobSpec): NomadJob {
  // The driver config as the jobspec document has it (HCL names, as Nomad's Config map): one writer of it for both forms.
  const doc = jobToDocument(job).job[job.id]!;
  const group = (g: GroupSpec): NomadTaskGroup => ({
    Name: g.name,
    Count: g.count,
    Tasks: g.tasks.map((t) => {
      const written = doc.group[g.name]!.task[t.name]!;
      return task(t, written.config as Record<string, unknown>, written.driver);
    }),
    Volumes: g.volumes.length ? Object.fromEntries(g.volumes.map((v) => [v.name, volume(v)])) : null,
    RestartPolicy: restart(g.restart),
    // A group saved before update blocks existed reads as the defaults (as jobToDocument writes it).
    Update: update(g.update ?? DEFAULT_UPDATE),
  });
  return {
    Region: 'global',
    Namespace: 'default',
    ID: job.id,
    Name: job.name,
    Type: job.type ?? 'service',
    Priority: 50,
    AllAtOnce: false,
    // Nomad's default for a job that names no datacenter: every one.
    Datacenters: job.datacenters ?? ['*'],
    NodePool: 'default',
    TaskGroups: job.groups.map(group),
    // The job's update block is in each group's already (the jobspec reader merges it, as Nomad's Canonicalize does).
    Update: null,
  };
}
