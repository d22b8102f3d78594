// Isolation of an `exec` task on runc (an OCI runtime from the distribution,
// Debian's `runc` package): what the task sees, as an OCI runtime bundle
// (config.json, runtime-spec 1.0). The task's root is an empty read-only
// directory with host directories bind-mounted into it read-only (Nomad's
// chroot_env idea), the task dir at /local, the alloc's shared dir at
// /alloc, the task's secrets dir at /secrets, a private /tmp, and whatever
// mounts the agent adds (volumes, a CSI plugin's socket and mount dirs). The
// task gets its own mount, pid, ipc and uts namespaces and, unless it is
// given the host's network, a network namespace with loopback only (the
// agent's API on the host's 127.0.0.1 is out of its reach); Nomad's default
// capability set less what it drops plus what it adds, and no new
// privileges. A privileged task (only a CSI plugin, when the agent allows
// it) gets every capability, the host's /dev with every device, and a
// writable /sys.
//
// An image task (driver docker/podman) gets the image's root filesystem
// instead: the task's own writable overlay of the image (made by
// @csiplug/images), no chroot_env, the image's working dir, the process as
// pid 1 as Docker runs it (no init of ours: the image may have no shell), the
// host's /etc/resolv.conf and /etc/hosts read-only when it shares the host's
// network (as Docker binds them), the host's pid or ipc namespace when asked
// (pid_mode/ipc_mode = "host"), and tmpfs mounts of its own; as Docker,
// no_new_privs is off, cap_drop "ALL" leaves only cap_add, and on the host's
// network its hostname is the host's.
//
// The executor runs `runc run` as the task, in the foreground, so runc is
// the process the driver watches (pid and start time, as for any task) and
// it passes signals on to the container and exits with the task's status.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { isAbsolute, join, normalize } from 'node:path';
import {
  ALL_CAPS,
  DEFAULT_TASK_CAPS,
  TASK_ALLOC_DIR,
  TASK_LOCAL_DIR,
  TASK_SECRETS_DIR,
  ValidationError,
  capabilityName,
  isTaskOwnPath,
  taskOwnPathsText,
} from '@csiplug/core';

// The capability vocabulary lives in core (the jobspec reader checks cap_add and
// cap_drop with it); re-exported here, where users of the driver name it.
export { ALL_CAPS, DEFAULT_TASK_CAPS, capabilityName };

/** How a bind mount's later mounts travel: Nomad's propagation_mode. */
export type MountPropagation = 'private' | 'host-to-task' | 'bidirectional';

export interface TaskMount {
  /** `bind` (the default) of `source`, or a fresh `tmpfs` (no source; `size` bytes when given). */
  type?: 'bind' | 'tmpfs';
  /** The host path of a bind; ignored for a tmpfs. */
  source: string;
  /** Where the task sees it (absolute). */
  destination: string;
  readOnly?: boolean;
  /** Default "private". */
  propagation?: MountPropagation;
  /** A tmpfs's size limit in bytes (no limit: the kernel's default, half the memory). */
  tmpfsSize?: number;
}

/** The root of an image task: its own writable overlay of the image, and the working dir the image config resolves to. */
export interface ImageRoot {
  /** Absolute host path of the task's root filesystem (already mounted, writable). */
  rootfs: string;
  /** The process's working dir inside it (absolute). */
  cwd: string;
}

export interface IsolationConfig {
  /** Host dirs mounted read-only into the task's root: host path → path in the task, as Nomad's chroot_env. Unused with `image`. */
  chroot: Readonly<Record<string, string>>;
  /** An image task's root (driver docker/podman): the image instead of the empty root and chroot_env. */
  image?: ImageRoot;
  /** pid_mode = "host" / ipc_mode = "host": the host's pid or ipc namespace instead of the task's own. */
  pidHost?: boolean;
  ipcHost?: boolean;
  /** The task's own dir as the task sees it, at /local (not the task dir itself: that holds the executor's records). */
  localDir: string;
  /** The alloc's shared dir, at /alloc. */
  allocDir: string;
  /** The task's secrets dir, at /secrets (0700, not in the task dir's logs). */
  secretsDir: string;
  /** Further bind mounts (volumes, a CSI plugin's dirs). */
  mounts?: readonly TaskMount[];
  /** Capabilities (names like CAP_SYS_ADMIN or sys_admin) added to, and dropped from, the default set. */
  capAdd?: readonly string[];
  capDrop?: readonly string[];
  /** Every capability and the host's /dev. */
  privileged?: boolean;
  /** cgroup limits, where the machine has cgroups. */
  resources?: { cpuShares?: number; memoryBytes?: number };
  /** `host`: the host's network (no network namespace of its own); `none` (the default): a network namespace with loopback only. */
  network?: 'host' | 'none';
  /** Who the task runs as (the jobspec's `user`, resolved on the host); absent: nobody (65534), or root for a privileged task. */
  user?: TaskUser;
}

