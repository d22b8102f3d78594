// The agent's `plugin "docker" { config { … } }` block (and `plugin
// "podman"`, the same settings): how this node runs image tasks, read as
// Nomad's docker plugin block. Nomad's keys keep Nomad's meanings and
// defaults (allow_privileged false, gc.image true after 3m, volumes off,
// pull_activity_timeout 2m and at least 1m). `allowed_host_paths` is
// csiplug's own: the host paths a bind may name once volumes are enabled,
// and (volumes on or off) where an image archive may be read from.
// Keys of Nomad's plugin that only make sense with a Docker daemon are
// refused naming the key and why.
import { ALL_CAPS, DEFAULT_TASK_CAPS, capabilityName, formatDuration } from '@csiplug/core';
import * as path from 'path';
import type { BlockReader } from './document';

/** `plugin "docker" { config { … } }` (and `plugin "podman"`, the same settings), as Nomad's docker driver plugin block. */
export interface ImageDriverConfig {
  /** `allow_privileged`: whether a csi_plugin task's `privileged = true` is honoured (default false, as Nomad). */
  allowPrivileged: boolean;
  /** `allow_caps`: capabilities a task's cap_add may ask for (full names, CAP_…); default Nomad's docker list. */
  allowCaps: string[];
  /** `auth { config }`: path of a docker config.json whose `auths` give registry credentials. */
  authConfig?: string;
  /** `volumes { enabled }`: whether `volumes`/bind `mount`s with host paths are allowed (default false, as Nomad). */
  volumesEnabled: boolean;
  /** `allowed_host_paths`: the host paths (and what is under them) a bind may name when volumes are enabled, and an image archive (oci-archive:, docker-archive:) may be read from, volumes on or off; empty: none. */
  allowedHostPaths: string[];
  /** `pull_activity_timeout` in ms: a pull with no progress for this long fails (default 2m, at least 1m as Nomad). */
  pullActivityTimeout: number;
  /** `gc { image, image_delay }`: remove an image no task uses after image_delay ms (default true, 3m). */
  gc: { image: boolean; imageDelay: number };
}

/** The docker/podman driver's settings when the config has no plugin "docker" block. */
export const DEFAULT_IMAGE_DRIVER: Readonly<ImageDriverConfig> = Object.freeze({
  allowPrivileged: false,
  allowCaps: [...DEFAULT_TASK_CAPS],
  volumesEnabled: false,
  allowedHostPaths: [],
  pullActivityTimeout: 2 * 60_000,
  gc: Object.freeze({ image: true, imageDelay: 3 * 60_000 }),
}) as ImageDriverConfig;

/** Nomad's floor for pull_activity_timeout. */
export const MIN_PULL_ACTIVITY_TIMEOUT = 60_000;

const NO_DAEMON = 'csiplug runs images on runc itself, with no Docker daemon';
const REMOVE = 'remove it';

const CONFIG_KEYS = ['allow_privileged', 'allow_caps', 'auth', 'volumes', 'allowed_host_paths', 'pull_activity_timeout', 'gc'];

/** Nomad docker plugin keys csiplug has no use for, and why. */
const CONFIG_UNSUPPORTED: Readonly<Record<string, string>> = {
  endpoint: `${NO_DAEMON}, so there is no daemon to reach; ${REMOVE}`,
  tls: `${NO_DAEMON}, so there is no daemon to reach; registries are trusted as Docker trusts them (/etc/docker/certs.d/<host:port>/ca.crt and the system CAs); ${REMOVE}`,
  extra_labels: `${NO_DAEMON} and puts no labels on containers (a task's own labels are kept); ${REMOVE}`,
  logging: `${NO_DAEMON}: a task's stdout and stderr go to files, rotated as the task's logs block says; ${REMOVE}`,
  nvidia_runtime: `${NO_DAEMON} and runs every image on runc; ${REMOVE}`,
  allow_runtimes: `${NO_DAEMON} and runs every image on runc; ${REMOVE}`,
  infra_image: `${NO_DAEMON} and makes no pause containers for group networks; ${REMOVE}`,
  infra_image_pull_timeout: `${NO_DAEMON} and makes no pause containers for group networks; ${REMOVE}`,
  image_pull_timeout: `set image_pull_timeout in each task's config (default 5m); ${REMOVE}`,
  container_exists_attempts: `${NO_DAEMON} and creates no Docker containers; ${REMOVE}`,
  oom_score_adj: `${NO_DAEMON}; a task's limits are its resources block; ${REMOVE}`,
  pids_limit: `${NO_DAEMON}; a task's limits are its resources block; ${REMOVE}`,
  disable_log_collection: `${NO_DAEMON}: csiplug always keeps a task's output, in files; ${REMOVE}`,
  windows_allow_insecure_container_admin: `csiplug runs on Linux only; ${REMOVE}`,
  allowed_modes: `${NO_DAEMON}: a task may ask for ipc_mode or pid_mode "host" and nothing else; ${REMOVE}`,
};

