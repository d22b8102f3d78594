// Jobspecs: a Nomad subset in HCL, or the same shape in JSON, checked and
// turned into the typed JobSpec with every default filled in. One JSON form
// (JobDocument) is the input everywhere: files, the HTTP API, the CLI.
import {
  DEFAULT_TASK_LOGS,
  STALE_MOUNT_POLICIES,
  ValidationError,
  assertPathSafeId,
  capabilityName,
  formatDuration,
  parseCsiPluginConfig,
  type StaleMountPolicy,
} from '@csiplug/core';
import * as os from 'os';
import * as path from 'path';
import type { CSIPluginConfig, GroupSpec, JobSpec, RestartPolicy, TaskSpec, UpdateStrategy, VolumeMount, VolumeRequest } from './model';
import { type ImageTaskConfigDocument, imageTaskConfigToDocument, isImageDriver, readImageTaskConfig } from './docker-task-config';
import { ACCESS_MODES, ATTACHMENT_MODES, READER_ONLY_ACCESS_MODES } from './modes';
import { datacenterPatternProblem } from './datacenters';
import { BlockReader, type Body, Problems, Where, detectFormat, isBody, loadDocument, singleBody, withPrefix } from './document';
import { inSourceOrder } from './hcl-source-order';
import { checkTaskInterpolation } from './interpolation-check';
import { readTemplates, templateToDocument, type TemplateDocument } from './template-spec';

export { ValidationProblems } from './document';

/** Nomad's restart defaults for service jobs. */
export const DEFAULT_RESTART: Readonly<RestartPolicy> = Object.freeze({ attempts: 2, interval: 30 * 60_000, delay: 15_000, mode: 'fail' });
export const DEFAULT_KILL_TIMEOUT = 5_000;
/** Nomad's `update` defaults (its other fields — canary, stagger, progress_deadline… — are not supported). */
export const DEFAULT_UPDATE: Readonly<UpdateStrategy> = Object.freeze({
  maxParallel: 1,
  minHealthyTime: 10_000,
  healthyDeadline: 5 * 60_000,
  autoRevert: false,
});
export const DEFAULT_KILL_SIGNAL: NodeJS.Signals = 'SIGTERM';

// ---------------------------------------------------------------------------
// The JSON form. Blocks are objects, labels are keys; a repeatable block
// (volume_mount) is a list or a single object. The hcl2json form, where every
// block is a list of bodies, is accepted as well. Durations are Go-style
// strings ("30s") or numbers of milliseconds.

export type DurationValue = string | number;

export interface RestartDocument {
  attempts?: number;
  interval?: DurationValue;
  delay?: DurationValue;
  mode?: 'fail' | 'delay';
}

export interface VolumeDocument {
  type: 'csi';
  source: string;
  access_mode: string;
  attachment_mode?: string;
  read_only?: boolean;
  mount_options?: { fs_type?: string; mount_flags?: string[] };
  on_stale_mount?: StaleMountPolicy;
  per_alloc?: boolean;
}

export interface VolumeMountDocument {
  volume: string;
  destination: string;
  read_only?: boolean;
}

export interface CsiPluginDocument {
  id: string;
  type: 'node' | 'controller' | 'monolith';
  mount_dir?: string;
  stage_publish_base_dir?: string;
  health_timeout?: DurationValue;
}

export interface TaskDocument {
  driver: 'exec' | 'raw_exec' | 'docker' | 'podman';
  /** exec and raw_exec: a command; docker and podman: an image (docker-task-config.ts). */
  config: { command: string; args?: string[] } | ImageTaskConfigDocument;
  env?: Record<string, string>;
  csi_plugin?: CsiPluginDocument;
  volume_mount?: VolumeMountDocument[] | VolumeMountDocument;
  restart?: RestartDocument;
  kill_signal?: string;
  kill_timeout?: DurationValue;
  user?: string;
  logs?: { max_files?: number; max_file_size?: number };
  template?: TemplateDocument[];
}

export interface UpdateDocument {
  max_parallel?: number;
  min_healthy_time?: DurationValue;
  healthy_deadline?: DurationValue;
  auto_revert?: boolean;
}

export interface GroupDocument {
  count?: number;
  restart?: RestartDocument;
  update?: UpdateDocument;
  volume?: Record<string, VolumeDocument>;
  task: Record<string, TaskDocument>;
}

export interface JobBodyDocument {
  name?: string;
  /** "service" (the default) or "system". */
  type?: string;
  /** Where it may run (datacenters.ts); absent: every datacenter. */
  datacenters?: string[];
  /** The default of every group's update block (a group's own fields win, one by one). */
  update?: UpdateDocument;
  group: Record<string, GroupDocument>;
}

