#!/usr/bin/env node
// bench/images/profile.js: where our pull + unpack of bench/app:1 spends its
// time, stage by stage, beside skopeo and umoci doing the same stage in the
// same run. Each stage is timed on a fresh store:
//   pull:   ImagePuller.pull as the agent runs it; the same with fsync made a
//           no-op (the share of fsync); `skopeo copy` alone.
//   unpack: gunzip + sha256 of each layer alone; + the tar reader (bodies
//           read, nothing written); LayerStore.unpackImage as the agent runs
//           it; the same with fsync and syncfs made no-ops; `umoci unpack`
//           alone (which also writes an mtree manifest of the root).
// With --cpu-prof, the first round's pull and unpack also run under the V8
// profiler, summarised with bench/restart/profile.js.
// Run on purpose, as root, after `npm run build`:
//   node bench/images/profile.js [--runs 2] [--mb 200] [--cpu-prof]
'use strict';
require('reflect-metadata');
const childProcess = require('child_process');
const fs = require('fs');
const fsp = require('fs/promises');
const inspector = require('inspector');
const os = require('os');
const path = require('path');
const { promisify } = require('util');
const { NullLogger, RealClock, mountPointsUnder, readMountInfoSync } = require('@csiplug/core');
const { ImagePuller, LayerStore, openLayer, readTar } = require('@csiplug/images');
const { TestRegistry } = require('@csiplug/images/testing');
const { summariseProfile } = require('../restart/profile');
const { buildImages } = require('./content');

const run = promisify(childProcess.execFile);
const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const RUNS = arg('runs', 2);
const MB = arg('mb', 200);
const CPU_PROF = process.argv.includes('--cpu-prof');
const s = (x) => (x / 1000).toFixed(2);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const made = { root: undefined, registry: undefined };

/** Runs `fn` with fsync (FileHandle.sync/datasync) and `sync -f` made no-ops: what the stage costs without them. */
async function withoutSync(fn) {
  const probe = await fsp.open(__filename, 'r');
  const proto = Object.getPrototypeOf(probe);
  await probe.close();
  const saved = { sync: proto.sync, datasync: proto.datasync, execFile: childProcess.execFile };
  proto.sync = proto.datasync = async () => undefined;
  childProcess.execFile = function (file, args, ...rest) {
    if (file === '/usr/bin/sync') return rest.at(-1)(null, '', '');
    return saved.execFile.call(this, file, args, ...rest);
  };
  try {
    return await fn();
  } finally {
    Object.assign(proto, { sync: saved.sync, datasync: saved.datasync });
    childProcess.execFile = saved.execFile;
  }
}

/** `fn` under the V8 profiler when --cpu-prof: returns its result; prints the summary. */
async function profiled(label, enabled, fn) {
  if (!enabled) return fn();
  const session = new inspector.Session();
  session.connect();
  const post = promisify(session.post.bind(session));
  await post('Profiler.enable');
  await post('Profiler.setSamplingInterval', { interval: 500 });
  await post('Profiler.start');
  const t0 = performance.now();
  try {
    return await fn();
  } finally {
    const windowMs = performance.now() - t0;
    const { profile } = await post('Profiler.stop');
    session.disconnect();
    const file = path.join(made.root, `${label}.cpuprofile`);
    fs.writeFileSync(file, JSON.stringify(profile));
    console.log(`\n### ${label}\n\n${summariseProfile(file, windowMs, 12)}\n`);
  }
}

