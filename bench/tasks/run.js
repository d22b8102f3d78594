#!/usr/bin/env node
// bench/tasks: what isolation costs. For `exec` (isolated on runc) and
// `raw_exec` (a host process):
//   - start latency: from driver.start() to the task running its first
//     command (it writes a file), one task at a time and 50 at once;
//   - re-attach: a real agent with 50 tasks of the driver is killed with
//     SIGKILL and started again; the time from its API answering to every
//     task re-attached (its `Reattached` event).
// Run on purpose, as root, after `npm run build` (runc installed):
//   node bench/tasks/run.js [--starts 20] [--tasks 50]
// Targets (issue 13): isolated start p50 ≤ 250 ms; re-attach of 50 isolated
// tasks ≤ 1 s after the agent is up.
'use strict';
require('reflect-metadata');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');
const { ExecDriver, findRunc } = require('@csiplug/driver');
const { RealClock, MemoryLogger } = require('@csiplug/core');
const { ApiClient } = require('@csiplug/api/client');
const { jobToNomadJson, parseJobspec } = require('@csiplug/jobspec');
const { freePort, pollUntil } = require('@csiplug/agent/testing');
const { Agent } = require('../restart/run');

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const STARTS = arg('starts', 20);
const TASKS = arg('tasks', 50);
const CHROOT = { '/bin': '/bin', '/lib': '/lib', '/lib64': '/lib64', '/usr': '/usr', '/etc': '/etc' };
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

/** One task of `driver` started through the ExecDriver; resolves with ms until it ran its first command. */
async function startOne(d, root, name, isolated) {
  const taskDir = path.join(root, name);
  const local = path.join(taskDir, 'local');
  for (const dir of [local, path.join(taskDir, 'secrets'), path.join(root, 'alloc')]) fs.mkdirSync(dir, { recursive: true });
  const marker = path.join(isolated ? local : taskDir, 'up');
  const t0 = performance.now();
  const handle = await d.start({
    allocId: 'bench',
    taskName: name,
    taskDir,
    command: '/bin/sh',
    args: ['-c', `echo up > ${isolated ? '/local' : '.'}/up; exec sleep 3600`],
    env: {},
    ...(isolated
      ? { isolation: { chroot: CHROOT, localDir: local, allocDir: path.join(root, 'alloc'), secretsDir: path.join(taskDir, 'secrets') } }
      : {}),
  });
  // A 1 ms timer, not a busy loop: fifty of those would take a core from the starts being measured.
  const deadline = Date.now() + 60_000;
  while (!fs.existsSync(marker)) {
    if (Date.now() > deadline) throw Object.assign(new Error(`task ${name} did not run its first command within 60 s`), { handle });
    await new Promise((r) => setTimeout(r, 1));
  }
  return { ms: performance.now() - t0, handle };
}

async function startLatency(isolated) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-bench-tasks-'));
  const d = new ExecDriver(new RealClock(), new MemoryLogger(), { runcRoot: path.join(root, 'runc') });
  const handles = [];
  try {
    const one = [];
    for (let i = 0; i < STARTS; i++) {
      const r = await startOne(d, root, `one-${i}`, isolated);
      one.push(r.ms);
      handles.push(r.handle);
      await d.stop(r.handle, 'SIGKILL', 0);
    }
    const t0 = performance.now();
    const settled = await Promise.allSettled(Array.from({ length: TASKS }, (_, i) => startOne(d, root, `many-${i}`, isolated)));
    const all = performance.now() - t0;
    // Every task that started is stopped in the end, whatever happened to the others.
    for (const r of settled) if (r.status === 'fulfilled') handles.push(r.value.handle);
    const failed = settled.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    return { one, many: settled.map((r) => r.value.ms), all };
  } finally {
    await Promise.all(handles.map((h) => d.stop(h, 'SIGKILL', 0).catch(() => undefined)));
    // Nothing may outlive the bench: any container left in its runc root goes before the root does.
    const runcRoot = path.join(root, 'runc');
    if (fs.existsSync(runcRoot)) {
      for (const c of JSON.parse(execFileSync(findRunc(), ['--root', runcRoot, 'list', '--format', 'json']).toString() || 'null') ?? [])
        execFileSync(findRunc(), ['--root', runcRoot, 'delete', '--force', c.id]);
    }
    d.dispose();
    fs.rmSync(root, { recursive: true, force: true });
  }
}

const sleeperJob = (i, driver) => `
job "t-${i}" {
  group "g" {
    task "t" {
      driver = "${driver}"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }
}`;

/** 50 tasks of `driver` under a real agent, kill -9, start: ms from the API answering to every task re-attached. */
async function reattach(driver) {
  const a = new Agent();
  try {
    await a.start();
    const ids = [];
    for (let i = 0; i < TASKS; i += 10) {
      const batch = await Promise.all(
        Array.from(
          { length: Math.min(10, TASKS - i) },
          async (_, k) => (await a.api.runJob(jobToNomadJson(await parseJobspec(sleeperJob(i + k, driver), 'j.hcl')))).allocIds[0],
        ),
      );
      ids.push(...batch);
    }
    await pollUntil(
      'every task running',
      async () => ((await a.api.listAllocs()).filter((x) => x.clientStatus === 'running').length === TASKS ? true : undefined),
      120_000,
      100,
    );
    await a.kill('SIGKILL');
    const s = await a.start();
    const up = performance.now();
    await pollUntil(
      'every task re-attached',
      async () => {
        const allocs = await a.api.listAllocs();
        return allocs.filter((x) => x.tasks.t?.events.some((e) => e.type === 'Reattached' && e.time >= s.wall)).length === TASKS
          ? true
          : undefined;
      },
      120_000,
      10,
    );
    return { apiMs: s.apiMs, afterApiMs: performance.now() - up };
  } finally {
    await a.cleanup();
  }
}

async function main() {
  if (process.getuid() !== 0) throw new Error('run as root');
  if (!findRunc()) throw new Error('runc is not installed (apt-get install runc)');
  const rows = [];
  for (const isolated of [true, false]) {
    const lat = await startLatency(isolated);
    const re = await reattach(isolated ? 'exec' : 'raw_exec');
    rows.push({ driver: isolated ? 'exec (runc)' : 'raw_exec', ...lat, ...re });
  }
  console.log(
    `bench/tasks — ${os.cpus().length} CPUs, Node ${process.version}, runc ${execFileSync(findRunc(), ['--version']).toString().split('\n')[0].replace('runc version ', '')}`,
  );
  console.log('');
  console.log(
    `| driver | start, one at a time: p50 / p99 (ms, ${STARTS} starts) | start, ${TASKS} at once: p50 / p99 (ms) | all ${TASKS} running (ms) | API up after kill -9 (ms) | every task re-attached after the API is up (ms) |`,
  );
  console.log('|---|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    console.log(
      `| ${r.driver} | ${pct(r.one, 50).toFixed(0)} / ${pct(r.one, 99).toFixed(0)} | ${pct(r.many, 50).toFixed(0)} / ${pct(r.many, 99).toFixed(0)} | ${r.all.toFixed(0)} | ${r.apiMs.toFixed(0)} | ${r.afterApiMs.toFixed(0)} |`,
    );
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
