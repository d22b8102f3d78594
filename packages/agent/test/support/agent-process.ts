// End-to-end test support: a real `csiplug agent` process (the built CLI)
// on a temp data dir, an API client for it, and checks on mounts and
// processes. Everything a test starts is killed and unmounted by cleanup().
import { DEFAULT_RUNC_ROOT, executorPaths, type ExecutorPidRecord } from '@csiplug/driver';
import { type ChildProcess, execFileSync, spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ApiClient } from '@csiplug/api';
import type { JobView } from '@csiplug/api';
import { freePort, isAlive, mountsUnder, pollUntil } from '../../src/commands/host';
import { hostpathPluginJobHcl, volumeHcl, workloadJobHcl } from '../../src/commands/specs';

export { freePort, isAlive, mountsUnder, pollUntil };

export const BIN = path.resolve(__dirname, '..', '..', 'dist', 'bin.js');

/** The agent config lines that let it run raw_exec tasks (off by default, as in Nomad). */
export const RAW_EXEC_ENABLED = 'plugin "raw_exec" {\n  config {\n    enabled = true\n  }\n}\n';

export class AgentHarness {
  readonly root: string;
  readonly dataDir: string;
  readonly configFile: string;
  port = 0;
  api!: ApiClient;
  proc: ChildProcess | undefined;
  /** Whether each start's config enables raw_exec (the tests' jobs mostly use it; the agent's default is off). */
  rawExec: boolean;
  /** Variables added to (or, when undefined, removed from) the agent's environment at each start, e.g. CSIPLUG_CRASH_AT. */
  env: Record<string, string | undefined> = {};
  private output = '';

  /** `nodeArgs` go to node before the CLI, e.g. `--max-old-space-size=64`. */
  constructor(
    /** Config lines added to the file each start writes (change it between starts to restart with another config). */
    public extraConfig = '',
    /** logFile: the agent's stderr (its log) appended to this file (relative: to the harness's root), not a pipe; logLevel: instead of "warn". */
    private readonly options: { nodeArgs?: string[]; fdLimit?: number; rawExec?: boolean; logFile?: string; logLevel?: string } = {},
  ) {
    this.root = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-e2e-'));
    this.dataDir = path.join(this.root, 'data');
    this.configFile = path.join(this.root, 'agent.hcl');
    this.rawExec = options.rawExec !== false;
  }

  /** Where the agent's stderr goes, when not to a pipe. */
  get logFile(): string | undefined {
    return this.options.logFile === undefined ? undefined : path.resolve(this.root, this.options.logFile);
  }

  get log(): string {
    const file = this.logFile;
    return file ? `${this.output}${fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : ''}` : this.output;
  }

  async start(token?: string): Promise<void> {
    if (!this.port) this.port = await freePort();
    // JSON log lines: the tests read them.
    const rawExec = this.rawExec ? RAW_EXEC_ENABLED : '';
    fs.writeFileSync(
      this.configFile,
      `data_dir = "${this.dataDir}"\nport = ${this.port}\nlog_level = "${this.options.logLevel ?? 'warn'}"\nlog_json = true\n${rawExec}${this.extraConfig}\n`,
    );
    this.api = new ApiClient({ address: `http://127.0.0.1:${this.port}`, token });
    const argv = [process.execPath, ...(this.options.nodeArgs ?? []), BIN, 'agent', '-config', this.configFile];
    const env = { ...process.env, ...this.env };
    for (const [k, v] of Object.entries(this.env)) if (v === undefined) delete env[k];
    // A lower open-file limit for this agent alone (its tasks inherit it too).
    const logFd = this.logFile ? fs.openSync(this.logFile, 'a') : undefined;
    const stdio: ('ignore' | 'pipe' | number)[] = ['ignore', 'pipe', logFd ?? 'pipe'];
    let proc: ChildProcess;
    try {
      proc =
        this.options.fdLimit !== undefined
          ? spawn('/bin/sh', ['-c', `ulimit -n ${this.options.fdLimit} && exec "$@"`, 'sh', ...argv], { stdio, env })
          : spawn(argv[0]!, argv.slice(1), { stdio, env });
    } finally {
      if (logFd !== undefined) fs.closeSync(logFd);
    }
    this.proc = proc;
    proc.stdout!.on('data', (d: Buffer) => (this.output += d.toString()));
    proc.stderr?.on('data', (d: Buffer) => (this.output += d.toString()));
    // An agent that exits at start (a refused config or state) fails the start at once, not after the poll's limit.
    const outcome = await pollUntil(
      'the agent API',
      async () => {
        if (proc.exitCode !== null || proc.signalCode !== null) return 'exited';
        return (await this.api.health()).ok ? 'up' : undefined;
      },
      30_000,
    );
    if (outcome === 'exited') throw new Error(`agent exited ${proc.exitCode ?? proc.signalCode}:\n${this.output}`);
  }

