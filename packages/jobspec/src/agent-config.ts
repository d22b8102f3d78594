// The agent's config file (HCL or JSON): where it keeps its data, where it
// listens, which state backend and policies it binds, and their numbers.
//
// The memory state backend keeps nothing across a restart, so an agent on it
// stops its tasks when it exits (stop_tasks_on_exit defaults to true there):
// tasks and mounts left running would be invisible to the next agent. An
// explicit `stop_tasks_on_exit = false` with it is refused at load.
import {
  DEFAULT_CLUSTER_TIMINGS,
  DEFAULT_TIMEOUTS,
  DEFAULT_TASK_CAPS,
  type HeartbeatSettings,
  type LogLevel,
  type TimeoutSettings,
  assertPathSafeId,
  capabilityName,
  normaliseEndpoint,
  type ClusterOptions,
  type EtcdTls,
} from '@csiplug/core';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';
import { publicBindProblem, validAllowedHost, validAllowedOrigin } from './api-access';
import { chosenChrootEnv, readChrootEnv } from './chroot-env';
import { BlockReader, Where, loadDocument, withPrefix } from './document';
import { type ImageDriverConfig, readImageDriverPlugin, sameImageDriverConfig } from './image-driver-config';
import { DEFAULT_DATACENTER, DEFAULT_REGION } from './node-attributes';
import { NODE_CONFIG_KEYS, readNodeConfig, type NodeConfig } from './node-config';

export { DEFAULT_IMAGE_DRIVER, MIN_PULL_ACTIVITY_TIMEOUT, type ImageDriverConfig } from './image-driver-config';

export const DEFAULT_BIND_ADDR = '127.0.0.1';
/** Not Nomad's 4646, so both can run on one machine. */
export const DEFAULT_PORT = 4747;
export const LOG_LEVELS: readonly LogLevel[] = ['trace', 'debug', 'info', 'warn', 'error'];

export type StateBackend = 'sqlite' | 'memory';
export type HeartbeatStrategyName = 'fixed' | 'backoff';

export interface AgentConfig {
  /** Started with -dev: throwaway data dir, in-memory state. */
  dev: boolean;
  /** Absolute path; holds state.db, plugin sockets, mounts and task dirs. */
  dataDir: string;
  bindAddr: string;
  /** 0 = any free port. */
  port: number;
  /** Defaults to the host name. Reported to plugins as their node id. */
  nodeId: string;
  state: { backend: StateBackend };
  /** Every TimeoutPolicy number, defaults filled in (ms). */
  timeouts: TimeoutSettings;
  /** `settings` holds only what the file set: each strategy has its own defaults (fixed: no jitter). */
  heartbeat: { strategy: HeartbeatStrategyName; settings: Partial<HeartbeatSettings> };
  /** When set, HTTP API calls must carry this token. `insecureAllowPublic` lets a non-loopback bind_addr go without token or TLS. */
  acl: { token?: string; insecureAllowPublic?: boolean };
  /** Serve the API over HTTPS with this certificate and key (PEM). */
  tls?: { certFile: string; keyFile: string };
  /** Who may call the API besides this agent's own address: extra Host names and page origins. */
  http: { allowedHosts: string[]; allowedOrigins: string[] };
  /** Caps that keep a flood or a huge job from taking the agent down. */
  limits: AgentLimits;
  logLevel: LogLevel;
  /** One JSON object per log line (log_json = true); else lines for people (the default). */
  logJson: boolean;
  /** Stop every task when the agent exits (default: leave them running, to re-attach later; always with the memory backend). */
  stopTasksOnExit: boolean;
  /** At start, clean up what the state does not know: orphan executors and tasks, mounts and alloc dirs (default: only warn). */
  reconcileOrphans: boolean;
  /** ms between two sweeps releasing the claims of allocs this node no longer has. */
  claimGcInterval: number;
  /** The `exec` driver (isolated tasks on runc): `plugin "exec" { … }`. */
  exec: ExecDriverConfig;
  /**
   * The `raw_exec` driver (host processes as the agent's user): `plugin
   * "raw_exec" { config { enabled = true } }`, as Nomad's. Off unless the
   * config enables it (on with -dev, as Nomad's dev mode has it).
   */
  rawExec: RawExecDriverConfig;
  /** The image drivers (`docker`, `podman`: OCI images on runc): `plugin "docker" { config { … } }`, as Nomad's docker plugin block; absent: the defaults (DEFAULT_IMAGE_DRIVER). */
  docker?: ImageDriverConfig;
  /** Cluster mode on etcd (`cluster { … }`); absent: one node on its own, as always. */
  cluster?: ClusterOptions;
  /** The node as Nomad's agent config says it: `name`, `datacenter`, `region`, `client { node_class meta network_interface }` (node-config.ts). */
  node: NodeConfig;
}

