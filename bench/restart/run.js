#!/usr/bin/env node
// bench/restart: after `kill -9` of the agent, the time from the new agent's
// start (its process spawned) to every workload alloc re-attached with its
// volume checked, for workload allocs spread over hostpath plugin instances
// (each alloc one task and one CSI volume); and the agent's CPU and memory
// with 50 plugins heartbeating at their default period. Run on purpose, as
// root, after `npm run build`:
//   node bench/restart/run.js [--sizes 1x1,50x1,200x1,200x10,1000x10] [--runs 3]
//                             [--plugins 50] [--idle-seconds 60]
//                             [--profile DIR [--profile-size 1000x10]] [--json FILE]
// A size is ALLOCSxPLUGINS (a bare number means one plugin). Each size runs
// --runs times, sizes taking turns so a burst of load elsewhere on the
// machine spreads over all of them; the table gives the median and range.
//
// "Re-attached with its volume checked" is read from what the agent exposes,
// its event stream, which the bench reads from the moment the API takes a
// connection (EventWatch). Re-attached: the alloc's task says `Reattached`
// (also in alloc status); the runner says it once the alloc's prerun returned
// — the csi hook's restore `mount`, which keeps a mount the mount table still
// lists without waiting for the plugin — and the driver found the task alive.
// Checked: once the volume's node plugin serves again, the volume reconciler
// looks at every live mount published through it (a stat, the mount table,
// NodeGetVolumeStats) and says "Volume checked" (on the stream only). The
// end of the window is the newest of those stamps (the agent's clock, the
// same as ours); the bench asks the agent nothing while it restores. After
// the window it checks what the events claim: every volume's host path is a
// mount point and no task was started again; it counts the volumes found
// stale and mounted again.
//
// --profile DIR: one more cycle of the profile size whose restarted agent runs
// under `node --cpu-prof` with log_level "info" (its JSON log in DIR); prints
// the costliest functions of the restore window and when each step of the
// restore ended, from the log's timestamps (profile.js reads both).
require('reflect-metadata');
const fs = require('fs');
const http = require('http');
const os = require('os');
const path = require('path');
const { processesUnder } = require('../processes');
const { spawn, execFileSync } = require('child_process');
const agentPkg = path.dirname(require.resolve('@csiplug/agent/package.json'));
const { ApiClient, decodeEvents } = require('@csiplug/api/client');
const { jobToNomadJson, parseJobspec, parseVolumeSpec, volumeSpecToDocument } = require('@csiplug/jobspec');
const { hostpathPluginJobHcl, volumeHcl, workloadJobHcl } = require('@csiplug/agent');
const { freePort, pollUntil } = require('@csiplug/agent/testing');
const { summariseProfile, restoreSteps } = require('./profile');
const until = (what, fn, timeoutMs = 300_000, every = 20) => pollUntil(what, fn, timeoutMs, every);
const BIN = path.join(agentPkg, 'dist', 'bin.js');

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
/** "1000x10" → { allocs: 1000, plugins: 10 }; "200" → one plugin. */
const parseSize = (s) => {
  const m = /^(\d+)(?:x(\d+))?$/.exec(s.trim());
  if (!m || Number(m[1]) < 1 || (m[2] !== undefined && Number(m[2]) < 1))
    throw new Error(`--sizes: "${s}" is not ALLOCS or ALLOCSxPLUGINS (e.g. 1000x10)`);
  return { allocs: Number(m[1]), plugins: Number(m[2] ?? 1) };
};
const SIZES = arg('sizes', '1x1,50x1,200x1,200x10,1000x10').split(',').map(parseSize);
const RUNS = Number(arg('runs', '3'));
const PLUGINS = Number(arg('plugins', '50'));
const IDLE_SECONDS = Number(arg('idle-seconds', '60'));
/** Issue 15's targets: an idle agent with no plugins, and one with up to 50 plugins heartbeating. */
const RSS_TARGET_IDLE_MB = 70;
const RSS_TARGET_50_PLUGINS_MB = 90;
const PROFILE_DIR = arg('profile', undefined);
/** Where to write every run's figures as JSON (for a later look), if anywhere. */
const JSON_OUT = arg('json', undefined);
const PROFILE_SIZE = parseSize(arg('profile-size', `${SIZES.at(-1).allocs}x${SIZES.at(-1).plugins}`));
/** Concurrent API calls while setting up; the API takes at most 100 connections per client. */
const BATCH = 25;
const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