/**
 * The body of `plugin "docker"` or `plugin "podman"` (`b`, whose only key is
 * `config`), defaults filled in. The first problem is thrown, named by `b`'s
 * Where (`plugin "docker".config.gc.container …`).
 */
export function readImageDriverPlugin(b: BlockReader): ImageDriverConfig {
  const c = b.block('config', CONFIG_KEYS, CONFIG_UNSUPPORTED);
  const config: ImageDriverConfig = {
    ...DEFAULT_IMAGE_DRIVER,
    allowCaps: [...DEFAULT_IMAGE_DRIVER.allowCaps],
    allowedHostPaths: [],
    gc: { ...DEFAULT_IMAGE_DRIVER.gc },
  };
  if (!c) return config;

  config.allowPrivileged = c.bool('allow_privileged', DEFAULT_IMAGE_DRIVER.allowPrivileged);
  if (c.has('allow_caps')) {
    // Nomad takes ["all"] for every capability.
    config.allowCaps = c
      .stringList('allow_caps')
      .flatMap((cap, i) => {
        if (cap.trim().toLowerCase() === 'all') return [...ALL_CAPS];
        try {
          return [capabilityName(cap)];
        } catch {
          return c.fail(`allow_caps[${i}]`, `"${cap}" is not a Linux capability (like "sys_admin" or "CAP_SYS_ADMIN"), nor "all"`);
        }
      })
      .filter((cap, i, all) => all.indexOf(cap) === i);
  }

  const a = c.block('auth', ['config'], {
    helper: `csiplug runs no credential helpers: put the registry's credentials in the auths of the file auth { config } names; ${REMOVE}`,
  });
  if (a?.has('config')) config.authConfig = absolutePath(a, 'config', a.requiredString('config'));

  const v = c.block('volumes', ['enabled'], {
    selinuxlabel: `csiplug sets no SELinux labels on binds; ${REMOVE}`,
  });
  config.volumesEnabled = v?.bool('enabled', false) ?? false;
  if (c.has('allowed_host_paths')) {
    const paths = c.stringList('allowed_host_paths').map((p, i) => absolutePath(c, `allowed_host_paths[${i}]`, p));
    // With volumes off it still names where image archives (oci-archive:, docker-archive:) may be read from: the agent reads them, no task sees the path.
    config.allowedHostPaths = paths.filter((p, i) => paths.indexOf(p) === i);
  }

  config.pullActivityTimeout = c.duration('pull_activity_timeout', DEFAULT_IMAGE_DRIVER.pullActivityTimeout);
  if (config.pullActivityTimeout < MIN_PULL_ACTIVITY_TIMEOUT)
    c.fail(
      'pull_activity_timeout',
      `is less than the minimum, ${formatDuration(MIN_PULL_ACTIVITY_TIMEOUT)} (got ${formatDuration(config.pullActivityTimeout)}), as in Nomad`,
    );

  const gc = c.block('gc', ['image', 'image_delay'], {
    container: `${NO_DAEMON}: a task's runc container goes with its task; ${REMOVE}`,
    dangling_containers: `${NO_DAEMON}: a task's runc container goes with its task, and the agent's orphan check finds any left; ${REMOVE}`,
  });
  if (gc) {
    config.gc.image = gc.bool('image', DEFAULT_IMAGE_DRIVER.gc.image);
    config.gc.imageDelay = gc.duration('image_delay', DEFAULT_IMAGE_DRIVER.gc.imageDelay);
  }
  return config;
}

/** An absolute host path, normalised (no "//", "/./" or trailing "/"); ".." is refused rather than resolved. */
function absolutePath(r: BlockReader, key: string, p: string): string {
  if (!path.isAbsolute(p) || p.includes('\0') || p.split('/').includes('..'))
    r.fail(key, `must be an absolute path without ".." (got ${JSON.stringify(p)})`);
  return path.posix.normalize(p).replace(/(.)\/$/, '$1');
}

/** Whether the settings of two plugin blocks are the same (docker and podman must agree: csiplug runs both alike). */
export function sameImageDriverConfig(a: ImageDriverConfig, b: ImageDriverConfig): boolean {
  const canonical = (c: ImageDriverConfig): string =>
    JSON.stringify({ ...c, allowCaps: [...c.allowCaps].sort(), allowedHostPaths: [...c.allowedHostPaths].sort(), gc: { ...c.gc } }, [
      'allowPrivileged',
      'allowCaps',
      'authConfig',
      'volumesEnabled',
      'allowedHostPaths',
      'pullActivityTimeout',
      'gc',
      'image',
      'imageDelay',
    ]);
  return canonical(a) === canonical(b);
}
