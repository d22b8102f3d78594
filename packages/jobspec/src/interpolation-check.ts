// The validate-time check of a task's `${…}` names: every name in a field
// that is interpolated must be one csiplug will have a value for when the
// task starts, so that nothing is ever passed on literally (issue 27: a
// volume destination written with `${NOMAD_ALLOC_DIR}` once made a dir of
// that very name). What is known depends on the field:
//
// - env values: the task variables (NOMAD_*, CSIPLUG_*, the group's volumes
//   the task sees as CSIPLUG_VOLUME_<NAME>; a csi_plugin task's CSI_ENDPOINT,
//   CSIPLUG_CSI_MOUNT_DIR and CSIPLUG_PLUGIN_DATA_DIR) and the node's
//   `attr.*`, `node.*` and `meta.*` (node-attributes.ts);
// - config command and args (and an image's fields): those and the task's
//   own env names;
// - paths (volume_mount destination, an image mount's target and source):
//   only what is known before the task's volumes are bound and its hooks run
//   — the NOMAD_* and CSIPLUG_* ids and dirs, and the node's names.
//
// A `${meta.<key>}` is accepted for any key: whether this node's agent has
// it is only known where the task runs, where its absence is an error
// naming the key (interpolate.ts). csi_plugin's mount_dir and
// stage_publish_base_dir are not interpolated (nor are they in Nomad): a
// `${` there is refused.
import { NOMAD_TASK_VARS, TASK_VARS, volumeEnvName } from './interpolate';
import type { TaskSpec } from './model';
import { NODE_ATTRIBUTES, NODE_FIELDS, nodeNameProblem } from './node-attributes';

/** One problem: `key` is the task's field it sits under (for ordering), `field` the full name, `message` what follows it. */
export interface InterpolationProblem {
  key: string;
  field: string;
  message: string;
}

/** Variables set by the csi_plugin supervisor hook, for a plugin task only (hooks' csi-plugin-supervisor-hook.ts). */
export const PLUGIN_HOOK_VARS: readonly string[] = Object.freeze(['CSI_ENDPOINT', 'CSIPLUG_CSI_MOUNT_DIR']);

/** The CSIPLUG_* and NOMAD_* names every task has, that a path may use (ids, names, dirs). */
const PATH_VARS: readonly string[] = [
  TASK_VARS.allocId,
  TASK_VARS.allocIndex,
  TASK_VARS.jobId,
  TASK_VARS.groupName,
  TASK_VARS.taskName,
  TASK_VARS.taskDir,
  TASK_VARS.nodeId,
  ...Object.values(NOMAD_TASK_VARS),
];

/** Splits text into the `${…}` names it uses (`$${` escapes skipped) and whether a `${` is left unclosed. */
export function interpolationNames(text: string): { names: string[]; unclosed: boolean } {
  const names: string[] = [];
  let unclosed = false;
  const pattern = /\$\$\{|\$\{([^}]*)(\})?/g;
  for (let m = pattern.exec(text); m; m = pattern.exec(text)) {
    if (m[0] === '$${') continue;
    if (m[2] === undefined) unclosed = true;
    else names.push(m[1]!.trim());
  }
  return { names, unclosed };
}

/**
 * The problems of a task's `${…}` names (see the top of this file): an
 * unknown name, a `${` never closed, a `${` where nothing is interpolated.
 * `groupVolumes`: the names of the group's volumes.
 */
