// The fault suite's agent: a real `csiplug agent` process (AgentHarness) with
// short limits, a hostpath plugin job whose faults a test turns on and off
// through the plugin's fault file, workloads on CSI volumes, a watch on the
// agent's responsiveness, and a cleanup that leaves nothing behind — every
// process started under the round's temp dir is killed and every mount under
// it is taken down, whatever state the round ended in.
import type { AgentEvent, AgentHealth, AllocStubView, AllocView } from '@csiplug/api';
import { ApiClient } from '@csiplug/api';
import { jobToNomadJson, parseJobspec, parseVolumeSpec, volumeSpecToDocument } from '@csiplug/jobspec';
import type { RpcFaults, StartFault } from '@csiplug/hostpath-plugin';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { chrootEnvConfigWith, hostpathPluginCodeDirs, nodeBinary, volumeHcl, workloadJobHcl } from '../../src/commands/specs';
import { AgentHarness, containersUnder, isAlive, mountsUnder, pollUntil, volumeSpec, workloadJob } from '../support/agent-process';
import { DEFAULT_RUNC_ROOT } from '@csiplug/driver';
import { type LeakReport, attachmentsLeft, processesUnder, readStateLeftovers, totalLeaks, volumeMismatches } from './leaks';

/** The plugin_wait_restore of the fault rounds: "plugin away" rounds keep the plugin away for 2–5 times this. */
export const RESTORE_LIMIT_MS = 2_000;

/**
 * Short limits, so a fault shows within seconds; health checked every
 * second. `restoreLimitMs` is plugin_wait_restore: short where the plugin is
 * kept away on purpose, long where a slow re-registration on a busy machine
 * must not fail a restore that has to mount again (after a crash mid-mount).
 */
export function chaosConfig(restoreLimitMs: number): string {
  return `
timeouts {
  plugin_wait_prerun   = "6s"
  plugin_wait_restore  = "${restoreLimitMs}ms"
  csi_call             = "3s"
  claim_backoff_base   = "200ms"
  claim_backoff_max    = "1s"
  unmount_backoff_base = "200ms"
  unmount_backoff_max  = "1s"
}
heartbeat {
  interval = "1s"
}`;
}

export interface ChaosAgentOptions {
  /** plugin_wait_restore (ms); default RESTORE_LIMIT_MS. */
  restoreLimitMs?: number;
  /** More config lines. */
  extraConfig?: string;
  /** The plugin and the workloads isolated on runc (`driver = "exec"`); default ChaosAgent.isolatedByDefault. */
  isolated?: boolean;
  /** The agent's stderr appended to this file (relative: to the round's dir), and its log level (AgentHarness). */
  logFile?: string;
  logLevel?: string;
}

export const PLUGIN_ID = 'hostpath';
export const PLUGIN_JOB_ID = 'hostpath-plugin';

/** What the plugin's fault file may hold (hostpath-plugin's faults.ts). */
export type PluginFaults = Partial<RpcFaults> & { startFault?: StartFault };

export interface PluginJobOptions {
  /** A changed version is a changed job (an update); default 1. */
  version?: number;
  /** The controller offers ControllerPublishVolume, so claims go through the catalog's controller steps. */
  controllerPublish?: boolean;
}

