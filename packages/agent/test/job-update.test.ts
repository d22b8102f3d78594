// End to end, with the real agent, the hostpath plugin, real processes and
// bind mounts: `job run` of a job that exists changes only what changed.
// (a) the same file again touches nothing; (b) a plugin update starts the
// new plugin and has it registered healthy before the old one stops — the
// plugin and a workload's mount are watched the whole time — and the
// workload's volume later unmounts through the new plugin; (c) a plugin
// version that never becomes healthy is reverted under auto_revert; (d) a
// single-node-writer workload is stopped and unmounted before its
// replacement claims the volume; (e) `job plan` output and exit codes (0
// for an in-place-only change, as Nomad's), and its alloc limit; (f) a
// plugin group of count 2 judged healthy.
import { execFile } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { promisify } from 'util';
import type { AgentEvent, AllocView } from '@csiplug/api';
import { jobToNomadJson, parseJobspec, parseVolumeSpec, volumeSpecToDocument } from '@csiplug/jobspec';
import { AgentHarness, BIN, isAlive, mountsUnder, pollUntil, volumeSpec } from './support/agent-process';
import { requireRoot } from '@csiplug/core/testing';

jest.setTimeout(300_000);
requireRoot();
const execFileP = promisify(execFile);

interface PluginVersion {
  /** Set as PLUGIN_BUILD in the task's env: changing it makes a new version. */
  build: string;
  /** A plugin that exits at once instead of serving. */
  broken?: boolean;
  autoRevert?: boolean;
}

/** The hostpath plugin as a monolith job whose volumes live outside its alloc dir, so that every version of it sees them. */
function pluginJobHcl(stateDir: string, v: PluginVersion): string {
  const config = v.broken
    ? `command = "/bin/sh"
        args    = ["-c", "echo this build does not start; exit 3"]`
    : `command = "node"
        args = ["\${CSIPLUG_HOSTPATH_CLI}", "--endpoint", "\${CSI_ENDPOINT}", "--node-id", "\${CSIPLUG_NODE_ID}",
                "--state-dir", "${stateDir}", "--mode", "monolith", "--log-level", "warn"]`;
  return `
job "hostpath-plugin" {
  group "plugin" {
    update {
      min_healthy_time = "1s"
      healthy_deadline = "1m"
      auto_revert      = ${v.autoRevert ?? false}
    }
    task "plugin" {
      driver = "raw_exec"
      config {
        ${config}
      }
      env {
        PLUGIN_BUILD = "${v.build}"
      }
      csi_plugin {
        id   = "hostpath"
        type = "monolith"
      }
      restart {
        attempts = ${v.broken ? 0 : 3}
        interval = "10m"
        delay    = "100ms"
        mode     = "fail"
      }
      kill_signal = "SIGINT"
    }
  }
}`;
}

