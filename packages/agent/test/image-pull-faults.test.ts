// Image pulls that fail, through a real agent (issue 27, "Real parts"): a
// `driver = "docker"` job naming an image it cannot have — wrong
// credentials, a missing tag, a blob altered in the registry's own storage
// (a digest mismatch), a registry that accepts and never answers (the job's
// image_pull_timeout), and an image store that fills up mid-pull (the store
// on a small tmpfs of its own, mounted over <data_dir>/images before the
// agent starts; state.db stays on the data dir's own filesystem). Each
// gives its task a Setup Failure event that names the case, the task never
// runs (no container, no root mounted), and the store holds nothing
// half-written: no temp file, no blob whose content is not its digest, no
// half layer, no index entry for the failed image. After the registry is
// fixed (the blob restored) or space returns (the tmpfs grown), a re-run of
// the same job pulls and runs: nothing from the failed pull is in the way.
// `restart { attempts = 0 }` keeps each failure to one pull: a failed pull
// is a failed start under the task's restart policy, as in Nomad.
import { createHash, randomBytes } from 'crypto';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import { createServer, type Server, type Socket } from 'net';
import * as path from 'path';
import type { AllocView } from '@csiplug/api';
import { requireRoot } from '@csiplug/core/testing';
import { containerId } from '@csiplug/driver';
import { buildTestImage, freePort, hostBinariesLayer } from '@csiplug/images/testing';
import { jobToNomadJson, parseJobspec } from '@csiplug/jobspec';
import { AgentHarness, containersUnder, mountsUnder, pollUntil, sleeperHcl } from './support/agent-process';
import { TrustedRegistry } from './support/image-registry';

jest.setTimeout(600_000);
requireRoot();

const BINARIES = ['/bin/sh', '/bin/sleep'];
const DOCKER_CERTS = '/etc/docker/certs.d';

/** A docker job of one task on `image`, that fails for good at its first failed start. */
const imageJob = (id: string, image: string, config = ''): string => `
job "${id}" {
  group "g" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    task "t" {
      driver = "docker"
      config {
        image = "${image}"
        args  = ["3600"]
        ${config}
      }
      kill_timeout = "1s"
    }
  }
}`;

const run = async (h: AgentHarness, hcl: string): Promise<string> =>
  (await h.api.runJob(jobToNomadJson(await parseJobspec(hcl, 'job.hcl')))).allocIds[0]!;

/** The alloc once failed (its task's events say why); a start that ran the task is a test failure. */
async function failedAlloc(h: AgentHarness, allocId: string): Promise<AllocView> {
  return pollUntil(
    `alloc ${allocId} failed`,
    async () => {
      const a = await h.api.getAlloc(allocId);
      if (a.clientStatus === 'running') throw new Error(`alloc ${allocId} runs, it should have failed: ${JSON.stringify(a.tasks)}`);
      return a.clientStatus === 'failed' ? a : undefined;
    },
    240_000,
  );
}

async function runningAllocOf(h: AgentHarness, jobId: string): Promise<AllocView> {
  return pollUntil(
    `a new alloc of ${jobId} running`,
    async () => {
      const allocs = await h.api.jobAllocations(jobId);
      const live = allocs.find((a) => a.desiredStatus === 'run' && a.clientStatus !== 'failed' && a.clientStatus !== 'complete');
      if (!live) {
        const failed = allocs.find((a) => a.desiredStatus === 'run' && a.clientStatus === 'failed');
        if (failed) throw new Error(`the re-run failed again: ${JSON.stringify(failed.tasks)}`);
        return undefined;
      }
      return live.clientStatus === 'running' ? h.api.getAlloc(live.id) : undefined;
    },
    240_000,
  );
}

/** The task's runc container, once `runc list` shows it: the task is Started when its executor runs `runc run`, a moment before runc has made the container. */
const containerOf = (h: AgentHarness, allocId: string): Promise<string> =>
  pollUntil(
    `the container of alloc ${allocId}`,
    async () => (containersUnder(h.root).includes(containerId(allocId, 't')) ? containerId(allocId, 't') : undefined),
    60_000,
  );