/** `plugin "exec" { chroot_env, allow_caps, allow_privileged, allowed_users }`, as Nomad's exec driver plugin block. */
export interface ExecDriverConfig {
  /**
   * Host dirs an isolated task sees read-only: host path → path in the task,
   * as Nomad's chroot_env — `client { chroot_env }` (or csiplug's `plugin
   * "exec" { chroot_env }`) when it has entries, which replace the defaults
   * whole, as in Nomad; else DEFAULT_CHROOT_ENV (chroot-env.ts).
   */
  chrootEnv: Record<string, string>;
  /** Capabilities a task's cap_add may ask for (full names, CAP_…). */
  allowCaps: string[];
  /** Whether a task with a csi_plugin block may run privileged (every capability, the host's /dev); only such tasks ever are. */
  allowPrivileged: boolean;
  /**
   * The users a task's `user` may name (csiplug's own setting; Nomad has a
   * client-wide `user.denylist`, default root). Absent: any user of this
   * host but root (uid 0), as Nomad's default denylist. A task without
   * `user` runs as nobody, as in Nomad, whatever this says.
   */
  allowedUsers?: string[];
}

/** `plugin "raw_exec" { config { enabled } }`, as Nomad's raw_exec driver plugin block. */
export interface RawExecDriverConfig {
  /** Whether jobs may run host processes here; without it a raw_exec task is refused. */
  enabled: boolean;
}

/**
 * Host dirs every isolated task sees read-only, where they exist (Nomad's
 * default chroot_env, less what it copies for a full system). Of /etc only
 * what programs need to run, resolve names and users, and check
 * certificates: never the whole of it (shadow, ssh host keys, TLS keys).
 */
export const DEFAULT_CHROOT_ENV: Readonly<Record<string, string>> = Object.freeze({
  '/bin': '/bin',
  '/etc/passwd': '/etc/passwd',
  '/etc/group': '/etc/group',
  '/etc/hosts': '/etc/hosts',
  '/etc/resolv.conf': '/etc/resolv.conf',
  '/etc/nsswitch.conf': '/etc/nsswitch.conf',
  '/etc/localtime': '/etc/localtime',
  '/etc/ld.so.cache': '/etc/ld.so.cache',
  '/etc/ld.so.conf': '/etc/ld.so.conf',
  '/etc/ld.so.conf.d': '/etc/ld.so.conf.d',
  // Debian's alternatives: /usr/bin/awk and others are links through here.
  '/etc/alternatives': '/etc/alternatives',
  // Certificates only: /etc/ssl/private holds keys.
  '/etc/ssl/certs': '/etc/ssl/certs',
  '/etc/pki/tls/certs': '/etc/pki/tls/certs',
  '/etc/pki/ca-trust': '/etc/pki/ca-trust',
  '/lib': '/lib',
  '/lib32': '/lib32',
  '/lib64': '/lib64',
  '/sbin': '/sbin',
  '/usr': '/usr',
});

export interface AgentLimits {
  /** HTTP connections held at once (all clients). */
  httpMaxConns: number;
  /** HTTP connections held at once from one client address. */
  httpMaxConnsPerClient: number;
  /** ms a connection may sit with no request in progress. */
  httpIdleTimeout: number;
  /** Allocs one job may ask for (the sum of its groups' counts). */
  maxAllocsPerJob: number;
}

export const DEFAULT_LIMITS: Readonly<AgentLimits> = Object.freeze({
  httpMaxConns: 256,
  httpMaxConnsPerClient: 100,
  httpIdleTimeout: 30_000,
  maxAllocsPerJob: 256,
});

export interface ParseAgentConfigOptions {
  /** Running with -dev: data_dir may be left out, and dev defaults apply. */
  dev?: boolean;
}

