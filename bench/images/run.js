#!/usr/bin/env node
// bench/images: what images cost (issue 27's figures), each against a real
// baseline in the same run, on a loopback registry (Debian's docker-registry
// through TestRegistry: TLS, basic auth):
//   - pull + unpack of a ~200 MB, 5-layer image (content.js: many files of
//     mixed sizes, text, random and binary-like) into a fresh store and a
//     task root (TaskImages.prepare), against `skopeo copy docker://… oci:DIR`
//     + `umoci unpack` of the same image; target ≤ 1.2× their time;
//   - a task started from the cached image (runner's prepareImageStart: the
//     root from TaskImages, the process from the image config; then the exec
//     driver on runc with IsolationConfig.image), against an `exec` task
//     (chroot_env on runc), start → its first command ran; target p50 ≤ 1.5×;
//   - 20 tasks of one image started at once on an empty store: the registry's
//     access log shows one manifest fetch and each blob fetched once;
//   - disk: a second image sharing the first's four base layers; the store's
//     du against the sum of the two images' sizes.
// Run on purpose, as root, after `npm run build` (runc, docker-registry,
// skopeo, umoci installed):
//   npm run bench:images -- [--runs 3] [--starts 20] [--tasks 20] [--mb 200]
// Every task, mount, registry and temp dir it makes is removed at the end,
// also on error or Ctrl-C.
'use strict';
require('reflect-metadata');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFile, execFileSync } = require('child_process');
const { promisify } = require('util');
const { NullLogger, RealClock, mountPointsUnder, readMountInfoSync } = require('@csiplug/core');
const { ExecDriver, NOBODY, findRunc } = require('@csiplug/driver');
const { TaskImages, chainIds } = require('@csiplug/images');
const { TestRegistry } = require('@csiplug/images/testing');
const { parseJobspec } = require('@csiplug/jobspec');
const { prepareImageStart } = require('@csiplug/runner');
const { processesUnder } = require('../processes');
const { buildImages, layoutLayers } = require('./content');

const run = promisify(execFile);
const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const RUNS = arg('runs', 3);
const STARTS = arg('starts', 20);
const TASKS = arg('tasks', 20);
const MB = arg('mb', 200);
const UA = 'csiplug-images';
const CHROOT = { '/bin': '/bin', '/lib': '/lib', '/lib64': '/lib64', '/usr': '/usr', '/etc': '/etc' };
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const median = (xs) => pct(xs, 50);
const mb = (bytes) => (bytes / 1e6).toFixed(1);
const ms = (x) => x.toFixed(0);
const s = (x) => (x / 1000).toFixed(2);

/** Everything made, for the cleanup that runs whatever happened. */
const made = { root: undefined, registry: undefined, services: [], driver: undefined, handles: new Set(), roots: new Map() };

async function du(...dirs) {
  const { stdout } = await run('/usr/bin/du', ['-scxB1', ...dirs]);
  return Number(/^(\d+)\s+total$/m.exec(stdout)[1]);
}

function openImages(dataDir) {
  const svc = new TaskImages({
    dataDir,
    docker: { pullActivityTimeout: 120_000, gc: { image: false, imageDelay: 0 } },
    certsDir: made.registry.certsDir,
    logger: new NullLogger(),
  });
  made.services.push(svc);
  return svc;
}

/** The bench's image task as the jobspec reader gives it (driver docker, the registry's auth). */
async function imageTask(ref) {
  const job = await parseJobspec(
    `job "bench" {
  group "g" {
    task "t" {
      driver = "docker"
      config {
        image   = "${ref}"
        command = "/bin/sh"
        args    = ["-c", "echo up > /local/up; exec sleep 3600"]
        auth {
          username = "${made.registry.username}"
          password = "${made.registry.password}"
        }
      }
    }
  }
}`,
    'bench.hcl',
  );
  return job.groups[0].tasks[0];
}

function taskDirs(parent, name) {
  const taskDir = path.join(parent, name);
  const localDir = path.join(taskDir, 'local');
  const secretsDir = path.join(taskDir, 'secrets');
  const allocDir = path.join(parent, 'alloc');
  for (const d of [localDir, secretsDir, allocDir]) fs.mkdirSync(d, { recursive: true });
  return { taskDir, localDir, secretsDir, allocDir };
}