/** A task's user as numbers: the kernel knows no names. */
export interface TaskUser {
  uid: number;
  gid: number;
  /** Supplementary groups. */
  additionalGids?: readonly number[];
}

/** Nomad's exec driver runs a task with no `user` as nobody. */
export const NOBODY: TaskUser = Object.freeze({ uid: 65534, gid: 65534 });

/**
 * The capabilities this process may hand on (its bounding set, which the
 * kernel's own list bounds), in ALL_CAPS's order — ALL_CAPS is in the
 * kernel's numeric order, so bit n is ALL_CAPS[n]. A privileged task gets
 * these: asking runc for one the host lacks fails the start ("unable to
 * apply caps").
 */
export function grantableCaps(status = '/proc/self/status'): string[] {
  try {
    const hex = /^CapBnd:\s*([0-9a-f]+)$/m.exec(readFileSync(status, 'utf8'))?.[1];
    if (!hex) return [...ALL_CAPS];
    const bits = BigInt(`0x${hex}`);
    return ALL_CAPS.filter((_, n) => (bits >> BigInt(n)) & 1n);
  } catch {
    return [...ALL_CAPS];
  }
}

/**
 * The task runs as pid 1 of its namespace, where the kernel drops a signal
 * the process has no handler for: a bare `sleep` would ignore the stop's
 * SIGTERM and wait out kill_timeout. So a small init runs first (the
 * chroot's /bin/sh): it starts the task as its child, passes the stop
 * signals on to it, and exits with the task's status (128 + n for a task a
 * signal ended). Left out when the task's root has no /bin/sh.
 */
const FORWARDED = ['TERM', 'INT', 'QUIT', 'HUP', 'USR1', 'USR2', 'WINCH', 'ALRM'];

/** The init script; `launch` is how it starts the task in the background (see taskProcessArgs). */
function initScript(launch: string): string {
  return [
    'c= p=',
    // A signal before the task's pid is known is held (p) and passed on once it is; after, it goes straight to the task.
    ...FORWARDED.map((sig) => `trap 'if [ -n "$c" ]; then kill -${sig} "$c" 2>/dev/null; else p=${sig}; fi' ${sig}`),
    `${launch} & c=$!`,
    '[ -n "$p" ] && kill -$p "$c" 2>/dev/null',
    // wait returns early (128 + n) when a trapped signal arrives: wait again until the task is gone, then exit with its own status.
    'while :; do wait "$c"; r=$?; kill -0 "$c" 2>/dev/null || { wait "$c"; s=$?; [ $s -eq 127 ] && s=$r; exit $s; }; done',
  ].join('\n');
}

/** The init as it runs when env cannot restore SIGINT/SIGQUIT (see taskProcessArgs). */
export const TASK_INIT_SCRIPT = initScript('"$@"');

let envResetsSignals: boolean | undefined;
/**
 * Whether the host's /usr/bin/env takes --default-signal (coreutils 8.31+):
 * a shell starts a background command with SIGINT and SIGQUIT ignored, and a
 * task should get them as a process normally does.
 */
function envCanResetSignals(): boolean {
  if (envResetsSignals === undefined) {
    try {
      execFileSync('/usr/bin/env', ['--default-signal=INT,QUIT', 'true'], { stdio: 'ignore', timeout: 5_000 });
      envResetsSignals = true;
    } catch {
      envResetsSignals = false;
    }
  }
  return envResetsSignals;
}

/** The process args of an isolated task: an image task's as they are (pid 1, as Docker runs it); otherwise under the init when the chroot has a /bin/sh. */
export function isolatedProcessArgs(command: string, args: readonly string[], iso: IsolationConfig): string[] {
  return iso.image ? [command, ...args] : taskProcessArgs(command, args, iso.chroot);
}

