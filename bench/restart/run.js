#!/usr/bin/env node
// bench/restart: after `kill -9` of the agent, the time from the new agent's
// start (its process spawned) to every workload alloc re-attached with its
// volume checked, for workload allocs spread over hostpath plugin instances
// (each alloc one task and one CSI volume); and the agent's CPU and memory
// with 50 plugins heartbeating at their default period. Run on purpose, as
// root, after `npm run build`:
//   node bench/restart/run.js [--sizes 1x1,50x1,200x1,200x10,1000x10] [--runs 3]
//                             [--plugins 50] [--idle-seconds 60]
//                             [--profile DIR [--profile-size 1000x10]]
// A size is ALLOCSxPLUGINS (a bare number means one plugin). Each size runs
// --runs times, sizes taking turns so a burst of load elsewhere on the
// machine spreads over all of them; the table gives the median and range.
//
// "Re-attached with its volume checked" is read from what the agent exposes:
// each alloc's task has a `Reattached` event stamped after the spawn. The
// runner emits it only once the alloc's prerun returned — the csi hook's
// restore `mount`, which waits for the node plugin and checks the live mount
// against the mount table (or mounts it again) — and the driver found the
// task alive. The end of the window is the newest of those stamps (the
// agent's clock, the same as ours); the client only polls to learn that all
// are there, every 100 ms so its polling costs the agent little. After the
// window the bench checks what the events claim: every volume's host path is
// a mount point, no task was started again, no volume was mounted again.
//
// --profile DIR: one more cycle of the profile size whose restarted agent runs
// under `node --cpu-prof` with log_level "info" (its JSON log in DIR); prints
// the costliest functions of the restore window and when each step of the
// restore ended, from the log's timestamps (profile.js reads both).
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
const { summariseProfile, restoreSteps } = require('./profile');
const until = (what, fn, timeoutMs = 300_000, every = 20) => pollUntil(what, fn, timeoutMs, every);
const BIN = path.join(agentPkg, 'dist', 'cli', 'bin.js');

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
/** "1000x10" → { allocs: 1000, plugins: 10 }; "200" → one plugin. */
const parseSize = (s) => {
  const m = /^(\d+)(?:x(\d+))?$/.exec(s.trim());
  if (!m || Number(m[1]) < 1 || (m[2] !== undefined && Number(m[2]) < 1)) throw new Error(`--sizes: "${s}" is not ALLOCS or ALLOCSxPLUGINS (e.g. 1000x10)`);
  return { allocs: Number(m[1]), plugins: Number(m[2] ?? 1) };
};
const SIZES = arg('sizes', '1x1,50x1,200x1,200x10,1000x10').split(',').map(parseSize);
const RUNS = Number(arg('runs', '3'));
const PLUGINS = Number(arg('plugins', '50'));
const IDLE_SECONDS = Number(arg('idle-seconds', '60'));
const PROFILE_DIR = arg('profile', undefined);
const PROFILE_SIZE = parseSize(arg('profile-size', `${SIZES.at(-1).allocs}x${SIZES.at(-1).plugins}`));
/** Concurrent API calls while setting up; the API takes at most 100 connections per client. */
const BATCH = 25;
/** ms between the client's looks at the allocs during the window. */
const POLL_MS = 100;
const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

const pluginIds = (plugins) => (plugins === 1 ? ['hostpath'] : Array.from({ length: plugins }, (_, k) => `hp-${k}`));
const pluginJob = (id) => hostpathPluginJobHcl({ pluginId: id, jobId: `plugin-${id}` });
const workloadJob = (i) => workloadJobHcl(`work-${i}`, `vol-${i}`, 'echo $CSIPLUG_ALLOC_ID > $CSIPLUG_VOLUME_DATA/owner.txt && exec sleep 3600');
const isWorkload = (x) => x.jobId.startsWith('work-');
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function mountPoints() {
  return fs
    .readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4])
    .filter(Boolean)
    .map((m) => m.replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8))));
}

/** Pids of processes whose command line or working directory lies under `dir` (tasks run in their task dir). */
function processesUnder(dir) {
  const pids = [];
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
    try {
      const cwd = fs.readlinkSync(`/proc/${e}/cwd`);
      const cmd = fs.readFileSync(`/proc/${e}/cmdline`, 'utf8');
      if (cwd === dir || cwd.startsWith(dir + '/') || cmd.includes(dir)) pids.push(Number(e));
    } catch {
      // gone, or a kernel thread
    }
  }
  return pids;
}