/** A jobspec as JSON: `{ "job": { "<id>": { "group": { "<name>": { … } } } } }`. */
export interface JobDocument {
  job: Record<string, JobBodyDocument>;
}

// ---------------------------------------------------------------------------

/**
 * Parses a jobspec file, HCL or JSON (see detectFormat), into a checked
 * JobSpec. Errors are ValidationErrors that start with the file name and name
 * the job, group, task and field; a file with several problems fails with
 * one ValidationProblems that lists them all, in document order.
 */
export async function parseJobspec(text: string, filename: string): Promise<JobSpec> {
  const doc = await loadDocument(text, filename);
  // Problems are listed in the order the file has them; hcl2json sorts keys.
  const ordered = detectFormat(text, filename) === 'hcl' ? inSourceOrder(doc, text) : doc;
  return withPrefix(filename, () => validateJob(ordered));
}

/**
 * Checks a jobspec in its JSON form (a parsed file, or an HTTP API body) and
 * returns the JobSpec. Also accepts the document wrapped as `{ "Job": … }`,
 * the way the HTTP API carries it. Every problem is found in one pass: one
 * is thrown as the ValidationError it is, several as one ValidationProblems.
 */
export function validateJob(raw: unknown): JobSpec {
  let doc = raw;
  if (isBody(doc) && Object.keys(doc).length === 1 && 'Job' in doc) doc = doc.Job;
  if (!isBody(doc)) throw new ValidationError('a jobspec must be an object like { "job": { "<id>": { … } } }');
  // Every problem of the document in one pass: one ValidationError as it is, several as one ValidationProblems.
  const problems = new Problems();
  const job = problems.attempt(() => readDocument(doc, problems), undefined);
  problems.throwIfAny();
  return job!;
}

/**
 * Reads a jobspec document as an answer (a client reading what an agent says
 * a job is), not as a registration: the job the reader makes of it, with the
 * problems validateJob would refuse it for passed over; throws only when no
 * job can be read from it at all.
 */
export function readJobAnswer(raw: unknown): JobSpec {
  if (!isBody(raw)) throw new ValidationError('a job in an answer must be an object like { "job": { "<id>": { … } } }');
  const problems = new Problems();
  const job = problems.attempt(() => readDocument(raw, problems), undefined);
  if (job === undefined) problems.throwIfAny();
  if (job === undefined) throw new ValidationError('no job could be read from the answer');
  return job;
}

