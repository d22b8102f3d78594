// Where a task path written in a jobspec lands once its `${…}` names are
// resolved: a volume_mount destination (and, for the image drivers, a mount
// target), resolved before the bind mount or link is made, so that
// `destination = "${NOMAD_ALLOC_DIR}/data"` is the alloc dir's data and
// never a dir named "${NOMAD_ALLOC_DIR}".
//
// - An isolated task: a path in its own root. NOMAD_ALLOC_DIR is /alloc
//   there, so the example is /alloc/data (bound over the alloc dir's bind).
// - A host process: a path under its task dir, as today (a leading "/" is
//   the task dir's root). A destination that *starts* with a variable whose
//   value is an absolute host path (NOMAD_ALLOC_DIR is <alloc dir>/alloc
//   there) stays that path, as Nomad's ClientPath keeps it, but only inside
//   the task's dir or the alloc's shared dir: a variable that takes it
//   anywhere else is refused, as is a value with a ".." in it.
import { TASK_ALLOC_DIR, TASK_LOCAL_DIR, TASK_SECRETS_DIR } from '@csiplug/driver';
import { interpolateStrict } from '@csiplug/jobspec';
import * as path from 'path';

/** How the task sees the host: isolated (its own root), or a host process with its task dir and the alloc's shared dir. */
export type TaskView = { isolated: true } | { isolated: false; taskDir: string; sharedDir: string };

/** A resolved destination, or why it is refused (what is wrong, where, and what to do). */
export type ResolvedPath = { path: string } | { error: string };

/** Whether `child` is `parent` or under it (both absolute, normalised). */
function within(parent: string, child: string): boolean {
  const rel = path.relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/**
 * `raw` (as the jobspec has it, its field named by `field`) resolved against
 * `vars` (the task's variables and the node's values) for a task seen as `view`.
 */
export function resolveTaskPath(raw: string, field: string, vars: Readonly<Record<string, string>>, view: TaskView): ResolvedPath {
  let value: string;
  try {
    value = interpolateStrict(raw, vars, field);
  } catch (err) {
    return { error: (err as Error).message };
  }
  const leaves = `${field}: "${raw}" resolves to "${value}", which leaves the task's dirs`;
  if (value.includes('\0') || value.split(/[\\/]/).includes('..'))
    return { error: `${leaves}: a value with ".." or NUL cannot be a path here` };
  if (view.isolated) {
    const inRoot = path.posix.join('/', value);
    const dest = inRoot.replace(/\/$/, '');
    if (dest === '' || [TASK_ALLOC_DIR, TASK_LOCAL_DIR, TASK_SECRETS_DIR].includes(dest))
      return { error: `${field}: "${raw}" resolves to "${dest || '/'}", the task's own dir itself: name a dir inside it` };
    return { path: dest };
  }
  const fromVariable = raw.trimStart().startsWith('${') && path.isAbsolute(value);
  if (fromVariable) {
    const host = path.normalize(value).replace(/\/$/, '');
    if (!within(view.taskDir, host) && !within(view.sharedDir, host))
      return {
        error: `${leaves} (${view.taskDir} and ${view.sharedDir}): start it with \${NOMAD_TASK_DIR}, \${NOMAD_ALLOC_DIR} or \${NOMAD_SECRETS_DIR}, or write a path relative to the task dir`,
      };
    if (host === view.taskDir || host === view.sharedDir)
      return { error: `${field}: "${raw}" resolves to "${host}", the task's own dir itself: name a dir inside it` };
    return { path: host };
  }
  const underTask = path.join(view.taskDir, value.replace(/^\/+/, ''));
  if (underTask === view.taskDir || !within(view.taskDir, underTask))
    return { error: `${field}: "${raw}" resolves to "${value}", which names no path inside the task dir` };
  return { path: underTask };
}
