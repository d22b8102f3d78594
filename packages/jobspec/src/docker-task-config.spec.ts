import { ValidationError } from '@csiplug/core';
import { describeChange, diffGroup, isDestructive } from './job-diff';
import type { TaskSpec } from './model';
import {
  DEFAULT_RESTART,
  DEFAULT_KILL_SIGNAL,
  DEFAULT_KILL_TIMEOUT,
  ValidationProblems,
  jobToDocument,
  parseJobspec,
  validateJob,
} from './jobspec';

// A node plugin written for Nomad's docker driver, as ceph-csi's and the
// hostpath example's jobs are: privileged, host paths bound in, ${NOMAD_…}
// in args left for the task start.
const PLUGIN_HCL = `
job "csi-hostpath" {
  type = "system"

  group "csi" {
    volume "scratch" {
      type        = "csi"
      source      = "scratch-1"
      access_mode = "single-node-writer"
    }

    task "plugin" {
      driver = "docker"

      config {
        image = "registry.k8s.io/sig-storage/hostpathplugin:v1.9.0"

        args = [
          "--drivername=csi-hostpath",
          "--v=5",
          "--endpoint=\${CSI_ENDPOINT}",
          "--nodeid=node-\${NOMAD_ALLOC_INDEX}",
        ]

        privileged   = true
        network_mode = "host"
        cap_add      = ["sys_admin"]

        volumes = [
          "/var/lib/csi-hostpath:/csi-data-dir",
          "local/config.json:/etc/hostpath/config.json:ro",
        ]

        mount {
          type     = "bind"
          source   = "/dev"
          target   = "/dev"
          readonly = false
          bind_options {
            propagation = "rshared"
          }
        }

        mount {
          type   = "tmpfs"
          target = "/run/plugin"
          tmpfs_options {
            size = 1048576
          }
        }

        labels {
          team = "storage"
        }
      }

      csi_plugin {
        id        = "hostpath-plugin0"
        type      = "monolith"
        mount_dir = "/csi"
      }

      volume_mount {
        volume           = "scratch"
        destination      = "/scratch"
        propagation_mode = "bidirectional"
      }

      env {
        PLUGIN_LOG = "debug"
      }

      resources {
        cpu    = 256
        memory = 128
      }
    }
  }
}
`;

const TASK = 'job "web" group "app" task "server"';

/** A csi_plugin block: what a task needs for the host's pid or ipc namespace. */
const PLUGIN = { csi_plugin: { id: 'ceph', type: 'node', mount_dir: '/csi' } };

/** A one-task job whose task is a docker task with `config`, `task` merged over it. */
function dockerJob(config: Record<string, unknown>, task: Record<string, unknown> = {}): unknown {
  return { job: { web: { group: { app: { task: { server: { driver: 'docker', config, ...task } } } } } } };
}

function errorOf(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ValidationError) return err;
    throw err;
  }
  throw new Error('expected a ValidationError');
}

const messagesOf = (err: ValidationError): string[] =>
  err instanceof ValidationProblems ? err.problems.map((p) => p.message) : [err.message];

const taskOf = (raw: unknown): TaskSpec => validateJob(raw).groups[0]!.tasks[0]!;

