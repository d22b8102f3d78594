#!/usr/bin/env node
// bench/cluster (run on purpose, as root, after `npm run build`): what a
// volume claim costs in cluster mode against the local catalog alone.
//
//   node bench/cluster/run.js [--claims 300]
//
// Everything is real: a 3-member etcd cluster on loopback (Debian's
// etcd-server), a SQLite state file, the hostpath plugin over its unix
// socket (registered and fingerprinted; like csi-driver-host-path it has no
// ControllerPublish, so a claim makes no call to it).
// Rows, each a claim then a release of one single-node-writer volume by a
// new alloc, --claims times:
//   - local catalog: VolumeCatalog.claim / release (what an agent on its own does);
//   - etcd alone: EtcdVolumeClaims.claim / release (one read and one
//     compare-and-swap transaction each);
//   - cluster claimer: ClusterVolumeClaimer (etcd first, then the local
//     catalog), what an agent in cluster mode does.
// Prints p50/p99 of each claim and release (ms) beside issue 16's target
// (claim through etcd p50 ≤ 5 ms on loopback).
//
// Then, on the same etcd, placement.js's rows: a job of 300 allocs placed
// and run across 3 real agents, and the time from kill -9 of an agent to its
// allocs running elsewhere (with and without a CSI volume); its flags
// (--count, --failover-count, --no-volume) work here too, and
// --no-scheduling leaves those rows out. Its header has the figures.
'use strict';
require('reflect-metadata');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { container: root } = require('tsyringe');
const { MemoryLogger, RealClock, registerCore } = require('@csiplug/core');
const { registerCsi } = require('@csiplug/csi');
const { ICSIManager, PLUGIN_OPTION_PLUGIN_TYPE, PLUGIN_OPTION_STAGE_PUBLISH_BASE, registerCsiManager } = require('@csiplug/csimanager');
const { IPluginRegistry, registerRegistry } = require('@csiplug/registry');
const { IClientStateDB, bindStateStores, openClientState } = require('@csiplug/state');
const { IVolumeCatalog, IVolumeSpecValidator, registerVolumeCatalog } = require('@csiplug/volumes');
const { ClusterVolumeClaimer, EtcdVolumeClaims, connectEtcd } = require('@csiplug/cluster');
const { EtcdTestCluster } = require('@csiplug/cluster/testing');
const { volumeHcl } = require('@csiplug/agent');
const { checkVolumeSpec, parseVolumeSpec } = require('@csiplug/jobspec');
const { spawn } = require('node:child_process');
const net = require('node:net');
const { benchScheduling } = require('./placement');

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : dflt;
};
const CLAIMS = Number(arg('claims', '300'));
const TARGET_CLAIM_P50_MS = 5;

const HOSTPATH_CLI = path.resolve(__dirname, '..', '..', 'packages', 'hostpath-plugin', 'dist', 'cli.js');

function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

