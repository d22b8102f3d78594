// `${VAR}` interpolation in a task's config and env, done when the task is
// about to start (the values — alloc id, task dir, socket path, published
// volume paths — only exist then).
//
// Rules, kept small on purpose:
// - `${NAME}` is replaced by the variable's value; NAME is everything up to
//   the next `}`, trimmed. Values are inserted as they are, never re-scanned.
// - interpolate(): an unknown `${NAME}` stays in the text untouched (as
//   Nomad's own replace does). A task's fields go through interpolateTask
//   and interpolateStrict instead, where an unknown name is an error naming
//   the field and the name: a jobspec's names are checked at validate
//   (interpolation-check.ts), so what is left is a value this node lacks (a
//   `${meta.<key>}` its agent has no meta for). Never passed on literally.
// - `$${` is an escape for a literal `${` (HCL's escape; hcl2json keeps it
//   as written, so HCL and JSON jobspecs behave alike).
// - Nothing else is special: no `%{…}` directives, no functions.
import { ValidationError } from '@csiplug/core';
import type { TaskSpec } from './model';
import { DEFAULT_DATACENTER, DEFAULT_REGION } from './node-attributes';

/** The variables the agent defines for every task (and what it puts in the task's environment). */
export const TASK_VARS = Object.freeze({
  /** `unix://…` socket of a plugin task (set by the csi_plugin supervisor hook). */
  csiEndpoint: 'CSI_ENDPOINT',
  allocId: 'CSIPLUG_ALLOC_ID',
  allocIndex: 'CSIPLUG_ALLOC_INDEX',
  jobId: 'CSIPLUG_JOB_ID',
  groupName: 'CSIPLUG_GROUP_NAME',
  taskName: 'CSIPLUG_TASK_NAME',
  taskDir: 'CSIPLUG_TASK_DIR',
  nodeId: 'CSIPLUG_NODE_ID',
  /**
   * A plugin task's (csi_plugin) data dir, `<data_dir>/plugin-data/<plugin id>`:
   * the same for every alloc of the plugin, so an updated or replaced plugin
   * alloc finds what the one before it kept (its task dir is its own).
   */
  pluginDataDir: 'CSIPLUG_PLUGIN_DATA_DIR',
  /** Path of the hostpath plugin's CLI script (dist/cli.js), set by the agent so example jobs can run it. */
  hostpathCli: 'CSIPLUG_HOSTPATH_CLI',
} as const);

/**
 * Nomad's own task variables, with Nomad's meanings, so that a Nomad
 * jobspec runs unchanged: NOMAD_TASK_DIR is the task's `local` dir and
 * NOMAD_ALLOC_DIR the alloc's shared dir, as the task sees them.
 */
export const NOMAD_TASK_VARS = Object.freeze({
  allocId: 'NOMAD_ALLOC_ID',
  /** The alloc id's first 8 characters. */
  shortAllocId: 'NOMAD_SHORT_ALLOC_ID',
  /** `<job>.<group>[<index>]`. */
  allocName: 'NOMAD_ALLOC_NAME',
  allocIndex: 'NOMAD_ALLOC_INDEX',
  /** Always "default": csiplug has no namespaces. */
  namespace: 'NOMAD_NAMESPACE',
  region: 'NOMAD_REGION',
  datacenter: 'NOMAD_DC',
  jobId: 'NOMAD_JOB_ID',
  jobName: 'NOMAD_JOB_NAME',
  groupName: 'NOMAD_GROUP_NAME',
  taskName: 'NOMAD_TASK_NAME',
  taskDir: 'NOMAD_TASK_DIR',
  allocDir: 'NOMAD_ALLOC_DIR',
  secretsDir: 'NOMAD_SECRETS_DIR',
} as const);

/** `CSIPLUG_VOLUME_<NAME>`: NAME upper-cased, anything outside [A-Z0-9_] becomes `_`. */
export function volumeEnvName(name: string): string {
  return `CSIPLUG_VOLUME_${name.toUpperCase().replace(/[^A-Z0-9_]/g, '_')}`;
}

export interface TaskVarsInput {
  allocId: string;
  allocIndex: number;
  jobId: string;
  groupName: string;
  taskName: string;
  taskDir: string;
  nodeId: string;
  /** Set for a task with a csi_plugin block (TASK_VARS.pluginDataDir). */
  pluginDataDir?: string;
  /** The task's own dirs as it sees them, for Nomad's variables: its `local` dir, the alloc's shared dir, its secrets dir. */
  nomadDirs?: { local: string; alloc: string; secrets: string };
  /** Group volume name → the path the task uses for it. */
  volumes?: Readonly<Record<string, string>>;
  /** The node's datacenter and region (NOMAD_DC, NOMAD_REGION); absent: Nomad's defaults, dc1 and global. */
  node?: { datacenter: string; region: string };
  /** More variables (e.g. CSI_ENDPOINT from a hook, CSIPLUG_HOSTPATH_CLI); they win over the above. */
  extra?: Readonly<Record<string, string>>;
}

