#!/usr/bin/env node
// Benchmark of the job diff behind `job run` and `job plan`
// (packages/jobspec/src/job-diff.ts), run on purpose (never by the tests):
//   node bench/deploy/run.js
// Builds are needed first: npx nx build agent
//
// A group gains N tasks; the diff must grow linearly with the spec (a scan of
// every added block per changed leaf made it quadratic: 8x the tasks cost
// about 17x the time). Prints a markdown table: N, median ms, and the cost
// per added task, which stays flat when the diff is linear.
'use strict';
require('reflect-metadata');
const { validateJob } = require('../../packages/jobspec/dist/jobspec');
const { diffGroup } = require('../../packages/jobspec/dist/job-diff');

const tasks = (n) =>
  Object.fromEntries(
    Array.from({ length: n }, (_, i) => [
      `t${i}`,
      { driver: 'raw_exec', config: { command: '/bin/sleep', args: ['1000'] }, env: { N: String(i) } },
    ]),
  );
const before = validateJob({ job: { web: { group: { app: { task: tasks(1) } } } } });

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

const rows = [];
for (const n of [750, 1500, 3000, 6000]) {
  const after = validateJob({ job: { web: { group: { app: { task: tasks(n + 1) } } } } });
  const times = [];
  for (let round = 0; round < 7; round++) {
    const started = performance.now();
    const changes = diffGroup(after, before.groups[0], after.groups[0]);
    times.push(performance.now() - started);
    if (changes.length !== n) throw new Error(`expected ${n} changes, got ${changes.length}`);
  }
  const ms = median(times);
  rows.push([n, ms.toFixed(1), ((ms / n) * 1000).toFixed(2)]);
}
console.log('| tasks added | diff, median of 7 (ms) | per added task (µs) |');
console.log('|---:|---:|---:|');
for (const r of rows) console.log(`| ${r.join(' | ')} |`);
