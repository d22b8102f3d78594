// Nomad's JSON job format (the `Job` object of POST /v1/jobs, what
// `nomad job run -output` and /v1/jobs/parse give) into csiplug's JobSpec.
// Two steps: the body's shape is checked here, each problem named by its
// path as Nomad spells it (`Job.TaskGroups[0].Tasks[1].Services`), and the
// fields become csiplug's jobspec document (HCL names, durations in ms);
// then validateJob checks that document as it checks a jobspec file, so a
// job is judged the same whichever format it came in (one validation).
import { readJobAnswer, validateJob } from '../jobspec';
import type { JobSpec } from '../model';
import {
  CSI_PLUGIN_FIELDS,
  GROUP_FIELDS,
  JOB_FIELDS,
  LOG_FIELDS,
  MOUNT_OPTIONS_FIELDS,
  RESOURCES_FIELDS,
  RESTART_FIELDS,
  TASK_FIELDS,
  TEMPLATE_FIELDS,
  UPDATE_FIELDS,
  VOLUME_FIELDS,
  VOLUME_MOUNT_FIELDS,
} from './nomad-fields';
import { NomadObject, NomadProblems } from './nomad-reader';

type Doc = Record<string, unknown>;

/** Sets `key` in `doc` to `value` unless it is undefined (an absent field stays absent, so validateJob applies its default). */
function put(doc: Doc, key: string, value: unknown): void {
  if (value !== undefined) doc[key] = value;
}

/**
 * Reads a job in Nomad's JSON job format — the `Job` object itself, as
 * Nomad's api.Job — into a checked JobSpec. Throws a ValidationError (one
 * problem) or ValidationProblems (several, one per line): shape problems
 * name their path (`Job.TaskGroups[0].Count must be a whole number`), the
 * jobspec's own checks name the job, group and task as a jobspec file's do.
 * With `lenient` (a client reading an agent's answer, not a registration),
 * fields it does not know or support are passed over, not refused, and the
 * job is read without validateJob's checks (readJobAnswer).
 */
export function jobFromNomadJson(value: unknown, path = 'Job', options: { lenient?: boolean } = {}): JobSpec {
  // Lenient: an answer is read, not a request checked, so fields this csiplug does not know are left out rather than refused.
  const problems = new NomadProblems(options.lenient);
  const doc = readJob(value, path, problems);
  // An answer: what can be read is read, unchecked (a reader of answers, not of registrations).
  if (options.lenient) return readJobAnswer(doc);
  problems.throwIfAny();
  return validateJob(doc);
}

function readJob(value: unknown, path: string, problems: NomadProblems): Doc | undefined {
  const job = NomadObject.read(value, path, problems, JOB_FIELDS);
  if (!job) return undefined;
  const id = job.string('ID');
  if (id === undefined || id === '') job.report('ID', 'is required: the job\'s id, like "web"');
  const body: Doc = {};
  put(body, 'name', job.string('Name', true));
  put(body, 'type', job.string('Type', true));
  put(body, 'datacenters', job.stringList('Datacenters'));
  put(body, 'update', readUpdate(job));
  const groups: Doc = {};
  const taken = new Map<string, number>();
  job.objectList('TaskGroups', GROUP_FIELDS).forEach((g, i) => {
    const name = g.string('Name');
    if (name === undefined || name === '') return g.report('Name', 'is required: the group\'s name, like "app"');
    if (taken.has(name)) return g.report('Name', `"${name}" is the name of TaskGroups[${taken.get(name)}] too; give each group its own`);
    taken.set(name, i);
    groups[name] = readGroup(g);
  });
  body.group = groups;
  return id ? { job: { [id]: body } } : undefined;
}

function readUpdate(parent: NomadObject): Doc | undefined {
  const u = parent.object('Update', UPDATE_FIELDS);
  if (!u) return undefined;
  const doc: Doc = {};
  put(doc, 'max_parallel', u.int('MaxParallel'));
  put(doc, 'min_healthy_time', u.nanos('MinHealthyTime'));
  put(doc, 'healthy_deadline', u.nanos('HealthyDeadline'));
  put(doc, 'auto_revert', u.bool('AutoRevert'));
  return doc;
}

function readRestart(parent: NomadObject): Doc | undefined {
  const r = parent.object('RestartPolicy', RESTART_FIELDS);
  if (!r) return undefined;
  const doc: Doc = {};
  put(doc, 'attempts', r.int('Attempts'));
  put(doc, 'interval', r.nanos('Interval'));
  put(doc, 'delay', r.nanos('Delay'));
  put(doc, 'mode', r.string('Mode', true));
  return doc;
}

function readGroup(g: NomadObject): Doc {
  const doc: Doc = {};
  put(doc, 'count', g.int('Count'));
  put(doc, 'restart', readRestart(g));
  put(doc, 'update', readUpdate(g));
  const volumes: Doc = {};
  for (const [name, v] of g.objectMap('Volumes', VOLUME_FIELDS)) {
    const named = v.string('Name', true);
    if (named !== undefined && named !== name) v.report('Name', `is "${named}" but the volume is keyed "${name}"; they must be the same`);
    volumes[name] = readVolume(v);
  }
  if (Object.keys(volumes).length) doc.volume = volumes;
  const tasks: Doc = {};
  const taken = new Map<string, number>();
  g.objectList('Tasks', TASK_FIELDS).forEach((t, i) => {
    const name = t.string('Name');
    if (name === undefined || name === '') return t.report('Name', 'is required: the task\'s name, like "server"');
    if (taken.has(name)) return t.report('Name', `"${name}" is the name of Tasks[${taken.get(name)}] too; give each task its own`);
    taken.set(name, i);
    tasks[name] = readTask(t);
  });
  doc.task = tasks;
  return doc;
}

