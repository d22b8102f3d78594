// TaskSetup: an alloc's tasks made ready to start once its prerun has
// mounted the volumes — each task's dirs (0700, owned by an isolated task's
// user), its Nomad variables and the node's values, its volume_mount
// destinations resolved (task-paths.ts), a host-process task's links to its
// volume_mounts, and what an isolated task sees (chroot, binds, capabilities,
// user) with what this agent refuses of it. AllocRunner makes one per run.
import { errorMessage, type Logger } from '@csiplug/core';
import { TASK_ALLOC_DIR, TASK_LOCAL_DIR, TASK_SECRETS_DIR, type IsolationConfig, type TaskMount } from '@csiplug/driver';
import type { MountedVolume } from '@csiplug/hooks';
import type { Alloc, ExecDriverConfig, GroupSpec, ImageDriverConfig, NodeAttributes, TaskSpec, TaskVarsInput } from '@csiplug/jobspec';
import { DEFAULT_IMAGE_DRIVER, nodeValues, taskVariables } from '@csiplug/jobspec';
import { imageMountsOf, imagePrivileged, imagePrivilegeRefusal, resolveImageMountPaths } from './image-policy';
import * as fs from 'fs';
import * as path from 'path';
import { rawExecRefusal } from './raw-exec-policy';
import { resolveTaskPath } from './task-paths';
import type { TaskRunner } from './task-runner';
import { DEFAULT_TASK_USER, resolveTaskUser, userRefusal, type ResolvedTaskUser } from './task-user';

/** What of the agent a task's setup reads (AllocRunnerDeps has them all). */
export interface TaskSetupDeps {
  dataDir: string;
  nodeId: string;
  exec: ExecDriverConfig;
  /** plugin "docker" { config { … } }: what image tasks may have; DEFAULT_IMAGE_DRIVER when absent. */
  docker?: ImageDriverConfig;
  hostNetwork: () => boolean;
  rawExec: () => boolean;
  variables: Record<string, string>;
  /** This node for `${attr.…}`, `${node.…}`, `${meta.…}` and NOMAD_DC/NOMAD_REGION (node-fingerprint.ts); absent: none of those resolve. */
  node?: NodeAttributes;
}

export class TaskSetup {
  constructor(
    private readonly alloc: Alloc,
    private readonly group: GroupSpec,
    private readonly allocDir: string,
    private readonly volumes: Readonly<Record<string, MountedVolume>>,
    private readonly deps: TaskSetupDeps,
    private readonly log: Logger,
  ) {}