/** A workload writing into its single-node-writer volume; `build` goes into its env. */
function workloadHcl(volumeId: string, build: string): string {
  return `
job "work" {
  group "app" {
    update {
      min_healthy_time = "1s"
    }
    volume "data" {
      type            = "csi"
      source          = "${volumeId}"
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"
    }
    task "writer" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo \\"$CSIPLUG_ALLOC_ID $BUILD\\" >> \\"$CSIPLUG_VOLUME_DATA/owners.txt\\" && exec sleep 3600"]
      }
      env {
        BUILD = "${build}"
      }
      volume_mount {
        volume      = "data"
        destination = "data"
      }
    }
  }
}`;
}

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await execFileP(process.execPath, [BIN, ...args], { timeout: 120_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

describe('job updates with the real agent and the hostpath plugin', () => {
  let h: AgentHarness;
  let stateDir: string;
  let events: AgentEvent[];
  let stopEvents: AbortController;

  beforeEach(async () => {
    h = new AgentHarness();
    stateDir = path.join(h.root, 'hostpath-state');
    await h.start();
    events = [];
    stopEvents = new AbortController();
    void (async () => {
      for await (const e of h.api.events({ signal: stopEvents.signal })) events.push(e);
    })().catch(() => undefined);
  });

  afterEach(async () => {
    stopEvents.abort();
    const { leftMounts } = await h.cleanup();
    expect(leftMounts).toEqual([]);
  });

  const write = (name: string, text: string): string => {
    const file = path.join(h.root, name);
    fs.writeFileSync(file, text);
    return file;
  };
  const address = () => ['-address', `http://127.0.0.1:${h.port}`];

  async function runFile(file: string) {
    return h.api.runJob(jobToNomadJson(await parseJobspec(fs.readFileSync(file, 'utf8'), file)));
  }

  async function pluginRunning(file: string): Promise<string> {
    await runFile(file);
    const job = await pollUntil('the plugin job deployed and the plugin healthy', async () => {
      const j = await h.api.getJob('hostpath-plugin');
      const p = await h.api.getPlugin('hostpath').catch(() => undefined);
      return j.deployment?.status === 'successful' && p?.nodesHealthy === 1 && p.controllersHealthy === 1 ? j : undefined;
    });
    return job.allocs.find((a) => a.desiredStatus === 'run')!.id;
  }

  async function workloadRunning(file: string): Promise<AllocView> {
    await runFile(file);
    return pollUntil('the workload deployed with its volume', async () => {
      const j = await h.api.getJob('work');
      if (j.deployment?.status === 'failed') throw new Error(`the workload's deployment failed: ${j.deployment.description}`);
      const live = j.allocs.find((a) => a.desiredStatus === 'run' && a.jobVersion === j.version);
      if (j.deployment?.status !== 'successful' || !live) return undefined;
      const a = await h.api.getAlloc(live.id);
      return a.volumes.data && fs.existsSync(path.join(a.volumes.data.hostPath, 'owners.txt')) ? a : undefined;
    });
  }

  async function volume(id: string): Promise<void> {
    await h.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeSpec(id), `${id}.hcl`)));
  }

  const eventsOf = (jobId: string, type: string) => events.filter((e) => e.jobId === jobId && e.type === type);

  it('(a) running the same files again touches nothing: same allocs, same processes, no restart, the plugin never away', async () => {
    const pluginFile = write('plugin.hcl', pluginJobHcl(stateDir, { build: '1' }));
    const pluginAlloc = await pluginRunning(pluginFile);
    await volume('vol-a');
    const workFile = write('work.hcl', workloadHcl('vol-a', '1'));
    const work = await workloadRunning(workFile);
    const pids = [h.taskPid(pluginAlloc, 'plugin'), h.taskPid(work.id, 'writer')];
    const seen = events.length;

    for (const file of [pluginFile, workFile]) {
      const r = await cli(['job', 'run', ...address(), file]);
      expect(r).toMatchObject({ code: 0, stderr: '' });
      expect(r.stdout).toMatch(/^==> Job "(hostpath-plugin|work)" unchanged \(version 0\): nothing to do\n$/);
    }
    const r = await cli(['job', 'plan', ...address(), pluginFile]);
    expect(r.code).toBe(0);

    for (const [jobId, allocId, task, pid] of [
      ['hostpath-plugin', pluginAlloc, 'plugin', pids[0]!],
      ['work', work.id, 'writer', pids[1]!],
    ] as const) {
      const job = await h.api.getJob(jobId);
      expect(job.version).toBe(0);
      expect(job.allocs.map((a) => `${a.id} ${a.desiredStatus} ${a.clientStatus}`)).toEqual([`${allocId} run running`]);
      const alloc = await h.api.getAlloc(allocId);
      expect(alloc.tasks[task]!.restarts).toBe(0);
      expect(h.taskPid(allocId, task)).toBe(pid);
      expect(isAlive(pid)).toBe(true);
    }
    expect((await h.api.getPlugin('hostpath')).allocs).toEqual([pluginAlloc]);
    // Nothing happened to any alloc or plugin: only the two "Job unchanged" events.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(events.slice(seen).map((e) => `${e.jobId} ${e.type}`)).toEqual(['hostpath-plugin Job unchanged', 'work Job unchanged']);
  });

  it('(b) a plugin update: the new plugin is registered healthy before the old one stops; the plugin and the mount are served throughout', async () => {
    const pluginFile = write('plugin.hcl', pluginJobHcl(stateDir, { build: '1' }));
    const oldAlloc = await pluginRunning(pluginFile);
    const oldPid = h.taskPid(oldAlloc, 'plugin');
    await volume('vol-b');
    const work = await workloadRunning(write('work.hcl', workloadHcl('vol-b', '1')));
    const owners = path.join(work.volumes.data!.hostPath, 'owners.txt');
    const workPid = h.taskPid(work.id, 'writer');

    // Watch the plugin's registrations and health, and read the workload's file, the whole time.
    const samples: { allocs: string[]; nodes: number; controllers: number; oldAlive: boolean }[] = [];
    const reads: boolean[] = [];
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const p = await h.api.getPlugin('hostpath').catch(() => undefined);
        const oldAlive = isAlive(oldPid);
        samples.push(
          p
            ? { allocs: p.allocs, nodes: p.nodesHealthy, controllers: p.controllersHealthy, oldAlive }
            : { allocs: [], nodes: 0, controllers: 0, oldAlive },
        );
        try {
          reads.push(fs.readFileSync(owners, 'utf8').includes(work.id));
        } catch {
          reads.push(false);
        }
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    })();

    const result = await runFile(write('plugin2.hcl', pluginJobHcl(stateDir, { build: '2' })));
    expect(result).toMatchObject({ version: 1, unchanged: false, allocIds: [expect.any(String)] });
    expect(result.plan.groups[0]).toMatchObject({ order: { kind: 'create-before-destroy' }, updates: { 'create/destroy': 1 } });
    const newAlloc = result.allocIds[0]!;
    await pollUntil('the update deployed and the old plugin alloc stopped', async () => {
      const j = await h.api.getJob('hostpath-plugin');
      const old = j.allocs.find((a) => a.id === oldAlloc)!;
      return j.deployment?.status === 'successful' && old.clientStatus === 'complete' ? j : undefined;
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    watching = false;
    await watcher;

    // The order, from the event stream: the new plugin healthy, then its alloc healthy, then the old one killed.
    const at = (pred: (e: AgentEvent) => boolean, what: string) => {
      const i = events.findIndex(pred);
      if (i < 0) throw new Error(`no event: ${what}\n${events.map((e) => `${e.type} ${e.allocId ?? ''}`).join('\n')}`);
      return i;
    };
    const newHealthy = at((e) => e.topic === 'Plugin' && e.type === 'Plugin healthy' && e.allocId === newAlloc, 'new plugin healthy');
    const allocHealthy = at((e) => e.type === 'Deployment alloc healthy' && e.allocId === newAlloc, 'new alloc healthy');
    const oldKilled = at((e) => e.type === 'Killing' && e.allocId === oldAlloc, 'old plugin killed');
    expect(newHealthy).toBeLessThan(allocHealthy);
    expect(allocHealthy).toBeLessThan(oldKilled);
    expect(isAlive(oldPid)).toBe(false);

    // Never a moment without a registered plugin, nor without a healthy one
    // serving: the CSI manager kept the old instance serving until the new
    // one's first healthy fingerprint, then swapped in one step (create-
    // before-destroy), so no sample read 0 healthy nodes or controllers, and
    // the new plugin was never reported unhealthy.
    expect(samples.length).toBeGreaterThan(20);
    expect(samples.filter((s) => s.allocs.length === 0)).toEqual([]);
    expect(samples.filter((s) => s.nodes === 0 || s.controllers === 0)).toEqual([]);
    expect(events.filter((e) => e.allocId === newAlloc && e.type === 'Plugin unhealthy')).toEqual([]);
    expect(events.filter((e) => e.allocId === oldAlloc && e.type === 'Plugin became unhealthy')).toEqual([]);
    expect(samples.some((s) => s.allocs.length === 2)).toBe(true); // both were registered at once, for a while
    expect(samples.at(-1)).toEqual({ allocs: [newAlloc], nodes: 1, controllers: 1, oldAlive: false });
    // The workload's mount was served the whole time, by the same process.
    expect(reads.length).toBe(samples.length);
    expect(reads.every(Boolean)).toBe(true);
    expect(isAlive(workPid)).toBe(true);
    expect(mountsUnder(work.volumes.data!.hostPath)).toEqual([work.volumes.data!.hostPath]);
    expect((await h.api.getPlugin('hostpath')).node?.allocId).toBe(newAlloc);

    // Stopping the workload now unmounts through the new plugin, cleanly.
    await h.api.stopJob('work');
    expect(mountsUnder(h.dataDir)).toEqual([]);
    expect((await h.api.getVolume('vol-b')).claims).toEqual([]);
    expect(events.filter((e) => e.topic === 'Volume' && e.allocId === work.id && /fail/i.test(e.message))).toEqual([]);
  });

  it('(c) a plugin version that never becomes healthy is reverted under auto_revert: the old plugin never stops', async () => {
    const good = pluginJobHcl(stateDir, { build: '1', autoRevert: true });
    const oldAlloc = await pluginRunning(write('plugin.hcl', good));
    const oldPid = h.taskPid(oldAlloc, 'plugin');
    const result = await runFile(write('broken.hcl', pluginJobHcl(stateDir, { build: '2', broken: true, autoRevert: true })));
    expect(result.version).toBe(1);
    const badAlloc = result.allocIds[0]!;
    const reverted = await pollUntil('the job reverted', async () => {
      const e = eventsOf('hostpath-plugin', 'Job reverted')[0];
      return e;
    });
    expect(reverted.message).toMatch(
      /^job hostpath-plugin: version 1 did not become healthy \(alloc hostpath-plugin\.plugin\[0\] \(\w{8}\) is unhealthy: task "plugin" is dead \(failed\).*\); reverted to version 0, which runs again as version 2$/,
    );
    const failed = eventsOf('hostpath-plugin', 'Deployment failed')[0]!;
    expect(failed.message).toMatch(/rolling back to job version 0$/);

    const job = await h.api.getJob('hostpath-plugin');
    expect(job.version).toBe(2);
    expect(job.job.groups[0]!.tasks[0]!.env.PLUGIN_BUILD).toBe('1');
    expect(job.deployment).toMatchObject({
      jobVersion: 1,
      status: 'failed',
      description: 'Failed due to unhealthy allocations - rolling back to job version 0',
    });
    expect(job.allocs.map((a) => `${a.id} ${a.jobVersion} ${a.desiredStatus} ${a.clientStatus}`).sort()).toEqual(
      [`${oldAlloc} 2 run running`, `${badAlloc} 1 stop failed`].sort(),
    );
    // The old plugin ran through all of it, registered and healthy; the broken one never registered.
    expect(h.taskPid(oldAlloc, 'plugin')).toBe(oldPid);
    expect(isAlive(oldPid)).toBe(true);
    expect(events.filter((e) => e.allocId === oldAlloc && (e.type === 'Killing' || e.type === 'Plugin unhealthy'))).toEqual([]);
    expect(await h.api.getPlugin('hostpath')).toMatchObject({ allocs: [oldAlloc], nodesHealthy: 1, controllersHealthy: 1 });

    const status = await cli(['job', 'status', ...address(), 'hostpath-plugin']);
    expect(status.stdout).toMatch(/Version += 2/);
    expect(status.stdout).toMatch(
      /Latest Deployment\nID +=.*\nVersion += 1\nStatus += failed\nDescription += Failed due to unhealthy allocations - rolling back to job version 0/,
    );
  });

  it('(d) a single-node-writer workload update: the old alloc is stopped and unmounted before the new one claims the volume', async () => {
    await pluginRunning(write('plugin.hcl', pluginJobHcl(stateDir, { build: '1' })));
    await volume('vol-d');
    const old = await workloadRunning(write('work.hcl', workloadHcl('vol-d', '1')));
    const oldPath = old.volumes.data!.hostPath;
    const seen = events.length;
    const result = await runFile(write('work2.hcl', workloadHcl('vol-d', '2')));
    expect(result.plan.groups[0]!.order).toEqual({
      kind: 'stop-before-start',
      reason:
        'volume "data" (vol-d) is single-node-writer: one writer at a time, so the old alloc releases it before the new one claims it',
    });
    expect(result.allocIds).toEqual([]); // nothing can start before the old alloc let go
    const fresh = await workloadRunning(path.join(h.root, 'work2.hcl'));
    expect(fresh.id).not.toBe(old.id);
    expect(fresh.jobVersion).toBe(1);

    const after = events.slice(seen);
    const index = (pred: (e: AgentEvent) => boolean, what: string) => {
      const i = after.findIndex(pred);
      if (i < 0) throw new Error(`no event: ${what}\n${after.map((e) => `${e.type} ${e.allocId ?? ''} ${e.message}`).join('\n')}`);
      return i;
    };
    const released = index((e) => e.type === 'Volume released' && e.allocId === old.id, 'old claim released');
    const received = index((e) => e.type === 'Alloc received' && e.allocId === fresh.id, 'new alloc received');
    const claimed = index((e) => e.type === 'Volume claimed' && e.allocId === fresh.id, 'new claim granted');
    // The new alloc did not exist before the old claim was gone: it could not have been refused.
    expect(released).toBeLessThan(received);
    expect(received).toBeLessThan(claimed);
    expect(after.filter((e) => e.type === 'Volume claimed')).toHaveLength(1);
    expect(after.filter((e) => e.allocId === fresh.id && e.type === 'Setup Failure')).toEqual([]);
    // Same volume, new mount; the old alloc's mount is gone, its file kept.
    expect(mountsUnder(oldPath)).toEqual([]);
    const lines = fs.readFileSync(path.join(fresh.volumes.data!.hostPath, 'owners.txt'), 'utf8').trim().split('\n');
    expect(lines).toEqual([`${old.id} 1`, `${fresh.id} 2`]);
    expect((await h.api.getVolume('vol-d')).claims.map((c) => c.allocId)).toEqual([fresh.id]);
  });

  it('(f) a plugin group of count 2 is judged healthy: each alloc by its own registration, though the CSI manager serves one', async () => {
    const hcl = pluginJobHcl(stateDir, { build: '1' }).replace('group "plugin" {', 'group "plugin" {\n    count = 2');
    await runFile(write('plugin2x.hcl', hcl));
    const job = await pollUntil('the count-2 plugin job deployed', async () => {
      const j = await h.api.getJob('hostpath-plugin');
      if (j.deployment?.status === 'failed') throw new Error(`the deployment failed: ${j.deployment.description}`);
      return j.deployment?.status === 'successful' ? j : undefined;
    });
    expect(job.allocs.map((a) => `${a.desiredStatus} ${a.clientStatus} ${a.healthy}`)).toEqual(['run running true', 'run running true']);
    expect(job.deployment).toMatchObject({ groups: [{ desired: 2, placed: 2, healthy: 2, unhealthy: 0 }] });
    expect(await h.api.getPlugin('hostpath')).toMatchObject({ nodesHealthy: 1, controllersHealthy: 1 });
  });

  it('(e) job plan shows what job run would change, and exits 0, 1 or 255', async () => {
    const pluginFile = write('plugin.hcl', pluginJobHcl(stateDir, { build: '1' }));
    let r = await cli(['job', 'plan', ...address(), pluginFile]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^\+ Job: "hostpath-plugin" \(version 0\)\n\+ Task Group: "plugin" \(1 create\)\n/);
    expect(await h.api.listJobs()).toEqual([]); // a plan runs nothing

    const oldAlloc = await pluginRunning(pluginFile);
    r = await cli(['job', 'plan', ...address(), pluginFile]);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    expect(r.stdout).toBe(
      `Job: "hostpath-plugin" (version 0)\nTask Group: "plugin" (1 ignore)\n\nNo changes: 'job run' would leave job "hostpath-plugin" as it is.\n`,
    );

    const changed = write('plugin2.hcl', pluginJobHcl(stateDir, { build: '2' }));
    r = await cli(['job', 'plan', ...address(), changed]);
    expect(r.code).toBe(1);
    const lines = r.stdout.split('\n');
    expect(lines.slice(0, 4)).toEqual([
      '+/- Job: "hostpath-plugin" (version 0 => 1)',
      '+/- Task Group: "plugin" (1 create/destroy update)',
      '  +/- task "plugin" env.PLUGIN_BUILD: "1" => "2" (forces create/destroy update)',
      '  Order:  create before destroy: task "plugin" runs CSI plugin "hostpath": the new alloc registers healthy before the old one stops',
    ]);
    expect(r.stdout).toContain(
      `create/destroy update  hostpath-plugin.plugin[0]  ${oldAlloc.slice(0, 8)} (version 0)  task "plugin" env.PLUGIN_BUILD: "1" => "2"`,
    );
    const json = await cli(['job', 'plan', '-json', ...address(), changed]);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({
      jobId: 'hostpath-plugin',
      changed: true,
      version: { from: 0, to: 1 },
      groups: [{ updates: { 'create/destroy': 1 } }],
    });
    // Still nothing done: the same alloc, version 0.
    expect((await h.api.getJob('hostpath-plugin')).allocs.map((a) => `${a.id} ${a.jobVersion}`)).toEqual([`${oldAlloc} 0`]);

    fs.writeFileSync(path.join(h.root, 'bad.hcl'), 'job "x" {\n');
    r = await cli(['job', 'plan', ...address(), path.join(h.root, 'bad.hcl')]);
    expect(r.code).toBe(255);
    expect(r.stderr).toMatch(/^Error: .*bad\.hcl: invalid HCL/);
    r = await cli(['job', 'plan', '-address', 'http://127.0.0.1:1', pluginFile]);
    expect(r.code).toBe(255);

    // Only the update block changes: a new version, no alloc created, destroyed or replaced — exit 0, as Nomad's.
    const inPlace = write(
      'plugin-inplace.hcl',
      pluginJobHcl(stateDir, { build: '1' }).replace('min_healthy_time = "1s"', 'min_healthy_time = "2s"'),
    );
    r = await cli(['job', 'plan', ...address(), inPlace]);
    expect(r.stdout).toContain('Task Group: "plugin" (1 in-place update)');
    expect(r).toMatchObject({ code: 0, stderr: '' });

    // More allocs than limits { max_allocs_per_job }: refused at once (a 400 naming the count), as job run is; no plan of a million allocs is made.
    const huge = write(
      'huge.hcl',
      pluginJobHcl(stateDir, { build: '1' }).replace('group "plugin" {', 'group "plugin" {\n    count = 1000000'),
    );
    r = await cli(['job', 'plan', ...address(), huge]);
    expect(r.code).toBe(255);
    expect(r.stderr).toMatch(/asks for 1000000 allocs .*max_allocs_per_job/);
    await expect(h.api.planJob(jobToNomadJson(await parseJobspec(fs.readFileSync(huge, 'utf8'), huge)))).rejects.toMatchObject({
      status: 400,
    });

    // Nomad's datacenters: this agent is in dc1 (the default). A job only for others is refused at once by plan and run
    // alike, naming both; nothing is placed. One whose datacenters match (a glob) plans as any job.
    const withDatacenters = (dcs: string): string =>
      write(
        `dc-${dcs.replace(/\W/g, '')}.hcl`,
        pluginJobHcl(stateDir, { build: '1' }).replace('job "hostpath-plugin" {', `job "hostpath-plugin" {\n  datacenters = ${dcs}`),
      );
    const elsewhere = withDatacenters('["dc2", "eu-*"]');
    for (const verb of ['plan', 'run']) {
      r = await cli(['job', verb, ...address(), elsewhere]);
      expect(r.code).toBe(verb === 'plan' ? 255 : 1);
      expect(r.stderr).toContain(
        'job "hostpath-plugin" runs only in datacenters ["dc2","eu-*"], and this node is in datacenter "dc1" (the agent config\'s datacenter): add "dc1" (or "*") to the job\'s datacenters',
      );
    }
    expect((await h.api.getJob('hostpath-plugin')).allocs.map((a) => `${a.id} ${a.jobVersion}`)).toEqual([`${oldAlloc} 0`]);
    r = await cli(['job', 'plan', ...address(), withDatacenters('["dc*"]')]);
    expect(r.stderr).toBe('');
  });
});