describe("a docker task (Nomad's docker driver config, run on runc)", () => {
  it('reads a CSI plugin job written for the docker driver into the TaskSpec', async () => {
    const spec = await parseJobspec(PLUGIN_HCL, 'plugin.nomad.hcl');
    expect(spec.type).toBe('system');
    const task = spec.groups[0]!.tasks[0]!;
    expect(task).toEqual<TaskSpec>({
      name: 'plugin',
      driver: 'docker',
      isolated: true,
      config: {
        command: '',
        args: ['--drivername=csi-hostpath', '--v=5', '--endpoint=${CSI_ENDPOINT}', '--nodeid=node-${NOMAD_ALLOC_INDEX}'],
        capAdd: ['CAP_SYS_ADMIN'],
        networkMode: 'host',
      },
      image: {
        ref: 'registry.k8s.io/sig-storage/hostpathplugin:v1.9.0',
        forcePull: false,
        pullTimeout: 5 * 60_000,
        privileged: true,
        labels: { team: 'storage' },
        mounts: [
          { type: 'bind', source: '/dev', target: '/dev', readOnly: false, propagation: 'rshared' },
          { type: 'tmpfs', target: '/run/plugin', readOnly: false, tmpfsSize: 1048576 },
          { type: 'bind', source: '/var/lib/csi-hostpath', target: '/csi-data-dir', readOnly: false },
          { type: 'bind', source: 'local/config.json', target: '/etc/hostpath/config.json', readOnly: true },
        ],
      },
      env: { PLUGIN_LOG: 'debug' },
      csiPlugin: expect.objectContaining({ id: 'hostpath-plugin0', type: 'monolith', mountDir: '/csi' }),
      volumeMounts: [{ volume: 'scratch', destination: '/scratch', readOnly: false, propagation: 'bidirectional' }],
      restart: { ...DEFAULT_RESTART },
      killSignal: DEFAULT_KILL_SIGNAL,
      killTimeout: DEFAULT_KILL_TIMEOUT,
      resources: { cpu: 256, memoryMB: 128 },
    });
  });

  it('reads the rest of the subset: command, entrypoint, work_dir, ipc/pid host, auth, force_pull, image_pull_timeout, cap_drop', () => {
    const task = taskOf(
      dockerJob(
        {
          image: 'quay.io/cephcsi/cephcsi:v3.9.0',
          command: '/usr/local/bin/cephcsi',
          args: ['--type=rbd'],
          entrypoint: ['/bin/tini', '--'],
          work_dir: '/srv//app/',
          ipc_mode: 'host',
          pid_mode: 'host',
          cap_drop: ['NET_RAW'],
          auth: { username: 'robot', password: 's3cret', server_address: 'quay.io' },
          force_pull: true,
          image_pull_timeout: '10m',
        },
        PLUGIN,
      ),
    );
    expect(task.config).toEqual({ command: '/usr/local/bin/cephcsi', args: ['--type=rbd'], capDrop: ['CAP_NET_RAW'] });
    expect(task.image).toEqual({
      ref: 'quay.io/cephcsi/cephcsi:v3.9.0',
      entrypoint: ['/bin/tini', '--'],
      workDir: '/srv/app',
      ipcHost: true,
      pidHost: true,
      auth: { username: 'robot', password: 's3cret', serverAddress: 'quay.io' },
      forcePull: true,
      pullTimeout: 10 * 60_000,
      mounts: [],
    });
  });

  it("takes podman as docker, and fills Nomad's defaults (the image's command, 5m pull timeout, no force_pull)", () => {
    const raw = dockerJob({ image: 'busybox' }, { driver: 'podman' });
    const task = taskOf(raw);
    expect(task.driver).toBe('podman');
    expect(task.isolated).toBe(true);
    expect(task.config).toEqual({ command: '', args: [] });
    expect(task.image).toEqual({ ref: 'busybox', forcePull: false, pullTimeout: 300_000, mounts: [] });
  });

  it('takes image = a registry reference by digest', () => {
    const ref = `registry.example.com:5000/team/app@sha256:${'a'.repeat(64)}`;
    expect(taskOf(dockerJob({ image: ref })).image!.ref).toBe(ref);
  });

  it.each([
    'oci-archive:/srv/images/hostpath.tar',
    'oci-archive:/srv/images/hostpath.tar:v1',
    'docker-archive:/srv/images/plugin.tar:team/plugin:1',
  ])('takes image = %j: an archive on the node, loaded without a registry', (ref) => {
    expect(taskOf(dockerJob({ image: ref })).image!.ref).toBe(ref);
  });

  it('takes cap_drop = ["all"] (Docker\'s: every capability dropped, cap_add adds back) and a bind of the alloc\'s ../alloc/', () => {
    const task = taskOf(dockerJob({ image: 'busybox', cap_drop: ['all'], cap_add: ['chown'], volumes: ['../alloc/data:/data'] }));
    expect(task.config).toEqual({ command: '', args: [], capAdd: ['CAP_CHOWN'], capDrop: ['ALL'] });
    expect(task.image!.mounts).toEqual([{ type: 'bind', source: '../alloc/data', target: '/data', readOnly: false }]);
  });

  it('checks the env names, user and volume_mount of an image task as of an exec task', () => {
    const err = errorOf(() =>
      validateJob({
        job: {
          web: {
            group: {
              app: {
                task: {
                  server: {
                    driver: 'docker',
                    config: { image: 'busybox' },
                    env: { 'A-B': 'x' },
                    user: 'a b',
                    volume_mount: { volume: 'none', destination: '/d' },
                  },
                },
              },
            },
          },
        },
      }),
    );
    expect(messagesOf(err)).toEqual([
      `${TASK}: env "A-B" is not a name an isolated (exec, docker or podman) task can be given: letters, digits and _, not starting with a digit`,
      `${TASK}: user "a b" is not a user name (like "nobody" or "www-data") or uid`,
      `${TASK}: volume_mount.volume names "none", which is not a volume of the group (the group has no volume blocks)`,
    ]);
  });
});