  /**
   * Each task's dirs, variables and (for an isolated task) what it sees,
   * from the volumes the prerun mounted. What this agent refuses of a task
   * (a cap_add it does not allow, the host's network without an API token)
   * fails that task when it next starts; a running one is never stopped for it.
   */
  prepare(runners: ReadonlyMap<string, TaskRunner>): void {
    const volumePaths: Record<string, string> = {};
    for (const [name, v] of Object.entries(this.volumes)) volumePaths[name] = v.hostPath;
    // An image task's user is the image's (its /etc/passwd, read at start: task-image.ts), never looked up on the host.
    const users = new Map(this.group.tasks.filter((t) => t.isolated && !t.image).map((t) => [t.name, this.taskUserOf(t)] as const));
    // The alloc's shared dir belongs to its isolated tasks' user; tasks of several users share it with the sticky bit (its host path is behind 0700 dirs).
    const owners = new Set([...users.values()].flatMap((u) => ('user' in u ? [`${u.user.uid}:${u.user.gid}`] : [])));
    const sharedOwner = owners.size === 1 ? [...users.values()].flatMap((u) => ('user' in u ? [u.user] : []))[0] : undefined;
    for (const task of this.group.tasks) {
      const runner = runners.get(task.name)!;
      fs.mkdirSync(runner.taskDir, { recursive: true, mode: 0o700 });
      const pluginDataDir = task.csiPlugin ? this.pluginDataDir(task.csiPlugin.id) : undefined;
      // An isolated task sees its dirs and volumes where they are mounted into it; a host process sees the host's paths.
      const nomadDirs = task.isolated
        ? { local: TASK_LOCAL_DIR, alloc: TASK_ALLOC_DIR, secrets: TASK_SECRETS_DIR }
        : this.hostTaskDirs(runner.taskDir);
      const input: TaskVarsInput = {
        allocId: this.alloc.id,
        allocIndex: this.alloc.index,
        jobId: this.alloc.jobId,
        groupName: this.alloc.group,
        taskName: task.name,
        taskDir: task.isolated ? TASK_LOCAL_DIR : runner.taskDir,
        nodeId: this.deps.nodeId,
        ...(nomadDirs ? { nomadDirs } : {}),
        ...(pluginDataDir !== undefined ? { pluginDataDir } : {}),
        ...(this.deps.node ? { node: this.deps.node } : {}),
        extra: this.deps.variables,
      };
      const node = this.deps.node ? nodeValues(this.deps.node) : {};
      // Destinations are resolved before any bind or link is made: none is ever made at a path with "${" in it.
      const pathVars = { ...taskVariables(input), ...node };
      const destinations = this.destinationsOf(task, runner.taskDir, pathVars);
      const isolation = task.isolated
        ? this.isolationOf(
            task,
            runner.taskDir,
            pluginDataDir,
            users.get(task.name) ?? IMAGE_USER,
            owners.size > 1 ? 'shared' : sharedOwner,
            destinations.paths,
            pathVars,
          )
        : undefined;
      if (!isolation) this.linkVolumeMounts(task, destinations.paths);
      const refusal = isolation?.refusal ?? rawExecRefusal(false, this.deps.rawExec);
      runner.setIsolation(isolation?.config, () => destinations.error ?? refusal());
      runner.setVariables(taskVariables({ ...input, volumes: isolation ? isolation.volumePaths : volumePaths }), node);
    }
  }

  /** Each volume_mount's destination resolved (undefined: refused, and `error` says why; the task is refused when it starts). */
  private destinationsOf(
    task: TaskSpec,
    taskDir: string,
    vars: Readonly<Record<string, string>>,
  ): { paths: (string | undefined)[]; error?: string } {
    const view = task.isolated
      ? { isolated: true as const }
      : { isolated: false as const, taskDir, sharedDir: path.join(this.allocDir, 'alloc') };
    const errors: string[] = [];
    const paths = task.volumeMounts.map((m, i) => {
      const field = task.volumeMounts.length > 1 ? `volume_mount[${i}].destination` : 'volume_mount.destination';
      const resolved = resolveTaskPath(m.destination, field, vars, view);
      if ('error' in resolved) errors.push(resolved.error);
      return 'path' in resolved ? resolved.path : undefined;
    });
    return errors.length ? { paths, error: errors.join('; ') } : { paths };
  }

  /** A host-process task's Nomad dirs (<task dir>/local, <alloc dir>/alloc, <task dir>/secrets 0700), made now. */
  private hostTaskDirs(taskDir: string): { local: string; alloc: string; secrets: string } | undefined {
    const dirs = { local: path.join(taskDir, 'local'), alloc: path.join(this.allocDir, 'alloc'), secrets: path.join(taskDir, 'secrets') };
    try {
      fs.mkdirSync(dirs.local, { recursive: true, mode: 0o755 });
      fs.mkdirSync(dirs.alloc, { recursive: true, mode: 0o700 });
      fs.mkdirSync(dirs.secrets, { recursive: true, mode: 0o700 });
    } catch (err) {
      // A file of that name the task made itself (it works in its task dir): Nomad's dir variables are left out, the task is not failed for them.
      this.log.warn(
        "a host-process task's local, alloc or secrets dir could not be made; NOMAD_TASK_DIR, NOMAD_ALLOC_DIR and NOMAD_SECRETS_DIR are left out",
        { task_dir: taskDir, error: err },
      );
      return undefined;
    }
    return dirs;
  }