/** The canonical JSON form of a JobSpec: every field explicit. validateJob(jobToDocument(j)) deep-equals j. */
export function jobToDocument(job: JobSpec): JobDocument {
  const duration = (ms: number): DurationValue => (Number.isInteger(ms) ? formatDuration(ms) : ms);
  const restart = (r: RestartPolicy): RestartDocument => ({
    attempts: r.attempts,
    interval: duration(r.interval),
    delay: duration(r.delay),
    mode: r.mode,
  });
  const plugin = (p: CSIPluginConfig): CsiPluginDocument => ({
    id: p.id,
    type: p.type,
    mount_dir: p.mountDir,
    stage_publish_base_dir: p.stagePublishBaseDir,
    health_timeout: duration(p.healthTimeout),
  });
  const volume = (v: VolumeRequest): VolumeDocument => ({
    type: v.type,
    source: v.source,
    access_mode: v.accessMode,
    attachment_mode: v.attachmentMode,
    read_only: v.readOnly,
    ...(v.mountOptions
      ? {
          mount_options: {
            ...(v.mountOptions.fsType !== undefined ? { fs_type: v.mountOptions.fsType } : {}),
            ...(v.mountOptions.mountFlags !== undefined ? { mount_flags: [...v.mountOptions.mountFlags] } : {}),
          },
        }
      : {}),
    ...(v.onStaleMount !== undefined ? { on_stale_mount: v.onStaleMount } : {}),
    ...(v.perAlloc ? { per_alloc: true } : {}),
  });
  const task = (t: TaskSpec): TaskDocument => ({
    // A record from before isolation (no `isolated`) ran as a host process: that is raw_exec now.
    driver: isImageDriver(t.driver) ? t.driver : t.isolated ? 'exec' : 'raw_exec',
    config: isImageDriver(t.driver)
      ? imageTaskConfigToDocument(t)
      : {
          command: t.config.command,
          args: [...t.config.args],
          ...(t.config.capAdd ? { cap_add: [...t.config.capAdd] } : {}),
          ...(t.config.capDrop ? { cap_drop: [...t.config.capDrop] } : {}),
          ...(t.config.networkMode ? { network_mode: t.config.networkMode } : {}),
        },
    env: { ...t.env },
    ...(t.csiPlugin ? { csi_plugin: plugin(t.csiPlugin) } : {}),
    volume_mount: t.volumeMounts.map((m) => ({
      volume: m.volume,
      destination: m.destination,
      read_only: m.readOnly,
      ...(m.propagation ? { propagation_mode: m.propagation } : {}),
    })),
    restart: restart(t.restart),
    kill_signal: t.killSignal,
    kill_timeout: duration(t.killTimeout),
    ...(t.user !== undefined ? { user: t.user } : {}),
    ...(t.logs ? { logs: { max_files: t.logs.maxFiles, max_file_size: t.logs.maxFileSizeMB } } : {}),
    ...(t.resources
      ? {
          resources: {
            ...(t.resources.cpu !== undefined ? { cpu: t.resources.cpu } : {}),
            ...(t.resources.memoryMB !== undefined ? { memory: t.resources.memoryMB } : {}),
          },
        }
      : {}),
    ...(t.templates?.length ? { template: t.templates.map(templateToDocument) } : {}),
  });
  const update = (u: UpdateStrategy): UpdateDocument => ({
    max_parallel: u.maxParallel,
    min_healthy_time: duration(u.minHealthyTime),
    healthy_deadline: duration(u.healthyDeadline),
    auto_revert: u.autoRevert,
  });
  const group = (g: GroupSpec): GroupDocument => ({
    count: g.count,
    restart: restart(g.restart),
    // A group saved before update blocks existed reads as the defaults.
    update: update(g.update ?? DEFAULT_UPDATE),
    volume: Object.fromEntries(g.volumes.map((v) => [v.name, volume(v)])),
    task: Object.fromEntries(g.tasks.map((t) => [t.name, task(t)])),
  });
  return {
    job: {
      [job.id]: {
        name: job.name,
        ...(job.type === 'system' ? { type: 'system' } : {}),
        ...(job.datacenters ? { datacenters: [...job.datacenters] } : {}),
        group: Object.fromEntries(job.groups.map((g) => [g.name, group(g)])),
      },
    },
  };
}

// ---------------------------------------------------------------------------
// Nomad fields csiplug has no use for, with what to do instead: a jobspec
// written for Nomad gets advice rather than "is not a known field".

const REMOVE = 'remove it';
const ONE_NODE = `csiplug runs every job on this one node, so there is nothing to choose; ${REMOVE}`;
const PLACEMENT = `csiplug runs everything on this one node: there is no placement to constrain; ${REMOVE}`;
const NO_VAULT = `csiplug has no Vault integration: give the task its secrets in env, or let the command fetch them; ${REMOVE}`;
const NO_CONSUL = `csiplug has no Consul integration; ${REMOVE}`;
const NO_META = `csiplug keeps no metadata: give the task what it needs in env; ${REMOVE}`;
const NO_SERVICE = `csiplug registers no services (no Consul or Nomad service discovery); a CSI plugin is registered by its task's csi_plugin block; ${REMOVE}`;
const NO_RESCHEDULE = `csiplug has one node: a failed allocation is not moved anywhere; the restart block says what happens when a task exits; ${REMOVE}`;
const NO_NETWORK =
  'csiplug assigns no ports or networks: a raw_exec task uses the host\'s network, an exec task the host\'s (config { network_mode = "host" }) or only a loopback of its own (network_mode = "none"); ' +
  REMOVE;

export const JOB_UNSUPPORTED: Readonly<Record<string, string>> = {
  region: ONE_NODE,
  node_pool: ONE_NODE,
  namespace: `csiplug has no namespaces; ${REMOVE}`,
  priority: `csiplug places every job at once; ${REMOVE}`,
  all_at_once: `csiplug places every job at once; ${REMOVE}`,
  constraint: PLACEMENT,
  affinity: PLACEMENT,
  spread: PLACEMENT,
  periodic: 'csiplug runs service jobs only (long-running tasks, restarted when they exit); run periodic work from cron or a systemd timer',
  parameterized: 'csiplug runs service jobs only (long-running tasks, restarted when they exit); it has no dispatch',
  reschedule: NO_RESCHEDULE,
  migrate: NO_RESCHEDULE,
  multiregion: ONE_NODE,
  vault: NO_VAULT,
  consul: NO_CONSUL,
  meta: NO_META,
};

