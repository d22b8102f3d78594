#!/usr/bin/env node
// bench/hooks: time from a plugin's socket appearing to the plugin being
// registered and healthy, through the real csi_plugin_supervisor hook, the
// real registry and a real hostpath plugin process. Run on purpose:
//   node bench/hooks/run.js [iterations]
// Needs built packages (npm run build) and root (the plugin may mount).
require('reflect-metadata');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawn } = require('child_process');
const core = require('@csiplug/core');
const { openClientState } = require('@csiplug/state');
const { DynamicPluginRegistry, PluginDispenserTable, StateRegistryStore } = require('@csiplug/registry');
const { GrpcCSIClient } = require('@csiplug/csi');
const { CSIPluginSupervisorHook, parseCsiPluginConfig } = require('@csiplug/hooks');

const CLI = path.join(path.dirname(require.resolve('@csiplug/hostpath-plugin/package.json')), 'dist', 'cli.js');
const iterations = Number(process.argv[2] ?? 30);

function pct(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function waitReady(endpoint) {
  const c = new GrpcCSIClient(endpoint, {
    timeouts: new core.DefaultTimeoutPolicy(),
    clock: new core.RealClock(),
    random: new core.MathRandom(),
  });
  try {
    for (let i = 0; i < 200; i++) {
      try {
        await c.probe({ retry: { maxAttempts: 1 } });
        // a few more calls so the plugin's own first-call costs are paid
        for (let j = 0; j < 5; j++) await c.probe();
        await c.getPluginInfo();
        return;
      } catch {
        await new Promise((r) => setTimeout(r, 20));
      }
    }
    throw new Error('plugin never became ready');
  } finally {
    c.dispose();
  }
}

/**
 * One run. `warm`: the plugin is started and warmed up on a socket elsewhere
 * first, and its socket is then renamed into place, so the figure is the
 * supervisor's own latency, without the plugin process's cold start.
 */
async function once(strategy, pluginArgs, warm = false) {
  const clock = new core.RealClock();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-bench-hooks-'));
  const state = openClientState({ memory: true });
  const timeouts = new core.DefaultTimeoutPolicy();
  const registry = new DynamicPluginRegistry(
    new StateRegistryStore(state),
    clock,
    new core.NullLogger(),
    timeouts,
    new PluginDispenserTable(),
    {},
  );
  const random = new core.MathRandom();
  const clients = { createClient: (endpoint) => new GrpcCSIClient(endpoint, { timeouts, clock, random }) };
  const config = parseCsiPluginConfig({ id: 'hostpath', type: 'monolith' }, 'bench');
  const hook = new CSIPluginSupervisorHook(config, dataDir, registry, clients, clock, strategy, timeouts, new core.NullLogger());
  const events = [];
  const ctx = {
    alloc: { id: 'alloc-bench', jobId: 'plugin', group: 'g', volumes: [] },
    task: { name: 'plugin', env: {} },
    kind: 'start',
    signal: new AbortController().signal,
    emitEvent: (e) => events.push(e),
    requestRestart: (why) => events.push({ type: 'restart', message: why }),
  };
  const { env } = await hook.prestart(ctx);
  const socket = env.CSI_ENDPOINT.slice('unix://'.length);
  let socketAt;
  const watcher = fs.watch(path.dirname(socket), () => {
    if (socketAt === undefined && fs.existsSync(socket)) socketAt = performance.now();
  });
  let registeredAt;
  const sub = registry.onDidRegister((e) => {
    if (e.plugin.type === 'csi-node' && registeredAt === undefined) registeredAt = performance.now();
  });
  const warmSocket = path.join(dataDir, 'warm.sock');
  const proc = spawn(
    process.execPath,
    [CLI, '--node-id', 'n1', '--state-dir', path.join(dataDir, 'hp'), '--log-level', 'error', ...pluginArgs],
    {
      env: { ...process.env, ...env, ...(warm ? { CSI_ENDPOINT: `unix://${warmSocket}` } : {}) },
      stdio: 'ignore',
    },
  );
  try {
    if (warm) await waitReady(`unix://${warmSocket}`);
    const post = hook.poststart(ctx);
    if (warm) {
      socketAt = performance.now();
      fs.renameSync(warmSocket, socket);
    }
    await post;
    if (registeredAt === undefined) throw new Error(`plugin not registered: ${JSON.stringify(events)}`);
    return registeredAt - socketAt;
  } finally {
    watcher.close();
    sub.dispose();
    await hook.stop(ctx);
    proc.kill('SIGTERM');
    await new Promise((r) => proc.once('exit', r));
    registry.dispose();
    state.dispose();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

async function series(label, makeStrategy, pluginArgs, n, warm = false) {
  const samples = [];
  for (let i = 0; i < n; i++) samples.push(await once(makeStrategy(), pluginArgs, warm));
  samples.sort((a, b) => a - b);
  return { label, n, p50: pct(samples, 50), p99: pct(samples, 99) };
}

(async () => {
  const rows = [
    await series(
      'backoff (default), warm plugin: supervisor latency alone',
      () => new core.BackoffHeartbeatStrategy(),
      [],
      iterations,
      true,
    ),
    await series(
      'backoff (default), fresh plugin process (includes its cold start)',
      () => new core.BackoffHeartbeatStrategy(),
      [],
      iterations,
    ),
    await series(
      'backoff (default), fresh plugin, probe not ready for 50 ms',
      () => new core.BackoffHeartbeatStrategy(),
      ['--probe-not-ready-ms', '50'],
      iterations,
    ),
    await series(
      'fixed 5 s (Nomad), fresh plugin, probe not ready for 50 ms',
      () => new core.FixedHeartbeatStrategy({ startupMax: 5000 }),
      ['--probe-not-ready-ms', '50'],
      Math.min(3, iterations),
    ),
  ];
  console.log('| strategy and plugin | runs | socket → registered, p50 (ms) | p99 (ms) |');
  console.log('|---|---:|---:|---:|');
  for (const r of rows) console.log(`| ${r.label} | ${r.n} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} |`);
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