  /** A plugin's data dir, shared by every alloc of the plugin (0700; the plugin id is path-safe, checked with its csi_plugin block). */
  private pluginDataDir(pluginId: string): string {
    const dir = path.join(this.deps.dataDir, 'plugin-data', pluginId);
    fs.mkdirSync(path.dirname(dir), { recursive: true, mode: 0o700 });
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    return dir;
  }

  /**
   * What an isolated task sees: the agent's chroot_env read-only, its own
   * dirs (<task dir>/local at /local, <task dir>/secrets at /secrets, the
   * alloc's shared <alloc dir>/alloc at /alloc), each volume_mount bound at
   * its destination (read-only when asked), a CSI plugin's data dir at its
   * own path; its capabilities as the agent allows. Also the volume paths as
   * the task sees them, for its variables.
   */
  private isolationOf(
    task: TaskSpec,
    taskDir: string,
    pluginDataDir: string | undefined,
    taskUser: { user: ResolvedTaskUser } | { error: string },
    sharedOwner: ResolvedTaskUser | 'shared' | undefined,
    destinations: readonly (string | undefined)[],
    pathVars: Readonly<Record<string, string>>,
  ): { config: IsolationConfig; volumePaths: Record<string, string>; refusal: () => string | undefined } {
    const exec = this.deps.exec;
    const local = path.join(taskDir, 'local');
    const secrets = path.join(taskDir, 'secrets');
    const shared = path.join(this.allocDir, 'alloc');
    // The task's own dirs are its user's alone (0700); the host paths above them are root's (0700).
    fs.mkdirSync(local, { recursive: true, mode: 0o700 });
    fs.mkdirSync(secrets, { recursive: true, mode: 0o700 });
    fs.mkdirSync(shared, { recursive: true, mode: 0o700 });
    if ('user' in taskUser) {
      for (const dir of [local, secrets]) ownDir(dir, taskUser.user, 0o700);
      if (sharedOwner === 'shared') ownDir(shared, { uid: 0, gid: 0 }, 0o1777);
      else if (sharedOwner) ownDir(shared, sharedOwner, 0o700);
    }
    // Refused when the task next starts, not now: a restore never stops a live task for a setting changed since it started.
    const notAllowed = task.image ? [] : (task.config.capAdd ?? []).filter((c) => !exec.allowCaps.includes(c));
    const network = task.config.networkMode ?? 'none';
    const docker = this.deps.docker ?? DEFAULT_IMAGE_DRIVER;
    // Mount paths are resolved (strictly: a name with no value is a refusal) before the policy looks at them.
    const resolvedMounts = task.image ? resolveImageMountPaths(task.image.mounts, pathVars) : undefined;
    const image = resolvedMounts
      ? 'error' in resolvedMounts
        ? { mounts: [], refusal: resolvedMounts.error }
        : imageMountsOf(resolvedMounts.mounts, taskDir, docker, (p) => fs.realpathSync(p))
      : undefined;
    const imageRefusal = task.image ? (image!.refusal ?? imagePrivilegeRefusal(task, docker)) : undefined;
    const refusal = () =>
      'error' in taskUser
        ? taskUser.error
        : imageRefusal !== undefined
          ? imageRefusal
          : // A CSI plugin runs as root by default: naming root changes nothing.
            ((taskUser === IMAGE_USER
              ? undefined
              : userRefusal(task.csiPlugin && taskUser.user.uid === 0 ? undefined : task.user, taskUser.user, this.deps.exec)) ??
            (notAllowed.length
              ? `cap_add asks for ${notAllowed.join(', ')}, which this agent does not allow (plugin "exec" { allow_caps }: ${exec.allowCaps.join(', ')})`
              : network === 'host' && !this.deps.hostNetwork()
                ? 'network_mode = "host" would let the task reach this agent\'s API, which asks for no token and starts processes as root: set acl { token } in the agent config, or use network_mode = "none"'
                : undefined));
    const mounts: TaskMount[] = [];
    const volumePaths: Record<string, string> = {};
    for (const [i, m] of task.volumeMounts.entries()) {
      const volume = this.volumes[m.volume];
      const destination = destinations[i];
      if (!volume || destination === undefined) continue;
      mounts.push({
        source: volume.hostPath,
        destination,
        readOnly: m.readOnly || volume.readOnly,
        ...(m.propagation ? { propagation: m.propagation } : {}),
      });
      // The group's volumes by name, where the task sees each: its first volume_mount of it (one it does not mount: not at all).
      volumePaths[m.volume] ??= destination;
    }
    if (pluginDataDir !== undefined) mounts.push({ source: pluginDataDir, destination: pluginDataDir });
    if (image) mounts.push(...image.mounts);
    return {
      config: {
        // An image task's root is its image (given at start, task-image.ts), with no chroot_env.
        chroot: task.image ? {} : exec.chrootEnv,
        ...(task.image?.pidHost ? { pidHost: true } : {}),
        ...(task.image?.ipcHost ? { ipcHost: true } : {}),
        allocDir: shared,
        secretsDir: secrets,
        localDir: local,
        mounts,
        ...(task.config.capAdd ? { capAdd: task.config.capAdd } : {}),
        ...(task.config.capDrop ? { capDrop: task.config.capDrop } : {}),
        network,
        ...(task.resources
          ? {
              resources: {
                ...(task.resources.cpu !== undefined ? { cpuShares: task.resources.cpu } : {}),
                ...(task.resources.memoryMB !== undefined ? { memoryBytes: task.resources.memoryMB * 1024 * 1024 } : {}),
              },
            }
          : {}),
        // Only a CSI plugin is ever privileged, and only when the agent allows it (nomad#9258).
        ...((task.image ? imagePrivileged(task, docker) : task.csiPlugin && exec.allowPrivileged) ? { privileged: true } : {}),
        ...('user' in taskUser && taskUser !== IMAGE_USER
          ? {
              user: {
                uid: taskUser.user.uid,
                gid: taskUser.user.gid,
                ...(taskUser.user.additionalGids ? { additionalGids: taskUser.user.additionalGids } : {}),
              },
            }
          : {}),
      },
      volumePaths,
      refusal,
    };
  }