export const GROUP_UNSUPPORTED: Readonly<Record<string, string>> = {
  network: NO_NETWORK,
  service: NO_SERVICE,
  constraint: PLACEMENT,
  affinity: PLACEMENT,
  spread: PLACEMENT,
  reschedule: NO_RESCHEDULE,
  migrate: NO_RESCHEDULE,
  ephemeral_disk: `a task's files live in its alloc dir under the agent's data_dir; ${REMOVE}`,
  scaling: `set count instead; ${REMOVE}`,
  vault: NO_VAULT,
  consul: NO_CONSUL,
  meta: NO_META,
};

export const TASK_UNSUPPORTED: Readonly<Record<string, string>> = {
  artifact: `csiplug downloads nothing: put the program on this node and name it in config { command = "…" }; ${REMOVE}`,
  service: NO_SERVICE,
  constraint: PLACEMENT,
  affinity: PLACEMENT,
  lifecycle: `the tasks of a group all start together: prestart, poststart and sidecar tasks are not supported; ${REMOVE}`,
  vault: NO_VAULT,
  consul: NO_CONSUL,
  meta: NO_META,
};

const DRIVERS_HERE =
  'csiplug runs driver = "exec" (a process isolated on runc), "raw_exec" (a host process), and "docker" or "podman" (an OCI image on runc)';

/** An exec or raw_exec task's config: a command. */
const CONFIG_UNSUPPORTED: Readonly<Record<string, string>> = {
  image:
    'images run with driver = "docker" (or "podman"); an exec or raw_exec task runs config { command = "…" args = […] } from this node',
  entrypoint: 'an entrypoint is for an image (driver = "docker" or "podman"); here use command (and args)',
  privileged:
    'an exec task with a csi_plugin block already runs privileged where the agent\'s plugin "exec" { allow_privileged } allows it (privileged = true is how the docker driver says so); remove it',
  ports: NO_NETWORK,
  port_map: NO_NETWORK,
  volumes: `mount a CSI volume with the group's volume block and the task's volume_mount; ${REMOVE}`,
};

/** Nomad's drivers csiplug does not have; any other unknown driver gets the plain list. */
const NOMAD_DRIVERS = new Set(['containerd-driver', 'nspawn', 'java', 'qemu', 'exec2', 'lxc', 'rkt']);

/** Job types: csiplug's jobs are Nomad's service jobs; what it says instead of the others. */
const JOB_TYPES: Readonly<Record<string, string>> = {
  batch: 'is not supported: csiplug runs service jobs only (long-running tasks, restarted when they exit; see the restart block)',
  sysbatch: 'is not supported: csiplug runs service jobs only (long-running tasks, restarted when they exit; see the restart block)',
};

// ---------------------------------------------------------------------------

function checkId(where: Where, id: string, what: string, at: readonly number[]): void {
  where.check(() => assertPathSafeId(id, what), undefined, at);
}

const byName = <T extends { name: string }>(a: T, b: T): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

/** The parts read without a problem that ends them (a part that failed is left out: the problems say why). */
const present = <T>(items: (T | undefined)[]): T[] => items.filter((x): x is T => x !== undefined);

/** The job of a document, every problem recorded in `problems` (the result is meaningless when there are any). */
function readDocument(doc: Body, problems: Problems): JobSpec | undefined {
  const top = new BlockReader(doc, new Where('', '', problems), ['job']);
  const jobs = top.labelled('job', 'job');
  const given = top.labelCount('job');
  if (given >= 0 && given !== 1) {
    // Which of several jobs was meant is unknown: none is read.
    throw new ValidationError(`a jobspec must hold exactly one job block, like job "<id>" { … } (found ${given})`, 'job');
  }
  const [id, body, at] = jobs[0] ?? [];
  return id === undefined ? undefined : top.where.guard(() => readJob(top.where, id, body!, at!), undefined);
}

function readJob(top: Where, id: string, body: Body, at: readonly number[]): JobSpec {
  checkId(top, id, 'job id', at);
  const where = top.object(`job ${JSON.stringify(id)}`, at);
  const r = new BlockReader(body, where, ['name', 'type', 'datacenters', 'update', 'group'], JOB_UNSUPPORTED);
  const name = r.string('name', id);
  const datacenters = readDatacenters(r);
  const type = r.string('type', 'service');
  if (type !== 'service' && type !== 'system')
    r.report(
      'type',
      `"${type}" ${JOB_TYPES[type] ?? 'must be "service" or "system", the kinds of job csiplug runs (or leave type out: service)'}`,
    );
  const update = readUpdate(r, where, DEFAULT_UPDATE);
  const groups = present(
    r.labelled('group', 'group').map(([g, b, gat]) => where.guard(() => readGroup(where, g, b, update, gat, type === 'system'), undefined)),
  );
  if (r.labelCount('group') === 0) where.reportObject('needs at least one group', r.at('group'));
  return {
    id,
    name,
    ...(type === 'system' ? { type: 'system' as const } : {}),
    ...(datacenters ? { datacenters } : {}),
    groups: groups.sort(byName),
  };
}

