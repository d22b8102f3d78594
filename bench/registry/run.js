#!/usr/bin/env node
// Benchmark of @csiplug/registry, run on purpose (never by the tests):
//   node bench/registry/run.js [--quick]
// Builds are needed first: npx nx build registry
//
// Measures
//  - wake-up: time from register() returning to a waiter's continuation
//    running (and from register() being called, which includes the write);
//  - registrations persisted per second, into a SQLite-backed state file;
//  - restore time of a registry holding 1,000 plugins.
// Prints a markdown table; the numbers go in packages/registry/README.md.
'use strict';
require('reflect-metadata');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { RealClock, NullLogger, DefaultTimeoutPolicy } = require('../../packages/core/dist');
const state = require('../../packages/state/dist');
const { DynamicPluginRegistry, PluginDispenserTable, StateRegistryStore } = require('../../packages/registry/dist');

const quick = process.argv.includes('--quick');
const WAKE_ROUNDS = quick ? 2_000 : 20_000;
const PERSIST_N = 1_000;
const RESTORE_N = 1_000;
const RESTORE_ROUNDS = quick ? 5 : 30;

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-bench-registry-'));
process.on('exit', () => fs.rmSync(tmp, { recursive: true, force: true }));

/** The state store under test: the real ClientStateDB on a SQLite file. */
function openState(file) {
  return { kind: 'ClientStateDB (openClientState, SQLite file)', db: state.openClientState({ path: file }) };
}

function newRegistry(db) {
  return new DynamicPluginRegistry(
    new StateRegistryStore(db),
    new RealClock(),
    new NullLogger(),
    new DefaultTimeoutPolicy(),
    new PluginDispenserTable(),
    {},
  );
}

const ns = () => process.hrtime.bigint();
const ms = (a, b) => Number(b - a) / 1e6;
function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}
const fmtMs = (x) => (x < 0.1 ? `${(x * 1000).toFixed(1)} µs` : `${x.toFixed(2)} ms`);

function reg(i, name = `plugin-${i}`, alloc = `alloc-${i}`) {
  return {
    type: 'csi-node',
    name,
    version: '1.0.0',
    allocId: alloc,
    socketPath: `/var/lib/csiplug/plugins/${alloc}/csi.sock`,
    options: { mountPoint: '/csi' },
  };
}

async function benchWake(db) {
  const registry = newRegistry(db);
  const afterReturn = [];
  const fromCall = [];
  for (let i = 0; i < WAKE_ROUNDS; i++) {
    let woke = 0n;
    // The waiter is an async function awaiting the registry, as a hook is.
    const waiter = (async () => {
      await registry.waitForPlugin('csi-node', 'hostpath', { timeout: 60_000 });
      woke = ns();
    })();
    const called = ns();
    registry.register(reg(i, 'hostpath'));
    const returned = ns();
    await waiter;
    afterReturn.push(ms(returned, woke));
    fromCall.push(ms(called, woke));
    registry.deregister('csi-node', 'hostpath', `alloc-${i}`);
  }
  registry.dispose();
  return { afterReturn, fromCall };
}

function benchPersist(db) {
  const registry = newRegistry(db);
  let t0 = ns();
  for (let i = 0; i < PERSIST_N; i++) registry.register(reg(i));
  const grow = PERSIST_N / (ms(t0, ns()) / 1000);
  // Steady state: every write carries the whole 1,000-plugin registry.
  t0 = ns();
  for (let i = 0; i < PERSIST_N; i++) registry.register({ ...reg(i), socketPath: `/var/lib/csiplug/plugins/alloc-${i}/csi-2.sock` });
  const steady = PERSIST_N / (ms(t0, ns()) / 1000);
  registry.dispose();
  return { grow, steady };
}

function benchRestore(db) {
  // 1,000 plugins: 800 names with one alloc, 100 names with two.
  const seed = newRegistry(db);
  for (let i = 0; i < 800; i++) seed.register(reg(i));
  for (let i = 0; i < 100; i++) {
    seed.register(reg(i, `multi-${i}`, `alloc-a${i}`));
    seed.register(reg(i, `multi-${i}`, `alloc-b${i}`));
  }
  seed.dispose();
  const times = [];
  let count = 0;
  for (let r = 0; r < RESTORE_ROUNDS; r++) {
    const t0 = ns();
    const registry = newRegistry(db);
    times.push(ms(t0, ns()));
    count = registry.list('csi-node').reduce((n, p) => n + registry.registrations('csi-node', p.name).length, 0);
    registry.dispose();
  }
  if (count !== RESTORE_N) throw new Error(`restored ${count} registrations, expected ${RESTORE_N}`);
  return times;
}

(async () => {
  const wakeState = openState(path.join(tmp, 'wake.db'));
  const wake = await benchWake(wakeState.db);
  wakeState.db.dispose();
  const persistState = openState(path.join(tmp, 'persist.db'));
  const persist = benchPersist(persistState.db);
  persistState.db.dispose();
  const restoreState = openState(path.join(tmp, 'restore.db'));
  const restore = benchRestore(restoreState.db);
  restoreState.db.dispose();

  const rows = [
    ['wake-up, `register()` returned → waiter continues, p50', fmtMs(pct(wake.afterReturn, 50)), '≤ 1 ms'],
    ['wake-up, `register()` returned → waiter continues, p99', fmtMs(pct(wake.afterReturn, 99)), ''],
    ['wake-up, `register()` called (incl. the write) → waiter continues, p50', fmtMs(pct(wake.fromCall, 50)), ''],
    ['wake-up, `register()` called (incl. the write) → waiter continues, p99', fmtMs(pct(wake.fromCall, 99)), ''],
    [
      `registrations persisted / s, growing 0 → ${PERSIST_N.toLocaleString('en-US')} plugins`,
      Math.round(persist.grow).toLocaleString('en-US'),
      '',
    ],
    [
      `registrations persisted / s, updates with ${PERSIST_N.toLocaleString('en-US')} plugins present`,
      Math.round(persist.steady).toLocaleString('en-US'),
      '',
    ],
    [`restore of ${RESTORE_N.toLocaleString('en-US')} plugins, p50`, fmtMs(pct(restore, 50)), '≤ 50 ms'],
    [`restore of ${RESTORE_N.toLocaleString('en-US')} plugins, max`, fmtMs(Math.max(...restore)), ''],
  ];
  console.log(`node ${process.version}, ${os.cpus()[0]?.model ?? 'cpu'} ×${os.cpus().length}, ${os.platform()}`);
  console.log(`store: ${wakeState.kind}; wake-up rounds: ${WAKE_ROUNDS}, restore rounds: ${RESTORE_ROUNDS}\n`);
  console.log('| measure | result | target |');
  console.log('|---|---|---|');
  for (const [m, r, t] of rows) console.log(`| ${m} | ${r} | ${t} |`);
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
