import { ALL_CAPS, DEFAULT_TASK_CAPS, ValidationError } from '@csiplug/core';
import { DEFAULT_IMAGE_DRIVER, parseAgentConfig } from './agent-config';

async function errorOf(p: Promise<unknown>): Promise<ValidationError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return err as ValidationError;
  }
  throw new Error('expected a ValidationError');
}

const agent = (plugins: string): Promise<ReturnType<typeof parseAgentConfig> extends Promise<infer T> ? T : never> =>
  parseAgentConfig(`data_dir = "/var/lib/csiplug"\n${plugins}`, 'agent.hcl');

describe('plugin "docker" { config { … } } (Nomad\'s docker plugin block)', () => {
  it('reads every key csiplug runs, as Nomad means it', async () => {
    const config = await agent(`
plugin "docker" {
  config {
    allow_privileged = true
    allow_caps       = ["chown", "CAP_NET_ADMIN", "sys_admin"]

    auth {
      config = "/etc/docker//config.json"
    }

    volumes {
      enabled = true
    }

    allowed_host_paths    = ["/var/lib/csi/", "/dev", "/srv/./plugins", "/dev"]
    pull_activity_timeout = "5m"

    gc {
      image       = false
      image_delay = "1h"
    }
  }
}
`);
    expect(config.docker).toEqual({
      allowPrivileged: true,
      allowCaps: ['CAP_CHOWN', 'CAP_NET_ADMIN', 'CAP_SYS_ADMIN'],
      authConfig: '/etc/docker/config.json',
      volumesEnabled: true,
      allowedHostPaths: ['/var/lib/csi', '/dev', '/srv/plugins'],
      pullActivityTimeout: 5 * 60_000,
      gc: { image: false, imageDelay: 60 * 60_000 },
    });
  });

  it("fills Nomad's defaults: privileged off, volumes off, gc of images after 3m, 2m pull activity timeout", async () => {
    expect((await agent('plugin "docker" {\n  config {\n    allow_privileged = true\n  }\n}\n')).docker).toEqual({
      ...DEFAULT_IMAGE_DRIVER,
      allowPrivileged: true,
    });
    expect((await agent('plugin "docker" {\n}\n')).docker).toEqual(DEFAULT_IMAGE_DRIVER);
    expect(DEFAULT_IMAGE_DRIVER).toEqual({
      allowPrivileged: false,
      allowCaps: [...DEFAULT_TASK_CAPS],
      volumesEnabled: false,
      allowedHostPaths: [],
      pullActivityTimeout: 120_000,
      gc: { image: true, imageDelay: 180_000 },
    });
    // Without the block the agent config says nothing: the drivers take DEFAULT_IMAGE_DRIVER.
    expect(await agent('')).not.toHaveProperty('docker');
  });

  it('takes allow_caps = ["all"] for every capability, as Nomad does', async () => {
    const config = await agent('plugin "docker" {\n  config {\n    allow_caps = ["all"]\n  }\n}\n');
    expect(config.docker!.allowCaps).toEqual([...ALL_CAPS]);
  });

  it('takes allowed_host_paths with volumes off: where image archives may be read from, binds still refused', async () => {
    const config = await agent('plugin "docker" {\n  config {\n    allowed_host_paths = ["/srv/images"]\n  }\n}\n');
    expect(config.docker).toMatchObject({ volumesEnabled: false, allowedHostPaths: ['/srv/images'] });
  });

  it('reads plugin "podman" as the same settings, and both when they agree', async () => {
    const block = (name: string): string => `plugin "${name}" {\n  config {\n    allow_privileged = true\n  }\n}\n`;
    expect((await agent(block('podman'))).docker!.allowPrivileged).toBe(true);
    expect((await agent(block('docker') + block('podman'))).docker!.allowPrivileged).toBe(true);
  });

  it('refuses plugin "docker" and plugin "podman" that disagree, saying so', async () => {
    const err = await errorOf(
      agent(
        'plugin "docker" {\n  config {\n    allow_privileged = true\n  }\n}\nplugin "podman" {\n  config {\n    allow_privileged = false\n  }\n}\n',
      ),
    );
    expect(err.message).toBe(
      'agent.hcl: plugin "podman" says otherwise than plugin "docker": csiplug runs both drivers alike, with one set of settings; make the two config blocks the same, or keep only one',
    );
  });

  it.each<[string, string, string]>([
    [
      'endpoint',
      'endpoint = "unix:///var/run/docker.sock"',
      'config.endpoint is not supported: csiplug runs images on runc itself, with no Docker daemon',
    ],
    ['tls', 'tls {\n cert = "/c"\n}', 'config.tls is not supported: csiplug runs images on runc itself, with no Docker daemon'],
    [
      'extra_labels',
      'extra_labels = ["job_name"]',
      'config.extra_labels is not supported: csiplug runs images on runc itself, with no Docker daemon',
    ],
    [
      'logging',
      'logging {\n type = "journald"\n}',
      'config.logging is not supported: csiplug runs images on runc itself, with no Docker daemon',
    ],
    [
      'infra_image',
      'infra_image = "pause:3.3"',
      'config.infra_image is not supported: csiplug runs images on runc itself, with no Docker daemon',
    ],
    [
      'allow_runtimes',
      'allow_runtimes = ["runc"]',
      'config.allow_runtimes is not supported: csiplug runs images on runc itself, with no Docker daemon',
    ],
    ['nvidia_runtime', 'nvidia_runtime = "nvidia"', 'config.nvidia_runtime is not supported'],
    [
      'image_pull_timeout',
      'image_pull_timeout = "10m"',
      "config.image_pull_timeout is not supported: set image_pull_timeout in each task's config",
    ],
    ['allowed_modes', 'allowed_modes {\n pid = ["host"]\n}', 'config.allowed_modes is not supported'],
    ['auth.helper', 'auth {\n helper = "ecr-login"\n}', 'config.auth.helper is not supported: csiplug runs no credential helpers'],
    [
      'gc.container',
      'gc {\n container = false\n}',
      'config.gc.container is not supported: csiplug runs images on runc itself, with no Docker daemon',
    ],
    ['gc.dangling_containers', 'gc {\n dangling_containers {\n enabled = false\n }\n}', 'config.gc.dangling_containers is not supported'],
    ['volumes.selinuxlabel', 'volumes {\n enabled = true\n selinuxlabel = "z"\n}', 'config.volumes.selinuxlabel is not supported'],
    [
      'a short pull_activity_timeout',
      'pull_activity_timeout = "30s"',
      'config.pull_activity_timeout is less than the minimum, 1m (got 30s), as in Nomad',
    ],
    [
      'a relative auth config',
      'auth {\n config = "docker.json"\n}',
      'config.auth.config must be an absolute path without ".." (got "docker.json")',
    ],
    [
      'a relative allowed host path',
      'volumes {\n enabled = true\n}\nallowed_host_paths = ["srv"]',
      'config.allowed_host_paths[0] must be an absolute path without ".." (got "srv")',
    ],
    [
      'an allowed host path with ..',
      'volumes {\n enabled = true\n}\nallowed_host_paths = ["/srv/../etc"]',
      'config.allowed_host_paths[0] must be an absolute path without ".."',
    ],
    ['an unknown capability', 'allow_caps = ["teleport"]', 'config.allow_caps[0] "teleport" is not a Linux capability'],
    ['a negative image_delay', 'gc {\n image_delay = "-1m"\n}', 'config.gc.image_delay: cannot parse duration "-1m"'],
    ['an unknown key', 'colour = "blue"', 'config.colour is not a known field (known: allow_privileged, allow_caps'],
  ])('refuses %s, naming the key', async (_what, body, message) => {
    const err = await errorOf(agent(`plugin "docker" {\n  config {\n${body}\n  }\n}\n`));
    expect(err.message.startsWith(`agent.hcl: plugin "docker".${message}`)).toBe(true);
  });

  it('says a key written outside the config block goes in it', async () => {
    const err = await errorOf(agent('plugin "docker" {\n  allow_privileged = true\n}\n'));
    expect(err.message).toBe(
      'agent.hcl: plugin "docker".allow_privileged is not supported: it goes in a config block, as in Nomad: plugin "docker" { config { … } }',
    );
  });
});
