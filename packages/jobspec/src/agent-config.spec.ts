import { DEFAULT_TIMEOUTS, ValidationError } from '@csiplug/core';
import * as os from 'os';
import { type AgentConfig, DEFAULT_CHROOT_ENV, DEFAULT_PORT, defaultExecConfig, devConfig, parseAgentConfig } from './agent-config';

async function errorOf(p: Promise<unknown>): Promise<ValidationError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return err as ValidationError;
  }
  throw new Error('expected a ValidationError');
}

const FULL_HCL = `
data_dir  = "/var/lib/csiplug/"
bind_addr = "::1"
port      = 0
node_id   = "node-7"
name       = "storage-7"
datacenter = "eu-west"
region     = "eu"
log_level = "debug"

client {
  enabled    = true
  node_class = "storage"
  meta {
    rack = "r12"
    pool = "rbd"
  }
  network_interface = "eth1"
}
log_json = true
stop_tasks_on_exit = true
reconcile_orphans = true
claim_gc_interval = "2m"

state {
  backend = "memory"
}

timeouts {
  plugin_wait_prerun   = "2m"
  plugin_wait_restore  = "10m"
  plugin_wait_postrun  = "1h"
  registry_wait        = "12h"
  plugin_health        = "45s"
  probe                = "2s"
  csi_call             = "30s"
  claim_backoff_base   = "500ms"
  claim_backoff_max    = "30s"
  claim_retry_limit    = "6h"
  unmount_backoff_base = "2s"
  unmount_backoff_max  = "2m"
}

heartbeat {
  strategy             = "fixed"
  interval             = "10s"
  fingerprint_interval = "1m"
  startup_initial      = "10ms"
  startup_max          = "2s"
  jitter               = 0.25
}

acl {
  token = "s3cret"
}

tls {
  cert_file = "/etc/csiplug/cert.pem"
  key_file  = "/etc/csiplug/key.pem"
}

http {
  allowed_hosts   = ["csiplug.example", "10.0.0.7"]
  allowed_origins = ["https://ui.example:8443"]
}

limits {
  http_max_conns            = 64
  http_max_conns_per_client = 8
  http_idle_timeout         = "10s"
  max_allocs_per_job        = 50
}

plugin "exec" {
  chroot_env       = { "/opt/plugin" = "/srv/plugin-code" }
  allow_caps       = ["chown", "CAP_SYS_ADMIN"]
  allow_privileged = false
  allowed_users    = ["nobody", "www-data"]
}

plugin "raw_exec" {
  config {
    enabled = true
  }
}
`;

const FULL: AgentConfig = {
  dev: false,
  dataDir: '/var/lib/csiplug',
  bindAddr: '::1',
  port: 0,
  nodeId: 'node-7',
  state: { backend: 'memory' },
  timeouts: {
    pluginWaitPrerun: 120_000,
    pluginWaitRestore: 600_000,
    pluginWaitPostrun: 3_600_000,
    registryWait: 43_200_000,
    pluginHealth: 45_000,
    probe: 2_000,
    csiCall: 30_000,
    claimBackoffBase: 500,
    claimBackoffMax: 30_000,
    claimRetryLimit: 21_600_000,
    unmountBackoffBase: 2_000,
    unmountBackoffMax: 120_000,
  },
  heartbeat: {
    strategy: 'fixed',
    settings: { interval: 10_000, fingerprintInterval: 60_000, startupInitial: 10, startupMax: 2_000, jitter: 0.25 },
  },
  acl: { token: 's3cret' },
  tls: { certFile: '/etc/csiplug/cert.pem', keyFile: '/etc/csiplug/key.pem' },
  http: { allowedHosts: ['csiplug.example', '10.0.0.7'], allowedOrigins: ['https://ui.example:8443'] },
  limits: { httpMaxConns: 64, httpMaxConnsPerClient: 8, httpIdleTimeout: 10_000, maxAllocsPerJob: 50 },
  logLevel: 'debug',
  logJson: true,
  stopTasksOnExit: true,
  reconcileOrphans: true,
  claimGcInterval: 120_000,
  exec: {
    // Its entries replace the defaults, as Nomad's chroot_env.
    chrootEnv: { '/opt/plugin': '/srv/plugin-code' },
    allowCaps: ['CAP_CHOWN', 'CAP_SYS_ADMIN'],
    allowPrivileged: false,
    allowedUsers: ['nobody', 'www-data'],
  },
  rawExec: { enabled: true },
  node: {
    name: 'storage-7',
    datacenter: 'eu-west',
    region: 'eu',
    nodeClass: 'storage',
    meta: { rack: 'r12', pool: 'rbd' },
    networkInterface: 'eth1',
  },
};

