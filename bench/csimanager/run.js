#!/usr/bin/env node
// Benchmark of @csiplug/csimanager, run on purpose (never by the tests):
//   node bench/csimanager/run.js [--quick]
// Needs root (real bind mounts) and built dists:
//   npx nx run-many -t build -p csimanager hostpath-plugin
//
// Measures, against the real hostpath plugin process:
//  - 200 volumes mounted concurrently on one plugin through the volume
//    manager's steps (stage + publish, mount table checks), through the
//    volume reconciler of @csiplug/volumes (claim + the same steps, each
//    intent persisted to a SQLite state file first — the whole path an
//    alloc's mount takes, which the manager alone took before issue 11) and
//    with the same CSI calls made directly with a CSIClient in the same run
//    (mkdir + NodeStageVolume + NodePublishVolume). Each round runs all
//    three, the order rotating; the median round is reported.
//  - one fingerprint round (Probe + NodeGetCapabilities per plugin) over
//    100 registered node plugins.
// Prints a markdown table; the numbers go in packages/csimanager/README.md.
'use strict';
require('reflect-metadata');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn, execFileSync } = require('node:child_process');
const { container } = require('tsyringe');
const core = require('../../packages/core/dist');
const csi = require('../../packages/csi/dist');
const state = require('../../packages/state/dist');
const registryPkg = require('../../packages/registry/dist');
const cm = require('../../packages/csimanager/dist');
const volumesPkg = require('../../packages/volumes/dist');

