// The `config` block of a `docker` or `podman` task: Nomad's docker task
// config, the subset csiplug runs on runc (an OCI image, isolated as an exec
// task is), read and checked at validate; and the same block written back
// from a TaskSpec (the canonical JSON form, job history and diffs). Every
// other field Nomad's docker driver has is refused naming it and what to do
// instead; a field no driver has is refused as unknown. Problems go through
// the jobspec's BlockReader, so all of them come out in one pass.
//
// Nomad's names keep Nomad's meanings: `command` is the binary (a string;
// absent, the image's), `args` its arguments, `entrypoint` replaces the
// image's, a `mount` without `type` is a Docker volume ("volume", Nomad's
// default — refused), `volumes` entries are "host:container[:ro|:rw]" with a
// relative host path under the task dir (or "../alloc/…", the alloc's shared
// dir, as Nomad allows). `${…}` in args and paths is left as
// written for the task start to resolve.
import { ImageReferenceError, capabilityName, formatDuration, parseImageReference } from '@csiplug/core';
import * as path from 'path';
import { BlockReader } from './document';
import type { TaskImage, TaskImageMount, TaskSpec } from './model';

/** Nomad's drivers that run an OCI image; csiplug runs both alike, on runc. */
export const IMAGE_DRIVERS = ['docker', 'podman'] as const;
export type ImageDriver = (typeof IMAGE_DRIVERS)[number];

export function isImageDriver(driver: string | undefined): driver is ImageDriver {
  return (IMAGE_DRIVERS as readonly string[]).includes(driver ?? '');
}

/** Nomad's default `image_pull_timeout`. */
export const DEFAULT_IMAGE_PULL_TIMEOUT = 5 * 60_000;

/** Docker's bind propagation names (bind_options { propagation }). */
const PROPAGATIONS = ['rprivate', 'private', 'rshared', 'shared', 'rslave', 'slave'] as const;

/** A docker task's `config` block as JSON (what jobToDocument writes; the reader takes every form Nomad does). */
export interface ImageTaskConfigDocument {
  image: string;
  command?: string;
  args?: string[];
  entrypoint?: string[];
  work_dir?: string;
  privileged?: boolean;
  network_mode?: 'host' | 'none';
  ipc_mode?: 'host';
  pid_mode?: 'host';
  cap_add?: string[];
  cap_drop?: string[];
  mount?: ImageMountDocument[];
  volumes?: string[];
  auth?: { username?: string; password?: string; server_address?: string };
  force_pull?: boolean;
  image_pull_timeout?: string | number;
  labels?: Record<string, string>;
}

export interface ImageMountDocument {
  type: 'bind' | 'tmpfs';
  source?: string;
  target: string;
  readonly?: boolean;
  bind_options?: { propagation: string };
  tmpfs_options?: { size: number };
}

const CONFIG_FIELDS = [
  'image',
  'command',
  'args',
  'entrypoint',
  'work_dir',
  'privileged',
  'network_mode',
  'ipc_mode',
  'pid_mode',
  'cap_add',
  'cap_drop',
  'mount',
  'mounts',
  'volumes',
  'auth',
  'force_pull',
  'image_pull_timeout',
  'labels',
];

const REMOVE = 'remove it';
const RUNC = 'csiplug runs images on runc itself, with no Docker daemon';
const NO_PORTS = `${RUNC}: there are no port mappings or container networks; use network_mode = "host" (the host's network) and let the program listen on its port; ${REMOVE}`;
const NO_DNS = `${RUNC} and writes no resolv.conf or hosts of its own; ${REMOVE} (a file the task needs can be bound in with a mount block)`;
const NO_NAMESPACE = `${RUNC}: each task has its own namespaces (only ipc_mode and pid_mode may be "host"); ${REMOVE}`;
const NO_TERMINAL = `a task has no terminal: its output goes to its log files (see the task's logs block); ${REMOVE}`;
const USE_RESOURCES = `the task's resources block sets its limits (cpu as shares, memory as a hard limit); ${REMOVE}`;
const NO_DOCKER_VOLUMES = `${RUNC}, so there are no Docker volumes: mount a CSI volume with the group's volume block and the task's volume_mount, or a host path with a mount block of type "bind"; ${REMOVE}`;