describe('what a docker task may not say', () => {
  it.each<[string, Record<string, unknown>, Record<string, unknown>, string]>([
    ['no config', {}, { config: undefined }, `${TASK}: config is required for driver = "docker": config { image = "…" }`],
    ['no image', { args: ['x'] }, {}, `${TASK}: config.image is required`],
    [
      'an image that is no reference',
      { image: 'Busybox:latest!' },
      {},
      `${TASK}: config.image "Busybox:latest!" is not an image reference: tag "latest!" is not valid`,
    ],
    [
      'a relative archive',
      { image: 'oci-archive:images/x.tar' },
      {},
      `${TASK}: config.image "oci-archive:images/x.tar" is not an image reference: oci-archive takes an absolute path`,
    ],
    [
      'an archive path with ..',
      { image: 'docker-archive:/srv/../x.tar' },
      {},
      `${TASK}: config.image "docker-archive:/srv/../x.tar" is not an image reference: the archive path must not contain ".." segments`,
    ],
    ['interpolation in the image', { image: 'app:${NOMAD_META_v}' }, {}, `${TASK}: config.image may not use \${…} interpolation`],
    ['a command list', { image: 'busybox', command: ['sh'] }, {}, `${TASK}: config.command must be a string (got ["sh"])`],
    [
      'a relative work_dir',
      { image: 'busybox', work_dir: 'app' },
      {},
      `${TASK}: config.work_dir must be an absolute path in the image, like "/app" (got "app")`,
    ],
    [
      'privileged without csi_plugin',
      { image: 'busybox', privileged: true },
      {},
      `${TASK}: config.privileged is only for a CSI plugin task (one with a csi_plugin block), which needs it to mount volumes`,
    ],
    [
      'network_mode bridge',
      { image: 'busybox', network_mode: 'bridge' },
      {},
      `${TASK}: config.network_mode "bridge" is not supported: csiplug runs images on runc itself, with no Docker daemon; use "host"`,
    ],
    ['ipc_mode private', { image: 'busybox', ipc_mode: 'private' }, {}, `${TASK}: config.ipc_mode may only be "host" (got "private")`],
    [
      'pid_mode container',
      { image: 'busybox', pid_mode: 'container:x' },
      {},
      `${TASK}: config.pid_mode may only be "host" (got "container:x")`,
    ],
    [
      'an unknown capability',
      { image: 'busybox', cap_add: ['teleport'] },
      {},
      `${TASK}: config.cap_add[0] "teleport" is not a Linux capability`,
    ],
    ['cap_add ALL', { image: 'busybox', cap_add: ['ALL'] }, {}, `${TASK}: config.cap_add[0] "ALL" is not taken here: name each capability`],
    [
      'pid_mode host without csi_plugin',
      { image: 'busybox', pid_mode: 'host' },
      {},
      `${TASK}: config.pid_mode = "host" is only for a CSI plugin task (one with a csi_plugin block), on an agent that allows privileged tasks: it gives the task the host's processes, this agent among them; remove it`,
    ],
    [
      'ipc_mode host without csi_plugin',
      { image: 'busybox', ipc_mode: 'host' },
      {},
      `${TASK}: config.ipc_mode = "host" is only for a CSI plugin task`,
    ],
    [
      'a bind climbing past the alloc dir',
      { image: 'busybox', volumes: ['../alloc/../../etc:/x'] },
      {},
      `${TASK}: config.volumes[0] "../alloc/../../etc" may not contain ".." (but as "../alloc/…", the alloc's shared dir)`,
    ],
    [
      'a mount without type',
      { image: 'busybox', mount: { source: 'x', target: '/x' } },
      {},
      `${TASK}: config.mount.type is required: Nomad's default, "volume" (a Docker volume), is not supported`,
    ],
    [
      'a volume mount',
      { image: 'busybox', mount: { type: 'volume', source: 'x', target: '/x' } },
      {},
      `${TASK}: config.mount.type "volume" is not supported: csiplug runs images on runc itself, with no Docker daemon, so there are no Docker volumes; write type = "bind"`,
    ],
    [
      'an npipe mount',
      { image: 'busybox', mount: { type: 'npipe', source: 'x', target: '/x' } },
      {},
      `${TASK}: config.mount.type must be "bind" or "tmpfs" (got "npipe")`,
    ],
    ['a bind without source', { image: 'busybox', mount: { type: 'bind', target: '/x' } }, {}, `${TASK}: config.mount.source is required`],
    [
      'a bind with ..',
      { image: 'busybox', mount: { type: 'bind', source: '../etc', target: '/x' } },
      {},
      `${TASK}: config.mount.source "../etc" may not contain ".."`,
    ],
    [
      'a relative target',
      { image: 'busybox', mount: { type: 'bind', source: '/x', target: 'x' } },
      {},
      `${TASK}: config.mount.target must be an absolute path in the image`,
    ],
    [
      'a target of /',
      { image: 'busybox', mount: { type: 'bind', source: '/x', target: '/' } },
      {},
      `${TASK}: config.mount.target may not be "/"`,
    ],
    [
      'a tmpfs with a source',
      { image: 'busybox', mount: { type: 'tmpfs', source: '/x', target: '/x' } },
      {},
      `${TASK}: config.mount.source is for type = "bind"; a tmpfs has no source`,
    ],
    [
      'tmpfs_options on a bind',
      { image: 'busybox', mount: { type: 'bind', source: '/x', target: '/x', tmpfs_options: { size: 1 } } },
      {},
      `${TASK}: config.mount.tmpfs_options is for type = "tmpfs"`,
    ],
    [
      'a tmpfs mode',
      { image: 'busybox', mount: { type: 'tmpfs', target: '/x', tmpfs_options: { mode: 448 } } },
      {},
      `${TASK}: config.mount.tmpfs_options.mode is not supported`,
    ],
    [
      'volume_options',
      { image: 'busybox', mount: { type: 'bind', source: '/x', target: '/x', volume_options: {} } },
      {},
      `${TASK}: config.mount.volume_options is not supported`,
    ],
    [
      'an unknown propagation',
      { image: 'busybox', mount: { type: 'bind', source: '/x', target: '/x', bind_options: { propagation: 'bidirectional' } } },
      {},
      `${TASK}: config.mount.bind_options.propagation must be one of rprivate, private, rshared, shared, rslave, slave (got "bidirectional")`,
    ],
    [
      'two mounts on one target',
      { image: 'busybox', volumes: ['/a:/x', '/b:/x/'] },
      {},
      `${TASK}: config.volumes[1] "/x" is already the target of another mount of this task`,
    ],
    [
      'a volumes entry with no target',
      { image: 'busybox', volumes: ['/a'] },
      {},
      `${TASK}: config.volumes[0] "/a" is not "host_path:container_path"`,
    ],
    [
      'a volumes entry mode z',
      { image: 'busybox', volumes: ['/a:/b:z'] },
      {},
      `${TASK}: config.volumes[0] "/a:/b:z": mode "z" is not supported: write ro or rw`,
    ],
    ['a volumes entry with no host path', { image: 'busybox', volumes: [':/b'] }, {}, `${TASK}: config.volumes[0] ":/b" has no host path`],
    [
      'a relative volumes target',
      { image: 'busybox', volumes: ['/a:b'] },
      {},
      `${TASK}: config.volumes[0] must be an absolute path in the image`,
    ],
    [
      'auth email',
      { image: 'busybox', auth: { username: 'u', email: 'u@x' } },
      {},
      `${TASK}: config.auth.email is not supported: registries do not use it`,
    ],
    [
      'a zero pull timeout',
      { image: 'busybox', image_pull_timeout: '0s' },
      {},
      `${TASK}: config.image_pull_timeout must be positive (got 0s)`,
    ],
    ['a numeric label', { image: 'busybox', labels: { a: 1 } }, {}, `${TASK}: config.labels.a must be a string (got 1); quote it`],
    [
      'an unknown field',
      { image: 'busybox', colour: 'blue' },
      {},
      `${TASK}: config.colour is not a known field (known: image, command, args, entrypoint`,
    ],
  ])('refuses %s, naming the field', (_what, config, task, message) => {
    const messages = messagesOf(errorOf(() => validateJob(dockerJob(config, task))));
    expect(messages).toHaveLength(1);
    expect(messages[0]!.startsWith(message)).toBe(true);
  });

  // Every Nomad docker field csiplug does not run, each named with what to do.
  it.each<[string, unknown, string]>([
    ['ports', ['http'], 'use network_mode = "host"'],
    ['port_map', [{ http: 80 }], 'use network_mode = "host"'],
    ['advertise_ipv6_address', true, 'use network_mode = "host"'],
    ['ipv4_address', '10.0.0.2', 'use network_mode = "host"'],
    ['ipv6_address', '::2', 'use network_mode = "host"'],
    ['mac_address', '02:42:ac:11:00:02', 'use network_mode = "host"'],
    ['network_aliases', ['a'], 'use network_mode = "host"'],
    ['dns_servers', ['1.1.1.1'], 'writes no resolv.conf'],
    ['dns_search_domains', ['x'], 'writes no resolv.conf'],
    ['dns_options', ['ndots:1'], 'writes no resolv.conf'],
    ['extra_hosts', ['a:1.2.3.4'], 'writes no resolv.conf'],
    ['hostname', 'h', 'sets no container hostname'],
    ['devices', [{ host_path: '/dev/fuse' }], 'privileged = true'],
    ['sysctl', [{ 'net.core.somaxconn': '16384' }], 'set them on the host'],
    ['ulimit', [{ nofile: '1024' }], 'no rlimits'],
    ['security_opt', ['seccomp=unconfined'], 'confined as an exec task is'],
    ['storage_opt', { size: '1G' }, 'writable layer'],
    ['shm_size', 1024, 'mount { type = "tmpfs" target = "/dev/shm"'],
    ['pids_limit', 10, 'resources block'],
    ['oom_score_adj', 10, 'resources block'],
    ['cpuset_cpus', '0-1', 'resources block'],
    ['cpu_cfs_period', 100000, 'resources block'],
    ['cpu_hard_limit', true, 'cpu shares'],
    ['memory_hard_limit', 512, 'resources { memory } is already a hard limit'],
    ['logging', { type: 'journald' }, "the task's logs block"],
    ['runtime', 'runsc', 'every image on runc'],
    ['isolation', 'process', 'every image on runc'],
    ['userns_mode', 'host', 'own namespaces'],
    ['uts_mode', 'host', 'own namespaces'],
    ['cgroupns', 'host', 'own namespaces'],
    ['readonly_rootfs', true, 'writable layer'],
    ['init', true, 'no init process'],
    ['interactive', true, 'no terminal'],
    ['tty', true, 'no terminal'],
    ['healthchecks', { disable: true }, 'no Docker health checks'],
    ['load', 'image.tar', 'image = "docker-archive:/path/image.tar"'],
    ['auth_soft_fail', true, 'fails the task'],
    ['volume_driver', 'pxd', 'no Docker volumes'],
    ['container_exists_attempts', 5, 'no Docker containers'],
    ['group_add', ['video'], 'no supplementary groups'],
  ])("refuses Nomad's %s, saying what to do", (field, value, advice) => {
    const message = errorOf(() => validateJob(dockerJob({ image: 'busybox', [field]: value }))).message;
    expect(message).toContain(`${TASK}: config.${field} is not supported: `);
    expect(message).toContain(advice);
  });

  it('reports every problem of the config in one pass, in the order written', () => {
    const err = errorOf(() =>
      validateJob(
        dockerJob({
          image: 'UPPER',
          ports: ['http'],
          privileged: true,
          mount: [
            { type: 'volume', target: '/v' },
            { type: 'bind', source: '/x', target: 'rel' },
          ],
          volumes: ['/a:/b:zz'],
        }),
      ),
    );
    expect(messagesOf(err).map((m) => m.slice(TASK.length + 2).split(' ')[0])).toEqual([
      'config.image',
      'config.ports',
      'config.privileged',
      'config.mount[0].type',
      'config.mount[1].target',
      'config.volumes[0]',
    ]);
  });

  it("tells an exec task that privileged and image are the docker driver's", () => {
    const messages = messagesOf(
      errorOf(() => validateJob(dockerJob({ command: 'x', privileged: true, image: 'busybox' }, { driver: 'exec' }))),
    );
    expect(messages).toEqual([
      expect.stringContaining(`${TASK}: config.privileged is not supported: an exec task with a csi_plugin block already runs privileged`),
      expect.stringContaining(`${TASK}: config.image is not supported: images run with driver = "docker"`),
    ]);
  });
});