/** The variable map for one task, named by TASK_VARS and volumeEnvName. */
export function taskVariables(input: TaskVarsInput): Record<string, string> {
  const vars: Record<string, string> = {
    [TASK_VARS.allocId]: input.allocId,
    [TASK_VARS.allocIndex]: String(input.allocIndex),
    [TASK_VARS.jobId]: input.jobId,
    [TASK_VARS.groupName]: input.groupName,
    [TASK_VARS.taskName]: input.taskName,
    [TASK_VARS.taskDir]: input.taskDir,
    [TASK_VARS.nodeId]: input.nodeId,
  };
  if (input.pluginDataDir !== undefined) vars[TASK_VARS.pluginDataDir] = input.pluginDataDir;
  Object.assign(vars, {
    [NOMAD_TASK_VARS.allocId]: input.allocId,
    [NOMAD_TASK_VARS.shortAllocId]: input.allocId.slice(0, 8),
    [NOMAD_TASK_VARS.allocName]: `${input.jobId}.${input.groupName}[${input.allocIndex}]`,
    [NOMAD_TASK_VARS.allocIndex]: String(input.allocIndex),
    [NOMAD_TASK_VARS.namespace]: 'default',
    [NOMAD_TASK_VARS.region]: input.node?.region ?? DEFAULT_REGION,
    [NOMAD_TASK_VARS.datacenter]: input.node?.datacenter ?? DEFAULT_DATACENTER,
    [NOMAD_TASK_VARS.jobId]: input.jobId,
    [NOMAD_TASK_VARS.jobName]: input.jobId,
    [NOMAD_TASK_VARS.groupName]: input.groupName,
    [NOMAD_TASK_VARS.taskName]: input.taskName,
  });
  if (input.nomadDirs) {
    vars[NOMAD_TASK_VARS.taskDir] = input.nomadDirs.local;
    vars[NOMAD_TASK_VARS.allocDir] = input.nomadDirs.alloc;
    vars[NOMAD_TASK_VARS.secretsDir] = input.nomadDirs.secrets;
  }
  for (const [name, hostPath] of Object.entries(input.volumes ?? {})) vars[volumeEnvName(name)] = hostPath;
  return { ...vars, ...(input.extra ?? {}) };
}

const PATTERN = /\$\$\{|\$\{([^}]*)\}/g;

/** Replaces each known `${NAME}` in `text`; see the rules at the top of this file. */
export function interpolate(text: string, vars: Readonly<Record<string, string>>): string {
  return text.replace(PATTERN, (match: string, name: string | undefined) => {
    if (name === undefined) return '${';
    const key = name.trim();
    return Object.prototype.hasOwnProperty.call(vars, key) ? vars[key]! : match;
  });
}

/** A `${NAME}` with no value where it is used: the field, the name, and what to do. */
export class InterpolationError extends ValidationError {
  constructor(
    readonly where: string,
    readonly variable: string,
  ) {
    super(`${where}: \${${variable}} ${missingWhy(variable)}`, where);
    this.name = 'InterpolationError';
  }
}

/** Why a name has no value, and what to do. */
function missingWhy(variable: string): string {
  if (variable.startsWith('meta.'))
    return `has no value on this node: add ${variable.slice('meta.'.length)} to the agent's client { meta }, or change the job`;
  if (variable === 'attr.unique.network.ip-address')
    return "has no value on this node: it has no default route; name the interface in the agent's client { network_interface }";
  if (variable.startsWith('attr.') || variable.startsWith('node.'))
    return 'has no value on this node: its fingerprint could not tell it on this machine';
  return `has no value here (csiplug does not set it for this task on this node); write $\${${variable}} for a literal \${${variable}}, or $${variable} to let a shell read it from the environment`;
}

/** As interpolate, but an unknown `${NAME}` throws an InterpolationError naming `where` (the field) and the name. */
export function interpolateStrict(text: string, vars: Readonly<Record<string, string>>, where: string): string {
  return text.replace(PATTERN, (_match: string, name: string | undefined) => {
    if (name === undefined) return '${';
    const key = name.trim();
    if (!Object.prototype.hasOwnProperty.call(vars, key)) throw new InterpolationError(where, key);
    return vars[key]!;
  });
}

export interface InterpolatedTask {
  command: string;
  args: string[];
  /** An image task's `entrypoint` and `work_dir`, interpolated as command and args are (absent: the task has none). */
  entrypoint?: string[];
  workDir?: string;
  /** The task's own env block, interpolated (not merged with `vars`). */
  env: Record<string, string>;
}

/**
 * Interpolates a task's env block against `vars`, then its command and args
 * against `vars` plus that env (so `args = ["${PORT}"]` can use `env { PORT = … }`).
 * `nodeValues` (nodeValues() of node-attributes.ts: `attr.…`, `node.…`,
 * `meta.…`) are for interpolation only, never part of an environment. A name
 * with no value throws an InterpolationError naming the field.
 */
export function interpolateTask(
  task: Pick<TaskSpec, 'config' | 'env' | 'image'>,
  vars: Readonly<Record<string, string>>,
  nodeValues: Readonly<Record<string, string>> = {},
): InterpolatedTask {
  const base = { ...vars, ...nodeValues };
  const env = Object.fromEntries(Object.entries(task.env).map(([k, v]) => [k, interpolateStrict(v, base, `env.${k}`)]));
  const all = { ...base, ...env };
  return {
    command: interpolateStrict(task.config.command, all, 'config.command'),
    args: task.config.args.map((a, i) => interpolateStrict(a, all, `config.args[${i}]`)),
    env,
    ...(task.image?.entrypoint
      ? { entrypoint: task.image.entrypoint.map((a, i) => interpolateStrict(a, all, `config.entrypoint[${i}]`)) }
      : {}),
    ...(task.image?.workDir !== undefined ? { workDir: interpolateStrict(task.image.workDir, all, 'config.work_dir') } : {}),
  };
}