const pluginIds = (plugins) => (plugins === 1 ? ['hostpath'] : Array.from({ length: plugins }, (_, k) => `hp-${k}`));
const pluginJob = (id) => hostpathPluginJobHcl({ pluginId: id, jobId: `plugin-${id}` });
const workloadJob = (i) =>
  workloadJobHcl(`work-${i}`, `vol-${i}`, 'echo $CSIPLUG_ALLOC_ID > $CSIPLUG_VOLUME_DATA/owner.txt && exec sleep 3600');
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

class Agent {
  constructor() {
    this.root = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-bench-'));
    this.dataDir = path.join(this.root, 'data');
    /** The agent's CLI; another build's may be given, to compare two builds on one setup. */
    this.bin = BIN;
  }
  /**
   * Spawns the agent; resolves when its API answers, with the spawn's times.
   * `profile` runs it under --cpu-prof with an info log. `watch` subscribes
   * to its event stream at the first moment the API takes a connection
   * (EventWatch), before anything else is asked of it.
   */
  async start(profile, watch) {
    this.port ??= await freePort();
    const cfg = path.join(this.root, 'agent.hcl');
    // The plugin and workload jobs are raw_exec, which the agent runs only when its config enables it.
    fs.writeFileSync(
      cfg,
      `data_dir = "${this.dataDir}"\nport = ${this.port}\nlog_level = "${profile ? 'info' : 'error'}"\nplugin "raw_exec" {\n  config {\n    enabled = true\n  }\n}\n`,
    );
    this.api = new ApiClient({ address: `http://127.0.0.1:${this.port}` });
    const nodeArgs = profile ? ['--cpu-prof', `--cpu-prof-dir=${profile.dir}`, '--cpu-prof-interval', '250'] : [];
    const stderr = profile ? fs.openSync(profile.log, 'w') : 'ignore';
    const wall = Date.now();
    const t0 = performance.now();
    this.proc = spawn(process.execPath, [...nodeArgs, this.bin, 'agent', '-config', cfg], { stdio: ['ignore', 'ignore', stderr] });
    if (typeof stderr === 'number') fs.closeSync(stderr);
    if (watch) await until('agent event stream', async () => ((await watch.connect(this.port)) ? true : undefined), 60_000, 2);
    const health = await until(
      'agent API',
      async () => {
        const h = await this.api.health().catch(() => undefined);
        return h?.ok ? h : undefined;
      },
      60_000,
      5,
    );
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
        for (let i = 0; i < ids.length; i += BATCH)
          await Promise.all(ids.slice(i, i + BATCH).map((id) => this.api.stopJob(id).catch(() => undefined)));
      };
      await stop(jobs.filter((j) => j.id.startsWith('work-')).map((j) => j.id));
      await until(
        'workloads stopped',
        async () =>
          (await this.api.listAllocs()).filter(isWorkload).every((x) => x.clientStatus === 'complete' || x.clientStatus === 'failed')
            ? true
            : undefined,
        300_000,
        200,
      ).catch(() => undefined);
      await stop(jobs.filter((j) => !j.id.startsWith('work-')).map((j) => j.id));
    } catch {
      // agent gone
    }
    await this.kill('SIGTERM');
    const leakedMounts = mountPoints()
      .filter((m) => m.startsWith(this.root + '/'))
      .reverse();
    for (const m of leakedMounts) {
      try {
        execFileSync('umount', ['-l', m]);
      } catch {
        // gone
      }
    }
    // Containers of isolated tasks whose bundle is under our root (the exec driver's default runc root).
    let leakedContainers = 0;
    try {
      const list =
        JSON.parse(
          execFileSync('runc', ['--root', '/run/csiplug/runc', 'list', '--format', 'json'], {
            stdio: ['ignore', 'pipe', 'ignore'],
          }).toString() || 'null',
        ) ?? [];
      for (const c of list.filter((x) => x.bundle.startsWith(this.root + '/'))) {
        leakedContainers++;
        execFileSync('runc', ['--root', '/run/csiplug/runc', 'delete', '--force', c.id], { stdio: 'ignore' });
      }
    } catch {
      // no runc, or no containers
    }
    if (leakedContainers) console.error(`bench cleanup: ${leakedContainers} containers were left under ${this.root}; removed`);
    const leakedProcs = processesUnder(this.root);
    for (const pid of leakedProcs) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    if (leakedMounts.length || leakedProcs.length)
      console.error(
        `bench cleanup: ${leakedMounts.length} mounts and ${leakedProcs.length} processes were left under ${this.root}; removed`,
      );
    fs.rmSync(this.root, { recursive: true, force: true });
    return { leakedMounts: leakedMounts.length, leakedProcs: leakedProcs.length };
  }
}