/** Nomad docker task config fields csiplug does not run, with what to do instead. */
const CONFIG_UNSUPPORTED: Readonly<Record<string, string>> = {
  ports: NO_PORTS,
  port_map: NO_PORTS,
  advertise_ipv6_address: NO_PORTS,
  ipv4_address: NO_PORTS,
  ipv6_address: NO_PORTS,
  mac_address: NO_PORTS,
  network_aliases: NO_PORTS,
  dns_servers: NO_DNS,
  dns_search_domains: NO_DNS,
  dns_options: NO_DNS,
  extra_hosts: NO_DNS,
  hostname: `${RUNC} and sets no container hostname; ${REMOVE}`,
  devices: `a CSI plugin that needs the host's devices runs with privileged = true (it then sees the host's /dev); ${REMOVE}`,
  sysctl: `${RUNC} and sets no sysctls for a task; set them on the host; ${REMOVE}`,
  ulimit: `${RUNC} and sets no rlimits for a task; ${REMOVE}`,
  security_opt: `${RUNC}: an image task is confined as an exec task is (privileged only for a CSI plugin); ${REMOVE}`,
  storage_opt: `each task gets a writable layer over its image in the agent's data_dir, with no size option; ${REMOVE}`,
  shm_size: `to size /dev/shm, mount a tmpfs there: mount { type = "tmpfs" target = "/dev/shm" tmpfs_options { size = … } }; ${REMOVE}`,
  pids_limit: USE_RESOURCES,
  oom_score_adj: USE_RESOURCES,
  cpuset_cpus: USE_RESOURCES,
  cpu_cfs_period: USE_RESOURCES,
  cpu_hard_limit: `csiplug applies resources { cpu } as cpu shares, never as a hard limit; ${REMOVE}`,
  memory_hard_limit: `resources { memory } is already a hard limit; set it there; ${REMOVE}`,
  logging: `csiplug keeps the task's stdout and stderr in files, rotated as the task's logs block says; ${REMOVE}`,
  runtime: `csiplug runs every image on runc; ${REMOVE}`,
  isolation: `csiplug runs every image on runc (isolation is a Windows setting); ${REMOVE}`,
  userns_mode: NO_NAMESPACE,
  uts_mode: NO_NAMESPACE,
  cgroupns: NO_NAMESPACE,
  readonly_rootfs: `each task gets a writable layer over its image, dropped when the task goes; ${REMOVE}`,
  init: `${RUNC} and adds no init process to the image; ${REMOVE}`,
  interactive: NO_TERMINAL,
  tty: NO_TERMINAL,
  healthchecks: `csiplug runs no Docker health checks (a CSI plugin's health is its probe); ${REMOVE}`,
  load: 'csiplug names an archive in image itself, by its absolute path on the node, as skopeo does: image = "docker-archive:/path/image.tar" (docker save output) or "oci-archive:/path/image.tar"; remove load',
  auth_soft_fail: `a pull that the registry refuses fails the task; ${REMOVE} (or remove the auth block to pull anonymously)`,
  volume_driver: NO_DOCKER_VOLUMES,
  container_exists_attempts: `${RUNC} and creates no Docker containers; ${REMOVE}`,
  group_add: `${RUNC} and adds no supplementary groups; ${REMOVE}`,
};

const MOUNT_FIELDS = ['type', 'source', 'target', 'readonly', 'bind_options', 'tmpfs_options'];
const MOUNT_UNSUPPORTED: Readonly<Record<string, string>> = { volume_options: NO_DOCKER_VOLUMES };

/**
 * The `config` block of the task `r` reads, for a docker or podman task:
 * the command part as TaskSpec.config (command '' when the image's) and
 * the rest as TaskImage. Problems are reported through `r`'s Where.
 */