/** config key (snake_case) → TimeoutSettings key. */
export const TIMEOUT_KEYS: Readonly<Record<string, keyof TimeoutSettings>> = Object.freeze({
  plugin_wait_prerun: 'pluginWaitPrerun',
  plugin_wait_restore: 'pluginWaitRestore',
  plugin_wait_postrun: 'pluginWaitPostrun',
  registry_wait: 'registryWait',
  plugin_health: 'pluginHealth',
  probe: 'probe',
  csi_call: 'csiCall',
  claim_backoff_base: 'claimBackoffBase',
  claim_backoff_max: 'claimBackoffMax',
  claim_retry_limit: 'claimRetryLimit',
  unmount_backoff_base: 'unmountBackoffBase',
  unmount_backoff_max: 'unmountBackoffMax',
});

const HEARTBEAT_DURATIONS: Readonly<Record<string, keyof HeartbeatSettings>> = Object.freeze({
  interval: 'interval',
  fingerprint_interval: 'fingerprintInterval',
  startup_initial: 'startupInitial',
  startup_max: 'startupMax',
});

/** Nomad agent config blocks csiplug has no use for, with what to do instead: a Nomad config gets advice, not "is not a known field". */
const NOMAD_AGENT_UNSUPPORTED: Readonly<Record<string, string>> = {
  server: 'csiplug is the client side only, with no servers: one agent runs alone, several share a cluster { etcd { … } } block; remove it',
  consul: 'csiplug has no Consul integration; remove it',
  vault: 'csiplug has no Vault integration; remove it',
  telemetry: 'csiplug serves its metrics at /v1/metrics (Prometheus text with ?format=prometheus) without a telemetry block; remove it',
  ui: 'csiplug serves its status page at /ui/ on the API port; remove it',
  addresses: 'csiplug listens on one address, bind_addr; remove it',
  ports: 'csiplug serves its API on one port, port; remove it',
  advertise: 'in a cluster, cluster { advertise = "…" } says where other agents reach this one; remove it',
};

const TOP_KEYS = [
  'data_dir',
  'bind_addr',
  'port',
  'node_id',
  'state',
  'timeouts',
  'heartbeat',
  'acl',
  'tls',
  'http',
  'limits',
  'log_level',
  'log_json',
  'stop_tasks_on_exit',
  'reconcile_orphans',
  'claim_gc_interval',
  'plugin',
  'cluster',
  ...NODE_CONFIG_KEYS,
];

/** How often claims of allocs this node no longer has are released (Nomad's volume claim GC), by default. */
export const DEFAULT_CLAIM_GC_INTERVAL_MS = 5 * 60_000;

/**
 * The config of `csiplug agent -dev`: a data dir under the system temp dir
 * (one per process), in-memory state, debug logs, and tasks stopped on exit
 * since nothing survives to re-attach to them.
 */
export function devConfig(): AgentConfig {
  return {
    dev: true,
    dataDir: path.join(os.tmpdir(), `csiplug-dev-${process.pid}`),
    bindAddr: DEFAULT_BIND_ADDR,
    port: DEFAULT_PORT,
    nodeId: defaultNodeId(),
    state: { backend: 'memory' },
    timeouts: { ...DEFAULT_TIMEOUTS },
    heartbeat: { strategy: 'backoff', settings: {} },
    acl: {},
    http: { allowedHosts: [], allowedOrigins: [] },
    limits: { ...DEFAULT_LIMITS },
    logLevel: 'debug',
    logJson: false,
    stopTasksOnExit: true,
    reconcileOrphans: false,
    claimGcInterval: DEFAULT_CLAIM_GC_INTERVAL_MS,
    exec: defaultExecConfig(),
    // Nomad's dev agent enables raw_exec too; the API still serves only root (or a token) on this machine.
    rawExec: { enabled: true },
    node: { name: os.hostname(), datacenter: DEFAULT_DATACENTER, region: DEFAULT_REGION, nodeClass: '', meta: {} },
  };
}

/** The exec driver's settings when the config has no plugin "exec" block. */
export function defaultExecConfig(): ExecDriverConfig {
  return { chrootEnv: { ...DEFAULT_CHROOT_ENV }, allowCaps: [...DEFAULT_TASK_CAPS], allowPrivileged: true };
}

function defaultNodeId(): string {
  const host = os.hostname();
  return host && !host.includes('/') ? host : 'csiplug-node';
}

/** Parses an agent config file (HCL or JSON). Errors start with the file name and name the key. */
export async function parseAgentConfig(text: string, filename: string, options: ParseAgentConfigOptions = {}): Promise<AgentConfig> {
  // Nomad's agent config is HCL 1: its maps may be blocks of quoted keys (hcl1-maps.ts).
  const doc = await loadDocument(text, filename, { hcl1Maps: true });
  return validateAgentConfig(doc, filename, options);
}