/** The host path `chroot` (host path → path in the task, as Nomad's chroot_env) shows at `inTask`; undefined when none is. */
function hostPathShownAt(chroot: Readonly<Record<string, string>>, inTask: string): string | undefined {
  const strip = (p: string) => normalize(p).replace(/\/+$/, '') || '/';
  return Object.entries(chroot).find(([, dest]) => strip(dest) === inTask)?.[0];
}

/**
 * The process args of an exec task: its command under the init when the
 * task's /bin has a sh — whichever host dir the chroot shows at /bin. A
 * chroot with no /bin (chroot_env replaced without one) runs the command as
 * it is, with no init to pass signals on.
 */
export function taskProcessArgs(command: string, args: readonly string[], chroot: Readonly<Record<string, string>>): string[] {
  const bin = hostPathShownAt(chroot, '/bin');
  const hasShell = bin !== undefined && existsSync(join(bin, 'sh'));
  if (!hasShell) return [command, ...args];
  // env --default-signal is probed on this host's /usr/bin/env: only when the task's /usr is this host's /usr.
  const usr = hostPathShownAt(chroot, '/usr');
  const resetSignals = usr !== undefined && normalize(usr).replace(/\/+$/, '') === '/usr' && envCanResetSignals();
  const script = resetSignals ? initScript('/usr/bin/env --default-signal=INT,QUIT -- "$@"') : TASK_INIT_SCRIPT;
  return ['/bin/sh', '-c', script, 'csiplug-init', command, ...args];
}

/** Where the task sees its own dirs (core's vocabulary, which the agent config reader checks chroot_env by too). */
export { TASK_ALLOC_DIR, TASK_LOCAL_DIR, TASK_SECRETS_DIR };

/** An absolute, normalised path with no `..` left in it; throws naming `what`. */
function taskPath(p: string, what: string): string {
  if (typeof p !== 'string' || !isAbsolute(p) || p.includes('\0'))
    throw new ValidationError(`${what}: "${p}" is not an absolute path`, what);
  const n = normalize(p).replace(/\/+$/, '') || '/';
  if (n.split('/').includes('..')) throw new ValidationError(`${what}: "${p}" leaves its root`, what);
  return n;
}

/** `nodev` where a task must not make or use device nodes (its own dirs); a volume may be a block device, so it gets nosuid only. */
function bindOptions(readOnly: boolean, propagation: MountPropagation, nodev = false): string[] {
  const prop = propagation === 'bidirectional' ? 'rshared' : propagation === 'host-to-task' ? 'rslave' : 'rprivate';
  return ['rbind', readOnly ? 'ro' : 'rw', 'nosuid', ...(nodev ? ['nodev'] : []), prop];
}

export interface OciBundle {
  /** The bundle dir: config.json and the (empty) rootfs. */
  dir: string;
  config: Record<string, unknown>;
}

/**
 * The OCI runtime config of an isolated task: `args` run with `env` in
 * /local. Checks every path; throws a ValidationError naming what is wrong.
 */
