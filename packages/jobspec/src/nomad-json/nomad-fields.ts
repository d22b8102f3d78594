// The fields of each object of Nomad's JSON job format (hashicorp/nomad
// api/jobs.go, api/tasks.go, api/resources.go, api/csi.go) and what csiplug
// does with each: reads it, refuses it with the HCL reader's advice (unless
// it holds what Nomad's JSON carries for it when the jobspec left it out —
// its zero value or the default Nomad's Canonicalize fills in — since a
// canonical Nomad job always carries every field), or ignores it because
// Nomad's server sets it. Field names are Nomad's, exactly.
import { GROUP_UNSUPPORTED, JOB_UNSUPPORTED, TASK_UNSUPPORTED } from '../jobspec';
import { TEMPLATE_UNSUPPORTED } from '../template-spec';
import { READ, SERVER, type FieldRules, unsupported, zeroOr } from './nomad-reader';

const S = 1_000_000_000;
const REMOVE = 'remove it';

/** A service job's default reschedule policy (NewDefaultReschedulePolicy) and migrate strategy (DefaultMigrateStrategy), as Canonicalize writes them. */
const DEFAULT_RESCHEDULE = zeroOr({ Delay: 30 * S, DelayFunction: 'exponential', MaxDelay: 3600 * S, Unlimited: true });
const DEFAULT_MIGRATE = zeroOr({ MaxParallel: 1, HealthCheck: 'checks', MinHealthyTime: 10 * S, HealthyDeadline: 300 * S });

/** api.Job */
export const JOB_FIELDS: FieldRules = {
  ID: READ,
  Name: READ,
  Type: READ,
  Update: READ,
  TaskGroups: READ,
  Region: unsupported(JOB_UNSUPPORTED.region!, zeroOr(['global'])),
  Namespace: unsupported(JOB_UNSUPPORTED.namespace!, zeroOr(['default'])),
  Priority: unsupported(JOB_UNSUPPORTED.priority!, zeroOr([50])),
  AllAtOnce: unsupported(JOB_UNSUPPORTED.all_at_once!),
  // Nomad's server fills in ["*"] (every datacenter) for a job that names none; read as the jobspec's datacenters.
  Datacenters: READ,
  NodePool: unsupported(JOB_UNSUPPORTED.node_pool!, zeroOr(['default'])),
  Constraints: unsupported(JOB_UNSUPPORTED.constraint!),
  Affinities: unsupported(JOB_UNSUPPORTED.affinity!),
  Spreads: unsupported(JOB_UNSUPPORTED.spread!),
  Multiregion: unsupported(JOB_UNSUPPORTED.multiregion!),
  Periodic: unsupported(JOB_UNSUPPORTED.periodic!),
  ParameterizedJob: unsupported(JOB_UNSUPPORTED.parameterized!),
  Reschedule: unsupported(JOB_UNSUPPORTED.reschedule!, DEFAULT_RESCHEDULE),
  Migrate: unsupported(JOB_UNSUPPORTED.migrate!, DEFAULT_MIGRATE),
  Meta: unsupported(JOB_UNSUPPORTED.meta!),
  UI: unsupported(`csiplug has no web UI to describe the job in; ${REMOVE}`),
  ConsulToken: unsupported(JOB_UNSUPPORTED.consul!),
  VaultToken: unsupported(JOB_UNSUPPORTED.vault!),
  ConsulNamespace: unsupported(JOB_UNSUPPORTED.consul!),
  VaultNamespace: unsupported(JOB_UNSUPPORTED.vault!),
  Stop: unsupported('csiplug registers a job to run it: set Stop to false to start it (as nomad job start does); to stop it, use job stop'),
  Dispatched: unsupported(JOB_UNSUPPORTED.parameterized!),
  DispatchIdempotencyToken: unsupported(JOB_UNSUPPORTED.parameterized!),
  Payload: unsupported(JOB_UNSUPPORTED.parameterized!),
  ParentID: SERVER,
  NomadTokenID: SERVER,
  Status: SERVER,
  StatusDescription: SERVER,
  Stable: SERVER,
  Version: SERVER,
  SubmitTime: SERVER,
  CreateIndex: SERVER,
  ModifyIndex: SERVER,
  JobModifyIndex: SERVER,
  VersionTag: SERVER,
  // csiplug's own data on GET /v1/job/:id (allocs, deployment…): a job read and sent back as it is runs as its spec says.
  Csiplug: SERVER,
};

