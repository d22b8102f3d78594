// An image job (driver docker) updated past the versions the agent keeps:
// each update replaces the alloc, and the stopped allocs of versions older
// than the KEPT_VERSIONS newest are removed for good (JobService's
// forgetOldAlloc). Their image roots must go with them — unmounted before
// the record and the alloc dir go — so that job updates never leave an
// overlay mounted under a forgotten alloc or pin its image against image GC.
import * as fs from 'fs';
import * as path from 'path';
import { KEPT_VERSIONS } from '@csiplug/runner';
import { jobToNomadJson, parseJobspec } from '@csiplug/jobspec';
import { AgentHarness, mountsUnder, pollUntil } from './support/agent-process';
import { TrustedRegistry } from './support/image-registry';

jest.setTimeout(300_000);

let registry: TrustedRegistry;
let image: string;

beforeAll(async () => {
  registry = await TrustedRegistry.start();
  image = await registry.pushBinariesImage('team/sleeper:1', ['/bin/sh', '/bin/sleep'], ['/bin/sleep']);
});

afterAll(async () => {
  await registry?.stop();
});

const job = (version: number): string => `
job "sleeper" {
  update {
    min_healthy_time = "1s"
  }
  group "g" {
    task "t" {
      driver = "docker"
      config {
        image = "${image}"
        args  = ["3600"]
        ${registry.authHcl}
      }
      env {
        VERSION = "${version}"
      }
      kill_timeout = "1s"
    }
  }
}`;

describe('an image job updated past the kept versions', () => {
  let h: AgentHarness;
  afterEach(async () => {
    if (!h) return;
    const { leftMounts, leftContainers } = await h.cleanup();
    expect(leftMounts).toEqual([]);
    expect(leftContainers).toEqual([]);
  });

  it("removes the old versions' allocs with their image roots: no overlay stays under an alloc the agent forgot", async () => {
    h = new AgentHarness('');
    await h.start();
    const allocDirs: string[] = [];
    try {
      // A run keeps the KEPT_VERSIONS newest versions it finds before placing its own: version 0 goes at the run of KEPT_VERSIONS + 1.
      for (let version = 0; version <= KEPT_VERSIONS + 1; version++) {
        await h.api.runJob(jobToNomadJson(await parseJobspec(job(version), 'sleeper.hcl')));
        // The update's alloc runs and is the only one running (the one it replaced stopped).
        const id = await pollUntil(
          `version ${version} running alone`,
          async () => {
            const allocs = await h.api.listAllocs();
            const now = allocs.find((a) => a.jobVersion === version);
            if (now?.clientStatus === 'failed') throw new Error(`version ${version} failed: ${JSON.stringify(now.tasks)}`);
            return now?.clientStatus === 'running' && allocs.filter((a) => a.clientStatus === 'running').length === 1 ? now.id : undefined;
          },
          60_000,
        );
        allocDirs.push(path.join(h.dataDir, 'allocs', id));
      }
      // Version 0's alloc is past the KEPT_VERSIONS newest: it goes, and its root with it.
      const oldest = allocDirs[0]!;
      await pollUntil("the oldest version's alloc dir gone", async () => (!fs.existsSync(oldest) ? true : undefined), 60_000).catch(
        async (err: unknown) => {
          const allocs = (await h.api.listAllocs()).map((a) => [a.id, a.jobVersion, a.clientStatus]);
          throw new Error(`${String(err)}; allocs: ${JSON.stringify(allocs)}; mounts under it: ${JSON.stringify(mountsUnder(oldest))}`);
        },
      );
      expect(mountsUnder(oldest)).toEqual([]);
      // The running version's root stays; none is left under the forgotten alloc.
      const roots = mountsUnder(path.join(h.dataDir, 'allocs')).filter((m) => m.endsWith(path.join('image', 'rootfs')));
      expect(roots).toContain(path.join(allocDirs[KEPT_VERSIONS + 1]!, 't', 'image', 'rootfs'));
      expect(roots.filter((r) => r.startsWith(`${oldest}/`))).toEqual([]);
    } finally {
      // The harness stops jobs without purging, and a stopped image task keeps its root until its alloc goes.
      await h.api.stopJob('sleeper', { purge: true }).catch(() => undefined);
      await pollUntil('every root released', async () => (mountsUnder(h.root).length === 0 ? true : undefined), 60_000);
    }
  });
});
