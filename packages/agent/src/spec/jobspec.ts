// Jobspecs: a Nomad subset in HCL, or the same shape in JSON, checked and
// turned into the typed JobSpec with every default filled in. One JSON form
// (JobDocument) is the input everywhere: files, the HTTP API, the CLI.
import { ValidationError, assertPathSafeId, formatDuration } from '@csiplug/core';
import { parseCsiPluginConfig } from '@csiplug/hooks';
import { capabilityName } from '@csiplug/driver';
import * as os from 'os';
import * as path from 'path';
import type { CSIPluginConfig, GroupSpec, JobSpec, RestartPolicy, TaskSpec, UpdateStrategy, VolumeMount, VolumeRequest } from '../model';
import { STALE_MOUNT_POLICIES, type StaleMountPolicy } from '@csiplug/volumes';
import { ACCESS_MODES, ATTACHMENT_MODES, READER_ONLY_ACCESS_MODES } from './modes';
import { BlockReader, Body, Where, isBody, loadDocument, singleBody, withPrefix } from './document';

/** Nomad's restart defaults for service jobs. */
export const DEFAULT_RESTART: Readonly<RestartPolicy> = Object.freeze({ attempts: 2, interval: 30 * 60_000, delay: 15_000, mode: 'fail' });
export const DEFAULT_KILL_TIMEOUT = 5_000;
/** Nomad's `update` defaults (its other fields — canary, stagger, progress_deadline… — are not supported). */
export const DEFAULT_UPDATE: Readonly<UpdateStrategy> = Object.freeze({ maxParallel: 1, minHealthyTime: 10_000, healthyDeadline: 5 * 60_000, autoRevert: false });
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
  driver: 'exec' | 'raw_exec';
  config: { command: string; args?: string[] };
  env?: Record<string, string>;
  csi_plugin?: CsiPluginDocument;
  volume_mount?: VolumeMountDocument[] | VolumeMountDocument;
  restart?: RestartDocument;
  kill_signal?: string;
  kill_timeout?: DurationValue;
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
 * the job, group, task and field.
 */
export async function parseJobspec(text: string, filename: string): Promise<JobSpec> {
  const doc = await loadDocument(text, filename);
  return withPrefix(filename, () => validateJob(doc));
}

/**
 * Checks a jobspec in its JSON form (a parsed file, or an HTTP API body) and
 * returns the JobSpec. Also accepts the document wrapped as `{ "Job": … }`,
 * the way the HTTP API carries it.
 */
export function validateJob(raw: unknown): JobSpec {
  let doc = raw;
  if (isBody(doc) && Object.keys(doc).length === 1 && 'Job' in doc) doc = doc.Job;
  if (!isBody(doc)) throw new ValidationError('a jobspec must be an object like { "job": { "<id>": { … } } }');
  const top = new BlockReader(doc, new Where(''), ['job']);
  const jobs = top.labelled('job', 'job');
  if (jobs.length !== 1) {
    throw new ValidationError(`a jobspec must hold exactly one job block, like job "<id>" { … } (found ${jobs.length})`, 'job');
  }
  const [id, body] = jobs[0]!;
  return readJob(id, body);
}