const UPDATE_ADVICE = 'csiplug replaces allocs a few at a time (MaxParallel) and judges each by its tasks and plugins; it has';

/** api.UpdateStrategy, with the defaults of DefaultUpdateStrategy for the fields csiplug has no use for. */
export const UPDATE_FIELDS: FieldRules = {
  MaxParallel: READ,
  MinHealthyTime: READ,
  HealthyDeadline: READ,
  AutoRevert: READ,
  Stagger: unsupported(`${UPDATE_ADVICE} no stagger; ${REMOVE}`, zeroOr([30 * S])),
  // "checks" with no checks (csiplug registers none) is "task_states": what csiplug does.
  HealthCheck: unsupported(
    `csiplug judges an alloc's health by its tasks (and the plugins they serve), as "task_states"; it has no manual health; ${REMOVE}`,
    zeroOr(['checks', 'task_states']),
  ),
  ProgressDeadline: unsupported(`${UPDATE_ADVICE} no progress deadline (HealthyDeadline bounds each alloc); ${REMOVE}`, zeroOr([600 * S])),
  Canary: unsupported(`${UPDATE_ADVICE} no canaries; ${REMOVE}`),
  AutoPromote: unsupported(`${UPDATE_ADVICE} no canaries to promote; ${REMOVE}`),
};

/** api.RestartPolicy */
export const RESTART_FIELDS: FieldRules = {
  Interval: READ,
  Attempts: READ,
  Delay: READ,
  Mode: READ,
  RenderTemplates: unsupported(`csiplug renders a task's templates at every start of the task already; ${REMOVE}`),
};

/** api.TaskGroup */
export const GROUP_FIELDS: FieldRules = {
  Name: READ,
  Count: READ,
  Tasks: READ,
  Volumes: READ,
  RestartPolicy: READ,
  Update: READ,
  Constraints: unsupported(GROUP_UNSUPPORTED.constraint!),
  Affinities: unsupported(GROUP_UNSUPPORTED.affinity!),
  Spreads: unsupported(GROUP_UNSUPPORTED.spread!),
  Networks: unsupported(GROUP_UNSUPPORTED.network!),
  Services: unsupported(GROUP_UNSUPPORTED.service!),
  ReschedulePolicy: unsupported(GROUP_UNSUPPORTED.reschedule!, DEFAULT_RESCHEDULE),
  Migrate: unsupported(GROUP_UNSUPPORTED.migrate!, DEFAULT_MIGRATE),
  EphemeralDisk: unsupported(GROUP_UNSUPPORTED.ephemeral_disk!, zeroOr({ SizeMB: 300 })),
  Scaling: unsupported(GROUP_UNSUPPORTED.scaling!),
  Consul: unsupported(GROUP_UNSUPPORTED.consul!),
  Meta: unsupported(GROUP_UNSUPPORTED.meta!),
  Disconnect: unsupported(GROUP_UNSUPPORTED.reschedule!),
  ShutdownDelay: unsupported(GROUP_UNSUPPORTED.service!),
  MaxRunDuration: unsupported(`csiplug runs service jobs only: a task runs until it is stopped; ${REMOVE}`),
  StopAfterClientDisconnect: unsupported(GROUP_UNSUPPORTED.reschedule!),
  MaxClientDisconnect: unsupported(GROUP_UNSUPPORTED.reschedule!),
  PreventRescheduleOnLost: unsupported(GROUP_UNSUPPORTED.reschedule!),
};

/** api.VolumeRequest, and csiplug's own OnStaleMount (an added field: its on_stale_mount). */
export const VOLUME_FIELDS: FieldRules = {
  Name: READ,
  Type: READ,
  Source: READ,
  ReadOnly: READ,
  AccessMode: READ,
  AttachmentMode: READ,
  MountOptions: READ,
  OnStaleMount: READ,
  Sticky: unsupported(`a CSI volume is claimed by each alloc that mounts it; there is no sticky host volume; ${REMOVE}`),
  PerAlloc: READ,
};

/** api.CSIMountOptions */
export const MOUNT_OPTIONS_FIELDS: FieldRules = { FSType: READ, MountFlags: READ };