async function waitMarker(marker, name) {
  // A 1 ms timer, not a busy loop: twenty of those would take a core from the starts being measured.
  const deadline = Date.now() + 120_000;
  while (!fs.existsSync(marker)) {
    if (Date.now() > deadline) throw new Error(`task ${name} did not run its first command within 120 s`);
    await new Promise((r) => setTimeout(r, 1));
  }
}

/** An image task started as the task runner does; resolves with ms from the start to its first command, and the events it said. */
async function startImageTask(svc, task, parent, name) {
  const dirs = taskDirs(parent, name);
  const events = [];
  const t0 = performance.now();
  made.roots.set(path.join(dirs.taskDir, 'image'), svc);
  const launch = await prepareImageStart({
    task,
    taskDir: dirs.taskDir,
    images: svc,
    command: task.config.command,
    args: task.config.args,
    env: {},
    isolation: { chroot: {}, localDir: dirs.localDir, allocDir: dirs.allocDir, secretsDir: dirs.secretsDir },
    say: (e) => events.push(e),
  });
  const handle = await made.driver.start({
    allocId: 'bench',
    taskName: name,
    taskDir: dirs.taskDir,
    command: launch.command,
    args: launch.args,
    env: launch.env,
    isolation: launch.isolation,
  });
  made.handles.add(handle);
  await waitMarker(path.join(dirs.localDir, 'up'), name);
  return { ms: performance.now() - t0, handle, events, imageDir: path.join(dirs.taskDir, 'image') };
}

/** An exec task (chroot_env on runc), as bench/tasks starts one. */
async function startExecTask(parent, name) {
  const dirs = taskDirs(parent, name);
  // The task's dirs are its user's (nobody: an exec task with no `user`), as the runner's task setup gives them before a start.
  for (const d of [dirs.localDir, dirs.secretsDir]) fs.chownSync(d, NOBODY.uid, NOBODY.gid);
  const t0 = performance.now();
  const handle = await made.driver.start({
    allocId: 'bench',
    taskName: name,
    taskDir: dirs.taskDir,
    command: '/bin/sh',
    args: ['-c', 'echo up > /local/up; exec sleep 3600'],
    env: {},
    isolation: { chroot: CHROOT, localDir: dirs.localDir, allocDir: dirs.allocDir, secretsDir: dirs.secretsDir },
  });
  made.handles.add(handle);
  await waitMarker(path.join(dirs.localDir, 'up'), name);
  return { ms: performance.now() - t0, handle };
}

async function stopTask(handle) {
  await made.driver.stop(handle, 'SIGKILL', 0);
  made.handles.delete(handle);
}

async function releaseRoot(imageDir) {
  const svc = made.roots.get(imageDir);
  made.roots.delete(imageDir);
  await svc?.release(imageDir);
}

async function oursPullUnpack(ref, round) {
  const dataDir = path.join(made.root, `ours-${round}`);
  const svc = openImages(dataDir);
  const task = await imageTask(ref);
  const imageDir = path.join(dataDir, 'task', 'image');
  made.roots.set(imageDir, svc);
  let pulledAt = 0;
  const t0 = performance.now();
  await svc.prepare({
    taskDir: imageDir,
    ref,
    auth: task.image.auth,
    onEvent: (e) => {
      if (e.kind === 'pulled') pulledAt = performance.now();
    },
  });
  const total = performance.now() - t0;
  await releaseRoot(imageDir);
  svc.dispose();
  fs.rmSync(dataDir, { recursive: true, force: true });
  return { pull: pulledAt - t0, unpack: total - (pulledAt - t0), total };
}

async function theirsPullUnpack(ref, round) {
  const dir = path.join(made.root, `skopeo-${round}`);
  fs.mkdirSync(dir);
  const t0 = performance.now();
  await run('/usr/bin/skopeo', [
    '--insecure-policy',
    'copy',
    '--quiet',
    '--src-cert-dir',
    path.join(made.registry.certsDir, made.registry.host),
    '--src-creds',
    `${made.registry.username}:${made.registry.password}`,
    `docker://${ref}`,
    `oci:${path.join(dir, 'oci')}:app`,
  ]);
  const t1 = performance.now();
  await run('/usr/bin/umoci', ['unpack', '--image', `${path.join(dir, 'oci')}:app`, path.join(dir, 'bundle')]);
  const t2 = performance.now();
  fs.rmSync(dir, { recursive: true, force: true });
  return { pull: t1 - t0, unpack: t2 - t1, total: t2 - t0 };
}

