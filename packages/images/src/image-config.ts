// The process a task runs from an image: the image config's Entrypoint,
// Cmd, Env, WorkingDir and User combined with the task's docker config
// (`entrypoint`, `command`, `args`, `work_dir`) and env, exactly as Nomad's
// docker driver and the Docker daemon combine them. Pure functions.
//
// Nomad (hashicorp/nomad drivers/docker/driver.go, createContainerConfig):
//   if command != "" { Cmd = [command, ...args] }   (command must be non-empty
//   and carry no surrounding white space: validateCommand)
//   else if len(args) > 0 { Cmd = args }
//   if len(entrypoint) > 0 { Entrypoint = entrypoint }
//   WorkingDir = work_dir; User = task.user; Env = the task's env.
// Docker (moby daemon/commit.go, merge(userConf, imageConf)):
//   Env: the image's variables are appended unless the task sets the name.
//   if len(userConf.Entrypoint) == 0 {
//     if len(userConf.Cmd) == 0 { Cmd = imageConf.Cmd }
//     Entrypoint = imageConf.Entrypoint
//   }   — so a task entrypoint drops the image's Cmd.
//   WorkingDir defaults to the image's; it must be absolute.
// Then the process is Entrypoint + Cmd. Docker also gives PATH a default
// when neither sets it (CreateDaemonEnvironment) and runc sets HOME from
// the user's passwd entry when the env has none; both done here.
import { ImageProcessError } from './unpack/errors';
import { type ImageUser, resolveImageUser } from './image-user';

/** The runtime part of an OCI image config ("config" in the config blob), as the image gives it. */
export interface ImageRuntimeConfig {
  readonly Entrypoint?: readonly string[] | null;
  readonly Cmd?: readonly string[] | null;
  readonly Env?: readonly string[] | null;
  readonly WorkingDir?: string;
  readonly User?: string;
}

/** The task's side, named as Nomad's docker task config names it. */
export interface TaskProcessConfig {
  readonly entrypoint?: readonly string[];
  readonly command?: string;
  readonly args?: readonly string[];
  readonly work_dir?: string;
  /** The task's `user`. */
  readonly user?: string;
  /** The task's environment (NOMAD_* and `env {}`), in the order to keep. */
  readonly env?: Readonly<Record<string, string>>;
}

export interface ImageProcess {
  readonly argv: readonly string[];
  /** "NAME=value" entries: the task's first, then the image's it did not set. */
  readonly env: readonly string[];
  readonly cwd: string;
  readonly user: ImageUser;
}

/** Docker's default PATH on Linux (moby pkg/system DefaultPathEnv). */
export const DEFAULT_PATH_ENV = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Nomad's validateCommand: a command that is empty or padded with white space is refused. */
function validateCommand(command: string): void {
  const trimmed = command.trim();
  if (!trimmed)
    throw new ImageProcessError(
      `task config command is empty ("${command}"); give the program to run, or leave command out to use the image's`,
    );
  if (trimmed.length !== command.length) {
    throw new ImageProcessError(
      `task config command "${command}" has white space around it; give the program alone in command and its arguments in args`,
    );
  }
}

/** The Cmd Nomad's docker driver sends, or undefined when the task sets none. */
export function taskCmd(task: TaskProcessConfig): string[] | undefined {
  if (task.command !== undefined && task.command !== '') {
    validateCommand(task.command);
    return [task.command, ...(task.args ?? [])];
  }
  if (task.args?.length) return [...task.args];
  return undefined;
}

/** Entrypoint + Cmd after Docker's merge of the task's settings over the image's. */
export function resolveArgv(image: ImageRuntimeConfig, task: TaskProcessConfig): string[] {
  let cmd = taskCmd(task) ?? [];
  let entrypoint: readonly string[] = task.entrypoint?.length ? task.entrypoint : [];
  if (!entrypoint.length) {
    if (!cmd.length) cmd = [...(image.Cmd ?? [])];
    entrypoint = image.Entrypoint ?? [];
  }
  const argv = [...entrypoint, ...cmd];
  if (!argv.length) {
    throw new ImageProcessError(
      'no command to run: the image has no Entrypoint or Cmd and the task sets none; set command (and args) in the task config',
    );
  }
  return argv;
}

/** The name of a "NAME=value" entry (all of it when there is no "="). */
function envName(entry: string): string {
  const eq = entry.indexOf('=');
  return eq < 0 ? entry : entry.slice(0, eq);
}

/** The task's env, then the image's entries whose names the task did not set (Docker's merge). */
export function mergeEnv(imageEnv: readonly string[] | null | undefined, taskEnv: Readonly<Record<string, string>> = {}): string[] {
  const out = Object.entries(taskEnv).map(([k, v]) => `${k}=${v}`);
  const taken = new Set(Object.keys(taskEnv));
  for (const entry of imageEnv ?? []) {
    if (!taken.has(envName(entry))) {
      out.push(entry);
      taken.add(envName(entry));
    }
  }
  return out;
}

/** The working dir: the task's work_dir, else the image's WorkingDir, else "/". Must be absolute, as Docker requires. */
export function resolveWorkingDir(image: ImageRuntimeConfig, task: TaskProcessConfig): string {
  const dir = task.work_dir || image.WorkingDir || '/';
  if (!dir.startsWith('/')) {
    throw new ImageProcessError(
      `working dir "${dir}" (from ${task.work_dir ? "the task's work_dir" : "the image's WorkingDir"}) is not an absolute path; give an absolute work_dir`,
    );
  }
  return dir;
}

/**
 * The whole process: argv, env, working dir and user. `passwd` and `group`
 * are the texts of the IMAGE's /etc/passwd and /etc/group (undefined when
 * the image has none), never the host's.
 */
export function resolveImageProcess(
  image: ImageRuntimeConfig,
  task: TaskProcessConfig,
  files: { passwd?: string; group?: string },
): ImageProcess {
  const argv = resolveArgv(image, task);
  const cwd = resolveWorkingDir(image, task);
  const user = resolveImageUser(task.user || image.User || '', files.passwd, files.group);
  const env = mergeEnv(image.Env, task.env);
  const names = new Set(env.map(envName));
  if (!names.has('PATH')) env.push(`PATH=${DEFAULT_PATH_ENV}`);
  if (!names.has('HOME')) env.push(`HOME=${user.home}`);
  return { argv, env, cwd, user };
}
