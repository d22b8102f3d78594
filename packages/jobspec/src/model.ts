// The agent's data model: jobs as parsed from jobspecs, the allocs made from
// them, the state of their tasks, and the deployments that roll a changed
// job out. Plain JSON-able shapes: they are stored
// in the client state and served by the HTTP API as they are.
import type { CSIPluginConfig, RestartPolicy, TaskEvent, TaskLogLimits, VolumeRequest } from '@csiplug/core';

// Core's vocabulary, shared with the packages that act on a job (the restart
// tracker, the hooks); the model carries them.
export type { CSIPluginConfig, RestartPolicy, TaskEvent, VolumeRequest };

export interface VolumeMount {
  /** The group's volume name. */
  volume: string;
  /** Where the task sees it: an isolated (exec) task at this path in its root, a bind mount; a raw_exec task under its task dir, a symlink. */
  destination: string;
  readOnly: boolean;
  /** Nomad's propagation_mode of the bind mount (exec only); absent: private. */
  propagation?: 'private' | 'host-to-task' | 'bidirectional';
}

export interface TaskSpec {
  name: string;
  /**
   * As the jobspec says; records saved before isolation say `exec` for what
   * is now `raw_exec` (see `isolated`). `docker` and `podman` (Nomad's names)
   * run `image` isolated on runc, as `exec` runs a command.
   */
  driver: 'exec' | 'raw_exec' | 'docker' | 'podman';
  /** The OCI image a `docker`/`podman` task runs, and the rest of that driver's config; absent for exec and raw_exec. */
  image?: TaskImage;
  /**
   * Whether the task runs isolated on runc (driver `exec`). Absent in records
   * saved before isolation existed, whose tasks were all host processes:
   * absent means not isolated.
   */
  isolated?: boolean;
  /**
   * capAdd / capDrop: capabilities added to or dropped from the isolated
   * task's default set; networkMode: the host's network or a loopback-only
   * one of its own (absent: the agent's default, see AllocRunnerDeps.hostNetwork). Exec only.
   */
  config: { command: string; args: string[]; capAdd?: string[]; capDrop?: string[]; networkMode?: 'host' | 'none' };
  env: Record<string, string>;
  csiPlugin?: CSIPluginConfig;
  volumeMounts: VolumeMount[];
  restart: RestartPolicy;
  /** Signal sent on stop (default SIGTERM). */
  killSignal: NodeJS.Signals;
  /** ms before SIGKILL follows the kill signal (default 5 s). */
  killTimeout: number;
  /** Nomad's task `user`: whom an isolated task runs as (absent: nobody; a CSI plugin: root). Exec only. */
  user?: string;
  /** Nomad's logs block: files kept of each stream and MB each; absent in records saved before rotation (read as Nomad's defaults, 10 × 10 MB). */
  logs?: TaskLogLimits;
  /** Nomad's resources block: cpu (MHz, as cgroup cpu shares) and memory (MiB, a hard limit); enforced for an isolated (exec) task only. */
  resources?: { cpu?: number; memoryMB?: number };
  /** Nomad's template blocks: files rendered into the task's dirs before it starts (absent: none). */
  templates?: TaskTemplate[];
}

/**
 * One `template` block, with Nomad's names and defaults: rendered (the
 * Go-template subset of go-template.ts) before the task starts, and again
 * on a SIGHUP of the agent, when change_mode says what a changed file does.
 */
export interface TaskTemplate {
  /** `data`: the template itself (exactly one of data and source). `${…}` of the task's variables and the node's values is replaced in it first. */
  data?: string;
  /** `source`: a file on this node holding the template, relative to the task dir (absolute too for raw_exec; an isolated task's stays in its task dir); read at each render. */
  source?: string;
  /** `destination`: where the file is written, relative to the task dir (`local/…`, `secrets/…`, `alloc/…` the alloc's shared dir). Never `..`. */
  destination: string;
  /** `perms`: the file's mode, octal as written ("0644", Nomad's default). */
  perms: string;
  /** `uid`/`gid`: the file's owner (absent: an isolated task's user, as its dirs; else the agent's). */
  uid?: number;
  gid?: number;
  /** `env`: the rendered file is KEY=VALUE lines added to the task's environment (over its env block, as Nomad). */
  env: boolean;
  /** `change_mode`: what a re-render that changed the file does to the running task. */
  changeMode: 'restart' | 'signal' | 'noop';
  /** `change_signal`: sent with change_mode "signal" (upper case; SIGHUP when not given, as Nomad). */
  changeSignal?: NodeJS.Signals;
  /** `left_delimiter`/`right_delimiter` (Nomad's defaults "{{" and "}}"). */
  leftDelimiter: string;
  rightDelimiter: string;
  /** `splay` in ms: the most a change waits (a random part of it) before its change_mode applies (Nomad's default 5 s). */
  splay: number;
  /** `error_on_missing_key`: kept as Nomad's; csiplug's templates read no maps by key, so nothing is ever missing. */
  errorOnMissingKey: boolean;
}

/**
 * What a `docker` or `podman` task runs: Nomad's docker task config, the
 * subset csiplug runs on runc. `config.command` and `config.args` of the
 * task are the driver's `command` and `args` (command empty: the image's),
 * `config.capAdd`/`capDrop`/`networkMode` as for exec.
 */