/** What the failed task said, and that it never ran: no Started event, no container, no root mounted. */
function setupFailureOf(h: AgentHarness, alloc: AllocView): string {
  const task = alloc.tasks.t!;
  const types = task.events.map((e) => e.type);
  expect(types).not.toContain('Started');
  expect(types).toContain('Not Restarting');
  const failures = task.events.filter((e) => e.type === 'Setup Failure');
  expect(failures).toHaveLength(1);
  expect(containersUnder(h.root)).not.toContain(containerId(alloc.id, 't'));
  expect(mountsUnder(path.join(h.dataDir, 'allocs', alloc.id))).toEqual([]);
  return failures[0]!.message;
}

const sha256 = (file: string): string => createHash('sha256').update(fs.readFileSync(file)).digest('hex');

/**
 * What the image store under the data dir holds that is half-written: temp
 * files of blobs or of the index, blobs whose content is not their digest,
 * unpacks left in unpack-tmp, chain dirs without their record. Empty when
 * the store is whole.
 */
function halfWritten(storeDir: string): string[] {
  const problems: string[] = [];
  const blobs = path.join(storeDir, 'blobs', 'sha256');
  for (const name of fs.existsSync(blobs) ? fs.readdirSync(blobs) : []) {
    if (!/^[0-9a-f]{64}$/.test(name)) problems.push(`blob dir entry ${name}`);
    else if (sha256(path.join(blobs, name)) !== name) problems.push(`blob ${name} whose content is not its digest`);
  }
  for (const name of fs.readdirSync(storeDir)) if (name.endsWith('.tmp')) problems.push(`temp file ${name} in the store`);
  const unpackTmp = path.join(storeDir, 'unpack-tmp');
  for (const owner of fs.existsSync(unpackTmp) ? fs.readdirSync(unpackTmp) : [])
    for (const name of fs.readdirSync(path.join(unpackTmp, owner))) problems.push(`unpack left in unpack-tmp/${owner}/${name}`);
  const layers = path.join(storeDir, 'layers');
  for (const name of fs.existsSync(layers) ? fs.readdirSync(layers) : [])
    if (!fs.existsSync(path.join(layers, name, 'layer.json'))) problems.push(`layer ${name} without its record`);
  return problems;
}

/** The references the store's index holds. */
function indexed(storeDir: string): string[] {
  const file = path.join(storeDir, 'images.json');
  if (!fs.existsSync(file)) return [];
  return Object.keys((JSON.parse(fs.readFileSync(file, 'utf8')) as { images: Record<string, unknown> }).images);
}

/** The layer descriptors of `tag` in an OCI layout. */
function layoutLayers(layoutDir: string, manifestDigest: string): { digest: string; size: number }[] {
  const manifest = path.join(layoutDir, 'blobs', 'sha256', manifestDigest.replace(/^sha256:/, ''));
  return (JSON.parse(fs.readFileSync(manifest, 'utf8')) as { layers: { digest: string; size: number }[] }).layers;
}

let registry: TrustedRegistry;
let good: string;

beforeAll(async () => {
  registry = await TrustedRegistry.start();
  good = await registry.pushBinariesImage('team/sleeper:1', BINARIES, ['/bin/sleep']);
});

afterAll(async () => {
  await registry?.stop();
});

/** Stops the image jobs with purge (a stopped image task keeps its root until its alloc goes), then the harness. */
async function cleanUp(h: AgentHarness, expectedMounts: string[] = []): Promise<void> {
  try {
    for (const j of await h.api.listJobs().catch(() => [])) await h.api.stopJob(j.id, { purge: true }).catch(() => undefined);
    await pollUntil(
      'every task root released',
      async () => (mountsUnder(path.join(h.dataDir, 'allocs')).length === 0 ? true : undefined),
      60_000,
    ).catch(() => undefined);
  } finally {
    const { leftMounts, leftContainers } = await h.cleanup();
    expect(leftMounts).toEqual(expectedMounts);
    expect(leftContainers).toEqual([]);
  }
}