/** `datacenters`, as Nomad's (datacenters.ts); undefined when it is every datacenter (absent, empty as Nomad fills it in, or ["*"]). */
function readDatacenters(r: BlockReader): string[] | undefined {
  const list = r.stringList('datacenters');
  list.forEach((dc, i) => {
    const problem = datacenterPatternProblem(dc);
    if (problem) r.report(`datacenters[${i}]`, problem);
  });
  const unique = [...new Set(list)].sort();
  return unique.length === 0 || unique.includes('*') ? undefined : unique;
}

function readGroup(parent: Where, name: string, body: Body, jobUpdate: UpdateStrategy, at: readonly number[], system = false): GroupSpec {
  checkId(parent, name, 'group name', at);
  const where = parent.object(`group ${JSON.stringify(name)}`, at);
  const r = new BlockReader(body, where, ['count', 'restart', 'update', 'volume', 'task'], GROUP_UNSUPPORTED);
  const count = r.int('count', 1, 1);
  // Nomad's rule: a system job runs one alloc of each group on every eligible node; the count is that one.
  if (system && count !== 1)
    r.report('count', `is ${count}: a system job runs one alloc of each group on every node it can, so count must be 1 (or left out)`);
  const restart = readRestart(r, DEFAULT_RESTART);
  const update = readUpdate(r, where, jobUpdate);
  const volumeEntries = r.labelled('volume', 'volume');
  const volumes = present(volumeEntries.map(([v, b, vat]) => where.guard(() => readVolume(where, v, b, vat, system), undefined)));
  const byVolume = new Map(volumes.map((v) => [v.name, v]));
  // A volume_mount of a volume that is there but has problems of its own is not one more problem.
  const volumeNames = new Set(volumeEntries.map(([v]) => v));
  const tasks = present(
    r
      .labelled('task', 'task')
      .map(([t, b, tat]) => where.guard(() => readTask(where, t, b, restart, byVolume, volumeNames, tat), undefined)),
  );
  if (r.labelCount('task') === 0) where.reportObject('needs at least one task', r.at('task'));
  return { name, count, tasks: tasks.sort(byName), volumes: volumes.sort(byName), restart, update };
}

const UPDATE_FIELDS = ['max_parallel', 'min_healthy_time', 'healthy_deadline', 'auto_revert'];

/**
 * An `update` block of a job or a group, each field defaulting to `base`
 * (Nomad's defaults for a job, the job's block for a group). Errors read
 * `job "x" group "y" update: <field> …`.
 */
function readUpdate(parent: BlockReader, owner: Where, base: UpdateStrategy): UpdateStrategy {
  if (!parent.has('update')) return { ...base };
  const at = parent.at('update');
  const where = owner.object('update', at);
  return owner.guard(
    () => {
      const r = new BlockReader(singleBody(parent.raw('update'), owner, 'update', at), where, UPDATE_FIELDS);
      // 0, Nomad's "no deployment at all", is not offered: every change here is rolled out and watched.
      const maxParallel = r.int('max_parallel', base.maxParallel, 1);
      const minHealthyTime = r.duration('min_healthy_time', base.minHealthyTime);
      if (minHealthyTime < 0) r.report('min_healthy_time', `may not be negative (got ${formatDuration(minHealthyTime)})`);
      const healthyDeadline = r.duration('healthy_deadline', base.healthyDeadline);
      if (healthyDeadline <= 0) r.report('healthy_deadline', `must be positive (got ${formatDuration(healthyDeadline)})`);
      if (healthyDeadline <= minHealthyTime && !r.failed('min_healthy_time')) {
        const which = r.has('healthy_deadline') ? 'healthy_deadline' : 'min_healthy_time';
        r.report(
          which,
          `leaves no time to become healthy: healthy_deadline (${formatDuration(healthyDeadline)}) must be longer than min_healthy_time (${formatDuration(minHealthyTime)})`,
        );
      }
      return { maxParallel, minHealthyTime, healthyDeadline, autoRevert: r.bool('auto_revert', base.autoRevert) };
    },
    { ...base },
  );
}