async function timed(fn) {
  const t0 = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

function accepts(socketPath) {
  return new Promise((resolve) => {
    const s = net.connect(socketPath);
    s.once('connect', () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });
}

async function startPlugin(dir) {
  const socketPath = path.join(dir, 'csi.sock');
  const child = spawn(
    process.execPath,
    [
      HOSTPATH_CLI,
      '--endpoint',
      `unix://${socketPath}`,
      '--node-id',
      'bench-node',
      '--state-dir',
      path.join(dir, 'plugin-state'),
      '--mode',
      'monolith',
      '--log-level',
      'warn',
    ],
    { stdio: 'ignore' },
  );
  const deadline = Date.now() + 15_000;
  while (!(await accepts(socketPath))) {
    if (Date.now() > deadline) throw new Error('the hostpath plugin did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
  return { socketPath, stop: () => child.kill('SIGKILL') };
}

async function main() {
  if (!fs.existsSync(HOSTPATH_CLI)) throw new Error('build first: npm run build');
  const etcd = await EtcdTestCluster.start(3);
  try {
    await claimRows(etcd);
    if (process.argv.includes('--no-scheduling')) return;
    const lines = await benchScheduling(etcd.endpoints, { onSignal: () => etcd.stop() });
    console.log('');
    for (const l of lines) console.log(l);
  } finally {
    await etcd.stop();
  }
}

/** The claim rows: prints their table. */
async function claimRows(etcd) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-bench-cluster-'));
  const plugin = await startPlugin(dir);
  const c = root.createChildContainer();
  registerCore(c, { logger: new MemoryLogger() });
  const db = openClientState({ path: path.join(dir, 'state.db') });
  c.register(IClientStateDB, { useValue: db });
  bindStateStores(c);
  registerCsi(c);
  registerRegistry(c);
  registerCsiManager(c, { dataDir: dir });
  c.register(IVolumeSpecValidator, { useValue: checkVolumeSpec });
  registerVolumeCatalog(c);
  const registry = c.resolve(IPluginRegistry);
  const manager = c.resolve(ICSIManager);
  const catalog = c.resolve(IVolumeCatalog);
  const conn = connectEtcd({ endpoints: etcd.endpoints, prefix: 'bench/', dialTimeoutMs: 2_000 });
  try {
    await manager.start();
    const options = {
      [PLUGIN_OPTION_PLUGIN_TYPE]: 'monolith',
      [PLUGIN_OPTION_STAGE_PUBLISH_BASE]: path.join(dir, 'csi', 'monolith', 'hostpath'),
    };
    for (const type of ['csi-controller', 'csi-node'])
      registry.register({ type, name: 'hostpath', version: '0.1.0', allocId: 'plugin-alloc', socketPath: plugin.socketPath, options });
    await manager.waitForPlugin('csi-controller', 'hostpath', 'prerun');
    await manager.waitForPlugin('csi-node', 'hostpath', 'prerun');
    for (const id of ['local', 'cluster']) await catalog.createVolume(await parseVolumeSpec(volumeHcl(id), `${id}.hcl`));
    const etcdClaims = new EtcdVolumeClaims(conn, () => Date.now());
    const clusterClaimer = new ClusterVolumeClaimer(() => catalog, etcdClaims, 'bench-node');
    const request = (volumeId, allocId) => ({
      volumeId,
      allocId,
      accessMode: 'single-node-writer',
      attachmentMode: 'file-system',
      readOnly: false,
    });
    const volumeFor = (id) => ({ id, capabilities: [{ accessMode: 'single-node-writer', attachmentMode: 'file-system' }] });

    const rows = [];
    const run = async (name, claim, release) => {
      const claims = [];
      const releases = [];
      // A few rounds first: connections, the JIT.
      for (let i = 0; i < 20; i++) {
        await claim(`warm-${i}`);
        await release(`warm-${i}`);
      }
      for (let i = 0; i < CLAIMS; i++) {
        claims.push(await timed(() => claim(`a-${i}`)));
        releases.push(await timed(() => release(`a-${i}`)));
      }
      rows.push({ name, claims, releases });
    };
    await run(
      'local catalog (SQLite)',
      (a) => catalog.claim(request('local', a)),
      (a) => catalog.release('local', a),
    );
    await run(
      'etcd alone (read + compare-and-swap)',
      (a) => etcdClaims.claim(volumeFor('etcd-only'), request('etcd-only', a), 'bench-node'),
      (a) => etcdClaims.release('etcd-only', a),
    );
    await run(
      'cluster claimer (etcd, then the local catalog)',
      (a) => clusterClaimer.claim(request('cluster', a)),
      (a) => clusterClaimer.release('cluster', a),
    );

    console.log(
      `cluster bench — ${os.cpus().length} CPUs, Node ${process.version}, etcd 3-member on loopback, ${CLAIMS} claims and releases per row (ms)`,
    );
    console.log('');
    console.log('| claim path | claim p50 | claim p99 | release p50 | release p99 |');
    console.log('|---|---:|---:|---:|---:|');
    for (const r of rows)
      console.log(
        `| ${r.name} | ${pct(r.claims, 50).toFixed(2)} | ${pct(r.claims, 99).toFixed(2)} | ${pct(r.releases, 50).toFixed(2)} | ${pct(r.releases, 99).toFixed(2)} |`,
      );
    const etcdRow = rows[1];
    console.log('');
    console.log(
      `target: a claim through etcd p50 ≤ ${TARGET_CLAIM_P50_MS} ms on loopback — ${pct(etcdRow.claims, 50) <= TARGET_CLAIM_P50_MS ? 'met' : 'NOT met'} (${pct(etcdRow.claims, 50).toFixed(2)} ms)`,
    );
  } finally {
    conn.close();
    await manager.dispose().catch(() => undefined);
    registry.dispose();
    db.dispose();
    plugin.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