  /** Kills the agent process (SIGKILL: no cleanup at all) and waits for it to be gone. */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill(signal);
    await exited;
  }

  taskPid(allocId: string, task: string): number {
    const record = JSON.parse(
      fs.readFileSync(executorPaths(path.join(this.dataDir, 'allocs', allocId, task)).pid, 'utf8'),
    ) as ExecutorPidRecord;
    return record.pid;
  }

  /**
   * Stops every job through the API (unmounting), then the agent; kills and
   * unmounts what is left. Says which mounts and containers the stops left
   * (before this removes them).
   */
  async cleanup(): Promise<{ leftMounts: string[]; leftContainers: string[] }> {
    try {
      if (this.proc && this.proc.exitCode === null && this.proc.signalCode === null) {
        const jobs = await this.api.listJobs().catch(() => []);
        const workloads = jobs.filter((j) => !j.id.includes('plugin'));
        await Promise.all(workloads.map((j) => this.api.stopJob(j.id).catch(() => undefined)));
        await Promise.all(jobs.filter((j) => j.id.includes('plugin')).map((j) => this.api.stopJob(j.id).catch(() => undefined)));
        await this.kill('SIGTERM');
      }
    } finally {
      await this.kill('SIGKILL');
    }
    const leftMounts = mountsUnder(this.root);
    const leftContainers = containersUnder(this.root);
    for (const m of [...leftMounts].reverse()) {
      try {
        execFileSync('umount', ['-l', m]);
      } catch {
        // already gone
      }
    }
    // Containers of isolated tasks whose bundle is under our root go (the executors would remove them, but they may be gone).
    for (const id of leftContainers) {
      try {
        execFileSync('runc', ['--root', DEFAULT_RUNC_ROOT, 'delete', '--force', id], { stdio: 'ignore', timeout: 10_000 });
      } catch {
        // gone already
      }
    }
    // Any task process still under our data dir (executors and tasks) goes too.
    try {
      const out = execFileSync('pgrep', ['-f', this.root]).toString().trim();
      for (const pid of out.split('\n').filter(Boolean).map(Number)) if (pid !== process.pid) process.kill(pid, 'SIGKILL');
    } catch {
      // none
    }
    fs.rmSync(this.root, { recursive: true, force: true });
    return { leftMounts, leftContainers };
  }
}

/** The ids of the runc containers (in the exec driver's default root) whose bundle lies under `dir`; throws when runc cannot list them (a leak must not pass unseen). */
export function containersUnder(dir: string): string[] {
  if (!fs.existsSync(DEFAULT_RUNC_ROOT)) return [];
  let list: { id: string; bundle: string }[] | null = null;
  // runc list fails when a container it is reading goes away under it (another round deleting its own): that passes; only a list that keeps failing is an error.
  for (let attempt = 1; ; attempt++) {
    try {
      list = JSON.parse(
        execFileSync('runc', ['--root', DEFAULT_RUNC_ROOT, 'list', '--format', 'json'], {
          stdio: ['ignore', 'pipe', 'ignore'],
          timeout: 10_000,
        }).toString() || 'null',
      ) as { id: string; bundle: string }[] | null;
      break;
    } catch (err) {
      if (attempt >= 5)
        throw new Error(`runc list failed ${attempt} times, so the containers under ${dir} cannot be told: ${(err as Error).message}`);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100 * attempt);
    }
  }
  return (list ?? []).filter((c) => c.bundle.startsWith(dir + '/')).map((c) => c.id);
}

export const PLUGIN_JOB = hostpathPluginJobHcl({ restartDelay: '100ms' });

export function workloadJob(id: string, volumeId: string): string {
  return workloadJobHcl(id, volumeId, 'echo "$CSIPLUG_ALLOC_ID" > "$CSIPLUG_VOLUME_DATA/owner.txt" && exec sleep 3600');
}

export const volumeSpec = (id: string): string => volumeHcl(id);

/** A job with one task and no volumes: all it needs of the data dir is its state and a task dir. */
export const sleeperHcl = (id: string): string => `
job "${id}" {
  group "app" {
    task "main" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
      kill_timeout = "1s"
    }
  }
}`;

/** The job's alloc that is wanted and running, if any. */
export const runningAlloc = (job: JobView | undefined): JobView['allocs'][number] | undefined =>
  job?.allocs.find((a) => a.desiredStatus === 'run' && a.clientStatus === 'running');
