// An image task's start (driver docker/podman), between its prestart hooks
// and the driver: the task's root from the agent's image service (pulled
// when the store lacks it, with "Downloading Image" events the puller
// throttles and a "Pulled" event with the digest; an oci-archive: or
// docker-archive: image is read from this node's disk instead, said as
// "Loading Image" and "Loaded" with the digest), then the process as
// Docker would run it on that image — Entrypoint/Cmd replaced by the task's
// entrypoint/command/args by Nomad's rules, the image's Env under the
// task's, its WorkingDir unless work_dir, and the user from the IMAGE's
// /etc/passwd (the task's `user`, else the image's User; a csi_plugin task
// is root unless it names a user). A failed pull or a process the image
// cannot give — or a bind source that is missing or has a link in its path
// (image-policy.ts checks each one here, after the templates rendered) —
// fails the start as a setup failure: the caller's restart
// policy applies.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { errorMessage } from '@csiplug/core';
import type { IsolationConfig } from '@csiplug/driver';
import { readImageUserFiles, resolveImageProcess, runtimeConfigOf, type ImageEvent, type TaskImagesService } from '@csiplug/images';
import type { TaskSpec } from '@csiplug/jobspec';
import { checkImageBindSources } from './image-policy';

export const IMAGE_EVENT = {
  downloading: 'Downloading Image',
  pulled: 'Pulled',
  /** An archive (oci-archive:, docker-archive:) read from this node's disk instead of a pull. */
  loading: 'Loading Image',
  loaded: 'Loaded',
} as const;

/** Where a task's root goes: <task dir>/image (rootfs/, upper/, work/ and the image record). */
export function imageDirOf(taskDir: string): string {
  return path.join(taskDir, 'image');
}

/** The image step failed (a pull, the image's user or process): its message is the event's, the start fails as a setup failure. */
export class TaskImageSetupError extends Error {}

export interface ImageStartRequest {
  task: TaskSpec;
  taskDir: string;
  /** The agent's image service; absent: the task cannot start (said as a Setup Failure). */
  images: TaskImagesService | undefined;
  /** The task's command, args and env after interpolation. */
  command: string;
  args: string[];
  env: Readonly<Record<string, string>>;
  isolation: IsolationConfig;
  /** A task event. */
  say(event: { type: string; message: string; failed?: boolean; details?: Record<string, string> }): void;
  signal?: AbortSignal;
}

export interface ImageStart {
  command: string;
  args: string[];
  env: Record<string, string>;
  isolation: IsolationConfig;
}

/** The task's root and process on its image. Throws TaskImageSetupError after saying why as a Setup Failure event. */
export async function prepareImageStart(req: ImageStartRequest): Promise<ImageStart> {
  const image = req.task.image!;
  const fail = (message: string, cause?: unknown): never => {
    // A pull ended by the task's own stop is no failure of the task.
    if (!req.signal?.aborted) req.say({ type: 'Setup Failure', message, failed: true });
    throw new TaskImageSetupError(`task "${req.task.name}": ${message}`, { cause });
  };
  const images = req.images;
  if (!images)
    return fail(`the task runs image ${image.ref}, but this agent has no image service (the images module is not in its module list)`);
  let lastDownload = '';
  const onEvent = (e: ImageEvent) => {
    if (e.kind === 'downloading') {
      // The puller throttles these already; the same figure twice says nothing new.
      if (e.message === lastDownload) return;
      lastDownload = e.message;
      req.say({ type: IMAGE_EVENT.downloading, message: e.message });
    } else if (e.kind === 'loading') {
      req.say({ type: IMAGE_EVENT.loading, message: e.message, details: { image: e.reference, path: e.path } });
    } else {
      req.say({ type: IMAGE_EVENT[e.kind], message: e.message, details: { image: e.reference, digest: e.digest } });
    }
  };
  let prepared: Awaited<ReturnType<TaskImagesService['prepare']>>;
  try {
    prepared = await images.prepare({
      taskDir: imageDirOf(req.taskDir),
      ref: image.ref,
      ...(image.auth ? { auth: image.auth } : {}),
      forcePull: image.forcePull,
      pullTimeout: image.pullTimeout,
      allowDevices: req.isolation.privileged === true,
      onEvent,
      ...(req.signal ? { signal: req.signal } : {}),
    });
  } catch (err) {
    return fail(errorMessage(err), err);
  }
  let proc: ReturnType<typeof resolveImageProcess>;
  try {
    const files = await readImageUserFiles(prepared.rootfs);
    const user = req.task.user ?? (req.task.csiPlugin ? 'root' : undefined);
    proc = resolveImageProcess(
      runtimeConfigOf(prepared.config),
      {
        ...(image.entrypoint ? { entrypoint: image.entrypoint } : {}),
        // An empty command is the image's own (Nomad's docker driver); command with args replaces the image's Cmd.
        ...(req.command !== '' ? { command: req.command } : {}),
        ...(req.args.length ? { args: req.args } : {}),
        ...(image.workDir !== undefined ? { work_dir: image.workDir } : {}),
        ...(user !== undefined ? { user } : {}),
        env: req.env,
      },
      files,
    );
  } catch (err) {
    return fail(`image ${prepared.reference}: ${errorMessage(err)}`, err);
  }
  const [command, ...args] = proc.argv;
  if (command === undefined)
    return fail(
      `image ${prepared.reference} has no Entrypoint or Cmd and the task gives no command: set config { command = "…" } or entrypoint`,
    );
  // Each bind's source as it is now, after the templates rendered (a link the task made since the last start is refused).
  const binds = checkImageBindSources(req.isolation.mounts ?? []);
  if ('error' in binds) return fail(binds.error);
  // The task's own dirs are its user's (the image's user is known only now).
  for (const dir of [req.isolation.localDir, req.isolation.secretsDir]) ownDir(dir, proc.user);
  const env: Record<string, string> = {};
  for (const entry of proc.env) {
    const eq = entry.indexOf('=');
    env[eq < 0 ? entry : entry.slice(0, eq)] = eq < 0 ? '' : entry.slice(eq + 1);
  }
  return {
    command,
    args,
    env,
    isolation: {
      ...req.isolation,
      mounts: binds.mounts,
      image: { rootfs: prepared.rootfs, cwd: proc.cwd },
      user: {
        uid: proc.user.uid,
        gid: proc.user.gid,
        ...(proc.user.additionalGids.length ? { additionalGids: proc.user.additionalGids } : {}),
      },
    },
  };
}

/** Gives a dir the agent made (never a link: lstat-checked) to the task's user, 0700. */
function ownDir(dir: string, owner: { uid: number; gid: number }): void {
  const st = fs.lstatSync(dir);
  if (!st.isDirectory()) throw new TaskImageSetupError(`${dir} is not a directory; remove it and restart the alloc`);
  if (st.uid !== owner.uid || st.gid !== owner.gid) fs.chownSync(dir, owner.uid, owner.gid);
}