export function readImageTaskConfig(r: BlockReader, driver: ImageDriver): { config: TaskSpec['config']; image: TaskImage } {
  if (!r.has('config')) r.report('config', `is required for driver = "${driver}": config { image = "…" }`);
  const c = r.block('config', CONFIG_FIELDS, CONFIG_UNSUPPORTED);
  const config: TaskSpec['config'] = { command: c?.string('command', '') ?? '', args: c?.stringList('args') ?? [] };
  const image: TaskImage = { ref: c ? readImageRef(c) : '', forcePull: false, pullTimeout: DEFAULT_IMAGE_PULL_TIMEOUT, mounts: [] };
  if (!c) return { config, image };

  for (const [key, field] of [
    ['cap_add', 'capAdd'],
    ['cap_drop', 'capDrop'],
  ] as const) {
    if (c.has(key)) config[field] = readCapabilities(c, key);
  }
  if (c.has('network_mode')) {
    const mode = c.raw('network_mode');
    if (mode === 'host' || mode === 'none') config.networkMode = mode;
    else
      c.report(
        'network_mode',
        `${JSON.stringify(mode)} is not supported: ${RUNC}; use "host" (the host's network) or "none" (a loopback of the task's own)`,
      );
  }

  const entrypoint = c.stringList('entrypoint');
  // Nomad passes an empty list on as none: the image's entrypoint stays.
  if (entrypoint.length > 0) image.entrypoint = entrypoint;
  if (c.has('work_dir')) {
    const workDir = c.string('work_dir', '');
    if (!isContainerPath(workDir))
      c.report('work_dir', `must be an absolute path in the image, like "/app" (got ${JSON.stringify(workDir)})`);
    else image.workDir = normalisePath(workDir);
  }
  if (c.bool('privileged', false)) {
    if (r.has('csi_plugin')) image.privileged = true;
    else
      c.report(
        'privileged',
        'is only for a CSI plugin task (one with a csi_plugin block), which needs it to mount volumes; any other task runs unprivileged: remove it, or ask for what the task needs with cap_add',
      );
  }
  for (const [key, field] of [
    ['ipc_mode', 'ipcHost'],
    ['pid_mode', 'pidHost'],
  ] as const) {
    if (!c.has(key)) continue;
    if (c.raw(key) !== 'host')
      c.report(key, `may only be "host" (got ${JSON.stringify(c.raw(key))}); leave it out for the task's own namespace`);
    // Root in the host's pid namespace can signal the agent, in its ipc namespace reach root's shared memory: as privileged, a CSI plugin's only.
    else if (r.has('csi_plugin')) image[field] = true;
    else
      c.report(
        key,
        `= "host" is only for a CSI plugin task (one with a csi_plugin block), on an agent that allows privileged tasks: it gives the task the host's ${key === 'pid_mode' ? 'processes, this agent among them' : 'shared memory and message queues'}; remove it`,
      );
  }

  image.mounts = readMounts(c);

  const a = c.block('auth', ['username', 'password', 'server_address'], {
    email: `registries do not use it; ${REMOVE}`,
  });
  if (a) {
    const auth: NonNullable<TaskImage['auth']> = {};
    const username = a.string('username');
    const password = a.string('password');
    const serverAddress = a.string('server_address');
    if (username !== undefined) auth.username = username;
    if (password !== undefined) auth.password = password;
    if (serverAddress !== undefined) auth.serverAddress = serverAddress;
    image.auth = auth;
  }
  image.forcePull = c.bool('force_pull', false);
  image.pullTimeout = c.duration('image_pull_timeout', DEFAULT_IMAGE_PULL_TIMEOUT);
  if (image.pullTimeout <= 0) c.report('image_pull_timeout', `must be positive (got ${formatDuration(image.pullTimeout)})`);
  if (c.has('labels')) image.labels = c.stringMap('labels');
  return { config, image };
}

/**
 * `image`: a reference Docker would take, or an archive on the node
 * (`oci-archive:/abs/path.tar[:ref]`, `docker-archive:/abs/path.tar[:name:tag]`,
 * skopeo's transports), checked with the parser the pull and the load use.
 * Whether the archive is there is known only on the node, at the task's start.
 */
function readImageRef(c: BlockReader): string {
  const ref = c.requiredString('image');
  if (ref === '') return ref;
  if (ref.includes('${')) {
    c.report(
      'image',
      `may not use \${…} interpolation (got ${JSON.stringify(ref)}): the image is pulled before the task's variables exist; write the reference out`,
    );
    return ref;
  }
  try {
    parseImageReference(ref);
  } catch (err) {
    if (!(err instanceof ImageReferenceError)) throw err;
    c.report(
      'image',
      `${JSON.stringify(ref)} is not an image reference: ${err.reason}; write it as Docker does, like "busybox:1.36", "quay.io/cephcsi/cephcsi:v3.9.0", "registry.example.com:5000/team/app@sha256:<64 hex>", or an archive on the node, like "oci-archive:/srv/images/app.tar"`,
    );
  }
  return ref;
}