/** Plugins, volumes and workloads of one size, every alloc running with its volume. */
async function setUp(a, { allocs, plugins }) {
  const ids = pluginIds(plugins);
  await Promise.all(ids.map(async (id) => a.api.runJob(jobToNomadJson(await parseJobspec(pluginJob(id), 'p.hcl')))));
  await until('plugins healthy', async () =>
    (await a.api.listPlugins()).filter((p) => ids.includes(p.id) && p.nodesHealthy === 1 && p.controllersHealthy === 1).length ===
    ids.length
      ? true
      : undefined,
  );
  // A batch at a time, each running before the next: a thousand executors
  // spawned at once on two cores would overrun the driver's start timeout.
  for (let i = 0; i < allocs; i += BATCH) {
    const batch = Array.from({ length: Math.min(BATCH, allocs - i) }, (_, k) => i + k);
    await Promise.all(
      batch.map(async (j) => {
        await a.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeHcl(`vol-${j}`, ids[j % ids.length]), 'v.hcl')));
        await a.api.runJob(jobToNomadJson(await parseJobspec(workloadJob(j), 'w.hcl')));
      }),
    );
    await until(`workloads ${i}..${i + batch.length - 1} running`, async () => {
      const running = (await a.api.listAllocs()).filter((x) => isWorkload(x) && x.clientStatus === 'running' && x.volumes.data);
      return running.length === i + batch.length ? true : undefined;
    });
  }
  // The restart is measured in a steady state: every job's deployment is
  // over (an alloc counts as healthy after min_healthy_time, 10 s by
  // default; a deployment cut short would be resumed by the next agent), and
  // the last starts have settled (executor records, the plugins' own writes).
  await until(
    'deployments finished',
    async () => ((await a.api.listJobs()).every((j) => j.deployment?.status !== 'running') ? true : undefined),
    300_000,
    500,
  );
  await new Promise((r) => setTimeout(r, 1_000));
}

/**
 * What the restarted agent says on its event stream about the workloads'
 * volumes: the volume reconciler's look at each live mount once its plugin
 * serves ("Volume checked"; "Volume stale", then "Volume remounted" or
 * "Volume remount failed"), and any "Volume mounted" (a mount made again).
 * These events are on the stream only (not in `alloc status`), and the
 * stream has no replay: an event sent before the subscription is lost. The
 * events are numbered from 1 per agent run, so `missed` says how many were
 * sent before the bench was subscribed (0: it saw everything).
 */
