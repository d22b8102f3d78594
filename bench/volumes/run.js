#!/usr/bin/env node
// Benchmark (run on purpose): the volume operations of the hostpath plugin
// over its unix socket, through @csiplug/csi's CSIClient — CreateSnapshot,
// CreateVolume from that snapshot (restore), CreateVolume as a clone, and
// NodeGetVolumeStats (which walks the volume to measure it against its
// capacity) — for volumes of a few sizes.
//
//   npx nx run-many -t build -p core csi hostpath-plugin && node bench/volumes/run.js [files,MiB ...]
//
// Each size is "files,MiB": that many files sharing that many MiB, in 100
// directories. Prints a markdown table of milliseconds per operation (the
// median of 3 runs; stats: of 10).
'use strict';
require('reflect-metadata');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { DefaultTimeoutPolicy, RealClock, MathRandom } = require('@csiplug/core');
const { GrpcCSIClient } = require('@csiplug/csi');

const root = path.resolve(__dirname, '..', '..');
const cli = path.join(root, 'packages', 'hostpath-plugin', 'dist', 'cli.js');
const sizes = (process.argv.slice(2).length ? process.argv.slice(2) : ['100,10', '10000,100', '100000,200']).map((s) => {
  const [files, mib] = s.split(',').map(Number);
  if (!Number.isInteger(files) || files < 1 || !(mib > 0)) throw new Error(`a size is "files,MiB", got "${s}"`);
  return { files, mib };
});
const MiB = 1024 * 1024;
const RW = { accessMode: { mode: 'SINGLE_NODE_WRITER' }, mount: {} };

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
async function timed(fn) {
  const t0 = process.hrtime.bigint();
  const value = await fn();
  return { ms: Number(process.hrtime.bigint() - t0) / 1e6, value };
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-bench-volumes-'));
  const sock = path.join(dir, 'csi.sock');
  const state = path.join(dir, 'state');
  const plugin = spawn(
    process.execPath,
    [cli, '--endpoint', `unix://${sock}`, '--node-id', 'bench', '--state-dir', state, '--log-level', 'error'],
    { stdio: 'inherit' },
  );
  const client = new GrpcCSIClient(`unix://${sock}`, {
    timeouts: new DefaultTimeoutPolicy(),
    clock: new RealClock(),
    random: new MathRandom(),
  });
  const rows = [];
  try {
    for (let i = 0; ; i++) {
      try {
        await client.probe({ retry: { maxAttempts: 1 } });
        break;
      } catch (e) {
        if (i > 200) throw e;
        await new Promise((r) => setTimeout(r, 25));
      }
    }
    let n = 0;
    for (const { files, mib } of sizes) {
      const capacity = Math.ceil(mib * 2) * MiB;
      const src = (await client.createVolume({ name: `src-${++n}`, capacityRange: { requiredBytes: capacity }, volumeCapabilities: [RW] }))
        .volume.volumeId;
      const vdir = path.join(state, 'volumes', src);
      const per = Math.floor((mib * MiB) / files);
      const chunk = Buffer.alloc(per, 7);
      for (let d = 0; d < 100; d++) fs.mkdirSync(path.join(vdir, `d${d}`));
      for (let f = 0; f < files; f++) fs.writeFileSync(path.join(vdir, `d${f % 100}`, `f${f}`), chunk);
      const snap = [];
      const restore = [];
      const clone = [];
      for (let r = 0; r < 3; r++) {
        const s = await timed(() => client.createSnapshot({ name: `snap-${n}-${r}`, sourceVolumeId: src }));
        snap.push(s.ms);
        const rv = await timed(() =>
          client.createVolume({
            name: `restored-${n}-${r}`,
            capacityRange: { requiredBytes: capacity },
            volumeCapabilities: [RW],
            volumeContentSource: { snapshot: { snapshotId: s.value.snapshot.snapshotId } },
          }),
        );
        restore.push(rv.ms);
        const cv = await timed(() =>
          client.createVolume({
            name: `clone-${n}-${r}`,
            capacityRange: { requiredBytes: capacity },
            volumeCapabilities: [RW],
            volumeContentSource: { volume: { volumeId: src } },
          }),
        );
        clone.push(cv.ms);
        for (const id of [rv.value.volume.volumeId, cv.value.volume.volumeId]) await client.deleteVolume({ volumeId: id });
        await client.deleteSnapshot({ snapshotId: s.value.snapshot.snapshotId });
      }
      const stats = [];
      for (let r = 0; r < 10; r++) stats.push((await timed(() => client.nodeGetVolumeStats({ volumeId: src, volumePath: vdir }))).ms);
      rows.push([`${files} files, ${mib} MiB`, median(snap), median(restore), median(clone), median(stats)]);
      await client.deleteVolume({ volumeId: src });
    }
  } finally {
    client.dispose();
    plugin.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  process.stdout.write(`bench/volumes — hostpath plugin, ${os.cpus().length} CPUs (${cpu}), Node ${process.version}\n\n`);
  process.stdout.write(
    '| volume | CreateSnapshot (ms) | restore: CreateVolume from it (ms) | clone: CreateVolume from the volume (ms) | NodeGetVolumeStats (ms) |\n|---|---:|---:|---:|---:|\n',
  );
  for (const r of rows)
    process.stdout.write(
      `| ${r[0]} | ${r
        .slice(1)
        .map((x) => x.toFixed(1))
        .join(' | ')} |\n`,
    );
}

main().catch((err) => {
  process.stderr.write(`bench/volumes: ${err.stack || err}\n`);
  process.exit(1);
});
