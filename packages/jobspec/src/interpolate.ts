// `${VAR}` interpolation in a task's config and env, done when the task is
// about to start (the values — alloc id, task dir, socket path, published
// volume paths — only exist then).
//
// Rules, kept small on purpose:
// - `${NAME}` is replaced by the variable's value; NAME is everything up to
//   the next `}`, trimmed. Values are inserted as they are, never re-scanned.
// - An unknown `${NAME}` stays in the text untouched (as in Nomad), so a
//   shell in the task can still expand it.
// - `$${` is an escape for a literal `${` (HCL's escape; hcl2json keeps it
//   as written, so HCL and JSON jobspecs behave alike).
// - Nothing else is special: no `%{…}` directives, no functions.
import type { TaskSpec } from './model';

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
  allocIndex: 'NOMAD_ALLOC_INDEX',
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
    [NOMAD_TASK_VARS.allocIndex]: String(input.allocIndex),
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

export interface InterpolatedTask {
  command: string;
  args: string[];
  /** The task's own env block, interpolated (not merged with `vars`). */
  env: Record<string, string>;
}

/**
 * Interpolates a task's env block against `vars`, then its command and args
 * against `vars` plus that env (so `args = ["${PORT}"]` can use `env { PORT = … }`).
 */
export function interpolateTask(task: Pick<TaskSpec, 'config' | 'env'>, vars: Readonly<Record<string, string>>): InterpolatedTask {
  const env = Object.fromEntries(Object.entries(task.env).map(([k, v]) => [k, interpolate(v, vars)]));
  const all = { ...vars, ...env };
  return { command: interpolate(task.config.command, all), args: task.config.args.map((a) => interpolate(a, all)), env };
}
