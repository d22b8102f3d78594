// Orphans with the real agent, processes and bind mounts: an agent running
// the hostpath plugin and a workload on one of its volumes is killed with
// SIGKILL and its state.db replaced by a 0-byte file. The next agent starts
// empty but says so loudly, and warns about every orphan — the alloc dirs,
// the mounts, the tasks and their executors — leaving them be; an agent
// started with -reconcile-orphans stops the tasks, unmounts the mounts and
// removes the dirs, all before its boot restores anything: no process, no
// mount, no dir is left. Needs root.
import { executorPaths, type ExecutorPidRecord } from '@csiplug/driver';
import { spawn, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { jobToNomadJson, parseJobspec, parseVolumeSpec, volumeSpecToDocument } from '@csiplug/jobspec';
import { AgentHarness, BIN, PLUGIN_JOB, isAlive, mountsUnder, pollUntil, volumeSpec, workloadJob } from './support/agent-process';
import { requireRoot } from '@csiplug/core/testing';

jest.setTimeout(180_000);

requireRoot();

/**
 * Whether `pid` is a running process. An executor whose agent died is
 * re-parented to this container's init, which may never reap it: once it
 * exits it stays a zombie, which has ended all the same.
 */
function runs(pid: number): boolean {
  if (!isAlive(pid)) return false;
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** The messages of the agent's JSON log lines, in order. */
function messages(log: string): string[] {
  const out: string[] = [];
  for (const line of log.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      out.push((JSON.parse(line) as { msg: string }).msg);
    } catch {
      // a line cut in two by the pipe: not ours to read
    }
  }
  return out;
}

describe('orphans after a state file was lost', () => {
  let h: AgentHarness;
  /** The agent this test starts itself, with -reconcile-orphans. */
  let reconciler: ChildProcess | undefined;
  let reconcilerLog = '';

  beforeAll(() => {
    h = new AgentHarness();
  });

  afterAll(async () => {
    if (reconciler && reconciler.exitCode === null && reconciler.signalCode === null) {
      const exited = new Promise((r) => reconciler!.once('exit', r));
      reconciler.kill('SIGKILL');
      await exited;
    }
    // Kills whatever is left under the harness's root by pid, unmounts what is left, removes the root.
    await h.cleanup();
  });

  it('are each warned about at start, then stopped, unmounted and removed with -reconcile-orphans', async () => {
    await h.start();
    await h.api.runJob(jobToNomadJson(await parseJobspec(PLUGIN_JOB, 'plugin.hcl')));
    await pollUntil('plugin hostpath healthy', async () => {
      const p = await h.api.getPlugin('hostpath').catch(() => undefined);
      return p && p.nodesHealthy === 1 ? p : undefined;
    });
    await h.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeSpec('vol-0'), 'vol-0.hcl')));
    const { allocIds } = await h.api.runJob(jobToNomadJson(await parseJobspec(workloadJob('work', 'vol-0'), 'work.hcl')));
    const workAlloc = allocIds[0]!;
    const work = await pollUntil('the workload running with its volume', async () => {
      const a = await h.api.getAlloc(workAlloc);
      return a.clientStatus === 'running' && a.volumes.data && fs.existsSync(path.join(a.volumes.data.hostPath, 'owner.txt'))
        ? a
        : undefined;
    });
    const pluginAlloc = (await h.api.getPlugin('hostpath')).allocs[0]!;
    const record = (alloc: string, task: string) =>
      JSON.parse(fs.readFileSync(executorPaths(path.join(h.dataDir, 'allocs', alloc, task)).pid, 'utf8')) as ExecutorPidRecord;
    const tasks = [record(workAlloc, 'writer'), record(pluginAlloc, 'plugin')];
    const pids = tasks.flatMap((r) => [r.pid, r.executorPid]);
    const realDataDir = fs.realpathSync(h.dataDir);
    const mounts = mountsUnder(realDataDir);
    expect(mounts).toContain(work.volumes.data!.hostPath);
    expect(mounts.length).toBeGreaterThanOrEqual(1);

    // The agent dies, and its state with it.
    await h.kill('SIGKILL');
    const stateFile = path.join(h.dataDir, 'state.db');
    for (const f of [stateFile, `${stateFile}-wal`, `${stateFile}-shm`, `${stateFile}-journal`]) fs.rmSync(f, { force: true });
    fs.writeFileSync(stateFile, '', { mode: 0o600 });

    // A new agent: it starts empty, says so, and warns about each orphan; it changes nothing.
    await h.start();
    // As below: the log comes through a pipe, and may trail the API's first answer.
    await pollUntil(
      "the orphan summary in the agent's log",
      async () => (/ orphan\(s\) under .* are left as they are/.test(h.log) ? true : undefined),
      15_000,
    );
    const warned = messages(h.log);
    expect(warned).toContainEqual(
      expect.stringMatching(new RegExp(`^the state file was found empty: ${stateFile} was there but empty \\(0 bytes\\)`)),
    );
    for (const alloc of [workAlloc, pluginAlloc]) {
      expect(warned).toContain(
        `orphan alloc dir: ${path.join(realDataDir, 'allocs', alloc)} belongs to alloc ${alloc}, which the state does not know`,
      );
    }
    const taskDir = (alloc: string, task: string) => path.join(realDataDir, 'allocs', alloc, task);
    for (const [alloc, task, r] of [
      [workAlloc, 'writer', tasks[0]!],
      [pluginAlloc, 'plugin', tasks[1]!],
    ] as const) {
      expect(warned).toContain(
        `orphan task: task "${task}" of alloc ${alloc} (${taskDir(alloc, task)}): pid ${r.pid} runs, its executor pid ${r.executorPid} runs; the state knows no alloc ${alloc}`,
      );
    }
    for (const m of mounts)
      expect(warned).toContainEqual(
        expect.stringMatching(new RegExp(`^orphan mount: ${m.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is mounted for `)),
      );
    expect(warned).toContainEqual(
      expect.stringMatching(/ orphan\(s\) under .* are left as they are; run the agent with -reconcile-orphans/),
    );
    expect(await h.api.listJobs()).toEqual([]);
    for (const pid of pids) expect(runs(pid)).toBe(true);
    expect(mountsUnder(realDataDir)).toEqual(mounts);
    await h.kill('SIGTERM');

    // With -reconcile-orphans: stopped, unmounted, removed, before the API serves.
    // At log level info, to see that the cleanup ends before boot restores anything ("agent started").
    const infoConfig = path.join(h.root, 'agent-info.hcl');
    fs.writeFileSync(infoConfig, fs.readFileSync(h.configFile, 'utf8').replace('log_level = "warn"', 'log_level = "info"'));
    reconciler = spawn(process.execPath, [BIN, 'agent', '-config', infoConfig, '-reconcile-orphans'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    reconciler.stdout!.on('data', (d: Buffer) => (reconcilerLog += d.toString()));
    reconciler.stderr!.on('data', (d: Buffer) => (reconcilerLog += d.toString()));
    await pollUntil('the reconciling agent serving', async () => {
      if (reconciler!.exitCode !== null) throw new Error(`agent exited ${reconciler!.exitCode}:\n${reconcilerLog}`);
      return (await h.api.health()).ok ? true : undefined;
    });
    // The log reaches us through a pipe: the line may come a moment after the API answers.
    await pollUntil(
      "the reconciliation in the agent's log",
      async () => (messages(reconcilerLog).includes('agent started') ? true : undefined),
      15_000,
    );
    const done = messages(reconcilerLog);
    expect(done).toContainEqual(
      expect.stringMatching(
        /^orphans reconciled: 2 task\(s\) stopped, \d+ mount\(s\) unmounted \(\d+ lazily\), \d+ dir\(s\) removed, 0 left$/,
      ),
    );
    const reconciledAt = done.findIndex((m) => m.startsWith('orphans reconciled: '));
    expect(done.indexOf('agent started')).toBeGreaterThan(reconciledAt);
    for (const pid of pids) expect(`pid ${pid} ${runs(pid) ? 'runs' : 'has ended'}`).toBe(`pid ${pid} has ended`);
    expect(mountsUnder(realDataDir)).toEqual([]);
    for (const alloc of [workAlloc, pluginAlloc]) {
      expect(fs.existsSync(path.join(h.dataDir, 'allocs', alloc))).toBe(false);
      expect(fs.existsSync(path.join(h.dataDir, 'plugins', alloc))).toBe(false);
    }

    const exited = new Promise((r) => reconciler!.once('exit', r));
    reconciler.kill('SIGTERM');
    await exited;
  });
});