function readRestart(parent: BlockReader, base: RestartPolicy): RestartPolicy {
  const r = parent.block('restart', ['attempts', 'interval', 'delay', 'mode']);
  if (!r) return { ...base };
  const interval = r.duration('interval', base.interval);
  if (interval <= 0) r.report('interval', 'must be positive');
  return {
    attempts: r.int('attempts', base.attempts, 0),
    interval,
    delay: r.duration('delay', base.delay),
    mode: r.oneOf('mode', ['fail', 'delay'] as const, base.mode),
  };
}

function readVolume(parent: Where, name: string, body: Body, at: readonly number[], system: boolean): VolumeRequest {
  checkId(parent, name, 'volume name', at);
  const where = parent.object(`volume ${JSON.stringify(name)}`, at);
  const r = new BlockReader(body, where, [
    'type',
    'source',
    'access_mode',
    'attachment_mode',
    'read_only',
    'mount_options',
    'on_stale_mount',
    'per_alloc',
  ]);
  const type = r.oneOf('type', ['csi'] as const);
  const source = r.requiredString('source');
  try {
    assertPathSafeId(source, 'volume id');
  } catch (err) {
    r.report('source', `is not usable: ${(err as Error).message}`);
  }
  const accessMode = r.oneOf('access_mode', ACCESS_MODES);
  const attachmentMode = r.oneOf('attachment_mode', ATTACHMENT_MODES, 'file-system');
  const readOnly = r.bool('read_only', false);
  if (!readOnly && READER_ONLY_ACCESS_MODES.includes(accessMode)) r.report('read_only', `must be true for access_mode ${accessMode}`);
  const volume: VolumeRequest = { name, type, source, accessMode, attachmentMode, readOnly };
  // Nomad's per_alloc: alloc i mounts volume "<source>[i]" (per-alloc-volume.ts in core).
  if (r.bool('per_alloc', false)) volume.perAlloc = true;
  // Nomad's rule and words (nomad/structs/volumes.go): a system job's allocs have no index of their own to name volumes by.
  if (volume.perAlloc && system)
    r.report(
      'per_alloc',
      'volume cannot be per_alloc for system or sysbatch jobs: a system job runs one alloc per node, all with index 0; ' +
        'remove per_alloc = true (every node then mounts the volume of source), or make the job type "service" with a count',
    );
  // What to do with a live mount found stale after its plugin came back (default: remount).
  if (r.has('on_stale_mount')) volume.onStaleMount = r.oneOf('on_stale_mount', STALE_MOUNT_POLICIES);
  const mo = r.block('mount_options', ['fs_type', 'mount_flags']);
  if (mo) {
    const fsType = mo.string('fs_type');
    const mountFlags = mo.has('mount_flags') ? mo.stringList('mount_flags') : undefined;
    if (attachmentMode === 'block-device') r.report('mount_options', 'cannot be set with attachment_mode block-device');
    volume.mountOptions = { ...(fsType !== undefined ? { fsType } : {}), ...(mountFlags !== undefined ? { mountFlags } : {}) };
  }
  return volume;
}

const TASK_FIELDS = [
  'driver',
  'config',
  'env',
  'user',
  'csi_plugin',
  'volume_mount',
  'restart',
  'kill_signal',
  'kill_timeout',
  'resources',
  'logs',
  'template',
];
const SIGNALS = new Set(Object.keys(os.constants.signals));

/** The task's driver; undefined when it is missing or not one csiplug has (reported), so that no check that depends on it is made. */
function readDriver(r: BlockReader): TaskSpec['driver'] | undefined {
  if (!r.has('driver')) {
    r.report('driver', 'is required (exec, raw_exec, docker or podman)');
    return undefined;
  }
  const driver = r.raw('driver');
  if (typeof driver === 'string' && NOMAD_DRIVERS.has(driver)) {
    r.report('driver', `"${driver}" is not supported: ${DRIVERS_HERE}`);
    return undefined;
  }
  const read = r.oneOf('driver', ['exec', 'raw_exec', 'docker', 'podman'] as const);
  return r.failed('driver') ? undefined : read;
}