/** api.Task */
export const TASK_FIELDS: FieldRules = {
  Name: READ,
  Driver: READ,
  User: READ,
  Config: READ,
  Env: READ,
  Resources: READ,
  RestartPolicy: READ,
  KillTimeout: READ,
  KillSignal: READ,
  LogConfig: READ,
  Templates: READ,
  VolumeMounts: READ,
  CSIPluginConfig: READ,
  Lifecycle: unsupported(TASK_UNSUPPORTED.lifecycle!),
  Constraints: unsupported(TASK_UNSUPPORTED.constraint!),
  Affinities: unsupported(TASK_UNSUPPORTED.affinity!),
  Services: unsupported(TASK_UNSUPPORTED.service!),
  Meta: unsupported(TASK_UNSUPPORTED.meta!),
  Artifacts: unsupported(TASK_UNSUPPORTED.artifact!),
  Vault: unsupported(TASK_UNSUPPORTED.vault!),
  Consul: unsupported(TASK_UNSUPPORTED.consul!),
  DispatchPayload: unsupported(JOB_UNSUPPORTED.parameterized!),
  Leader: unsupported(`the tasks of a group are equals in csiplug: none is a leader whose exit stops the others; ${REMOVE}`),
  ShutdownDelay: unsupported(TASK_UNSUPPORTED.service!),
  Kind: unsupported(`csiplug has no Consul Connect tasks; ${REMOVE}`),
  ScalingPolicies: unsupported(GROUP_UNSUPPORTED.scaling!),
  Secrets: unsupported(TASK_UNSUPPORTED.vault!),
  Identity: unsupported(`csiplug issues no workload identities; ${REMOVE}`),
  Identities: unsupported(`csiplug issues no workload identities; ${REMOVE}`),
  Actions: unsupported(`csiplug has no task actions; run the command with alloc exec on the node; ${REMOVE}`),
  Schedule: unsupported(`csiplug runs a task until it is stopped: it has no schedule of when a task may run; ${REMOVE}`),
};

const NO_RESOURCE = (what: string): string =>
  `csiplug limits an isolated task's cpu (CPU, as cgroup shares) and memory (MemoryMB, a hard limit) only; it has no ${what}; ${REMOVE}`;

/** api.Resources */
export const RESOURCES_FIELDS: FieldRules = {
  CPU: READ,
  MemoryMB: READ,
  Cores: unsupported(NO_RESOURCE('reserved cores')),
  MemoryMaxMB: unsupported(NO_RESOURCE('memory oversubscription')),
  DiskMB: unsupported(NO_RESOURCE('disk reservation')),
  IOPS: unsupported(NO_RESOURCE('IOPS reservation')),
  SecretsMB: unsupported(NO_RESOURCE('size for the secrets dir')),
  Networks: unsupported(GROUP_UNSUPPORTED.network!),
  Devices: unsupported(NO_RESOURCE('devices')),
  NUMA: unsupported(NO_RESOURCE('NUMA placement')),
};

/** api.LogConfig */
export const LOG_FIELDS: FieldRules = {
  MaxFiles: READ,
  MaxFileSizeMB: READ,
  // Enabled is the deprecated inverse of Disabled: true (or unset) is what csiplug does.
  Enabled: unsupported(`csiplug always keeps a task's logs; ${REMOVE}`, zeroOr([true])),
  Disabled: unsupported(`csiplug always keeps a task's logs; ${REMOVE}`),
};

/** api.VolumeMount */
export const VOLUME_MOUNT_FIELDS: FieldRules = {
  Volume: READ,
  Destination: READ,
  ReadOnly: READ,
  PropagationMode: READ,
  SELinuxLabel: unsupported(`csiplug sets no SELinux labels on mounts; ${REMOVE}`),
};

/** api.TaskCSIPluginConfig */
export const CSI_PLUGIN_FIELDS: FieldRules = {
  ID: READ,
  Type: READ,
  MountDir: READ,
  StagePublishBaseDir: READ,
  HealthTimeout: READ,
};

/** api.Template */
export const TEMPLATE_FIELDS: FieldRules = {
  SourcePath: READ,
  DestPath: READ,
  EmbeddedTmpl: READ,
  ChangeMode: READ,
  ChangeSignal: READ,
  Splay: READ,
  Perms: READ,
  Uid: READ,
  Gid: READ,
  LeftDelim: READ,
  RightDelim: READ,
  Envvars: READ,
  ErrMissingKey: READ,
  ChangeScript: unsupported(TEMPLATE_UNSUPPORTED.change_script!),
  Once: unsupported(TEMPLATE_UNSUPPORTED.once!),
  VaultGrace: unsupported(TEMPLATE_UNSUPPORTED.vault_grace!),
  Wait: unsupported(TEMPLATE_UNSUPPORTED.wait!),
};