function readVolume(v: NomadObject): Doc {
  const doc: Doc = {};
  put(doc, 'type', v.string('Type', true));
  put(doc, 'source', v.string('Source', true));
  put(doc, 'access_mode', v.string('AccessMode', true));
  put(doc, 'attachment_mode', v.string('AttachmentMode', true));
  put(doc, 'read_only', v.bool('ReadOnly'));
  // false is what Nomad writes for a request without it; only true is kept, as the HCL reader keeps it.
  if (v.bool('PerAlloc') === true) doc.per_alloc = true;
  put(doc, 'on_stale_mount', v.string('OnStaleMount', true));
  const mo = v.object('MountOptions', MOUNT_OPTIONS_FIELDS);
  if (mo) {
    const options: Doc = {};
    // "" is kept: CSI reads an empty fs_type as the plugin's default, as it reads none.
    put(options, 'fs_type', mo.string('FSType'));
    put(options, 'mount_flags', mo.stringList('MountFlags'));
    doc.mount_options = options;
  }
  return doc;
}

function readTask(t: NomadObject): Doc {
  const doc: Doc = {};
  const driver = t.string('Driver', true);
  put(doc, 'driver', driver);
  put(doc, 'config', t.anyObject('Config'));
  put(doc, 'env', t.stringMap('Env'));
  put(doc, 'user', t.string('User', true));
  put(doc, 'restart', readRestart(t));
  put(doc, 'kill_signal', t.string('KillSignal', true));
  put(doc, 'kill_timeout', t.nanos('KillTimeout'));

  const res = t.object('Resources', RESOURCES_FIELDS);
  if (res) {
    const resources: Doc = {};
    put(resources, 'cpu', res.int('CPU'));
    put(resources, 'memory', res.int('MemoryMB'));
    doc.resources = resources;
  }

  const logs = t.object('LogConfig', LOG_FIELDS);
  if (logs) {
    const l: Doc = {};
    put(l, 'max_files', logs.int('MaxFiles'));
    put(l, 'max_file_size', logs.int('MaxFileSizeMB'));
    doc.logs = l;
  }

  const plugin = t.object('CSIPluginConfig', CSI_PLUGIN_FIELDS);
  if (plugin) {
    const p: Doc = {};
    put(p, 'id', plugin.string('ID', true));
    put(p, 'type', plugin.string('Type', true));
    put(p, 'mount_dir', plugin.string('MountDir', true));
    put(p, 'stage_publish_base_dir', plugin.string('StagePublishBaseDir', true));
    // 0 is Go's unset duration: Nomad's default (30s) applies, as for a csi_plugin block without health_timeout.
    const health = plugin.nanos('HealthTimeout');
    if (health !== 0) put(p, 'health_timeout', health);
    doc.csi_plugin = p;
  }

  const mounts = t.objectList('VolumeMounts', VOLUME_MOUNT_FIELDS).map((m) => {
    const mount: Doc = {};
    put(mount, 'volume', m.string('Volume', true));
    put(mount, 'destination', m.string('Destination', true));
    put(mount, 'read_only', m.bool('ReadOnly'));
    const propagation = m.string('PropagationMode', true);
    // "private" is what Nomad's Canonicalize writes when the jobspec gave none; a raw_exec task (a host process, no bind mount) has none to give.
    if (!(propagation === 'private' && driver === 'raw_exec')) put(mount, 'propagation_mode', propagation);
    return mount;
  });
  if (mounts.length) doc.volume_mount = mounts;

  const templates = t.objectList('Templates', TEMPLATE_FIELDS).map(readTemplate);
  if (templates.length) doc.template = templates;
  return doc;
}

function readTemplate(m: NomadObject): Doc {
  const doc: Doc = {};
  // Canonicalize writes "" for the one of SourcePath and EmbeddedTmpl not given.
  put(doc, 'data', m.string('EmbeddedTmpl', true));
  put(doc, 'source', m.string('SourcePath', true));
  put(doc, 'destination', m.string('DestPath', true));
  put(doc, 'perms', m.string('Perms', true));
  put(doc, 'uid', m.int('Uid'));
  put(doc, 'gid', m.int('Gid'));
  put(doc, 'env', m.bool('Envvars'));
  put(doc, 'change_mode', m.string('ChangeMode', true));
  put(doc, 'change_signal', m.string('ChangeSignal', true));
  put(doc, 'left_delimiter', m.string('LeftDelim', true));
  put(doc, 'right_delimiter', m.string('RightDelim', true));
  put(doc, 'splay', m.nanos('Splay'));
  put(doc, 'error_on_missing_key', m.bool('ErrMissingKey'));
  return doc;
}