export interface TaskImage {
  /** `image` as written: a registry reference (`[host[:port]/]repo[:tag][@digest]`); or an archive on the node (`oci-archive:/abs/path.tar[:ref]`, `docker-archive:/abs/path.tar[:name:tag]`), loaded without a registry. */
  ref: string;
  /** Nomad's `entrypoint`: replaces the image's Entrypoint (and, as Docker does, drops its Cmd). */
  entrypoint?: string[];
  /** Nomad's `work_dir`: the working dir in the image (absolute); absent: the image's WorkingDir, else `/`. */
  workDir?: string;
  /** `force_pull`: ask the registry even when the tag is present. */
  forcePull: boolean;
  /** `image_pull_timeout` in ms (Nomad's default 5m). */
  pullTimeout: number;
  /** `auth { username password server_address }`: used before the agent's docker config file. */
  auth?: { username?: string; password?: string; serverAddress?: string };
  /** `labels`: kept and shown, as Nomad sets them on the container. */
  labels?: Record<string, string>;
  /** `ipc_mode = "host"` / `pid_mode = "host"`: the host's namespace instead of the task's own (a csi_plugin task only, where allow_privileged). */
  ipcHost?: boolean;
  pidHost?: boolean;
  /** `privileged = true`: only a csi_plugin task, and only where the agent's plugin "docker" { config { allow_privileged } }. */
  privileged?: boolean;
  /** `mount { … }` blocks then `volumes = ["host:container[:ro]"]` entries, in the order written. */
  mounts: TaskImageMount[];
}

/** One of a docker task's `mount` blocks or `volumes` entries. */
export interface TaskImageMount {
  type: 'bind' | 'tmpfs';
  /** A bind's host path: absolute, or relative to the task dir (as Nomad's docker driver reads a relative `volumes` source). */
  source?: string;
  /** Where the task sees it (absolute in the image). */
  target: string;
  readOnly: boolean;
  /** A bind's `bind_options { propagation }`, Docker's names (default rprivate). */
  propagation?: 'rprivate' | 'private' | 'rshared' | 'shared' | 'rslave' | 'slave';
  /** A tmpfs's `tmpfs_options { size }`, bytes. */
  tmpfsSize?: number;
}

/**
 * Nomad's `update` block: how a changed job replaces a group's allocs
 * (deploy/rollout.ts). A job-level block is the default of each group's.
 */
export interface UpdateStrategy {
  /** How many of the group's allocs are replaced at once (a sliding window). */
  maxParallel: number;
  /** ms every task must run (and every plugin it serves be healthy) before a new alloc counts as healthy. */
  minHealthyTime: number;
  /** ms a new alloc has to become healthy; then it is unhealthy and the deployment fails. */
  healthyDeadline: number;
  /** When the deployment fails, run the last stable version again (as a new version). */
  autoRevert: boolean;
}

export interface GroupSpec {
  name: string;
  count: number;
  tasks: TaskSpec[];
  volumes: VolumeRequest[];
  restart: RestartPolicy;
  /** Always set by the jobspec reader; absent in records saved before updates were rolled out (read as the defaults). */
  update?: UpdateStrategy;
}

export interface JobSpec {
  id: string;
  name: string;
  /**
   * `system`: one alloc of each group on every node that can run it (in a
   * cluster, how node plugins are deployed; on one agent, count 1). Absent:
   * a service job, placed `count` times.
   */
  type?: 'system';
  /**
   * The datacenters whose nodes may run it, as Nomad's (`*` wildcards;
   * datacenters.ts). Absent: every datacenter (Nomad's default ["*"]).
   */
  datacenters?: string[];
  groups: GroupSpec[];
}

export type TaskStateName = 'pending' | 'running' | 'dead';

export interface TaskState {
  state: TaskStateName;
  failed: boolean;
  restarts: number;
  /** ms since the epoch */
  startedAt?: number;
  finishedAt?: number;
  exitCode?: number | null;
  signal?: string | null;
  events: TaskEvent[];
}

export type AllocClientStatus = 'pending' | 'running' | 'complete' | 'failed';
export type AllocDesiredStatus = 'run' | 'stop';

export interface Alloc {
  id: string;
  jobId: string;
  group: string;
  /** The index within the group's count. */
  index: number;
  name: string;
  job: JobSpec;
  /** The version of the job this alloc runs (0 for the first; absent in records from before versions, read as 0). */
  jobVersion?: number;
  desiredStatus: AllocDesiredStatus;
  clientStatus: AllocClientStatus;
  createdAt: number;
  /** The deployment that placed this alloc, if one did. */
  deploymentId?: string;
  /** That deployment's verdict on this alloc, once it has one. */
  deploymentStatus?: AllocDeploymentStatus;
  /**
   * The job's latest deployment, as last written. The client state keeps no
   * job records — a job lives in its allocs — so each alloc of the job
   * carries it, and the newest copy wins (deploy/job-history.ts).
   */
  jobDeployment?: Deployment;
}

export interface AllocDeploymentStatus {
  healthy: boolean;
  /** ms since the epoch */
  time: number;
  /** Why it is unhealthy. */
  reason?: string;
}

/** running → successful, failed (maybe reverted) or cancelled (a newer run, a job stop). */
export type DeploymentStatus = 'running' | 'successful' | 'failed' | 'cancelled';

/** One rollout of one job version (deploy/rollout.ts). */
export interface Deployment {
  id: string;
  jobId: string;
  jobVersion: number;
  /** The version rolled out: a rollout cut short by an agent restart is resumed from it. */
  job: JobSpec;
  status: DeploymentStatus;
  description: string;
  /** ms since the epoch */
  createdAt: number;
  updatedAt: number;
  /** The last stable version, run again if this one fails under auto_revert; absent when there is none. */
  revertTo?: { version: number; job: JobSpec };
  /** Set on the deployment of a revert: the version that failed. A revert is never reverted itself. */
  revertOf?: number;
}