describe('parseAgentConfig', () => {
  it('parses every key', async () => {
    expect(await parseAgentConfig(FULL_HCL, 'agent.hcl')).toEqual(FULL);
  });

  it('parses the same config in JSON, natural or hcl2json form, to the same result', async () => {
    const natural = {
      data_dir: '/var/lib/csiplug/',
      bind_addr: '::1',
      port: 0,
      node_id: 'node-7',
      name: 'storage-7',
      datacenter: 'eu-west',
      region: 'eu',
      client: [{ enabled: true, node_class: 'storage', meta: [{ rack: 'r12', pool: 'rbd' }], network_interface: 'eth1' }],
      log_level: 'debug',
      log_json: true,
      stop_tasks_on_exit: true,
      reconcile_orphans: true,
      claim_gc_interval: '2m',
      state: { backend: 'memory' },
      timeouts: {
        plugin_wait_prerun: '2m',
        plugin_wait_restore: '10m',
        plugin_wait_postrun: '1h',
        registry_wait: '12h',
        plugin_health: '45s',
        probe: 2000,
        csi_call: '30s',
        claim_backoff_base: '500ms',
        claim_backoff_max: '30s',
        claim_retry_limit: '6h',
        unmount_backoff_base: '2s',
        unmount_backoff_max: '2m',
      },
      heartbeat: [
        { strategy: 'fixed', interval: '10s', fingerprint_interval: '1m', startup_initial: '10ms', startup_max: '2s', jitter: 0.25 },
      ],
      acl: { token: 's3cret' },
      tls: { cert_file: '/etc/csiplug/cert.pem', key_file: '/etc/csiplug/key.pem' },
      http: { allowed_hosts: ['csiplug.example', '10.0.0.7'], allowed_origins: ['https://ui.example:8443'] },
      limits: [{ http_max_conns: 64, http_max_conns_per_client: 8, http_idle_timeout: '10s', max_allocs_per_job: 50 }],
      plugin: {
        exec: {
          chroot_env: { '/opt/plugin': '/srv/plugin-code' },
          allow_caps: ['chown', 'CAP_SYS_ADMIN'],
          allow_privileged: false,
          allowed_users: ['nobody', 'www-data'],
        },
        raw_exec: [{ config: [{ enabled: true }] }],
      },
    };
    expect(await parseAgentConfig(JSON.stringify(natural), 'agent.json')).toEqual(FULL);
  });

  it('fills defaults around a bare data_dir', async () => {
    const cfg = await parseAgentConfig('data_dir = "/tmp/c"\n', 'agent.hcl');
    expect(cfg).toEqual({
      dev: false,
      dataDir: '/tmp/c',
      bindAddr: '127.0.0.1',
      port: DEFAULT_PORT,
      nodeId: os.hostname(),
      state: { backend: 'sqlite' },
      timeouts: { ...DEFAULT_TIMEOUTS },
      heartbeat: { strategy: 'backoff', settings: {} },
      acl: {},
      http: { allowedHosts: [], allowedOrigins: [] },
      limits: { httpMaxConns: 256, httpMaxConnsPerClient: 100, httpIdleTimeout: 30_000, maxAllocsPerJob: 256 },
      logLevel: 'info',
      logJson: false,
      stopTasksOnExit: false,
      reconcileOrphans: false,
      claimGcInterval: 300000,
      exec: defaultExecConfig(),
      rawExec: { enabled: false },
      node: { name: os.hostname(), datacenter: 'dc1', region: 'global', nodeClass: '', meta: {} },
    });
    expect(DEFAULT_PORT).toBe(4747);
  });

  it('in dev mode, needs no data_dir and takes dev defaults, which the file can override', async () => {
    const cfg = await parseAgentConfig('log_level = "warn"\n', 'dev.hcl', { dev: true });
    expect(cfg).toEqual({ ...devConfig(), logLevel: 'warn' });
    const sqlite = await parseAgentConfig('data_dir = "/d"\nstate {\n backend = "sqlite"\n}\n', 'dev.hcl', { dev: true });
    expect(sqlite.state.backend).toBe('sqlite');
    expect(sqlite.dataDir).toBe('/d');
  });

  it('the memory backend stops its tasks on exit by default: nothing of them would be known to the next agent', async () => {
    const cfg = await parseAgentConfig('data_dir = "/d"\nstate {\n backend = "memory"\n}\n', 'agent.hcl');
    expect(cfg.stopTasksOnExit).toBe(true);
    const kept = await parseAgentConfig('data_dir = "/d"\nstate {\n backend = "memory"\n}\nstop_tasks_on_exit = true\n', 'agent.hcl');
    expect(kept.stopTasksOnExit).toBe(true);
    // sqlite keeps them running by default, and may be told either way.
    expect((await parseAgentConfig('data_dir = "/d"\n', 'agent.hcl')).stopTasksOnExit).toBe(false);
    expect((await parseAgentConfig('data_dir = "/d"\nstop_tasks_on_exit = true\n', 'agent.hcl')).stopTasksOnExit).toBe(true);
  });

  it('refuses stop_tasks_on_exit = false with the memory backend, naming both keys and what to use instead', async () => {
    for (const dev of [false, true]) {
      const err = await errorOf(
        parseAgentConfig('data_dir = "/d"\nstop_tasks_on_exit = false\nstate {\n backend = "memory"\n}\n', 'agent.hcl', { dev }),
      );
      expect(err.message).toMatch(/^agent\.hcl: stop_tasks_on_exit may not be false with state \{ backend = "memory" \}: /);
      expect(err.message).toContain(
        'Use state { backend = "sqlite" } to keep tasks running across agent restarts, or stop_tasks_on_exit = true',
      );
      expect(err.field).toBe('stop_tasks_on_exit');
    }
    // With sqlite it is the ordinary choice.
    expect((await parseAgentConfig('data_dir = "/d"\nstop_tasks_on_exit = false\n', 'agent.hcl')).stopTasksOnExit).toBe(false);
  });

  it('reconcile_orphans is off unless set, and must be a bool', async () => {
    expect((await parseAgentConfig('data_dir = "/d"\nreconcile_orphans = true\n', 'agent.hcl')).reconcileOrphans).toBe(true);
    expect((await errorOf(parseAgentConfig('data_dir = "/d"\nreconcile_orphans = "yes"\n', 'agent.hcl'))).message).toBe(
      'agent.hcl: reconcile_orphans must be true or false (got "yes")',
    );
  });

  it('keeps a partial timeouts block over the defaults', async () => {
    const cfg = await parseAgentConfig('data_dir = "/d"\ntimeouts {\n probe = "1s"\n}\n', 'a.hcl');
    expect(cfg.timeouts).toEqual({ ...DEFAULT_TIMEOUTS, probe: 1_000 });
  });

  it.each<[string, string, string]>([
    ['no data_dir', 'port = 1\n', 'agent.hcl: data_dir is required (or run with -dev)'],
    ['a relative data_dir', 'data_dir = "data"\n', 'agent.hcl: data_dir must be an absolute path (got "data")'],
    [
      'an unknown key',
      'data_dir = "/d"\nservr {\n enabled = true\n}\n',
      'agent.hcl: servr is not a known field (known: data_dir, bind_addr, port, node_id, state, timeouts, heartbeat, acl, tls, http, limits, log_level, log_json, stop_tasks_on_exit, reconcile_orphans, claim_gc_interval, plugin, cluster, name, datacenter, region, client)',
    ],
    [
      'a host name as bind_addr',
      'data_dir = "/d"\nbind_addr = "localhost"\n',
      'agent.hcl: bind_addr must be an IP address like 127.0.0.1 (got "localhost")',
    ],
    ['port out of range', 'data_dir = "/d"\nport = 70000\n', 'agent.hcl: port must be between 0 and 65535 (got 70000)'],
    ['port as a string', 'data_dir = "/d"\nport = "80"\n', 'agent.hcl: port must be a whole number (got "80")'],
    [
      'a node_id with a slash',
      'data_dir = "/d"\nnode_id = "a/b"\n',
      'agent.hcl: node_id "a/b" is not allowed: it may not contain "/", "..", or NUL',
    ],
    [
      'a bad backend',
      'data_dir = "/d"\nstate {\n backend = "bolt"\n}\n',
      'agent.hcl: state.backend must be one of sqlite, memory (got "bolt")',
    ],
    ['an unknown state key', 'data_dir = "/d"\nstate {\n path = "x"\n}\n', 'agent.hcl: state.path is not a known field (known: backend)'],
    [
      'a bad duration',
      'data_dir = "/d"\ntimeouts {\n probe = "5 seconds"\n}\n',
      'agent.hcl: timeouts.probe: cannot parse duration "5 seconds"; use a number with a unit, like "250ms", "30s", "1m" or "24h"',
    ],
    [
      'an unknown timeout',
      'data_dir = "/d"\ntimeouts {\n plugin_wait = "1m"\n}\n',
      'agent.hcl: timeouts.plugin_wait is not a known field (known: plugin_wait_prerun, plugin_wait_restore, plugin_wait_postrun, registry_wait, plugin_health, probe, csi_call, claim_backoff_base, claim_backoff_max, claim_retry_limit, unmount_backoff_base, unmount_backoff_max)',
    ],
    [
      'claim backoff base over max',
      'data_dir = "/d"\ntimeouts {\n claim_backoff_base = "2m"\n}\n',
      'agent.hcl: timeouts.claim_backoff_base must not exceed claim_backoff_max',
    ],
    [
      'unmount backoff base over max',
      'data_dir = "/d"\ntimeouts {\n unmount_backoff_max = "10ms"\n}\n',
      'agent.hcl: timeouts.unmount_backoff_base must not exceed unmount_backoff_max',
    ],
    [
      'a bad strategy',
      'data_dir = "/d"\nheartbeat {\n strategy = "random"\n}\n',
      'agent.hcl: heartbeat.strategy must be one of fixed, backoff (got "random")',
    ],
    ['jitter over 1', 'data_dir = "/d"\nheartbeat {\n jitter = 2\n}\n', 'agent.hcl: heartbeat.jitter must be between 0 and 1 (got 2)'],
    ['a zero interval', 'data_dir = "/d"\nheartbeat {\n interval = "0s"\n}\n', 'agent.hcl: heartbeat.interval must be positive'],
    [
      'startup_initial over startup_max',
      'data_dir = "/d"\nheartbeat {\n startup_initial = "10s"\n startup_max = "1s"\n}\n',
      'agent.hcl: heartbeat.startup_initial must not exceed startup_max',
    ],
    [
      'a bad heartbeat duration',
      'data_dir = "/d"\nheartbeat {\n startup_max = "soon"\n}\n',
      'agent.hcl: heartbeat.startup_max: cannot parse duration "soon"; use a number with a unit, like "250ms", "30s", "1m" or "24h"',
    ],
    ['an empty token', 'data_dir = "/d"\nacl {\n token = ""\n}\n', 'agent.hcl: acl.token may not be empty; leave it out to turn ACLs off'],
    [
      'a bad log level',
      'data_dir = "/d"\nlog_level = "verbose"\n',
      'agent.hcl: log_level must be one of trace, debug, info, warn, error (got "verbose")',
    ],
    [
      'a public bind_addr without a token or TLS',
      'data_dir = "/d"\nbind_addr = "0.0.0.0"\n',
      "agent.hcl: bind_addr 0.0.0.0 is reachable from other machines, and the API starts processes as this agent's user: it needs an ACL token (acl { token }) and TLS (tls { cert_file, key_file }); or bind to 127.0.0.1, or set acl { insecure_allow_public = true } to serve it anyway",
    ],
    [
      'a public bind_addr with a token but no TLS',
      'data_dir = "/d"\nbind_addr = "10.1.2.3"\nacl {\n token = "t"\n}\n',
      "agent.hcl: bind_addr 10.1.2.3 is reachable from other machines, and the API starts processes as this agent's user: it needs TLS (tls { cert_file, key_file }); or bind to 127.0.0.1, or set acl { insecure_allow_public = true } to serve it anyway",
    ],
    [
      'a relative cert_file',
      'data_dir = "/d"\ntls {\n cert_file = "c.pem"\n key_file = "/k.pem"\n}\n',
      'agent.hcl: tls.cert_file must be an absolute path (got "c.pem")',
    ],
    ['a tls block without key_file', 'data_dir = "/d"\ntls {\n cert_file = "/c.pem"\n}\n', 'agent.hcl: tls.key_file is required'],
    [
      'an allowed host with a scheme',
      'data_dir = "/d"\nhttp {\n allowed_hosts = ["http://x.example"]\n}\n',
      'agent.hcl: http.allowed_hosts "http://x.example" is not a host name or IP address (no scheme, port or path: like "csiplug.example")',
    ],
    [
      'an allowed origin with a path',
      'data_dir = "/d"\nhttp {\n allowed_origins = ["https://ui.example/"]\n}\n',
      'agent.hcl: http.allowed_origins "https://ui.example/" is not an origin like "https://ui.example:8443" (scheme, host and port only, no trailing slash)',
    ],
    [
      'zero connections',
      'data_dir = "/d"\nlimits {\n http_max_conns = 0\n}\n',
      'agent.hcl: limits.http_max_conns must be between 1 and 1000000 (got 0)',
    ],
    [
      'a zero idle timeout',
      'data_dir = "/d"\nlimits {\n http_idle_timeout = "0s"\n}\n',
      'agent.hcl: limits.http_idle_timeout must be positive',
    ],
    [
      'stop_tasks_on_exit as a string',
      'data_dir = "/d"\nstop_tasks_on_exit = "yes"\n',
      'agent.hcl: stop_tasks_on_exit must be true or false (got "yes")',
    ],
    [
      'a plugin block of an unknown driver',
      'data_dir = "/d"\nplugin "java" {\n}\n',
      'agent.hcl: plugin "java" is not a task driver of this agent (known: "exec", "raw_exec", "docker", "podman")',
    ],
    [
      'raw_exec enabled outside its config block',
      'data_dir = "/d"\nplugin "raw_exec" {\n  enabled = true\n}\n',
      'agent.hcl: plugin "raw_exec".enabled is not supported: it goes in a config block, as in Nomad: plugin "raw_exec" { config { enabled = true } }',
    ],
    [
      'raw_exec enabled as a string',
      'data_dir = "/d"\nplugin "raw_exec" {\n  config {\n    enabled = "yes"\n  }\n}\n',
      'agent.hcl: plugin "raw_exec".config.enabled must be true or false (got "yes")',
    ],
    [
      'a relative chroot_env host path',
      'data_dir = "/d"\nplugin "exec" {\n  chroot_env = { "opt" = "/opt" }\n}\n',
      'agent.hcl: plugin "exec".chroot_env "opt" = "/opt": its host path (the key) must be an absolute path without ".."',
    ],
    [
      'a chroot_env task path with ..',
      'data_dir = "/d"\nplugin "exec" {\n  chroot_env = { "/opt" = "/srv/../etc" }\n}\n',
      'agent.hcl: plugin "exec".chroot_env "/opt" = "/srv/../etc": its path in the task (the value) must be an absolute path without ".."',
    ],
    [
      'two chroot_env host paths at one task path',
      'data_dir = "/d"\nplugin "exec" {\n  chroot_env = { "/no/such/a" = "/srv/code", "/no/such/b" = "/srv/code/" }\n}\n',
      'agent.hcl: plugin "exec".chroot_env "/no/such/b" = "/srv/code/": the host path /no/such/a is already shown at /srv/code in the task; a task path takes one host path: remove one of the two',
    ],
    [
      "a chroot_env task path on the task's own dirs",
      'data_dir = "/d"\nclient {\n  chroot_env = { "/no/such/a" = "/local/code" }\n}\n',
      'agent.hcl: client.chroot_env "/no/such/a" = "/local/code": /local/code in the task is the task\'s own (/proc, /dev, /sys, /tmp, /local, /alloc, /secrets, / and what is below them but /tmp): ' +
        'show the host\'s /no/such/a at another path in the task, as "/no/such/a" = "/srv/a"',
    ],
    [
      'chroot_env in both client {} and plugin "exec" {}',
      'data_dir = "/d"\nclient {\n  chroot_env = { "/no/such/a" = "/a" }\n}\nplugin "exec" {\n  chroot_env = { "/no/such/b" = "/b" }\n}\n',
      'agent.hcl: plugin "exec" sets chroot_env, and so does client { chroot_env }: give it in one place, client { chroot_env } as in Nomad (each replaces the defaults whole; the two are not merged)',
    ],
    [
      'a user that is no user name',
      'data_dir = "/d"\nplugin "exec" {\n  allowed_users = ["root", "a b"]\n}\n',
      'agent.hcl: plugin "exec".allowed_users[1] "a b" is not a user name (like "nobody" or "www-data") or uid',
    ],
    [
      'an unknown capability',
      'data_dir = "/d"\nplugin "exec" {\n  allow_caps = ["chown", "fly"]\n}\n',
      'agent.hcl: plugin "exec".allow_caps[1] "fly" is not a Linux capability (like "sys_admin" or "CAP_SYS_ADMIN")',
    ],
  ])('rejects %s', async (_name, text, message) => {
    expect((await errorOf(parseAgentConfig(text, 'agent.hcl'))).message).toBe(message);
  });

  it('reads chroot_env as Nomad does, host path = path in the task; a map with entries replaces the defaults whole, as Nomad', async () => {
    // This spec's own dir exists on every host: never taken for an entry written the old way round.
    const here = __dirname;
    const { exec } = await parseAgentConfig(`data_dir = "/d"\nplugin "exec" {\n  chroot_env = { "${here}/" = "/bin/" }\n}\n`, 'a.hcl');
    expect(exec.chrootEnv).toEqual({ [here]: '/bin' });
    expect((await parseAgentConfig('data_dir = "/d"\n', 'a.hcl')).exec.chrootEnv).toEqual(DEFAULT_CHROOT_ENV);
    expect((await parseAgentConfig('data_dir = "/d"\nclient {\n  chroot_env = {}\n}\n', 'a.hcl')).exec.chrootEnv).toEqual(
      DEFAULT_CHROOT_ENV,
    );
    // A Nomad client block as Nomad's docs write it: chroot_env as a block of "host path" = "path in the task" — HCL 1's
    // map form, read as the map it is (hcl1-maps.ts), as is the same map written as an HCL 2 attribute.
    const nomadBlock = `data_dir = "/d"
client {
  enabled = true
  chroot_env {
    "/bin"   = "/bin"
    "/etc"   = "/etc"
    "/lib"   = "/lib"
    "/lib64" = "/lib64"
    "/usr"   = "/usr"
  }
}
`;
    const asNomadWritesIt = { '/bin': '/bin', '/etc': '/etc', '/lib': '/lib', '/lib64': '/lib64', '/usr': '/usr' };
    expect((await parseAgentConfig(nomadBlock, 'a.hcl')).exec.chrootEnv).toEqual(asNomadWritesIt);
    const nomad = await parseAgentConfig(nomadBlock.replace('chroot_env {', 'chroot_env = {'), 'a.hcl');
    expect(nomad.exec.chrootEnv).toEqual(asNomadWritesIt);
    // Both missing on this host: not the old way round, just absent (left out at the task's start, as a default /lib32 is).
    expect(
      (await parseAgentConfig('data_dir = "/d"\nplugin "exec" {\n  chroot_env = { "/no/a" = "/no/b" }\n}\n', 'a.hcl')).exec.chrootEnv[
        '/no/a'
      ],
    ).toBe('/no/b');
  });

  it('runs raw_exec tasks only when plugin "raw_exec" { config { enabled = true } } says so, as Nomad; -dev enables it, as Nomad\'s dev agent', async () => {
    expect((await parseAgentConfig('data_dir = "/d"\n', 'a.hcl')).rawExec).toEqual({ enabled: false });
    expect((await parseAgentConfig('data_dir = "/d"\nplugin "raw_exec" {\n}\n', 'a.hcl')).rawExec).toEqual({ enabled: false });
    expect(
      (await parseAgentConfig('data_dir = "/d"\nplugin "raw_exec" {\n  config {\n    enabled = false\n  }\n}\n', 'a.hcl')).rawExec,
    ).toEqual({ enabled: false });
    const both = await parseAgentConfig(
      'data_dir = "/d"\nplugin "exec" {\n  allow_privileged = false\n}\nplugin "raw_exec" {\n  config {\n    enabled = true\n  }\n}\n',
      'a.hcl',
    );
    expect(both.rawExec).toEqual({ enabled: true });
    expect(both.exec.allowPrivileged).toBe(false);
    expect(devConfig().rawExec).toEqual({ enabled: true });
    expect((await parseAgentConfig('log_level = "warn"\n', 'dev.hcl', { dev: true })).rawExec).toEqual({ enabled: true });
  });

  it('serves a public bind_addr with a token and TLS, or when the operator insists', async () => {
    const secure = await parseAgentConfig(
      'data_dir = "/d"\nbind_addr = "0.0.0.0"\nacl {\n token = "t"\n}\ntls {\n cert_file = "/c.pem"\n key_file = "/k.pem"\n}\n',
      'a.hcl',
    );
    expect(secure.bindAddr).toBe('0.0.0.0');
    const insecure = await parseAgentConfig('data_dir = "/d"\nbind_addr = "0.0.0.0"\nacl {\n insecure_allow_public = true\n}\n', 'a.hcl');
    expect(insecure.acl).toEqual({ insecureAllowPublic: true });
  });

  it('names the key in ValidationError.field', async () => {
    expect((await errorOf(parseAgentConfig('data_dir = "/d"\ntimeouts {\n probe = "x"\n}\n', 'agent.hcl'))).field).toBe('timeouts.probe');
    expect((await errorOf(parseAgentConfig('data_dir = "/d"\nport = -1\n', 'agent.hcl'))).field).toBe('port');
  });

  it('reports syntax errors with the file name', async () => {
    expect((await errorOf(parseAgentConfig('data_dir = \n', 'agent.hcl'))).message).toMatch(/^agent\.hcl: invalid HCL: /);
    expect((await errorOf(parseAgentConfig('{', 'agent.json'))).message).toMatch(/^agent\.json: invalid JSON: /);
  });
});

