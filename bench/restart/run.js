#!/usr/bin/env node
// bench/restart: after `kill -9` of the agent, the time from the new agent's
// start to every alloc running again with its volumes checked (each task's
// `Reattached` event after the restart), for 1, 50 and 200 workload allocs on
// one plugin; and the agent's CPU and memory with 50 plugins heartbeating at
// their default period. Run on purpose, as root, after `npm run build`:
//   node bench/restart/run.js [--sizes 1,50,200] [--plugins 50] [--idle-seconds 60]
require('reflect-metadata');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawn, execFileSync } = require('child_process');
const agentPkg = path.dirname(require.resolve('@csiplug/agent/package.json'));
const {
  ApiClient,
  hostpathPluginJobHcl,
  jobToDocument,
  parseJobspec,
  parseVolumeSpec,
  volumeHcl,
  volumeSpecToDocument,
  workloadJobHcl,
} = require('@csiplug/agent');
const { freePort, pollUntil } = require('@csiplug/agent/testing');
const until = (what, fn, timeoutMs = 300_000, every = 20) => pollUntil(what, fn, timeoutMs, every);
const BIN = path.join(agentPkg, 'dist', 'cli', 'bin.js');

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const SIZES = arg('sizes', '1,50,200').split(',').map(Number);
const PLUGINS = Number(arg('plugins', '50'));
const IDLE_SECONDS = Number(arg('idle-seconds', '60'));

const pluginJob = (id) => hostpathPluginJobHcl({ pluginId: id, jobId: `plugin-${id}` });
const workloadJob = (i) => workloadJobHcl(`work-${i}`, `vol-${i}`, 'echo $CSIPLUG_ALLOC_ID > $CSIPLUG_VOLUME_DATA/owner.txt && exec sleep 3600');
const volume = (i) => volumeHcl(`vol-${i}`);



class Agent {
  constructor() {
    this.root = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-bench-'));
    this.dataDir = path.join(this.root, 'data');
  }
  async start() {
    this.port ??= await freePort();
    const cfg = path.join(this.root, 'agent.hcl');
    fs.writeFileSync(cfg, `data_dir = "${this.dataDir}"\nport = ${this.port}\nlog_level = "error"\n`);
    this.api = new ApiClient({ address: `http://127.0.0.1:${this.port}` });
    const t0 = performance.now();
    this.proc = spawn(process.execPath, [BIN, 'agent', '-config', cfg], { stdio: 'ignore' });
    await until('agent API', async () => ((await this.api.health()).ok ? true : undefined), 60_000, 5);
    return t0;
  }
  async kill(sig = 'SIGKILL') {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const done = new Promise((r) => p.once('exit', r));
    p.kill(sig);
    await done;
  }
  async cleanup() {
    try {
      const jobs = await this.api.listJobs();
      await Promise.all(jobs.filter((j) => j.id.startsWith('work-')).map((j) => this.api.stopJob(j.id).catch(() => undefined)));
      await Promise.all(jobs.filter((j) => !j.id.startsWith('work-')).map((j) => this.api.stopJob(j.id).catch(() => undefined)));
    } catch {
      // agent gone
    }
    await this.kill('SIGTERM');
    for (const m of fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n').map((l) => l.split(' ')[4]).filter((m) => m && m.startsWith(this.root)).reverse()) {
      try {
        execFileSync('umount', ['-l', m]);
      } catch {
        // gone
      }
    }
    try {
      for (const pid of execFileSync('pgrep', ['-f', this.root]).toString().trim().split('\n').filter(Boolean)) process.kill(Number(pid), 'SIGKILL');
    } catch {
      // none
    }
    fs.rmSync(this.root, { recursive: true, force: true });
  }
}

async function restartRecovery(n) {
  const a = new Agent();
  try {
    await a.start();
    await a.api.runJob(jobToDocument(await parseJobspec(pluginJob('hostpath'), 'p.hcl')));
    await until('plugin', async () => ((await a.api.getPlugin('hostpath')).nodesHealthy === 1 ? true : undefined));
    for (let i = 0; i < n; i += 25) {
      await Promise.all(
        Array.from({ length: Math.min(25, n - i) }, async (_, k) => {
          await a.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volume(i + k), 'v.hcl')));
          await a.api.runJob(jobToDocument(await parseJobspec(workloadJob(i + k), 'w.hcl')));
        }),
      );
    }
    await until('all workloads running', async () => {
      const allocs = (await a.api.listAllocs()).filter((x) => x.jobId.startsWith('work-'));
      return allocs.length === n && allocs.every((x) => x.clientStatus === 'running' && x.volumes.data) ? true : undefined;
    });
    await a.kill('SIGKILL');
    const t0 = await a.start();
    const wall = Date.now() - 1;
    await until('every alloc re-attached with its volume checked', async () => {
      const allocs = (await a.api.listAllocs()).filter((x) => x.jobId.startsWith('work-'));
      const ok = allocs.filter((x) => x.clientStatus === 'running' && x.volumes.data && x.tasks.writer.events.some((e) => e.type === 'Reattached' && e.time >= wall - 5000));
      return ok.length === n ? true : undefined;
    }, 300_000, 5);
    const ms = performance.now() - t0;
    const restarts = (await a.api.listAllocs()).reduce((s, x) => s + Object.values(x.tasks).reduce((t, task) => t + task.restarts, 0), 0);
    return { n, ms, restarts };
  } finally {
    await a.cleanup();
  }
}

function procStat(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(f[11]) + Number(f[12]);
  const rss = Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) * 1024;
  return { ticks, rss };
}

async function idleCost(plugins, seconds) {
  const a = new Agent();
  try {
    await a.start();
    for (let i = 0; i < plugins; i += 10) {
      await Promise.all(Array.from({ length: Math.min(10, plugins - i) }, async (_, k) => a.api.runJob(jobToDocument(await parseJobspec(pluginJob(`hp-${i + k}`), 'p.hcl')))));
    }
    await until('all plugins healthy', async () => {
      const ps = await a.api.listPlugins();
      return ps.length === plugins && ps.every((p) => p.nodesHealthy === 1 && p.controllersHealthy === 1) ? true : undefined;
    });
    const hz = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
    const before = procStat(a.proc.pid);
    const t0 = Date.now();
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const after = procStat(a.proc.pid);
    const cpu = (after.ticks - before.ticks) / hz / ((Date.now() - t0) / 1000);
    return { plugins, seconds, cpuPct: cpu * 100, rssMB: after.rss / 1024 / 1024 };
  } finally {
    await a.cleanup();
  }
}

(async () => {
  if (process.getuid() !== 0) throw new Error('run as root (the hostpath plugin bind-mounts)');
  const rows = [];
  for (const n of SIZES) rows.push(await restartRecovery(n));
  console.log('| workload allocs on one plugin | kill -9 → every alloc re-attached, volumes checked (ms) | task restarts |');
  console.log('|---:|---:|---:|');
  for (const r of rows) console.log(`| ${r.n} | ${r.ms.toFixed(0)} | ${r.restarts} |`);
  if (PLUGINS > 0) {
    const idle = await idleCost(PLUGINS, IDLE_SECONDS);
    console.log('');
    console.log('| plugins heartbeating (default period) | window (s) | agent CPU (% of one core) | agent RSS (MB) |');
    console.log('|---:|---:|---:|---:|');
    console.log(`| ${idle.plugins} | ${idle.seconds} | ${idle.cpuPct.toFixed(2)} | ${idle.rssMB.toFixed(1)} |`);
  }
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