describe('a failed image pull through the agent: a clear task event, nothing half-written', () => {
  let h: AgentHarness;
  let storeDir: string;

  beforeAll(async () => {
    h = new AgentHarness('');
    await h.start();
    storeDir = path.join(h.dataDir, 'images');
  });

  afterAll(async () => {
    if (h) await cleanUp(h);
  });

  it('wrong credentials: the registry refused them, named, with what to fix', async () => {
    const alloc = await failedAlloc(
      h,
      await run(h, imageJob('auth', good, `auth {\n  username = "${registry.registry.username}"\n  password = "wrong"\n}`)),
    );
    const message = setupFailureOf(h, alloc);
    expect(message).toContain(`registry ${registry.host} refused the pull`);
    expect(message).toContain("credentials used: the task's auth block");
    expect(halfWritten(storeDir)).toEqual([]);
    expect(indexed(storeDir)).toEqual([]);
  });

  it('a missing tag: repo:tag not found in the registry', async () => {
    const missing = `${registry.host}/team/sleeper:nope`;
    const alloc = await failedAlloc(h, await run(h, imageJob('missing', missing, registry.authHcl)));
    const message = setupFailureOf(h, alloc);
    expect(message).toContain(`${missing} not found in registry ${registry.host}`);
    expect(halfWritten(storeDir)).toEqual([]);
    expect(indexed(storeDir)).toEqual([]);
  });

  it("a registry that accepts and never answers: the pull times out after the job's image_pull_timeout", async () => {
    const sockets: Socket[] = [];
    const server: Server = createServer((s) => sockets.push(s));
    const port = await freePort();
    const hung = `127.0.0.1:${port}`;
    try {
      await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve));
      // Trusted as the real one is (its CA where Docker's trust reads it): what fails is the silence, not TLS.
      await registry.registry.trustFor(hung, DOCKER_CERTS);
      const image = `${hung}/team/sleeper:1`;
      const alloc = await failedAlloc(h, await run(h, imageJob('hung', image, `image_pull_timeout = "5s"\n${registry.authHcl}`)));
      const message = setupFailureOf(h, alloc);
      expect(message).toContain(`pulling image ${image} from ${hung} took longer than image_pull_timeout (5s)`);
      expect(sockets.length).toBeGreaterThan(0);
    } finally {
      for (const s of sockets) s.destroy();
      if (server.listening) await new Promise((r) => server.close(r));
      fs.rmSync(path.join(DOCKER_CERTS, hung), { recursive: true, force: true });
    }
    expect(halfWritten(storeDir)).toEqual([]);
    expect(indexed(storeDir)).toEqual([]);
  });

  it('a blob altered in the registry: a digest mismatch naming the blob; once restored, a re-run pulls and runs', async () => {
    const layout = path.join(fs.mkdtempSync(path.join(registry.registry.dir, 'layout-')), 'oci');
    const built = await buildTestImage(layout, 'c', {
      layers: [await hostBinariesLayer(BINARIES), { files: { 'data/blob': randomBytes(300_000) } }],
      entrypoint: ['/bin/sleep'],
    });
    await registry.registry.push({ layoutDir: layout, tag: built.tag }, 'team/corrupt:1');
    const image = `${registry.host}/team/corrupt:1`;
    const [, data] = layoutLayers(layout, built.manifestDigest);
    const stored = registry.registry.blobDataPath(data!.digest);
    const original = fs.readFileSync(stored);
    fs.writeFileSync(stored, randomBytes(original.length));

    const alloc = await failedAlloc(h, await run(h, imageJob('corrupt', image, registry.authHcl)));
    const message = setupFailureOf(h, alloc);
    expect(message).toContain(`blob ${data!.digest}`);
    expect(message).toMatch(/expected sha256:[0-9a-f]{64}, got sha256:[0-9a-f]{64}; the content was discarded/);
    expect(halfWritten(storeDir)).toEqual([]);
    expect(fs.existsSync(path.join(storeDir, 'blobs', 'sha256', data!.digest.slice(7)))).toBe(false);
    expect(indexed(storeDir)).toEqual([]);

    // The registry fixed: the same job run again replaces the failed alloc, pulls and runs.
    fs.writeFileSync(stored, original);
    await h.api.runJob(jobToNomadJson(await parseJobspec(imageJob('corrupt', image, registry.authHcl), 'job.hcl')));
    const again = await runningAllocOf(h, 'corrupt');
    expect(again.id).not.toBe(alloc.id);
    expect(again.tasks.t!.events.find((e) => e.type === 'Pulled')?.message).toMatch(new RegExp(`^Pulled image ${image}, digest sha256:`));
    await containerOf(h, again.id);
    expect(halfWritten(storeDir)).toEqual([]);
    expect(indexed(storeDir)).toEqual([image]);
  });
});