export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export class ChaosAgent extends AgentHarness {
  /** Every agent of a round not yet destroyed, so that a run cut short (SIGINT) can still clean up after them all. */
  static readonly live = new Set<ChaosAgent>();
  /** Whether rounds run their plugin and workloads isolated on runc when their options do not say (bench/chaos --isolated; a test file sets it for its own rounds). */
  static isolatedByDefault = false;

  /** The plugin and the workloads run isolated on runc. */
  readonly isolated: boolean;

  /** The hostpath plugin's fault file: present = faults on. */
  readonly faultFile: string;
  /** One state dir for every plugin alloc, so an updated plugin knows the volumes of the old one. */
  readonly pluginState: string;
  /** Mounts this round made itself (a tmpfs data dir): not counted as leaks, taken down last. */
  readonly ownMounts: string[] = [];
  /** Whether the leak count compares the catalog's volumes with the plugin's (off for a round that wipes the state on purpose). */
  compareVolumes = true;
  /** Every event the agents of this round streamed (/v1/event/stream), from each start on. */
  readonly events: AgentEvent[] = [];
  private following: AbortController | undefined;

  constructor(options: ChaosAgentOptions = {}) {
    super(`${chaosConfig(options.restoreLimitMs ?? RESTORE_LIMIT_MS)}\n${options.extraConfig ?? ''}`, {
      ...(options.logFile ? { logFile: options.logFile } : {}),
      ...(options.logLevel ? { logLevel: options.logLevel } : {}),
    });
    this.isolated = options.isolated ?? ChaosAgent.isolatedByDefault;
    if (this.isolated) {
      // The isolated plugin sees its code and the fault file's dir (read-only, in the chroot), and keeps its state in its own data dir (mounted into it).
      const faults = path.join(this.root, 'faults');
      fs.mkdirSync(faults);
      this.faultFile = path.join(faults, 'plugin-faults.json');
      this.pluginState = path.join(this.dataDir, 'plugin-data', PLUGIN_ID, 'state');
      this.extraConfig += `\n${chrootEnvConfigWith([...hostpathPluginCodeDirs(), faults])}`;
    } else {
      this.faultFile = path.join(this.root, 'plugin-faults.json');
      this.pluginState = path.join(this.root, 'hostpath-state');
    }
    ChaosAgent.live.add(this);
  }

  /** Starts the agent and follows its event stream into `events`. */
  override async start(token?: string): Promise<void> {
    await super.start(token);
    this.following?.abort();
    const ac = new AbortController();
    this.following = ac;
    const api = this.api;
    void (async () => {
      try {
        for await (const e of api.events({ signal: ac.signal })) this.events.push(e);
      } catch {
        // the agent went away
      }
    })();
  }

  /** Stops following the event stream, then kills the agent as AgentHarness does. */
  override async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    this.following?.abort();
    await super.kill(signal);
  }

  /**
   * The first event since `since` that is about the alloc and that `says`
   * accepts: the "why" a user finds in `alloc status` (its task events) or,
   * unless `where` is 'task events', in the event stream (with its id). The
   * stream is seen only by whoever followed it when the event fired — not
   * during an agent's boot — so what must last is asked of the task events.
   */
  explains(
    alloc: AllocView,
    since: number,
    says: (message: string) => boolean,
    where: 'task events' | 'task events or stream' = 'task events or stream',
  ): string | undefined {
    for (const [task, state] of Object.entries(alloc.tasks)) {
      for (const e of state.events) if (e.time >= since && says(e.message)) return `task ${task}: [${e.type}] ${e.message}`;
    }
    if (where === 'task events') return undefined;
    for (const e of this.events)
      if (e.time >= since && e.allocId === alloc.id && says(e.message)) return `stream ${e.topic}: [${e.type}] ${e.message}`;
    return undefined;
  }

  /** The streamed events of an alloc, one line, for failure messages. */
  streamedFor(allocId: string, since = 0): string {
    return this.events
      .filter((e) => e.allocId === allocId && e.time >= since)
      .map((e) => `[${e.topic} ${e.type}] ${e.message}`)
      .join('; ');
  }

  get running(): boolean {
    return !!this.proc && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** Resolves when the current agent process has exited (by itself or killed), or undefined after `timeoutMs`. */
  async waitExit(timeoutMs: number): Promise<ExitStatus | undefined> {
    const proc = this.proc;
    if (!proc) return undefined;
    // Its last words (the crash point's line on stderr) may arrive after 'exit': the log is read once its pipes are closed too.
    const drained = () =>
      new Promise<void>((resolve) => {
        if ((proc.stdout?.closed ?? true) && (proc.stderr?.closed ?? true)) return resolve();
        const timer = setTimeout(resolve, 2_000);
        proc.once('close', () => {
          clearTimeout(timer);
          resolve();
        });
      });
    if (proc.exitCode !== null || proc.signalCode !== null) {
      await drained();
      return { code: proc.exitCode, signal: proc.signalCode as NodeJS.Signals | null };
    }
    const exit = await new Promise<ExitStatus | undefined>((resolve) => {
      const timer = setTimeout(() => {
        proc.off('exit', onExit);
        resolve(undefined);
      }, timeoutMs);
      const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
        clearTimeout(timer);
        resolve({ code, signal });
      };
      proc.once('exit', onExit);
    });
    if (exit) await drained();
    return exit;
  }

  // ---- plugin ---------------------------------------------------------------

  pluginJobHcl(options: PluginJobOptions = {}): string {
    const version = options.version ?? 1;
    return `
job "${PLUGIN_JOB_ID}" {
  group "plugin" {
    task "plugin" {
      driver = "${this.isolated ? 'exec' : 'raw_exec'}"
      config {
        command = ${JSON.stringify(this.isolated ? nodeBinary() : 'node')}
        args = ["\${CSIPLUG_HOSTPATH_CLI}", "--endpoint", "\${CSI_ENDPOINT}", "--node-id", "\${CSIPLUG_NODE_ID}",
                "--state-dir", "${this.isolated ? '${CSIPLUG_PLUGIN_DATA_DIR}/state' : this.pluginState}", "--mode", "monolith", "--log-level", "warn",
                "--name", "${PLUGIN_ID}.csiplug.io", "--fault-file", "${this.faultFile}",
                "--controller-publish", "${options.controllerPublish ? 'true' : 'false'}"]
      }
      env {
        CHAOS_PLUGIN_VERSION = "${version}"
      }
      csi_plugin {
        id   = "${PLUGIN_ID}"
        type = "monolith"
      }
      restart {
        attempts = 1000
        interval = "10m"
        delay    = "200ms"
        mode     = "fail"
      }
      kill_signal = "SIGINT"
    }
  }
}`;
  }

  /** Runs (or updates) the plugin job; with `wait`, until the plugin is healthy on both sides. */
  async runPlugin(options: PluginJobOptions = {}, wait = true): Promise<string[]> {
    const { allocIds } = await this.api.runJob(jobToNomadJson(await parseJobspec(this.pluginJobHcl(options), 'plugin.hcl')));
    if (wait) {
      await this.waitPluginHealthy();
      // An isolated round really runs on runc: the plugin's container is there.
      if (this.isolated && !containersUnder(this.root).length)
        throw new Error('the plugin is healthy but no runc container of this round runs: the round is not isolated');
    }
    return allocIds;
  }

  async waitPluginHealthy(timeoutMs = 30_000): Promise<void> {
    await pollUntil(
      'plugin hostpath healthy',
      async () => {
        const p = await this.api.getPlugin(PLUGIN_ID).catch(() => undefined);
        return p && p.nodesHealthy === 1 && p.controllersHealthy === 1 ? true : undefined;
      },
      timeoutMs,
    );
  }

  /** The allocs of the plugin job that are meant to run. */
  async pluginAllocs(): Promise<AllocStubView[]> {
    return (await this.api.listAllocs()).filter((a) => a.jobId === PLUGIN_JOB_ID && a.desiredStatus === 'run');
  }

  /** Pids of the running plugin processes of this round (the tasks, not their executors). */
  pluginPids(): number[] {
    const allocsDir = path.join(this.dataDir, 'allocs');
    const pids: number[] = [];
    for (const alloc of fs.existsSync(allocsDir) ? fs.readdirSync(allocsDir) : []) {
      try {
        const pid = this.taskPid(alloc, 'plugin');
        if (isAlive(pid)) pids.push(pid);
      } catch {
        // not a plugin alloc, or no task started yet
      }
    }
    return pids;
  }

  /** Writes the plugin's fault file (atomically), or removes it (no faults). */
  setPluginFaults(faults: PluginFaults | undefined): void {
    if (!faults) {
      fs.rmSync(this.faultFile, { force: true });
      return;
    }
    const tmp = `${this.faultFile}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(faults));
    fs.renameSync(tmp, this.faultFile);
  }

  /** Kills every running plugin process (SIGKILL): its restart policy starts it again, with the fault file as it is then. */
  killPlugin(): number[] {
    const pids = this.pluginPids();
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    return pids;
  }

  /**
   * The mounts under the data dir that belong to volumes: all of them, less
   * (for an isolated plugin) the shared bind of the plugin's own
   * staging/publish base, which stays while the plugin runs.
   */
  volumeMounts(): string[] {
    const own = path.join(this.dataDir, 'csi', 'monolith', PLUGIN_ID);
    return mountsUnder(this.dataDir).filter((m) => !(this.isolated && m === own));
  }

  // ---- volumes and workloads --------------------------------------------------

  async createVolume(id: string): Promise<void> {
    await this.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeSpec(id), `${id}.hcl`)));
  }

  /** Grows volume `id` to `capacityMin` (e.g. "50MiB"): `volume create` again with a larger capacity, as in Nomad. */
  async expandVolume(id: string, capacityMin: string): Promise<void> {
    await this.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeHcl(id, PLUGIN_ID, capacityMin), `${id}.hcl`)));
  }

  /** Runs workload job `work-<name>` on volume `volumeId`; its task writes its alloc id to owner.txt on the volume. */
  async runWorkload(name: string, volumeId: string): Promise<string> {
    const hcl = this.isolated
      ? workloadJobHcl(`work-${name}`, volumeId, 'echo "$CSIPLUG_ALLOC_ID" > "$CSIPLUG_VOLUME_DATA/owner.txt" && exec sleep 3600', 'exec')
      : workloadJob(`work-${name}`, volumeId);
    const { allocIds } = await this.api.runJob(jobToNomadJson(await parseJobspec(hcl, `work-${name}.hcl`)));
    return allocIds[0]!;
  }

  /** Waits until the allocs run with their volume mounted and owner.txt written. */
  async waitWorkloadsUp(allocIds: string[], timeoutMs = 30_000): Promise<AllocView[]> {
    return pollUntil(
      `workloads ${allocIds.join(', ')} running with their volume`,
      async () => {
        const allocs = await Promise.all(allocIds.map((id) => this.api.getAlloc(id)));
        const failed = allocs.find((a) => a.clientStatus === 'failed' || a.clientStatus === 'complete');
        if (failed) throw new TerminalAllocError(failed, this.streamedFor(failed.id));
        return allocs.every((a) => workloadUp(a)) ? allocs : undefined;
      },
      timeoutMs,
    );
  }

  /**
   * Stops every job — workloads first, then (once the unmounts they left
   * pending are done, and after `beforePlugin`, e.g. deleting volumes,
   * which needs the controller) the plugin — each step bounded; returns
   * what did not stop in time.
   */
  async stopAll(timeoutMs = 30_000, beforePlugin?: () => Promise<void>): Promise<string[]> {
    const api = new ApiClient({ address: this.api.address, timeoutMs });
    const jobs = await api.listJobs();
    const late: string[] = [];
    const stop = async (id: string) => {
      try {
        await api.stopJob(id);
      } catch (err) {
        late.push(`${id}: ${(err as Error).message}`);
      }
    };
    await Promise.all(jobs.filter((j) => j.id !== PLUGIN_JOB_ID).map((j) => stop(j.id)));
    // A workload's stop returns with an unmount left pending when its plugin was briefly away (a fault just
    // lifted): the reconciler finishes it in the background, through the plugin. Stopping the plugin first
    // would leave it pending until a plugin comes back — what an operator checks `volume status` for.
    await this.pendingUnmountsDone(api, timeoutMs).catch((err: Error) => late.push(err.message));
    await beforePlugin?.();
    await Promise.all(jobs.filter((j) => j.id === PLUGIN_JOB_ID).map((j) => stop(j.id)));
    return late;
  }

  /** Resolves once no volume on this node has an unmount pending (volume status); rejects after `timeoutMs` naming the ones left. */
  private async pendingUnmountsDone(api: ApiClient, timeoutMs: number): Promise<void> {
    let left: string[] = [];
    await pollUntil(
      'the unmounts the stopped workloads left pending to finish',
      async () => {
        left = [];
        for (const v of await api.listVolumes()) {
          const mounts = (await api.getVolume(v.id)).mounts ?? [];
          for (const m of mounts)
            if (m.pendingUnmount)
              left.push(`${v.id} of alloc ${m.allocId} (${m.attempts} attempts${m.lastError ? `, last: ${m.lastError}` : ''})`);
        }
        return left.length === 0 ? true : undefined;
      },
      timeoutMs,
      250,
    ).catch((err: Error) => {
      throw new Error(`${err.message}: still pending: ${left.join('; ')}`);
    });
  }

  // ---- watching the agent --------------------------------------------------------

  /**
   * Asks /v1/agent/health every `everyMs` for `windowMs` (or until `until`
   * resolves), each within `limitMs`; resolves with the answers that were
   * late or missing.
   */
  async watchHealth(
    windowMs: number,
    options: { everyMs?: number; limitMs?: number; until?: Promise<unknown> } = {},
  ): Promise<HealthWatch> {
    const everyMs = options.everyMs ?? 250;
    const limitMs = options.limitMs ?? 1_000;
    const client = new ApiClient({ address: this.api.address, timeoutMs: limitMs });
    let done = false;
    options.until?.then(
      () => (done = true),
      () => (done = true),
    );
    const end = Date.now() + windowMs;
    const watch: HealthWatch = { asked: 0, late: [], slowestMs: 0 };
    while (!done && Date.now() < end) {
      const t0 = Date.now();
      let answer: AgentHealth | undefined;
      let error: unknown;
      try {
        answer = await client.health();
      } catch (err) {
        error = err;
      }
      const ms = Date.now() - t0;
      watch.asked++;
      watch.slowestMs = Math.max(watch.slowestMs, ms);
      if (!answer || ms > limitMs)
        watch.late.push(
          `after ${ms} ms (load average ${os.loadavg()[0]!.toFixed(1)} on ${os.cpus().length} cores): ${answer ? 'answered late' : (error as Error)?.message}`,
        );
      await sleep(Math.max(0, everyMs - ms));
    }
    return watch;
  }

  // ---- what is left ------------------------------------------------------------------

  /**
   * Counts what is left once every job was stopped (see leaks.ts). Work that
   * legitimately goes on in the background (an unmount retried after its
   * backoff) gets `settleMs` to finish; whatever is there then is a leak.
   * Stops the agent (SIGTERM) to read its state file.
   */
  async countLeaks(settleMs = 15_000): Promise<LeakReport> {
    const agentPid = this.running ? this.proc!.pid : undefined;
    const look = async (): Promise<LeakReport> => {
      const details: string[] = [];
      const mounts = mountsUnder(this.root).filter((m) => !this.ownMounts.includes(m));
      details.push(...mounts.map((m) => `mount ${m}`));
      const procs = processesUnder(this.root, agentPid ? [agentPid] : []);
      details.push(...procs.map((p) => `process ${p}: ${commandLine(p)}`));
      // An isolated task's container counts as a process left (its own processes may name nothing of the round's dir).
      const containers = containersUnder(this.root);
      details.push(...containers.map((c) => `process: container ${c}`));
      let claims = 0;
      let allocs = 0;
      if (this.running) {
        for (const v of await this.api.listVolumes()) {
          claims += v.claims.length;
          if (v.claims.length) details.push(`volume ${v.id}: claim(s) held by ${v.claims.map((c) => c.allocId).join(', ')}`);
        }
        for (const a of await this.api.listAllocs()) {
          if (a.clientStatus !== 'pending' && a.clientStatus !== 'running') continue;
          allocs++;
          details.push(`alloc ${a.name} (${a.id}) still ${a.clientStatus}`);
        }
      }
      const attachments = attachmentsLeft(this.pluginState);
      claims += attachments.length;
      details.push(...attachments.map((a) => `controller attachment ${a} left on the plugin`));
      return {
        leaks: { mounts: mounts.length, processes: procs.length + containers.length, claims, allocs, records: 0, volumes: 0 },
        details,
      };
    };
    const wasRunning = this.running;
    const deadline = Date.now() + settleMs;
    let report = await look();
    while (totalLeaks(report.leaks) > 0 && Date.now() < deadline) {
      await sleep(250);
      report = await look().catch(() => report);
    }
    // The records (and, without an agent, the claims) come from the state file, with the agent gone.
    await this.kill('SIGTERM');
    const left = readStateLeftovers(this.dataDir);
    report.leaks.records = left.records.length;
    report.details.push(...left.records);
    if (this.compareVolumes) {
      const mismatches = volumeMismatches(this.dataDir, this.pluginState, PLUGIN_ID);
      report.leaks.volumes = mismatches.length;
      report.details.push(...mismatches);
    }
    if (!wasRunning) {
      report.leaks.claims += left.claims.length;
      report.details.push(...left.claims);
    }
    const procs = processesUnder(this.root);
    const containers = containersUnder(this.root);
    if (procs.length + containers.length > report.leaks.processes) {
      report.details.push(
        ...procs.map((p) => `process ${p} after the agent stopped: ${commandLine(p)}`),
        ...containers.map((c) => `process: container ${c} after the agent stopped`),
      );
      report.leaks.processes = procs.length + containers.length;
    }
    return report;
  }

  // ---- cleanup -------------------------------------------------------------------

  /**
   * Leaves nothing behind, whatever state the round is in: the agent is
   * killed, then every process under the round's dir (executors, tasks,
   * plugins), then every mount under it is taken down, then the dir goes.
   */
  async destroy(): Promise<void> {
    ChaosAgent.live.delete(this);
    await this.kill('SIGKILL').catch(() => undefined);
    for (let attempt = 0; attempt < 5; attempt++) {
      const pids = processesUnder(this.root, [process.pid]);
      if (!pids.length) break;
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone
        }
      }
      await sleep(100);
    }
    for (const id of (() => {
      try {
        return containersUnder(this.root);
      } catch {
        return [];
      }
    })()) {
      try {
        execFileSync('runc', ['--root', DEFAULT_RUNC_ROOT, 'delete', '--force', id], { stdio: 'ignore', timeout: 10_000 });
      } catch {
        // gone already
      }
    }
    for (let attempt = 0; attempt < 5; attempt++) {
      const mounts = mountsUnder(this.root);
      if (!mounts.length) break;
      for (const m of [...mounts].reverse()) {
        try {
          execFileSync('umount', ['-l', m], { stdio: 'ignore' });
        } catch {
          // already gone
        }
      }
    }
    fs.rmSync(this.root, { recursive: true, force: true });
  }
}

function commandLine(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
  } catch {
    return '(gone)';
  }
}

export interface HealthWatch {
  asked: number;
  /** Answers later than the limit, or missing. */
  late: string[];
  slowestMs: number;
}

/** A workload alloc that ended while it was expected to run. */
export class TerminalAllocError extends Error {
  constructor(
    readonly alloc: AllocView,
    streamed: string,
  ) {
    super(`alloc ${alloc.name} (${alloc.id}) is ${alloc.clientStatus}: task events: ${describeEvents(alloc)}; streamed: ${streamed}`);
    this.name = 'TerminalAllocError';
  }
}

/** Running, with its volume mounted and its file written. */
export function workloadUp(a: AllocStubView): boolean {
  const v = a.volumes['data'];
  return (
    a.clientStatus === 'running' &&
    a.tasks['writer']?.state === 'running' &&
    !!v &&
    mountsUnder(v.hostPath).includes(v.hostPath) &&
    fs.existsSync(path.join(v.hostPath, 'owner.txt'))
  );
}

/** The alloc's task events, one line, for failure messages. */
export function describeEvents(a: AllocStubView): string {
  return Object.entries(a.tasks)
    .map(([task, s]) => `${task}: ${s.events.map((e) => `[${e.type}] ${e.message}`).join('; ')}`)
    .join(' | ');
}
