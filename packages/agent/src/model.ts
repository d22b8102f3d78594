// The agent's data model: jobs as parsed from jobspecs, the allocs made from
// them, and the state of their tasks. Plain JSON-able shapes: they are stored
// in the client state and served by the HTTP API as they are.
import type { RestartPolicy } from '@csiplug/driver';
import type { CSIPluginConfig, TaskEvent, VolumeRequest } from '@csiplug/hooks';

// RestartPolicy is the restart tracker's (in @csiplug/driver); a task spec carries one.
export type { CSIPluginConfig, RestartPolicy, TaskEvent, VolumeRequest };

export interface VolumeMount {
  /** The group's volume name. */
  volume: string;
  /** Where the task sees it, relative to its task dir (no isolation: a symlink). */
  destination: string;
  readOnly: boolean;
}

export interface TaskSpec {
  name: string;
  /** `exec` (`raw_exec` is accepted as a synonym and stored as `exec`). */
  driver: 'exec';
  config: { command: string; args: string[] };
  env: Record<string, string>;
  csiPlugin?: CSIPluginConfig;
  volumeMounts: VolumeMount[];
  restart: RestartPolicy;
  /** Signal sent on stop (default SIGTERM). */
  killSignal: NodeJS.Signals;
  /** ms before SIGKILL follows the kill signal (default 5 s). */
  killTimeout: number;
}

export interface GroupSpec {
  name: string;
  count: number;
  tasks: TaskSpec[];
  volumes: VolumeRequest[];
  restart: RestartPolicy;
}

export interface JobSpec {
  id: string;
  name: string;
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
  desiredStatus: AllocDesiredStatus;
  clientStatus: AllocClientStatus;
  createdAt: number;
}