/** Checks an already parsed config document; `where` prefixes error messages (usually the file name). */
export function validateAgentConfig(doc: Record<string, unknown>, where: string, options: ParseAgentConfigOptions = {}): AgentConfig {
  const dev = options.dev === true;
  const base: AgentConfig | undefined = dev ? devConfig() : undefined;
  const r: BlockReader = new BlockReader(doc, new Where(where), TOP_KEYS, NOMAD_AGENT_UNSUPPORTED);

  let dataDir = r.string('data_dir');
  if (dataDir === undefined || dataDir === '') {
    if (!base) r.fail('data_dir', 'is required (or run with -dev)');
    dataDir = base.dataDir;
  }
  if (!path.isAbsolute(dataDir)) r.fail('data_dir', `must be an absolute path (got "${dataDir}")`);
  if (dataDir.includes('\0')) r.fail('data_dir', 'may not contain NUL');

  const bindAddr = r.string('bind_addr', DEFAULT_BIND_ADDR);
  if (net.isIP(bindAddr) === 0) r.fail('bind_addr', `must be an IP address like 127.0.0.1 (got "${bindAddr}")`);

  const port = r.int('port', DEFAULT_PORT, 0, 65535);

  const nodeId = r.string('node_id') ?? base?.nodeId ?? defaultNodeId();
  withPrefix(where, () => assertPathSafeId(nodeId, 'node_id'));

  const s = r.block('state', ['backend']);
  const state = {
    backend: s ? s.oneOf('backend', ['sqlite', 'memory'] as const, base?.state.backend ?? 'sqlite') : (base?.state.backend ?? 'sqlite'),
  };

  const timeouts: TimeoutSettings = { ...DEFAULT_TIMEOUTS };
  const t = r.block('timeouts', Object.keys(TIMEOUT_KEYS));
  if (t) for (const [key, setting] of Object.entries(TIMEOUT_KEYS)) timeouts[setting] = t.duration(key, timeouts[setting]);
  if (timeouts.claimBackoffBase > timeouts.claimBackoffMax) t!.fail('claim_backoff_base', 'must not exceed claim_backoff_max');
  if (timeouts.unmountBackoffBase > timeouts.unmountBackoffMax) t!.fail('unmount_backoff_base', 'must not exceed unmount_backoff_max');

  const heartbeat: AgentConfig['heartbeat'] = { strategy: 'backoff', settings: {} };
  const h = r.block('heartbeat', ['strategy', ...Object.keys(HEARTBEAT_DURATIONS), 'jitter']);
  if (h) {
    heartbeat.strategy = h.oneOf('strategy', ['fixed', 'backoff'] as const, 'backoff');
    for (const [key, setting] of Object.entries(HEARTBEAT_DURATIONS)) {
      const ms = h.duration(key);
      if (ms !== undefined) heartbeat.settings[setting] = ms;
    }
    const jitter = h.number('jitter', undefined, 0, 1);
    if (jitter !== undefined) heartbeat.settings.jitter = jitter;
    const { startupInitial, startupMax } = heartbeat.settings;
    if (startupInitial !== undefined && startupMax !== undefined && startupInitial > startupMax)
      h.fail('startup_initial', 'must not exceed startup_max');
    for (const key of ['interval', 'fingerprint_interval'] as const) {
      if (heartbeat.settings[HEARTBEAT_DURATIONS[key]!] === 0) h.fail(key, 'must be positive');
    }
  }

  const a = r.block('acl', ['token', 'insecure_allow_public']);
  const token = a?.string('token');
  if (token === '') a!.fail('token', 'may not be empty; leave it out to turn ACLs off');
  const insecureAllowPublic = a?.bool('insecure_allow_public', false) ?? false;
  const acl: AgentConfig['acl'] = { ...(token !== undefined ? { token } : {}), ...(insecureAllowPublic ? { insecureAllowPublic } : {}) };

  let tlsFiles: AgentConfig['tls'];
  const tb = r.block('tls', ['cert_file', 'key_file']);
  if (tb) {
    const certFile = tb.requiredString('cert_file');
    const keyFile = tb.requiredString('key_file');
    for (const [key, file] of [
      ['cert_file', certFile],
      ['key_file', keyFile],
    ] as const)
      if (!path.isAbsolute(file)) tb.fail(key, `must be an absolute path (got "${file}")`);
    tlsFiles = { certFile, keyFile };
  }

  const hb = r.block('http', ['allowed_hosts', 'allowed_origins']);
  const allowedHosts = hb?.stringList('allowed_hosts') ?? [];
  for (const h of allowedHosts)
    if (!validAllowedHost(h))
      hb!.fail('allowed_hosts', `"${h}" is not a host name or IP address (no scheme, port or path: like "csiplug.example")`);
  const allowedOrigins = hb?.stringList('allowed_origins') ?? [];
  for (const o of allowedOrigins)
    if (!validAllowedOrigin(o))
      hb!.fail('allowed_origins', `"${o}" is not an origin like "https://ui.example:8443" (scheme, host and port only, no trailing slash)`);

  const limits: AgentLimits = { ...DEFAULT_LIMITS };
  const lb = r.block('limits', ['http_max_conns', 'http_max_conns_per_client', 'http_idle_timeout', 'max_allocs_per_job']);
  if (lb) {
    limits.httpMaxConns = lb.int('http_max_conns', DEFAULT_LIMITS.httpMaxConns, 1, 1_000_000);
    limits.httpMaxConnsPerClient = lb.int('http_max_conns_per_client', DEFAULT_LIMITS.httpMaxConnsPerClient, 1, 1_000_000);
    limits.httpIdleTimeout = Math.ceil(lb.duration('http_idle_timeout', DEFAULT_LIMITS.httpIdleTimeout)!);
    if (limits.httpIdleTimeout < 1) lb.fail('http_idle_timeout', 'must be positive');
    limits.maxAllocsPerJob = lb.int('max_allocs_per_job', DEFAULT_LIMITS.maxAllocsPerJob, 1, 100_000);
  }

  const problem = publicBindProblem(bindAddr, { token: token !== undefined, tls: tlsFiles !== undefined, insecureAllowPublic });
  if (problem) r.fail('bind_addr', problem);

  const logLevel = r.oneOf('log_level', LOG_LEVELS, base?.logLevel ?? 'info');
  const logJson = r.bool('log_json', base?.logJson ?? false);
  // The memory backend forgets every task and mount on exit: the tasks must go with it.
  const memory = state.backend === 'memory';
  const stopTasksOnExit = r.bool('stop_tasks_on_exit', memory || (base?.stopTasksOnExit ?? false));
  if (memory && !stopTasksOnExit) {
    r.fail(
      'stop_tasks_on_exit',
      'may not be false with state { backend = "memory" }: that state is gone when the agent exits, so a restarted agent would know none of the tasks and mounts left running. ' +
        'Use state { backend = "sqlite" } to keep tasks running across agent restarts, or stop_tasks_on_exit = true (the memory backend\'s default)',
    );
  }
  const reconcileOrphans = r.bool('reconcile_orphans', false);
  const claimGcInterval = r.duration('claim_gc_interval', base?.claimGcInterval ?? DEFAULT_CLAIM_GC_INTERVAL_MS)!;
  if (claimGcInterval < 1_000) r.fail('claim_gc_interval', `must be at least 1s, got ${claimGcInterval} ms`);
  const { exec, rawExec, docker, execChrootEnv } = readDriverPlugins(r, base?.rawExec.enabled ?? false);
  const cluster = readCluster(r, nodeId);
  let clientChrootEnv: Record<string, string> | undefined;
  const node = readNodeConfig(r, os.hostname(), cluster, (client) => (clientChrootEnv = readChrootEnv(client)));
  exec.chrootEnv = chosenChrootEnv(r, clientChrootEnv, execChrootEnv, DEFAULT_CHROOT_ENV);

  return {
    dev,
    dataDir: path.resolve(dataDir),
    bindAddr,
    port,
    nodeId,
    state,
    timeouts,
    heartbeat,
    acl,
    ...(tlsFiles ? { tls: tlsFiles } : {}),
    http: { allowedHosts, allowedOrigins },
    limits,
    logLevel,
    logJson,
    stopTasksOnExit,
    reconcileOrphans,
    claimGcInterval,
    exec,
    rawExec,
    ...(docker ? { docker } : {}),
    // The cluster's node record says what the node's interpolation says: client {} and cluster {} merged.
    ...(cluster ? { cluster: { ...cluster, nodeClass: node.nodeClass, meta: { ...node.meta }, datacenter: node.datacenter } } : {}),
    node,
  };
}

