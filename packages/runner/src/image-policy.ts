// What this agent allows of an image task (driver docker/podman), from the
// task and the agent's plugin "docker" block: its `mount` and `volumes` binds
// (a relative source only under the task's local/, secrets/ or the alloc's
// ../alloc/; an absolute one only with volumes { enabled }), its tmpfs
// mounts, `privileged` and the host's pid/ipc namespaces (a csi_plugin task
// only, and only with allow_privileged) and cap_add (within allow_caps). A
// refusal is a sentence saying what is refused and what to change; TaskSetup
// judges the paths as written, and the start (task-image.ts) checks each
// bind's source on disk right before the driver: no link below the alloc
// dir, a host path's real path within allowed_host_paths.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { capabilityName } from '@csiplug/core';
import type { MountPropagation, TaskMount } from '@csiplug/driver';
import type { ImageDriverConfig, TaskImageMount, TaskSpec } from '@csiplug/jobspec';
import { interpolateStrict } from '@csiplug/jobspec';

/** Docker's propagation names → the driver's (Nomad's propagation_mode). */
const PROPAGATION: Readonly<Record<NonNullable<TaskImageMount['propagation']>, MountPropagation>> = {
  rprivate: 'private',
  private: 'private',
  rslave: 'host-to-task',
  slave: 'host-to-task',
  rshared: 'bidirectional',
  shared: 'bidirectional',
};

/**
 * The mounts' `${…}` names resolved in their source and target (the path
 * variables: ids, dirs, the node's names); a name with no value is an
 * error naming the mount's field, never a path made as written.
 */
export function resolveImageMountPaths(
  mounts: readonly TaskImageMount[],
  vars: Readonly<Record<string, string>>,
): { mounts: TaskImageMount[] } | { error: string } {
  try {
    return {
      mounts: mounts.map((m, i) => ({
        ...m,
        target: interpolateStrict(m.target, vars, `config.mount[${i}].target`),
        ...(m.source !== undefined ? { source: interpolateStrict(m.source, vars, `config.mount[${i}].source`) } : {}),
      })),
    };
  } catch (err) {
    return { error: err instanceof Error ? err.message : String(err) };
  }
}

export interface ImageMountsResult {
  /** Binds carry the check their source gets at each start (checkImageBindSources); until then they are not for the driver. */
  mounts: (TaskMount | ImageBindMount)[];
  /** The first mount this agent refuses, said as what to change; undefined when all are allowed. */
  refusal?: string;
}

/**
 * A bind as setup leaves it: its source as written (resolved lexically) and
 * how the start checks it. A task-dir source is walked from `within` (the
 * alloc dir, root's) with no link allowed in any component; a host path's
 * real path must then be within `allowed`.
 */
export interface ImageBindMount extends TaskMount {
  imageBind: { written: string; within: string } | { written: string; allowed: readonly string[] };
}

export function isImageBindMount(m: TaskMount): m is ImageBindMount {
  return 'imageBind' in m;
}

/** Whether `p` is `dir` or below it (both absolute, resolved). */
function isUnder(p: string, dir: string): boolean {
  const rel = path.relative(dir, p);
  // `..data` is a name below dir (Kubernetes' config dirs have such names); only `..` itself climbs.
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel));
}

/**
 * The task's image mounts as driver mounts, judged on their paths as
 * written (nothing on disk is read: a source a template renders need not
 * exist yet). A relative source is relative to the task dir, as Nomad's,
 * and may be only the task's own local/ or secrets/ or the alloc's shared
 * ../alloc/ — never the task dir itself, nor the agent's .executor/ or
 * image/ in it, which the agent trusts on restore. An absolute source needs
 * volumes { enabled }; allowed_host_paths is checked on its real path at
 * each start.
 */
export function imageMountsOf(
  mounts: readonly TaskImageMount[],
  dirs: { taskDir: string; sharedDir: string },
  docker: Pick<ImageDriverConfig, 'volumesEnabled' | 'allowedHostPaths'>,
): ImageMountsResult {
  const out: (TaskMount | ImageBindMount)[] = [];
  const allocDir = path.dirname(dirs.sharedDir);
  const taskOwned = [path.join(dirs.taskDir, 'local'), path.join(dirs.taskDir, 'secrets'), dirs.sharedDir];
  for (const m of mounts) {
    const destination = m.target;
    if (m.type === 'tmpfs') {
      out.push({
        type: 'tmpfs',
        source: '',
        destination,
        readOnly: m.readOnly,
        ...(m.tmpfsSize !== undefined ? { tmpfsSize: m.tmpfsSize } : {}),
      });
      continue;
    }
    const source = m.source ?? '';
    if (!source)
      return {
        mounts: out,
        refusal: `the bind mount at ${destination} names no source: give it a host path or one relative to the task dir`,
      };
    const relative = !path.isAbsolute(source);
    const hostPath = relative ? path.resolve(dirs.taskDir, source) : path.normalize(source);
    if (relative && !taskOwned.some((d) => isUnder(hostPath, d)))
      return {
        mounts: out,
        refusal: `the bind mount of ${source} at ${destination} is not the task's own: a source relative to the task dir must be under local/, secrets/ or the alloc's ../alloc/ (the task dir itself and the agent's .executor/ and image/ are not the task's to write); put the files under local/ and mount that`,
      };
    if (!relative && !docker.volumesEnabled)
      return {
        mounts: out,
        refusal: `the bind mount of ${hostPath} at ${destination} is a host path outside the task dir, and this agent does not allow those: set plugin "docker" { config { volumes { enabled = true } allowed_host_paths = ["…"] } }, or use a path under local/ relative to the task dir`,
      };
    out.push({
      source: hostPath,
      destination,
      readOnly: m.readOnly,
      ...(m.propagation ? { propagation: PROPAGATION[m.propagation] } : {}),
      imageBind: relative ? { written: source, within: allocDir } : { written: source, allowed: docker.allowedHostPaths },
    });
  }
  return { mounts: out };
}

