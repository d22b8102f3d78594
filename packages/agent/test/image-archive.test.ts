// An image job on a node with no registry: `config { image =
// "oci-archive:/abs/path.tar" }` (an archive skopeo wrote from an OCI layout
// of host binaries) runs through the real agent — the image loaded from the
// file into the agent's store, the task on runc on a root made from it, its
// events naming the load ("Loading Image" from the path, "Loaded" with the
// digest) — and a stop with purge leaves no mount and no container. The
// agent reads an archive (as root) only from its allowed_host_paths
// (volumes { enabled } is not needed for that): an archive outside them,
// or a link from inside them to one outside, is a Setup Failure naming the
// path and the setting to change, and nothing runs.
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { jobToNomadJson, parseJobspec } from '@csiplug/jobspec';
import { buildTestImage, hostBinariesLayer } from '@csiplug/images/testing';
import { AgentHarness, mountsUnder, pollUntil } from './support/agent-process';

jest.setTimeout(300_000);

let dir: string;
let allowed: string;
let archive: string;
let outside: string;
let manifestDigest: string;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-archive-'));
  const layout = path.join(dir, 'oci');
  const built = await buildTestImage(layout, 'app', {
    layers: [await hostBinariesLayer(['/bin/sh', '/bin/sleep'])],
    entrypoint: ['/bin/sleep'],
  });
  manifestDigest = built.manifestDigest;
  allowed = path.join(dir, 'images');
  fs.mkdirSync(allowed);
  archive = path.join(allowed, 'sleeper.tar');
  execFileSync('/usr/bin/skopeo', ['--insecure-policy', 'copy', '--quiet', `oci:${layout}:app`, `oci-archive:${archive}:1`], {
    stdio: 'pipe',
  });
  outside = path.join(dir, 'outside.tar');
  fs.copyFileSync(archive, outside);
  fs.symlinkSync(outside, path.join(allowed, 'link.tar'));
});

/** The agent's config: archives only from `allowed` (volumes stay off). */
const agentConfig = (): string => `plugin "docker" {\n  config {\n    allowed_host_paths = ["${allowed}"]\n  }\n}\n`;

afterAll(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

const job = (image: string): string => `
job "sleeper" {
  group "g" {
    task "t" {
      driver = "docker"
      config {
        image = "${image}"
        args  = ["3600"]
      }
      kill_timeout = "1s"
    }
  }
}`;

describe('an image job from an archive on the node', () => {
  let h: AgentHarness;
  afterEach(async () => {
    if (!h) return;
    const { leftMounts, leftContainers } = await h.cleanup();
    expect(leftMounts).toEqual([]);
    expect(leftContainers).toEqual([]);
  });

  it('runs with no registry, its events name the load, and a stop with purge leaves no mount or container', async () => {
    h = new AgentHarness(agentConfig());
    await h.start();
    try {
      await h.api.runJob(jobToNomadJson(await parseJobspec(job(`oci-archive:${archive}`), 'sleeper.hcl')));
      const alloc = await pollUntil(
        'the task running',
        async () => {
          const a = (await h.api.listAllocs()).find((x) => x.jobId === 'sleeper');
          if (a?.clientStatus === 'failed') throw new Error(`the alloc failed: ${JSON.stringify(a.tasks)}`);
          return a?.clientStatus === 'running' ? a.id : undefined;
        },
        60_000,
      );
      const events = (await h.api.getAlloc(alloc)).tasks.t!.events;
      expect(events.find((e) => e.type === 'Loading Image')?.message).toBe(`Loading image from ${archive}`);
      const loaded = events.find((e) => e.type === 'Loaded');
      expect(loaded?.message).toContain(manifestDigest);
      expect(events.map((e) => e.type)).not.toContain('Pulled');
      const rootfs = path.join(h.dataDir, 'allocs', alloc, 't', 'image', 'rootfs');
      expect(mountsUnder(h.dataDir)).toContain(rootfs);
      expect(fs.existsSync(path.join(rootfs, 'bin', 'sleep'))).toBe(true);
    } finally {
      await h.api.stopJob('sleeper', { purge: true }).catch(() => undefined);
      await pollUntil('every root released', async () => (mountsUnder(h.root).length === 0 ? true : undefined), 60_000);
    }
  });

  it('refuses an archive outside allowed_host_paths, and a link to one: a Setup Failure naming the path and the setting, nothing run', async () => {
    h = new AgentHarness(agentConfig());
    await h.start();
    try {
      for (const [i, [image, real]] of [
        [`oci-archive:${outside}`, outside],
        [`oci-archive:${path.join(allowed, 'link.tar')}`, outside],
      ].entries()) {
        const name = `refused-${i}`;
        await h.api.runJob(jobToNomadJson(await parseJobspec(job(image).replace('job "sleeper"', `job "${name}"`), `${name}.hcl`)));
        const failure = await pollUntil(
          'a Setup Failure',
          async () => {
            const a = (await h.api.listAllocs()).find((x) => x.jobId === name);
            if (!a) return undefined;
            return (await h.api.getAlloc(a.id)).tasks.t?.events.find((e) => e.type === 'Setup Failure');
          },
          60_000,
        );
        expect(failure.message).toContain(`${real} is not within this agent's allowed_host_paths (${allowed})`);
        expect(failure.message).toContain('allowed_host_paths = ["…"]');
        const events = (await h.api.getAlloc((await h.api.listAllocs()).find((x) => x.jobId === name)!.id)).tasks.t!.events;
        expect(events.map((e) => e.type)).not.toContain('Started');
        expect(events.map((e) => e.type)).not.toContain('Loaded');
        await h.api.stopJob(name, { purge: true });
      }
      expect(mountsUnder(h.dataDir)).toEqual([]);
    } finally {
      for (const name of ['refused-0', 'refused-1']) await h.api.stopJob(name, { purge: true }).catch(() => undefined);
    }
  });
});