describe('a docker task through jobToDocument (job history, diffs)', () => {
  it('writes every field back so that the written job reads the same', async () => {
    const spec = await parseJobspec(PLUGIN_HCL, 'plugin.nomad.hcl');
    const doc = jobToDocument(spec);
    const config = doc.job['csi-hostpath']!.group['csi']!.task['plugin']!.config;
    expect(config).toMatchObject({ image: 'registry.k8s.io/sig-storage/hostpathplugin:v1.9.0', privileged: true, network_mode: 'host' });
    expect(config).not.toHaveProperty('command');
    expect(validateJob(JSON.parse(JSON.stringify(doc)))).toEqual(spec);
  });

  it('round-trips the fields the plugin job leaves out', () => {
    const spec = validateJob(
      dockerJob(
        {
          image: 'quay.io/cephcsi/cephcsi:v3.9.0',
          command: '/usr/local/bin/cephcsi',
          args: ['--type=rbd', '--nodeid=${node.unique.name}'],
          entrypoint: ['/bin/tini', '--'],
          work_dir: '/srv',
          ipc_mode: 'host',
          pid_mode: 'host',
          cap_drop: ['net_raw'],
          network_mode: 'none',
          mounts: [{ type: 'bind', source: 'local/ceph', target: '/etc/ceph', readonly: true, bind_options: { propagation: 'rslave' } }],
          auth: { server_address: 'quay.io' },
          force_pull: true,
          image_pull_timeout: 1500,
          labels: {},
        },
        { driver: 'podman', user: 'ceph', logs: { max_files: 3 }, ...PLUGIN },
      ),
    );
    expect(spec.groups[0]!.tasks[0]!.image!.pullTimeout).toBe(1500);
    expect(validateJob(JSON.parse(JSON.stringify(jobToDocument(spec))))).toEqual(spec);
  });

  it('names a new image tag as a destructive change of the task (an upgrade of the plugin)', () => {
    const before = validateJob(dockerJob({ image: 'quay.io/cephcsi/cephcsi:v3.9.0' }));
    const after = validateJob(dockerJob({ image: 'quay.io/cephcsi/cephcsi:v3.10.0' }));
    const changes = diffGroup(after, before.groups[0]!, after.groups[0]!);
    expect(changes.map(describeChange)).toEqual([expect.stringContaining('config.image')]);
    expect(isDestructive(changes)).toBe(true);
  });
});