  /** Whom an isolated task runs as: its `user`, else nobody (a CSI plugin: root); an error when the name is unknown here. */
  private taskUserOf(task: TaskSpec): { user: ResolvedTaskUser } | { error: string } {
    const name = task.user ?? (task.csiPlugin ? 'root' : DEFAULT_TASK_USER);
    try {
      return { user: resolveTaskUser(name) };
    } catch (err) {
      return { error: `task "${task.name}" cannot run as ${errorMessage(err)}: create the user, or name another in the task's user` };
    }
  }

  /** A host-process task's volume_mounts: a link at each resolved destination (under its task dir or the alloc's shared dir) to the published host path. */
  private linkVolumeMounts(task: TaskSpec, destinations: readonly (string | undefined)[]): void {
    for (const [i, mount] of task.volumeMounts.entries()) {
      const volume = this.volumes[mount.volume];
      const link = destinations[i];
      if (!volume || link === undefined) continue;
      fs.mkdirSync(path.dirname(link), { recursive: true });
      try {
        if (fs.readlinkSync(link) === volume.hostPath) continue;
        fs.unlinkSync(link);
      } catch {
        // not there yet
      }
      fs.symlinkSync(volume.hostPath, link);
    }
  }
}

/** An image task's user until its image gives one at start: root owns its dirs meanwhile, and no host user is looked up or refused. */
const IMAGE_USER: { user: ResolvedTaskUser } = Object.freeze({ user: Object.freeze({ uid: 0, gid: 0, name: 'root' }) });

/** Gives `dir` (made by the agent, never a link: lstat-checked) to `owner` with `mode`. */
function ownDir(dir: string, owner: { uid: number; gid: number }, mode: number): void {
  const st = fs.lstatSync(dir);
  if (!st.isDirectory()) throw new Error(`${dir} is not a directory; remove it and restart the alloc`);
  if (st.uid !== owner.uid || st.gid !== owner.gid) fs.chownSync(dir, owner.uid, owner.gid);
  if ((st.mode & 0o7777) !== mode) fs.chmodSync(dir, mode);
}