function readTask(
  parent: Where,
  name: string,
  body: Body,
  groupRestart: RestartPolicy,
  volumes: Map<string, VolumeRequest>,
  volumeNames: ReadonlySet<string>,
  at: readonly number[],
): TaskSpec {
  checkId(parent, name, 'task name', at);
  // <alloc dir>/alloc is the alloc's shared dir (an isolated task's /alloc): a task of that name would share its own dir, records and all.
  if (name === 'alloc') parent.report('task "alloc"', 'the name "alloc" is taken by the alloc\'s shared dir; name the task otherwise', at);
  const where = parent.object(`task ${JSON.stringify(name)}`, at);
  const r = new BlockReader(body, where, TASK_FIELDS, TASK_UNSUPPORTED);

  const driver = readDriver(r);
  // Checks that depend on the driver are made only when it is known: with none, "exec only" would be a guess.
  const imageTask = isImageDriver(driver) ? readImageTaskConfig(r, driver) : undefined;
  const isolated = driver === 'exec' || imageTask !== undefined;
  const hostProcess = driver === 'raw_exec';

  if (!imageTask && !r.has('config')) r.report('config', 'is required: config { command = "…" }');
  const c = imageTask ? undefined : r.block('config', ['command', 'args', 'cap_add', 'cap_drop', 'network_mode'], CONFIG_UNSUPPORTED);
  const config: TaskSpec['config'] = imageTask?.config ?? {
    command: c?.requiredString('command') ?? '',
    args: c?.stringList('args') ?? [],
  };
  for (const [key, field] of [
    ['cap_add', 'capAdd'],
    ['cap_drop', 'capDrop'],
  ] as const) {
    if (!c?.has(key)) continue;
    if (hostProcess) {
      c.report(
        key,
        'is for driver = "exec", "docker" or "podman" (an isolated task); a raw_exec task runs with the agent\'s own privileges',
      );
      continue;
    }
    config[field] = c.stringList(key).flatMap((cap, i) => {
      try {
        return [capabilityName(cap)];
      } catch {
        c.report(`${key}[${i}]`, `"${cap}" is not a Linux capability (like "net_admin" or "CAP_NET_ADMIN")`);
        return [];
      }
    });
  }

  if (c?.has('network_mode')) {
    if (hostProcess)
      c.report(
        'network_mode',
        'is for driver = "exec", "docker" or "podman" (an isolated task); a raw_exec task always uses the host\'s network',
      );
    else config.networkMode = c.oneOf('network_mode', ['host', 'none'] as const);
  }

  const env = r.stringMap('env');
  // An isolated task starts under a shell init, which passes on only names a shell takes.
  if (isolated) {
    const bad = Object.keys(env).filter((k) => !/^[A-Za-z_][A-Za-z0-9_]*$/.test(k));
    const what = 'an isolated (exec, docker or podman) task can be given: letters, digits and _, not starting with a digit';
    if (bad.length === 1) r.report('env', `"${bad[0]}" is not a name ${what}`);
    if (bad.length > 1) r.report('env', `${bad.map((k) => `"${k}"`).join(', ')} are not names ${what}`);
  }

  let csiPlugin: CSIPluginConfig | undefined;
  if (r.has('csi_plugin')) {
    // The hook's parser names the task itself (its errors carry the prefix given), and stops at its block's first problem.
    csiPlugin = where.guard(
      () => parseCsiPluginConfig(singleBody(r.raw('csi_plugin'), where, 'csi_plugin', r.at('csi_plugin')), where.prefix),
      undefined,
      r.at('csi_plugin'),
    );
  }

  const volumeMounts: VolumeMount[] = [];
  const destinations = new Set<string>();
  for (const { body: b, field, at: mat } of r.blockList('volume_mount')) {
    const mount = where.guard(
      () =>
        readVolumeMount(
          new BlockReader(b, where.block(field, mat), ['volume', 'destination', 'read_only', 'propagation_mode']),
          volumes,
          volumeNames,
          destinations,
          driver,
        ),
      undefined,
      mat,
    );
    if (mount) volumeMounts.push(mount);
  }

  const restart = readRestart(r, groupRestart);

  // Nomad's task user: whom an isolated task runs as (default nobody; the agent's plugin "exec" { allowed_users } decides).
  let user: string | undefined;
  if (r.has('user')) {
    user = r.string('user', '');
    if (hostProcess)
      r.report('user', 'is for driver = "exec", "docker" or "podman" (an isolated task); a raw_exec task runs as the agent\'s own user');
    else if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]*\$?$/.test(user))
      r.report('user', `"${user}" is not a user name (like "nobody" or "www-data") or uid`);
  }

  const killSignal = r.string('kill_signal', DEFAULT_KILL_SIGNAL);
  if (!SIGNALS.has(killSignal)) r.report('kill_signal', `must be a signal name like SIGTERM or SIGINT (got "${killSignal}")`);
  const killTimeout = r.duration('kill_timeout', DEFAULT_KILL_TIMEOUT);

  // Nomad's resources: cpu in MHz (applied as cgroup cpu shares, 1:1) and memory in MiB (a hard limit), for an isolated task.
  let resources: TaskSpec['resources'];
  const res = r.block('resources', ['cpu', 'memory']);
  if (res) {
    const cpu = res.has('cpu') ? res.int('cpu', 100, 2, 262_144) : undefined;
    const memoryMB = res.has('memory') ? res.int('memory', 300, 4, 16 * 1024 * 1024) : undefined;
    resources = { ...(cpu !== undefined ? { cpu } : {}), ...(memoryMB !== undefined ? { memoryMB } : {}) };
  }

  // Nomad's logs: max_files of each stream kept, max_file_size MB each. Without the block the driver keeps Nomad's defaults (10 × 10 MB),
  // and the spec says nothing: a job saved before rotation is not taken for a changed one.
  const l = r.block('logs', ['max_files', 'max_file_size']);
  const logs = l
    ? {
        maxFiles: l.int('max_files', DEFAULT_TASK_LOGS.maxFiles, 1, 1_000),
        maxFileSizeMB: l.int('max_file_size', DEFAULT_TASK_LOGS.maxFileSizeMB, 1, 1024 * 1024),
      }
    : undefined;

  const templates = readTemplates(r, where, driver);
  // Every ${…} name has a value when the task starts (interpolation-check.ts): none is passed on literally.
  for (const p of checkTaskInterpolation(
    {
      config,
      env,
      volumeMounts,
      isolated,
      templates,
      ...(csiPlugin ? { csiPlugin } : {}),
      ...(imageTask ? { image: imageTask.image } : {}),
    },
    [...volumeNames],
  ))
    where.report(p.field, p.message, r.at(p.key));

  return {
    name,
    driver: driver ?? 'exec',
    isolated,
    config,
    ...(imageTask ? { image: imageTask.image } : {}),
    env,
    ...(csiPlugin ? { csiPlugin } : {}),
    volumeMounts,
    restart,
    killSignal: killSignal as NodeJS.Signals,
    ...(user !== undefined && !hostProcess ? { user } : {}),
    ...(resources ? { resources } : {}),
    killTimeout,
    ...(logs ? { logs } : {}),
    ...(templates.length ? { templates } : {}),
  };
}

