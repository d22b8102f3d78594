// What this agent allows of an image task (driver docker/podman), as pure
// functions of the task and the agent's plugin "docker" block: its `mount`
// and `volumes` binds (a relative source is under the task dir; an absolute
// one only with volumes { enabled } and within allowed_host_paths, checked
// on its real path), its tmpfs mounts, `privileged` (a csi_plugin task only,
// and only with allow_privileged) and cap_add (within allow_caps). A refusal
// is a sentence saying what is refused and what to change; TaskSetup checks
// it at each start, as it does the exec driver's refusals.
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
  mounts: TaskMount[];
  /** The first mount this agent refuses, said as what to change; undefined when all are allowed. */
  refusal?: string;
}

/** Whether `p` is `dir` or below it (both absolute, resolved). */
function isUnder(p: string, dir: string): boolean {
  const rel = path.relative(dir, p);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/**
 * The task's image mounts as driver mounts. `realpath` resolves a host path
 * (links followed) and throws when it does not exist; given so the policy
 * stays a function of its inputs.
 */
export function imageMountsOf(
  mounts: readonly TaskImageMount[],
  taskDir: string,
  docker: Pick<ImageDriverConfig, 'volumesEnabled' | 'allowedHostPaths'>,
  realpath: (p: string) => string,
): ImageMountsResult {
  const out: TaskMount[] = [];
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
    const hostPath = path.isAbsolute(source) ? path.normalize(source) : path.resolve(taskDir, source);
    let real: string;
    try {
      real = realpath(hostPath);
    } catch {
      return {
        mounts: out,
        refusal: `the bind mount at ${destination}: its source ${hostPath} does not exist on this node; create it, or mount another path`,
      };
    }
    // A relative source stays in the task dir (Nomad's docker driver without volumes enabled); a link may not lead it out.
    const inTaskDir = isUnder(real, realpathOr(realpath, taskDir));
    if (!inTaskDir) {
      if (!docker.volumesEnabled)
        return {
          mounts: out,
          refusal: `the bind mount of ${hostPath} at ${destination} is a host path outside the task dir, and this agent does not allow those: set plugin "docker" { config { volumes { enabled = true } allowed_host_paths = ["…"] } }, or use a path relative to the task dir`,
        };
      const allowed = docker.allowedHostPaths.some((a) => isUnder(real, realpathOr(realpath, a)));
      if (!allowed)
        return {
          mounts: out,
          refusal: `the bind mount of ${hostPath}${real !== hostPath ? ` (really ${real})` : ''} at ${destination} is not within this agent's allowed_host_paths (${docker.allowedHostPaths.join(', ') || 'none'}): add it to plugin "docker" { config { allowed_host_paths } }, or mount another path`,
        };
    }
    out.push({
      source: real,
      destination,
      readOnly: m.readOnly,
      ...(m.propagation ? { propagation: PROPAGATION[m.propagation] } : {}),
    });
  }
  return { mounts: out };
}

function realpathOr(realpath: (p: string) => string, p: string): string {
  try {
    return realpath(p);
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