export function checkTaskInterpolation(
  task: Pick<TaskSpec, 'config' | 'env' | 'volumeMounts' | 'csiPlugin' | 'isolated' | 'image'>,
  groupVolumes: readonly string[],
): InterpolationProblem[] {
  const problems: InterpolationProblem[] = [];
  // An isolated task sees only the volumes it mounts; a host process, every volume of the group (task-setup.ts).
  const seen = task.isolated ? task.volumeMounts.map((m) => m.volume) : groupVolumes;
  const taskVars = new Set<string>([
    ...PATH_VARS,
    ...seen.map(volumeEnvName),
    TASK_VARS.hostpathCli,
    ...(task.csiPlugin ? [TASK_VARS.pluginDataDir, ...PLUGIN_HOOK_VARS] : []),
  ]);
  const pathVars = new Set<string>([...PATH_VARS, ...(task.csiPlugin ? [TASK_VARS.pluginDataDir] : [])]);
  const withEnv = new Set<string>([...taskVars, ...Object.keys(task.env)]);
  const check = (key: string, field: string, text: string | undefined, known: ReadonlySet<string>, what: Scope) => {
    if (text === undefined) return;
    const { names, unclosed } = interpolationNames(text);
    if (unclosed) problems.push({ key, field, message: 'has a "${" with no closing "}": write "$${" for a literal "${"' });
    for (const name of names) {
      const problem = nameProblem(name, known, what);
      if (problem !== undefined) problems.push({ key, field, message: `uses \${${name}}: ${problem}` });
    }
  };
  for (const [k, v] of Object.entries(task.env)) check('env', `env.${k}`, v, taskVars, 'env');
  check('config', 'config.command', task.config.command, withEnv, 'config');
  task.config.args.forEach((a, i) => check('config', `config.args[${i}]`, a, withEnv, 'config'));
  task.volumeMounts.forEach((m, i) => {
    const field = task.volumeMounts.length > 1 ? `volume_mount[${i}]` : 'volume_mount';
    check('volume_mount', `${field}.destination`, m.destination, pathVars, 'path');
  });
  if (task.image) {
    check('config', 'config.image', task.image.ref, withEnv, 'config');
    task.image.entrypoint?.forEach((e, i) => check('config', `config.entrypoint[${i}]`, e, withEnv, 'config'));
    check('config', 'config.work_dir', task.image.workDir, pathVars, 'path');
    task.image.mounts.forEach((m, i) => {
      check('config', `config.mount[${i}].target`, m.target, pathVars, 'path');
      check('config', `config.mount[${i}].source`, m.source, pathVars, 'path');
    });
  }
  if (task.csiPlugin) {
    for (const [field, value] of [
      ['csi_plugin.mount_dir', task.csiPlugin.mountDir],
      ['csi_plugin.stage_publish_base_dir', task.csiPlugin.stagePublishBaseDir],
    ] as const) {
      if (value.includes('${'))
        problems.push({
          key: 'csi_plugin',
          field,
          message: 'is not interpolated (in Nomad neither): write the path itself, without "${…}"',
        });
    }
  }
  return problems;
}

type Scope = 'env' | 'config' | 'path';

/** Why `name` has no value where it is used; undefined when it has one. */
function nameProblem(name: string, known: ReadonlySet<string>, scope: Scope): string | undefined {
  if (known.has(name)) return undefined;
  const node = nodeNameProblem(name);
  if (node?.known) return undefined;
  if (node) return node.problem;
  const where =
    scope === 'path'
      ? "a path is resolved before the task's volumes are bound and its hooks run, so it may use the NOMAD_* and CSIPLUG_* ids and dirs " +
        "and the node's names only"
      : scope === 'env'
        ? "an env value may use the task variables and the node's names (not the task's other env entries)"
        : "command and args may use the task variables, the node's names and the task's env names";
  const nomad = name.startsWith('NOMAD_')
    ? ` (csiplug sets ${Object.values(NOMAD_TASK_VARS).join(', ')})`
    : name.startsWith('CSIPLUG_VOLUME_')
      ? ' (it names a group volume this task does not see: an isolated task sees the volumes it volume_mounts)'
      : '';
  return (
    `csiplug has no value for it here${nomad}. Known: NOMAD_* and CSIPLUG_* task variables, attr.<name> (${Object.keys(NODE_ATTRIBUTES).join(', ')}), ` +
    `node.<field> (${Object.keys(NODE_FIELDS).join(', ')}), meta.<key> (the agent's client { meta }); ${where}. ` +
    `Write "$\${${name}}" for a literal "\${${name}}", or "$${name}" to let a shell read it from the environment`
  );
}