describe('the cluster block', () => {
  const parse = (body: string) => parseAgentConfig(`data_dir = "/var/lib/csiplug"\nnode_id = "n1"\n${body}\n`, 'agent.hcl');

  it('reads endpoints, prefix, timings, the node name, class and meta; defaults fill the rest', async () => {
    const c = await parse(`cluster {
  etcd {
    endpoints = ["http://10.0.0.1:2379", "http://10.0.0.2:2379"]
    prefix    = "prod"
  }
  node_class       = "storage"
  meta             = { rack = "r7" }
  heartbeat_ttl    = "15s"
  disconnect_grace = "2m"
}`);
    expect(c.cluster).toEqual({
      etcd: { endpoints: ['http://10.0.0.1:2379', 'http://10.0.0.2:2379'], prefix: 'prod/', dialTimeoutMs: 5_000 },
      nodeName: 'n1',
      nodeClass: 'storage',
      meta: { rack: 'r7' },
      datacenter: 'dc1',
      heartbeatTtlMs: 15_000,
      disconnectGraceMs: 120_000,
    });
    expect((await parse('')).cluster).toBeUndefined();
  });

  it('TLS files: ca needed, cert and key together, absolute, https endpoints only', async () => {
    const c = await parse(
      'cluster {\n  etcd {\n    endpoints = ["https://e:2379"]\n    tls {\n      ca = "/etc/etcd/ca.pem"\n      cert = "/etc/etcd/c.pem"\n      key = "/etc/etcd/k.pem"\n    }\n  }\n}',
    );
    expect(c.cluster!.etcd.tls).toEqual({ caFile: '/etc/etcd/ca.pem', certFile: '/etc/etcd/c.pem', keyFile: '/etc/etcd/k.pem' });
    await expect(
      parse(
        'cluster {\n  etcd {\n    endpoints = ["https://e:2379"]\n    tls {\n      ca = "/ca.pem"\n      cert = "/c.pem"\n    }\n  }\n}',
      ),
    ).rejects.toThrow(/cluster\.etcd\.tls\.key is needed too: a client certificate and its key go together/);
    await expect(
      parse('cluster {\n  etcd {\n    endpoints = ["http://e:2379"]\n    tls {\n      ca = "/ca.pem"\n    }\n  }\n}'),
    ).rejects.toThrow(/endpoints must be https:\/\/ with tls/);
    await expect(parse('cluster {\n  etcd {\n    endpoints = ["https://e:2379"]\n  }\n}')).rejects.toThrow(
      /tls is needed for https:\/\/ endpoints/,
    );
    await expect(parse('cluster {\n  etcd {\n    endpoints = ["https://e:2379", "http://f:2379"]\n  }\n}')).rejects.toThrow(
      /must be all http:\/\/ or all https:\/\//,
    );
    await expect(
      parse('cluster {\n  etcd {\n    endpoints = ["https://e:2379"]\n    tls {\n      ca = "ca.pem"\n    }\n  }\n}'),
    ).rejects.toThrow(/tls\.ca must be an absolute path/);
  });

  it('refuses what cannot work, naming the key', async () => {
    await expect(parse('cluster {\n  node_class = "x"\n}')).rejects.toThrow(/cluster\.etcd is required: cluster mode runs on etcd/);
    await expect(parse('cluster {\n  etcd {\n    endpoints = []\n  }\n}')).rejects.toThrow(
      /cluster\.etcd\.endpoints needs at least one etcd client URL/,
    );
    await expect(parse('cluster {\n  etcd {\n    endpoints = ["10.0.0.1:2379"]\n  }\n}')).rejects.toThrow(
      /endpoints\[0\] "10.0.0.1:2379" is not an etcd client URL/,
    );
    await expect(parse('cluster {\n  etcd {\n    endpoints = ["http://u:p@e:2379"]\n  }\n}')).rejects.toThrow(
      /endpoints\[0\] "http:\/\/u:p@e:2379" is not an etcd client URL/,
    );
    // Written as the client needs it: no trailing slash, the scheme in lower case, etcd's port when none is named.
    expect((await parse('cluster {\n  etcd {\n    endpoints = ["HTTP://E:2379/", "http://f"]\n  }\n}')).cluster!.etcd.endpoints).toEqual([
      'http://e:2379',
      'http://f:2379',
    ]);
    await expect(parse('cluster {\n  etcd {\n    endpoints = ["http://e:2379"]\n  }\n  heartbeat_ttl = "500ms"\n}')).rejects.toThrow(
      /cluster\.heartbeat_ttl must be at least 1s/,
    );
    await expect(parse('cluster {\n  etcd {\n    endpoints = ["http://e:2379"]\n  }\n  node_name = "../x"\n}')).rejects.toThrow(
      /node_name/,
    );
    await expect(parse('cluster {\n  etcd {\n    endpoints = ["http://e:2379"]\n    prefx = "a"\n  }\n}')).rejects.toThrow(/prefx/);
  });

  it('advertise: the API address other agents reach, scheme, host and port only', async () => {
    const withAdvertise = (a: string) => parse(`cluster {\n  etcd {\n    endpoints = ["http://e:2379"]\n  }\n  advertise = "${a}"\n}`);
    expect((await withAdvertise('http://10.0.0.5:4646/')).cluster!.advertise).toBe('http://10.0.0.5:4646');
    expect((await withAdvertise('https://n1.example:4646')).cluster!.advertise).toBe('https://n1.example:4646');
    for (const bad of ['10.0.0.5:4646', 'http://10.0.0.5', 'ftp://h:1', 'http://h:1/api', 'http://u:p@h:1']) {
      await expect(withAdvertise(bad)).rejects.toThrow(/cluster\.advertise must be this agent's API address as other agents reach it/);
    }
  });
});

describe('devConfig', () => {
  it('uses a per-process temp data dir, in-memory state, and stops tasks on exit', () => {
    const cfg = devConfig();
    expect(cfg.dev).toBe(true);
    expect(cfg.dataDir.startsWith(os.tmpdir())).toBe(true);
    expect(cfg.dataDir).toContain(String(process.pid));
    expect(cfg.state.backend).toBe('memory');
    expect(cfg.stopTasksOnExit).toBe(true);
    expect(cfg.timeouts).toEqual(DEFAULT_TIMEOUTS);
    expect(cfg.bindAddr).toBe('127.0.0.1');
  });
});
