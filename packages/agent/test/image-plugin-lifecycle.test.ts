// The life of a plugin shipped as an image, with a workload shipped as one,
// through a real agent, a real registry (TLS, basic auth) and runc: the
// hostpath plugin from its image (driver docker, privileged, monolith,
// bidirectional mounts) serves a workload whose task is an image of host
// binaries and writes into its volume; the agent is killed with SIGKILL
// twice and started again, and each time the same container processes run
// on, the mount stays with the file, the plugin is healthy again and the
// registry hears nothing (no second pull, no manifest asked for again); the
// plugin job is updated to a new image tag (another build, another digest)
// create-before-destroy, the workload's mount checked at every poll; and a
// stop with purge unpublishes the volume, then leaves no container, no mount
// and no image root under the agent's dirs.
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import type { AgentEvent, AllocView } from '@csiplug/api';
import { DEFAULT_RUNC_ROOT, containerId } from '@csiplug/driver';
import { jobToNomadJson, parseJobspec, parseVolumeSpec, volumeSpecToDocument } from '@csiplug/jobspec';
import { AgentHarness, containersUnder, mountsUnder, pollUntil, volumeSpec } from './support/agent-process';
import { TrustedRegistry } from './support/image-registry';

jest.setTimeout(900_000);

/** The agent's image client, as the registry's access log names it. */
const AGENT_UA = 'csiplug-images';
const PLUGIN_JOB_ID = 'hostpath-image-plugin';
const WORK_JOB_ID = 'image-writer';
const RESTARTS = 2;
/** Polls on a loaded 2-core machine: generous, never a measure. */
const LONG = 240_000;

const pluginJob = (image: string, authHcl: string): string => `
job "${PLUGIN_JOB_ID}" {
  group "plugin" {
    update {
      min_healthy_time = "1s"
    }
    task "plugin" {
      driver = "docker"
      config {
        image      = "${image}"
        privileged = true
        args = ["--endpoint", "\${CSI_ENDPOINT}", "--node-id", "\${CSIPLUG_NODE_ID}",
                "--state-dir", "\${CSIPLUG_PLUGIN_DATA_DIR}/state", "--mode", "monolith", "--log-level", "warn"]
        ${authHcl}
      }
      csi_plugin {
        id   = "hostpath"
        type = "monolith"
      }
      kill_signal = "SIGINT"
    }
  }
}`;

/** A workload on runc from an image of host binaries: /bin/sh writes its alloc id into the volume, then sleeps. */
const workloadJob = (image: string, volumeId: string, authHcl: string): string => `
job "${WORK_JOB_ID}" {
  group "app" {
    volume "data" {
      type            = "csi"
      source          = "${volumeId}"
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"
    }
    task "writer" {
      driver = "docker"
      config {
        image = "${image}"
        args  = ["-c", "echo \\"$CSIPLUG_ALLOC_ID\\" > \\"$CSIPLUG_VOLUME_DATA/owner.txt\\" && exec /bin/sleep 3600"]
        ${authHcl}
      }
      volume_mount {
        volume      = "data"
        destination = "data"
      }
      kill_timeout = "1s"
    }
  }
}`;

/** The pid runc gives for container `id`'s init (its own record, not the executor's). */
function runcInitPid(id: string): number {
  const state = JSON.parse(
    execFileSync('runc', ['--root', DEFAULT_RUNC_ROOT, 'state', id], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 10_000 }).toString(),
  ) as { pid: number; status: string };
  if (state.status !== 'running') throw new Error(`container ${id} is ${state.status}, not running`);
  return state.pid;
}

/**
 * Whether `pid` is a live process: a zombie is not. A container's init whose
 * `runc run` was killed is its orphan, and stays a zombie until the host's
 * pid 1 reaps it, which kill(pid, 0) would count as alive.
 */
function runs(pid: number): boolean {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return false;
  }
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return state !== 'Z' && state !== 'X';
}