const quick = process.argv.includes('--quick');
const VOLUMES = 200;
const ROUNDS = quick ? 1 : 5;
const PLUGINS = 100;
const FP_ROUNDS = quick ? 3 : 10;
const usage = { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' };

if (process.getuid() !== 0) {
  console.error('bench/csimanager needs root: it makes real bind mounts');
  process.exit(2);
}

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-bench-csimanager-'));
const dataDir = path.join(tmp, 'data');
const socketPath = path.join(dataDir, 'plugins', 'bench-plugin', 'csi.sock');
let plugin;

function mountsUnder(dir) {
  return cm
    .parseMountInfo(fs.readFileSync('/proc/self/mountinfo', 'utf8'))
    .filter((m) => m.startsWith(dir + '/'))
    .sort((a, b) => b.length - a.length);
}

function cleanup() {
  for (const m of mountsUnder(tmp)) {
    try {
      execFileSync('umount', ['-l', m], { stdio: 'ignore' });
    } catch {
      /* reported below */
    }
  }
  if (plugin && plugin.exitCode === null) plugin.kill('SIGKILL');
  const left = mountsUnder(tmp);
  if (left.length) console.error(`warning: ${left.length} mounts left under ${tmp}`);
  else fs.rmSync(tmp, { recursive: true, force: true });
}
process.on('exit', cleanup);
process.on('SIGINT', () => process.exit(130));

async function startPlugin() {
  fs.mkdirSync(path.dirname(socketPath), { recursive: true, mode: 0o700 });
  const cli = path.join(__dirname, '../../packages/hostpath-plugin/dist/cli.js');
  plugin = spawn(
    process.execPath,
    [cli, '--endpoint', `unix://${socketPath}`, '--node-id', 'bench-node', '--state-dir', path.join(tmp, 'hp'), '--log-level', 'warn'],
    { stdio: 'inherit' },
  );
  const deadline = Date.now() + 15_000;
  while (!fs.existsSync(socketPath)) {
    if (Date.now() > deadline || plugin.exitCode !== null) throw new Error('the hostpath plugin did not start');
    await new Promise((r) => setTimeout(r, 20));
  }
}

function agent(opts = {}) {
  const c = container.createChildContainer();
  core.registerCore(c, { logger: new core.NullLogger(), heartbeat: { strategy: 'fixed', fingerprintInterval: 3_600_000 } });
  const db = state.openClientState({ path: path.join(dataDir, opts.stateName || 'state.db') });
  c.register(state.IClientStateDB, { useValue: db });
  state.bindStateStores(c);
  csi.registerCsi(c);
  registryPkg.registerRegistry(c);
  cm.registerCsiManager(c, { dataDir, resync: false });
  if (opts.claimer) {
    c.register(volumesPkg.IVolumeClaimer, { useValue: opts.claimer });
    volumesPkg.registerVolumeReconciler(c);
  }
  return {
    c,
    db,
    registry: c.resolve(registryPkg.IPluginRegistry),
    manager: c.resolve(cm.ICSIManager),
    factory: c.resolve(csi.ICSIClientFactory),
    async stop() {
      if (opts.claimer) c.resolve(volumesPkg.IVolumeReconciler).dispose();
      await this.manager.dispose();
      this.registry.dispose();
      db.dispose();
    },
  };
}

const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  await startPlugin();
  // The catalog's part of a mount is a claim; it is not what is measured here, so the claimer just grants it.
  const byId = new Map();
  const claimer = {
    lookup: async (id) => byId.get(id),
    claim: async (req) => ({ volume: byId.get(req.volumeId) }),
    release: async () => undefined,
  };
  const a = agent({ claimer });
  const base = path.join(dataDir, 'csi', 'node', 'bench');
  a.registry.register({
    type: 'csi-node',
    name: 'bench',
    allocId: 'bench-plugin',
    socketPath,
    options: { pluginType: 'node', stagePublishBaseDir: base },
  });
  await a.manager.start();
  await a.manager.waitForPlugin('csi-node', 'bench', 'prerun');
  const client = a.factory.createClient(socketPath);
  await client.nodeGetCapabilities();
  const cap = csi.mountCapability('SINGLE_NODE_WRITER');
  const volumes = [];
  for (let i = 0; i < VOLUMES; i++) {
    const res = await client.createVolume({ name: `bench-${i}`, volumeCapabilities: [cap] });
    volumes.push({ id: `vol-${i}`, externalId: res.volume.volumeId, pluginId: 'bench' });
    byId.set(`vol-${i}`, volumes[i]);
  }
  const reconciler = a.c.resolve(volumesPkg.IVolumeReconciler);
  reconciler.start();
  const vm = a.manager.volumeManager('bench');
  const mountTable = a.c.resolve(cm.IMountTable);
  const tableReads = [];

  const direct = [];
  const managed = [];
  const reconciled = [];
  const runDirect = async (round) => {
    // Direct: the same CSI calls the manager makes, on its own paths.
    const droot = path.join(dataDir, 'direct', String(round));
    const t0 = process.hrtime.bigint();
    await Promise.all(
      volumes.map(async (v) => {
        const staging = path.join(droot, 'staging', v.id, 'rw-file-system-single-node-writer');
        const allocDir = path.join(droot, 'per-alloc', 'alloc-d', v.id);
        await fs.promises.mkdir(staging, { recursive: true, mode: 0o700 });
        await client.nodeStageVolume({ volumeId: v.externalId, stagingTargetPath: staging, volumeCapability: cap });
        await fs.promises.mkdir(allocDir, { recursive: true, mode: 0o700 });
        await client.nodePublishVolume({
          volumeId: v.externalId,
          stagingTargetPath: staging,
          targetPath: path.join(allocDir, 'rw-file-system-single-node-writer'),
          volumeCapability: cap,
        });
      }),
    );
    direct.push(ms(t0));
    await Promise.all(
      volumes.map(async (v) => {
        await client.nodeUnpublishVolume({
          volumeId: v.externalId,
          targetPath: path.join(droot, 'per-alloc', 'alloc-d', v.id, 'rw-file-system-single-node-writer'),
        });
        await client.nodeUnstageVolume({
          volumeId: v.externalId,
          stagingTargetPath: path.join(droot, 'staging', v.id, 'rw-file-system-single-node-writer'),
        });
      }),
    );
  };
  const runManaged = async (round) => {
    // Through the volume manager.
    const alloc = { id: `alloc-m${round}` };
    const reads0 = mountTable.reads;
    const t0 = process.hrtime.bigint();
    // The steps the volume reconciler runs for one mount and one unmount.
    await Promise.all(
      volumes.map(async (v) => {
        if (await vm.requiresStaging()) await vm.stageVolume(v, usage);
        await vm.publishVolume(v, alloc.id, usage);
      }),
    );
    managed.push(ms(t0));
    tableReads.push(mountTable.reads - reads0);
    await Promise.all(
      volumes.map(async (v) => {
        await vm.unpublishVolume(v, alloc.id, usage);
        await vm.unstageVolume(v, usage);
      }),
    );
  };
  const runReconciled = async (round) => {
    // Through the volume reconciler: what the csi hook asks for an alloc's volumes.
    const allocId = `alloc-r${round}`;
    const t0 = process.hrtime.bigint();
    await Promise.all(volumes.map((v) => reconciler.mount({ allocId, name: v.id, volumeId: v.id, usage }, { phase: 'prerun' })));
    reconciled.push(ms(t0));
    const failed = (await reconciler.unmount(allocId)).filter((o) => o.error !== undefined);
    if (failed.length) throw new Error(`${failed.length} unmounts failed: ${failed[0].error}`);
  };
  // A warm-up of each, then rounds in rotating order so none always goes first.
  const sides = [runDirect, runManaged, runReconciled];
  for (const run of sides) await run('warm');
  direct.length = 0;
  managed.length = 0;
  reconciled.length = 0;
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < sides.length; k++) await sides[(round + k) % sides.length](round);
    if (process.env.BENCH_VERBOSE)
      console.error(
        `round ${round}: direct ${direct[round].toFixed(0)} ms, manager ${managed[round].toFixed(0)} ms, reconciler ${reconciled[round].toFixed(0)} ms`,
      );
  }
  client.dispose();
  const left = mountsUnder(tmp);
  if (left.length) throw new Error(`${left.length} mounts left after the mount rounds`);

  // Fingerprint rounds over 100 node plugins (all served by the one process).
  const f = agent({ stateName: 'fp.db' });
  for (let i = 0; i < PLUGINS; i++) f.registry.register({ type: 'csi-node', name: `p${i}`, allocId: `a${i}`, socketPath });
  await f.manager.start();
  await Promise.all(Array.from({ length: PLUGINS }, (_, i) => f.manager.waitForPlugin('csi-node', `p${i}`, 'prerun')));
  const fp = [];
  for (let r = 0; r < FP_ROUNDS; r++) {
    const t0 = process.hrtime.bigint();
    await f.manager.fingerprintAll();
    fp.push(ms(t0));
  }
  const healthy = f.manager.plugins('csi-node').filter((p) => p.healthy).length;
  await f.stop();
  await a.stop();

  const d = median(direct);
  const m = median(managed);
  const r = median(reconciled);
  const rate = (t) => ((VOLUMES / t) * 1000).toFixed(0);
  console.log(`csimanager bench — ${os.cpus().length} CPUs, Node ${process.version}, ${ROUNDS} round(s), median shown`);
  console.log('');
  console.log('| measurement | wall time | rate | notes |');
  console.log('|---|---:|---:|---|');
  console.log(
    `| ${VOLUMES} volumes mounted concurrently, direct CSI calls | ${d.toFixed(0)} ms | ${rate(d)} mounts/s | mkdir + NodeStageVolume + NodePublishVolume |`,
  );
  console.log(
    `| ${VOLUMES} volumes mounted concurrently, volume manager | ${m.toFixed(0)} ms | ${rate(m)} mounts/s | stage + publish steps, mount table checks (${median(tableReads)} reads of mountinfo), events |`,
  );
  console.log(
    `| ${VOLUMES} volumes mounted concurrently, volume reconciler | ${r.toFixed(0)} ms | ${rate(r)} mounts/s | + claim, each intent persisted (SQLite) before its step |`,
  );
  const paired = median(managed.map((x, i) => x / direct[i]));
  console.log(`| manager / direct, ratio of medians | ${(m / d).toFixed(2)}× | | target ≤ 1.20× |`);
  console.log(`| manager / direct, median of per-round ratios | ${paired.toFixed(2)}× | | each round runs all three, order rotating |`);
  console.log(
    `| reconciler / direct, ratio of medians | ${(r / d).toFixed(2)}× | | median of per-round ratios ${median(reconciled.map((x, i) => x / direct[i])).toFixed(2)}× |`,
  );
  console.log(
    `| fingerprint round, ${PLUGINS} node plugins | ${median(fp).toFixed(1)} ms | | Probe + NodeGetCapabilities each; ${healthy}/${PLUGINS} healthy |`,
  );
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