class Agent {
  constructor() {
    this.root = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-bench-'));
    this.dataDir = path.join(this.root, 'data');
  }
  /** Spawns the agent; resolves when its API answers, with the spawn's times. `profile` runs it under --cpu-prof with an info log. */
  async start(profile) {
    this.port ??= await freePort();
    const cfg = path.join(this.root, 'agent.hcl');
    fs.writeFileSync(cfg, `data_dir = "${this.dataDir}"\nport = ${this.port}\nlog_level = "${profile ? 'info' : 'error'}"\n`);
    this.api = new ApiClient({ address: `http://127.0.0.1:${this.port}` });
    const nodeArgs = profile ? ['--cpu-prof', `--cpu-prof-dir=${profile.dir}`, '--cpu-prof-interval', '250'] : [];
    const stderr = profile ? fs.openSync(profile.log, 'w') : 'ignore';
    const wall = Date.now();
    const t0 = performance.now();
    this.proc = spawn(process.execPath, [...nodeArgs, BIN, 'agent', '-config', cfg], { stdio: ['ignore', 'ignore', stderr] });
    if (typeof stderr === 'number') fs.closeSync(stderr);
    const health = await until('agent API', async () => {
      const h = await this.api.health().catch(() => undefined);
      return h?.ok ? h : undefined;
    }, 60_000, 5);
    return { t0, wall, apiMs: performance.now() - t0, startedAt: health.startedAt };
  }
  async kill(sig = 'SIGKILL') {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const done = new Promise((r) => p.once('exit', r));
    p.kill(sig);
    await done;
  }
  /**
   * Stops the workloads (in batches, as they were started: the API takes at
   * most 100 connections per client, and a stop refused with 503 left its
   * task running after the agent and its executor were killed), waits for
   * them, stops the plugins, stops the agent, then sweeps: whatever is still
   * mounted or running under the bench's dir is a leak, reported and removed.
   */
  async cleanup() {
    try {
      const jobs = await this.api.listJobs();
      const stop = async (ids) => {
        for (let i = 0; i < ids.length; i += BATCH) await Promise.all(ids.slice(i, i + BATCH).map((id) => this.api.stopJob(id).catch(() => undefined)));
      };
      await stop(jobs.filter((j) => j.id.startsWith('work-')).map((j) => j.id));
      await until('workloads stopped', async () => ((await this.api.listAllocs()).filter(isWorkload).every((x) => x.clientStatus === 'complete' || x.clientStatus === 'failed') ? true : undefined), 300_000, 200).catch(() => undefined);
      await stop(jobs.filter((j) => !j.id.startsWith('work-')).map((j) => j.id));
    } catch {
      // agent gone
    }
    await this.kill('SIGTERM');
    const leakedMounts = mountPoints().filter((m) => m.startsWith(this.root + '/')).reverse();
    for (const m of leakedMounts) {
      try {
        execFileSync('umount', ['-l', m]);
      } catch {
        // gone
      }
    }
    const leakedProcs = processesUnder(this.root);
    for (const pid of leakedProcs) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    if (leakedMounts.length || leakedProcs.length) console.error(`bench cleanup: ${leakedMounts.length} mounts and ${leakedProcs.length} processes were left under ${this.root}; removed`);
    fs.rmSync(this.root, { recursive: true, force: true });
    return { leakedMounts: leakedMounts.length, leakedProcs: leakedProcs.length };
  }
}

/** Plugins, volumes and workloads of one size, every alloc running with its volume. */
async function setUp(a, { allocs, plugins }) {
  const ids = pluginIds(plugins);
  await Promise.all(ids.map(async (id) => a.api.runJob(jobToDocument(await parseJobspec(pluginJob(id), 'p.hcl')))));
  await until('plugins healthy', async () => ((await a.api.listPlugins()).filter((p) => ids.includes(p.id) && p.nodesHealthy === 1 && p.controllersHealthy === 1).length === ids.length ? true : undefined));
  // A batch at a time, each running before the next: a thousand executors
  // spawned at once on two cores would overrun the driver's start timeout.
  for (let i = 0; i < allocs; i += BATCH) {
    const batch = Array.from({ length: Math.min(BATCH, allocs - i) }, (_, k) => i + k);
    await Promise.all(
      batch.map(async (j) => {
        await a.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeHcl(`vol-${j}`, ids[j % ids.length]), 'v.hcl')));
        await a.api.runJob(jobToDocument(await parseJobspec(workloadJob(j), 'w.hcl')));
      }),
    );
    await until(`workloads ${i}..${i + batch.length - 1} running`, async () => {
      const running = (await a.api.listAllocs()).filter((x) => isWorkload(x) && x.clientStatus === 'running' && x.volumes.data);
      return running.length === i + batch.length ? true : undefined;
    });
  }
  // Let the last starts settle (executor records, the plugins' own writes)
  // so the restart does not compete with the tail of the setup.
  await new Promise((r) => setTimeout(r, 1_000));
}