class EventWatch {
  constructor() {
    this.checked = new Map();
    this.reattached = new Map();
    this.counts = { stale: 0, remounted: 0, remountFailed: 0, mounted: 0, keptPluginAway: 0 };
    this.missed = undefined;
    this.staleWhy = [];
    this.abort = new AbortController();
  }
  /** Opens the stream (GET /v1/event/stream, one Nomad Events envelope a line); false while the agent does not take connections yet. */
  connect(port) {
    return new Promise((resolve) => {
      const req = http.get({ host: '127.0.0.1', port, path: '/v1/event/stream', signal: this.abort.signal }, (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          return resolve(false);
        }
        res.setEncoding('utf8');
        let pending = '';
        res.on('data', (chunk) => {
          pending += chunk;
          let nl;
          while ((nl = pending.indexOf('\n')) >= 0) {
            const line = pending.slice(0, nl).trim();
            pending = pending.slice(nl + 1);
            if (line && line !== '{}') for (const e of decodeEvents(JSON.parse(line))) this.take(e);
          }
        });
        res.on('error', () => undefined);
        resolve(true);
      });
      req.on('error', () => resolve(false));
    });
  }
  take(e) {
    this.missed ??= e.index - 1;
    if (e.topic !== 'Task' || !e.allocId) return;
    const at = (type) => e.type === type;
    if (at('Reattached')) this.reattached.set(e.allocId, e.time);
    if (at('Volume checked') || at('Volume remounted')) this.checked.set(e.allocId, Math.max(this.checked.get(e.allocId) ?? 0, e.time));
    if (at('Volume stale')) {
      this.counts.stale++;
      // Why, for the report: a live mount taken for stale while its plugin serves is worth a look.
      if (this.staleWhy.length < 5) this.staleWhy.push(e.message);
    }
    if (at('Volume remounted')) this.counts.remounted++;
    if (at('Volume remount failed')) this.counts.remountFailed++;
    if (at('Volume mounted')) this.counts.mounted++;
    if (at('Volume kept, plugin away')) this.counts.keptPluginAway++;
  }
  /** What alloc status says of one alloc since `since`, for what the stream could not see. */
  takeStatus(x, since) {
    for (const e of x.tasks.writer.events) {
      if (e.time < since) continue;
      if (e.type === 'Reattached' && !this.reattached.has(x.id)) this.reattached.set(x.id, e.time);
      if ((e.type === 'Volume checked' || e.type === 'Volume remounted') && !this.checked.has(x.id)) this.checked.set(x.id, e.time);
    }
  }
  stop() {
    this.abort.abort();
  }
}