async function timed(fn) {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

async function ourPull(storeDir, ref, auth) {
  const puller = await ImagePuller.open({ storeDir, clock: new RealClock(), logger: new NullLogger(), certsDir: made.registry.certsDir });
  try {
    return await puller.pull(ref, { auth });
  } finally {
    puller.dispose();
  }
}

async function drainLayers(blobs, image, parse) {
  for (const l of image.layers) {
    const opened = await openLayer(blobs(l.digest), l.mediaType);
    if (parse) for await (const e of readTar(opened.tar)) for await (const _ of e.body);
    await opened.finish();
  }
}

async function main() {
  if (process.getuid() !== 0) throw new Error('run as root');
  made.root = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-bench-images-profile-'));
  made.registry = await TestRegistry.start();
  const layout = path.join(made.root, 'layout');
  await buildImages(layout, MB);
  await made.registry.push({ layoutDir: layout, tag: 'app' }, 'bench/app:1');
  const ref = `${made.registry.host}/bench/app:1`;
  const auth = { username: made.registry.username, password: made.registry.password };
  const rows = {};
  const add = (k, v) => (rows[k] ??= []).push(v);
  for (let r = 0; r < RUNS; r++) {
    const store = path.join(made.root, `pull-${r}`);
    let image;
    add(
      'pull: ours',
      await timed(() => profiled('pull (ours)', CPU_PROF && r === 0, async () => (image = await ourPull(store, ref, auth)))),
    );
    add('pull: ours, fsync a no-op', await timed(() => withoutSync(() => ourPull(path.join(made.root, `pull-nosync-${r}`), ref, auth))));
    fs.rmSync(path.join(made.root, `pull-nosync-${r}`), { recursive: true });
    const oci = path.join(made.root, `skopeo-${r}`);
    add(
      'pull: skopeo copy',
      await timed(() =>
        run('/usr/bin/skopeo', [
          '--insecure-policy',
          'copy',
          '--quiet',
          '--src-cert-dir',
          path.join(made.registry.certsDir, made.registry.host),
          '--src-creds',
          `${auth.username}:${auth.password}`,
          `docker://${ref}`,
          `oci:${oci}:app`,
        ]),
      ),
    );
    const blobs = (d) => path.join(store, 'blobs', 'sha256', d.replace('sha256:', ''));
    const layers = image.layers.map((l, i) => ({ blobPath: blobs(l.digest), mediaType: l.mediaType, diffId: image.diffIds[i] }));
    add('unpack: gunzip + sha256 only', await timed(() => drainLayers(blobs, image, false)));
    add('unpack: gunzip + sha256 + tar reader', await timed(() => drainLayers(blobs, image, true)));
    const unpack = async (dir) => (await LayerStore.open({ storeDir: dir, logger: new NullLogger(), mode: 'overlay' })).unpackImage(layers);
    add(
      'unpack: ours (LayerStore, overlay)',
      await timed(() => profiled('unpack (ours)', CPU_PROF && r === 0, () => unpack(path.join(made.root, `unpack-${r}`)))),
    );
    add('unpack: ours, fsync + syncfs no-ops', await timed(() => withoutSync(() => unpack(path.join(made.root, `unpack-nosync-${r}`)))));
    add('unpack: umoci unpack', await timed(() => run('/usr/bin/umoci', ['unpack', '--image', `${oci}:app`, path.join(oci, 'bundle')])));
    for (const d of [`unpack-${r}`, `unpack-nosync-${r}`, `skopeo-${r}`, `pull-${r}`])
      fs.rmSync(path.join(made.root, d), { recursive: true });
    console.error(`round ${r + 1} done`);
  }
  console.log(
    `bench/images/profile — ${os.cpus().length} CPUs, load average ${os.loadavg()[0].toFixed(1)}; ${MB} MB image; median of ${RUNS}`,
  );
  console.log('');
  console.log('| stage | s (median) | all runs |');
  console.log('|---|---:|---|');
  for (const [k, v] of Object.entries(rows)) console.log(`| ${k} | ${s(median(v))} | ${v.map(s).join(', ')} |`);
}

async function cleanup() {
  if (made.root) {
    for (const p of mountPointsUnder(readMountInfoSync(), made.root).reverse())
      await run('/usr/bin/umount', ['-l', p]).catch(() => undefined);
    if (!mountPointsUnder(readMountInfoSync(), made.root).length) fs.rmSync(made.root, { recursive: true, force: true });
    else console.error(`mounts remain under ${made.root}; not removed`);
  }
  await made.registry?.stop();
}

let cleaning;
const finish = (code) => (cleaning ??= cleanup().finally(() => process.exit(code)));
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => void finish(130));
main().then(
  () => finish(0),
  (err) => {
    console.error(err);
    return finish(1);
  },
);