/** The registry requests of our client while `fn` runs, grouped: what and how often. */
async function requestsDuring(fn) {
  await made.registry.syncAccessLog();
  const before = made.registry.accessLog(UA).length;
  const out = await fn();
  await made.registry.syncAccessLog();
  return { out, requests: made.registry.accessLog(UA).slice(before) };
}

async function main() {
  if (process.getuid() !== 0) throw new Error('run as root');
  if (!findRunc()) throw new Error('runc is not installed (apt-get install runc)');
  for (const tool of ['/usr/bin/docker-registry', '/usr/bin/skopeo', '/usr/bin/umoci'])
    if (!fs.existsSync(tool)) throw new Error(`${tool} is missing (apt-get install docker-registry skopeo umoci)`);
  made.root = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-bench-images-'));
  made.registry = await TestRegistry.start();
  made.driver = new ExecDriver(new RealClock(), new NullLogger(), { runcRoot: path.join(made.root, 'runc') });
  const loadBefore = os.loadavg();

  const layout = path.join(made.root, 'layout');
  const tb = performance.now();
  const stats = await buildImages(layout, MB);
  await made.registry.push({ layoutDir: layout, tag: 'app' }, 'bench/app:1');
  await made.registry.push({ layoutDir: layout, tag: 'other' }, 'bench/other:1');
  const appLayers = layoutLayers(layout, 'app');
  const otherLayers = layoutLayers(layout, 'other');
  const shared = otherLayers.filter((l) => appLayers.some((a) => a.digest === l.digest)).length;
  const appRef = `${made.registry.host}/bench/app:1`;
  const otherRef = `${made.registry.host}/bench/other:1`;
  console.error(`images built and pushed in ${s(performance.now() - tb)} s`);

  // 1. Pull + unpack, ours and theirs taking turns (a burst of load elsewhere lands on both).
  const ours = [];
  const theirs = [];
  for (let r = 0; r < RUNS; r++) {
    if (r % 2 === 0) {
      ours.push(await oursPullUnpack(appRef, r));
      theirs.push(await theirsPullUnpack(appRef, r));
    } else {
      theirs.push(await theirsPullUnpack(appRef, r));
      ours.push(await oursPullUnpack(appRef, r));
    }
    console.error(`pull+unpack round ${r + 1}: ours ${s(ours.at(-1).total)} s, skopeo+umoci ${s(theirs.at(-1).total)} s`);
  }

  // 2. TASKS tasks of one image at once on an empty store: one pull.
  const node = openImages(path.join(made.root, 'node'));
  const task = await imageTask(appRef);
  const tasksDir = path.join(made.root, 'tasks');
  const t20 = performance.now();
  const { out: many, requests } = await requestsDuring(() =>
    Promise.all(Array.from({ length: TASKS }, (_, i) => startImageTask(node, task, tasksDir, `many-${i}`))),
  );
  const allRunning = performance.now() - t20;
  const pulledEvents = many.flatMap((m) => m.events).filter((e) => e.type === 'Pulled');
  for (const m of many) {
    await stopTask(m.handle);
    await releaseRoot(m.imageDir);
  }

  // 3. Start from the cached image vs exec, one at a time, taking turns.
  const imageStarts = [];
  const execStarts = [];
  const cachedReqs = await requestsDuring(async () => {
    for (let i = 0; i < STARTS; i++) {
      const a = await startImageTask(node, task, tasksDir, `image-${i}`);
      imageStarts.push(a.ms);
      await stopTask(a.handle);
      await releaseRoot(a.imageDir);
      const b = await startExecTask(tasksDir, `exec-${i}`);
      execStarts.push(b.ms);
      await stopTask(b.handle);
    }
  });

  // 4. Disk: the second image beside the first in the same store.
  const { layers } = await node.open();
  const otherDir = path.join(made.root, 'other-task', 'image');
  made.roots.set(otherDir, node);
  const otherImage = await node.prepare({ taskDir: otherDir, ref: otherRef, auth: task.image.auth });
  const appImage = await node.prepare({ taskDir: path.join(made.root, 'app-task', 'image'), ref: appRef, auth: task.image.auth });
  made.roots.set(path.join(made.root, 'app-task', 'image'), node);
  const chainDirs = (img) => chainIds(img.config.diffIds).map((c) => layers.chainDir(c));
  const appUnpacked = await du(...chainDirs(appImage));
  const otherUnpacked = await du(...chainDirs(otherImage));
  const appBlobs = appLayers.reduce((n, l) => n + l.size, 0);
  const otherBlobs = otherLayers.reduce((n, l) => n + l.size, 0);
  const store = path.join(made.root, 'node', 'images');
  const storeBlobs = await du(path.join(store, 'blobs'));
  const storeLayers = await du(path.join(store, 'layers'));
  const storeAll = await du(store);

  const loadAfter = os.loadavg();
  const o = { pull: median(ours.map((x) => x.pull)), unpack: median(ours.map((x) => x.unpack)), total: median(ours.map((x) => x.total)) };
  const t = {
    pull: median(theirs.map((x) => x.pull)),
    unpack: median(theirs.map((x) => x.unpack)),
    total: median(theirs.map((x) => x.total)),
  };
  const range = (xs) => `${s(Math.min(...xs))}–${s(Math.max(...xs))}`;
  const tool = (bin, a) => execFileSync(bin, a).toString().split('\n')[0].trim();

  console.log(
    `bench/images — ${os.cpus().length} CPUs, Node ${process.version}; load average ${loadBefore[0].toFixed(1)} at the start, ${loadAfter[0].toFixed(1)} at the end (other work shares the machine)`,
  );
  console.log(
    `${tool('/usr/bin/skopeo', ['--version'])}; ${tool('/usr/bin/umoci', ['--version'])}; ${tool(findRunc(), ['--version'])}; store mode ${layers.mode}`,
  );
  console.log(
    `image bench/app:1: 5 layers, ${stats.files} files, ${mb(stats.bytes)} MB uncompressed (text ${mb(stats.text)}, random ${mb(stats.random)}, binary-like ${mb(stats.binary)} MB), ${mb(appBlobs)} MB of gzip layers`,
  );
  console.log('');
  console.log(`| pull + unpack of bench/app:1, median of ${RUNS} (s) | pull | unpack | total (range) | ratio to skopeo + umoci | target |`);
  console.log('|---|---:|---:|---:|---:|---:|');
  console.log(
    `| skopeo copy docker:// → oci: + umoci unpack | ${s(t.pull)} | ${s(t.unpack)} | ${s(t.total)} (${range(theirs.map((x) => x.total))}) | 1.00 | |`,
  );
  console.log(
    `| csiplug TaskImages.prepare (pull, unpack, task root) | ${s(o.pull)} | ${s(o.unpack)} | ${s(o.total)} (${range(ours.map((x) => x.total))}) | ${(o.total / t.total).toFixed(2)} (each round: ${ours.map((x, i) => (x.total / theirs[i].total).toFixed(2)).join(', ')}) | ≤ 1.20 |`,
  );
  console.log('');
  console.log(`| task start → first command, ${STARTS} starts one at a time, taking turns (ms) | p50 | p90 | ratio p50 to exec | target |`);
  console.log('|---|---:|---:|---:|---:|');
  console.log(`| exec (chroot_env on runc) | ${ms(pct(execStarts, 50))} | ${ms(pct(execStarts, 90))} | 1.00 | |`);
  console.log(
    `| docker, image in the store (prepareImageStart + runc) | ${ms(pct(imageStarts, 50))} | ${ms(pct(imageStarts, 90))} | ${(pct(imageStarts, 50) / pct(execStarts, 50)).toFixed(2)} | ≤ 1.50 |`,
  );
  console.log(`| registry requests during the ${STARTS} cached starts | ${cachedReqs.requests.length} | | | 0 |`);
  console.log('');
  const group = new Map();
  for (const r of requests) {
    const kind = /\/manifests\//.test(r.path) ? 'manifest' : /\/blobs\//.test(r.path) ? 'blob' : r.path === '/v2/' ? 'ping' : 'other';
    const key = `${r.method} ${kind}${kind === 'blob' ? ' ' + r.path.split('/').pop().slice(7, 19) : ''} → ${r.status}`;
    group.set(key, (group.get(key) ?? 0) + 1);
  }
  const blobGets = requests.filter((r) => r.method === 'GET' && /\/blobs\//.test(r.path) && r.status < 300);
  const manifestGets = requests.filter((r) => r.method === 'GET' && /\/manifests\//.test(r.path) && r.status < 300);
  const distinctBlobs = new Set(blobGets.map((r) => r.path)).size;
  console.log(
    `| ${TASKS} tasks of bench/app:1 at once, empty store | all running (s) | manifest GETs (2xx) | blob GETs (2xx) / distinct | "Pulled" events |`,
  );
  console.log('|---|---:|---:|---:|---:|');
  console.log(
    `| one pull shared by all | ${s(allRunning)} | ${manifestGets.length} | ${blobGets.length} / ${distinctBlobs} (config + ${appLayers.length} layers = ${appLayers.length + 1}) | ${pulledEvents.length} (every task says it) |`,
  );
  console.log('');
  console.log('registry access log of those starts (user agent csiplug-images), each request kind and its count:');
  for (const [k, n] of group) console.log(`  ${n} × ${k}`);
  console.log('');
  console.log(`| disk: bench/app:1 and bench/other:1 (${shared} of 5 layers shared) in one store | bytes | MB |`);
  console.log('|---|---:|---:|');
  console.log(`| gzip layers, app + other (each image alone) | ${appBlobs + otherBlobs} | ${mb(appBlobs + otherBlobs)} |`);
  console.log(
    `| unpacked layers, app + other (du of each image's chain dirs) | ${appUnpacked + otherUnpacked} | ${mb(appUnpacked + otherUnpacked)} |`,
  );
  console.log(
    `| sum of the two images (gzip + unpacked) | ${appBlobs + otherBlobs + appUnpacked + otherUnpacked} | ${mb(appBlobs + otherBlobs + appUnpacked + otherUnpacked)} |`,
  );
  console.log(`| store: blobs/ (du) | ${storeBlobs} | ${mb(storeBlobs)} |`);
  console.log(`| store: layers/ (du) | ${storeLayers} | ${mb(storeLayers)} |`);
  console.log(
    `| store: all (du) — ${((storeAll / (appBlobs + otherBlobs + appUnpacked + otherUnpacked)) * 100).toFixed(0)}% of the sum | ${storeAll} | ${mb(storeAll)} |`,
  );
}

/** Stops every task, unmounts every root, stops the registry and removes the temp dir: on success, error or Ctrl-C. */
async function cleanup() {
  const problems = [];
  const attempt = async (what, fn) => {
    try {
      await fn();
    } catch (err) {
      problems.push(`${what}: ${err.message}`);
    }
  };
  for (const h of made.handles) await attempt('stop a task', () => made.driver.stop(h, 'SIGKILL', 0));
  for (const [dir, svc] of made.roots) await attempt(`release ${dir}`, () => svc.release(dir));
  for (const svc of made.services) svc.dispose();
  if (made.root) {
    const runcRoot = path.join(made.root, 'runc');
    if (fs.existsSync(runcRoot))
      await attempt('remove containers', async () => {
        for (const c of JSON.parse(execFileSync(findRunc(), ['--root', runcRoot, 'list', '--format', 'json']).toString() || 'null') ?? [])
          execFileSync(findRunc(), ['--root', runcRoot, 'delete', '--force', c.id]);
      });
    for (const pid of processesUnder(made.root)) await attempt(`kill ${pid}`, () => process.kill(pid, 'SIGKILL'));
    for (const p of mountPointsUnder(readMountInfoSync(), made.root).reverse())
      await attempt(`unmount ${p}`, () => run('/usr/bin/umount', ['-l', p]));
    const left = mountPointsUnder(readMountInfoSync(), made.root);
    if (left.length) problems.push(`mounts remain under ${made.root}, not removing it: ${left.join(', ')}`);
    else fs.rmSync(made.root, { recursive: true, force: true });
  }
  made.driver?.dispose();
  await attempt('stop the registry', () => made.registry?.stop());
  if (problems.length) console.error(`bench cleanup:\n  ${problems.join('\n  ')}`);
}

let cleaning;
const finish = (code) => {
  cleaning ??= cleanup().finally(() => process.exit(code));
  return cleaning;
};
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => void finish(130));
main().then(
  () => finish(0),
  (err) => {
    console.error(err);
    return finish(1);
  },
);