function readVolumeMount(
  m: BlockReader,
  volumes: Map<string, VolumeRequest>,
  volumeNames: ReadonlySet<string>,
  destinations: Set<string>,
  driver: TaskSpec['driver'] | undefined,
): VolumeMount {
  const volumeName = m.requiredString('volume');
  const volume = volumes.get(volumeName);
  if (!volume && !volumeNames.has(volumeName)) {
    const known = [...volumeNames];
    m.report(
      'volume',
      `names "${volumeName}", which is not a volume of the group${known.length ? ` (volumes: ${known.join(', ')})` : ' (the group has no volume blocks)'}`,
    );
  }
  const destination = readDestination(m);
  if (destinations.has(destination)) m.report('destination', `"${destination}" is already used by another volume_mount of this task`);
  destinations.add(destination);
  // A volume the group asks for read-only is mounted read-only whatever the mount says.
  const readOnly = m.bool('read_only', false) || (volume?.readOnly ?? false);
  const propagation = m.has('propagation_mode')
    ? m.oneOf('propagation_mode', ['private', 'host-to-task', 'bidirectional'] as const)
    : undefined;
  if (propagation !== undefined && driver === 'raw_exec')
    m.report(
      'propagation_mode',
      'is for driver = "exec", "docker" or "podman" (a bind mount into an isolated task); a raw_exec task sees the host path itself',
    );
  if (propagation === 'bidirectional' && readOnly)
    m.report('propagation_mode', '"bidirectional" needs a writable mount; the volume is read-only here');
  return { volume: volumeName, destination, readOnly, ...(propagation !== undefined ? { propagation } : {}) };
}

/** Where the task sees a volume, relative to its task dir; may not climb out of it. */
function readDestination(m: BlockReader): string {
  const raw = m.requiredString('destination');
  if (raw.includes('\0')) m.report('destination', 'may not contain NUL');
  if (raw.split(/[\\/]/).includes('..')) m.report('destination', `"${raw}" may not contain ".."`);
  const normal = path.posix.normalize(raw);
  if (normal === '/' || normal === '.' || normal === './') m.report('destination', `"${raw}" must name a path inside the task dir`);
  return normal.replace(/\/$/, '');
}