describe('the image store filling up mid-pull (a small tmpfs of its own)', () => {
  let h: AgentHarness;
  let storeDir: string;
  let mounted = false;

  beforeAll(async () => {
    h = new AgentHarness('');
    storeDir = path.join(h.dataDir, 'images');
    fs.mkdirSync(storeDir, { recursive: true, mode: 0o700 });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m,mode=0700', 'tmpfs', storeDir]);
    mounted = true;
    await h.start();
  });

  afterAll(async () => {
    try {
      if (h) await cleanUp(h, mounted ? [storeDir] : []);
    } finally {
      // The harness unmounts what is under its root; this makes sure the tmpfs is gone even if it did not get there.
      if (mountsUnder(storeDir).length) execFileSync('umount', ['-l', storeDir]);
    }
  });

  it('says no space was left and where, leaves nothing half-written, keeps the agent and its other tasks; with space back a re-run pulls and runs', async () => {
    // A task that is not an image's: it must run on, untouched, through the full disk.
    const bystander = await run(h, sleeperHcl('bystander'));
    await pollUntil('the bystander running', async () => ((await h.api.getAlloc(bystander)).clientStatus === 'running' ? true : undefined));
    const bystanderPid = h.taskPid(bystander, 'main');

    // A 6 MB layer of random bytes (gzip cannot shrink it) into a 4 MB store.
    const layout = path.join(fs.mkdtempSync(path.join(registry.registry.dir, 'layout-')), 'oci');
    const built = await buildTestImage(layout, 'fat', {
      layers: [await hostBinariesLayer(BINARIES), { files: { fat: randomBytes(6_000_000) } }],
      entrypoint: ['/bin/sleep'],
    });
    await registry.registry.push({ layoutDir: layout, tag: built.tag }, 'team/fat:1');
    const image = `${registry.host}/team/fat:1`;

    const alloc = await failedAlloc(h, await run(h, imageJob('fat', image, registry.authHcl)));
    const message = setupFailureOf(h, alloc);
    expect(message).toMatch(/^no space left while writing blob sha256:[0-9a-f]{64} into the image store /);
    expect(message).toContain(`the image store ${storeDir};`);
    expect(message).toContain('Free space on that filesystem');
    expect(halfWritten(storeDir)).toEqual([]);
    expect(indexed(storeDir)).toEqual([]);

    // The agent is up, its state kept, the other task runs on as it was.
    expect((await h.api.health()).ok).toBe(true);
    expect((await h.api.listJobs()).map((j) => j.id).sort()).toEqual(['bystander', 'fat']);
    expect((await h.api.getAlloc(bystander)).clientStatus).toBe('running');
    expect(h.taskPid(bystander, 'main')).toBe(bystanderPid);

    // Space back (the tmpfs grown in place): the same job run again pulls and runs.
    execFileSync('mount', ['-o', 'remount,size=64m', storeDir]);
    await h.api.runJob(jobToNomadJson(await parseJobspec(imageJob('fat', image, registry.authHcl), 'job.hcl')));
    const again = await runningAllocOf(h, 'fat');
    expect(again.tasks.t!.events.map((e) => e.type)).toContain('Pulled');
    await containerOf(h, again.id);
    expect(halfWritten(storeDir)).toEqual([]);
    expect(indexed(storeDir)).toEqual([image]);
    expect(h.taskPid(bystander, 'main')).toBe(bystanderPid);
  });
});