/** cap_add / cap_drop: each a Linux capability, in its one spelling (CAP_…), as for an exec task; cap_drop may be "all" (Docker's: cap_add then adds back). */
function readCapabilities(c: BlockReader, key: 'cap_add' | 'cap_drop'): string[] {
  return c.stringList(key).flatMap((cap, i) => {
    if (key === 'cap_drop' && cap.trim().toUpperCase() === 'ALL') return ['ALL'];
    try {
      return [capabilityName(cap)];
    } catch {
      c.report(
        `${key}[${i}]`,
        cap.trim().toLowerCase() === 'all'
          ? `"${cap}" is not taken here: name each capability (like "net_admin" or "CAP_NET_ADMIN"); a CSI plugin that needs them all runs with privileged = true`
          : `"${cap}" is not a Linux capability (like "net_admin" or "CAP_NET_ADMIN")`,
      );
      return [];
    }
  });
}

/** `mount` blocks (and Nomad's older `mounts` list), then `volumes` entries, in the order written; each target used once. */
function readMounts(c: BlockReader): TaskImageMount[] {
  const mounts: TaskImageMount[] = [];
  const targets = new Set<string>();
  const add = (mount: TaskImageMount | undefined, report: (why: string) => void): void => {
    if (!mount) return;
    if (targets.has(mount.target)) report(`"${mount.target}" is already the target of another mount of this task`);
    targets.add(mount.target);
    mounts.push(mount);
  };
  for (const key of ['mount', 'mounts']) {
    for (const { body, field, at } of c.blockList(key)) {
      const m = new BlockReader(body, c.where.block(field, at), MOUNT_FIELDS, MOUNT_UNSUPPORTED);
      const mount = c.where.guard(() => readMountBlock(m), undefined, at);
      add(mount, (why) => m.report('target', why));
    }
  }
  c.stringList('volumes').forEach((entry, i) => {
    add(readVolumesEntry(c, `volumes[${i}]`, entry), (why) => c.report(`volumes[${i}]`, why));
  });
  return mounts;
}

function readMountBlock(m: BlockReader): TaskImageMount | undefined {
  const type = m.raw('type');
  if (type !== 'bind' && type !== 'tmpfs') {
    const instead = `write type = "bind" (a host path) or type = "tmpfs", or mount a CSI volume with the group's volume block and the task's volume_mount`;
    if (type === undefined)
      m.report('type', `is required: Nomad's default, "volume" (a Docker volume), is not supported (${RUNC}); ${instead}`);
    else if (type === 'volume') m.report('type', `"volume" is not supported: ${RUNC}, so there are no Docker volumes; ${instead}`);
    else m.report('type', `must be "bind" or "tmpfs" (got ${JSON.stringify(type)})`);
    // What else such a mount would need depends on the type meant: not guessed.
    return undefined;
  }
  const target = readTarget(m, 'target', m.requiredString('target'));
  const readOnly = m.bool('readonly', false);
  const mount: TaskImageMount = { type: type === 'tmpfs' ? 'tmpfs' : 'bind', target, readOnly };

  if (type === 'tmpfs') {
    if (m.has('source')) m.report('source', 'is for type = "bind"; a tmpfs has no source: remove it');
    if (m.has('bind_options')) m.report('bind_options', 'is for type = "bind": remove it');
    const t = m.block('tmpfs_options', ['size'], {
      mode: `csiplug makes the tmpfs with runc's default mode; ${REMOVE}`,
    });
    if (t?.has('size')) mount.tmpfsSize = t.int('size', 0, 1);
    return mount;
  }

  if (m.has('tmpfs_options')) m.report('tmpfs_options', 'is for type = "tmpfs": remove it');
  mount.source = readSource(m, 'source', m.requiredString('source'));
  const b = m.block('bind_options', ['propagation']);
  if (b?.has('propagation')) mount.propagation = b.oneOf('propagation', PROPAGATIONS);
  return mount;
}

/** One of `volumes = ["host:container[:ro|:rw]"]`: a bind of a host path (relative: under the task dir). */
function readVolumesEntry(c: BlockReader, key: string, entry: string): TaskImageMount | undefined {
  const parts = entry.split(':');
  if (parts.length < 2 || parts.length > 3) {
    c.report(key, `${JSON.stringify(entry)} is not "host_path:container_path" or "host_path:container_path:ro"`);
    return undefined;
  }
  const [hostPath, containerPath, mode = 'rw'] = parts as [string, string, string?];
  if (mode !== 'ro' && mode !== 'rw') {
    c.report(
      key,
      `${JSON.stringify(entry)}: mode ${JSON.stringify(mode)} is not supported: write ro or rw (for propagation, use a mount block with type = "bind" and bind_options { propagation })`,
    );
    return undefined;
  }
  if (hostPath === '') {
    c.report(key, `${JSON.stringify(entry)} has no host path before the ":"`);
    return undefined;
  }
  return { type: 'bind', source: readSource(c, key, hostPath), target: readTarget(c, key, containerPath), readOnly: mode === 'ro' };
}