let registry: TrustedRegistry;
let pluginImage: string;
let pluginImageNext: string;
let workImage: string;

beforeAll(async () => {
  registry = await TrustedRegistry.start();
  pluginImage = registry.pushHostpathImage();
  // Another build of the plugin (every time in it one second later): another config, manifest and digest under a new tag.
  pluginImageNext = registry.pushHostpathImage('csiplug/hostpath-plugin:next', 1);
  workImage = await registry.pushBinariesImage('team/writer:1', ['/bin/sh', '/bin/sleep', '/bin/cat'], ['/bin/sh']);
});

afterAll(async () => {
  await registry?.stop();
});

describe('an image plugin and an image workload through kill -9, a plugin image update and a stop', () => {
  let h: AgentHarness;
  let stopEvents: AbortController | undefined;

  afterEach(async () => {
    stopEvents?.abort();
    if (!h) return;
    // The harness stops jobs without purging, and a stopped image task keeps its root until its alloc goes: purge them.
    if (h.proc?.exitCode === null && h.proc.signalCode === null) {
      await h.api.stopJob(WORK_JOB_ID, { purge: true }).catch(() => undefined);
      await h.api.stopJob(PLUGIN_JOB_ID, { purge: true }).catch(() => undefined);
      await pollUntil('every image root released', async () => (mountsUnder(h.root).length === 0 ? true : undefined), LONG).catch(
        () => undefined,
      );
    }
    const { leftMounts, leftContainers } = await h.cleanup();
    expect(leftMounts).toEqual([]);
    expect(leftContainers).toEqual([]);
  });

  /** The agent's registry requests since the log was `from` entries long (every request made so far in it). */
  async function agentRequestsSince(from: number): Promise<string[]> {
    await registry.registry.syncAccessLog();
    return registry.registry
      .accessLog(AGENT_UA)
      .slice(from)
      .map((e) => `${e.method} ${e.path} ${e.status}`);
  }

  async function agentRequestCount(): Promise<number> {
    await registry.registry.syncAccessLog();
    return registry.registry.accessLog(AGENT_UA).length;
  }

  const pluginHealthy = async () => {
    const p = await h.api.getPlugin('hostpath').catch(() => undefined);
    return p && p.nodesHealthy === 1 && p.controllersHealthy === 1 ? p : undefined;
  };

  const withDiagnostics = async (err: unknown): Promise<never> => {
    const allocs = await h.api.listAllocs().catch(() => []);
    throw new Error(
      `${String(err)}\n${JSON.stringify(allocs.map((a) => [a.id, a.clientStatus, a.tasks])).slice(-5000)}\n${h.log.slice(-3000)}`,
    );
  };

  const pulledDigest = (alloc: AllocView, task: string): string | undefined =>
    alloc.tasks[task]?.events.find((e) => e.type === 'Pulled')?.details?.digest;

  it(`pulls once, survives ${RESTARTS} kill -9 with the same processes and mounts, updates the plugin create-before-destroy, stops clean`, async () => {
    h = new AgentHarness(`plugin "docker" {\n  config {\n    allow_privileged = true\n  }\n}\n`, { rawExec: false });
    await h.start();

    // 1. The plugin from its image, healthy; the workload from its image, writing into its volume.
    await h.api.runJob(jobToNomadJson(await parseJobspec(pluginJob(pluginImage, registry.authHcl), 'plugin.hcl')));
    const plugin = await pollUntil('the plugin from its image healthy', pluginHealthy, LONG).catch(withDiagnostics);
    const pluginAlloc = plugin.allocs[0]!;
    await h.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeSpec('vol-life'), 'v.hcl')));
    const { allocIds } = await h.api.runJob(
      jobToNomadJson(await parseJobspec(workloadJob(workImage, 'vol-life', registry.authHcl), 'w.hcl')),
    );
    const workAlloc = allocIds[0]!;
    const work = await pollUntil(
      'the image workload running with its file written',
      async () => {
        const a = await h.api.getAlloc(workAlloc);
        if (a.clientStatus === 'failed') throw new Error(`the workload failed: ${JSON.stringify(a.tasks)}`);
        return a.clientStatus === 'running' && a.volumes.data && fs.existsSync(path.join(a.volumes.data.hostPath, 'owner.txt'))
          ? a
          : undefined;
      },
      LONG,
    ).catch(withDiagnostics);
    const hostPath = work.volumes.data!.hostPath;
    const ownerFile = path.join(hostPath, 'owner.txt');
    expect(fs.readFileSync(ownerFile, 'utf8').trim()).toBe(workAlloc);
    expect(mountsUnder(hostPath)).toEqual([hostPath]);
    expect(pulledDigest(work, 'writer')).toMatch(/^sha256:/);
    const firstPluginDigest = pulledDigest(await h.api.getAlloc(pluginAlloc), 'plugin');
    expect(firstPluginDigest).toMatch(/^sha256:/);

    const pluginContainer = containerId(pluginAlloc, 'plugin');
    const workContainer = containerId(workAlloc, 'writer');
    expect(containersUnder(h.root).sort()).toEqual([pluginContainer, workContainer].sort());
    // Each task's pids: the executor's record (its `runc run`) and runc's own, of the container's init.
    const pluginPid = h.taskPid(pluginAlloc, 'plugin');
    const workPid = h.taskPid(workAlloc, 'writer');
    const pluginInit = runcInitPid(pluginContainer);
    const workInit = runcInitPid(workContainer);
    const pulls = await agentRequestCount();
    // Both images came from the registry: a manifest and blobs each.
    expect(
      registry.registry.accessLog(AGENT_UA).filter((e) => e.method === 'GET' && e.path.includes('/manifests/')).length,
    ).toBeGreaterThanOrEqual(2);

    // 2. kill -9 of the agent, twice: the containers run on, the agent re-attaches without pulling.
    for (let round = 1; round <= RESTARTS; round++) {
      await h.kill('SIGKILL');
      for (const pid of [pluginPid, workPid, pluginInit, workInit]) expect(runs(pid)).toBe(true);
      expect(mountsUnder(hostPath)).toEqual([hostPath]);
      await h.start();
      const [back] = await pollUntil(
        `round ${round}: the plugin healthy again and the workload running`,
        async () => {
          const p = await pluginHealthy();
          if (!p) return undefined;
          const [pa, wa] = await Promise.all([h.api.getAlloc(pluginAlloc), h.api.getAlloc(workAlloc)]);
          return pa.tasks.plugin?.state === 'running' && wa.tasks.writer?.state === 'running' ? [wa, pa] : undefined;
        },
        LONG,
      ).catch(withDiagnostics);
      expect(back.volumes.data!.hostPath).toBe(hostPath);
      expect(back.tasks.writer!.restarts).toBe(0);
      expect(h.taskPid(pluginAlloc, 'plugin')).toBe(pluginPid);
      expect(h.taskPid(workAlloc, 'writer')).toBe(workPid);
      expect(runcInitPid(pluginContainer)).toBe(pluginInit);
      expect(runcInitPid(workContainer)).toBe(workInit);
      expect(containersUnder(h.root).sort()).toEqual([pluginContainer, workContainer].sort());
      expect(mountsUnder(hostPath)).toEqual([hostPath]);
      expect(fs.readFileSync(ownerFile, 'utf8').trim()).toBe(workAlloc);
      const pluginView = await h.api.getAlloc(pluginAlloc);
      expect(pluginView.tasks.plugin!.restarts).toBe(0);
      for (const a of [back, pluginView])
        for (const t of Object.values(a.tasks))
          expect(t.events.filter((e) => ['Killed', 'Terminated', 'Setup Failure', 'Restarting'].includes(e.type))).toEqual([]);
    }
    // No second pull: not one request of the agent's reached the registry across both restarts.
    const acrossRestarts = await agentRequestsSince(pulls);
    expect(acrossRestarts).toEqual([]);

    // 3. The plugin job updated to a new image tag: the new plugin serves before the old one stops; the mount never goes.
    const events: AgentEvent[] = [];
    stopEvents = new AbortController();
    void (async () => {
      for await (const e of h.api.events({ signal: stopEvents!.signal })) events.push(e);
    })().catch(() => undefined);
    interface Sample {
      pluginAllocs: string[];
      nodes: number;
      controllers: number;
      oldAlive: boolean;
      mounts: string[];
      read: string;
    }
    const samples: Sample[] = [];
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const p = await h.api.getPlugin('hostpath').catch(() => undefined);
        let read = '';
        try {
          read = fs.readFileSync(ownerFile, 'utf8').trim();
        } catch (err) {
          read = `unreadable: ${(err as Error).message}`;
        }
        samples.push({
          pluginAllocs: p?.allocs ?? [],
          nodes: p?.nodesHealthy ?? 0,
          controllers: p?.controllersHealthy ?? 0,
          oldAlive: runs(pluginPid),
          mounts: mountsUnder(hostPath),
          read,
        });
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    // A poll that saw no healthy plugin, or the workload's mount or file gone: what create-before-destroy must never show.
    const broken = (x: Sample): boolean =>
      x.nodes === 0 || x.controllers === 0 || x.mounts.length !== 1 || x.mounts[0] !== hostPath || x.read !== workAlloc;
    let newPluginAlloc: string;
    try {
      const updated = await h.api.runJob(
        jobToNomadJson(await parseJobspec(pluginJob(pluginImageNext, registry.authHcl), 'plugin-next.hcl')),
      );
      expect(updated).toMatchObject({ version: 1, unchanged: false });
      expect(updated.plan.groups[0]).toMatchObject({ order: { kind: 'create-before-destroy' } });
      newPluginAlloc = updated.allocIds[0]!;
      expect(newPluginAlloc).not.toBe(pluginAlloc);
      // pollUntil retries a throwing poll until its limit: a broken poll is answered as a value, to fail at once.
      const outcome = await pollUntil(
        'the update deployed, the new plugin healthy and the old plugin alloc stopped',
        async () => {
          const seen = samples.find(broken);
          if (seen) return { broken: seen };
          const j = await h.api.getJob(PLUGIN_JOB_ID);
          if (j.deployment?.status === 'failed') return { failed: j.deployment.description };
          const old = j.allocs.find((a) => a.id === pluginAlloc);
          const p = await pluginHealthy();
          return j.deployment?.status === 'successful' && old?.clientStatus === 'complete' && p?.node?.allocId === newPluginAlloc
            ? { deployed: true }
            : undefined;
        },
        LONG,
      ).catch(withDiagnostics);
      if ('broken' in outcome)
        await withDiagnostics(
          `during the plugin update a poll saw the plugin or the workload's volume away: ${JSON.stringify(outcome.broken)}`,
        );
      if ('failed' in outcome) await withDiagnostics(`the plugin update failed: ${outcome.failed}`);
      await new Promise((resolve) => setTimeout(resolve, 300));
    } finally {
      watching = false;
      await watcher;
    }

    // The order, from the agent's event stream: the new plugin healthy, then the old one killed.
    const at = (pred: (e: AgentEvent) => boolean, what: string): number => {
      const i = events.findIndex(pred);
      if (i < 0) throw new Error(`no event: ${what}\n${events.map((e) => `${e.type} ${e.allocId ?? ''}`).join('\n')}`);
      return i;
    };
    const newHealthy = at((e) => e.topic === 'Plugin' && e.type === 'Plugin healthy' && e.allocId === newPluginAlloc, 'new plugin healthy');
    const oldKilled = at((e) => e.type === 'Killing' && e.allocId === pluginAlloc, 'old plugin killed');
    expect(newHealthy).toBeLessThan(oldKilled);
    // And from the polls: both registered while the old one still ran, never a moment without a healthy plugin,
    // and the workload's mount there with its file at every poll.
    expect(samples.length).toBeGreaterThan(10);
    expect(samples.some((s) => s.pluginAllocs.length === 2 && s.oldAlive)).toBe(true);
    expect(samples.filter(broken)).toEqual([]);
    expect(samples.at(-1)).toMatchObject({ pluginAllocs: [newPluginAlloc], nodes: 1, controllers: 1, oldAlive: false });
    // The new plugin runs the new build, in its own container; the workload is untouched.
    const newPluginView = await h.api.getAlloc(newPluginAlloc);
    const nextDigest = pulledDigest(newPluginView, 'plugin');
    expect(nextDigest).toMatch(/^sha256:/);
    expect(nextDigest).not.toBe(firstPluginDigest);
    const newPluginContainer = containerId(newPluginAlloc, 'plugin');
    const newPluginPid = h.taskPid(newPluginAlloc, 'plugin');
    const newPluginInit = runcInitPid(newPluginContainer);
    expect(containersUnder(h.root).sort()).toEqual([newPluginContainer, workContainer].sort());
    expect(runs(pluginPid)).toBe(false);
    expect(runs(pluginInit)).toBe(false);
    expect(runs(workPid)).toBe(true);
    expect(runcInitPid(workContainer)).toBe(workInit);
    expect((await h.api.getAlloc(workAlloc)).tasks.writer!.restarts).toBe(0);
    const updateRequests = await agentRequestsSince(pulls);
    // Only the new tag was asked for; the workload's image and the old tag were not.
    expect(
      updateRequests.filter((r) => r.includes('/manifests/')).every((r) => r.includes('/csiplug/hostpath-plugin/manifests/next')),
    ).toBe(true);
    expect(updateRequests.some((r) => r.startsWith('GET /v2/csiplug/hostpath-plugin/manifests/next'))).toBe(true);

    // 4. A clean stop: the workload purged → its volume unpublished through the new plugin; the plugin purged → nothing left.
    await h.api.stopJob(WORK_JOB_ID, { purge: true });
    await pollUntil('the volume unpublished', async () => (mountsUnder(hostPath).length === 0 ? true : undefined), LONG).catch(
      withDiagnostics,
    );
    expect((await h.api.getVolume('vol-life')).claims).toEqual([]);
    expect(runs(workPid)).toBe(false);
    expect(runs(workInit)).toBe(false);
    expect(containersUnder(h.root)).toEqual([newPluginContainer]);
    await h.api.stopJob(PLUGIN_JOB_ID, { purge: true });
    await pollUntil(
      'no container and no mount (image roots included) under the agent',
      async () => (containersUnder(h.root).length === 0 && mountsUnder(h.root).length === 0 ? true : undefined),
      LONG,
    ).catch(withDiagnostics);
    // Every image root released: no task root or its record left beside any task dir.
    const allocsDir = path.join(h.dataDir, 'allocs');
    const leftRoots = fs.existsSync(allocsDir)
      ? execFileSync('find', [allocsDir, '(', '-name', 'rootfs', '-o', '-name', 'image.json', ')'])
          .toString()
          .trim()
          .split('\n')
          .filter(Boolean)
      : [];
    expect(leftRoots).toEqual([]);
    console.log(
      JSON.stringify({
        pluginPid,
        pluginInit,
        workPid,
        workInit,
        newPluginPid,
        newPluginInit,
        firstPullRequests: pulls,
        requestsAcrossRestarts: acrossRestarts.length,
        updateRequests,
        samples: samples.length,
        bothRegisteredSamples: samples.filter((s) => s.pluginAllocs.length === 2).length,
        firstPluginDigest,
        nextDigest,
      }),
    );
  });
});