/** When this alloc was re-attached with its volume checked by the agent spawned at `since` (its Reattached stamp), or undefined. */
function restoredAt(x, since) {
  if (x.clientStatus !== 'running' || !x.volumes.data) return undefined;
  const e = x.tasks.writer.events.find((ev) => ev.type === 'Reattached' && ev.time >= since);
  return e?.time;
}

/** One kill -9 cycle; `profile` for the profiled cycle. */
async function restartRecovery(size, profile) {
  const a = new Agent();
  const { allocs: n } = size;
  try {
    await a.start();
    await setUp(a, size);
    await a.kill('SIGKILL');
    const s = await a.start(profile);
    let stamps;
    await until('every alloc re-attached with its volume checked', async () => {
      const all = (await a.api.listAllocs()).filter(isWorkload);
      const at = all.map((x) => restoredAt(x, s.wall)).filter((t) => t !== undefined);
      if (at.length !== n) return undefined;
      stamps = at;
      return true;
    }, 300_000, POLL_MS);
    const seenMs = performance.now() - s.t0;
    // The agent's own CPU time up to here: on a busy machine the wall time
    // also counts the time the agent waited for a core; this does not.
    const cpuMs = (procStat(a.proc.pid).ticks / CLK_TCK) * 1000;
    // What the events claim, checked against the host.
    const after = (await a.api.listAllocs()).filter(isWorkload);
    const mounted = new Set(mountPoints());
    const notMounted = after.filter((x) => !mounted.has(x.volumes.data.hostPath)).length;
    const since = (x, type) => x.tasks.writer.events.filter((e) => e.type === type && e.time >= s.wall).length;
    const started = after.reduce((k, x) => k + since(x, 'Started') + since(x, 'Restarting'), 0);
    const remounted = after.reduce((k, x) => k + since(x, 'Volume mounted'), 0);
    if (notMounted) throw new Error(`${notMounted} of ${n} allocs report a volume that is not a mount point on the host`);
    const row = {
      ...size,
      apiMs: s.apiMs,
      modulesMs: s.startedAt - s.wall,
      firstMs: Math.min(...stamps) - s.wall,
      doneMs: Math.max(...stamps) - s.wall,
      seenMs,
      cpuMs,
      started,
      remounted,
    };
    if (profile) {
      // A graceful stop writes the CPU profile; the tasks keep running for the cleanup agent.
      await a.kill('SIGTERM');
      await a.start();
      row.profile = { windowMs: row.doneMs, log: profile.log, dir: profile.dir, wall: s.wall };
    }
    return row;
  } finally {
    const leaks = await a.cleanup();
    if (leaks.leakedMounts || leaks.leakedProcs) process.exitCode = 1;
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
    const hz = CLK_TCK;
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

const fmt = (xs) => {
  const m = median(xs);
  return xs.length > 1 ? `${m.toFixed(0)} (${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)})` : m.toFixed(0);
};

/** The table of one bench run: each size's median and range, then the per-alloc costs. */
function printTables(results) {
  console.log(`restart bench — ${os.cpus().length} CPUs, Node ${process.version}, ${RUNS} run(s) per size: median (min–max), ms from the new agent's spawn`);
  console.log('');
  console.log('| workload allocs | plugins | modules started | API answers | first alloc re-attached | **every alloc re-attached, volumes checked** | seen by the polling client | agent CPU time by then | tasks started again | volumes mounted again |');
  console.log('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const { size, rows } of results) {
    const col = (k) => fmt(rows.map((x) => x[k]));
    const sum = (k) => rows.reduce((s, x) => s + x[k], 0);
    console.log(`| ${size.allocs} | ${size.plugins} | ${col('modulesMs')} | ${col('apiMs')} | ${col('firstMs')} | **${col('doneMs')}** | ${col('seenMs')} | ${col('cpuMs')} | ${sum('started')} | ${sum('remounted')} |`);
  }
  // Per-alloc cost: what each alloc adds over the fixed cost of a start (the
  // 1-alloc size when it ran, else nothing), from the medians.
  const base = results.find((r) => r.size.allocs === 1);
  const fixed = base ? median(base.rows.map((x) => x.doneMs)) : 0;
  const perAlloc = results
    .filter((r) => r.size.allocs > 1)
    .map((r) => ({ size: r.size, ms: (median(r.rows.map((x) => x.doneMs)) - fixed) / (r.size.allocs - (base ? 1 : 0)), each: r.rows.map((x) => (x.doneMs - fixed) / (r.size.allocs - (base ? 1 : 0))) }));
  if (perAlloc.length) {
    console.log('');
    console.log(`| workload allocs | plugins | per-alloc cost (ms), ${base ? `over the 1-alloc start (${fixed.toFixed(0)} ms)` : 'whole window / allocs'} | range over runs |`);
    console.log('|---:|---:|---:|---:|');
    for (const p of perAlloc) console.log(`| ${p.size.allocs} | ${p.size.plugins} | ${p.ms.toFixed(2)} | ${Math.min(...p.each).toFixed(2)}–${Math.max(...p.each).toFixed(2)} |`);
    const same = (plugins) => perAlloc.filter((p) => p.size.plugins === plugins).sort((x, y) => x.size.allocs - y.size.allocs);
    for (const plugins of new Set(perAlloc.map((p) => p.size.plugins))) {
      const s = same(plugins);
      if (s.length < 2) continue;
      const lo = s[0];
      const hi = s.at(-1);
      console.log(`per-alloc cost on ${plugins} plugin(s), ${hi.size.allocs} vs ${lo.size.allocs} allocs: ${(hi.ms / lo.ms).toFixed(2)}× (1× is linear)`);
    }
  }
}

module.exports = { Agent, setUp, restoredAt, mountPoints, processesUnder, procStat, isWorkload, median, CLK_TCK, POLL_MS };

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}

async function main() {
  if (process.getuid() !== 0) throw new Error('run as root (the hostpath plugin bind-mounts)');
  const results = SIZES.map((size) => ({ size, rows: [] }));
  for (let run = 0; run < RUNS; run++) {
    for (const r of results) {
      const row = await restartRecovery(r.size);
      r.rows.push(row);
      console.error(`run ${run + 1}/${RUNS} ${row.allocs}x${row.plugins}: API ${row.apiMs.toFixed(0)} ms, all re-attached ${row.doneMs.toFixed(0)} ms (seen ${row.seenMs.toFixed(0)} ms, agent CPU ${row.cpuMs.toFixed(0)} ms)`);
    }
  }
  if (RUNS > 0) printTables(results);

  if (PROFILE_DIR) {
    fs.mkdirSync(PROFILE_DIR, { recursive: true });
    const log = path.join(PROFILE_DIR, 'agent.log');
    const row = await restartRecovery(PROFILE_SIZE, { dir: PROFILE_DIR, log });
    const cpuprofile = fs.readdirSync(PROFILE_DIR).filter((f) => f.endsWith('.cpuprofile')).map((f) => path.join(PROFILE_DIR, f)).sort((x, y) => fs.statSync(y).mtimeMs - fs.statSync(x).mtimeMs)[0];
    console.log('');
    console.log(`profiled cycle, ${row.allocs}x${row.plugins}: every alloc re-attached at ${row.doneMs.toFixed(0)} ms (under --cpu-prof and an info log, so slower than above)`);
    console.log('');
    console.log(restoreSteps(log, row.profile.wall, row.doneMs));
    console.log('');
    console.log(summariseProfile(cpuprofile, row.doneMs, 25));
    console.log('');
    console.log(`(read again: node bench/restart/profile.js ${cpuprofile} ${row.doneMs.toFixed(0)} ${log} ${row.profile.wall})`);
  }

  if (PLUGINS > 0) {
    const idle = await idleCost(PLUGINS, IDLE_SECONDS);
    console.log('');
    console.log('| plugins heartbeating (default period) | window (s) | agent CPU (% of one core) | agent RSS (MB) |');
    console.log('|---:|---:|---:|---:|');
    console.log(`| ${idle.plugins} | ${idle.seconds} | ${idle.cpuPct.toFixed(2)} | ${idle.rssMB.toFixed(1)} |`);
  }
}
