#!/usr/bin/env node
// Benchmark (run on purpose): Probe and NodeGetInfo round trips over a unix
// socket to the hostpath plugin process, through @csiplug/csi's CSIClient and
// through a bare grpc-js client making the same calls (same proto, same
// loader options, a deadline on every call), interleaved in one run.
//
//   npx nx run-many -t build -p core csi hostpath-plugin && node bench/csi/run.js [callsPerCell]
//
// Prints a markdown table: p50, p99 (microseconds) and calls/s per method
// and client, and our overhead (ratio of p50s and of throughputs).
'use strict';
require('reflect-metadata');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const { DefaultTimeoutPolicy, RealClock, MathRandom } = require('@csiplug/core');
const { GrpcCSIClient, csiGrpcObject } = require('@csiplug/csi');

const CALLS = Number(process.argv[2] || 5000);
const BATCH = 250;
const root = path.resolve(__dirname, '..', '..');
const cli = path.join(root, 'packages', 'hostpath-plugin', 'dist', 'cli.js');

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-bench-'));
  const sock = path.join(dir, 'csi.sock');
  const plugin = spawn(
    process.execPath,
    [cli, '--endpoint', `unix://${sock}`, '--node-id', 'bench', '--state-dir', path.join(dir, 'state'), '--log-level', 'error'],
    { stdio: 'inherit' },
  );
  const ours = new GrpcCSIClient(`unix://${sock}`, {
    timeouts: new DefaultTimeoutPolicy(),
    clock: new RealClock(),
    random: new MathRandom(),
  });
  const v1 = csiGrpcObject().csi.v1;
  const bareIdentity = new v1.Identity(`unix:${sock}`, grpc.credentials.createInsecure());
  const bareNode = new v1.Node(`unix:${sock}`, grpc.credentials.createInsecure());
  const bareCall = (c, m, timeout) =>
    new Promise((resolve, reject) => c[m]({}, { deadline: new Date(Date.now() + timeout) }, (e, r) => (e ? reject(e) : resolve(r))));

  try {
    for (let i = 0; ; i++) {
      try {
        await ours.probe({ retry: { maxAttempts: 1 } });
        break;
      } catch (e) {
        if (i > 200) throw e;
        await new Promise((r) => setTimeout(r, 25));
      }
    }
    const cells = {
      'Probe / csiplug CSIClient': () => ours.probe(),
      'Probe / bare grpc-js': () => bareCall(bareIdentity, 'Probe', 5_000),
      'NodeGetInfo / csiplug CSIClient': () => ours.nodeGetInfo(),
      'NodeGetInfo / bare grpc-js': () => bareCall(bareNode, 'NodeGetInfo', 120_000),
    };
    const samples = Object.fromEntries(Object.keys(cells).map((k) => [k, []]));
    const elapsed = Object.fromEntries(Object.keys(cells).map((k) => [k, 0n]));
    // warm-up
    for (const fn of Object.values(cells)) for (let i = 0; i < 500; i++) await fn();
    // interleave batches so drift (GC, CPU frequency) hits every cell alike
    const names = Object.keys(cells);
    for (let done = 0; done < CALLS; done += BATCH) {
      const order = (done / BATCH) % 2 === 0 ? names : [...names].reverse();
      for (const name of order) {
        const fn = cells[name];
        const t0 = process.hrtime.bigint();
        for (let i = 0; i < BATCH; i++) {
          const s = process.hrtime.bigint();
          await fn();
          samples[name].push(Number(process.hrtime.bigint() - s) / 1000);
        }
        elapsed[name] += process.hrtime.bigint() - t0;
      }
    }
    const rows = [];
    const stats = {};
    for (const name of names) {
      const s = samples[name].sort((a, b) => a - b);
      stats[name] = { p50: percentile(s, 50), p99: percentile(s, 99), rate: s.length / (Number(elapsed[name]) / 1e9) };
    }
    console.log(
      `\n${CALLS} calls per cell, batches of ${BATCH}, interleaved; node ${process.version}, ${os.cpus().length} CPUs (${os.cpus()[0].model.trim()})\n`,
    );
    console.log('| RPC | client | p50 (µs) | p99 (µs) | calls/s | overhead vs bare (p50 / throughput) |');
    console.log('|---|---|---:|---:|---:|---:|');
    for (const rpc of ['Probe', 'NodeGetInfo']) {
      const o = stats[`${rpc} / csiplug CSIClient`];
      const b = stats[`${rpc} / bare grpc-js`];
      rows.push(`| ${rpc} | bare grpc-js | ${b.p50.toFixed(0)} | ${b.p99.toFixed(0)} | ${b.rate.toFixed(0)} | 1.00× |`);
      rows.push(
        `| ${rpc} | csiplug CSIClient | ${o.p50.toFixed(0)} | ${o.p99.toFixed(0)} | ${o.rate.toFixed(0)} | ${(o.p50 / b.p50).toFixed(2)}× / ${(b.rate / o.rate).toFixed(2)}× |`,
      );
    }
    console.log(rows.join('\n'));
  } finally {
    ours.dispose();
    bareIdentity.close();
    bareNode.close();
    plugin.kill('SIGTERM');
    await new Promise((r) => plugin.once('exit', r));
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