/** A path as the task sees it: absolute in the image; `${…}` at its start is left for the task start to resolve. */
function readTarget(r: BlockReader, key: string, raw: string): string {
  if (raw === '') return raw;
  if (raw.includes('\0')) r.report(key, 'may not contain NUL');
  else if (raw.split('/').includes('..')) r.report(key, `${JSON.stringify(raw)} may not contain ".."`);
  else if (!isContainerPath(raw)) r.report(key, `must be an absolute path in the image, like "/etc/plugin" (got ${JSON.stringify(raw)})`);
  else if (path.posix.normalize(raw) === '/') r.report(key, 'may not be "/", the image\'s root');
  return normalisePath(raw);
}

/** A bind's host path: absolute, or relative to the task dir (as Nomad reads it); climbing with ".." only to the alloc's shared ../alloc. */
function readSource(r: BlockReader, key: string, raw: string): string {
  if (raw === '') return raw;
  const parts = raw.split('/');
  const sharedAllocDir = parts[0] === '..' && parts[1] === 'alloc' && !parts.slice(2).includes('..');
  if (raw.includes('\0')) r.report(key, 'may not contain NUL');
  else if (parts.includes('..') && !sharedAllocDir)
    r.report(key, `${JSON.stringify(raw)} may not contain ".." (but as "../alloc/…", the alloc's shared dir); name the host path itself`);
  return normalisePath(raw);
}

/** Without "//", "/./" or a trailing "/" (but "/" itself). */
function normalisePath(p: string): string {
  return path.posix.normalize(p).replace(/(.)\/$/, '$1');
}

function isContainerPath(p: string): boolean {
  return p.startsWith('/') || p.startsWith('${');
}

/** The config block of a docker/podman TaskSpec as readImageTaskConfig reads it back: every field it set, no more. */
export function imageTaskConfigToDocument(task: Pick<TaskSpec, 'config' | 'image'>): ImageTaskConfigDocument {
  const image = task.image!;
  const { config } = task;
  const duration = (ms: number): string | number => (Number.isInteger(ms) ? formatDuration(ms) : ms);
  return {
    image: image.ref,
    ...(config.command !== '' ? { command: config.command } : {}),
    args: [...config.args],
    ...(image.entrypoint ? { entrypoint: [...image.entrypoint] } : {}),
    ...(image.workDir !== undefined ? { work_dir: image.workDir } : {}),
    ...(image.privileged ? { privileged: true } : {}),
    ...(config.networkMode ? { network_mode: config.networkMode } : {}),
    ...(image.ipcHost ? { ipc_mode: 'host' as const } : {}),
    ...(image.pidHost ? { pid_mode: 'host' as const } : {}),
    ...(config.capAdd ? { cap_add: [...config.capAdd] } : {}),
    ...(config.capDrop ? { cap_drop: [...config.capDrop] } : {}),
    // `volumes` entries come back as the bind mounts they are.
    mount: image.mounts.map((m) => ({
      type: m.type,
      ...(m.source !== undefined ? { source: m.source } : {}),
      target: m.target,
      readonly: m.readOnly,
      ...(m.propagation !== undefined ? { bind_options: { propagation: m.propagation } } : {}),
      ...(m.tmpfsSize !== undefined ? { tmpfs_options: { size: m.tmpfsSize } } : {}),
    })),
    ...(image.auth
      ? {
          auth: {
            ...(image.auth.username !== undefined ? { username: image.auth.username } : {}),
            ...(image.auth.password !== undefined ? { password: image.auth.password } : {}),
            ...(image.auth.serverAddress !== undefined ? { server_address: image.auth.serverAddress } : {}),
          },
        }
      : {}),
    force_pull: image.forcePull,
    image_pull_timeout: duration(image.pullTimeout),
    ...(image.labels ? { labels: { ...image.labels } } : {}),
  };
}