export function ociConfig(
  task: { hostname: string; args: readonly string[]; env: Readonly<Record<string, string>> },
  iso: IsolationConfig,
): Record<string, unknown> {
  const mounts: Record<string, unknown>[] = [
    { destination: '/proc', type: 'proc', source: 'proc' },
    // A privileged plugin (block devices: loop, iSCSI, NVMe) writes to /sys; every other task reads it.
    { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', iso.privileged ? 'rw' : 'ro'] },
    // An exec task's root is read-only and gets a /tmp of its own; an image's /tmp is the image's, on the task's writable layer, as Docker leaves it.
    ...(iso.image ? [] : [{ destination: '/tmp', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'nodev', 'mode=1777'] }]),
  ];
  if (iso.privileged) {
    mounts.push({ destination: '/dev', type: 'bind', source: '/dev', options: ['rbind', 'rw', 'nosuid', 'rslave'] });
  } else {
    mounts.push(
      { destination: '/dev', type: 'tmpfs', source: 'tmpfs', options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'] },
      {
        destination: '/dev/pts',
        type: 'devpts',
        source: 'devpts',
        options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620'],
      },
      { destination: '/dev/shm', type: 'tmpfs', source: 'shm', options: ['nosuid', 'noexec', 'nodev', 'mode=1777', 'size=65536k'] },
      { destination: '/dev/mqueue', type: 'mqueue', source: 'mqueue', options: ['nosuid', 'noexec', 'nodev'] },
    );
  }
  const taken = new Set<string>();
  const claim = (dest: string, what: string) => {
    if (taken.has(dest)) throw new ValidationError(`${what}: ${dest} is mounted twice`, what);
    taken.add(dest);
  };
  const image = iso.image
    ? { rootfs: taskPath(iso.image.rootfs, 'image root'), cwd: taskPath(iso.image.cwd, 'image work_dir') }
    : undefined;
  // By task path: a dir is mounted before what is shown below it.
  for (const [host, dest] of image ? [] : Object.entries(iso.chroot).sort(([, a], [, b]) => a.localeCompare(b))) {
    const d = taskPath(dest, 'chroot_env');
    const h = taskPath(host, 'chroot_env');
    // Below /tmp is fine (bound after the task's tmpfs, so seen on top of it); on or below the task's other own dirs is not.
    if (isTaskOwnPath(d)) throw new ValidationError(`chroot_env: ${d} is the task's own (${taskOwnPathsText()})`, 'chroot_env');
    // A chroot dir that is not on this machine (/lib32 on a 64-bit-only host) is left out.
    if (!existsSync(h)) continue;
    claim(d, 'chroot_env');
    mounts.push({ destination: d, type: 'bind', source: h, options: bindOptions(true, 'private', true) });
  }
  const own: [string, string][] = [
    [TASK_LOCAL_DIR, iso.localDir],
    [TASK_ALLOC_DIR, iso.allocDir],
    [TASK_SECRETS_DIR, iso.secretsDir],
  ];
  for (const [dest, host] of own) {
    claim(dest, 'task dirs');
    // A setuid file or device node planted here is inert inside (and the host dirs are the task user's alone, 0700).
    mounts.push({ destination: dest, type: 'bind', source: taskPath(host, 'task dirs'), options: bindOptions(false, 'private', true) });
  }
  // On the host's network an image task resolves names as the host does: Docker binds these two files in, read-only.
  if (image && iso.network === 'host') {
    for (const f of ['/etc/resolv.conf', '/etc/hosts']) {
      if (!existsSync(f)) continue;
      claim(f, 'host network files');
      mounts.push({ destination: f, type: 'bind', source: f, options: bindOptions(true, 'private', true) });
    }
  }
  let shared = false;
  let slave = false;
  for (const m of iso.mounts ?? []) {
    const d = taskPath(m.destination, 'mount destination');
    if (d === '/' || ['/proc', '/dev', '/sys'].some((r) => d === r || d.startsWith(`${r}/`)))
      throw new ValidationError(`mount destination ${d} is the task's own`, 'mount destination');
    claim(d, 'mount destination');
    if (m.type === 'tmpfs') {
      if (m.tmpfsSize !== undefined && (!Number.isInteger(m.tmpfsSize) || m.tmpfsSize <= 0))
        throw new ValidationError(`tmpfs mount at ${d}: size ${m.tmpfsSize} is not a positive number of bytes`, 'mount');
      const options = ['nosuid', 'nodev', m.readOnly ? 'ro' : 'rw', 'mode=1777', ...(m.tmpfsSize ? [`size=${m.tmpfsSize}`] : [])];
      mounts.push({ destination: d, type: 'tmpfs', source: 'tmpfs', options });
      continue;
    }
    const propagation = m.propagation ?? 'private';
    if (propagation === 'bidirectional') shared = true;
    if (propagation === 'host-to-task') slave = true;
    mounts.push({
      destination: d,
      type: 'bind',
      source: taskPath(m.source, 'mount source'),
      options: bindOptions(m.readOnly === true, propagation),
    });
  }
  // cap_drop "ALL" (Docker's) drops every default, and cap_add adds back; otherwise cap_drop takes from defaults and cap_add.
  const dropAll = (iso.capDrop ?? []).some((c) => c.trim().toUpperCase() === 'ALL');
  const dropped = dropAll ? [] : (iso.capDrop ?? []).map(capabilityName);
  const caps = iso.privileged
    ? grantableCaps()
    : [...new Set([...(dropAll ? [] : DEFAULT_TASK_CAPS), ...(iso.capAdd ?? []).map(capabilityName)])].filter((c) => !dropped.includes(c));
  const resources: Record<string, unknown> = {};
  // Swap counts against the limit (memsw), as Nomad sets it: a task cannot swap past its memory.
  // (Only where the kernel accounts swap: cgroup v2, or v1 with memsw; else runc could not apply it.)
  const swapAccounted = existsSync('/sys/fs/cgroup/cgroup.controllers') || existsSync('/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes');
  if (iso.resources?.memoryBytes)
    resources['memory'] = { limit: iso.resources.memoryBytes, ...(swapAccounted ? { swap: iso.resources.memoryBytes } : {}) };
  if (iso.resources?.cpuShares) resources['cpu'] = { shares: iso.resources.cpuShares };
  // A privileged plugin may open any device of the host's /dev (a block-device plugin attaches and formats disks);
  // any other task gets runc's default device rules (null, zero, full, random, urandom, tty, ptmx, pts).
  if (iso.privileged) resources['devices'] = [{ allow: true, access: 'rwm' }];
  // Parents before children, whoever asked for them (a volume at /opt must not hide a chroot dir at /opt/plugin); the system mounts stay first.
  const system = new Set(['/proc', '/sys', '/tmp', '/dev', '/dev/pts', '/dev/shm', '/dev/mqueue']);
  const depth = (m: Record<string, unknown>) => String(m['destination']).split('/').length;
  const ordered = [
    ...mounts.filter((m) => system.has(String(m['destination']))),
    ...mounts.filter((m) => !system.has(String(m['destination']))).sort((a, b) => depth(a) - depth(b)),
  ];
  return {
    ociVersion: '1.0.2',
    process: {
      terminal: false,
      user: taskUser(iso),
      args: [...task.args],
      env: Object.entries(task.env).map(([k, v]) => `${k}=${v}`),
      cwd: image ? image.cwd : TASK_LOCAL_DIR,
      capabilities: { bounding: caps, effective: caps, permitted: caps },
      // Docker leaves no_new_privs off (a setuid binary in an image works as it does under Docker); an exec task keeps it.
      noNewPrivileges: !iso.privileged && !image,
    },
    // An image task writes to its own upper layer of the image (the shared layers never see it), as a Docker container does.
    root: image ? { path: image.rootfs, readonly: false } : { path: 'rootfs', readonly: true },
    // On the host's network an image task has the host's name, as under Docker; otherwise its own (the task's name).
    hostname: image && iso.network === 'host' ? hostname() : task.hostname,
    mounts: ordered,
    linux: {
      // Unless it shares the host's network, its own network namespace (loopback only): it never reaches the agent's API on the host's 127.0.0.1.
      namespaces: [
        ...(iso.pidHost ? [] : [{ type: 'pid' }]),
        ...(iso.ipcHost ? [] : [{ type: 'ipc' }]),
        { type: 'uts' },
        { type: 'mount' },
        ...(iso.network === 'host' ? [] : [{ type: 'network' }]),
      ],
      // A bidirectional mount needs the task's mount tree to pass mounts back (shared from the root down); host-to-task needs it to take them in.
      rootfsPropagation: shared ? 'rshared' : slave ? 'rslave' : 'rprivate',
      ...(Object.keys(resources).length ? { resources } : {}),
      ...(iso.privileged
        ? {}
        : {
            maskedPaths: [
              '/proc/acpi',
              '/proc/kcore',
              '/proc/keys',
              '/proc/latency_stats',
              '/proc/timer_list',
              '/proc/timer_stats',
              '/proc/sched_debug',
              '/proc/scsi',
              '/sys/firmware',
            ],
            readonlyPaths: ['/proc/asound', '/proc/bus', '/proc/fs', '/proc/irq', '/proc/sys', '/proc/sysrq-trigger'],
          }),
    },
  };
}

/** The process user of the OCI config: a privileged plugin is root; any other task is its user, or nobody. */
function taskUser(iso: IsolationConfig): Record<string, unknown> {
  const user = iso.user ?? (iso.privileged ? { uid: 0, gid: 0 } : NOBODY);
  for (const id of [user.uid, user.gid, ...(user.additionalGids ?? [])]) {
    if (!Number.isInteger(id) || id < 0 || id > 0xfffffffe) throw new ValidationError(`user: ${id} is not a valid uid or gid`, 'user');
  }
  return { uid: user.uid, gid: user.gid, ...(user.additionalGids?.length ? { additionalGids: [...user.additionalGids] } : {}) };
}

/** Makes the bundle dir with its empty root and returns where config.json goes. */
export function prepareBundle(dir: string): { configPath: string } {
  mkdirSync(join(dir, 'rootfs'), { recursive: true, mode: 0o755 });
  return { configPath: join(dir, 'config.json') };
}