/**
 * The image binds checked as they are now, right before the driver starts
 * the task (a template has rendered its file by then; the task may have
 * swapped a dir of its own for a link since the last start). A task-dir
 * source may have no link in any component below the alloc dir (each is
 * lstat'ed, none followed); a host path's real path must be within
 * allowed_host_paths now. Returns the driver's mounts, or what is wrong.
 */
export function checkImageBindSources(mounts: readonly TaskMount[]): { mounts: TaskMount[] } | { error: string } {
  const out: TaskMount[] = [];
  for (const m of mounts) {
    if (!isImageBindMount(m)) {
      out.push(m);
      continue;
    }
    const { imageBind: bind, ...mount } = m;
    const what = `the bind mount of ${bind.written} at ${m.destination}`;
    if ('within' in bind) {
      const problem = linkOrMissingBelow(bind.within, m.source);
      if (problem === 'missing')
        return {
          error: `${what}: its source ${m.source} does not exist; create it in the task (a template's destination, a prestart task) before the task starts`,
        };
      if (problem !== undefined)
        return {
          error: `${what}: ${problem} is a symbolic link, and a bind follows links out of the task's dirs: replace the link with the dir or file itself`,
        };
      out.push(mount);
      continue;
    }
    let real: string;
    try {
      real = fs.realpathSync(m.source);
    } catch {
      return { error: `${what}: its source ${m.source} does not exist on this node; create it, or mount another path` };
    }
    if (!withinAllowedHostPaths(real, bind.allowed))
      return {
        error: `${what}${real !== m.source ? ` (really ${real})` : ''} is not within this agent's allowed_host_paths (${bind.allowed.join(', ') || 'none'}): add it to plugin "docker" { config { allowed_host_paths } }, or mount another path`,
      };
    out.push({ ...mount, source: real });
  }
  return { mounts: out };
}

/** Whether real path `real` is one of `allowed` (allowed_host_paths, each taken by its own real path) or below one. */
export function withinAllowedHostPaths(real: string, allowed: readonly string[]): boolean {
  return allowed.some((a) => isUnder(real, realpathOr(a)));
}

/** The first path from below `base` down to `p` that is a link (lstat, never followed), 'missing' when one is absent, or undefined. */
function linkOrMissingBelow(base: string, p: string): string | 'missing' | undefined {
  let at = base;
  for (const part of path.relative(base, p).split(path.sep).filter(Boolean)) {
    at = path.join(at, part);
    let st: fs.Stats;
    try {
      st = fs.lstatSync(at);
    } catch {
      return 'missing';
    }
    if (st.isSymbolicLink()) return at;
  }
  return undefined;
}

function realpathOr(p: string): string {
  try {
    return fs.realpathSync(p);
  } catch {
    return path.resolve(p);
  }
}

/** Whether an image task runs privileged: a csi_plugin task that asks, on an agent that allows it. */
export function imagePrivileged(task: Pick<TaskSpec, 'csiPlugin' | 'image'>, docker: Pick<ImageDriverConfig, 'allowPrivileged'>): boolean {
  return !!task.csiPlugin && task.image?.privileged === true && docker.allowPrivileged;
}

/** What this agent refuses of an image task's privileges and capabilities, or undefined. */
export function imagePrivilegeRefusal(
  task: Pick<TaskSpec, 'csiPlugin' | 'image' | 'config'>,
  docker: Pick<ImageDriverConfig, 'allowPrivileged' | 'allowCaps'>,
): string | undefined {
  if (task.image?.privileged && !task.csiPlugin)
    return 'privileged = true is for csi_plugin tasks only: a workload gets the capabilities it needs with cap_add';
  if (task.image?.privileged && !docker.allowPrivileged)
    return 'privileged = true needs plugin "docker" { config { allow_privileged = true } } in this agent\'s config';
  // Root in the host's pid namespace can signal the agent; in its ipc namespace, reach root's SysV shared memory and queues (no user namespace here).
  for (const [asks, field, what] of [
    [task.image?.pidHost, 'pid_mode', "the host's processes, this agent's among them"],
    [task.image?.ipcHost, 'ipc_mode', "the host's shared memory and message queues"],
  ] as const) {
    if (!asks) continue;
    if (!task.csiPlugin) return `${field} = "host" is for csi_plugin tasks only (it gives the task ${what}): remove it`;
    if (!docker.allowPrivileged)
      return `${field} = "host" needs plugin "docker" { config { allow_privileged = true } } in this agent's config, as privileged does: set it, or remove ${field}`;
  }
  const allowed = new Set(docker.allowCaps.map(capName));
  const notAllowed = (task.config.capAdd ?? []).filter((c) => !allowed.has(capName(c)));
  if (notAllowed.length)
    return `cap_add asks for ${notAllowed.join(', ')}, which this agent does not allow (plugin "docker" { config { allow_caps }: ${docker.allowCaps.join(', ')})`;
  return undefined;
}

/** A capability's full name (CAP_…); a name that is none is compared as written (the jobspec check names it). */
function capName(c: string): string {
  try {
    return capabilityName(c);
  } catch {
    return c;
  }
}