/**
 * `cluster { etcd { endpoints, prefix, dial_timeout, tls { ca, cert, key } },
 * node_name, node_class, meta, heartbeat_ttl, disconnect_grace, advertise }`.
 */
function readCluster(r: BlockReader, nodeId: string): ClusterOptions | undefined {
  const c = r.block('cluster', ['etcd', 'node_name', 'node_class', 'meta', 'heartbeat_ttl', 'disconnect_grace', 'advertise']);
  if (!c) return undefined;
  const e = c.block('etcd', ['endpoints', 'prefix', 'dial_timeout', 'tls']);
  if (!e) return c.fail('etcd', 'is required: cluster mode runs on etcd (etcd { endpoints = ["http://10.0.0.1:2379", …] })');
  const given = e.stringList('endpoints');
  if (given.length === 0) e.fail('endpoints', 'needs at least one etcd client URL, like "http://10.0.0.1:2379"');
  // As the client will use them: scheme, host and port (a trailing slash would break every call).
  const endpoints = given.map((url, i) => {
    try {
      return normaliseEndpoint(url);
    } catch (err) {
      return e.fail(`endpoints[${i}]`, (err as Error).message);
    }
  });
  const secure = endpoints.filter((u) => u.startsWith('https:')).length;
  if (secure !== 0 && secure !== endpoints.length)
    e.fail('endpoints', 'must be all http:// or all https:// (the etcd client cannot mix them)');
  let prefix = e.string('prefix', DEFAULT_CLUSTER_TIMINGS.prefix);
  if (prefix === '' || /[\0\s]/.test(prefix))
    e.fail('prefix', `must be a non-empty key prefix without spaces, like "csiplug/" (got ${JSON.stringify(prefix)})`);
  if (!prefix.endsWith('/')) prefix += '/';
  // How long one etcd call may take, connecting included (the client tries a failed call once more on another member).
  const dialTimeoutMs = e.duration('dial_timeout', DEFAULT_CLUSTER_TIMINGS.dialTimeoutMs);
  if (dialTimeoutMs < 100) e.fail('dial_timeout', 'must be at least 100ms');
  let tls: EtcdTls | undefined;
  const t = e.block('tls', ['ca', 'cert', 'key']);
  if (t) {
    const caFile = t.requiredString('ca');
    const certFile = t.string('cert');
    const keyFile = t.string('key');
    if ((certFile === undefined) !== (keyFile === undefined))
      t.fail(certFile === undefined ? 'cert' : 'key', 'is needed too: a client certificate and its key go together');
    for (const [key, file] of [
      ['ca', caFile],
      ['cert', certFile],
      ['key', keyFile],
    ] as const)
      if (file !== undefined && !path.isAbsolute(file)) t.fail(key, `must be an absolute path (got "${file}")`);
    tls = { caFile, ...(certFile ? { certFile } : {}), ...(keyFile ? { keyFile } : {}) };
    if (secure === 0) e.fail('endpoints', 'must be https:// with tls { … }');
  } else if (secure > 0) {
    e.fail('tls', 'is needed for https:// endpoints (tls { ca = "/etc/etcd/ca.pem" })');
  }
  const nodeName = c.string('node_name', nodeId);
  withPrefix(c.where.prefix, () => assertPathSafeId(nodeName, 'cluster.node_name'));
  const nodeClass = c.string('node_class', '');
  const meta = c.stringMap('meta');
  const heartbeatTtlMs = c.duration('heartbeat_ttl', DEFAULT_CLUSTER_TIMINGS.heartbeatTtlMs);
  if (heartbeatTtlMs < 1_000) c.fail('heartbeat_ttl', 'must be at least 1s (etcd counts a lease in whole seconds)');
  const disconnectGraceMs = c.duration('disconnect_grace', DEFAULT_CLUSTER_TIMINGS.disconnectGraceMs);
  // The address other agents reach this one's API at (a volume create routed to this node's controller).
  const advertise = c.string('advertise');
  if (advertise !== undefined) {
    let u: URL | undefined;
    try {
      u = new URL(advertise);
    } catch {
      u = undefined;
    }
    if (
      !u ||
      (u.protocol !== 'http:' && u.protocol !== 'https:') ||
      !u.port ||
      (u.pathname !== '/' && u.pathname !== '') ||
      u.search ||
      u.username ||
      u.password
    ) {
      c.fail(
        'advertise',
        `must be this agent's API address as other agents reach it, like "http://10.0.0.5:4646" (scheme, host and port only; got "${advertise}")`,
      );
    }
  }
  return {
    etcd: { endpoints, prefix, dialTimeoutMs, ...(tls ? { tls } : {}) },
    nodeName,
    nodeClass,
    meta,
    heartbeatTtlMs,
    disconnectGraceMs,
    ...(advertise ? { advertise: new URL(advertise).origin } : {}),
  };
}