/** One kill -9 cycle; `profile` for the profiled cycle. */
async function restartRecovery(size, profile) {
  const a = new Agent();
  const { allocs: n } = size;
  try {
    await a.start();
    await setUp(a, size);
    const ids = (await a.api.listAllocs()).filter(isWorkload).map((x) => x.id);
    await a.kill('SIGKILL');
    const watch = new EventWatch();
    const s = await a.start(profile, watch);
    // Done when every alloc's task said Reattached and the reconciler said
    // its volume was checked. Both are read from the stream as they come, so
    // the bench asks the agent nothing while it restores (alloc status of a
    // thousand allocs is a megabyte of JSON). Only should the stream have
    // missed the first events (see EventWatch) does it look at alloc status,
    // once nothing new has come for a second (less often after a look that found
    // nothing), for what it could not see (the task events there include
    // Reattached, and the volume checks where the agent saves alloc hook
    // events with the task's). Checks may come long after the re-attaches
    // (each plugin's mounts are looked at once it serves): the bench waits
    // for them as long as they keep coming, and gives up only after two
    // minutes without a new one (a plugin's checks are reported together
    // when its whole look is done, which took tens of seconds at a thousand
    // mounts), reporting the run with the checks it saw.
    let lastLook = 0;
    let lookEvery = 1_000;
    let lastProgress = performance.now();
    let seenCount = -1;
    const missing = () => ids.filter((id) => !watch.reattached.has(id) || !watch.checked.has(id));
    await until(
      'every alloc re-attached and its volume checked',
      async () => {
        // Only once nothing new has come for a while, and less often after a
        // look that found nothing: a look at alloc status (a megabyte of JSON
        // at a thousand allocs) costs the agent CPU that would otherwise count
        // against the restore it is measuring.
        if (missing().length && watch.missed > 0 && performance.now() - lastLook > lookEvery && performance.now() - lastProgress > 1_000) {
          lastLook = performance.now();
          const before = missing().length;
          for (const x of await a.api.listAllocs()) if (ids.includes(x.id)) watch.takeStatus(x, s.wall);
          lookEvery = missing().length < before ? 1_000 : Math.min(lookEvery * 2, 30_000);
        }
        const left = missing().length;
        if (left === 0) return true;
        if (watch.reattached.size + watch.checked.size !== seenCount) {
          seenCount = watch.reattached.size + watch.checked.size;
          lastProgress = performance.now();
        }
        return ids.every((id) => watch.reattached.has(id)) && performance.now() - lastProgress > 120_000 ? true : undefined;
      },
      600_000,
      20,
    );
    const seenMs = performance.now() - s.t0;
    // The agent's own CPU time up to here: on a busy machine the wall time
    // also counts the time the agent waited for a core; this does not.
    const cpuMs = (procStat(a.proc.pid).ticks / CLK_TCK) * 1000;
    watch.stop();
    // What the events claim, checked against the host.
    const after = (await a.api.listAllocs()).filter(isWorkload);
    const mounted = new Set(mountPoints());
    const notMounted = after.filter((x) => !mounted.has(x.volumes.data.hostPath)).length;
    const since = (x, type) => x.tasks.writer.events.filter((e) => e.type === type && e.time >= s.wall).length;
    const started = after.reduce((k, x) => k + since(x, 'Started') + since(x, 'Restarting'), 0);
    if (notMounted) throw new Error(`${notMounted} of ${n} allocs report a volume that is not a mount point on the host`);
    for (const why of watch.staleWhy) console.error(`  volume found stale: ${why}`);
    const attachTimes = ids.map((id) => watch.reattached.get(id));
    const checkTimes = ids.map((id) => watch.checked.get(id)).filter((t) => t !== undefined);
    const row = {
      ...size,
      apiMs: s.apiMs,
      modulesMs: s.startedAt - s.wall,
      firstMs: Math.min(...attachTimes) - s.wall,
      attachedMs: Math.max(...attachTimes) - s.wall,
      doneMs: Math.max(...attachTimes, ...checkTimes) - s.wall,
      seenMs,
      cpuMs,
      started,
      checkedSeen: checkTimes.length,
      missedEvents: watch.missed ?? 0,
      ...watch.counts,
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
      await Promise.all(
        Array.from({ length: Math.min(10, plugins - i) }, async (_, k) =>
          a.api.runJob(jobToNomadJson(await parseJobspec(pluginJob(`hp-${i + k}`), 'p.hcl'))),
        ),
      );
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
  console.log(
    `restart bench — ${os.cpus().length} CPUs, Node ${process.version}, ${RUNS} run(s) per size: median (min–max), ms from the new agent's spawn`,
  );
  console.log('');
  console.log(
    '| workload allocs | plugins | modules started | API answers | first alloc re-attached | every alloc re-attached | **every volume checked** | agent CPU time by then | checks seen on the stream | tasks started again | volumes stale / mounted again |',
  );
  console.log('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const { size, rows } of results) {
    const col = (k) => fmt(rows.map((x) => x[k]));
    const sum = (k) => rows.reduce((s, x) => s + x[k], 0);
    const seen = `${sum('checkedSeen')} of ${size.allocs * rows.length}${sum('missedEvents') ? ` (${sum('missedEvents')} events sent before the bench subscribed)` : ''}`;
    console.log(
      `| ${size.allocs} | ${size.plugins} | ${col('modulesMs')} | ${col('apiMs')} | ${col('firstMs')} | ${col('attachedMs')} | **${col('doneMs')}** | ${col('cpuMs')} | ${seen} | ${sum('started')} | ${sum('stale')} / ${sum('mounted') + sum('remounted')} |`,
    );
  }
  // Per-alloc cost: what each alloc adds over the fixed cost of a start (the
  // 1-alloc size when it ran, else nothing), from the medians — for the whole
  // window and for each step of it, so that a step that grows faster than
  // the allocs shows as a per-alloc cost that rises with the size.
  const base = results.find((r) => r.size.allocs === 1);
  const steps = [
    ['modulesMs', 'modules started'],
    ['apiMs', 'API answers'],
    ['attachedMs', 'every alloc re-attached'],
    ['doneMs', 'every volume checked'],
    ['cpuMs', 'agent CPU time'],
  ];
  const perAlloc = (r, key) => {
    const fixed = base ? median(base.rows.map((x) => x[key])) : 0;
    return (median(r.rows.map((x) => x[key])) - fixed) / (r.size.allocs - (base ? 1 : 0));
  };
  const larger = results.filter((r) => r.size.allocs > 1);
  if (larger.length) {
    console.log('');
    console.log(`per-alloc cost (ms per alloc, from the medians, ${base ? 'over the 1-alloc start' : 'whole time / allocs'}):`);
    console.log('');
    console.log(`| workload allocs | plugins | ${steps.map(([, label]) => label).join(' | ')} |`);
    console.log(`|---:|---:|${steps.map(() => '---:').join('|')}|`);
    for (const r of larger)
      console.log(`| ${r.size.allocs} | ${r.size.plugins} | ${steps.map(([key]) => perAlloc(r, key).toFixed(2)).join(' | ')} |`);
    for (const plugins of new Set(larger.map((r) => r.size.plugins))) {
      const same = larger.filter((r) => r.size.plugins === plugins).sort((x, y) => x.size.allocs - y.size.allocs);
      if (same.length < 2) continue;
      const lo = same[0];
      const hi = same.at(-1);
      const ratios = steps.map(([key, label]) => `${label} ${(perAlloc(hi, key) / perAlloc(lo, key)).toFixed(2)}×`).join(', ');
      console.log('');
      console.log(
        `per-alloc cost at ${hi.size.allocs} vs ${lo.size.allocs} allocs on ${plugins} plugin(s) (1× is linear, above it grows faster): ${ratios}`,
      );
    }
  }
}

module.exports = { Agent, EventWatch, setUp, mountPoints, processesUnder, procStat, isWorkload, median, CLK_TCK };

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
      console.error(
        `run ${run + 1}/${RUNS} ${row.allocs}x${row.plugins}: API ${row.apiMs.toFixed(0)} ms, all re-attached ${row.attachedMs.toFixed(0)} ms, all checked ${row.doneMs.toFixed(0)} ms ` +
          `(seen ${row.seenMs.toFixed(0)} ms, agent CPU ${row.cpuMs.toFixed(0)} ms, ${row.checkedSeen} checks seen, ${row.missedEvents} events missed)`,
      );
    }
  }
  if (JSON_OUT) fs.writeFileSync(JSON_OUT, JSON.stringify(results, null, 1));
  if (RUNS > 0) printTables(results);

  if (PROFILE_DIR) {
    fs.mkdirSync(PROFILE_DIR, { recursive: true });
    const log = path.join(PROFILE_DIR, 'agent.log');
    const row = await restartRecovery(PROFILE_SIZE, { dir: PROFILE_DIR, log });
    const cpuprofile = fs
      .readdirSync(PROFILE_DIR)
      .filter((f) => f.endsWith('.cpuprofile'))
      .map((f) => path.join(PROFILE_DIR, f))
      .sort((x, y) => fs.statSync(y).mtimeMs - fs.statSync(x).mtimeMs)[0];
    console.log('');
    console.log(
      `profiled cycle, ${row.allocs}x${row.plugins}: every alloc re-attached and its volume checked at ${row.doneMs.toFixed(0)} ms (under --cpu-prof and an info log, so slower than above)`,
    );
    console.log('');
    console.log(restoreSteps(log, row.profile.wall, row.doneMs));
    console.log('');
    console.log(summariseProfile(cpuprofile, row.doneMs, 25));
    console.log('');
    console.log(`(read again: node bench/restart/profile.js ${cpuprofile} ${row.doneMs.toFixed(0)} ${log} ${row.profile.wall})`);
  }

  // Idle cost: an agent with no plugins, then with --plugins heartbeating; RSS beside its target (issue 15).
  const rows = [await idleCost(0, IDLE_SECONDS)];
  if (PLUGINS > 0) rows.push(await idleCost(PLUGINS, IDLE_SECONDS));
  console.log('');
  console.log(
    '| plugins heartbeating (default period) | window (s) | agent CPU (% of one core) | agent RSS (MB) | RSS target (MB) | met |',
  );
  console.log('|---:|---:|---:|---:|---:|:---:|');
  for (const idle of rows) {
    const target = idle.plugins === 0 ? RSS_TARGET_IDLE_MB : idle.plugins <= 50 ? RSS_TARGET_50_PLUGINS_MB : undefined;
    const met = target === undefined ? '' : idle.rssMB <= target ? 'yes' : 'NO';
    console.log(`| ${idle.plugins} | ${idle.seconds} | ${idle.cpuPct.toFixed(2)} | ${idle.rssMB.toFixed(1)} | ${target ?? '–'} | ${met} |`);
  }
}