/** The canonical JSON form of a JobSpec: every field explicit. validateJob(jobToDocument(j)) deep-equals j. */
export function jobToDocument(job: JobSpec): JobDocument {
  const duration = (ms: number): DurationValue => (Number.isInteger(ms) ? formatDuration(ms) : ms);
  const restart = (r: RestartPolicy): RestartDocument => ({ attempts: r.attempts, interval: duration(r.interval), delay: duration(r.delay), mode: r.mode });
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
  });
  const task = (t: TaskSpec): TaskDocument => ({
    // A record from before isolation (no `isolated`) ran as a host process: that is raw_exec now.
    driver: t.isolated ? 'exec' : 'raw_exec',
    config: {
      command: t.config.command,
      args: [...t.config.args],
      ...(t.config.capAdd ? { cap_add: [...t.config.capAdd] } : {}),
      ...(t.config.capDrop ? { cap_drop: [...t.config.capDrop] } : {}),
      ...(t.config.networkMode ? { network_mode: t.config.networkMode } : {}),
    },
    env: { ...t.env },
    ...(t.csiPlugin ? { csi_plugin: plugin(t.csiPlugin) } : {}),
    volume_mount: t.volumeMounts.map((m) => ({ volume: m.volume, destination: m.destination, read_only: m.readOnly, ...(m.propagation ? { propagation_mode: m.propagation } : {}) })),
    restart: restart(t.restart),
    kill_signal: t.killSignal,
    kill_timeout: duration(t.killTimeout),
    ...(t.resources ? { resources: { ...(t.resources.cpu !== undefined ? { cpu: t.resources.cpu } : {}), ...(t.resources.memoryMB !== undefined ? { memory: t.resources.memoryMB } : {}) } } : {}),
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
  return { job: { [job.id]: { name: job.name, group: Object.fromEntries(job.groups.map((g) => [g.name, group(g)])) } } };
}

// ---------------------------------------------------------------------------

function checkId(where: Where, id: string, what: string): void {
  withPrefix(where.prefix, () => assertPathSafeId(id, what));
}

const byName = <T extends { name: string }>(a: T, b: T): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

function readJob(id: string, body: Body): JobSpec {
  checkId(new Where(''), id, 'job id');
  const where = new Where(`job ${JSON.stringify(id)}`);
  const r = new BlockReader(body, where, ['name', 'update', 'group']);
  const name = r.string('name', id);
  const update = readUpdate(r, where, DEFAULT_UPDATE);
  const groups = r.labelled('group', 'group').map(([g, b]) => readGroup(where, g, b, update));
  if (groups.length === 0) where.failObject('needs at least one group');
  return { id, name, groups: groups.sort(byName) };
}

function readGroup(parent: Where, name: string, body: Body, jobUpdate: UpdateStrategy): GroupSpec {
  checkId(parent, name, 'group name');
  const where = parent.object(`group ${JSON.stringify(name)}`);
  const r = new BlockReader(body, where, ['count', 'restart', 'update', 'volume', 'task']);
  const count = r.int('count', 1, 1);
  const restart = readRestart(r, DEFAULT_RESTART);
  const update = readUpdate(r, where, jobUpdate);
  const volumes = r.labelled('volume', 'volume').map(([v, b]) => readVolume(where, v, b));
  const byVolume = new Map(volumes.map((v) => [v.name, v]));
  const tasks = r.labelled('task', 'task').map(([t, b]) => readTask(where, t, b, restart, byVolume));
  if (tasks.length === 0) where.failObject('needs at least one task');
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
  const where = owner.object('update');
  const r = new BlockReader(singleBody(parent.raw('update'), owner, 'update'), where, UPDATE_FIELDS);
  // 0, Nomad's "no deployment at all", is not offered: every change here is rolled out and watched.
  const maxParallel = r.int('max_parallel', base.maxParallel, 1);
  const minHealthyTime = r.duration('min_healthy_time', base.minHealthyTime);
  if (minHealthyTime < 0) r.fail('min_healthy_time', `may not be negative (got ${formatDuration(minHealthyTime)})`);
  const healthyDeadline = r.duration('healthy_deadline', base.healthyDeadline);
  if (healthyDeadline <= 0) r.fail('healthy_deadline', `must be positive (got ${formatDuration(healthyDeadline)})`);
  if (healthyDeadline <= minHealthyTime) {
    const which = r.has('healthy_deadline') ? 'healthy_deadline' : 'min_healthy_time';
    r.fail(which, `leaves no time to become healthy: healthy_deadline (${formatDuration(healthyDeadline)}) must be longer than min_healthy_time (${formatDuration(minHealthyTime)})`);
  }
  return { maxParallel, minHealthyTime, healthyDeadline, autoRevert: r.bool('auto_revert', base.autoRevert) };
}

function readRestart(parent: BlockReader, base: RestartPolicy): RestartPolicy {
  const r = parent.block('restart', ['attempts', 'interval', 'delay', 'mode']);
  if (!r) return { ...base };
  const interval = r.duration('interval', base.interval);
  if (interval <= 0) r.fail('interval', 'must be positive');
  return {
    attempts: r.int('attempts', base.attempts, 0),
    interval,
    delay: r.duration('delay', base.delay),
    mode: r.oneOf('mode', ['fail', 'delay'] as const, base.mode),
  };
}

function readVolume(parent: Where, name: string, body: Body): VolumeRequest {
  checkId(parent, name, 'volume name');
  const where = parent.object(`volume ${JSON.stringify(name)}`);
  const r = new BlockReader(body, where, ['type', 'source', 'access_mode', 'attachment_mode', 'read_only', 'mount_options', 'on_stale_mount']);
  const type = r.oneOf('type', ['csi'] as const);
  const source = r.requiredString('source');
  try {
    assertPathSafeId(source, 'volume id');
  } catch (err) {
    r.fail('source', `is not usable: ${(err as Error).message}`);
  }
  const accessMode = r.oneOf('access_mode', ACCESS_MODES);
  const attachmentMode = r.oneOf('attachment_mode', ATTACHMENT_MODES, 'file-system');
  const readOnly = r.bool('read_only', false);
  if (!readOnly && READER_ONLY_ACCESS_MODES.includes(accessMode)) r.fail('read_only', `must be true for access_mode ${accessMode}`);
  const volume: VolumeRequest = { name, type, source, accessMode, attachmentMode, readOnly };
  // What to do with a live mount found stale after its plugin came back (default: remount).
  if (r.has('on_stale_mount')) volume.onStaleMount = r.oneOf('on_stale_mount', STALE_MOUNT_POLICIES);
  const mo = r.block('mount_options', ['fs_type', 'mount_flags']);
  if (mo) {
    const fsType = mo.string('fs_type');
    const mountFlags = mo.has('mount_flags') ? mo.stringList('mount_flags') : undefined;
    if (attachmentMode === 'block-device') r.fail('mount_options', 'cannot be set with attachment_mode block-device');
    volume.mountOptions = { ...(fsType !== undefined ? { fsType } : {}), ...(mountFlags !== undefined ? { mountFlags } : {}) };
  }
  return volume;
}

const TASK_FIELDS = ['driver', 'config', 'env', 'csi_plugin', 'volume_mount', 'restart', 'kill_signal', 'kill_timeout', 'resources'];
const SIGNALS = new Set(Object.keys(os.constants.signals));

function readTask(parent: Where, name: string, body: Body, groupRestart: RestartPolicy, volumes: Map<string, VolumeRequest>): TaskSpec {
  checkId(parent, name, 'task name');
  // <alloc dir>/alloc is the alloc's shared dir (an isolated task's /alloc): a task of that name would share its own dir, records and all.
  if (name === 'alloc') parent.fail('task "alloc"', 'the name "alloc" is taken by the alloc\'s shared dir; name the task otherwise');
  const where = parent.object(`task ${JSON.stringify(name)}`);
  const r = new BlockReader(body, where, TASK_FIELDS);

  if (!r.has('driver')) r.fail('driver', 'is required (exec or raw_exec)');
  const driver = r.oneOf('driver', ['exec', 'raw_exec'] as const);
  const isolated = driver === 'exec';

  if (!r.has('config')) r.fail('config', 'is required: config { command = "…" }');
  const c = r.block('config', ['command', 'args', 'cap_add', 'cap_drop', 'network_mode'])!;
  const config: TaskSpec['config'] = { command: c.requiredString('command'), args: c.stringList('args') };
  for (const [key, field] of [['cap_add', 'capAdd'], ['cap_drop', 'capDrop']] as const) {
    if (!c.has(key)) continue;
    if (!isolated) c.fail(key, 'is for driver = "exec" (an isolated task); a raw_exec task runs with the agent\'s own privileges');
    config[field] = c.stringList(key).map((name, i) => {
      try {
        return capabilityName(name);
      } catch {
        return c.fail(`${key}[${i}]`, `"${name}" is not a Linux capability (like "net_admin" or "CAP_NET_ADMIN")`);
      }
    });
  }

  if (c.has('network_mode')) {
    if (!isolated) c.fail('network_mode', 'is for driver = "exec" (an isolated task); a raw_exec task always uses the host\'s network');
    config.networkMode = c.oneOf('network_mode', ['host', 'none'] as const);
  }

  const env = r.stringMap('env');
  // An isolated task starts under a shell init, which passes on only names a shell takes.
  if (isolated) for (const k of Object.keys(env)) if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) r.fail('env', `"${k}" is not a name an isolated (exec) task can be given: letters, digits and _, not starting with a digit`);

  let csiPlugin: CSIPluginConfig | undefined;
  if (r.has('csi_plugin')) {
    csiPlugin = parseCsiPluginConfig(singleBody(r.raw('csi_plugin'), where, 'csi_plugin'), where.prefix);
  }

  const volumeMounts: VolumeMount[] = [];
  const destinations = new Set<string>();
  r.blocks('volume_mount').forEach((b, i, all) => {
    const field = all.length > 1 ? `volume_mount[${i}]` : 'volume_mount';
    const m: BlockReader = new BlockReader(b, where.block(field), ['volume', 'destination', 'read_only', 'propagation_mode']);
    const volumeName = m.requiredString('volume');
    const volume = volumes.get(volumeName);
    if (!volume) {
      const known = [...volumes.keys()];
      m.fail('volume', `names "${volumeName}", which is not a volume of the group${known.length ? ` (volumes: ${known.join(', ')})` : ' (the group has no volume blocks)'}`);
    }
    const destination = readDestination(m);
    if (destinations.has(destination)) m.fail('destination', `"${destination}" is already used by another volume_mount of this task`);
    destinations.add(destination);
    // A volume the group asks for read-only is mounted read-only whatever the mount says.
    const readOnly = m.bool('read_only', false) || volume.readOnly;
    const propagation = m.has('propagation_mode') ? m.oneOf('propagation_mode', ['private', 'host-to-task', 'bidirectional'] as const) : undefined;
    if (propagation !== undefined && !isolated) m.fail('propagation_mode', 'is for driver = "exec" (a bind mount into an isolated task); a raw_exec task sees the host path itself');
    if (propagation === 'bidirectional' && readOnly) m.fail('propagation_mode', '"bidirectional" needs a writable mount; the volume is read-only here');
    volumeMounts.push({ volume: volumeName, destination, readOnly, ...(propagation !== undefined ? { propagation } : {}) });
  });

  const restart = readRestart(r, groupRestart);

  const killSignal = r.string('kill_signal', DEFAULT_KILL_SIGNAL);
  if (!SIGNALS.has(killSignal)) r.fail('kill_signal', `must be a signal name like SIGTERM or SIGINT (got "${killSignal}")`);
  const killTimeout = r.duration('kill_timeout', DEFAULT_KILL_TIMEOUT);

  // Nomad's resources: cpu in MHz (applied as cgroup cpu shares, 1:1) and memory in MiB (a hard limit), for an isolated task.
  let resources: TaskSpec['resources'];
  const res = r.block('resources', ['cpu', 'memory']);
  if (res) {
    const cpu = res.has('cpu') ? res.int('cpu', 100, 2, 262_144) : undefined;
    const memoryMB = res.has('memory') ? res.int('memory', 300, 4, 16 * 1024 * 1024) : undefined;
    resources = { ...(cpu !== undefined ? { cpu } : {}), ...(memoryMB !== undefined ? { memoryMB } : {}) };
  }

  return {
    name,
    driver,
    isolated,
    config,
    env,
    ...(csiPlugin ? { csiPlugin } : {}),
    volumeMounts,
    restart,
    killSignal: killSignal as NodeJS.Signals,
    ...(resources ? { resources } : {}),
    killTimeout,
  };
}

/** Where the task sees a volume, relative to its task dir; may not climb out of it. */
function readDestination(m: BlockReader): string {
  const raw = m.requiredString('destination');
  if (raw.includes('\0')) m.fail('destination', 'may not contain NUL');
  if (raw.split(/[\\/]/).includes('..')) m.fail('destination', `"${raw}" may not contain ".."`);
  const normal = path.posix.normalize(raw);
  if (normal === '/' || normal === '.' || normal === './') m.fail('destination', `"${raw}" must name a path inside the task dir`);
  return normal.replace(/\/$/, '');
}