/**
 * `plugin "exec" { … }`, `plugin "raw_exec" { config { enabled } }` and
 * `plugin "docker"` / `plugin "podman"` (image-driver-config.ts; both given,
 * they must agree); any other plugin name is an error that lists the known ones.
 */
function readDriverPlugins(
  r: BlockReader,
  rawExecDefault: boolean,
): { exec: ExecDriverConfig; rawExec: RawExecDriverConfig; docker?: ImageDriverConfig; execChrootEnv?: Record<string, string> } {
  const exec = defaultExecConfig();
  let execChrootEnv: Record<string, string> | undefined;
  const rawExec: RawExecDriverConfig = { enabled: rawExecDefault };
  const images: [string, ImageDriverConfig][] = [];
  for (const [name, body] of r.labelled('plugin', 'plugin')) {
    if (name === 'docker' || name === 'podman') {
      const where = r.where.block(`plugin "${name}"`);
      const inConfig = `it goes in a config block, as in Nomad: plugin "${name}" { config { … } }`;
      const b = new BlockReader(body, where, ['config'], {
        allow_privileged: inConfig,
        allow_caps: inConfig,
        auth: inConfig,
        volumes: inConfig,
        allowed_host_paths: inConfig,
        pull_activity_timeout: inConfig,
        gc: inConfig,
      });
      images.push([name, readImageDriverPlugin(b)]);
      continue;
    }
    if (name === 'raw_exec') {
      // Nomad's shape: the driver's settings sit in a config block.
      const b = new BlockReader(body, r.where.block(`plugin "${name}"`), ['config'], {
        enabled: 'it goes in a config block, as in Nomad: plugin "raw_exec" { config { enabled = true } }',
      });
      const c = b.block('config', ['enabled']);
      rawExec.enabled = c?.bool('enabled', false) ?? false;
      continue;
    }
    if (name !== 'exec') r.fail(`plugin "${name}"`, 'is not a task driver of this agent (known: "exec", "raw_exec", "docker", "podman")');
    execChrootEnv = readExecPlugin(
      new BlockReader(body, r.where.block(`plugin "${name}"`), ['chroot_env', 'allow_caps', 'allow_privileged', 'allowed_users']),
      exec,
    );
  }
  const [first, second] = images;
  if (first && second && !sameImageDriverConfig(first[1], second[1]))
    r.fail(
      `plugin "${second[0]}"`,
      `says otherwise than plugin "${first[0]}": csiplug runs both drivers alike, with one set of settings; make the two config blocks the same, or keep only one`,
    );
  return { exec, rawExec, ...(first ? { docker: first[1] } : {}), ...(execChrootEnv ? { execChrootEnv } : {}) };
}

/**
 * The body of `plugin "exec" { chroot_env, allow_caps, allow_privileged,
 * allowed_users }`, into `config`; returns its chroot_env (csiplug's place
 * besides Nomad's client { chroot_env }; chroot-env.ts), undefined when it has none.
 */
function readExecPlugin(b: BlockReader, config: ExecDriverConfig): Record<string, string> | undefined {
  const chrootEnv = readChrootEnv(b);
  if (b.has('allow_caps')) {
    config.allowCaps = b.stringList('allow_caps').map((c, i) => {
      try {
        return capabilityName(c);
      } catch {
        return b.fail(`allow_caps[${i}]`, `"${c}" is not a Linux capability (like "sys_admin" or "CAP_SYS_ADMIN")`);
      }
    });
  }
  config.allowPrivileged = b.bool('allow_privileged', true);
  if (b.has('allowed_users')) {
    config.allowedUsers = b.stringList('allowed_users').map((u, i) => {
      if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]*\$?$/.test(u))
        return b.fail(`allowed_users[${i}]`, `"${u}" is not a user name (like "nobody" or "www-data") or uid`);
      return u;
    });
  }
  return chrootEnv;
}
