// bench/restart/profile.js: reads what the profiled restart of run.js leaves
// — the agent's CPU profile (node --cpu-prof) and its JSON log (pino, one
// object a line) — and says where the restore window went: the functions
// that took the most CPU in it (self and inclusive), the packages they are
// in, and when each kind of log line was first and last written. Also run
// on its own:  node bench/restart/profile.js PROFILE.cpuprofile WINDOW_MS [AGENT.log SPAWN_EPOCH_MS]
'use strict';
const fs = require('fs');
const path = require('path');

/** "packages/runner/dist/x.js" → "runner"; node internals and dependencies by name. */
function packageOf(url) {
  if (!url) return '(native / VM)';
  if (url.startsWith('node:')) return 'node core';
  const pkg = /\/packages\/([^/]+)\//.exec(url);
  if (pkg) return `@csiplug/${pkg[1]}`;
  const dep = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (dep) return dep[1];
  return url;
}

function frameName(cf) {
  const file = cf.url ? `${cf.url.replace(/^file:\/\//, '').replace(/^.*\/(packages|node_modules)\//, '$1/')}:${cf.lineNumber + 1}` : '';
  return `${cf.functionName || '(anonymous)'}${file ? ` ${file}` : ''}`;
}

/**
 * Self and inclusive CPU time per function over the first `windowMs` of the
 * profile (the profiler starts a few ms after the spawn, so the window ends a
 * few ms after the restore did). Returns markdown.
 */
function summariseProfile(file, windowMs, top = 25) {
  const prof = JSON.parse(fs.readFileSync(file, 'utf8'));
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const self = new Map();
  const incl = new Map();
  const pkgSelf = new Map();
  const add = (m, k, v) => m.set(k, (m.get(k) ?? 0) + v);
  let t = prof.startTime;
  const end = prof.startTime + windowMs * 1000;
  let total = 0;
  let idle = 0;
  for (let i = 0; i < prof.samples.length; i++) {
    t += prof.timeDeltas[i];
    if (t > end) break;
    // A sample stands for the time until the next one.
    const dt = (prof.timeDeltas[i + 1] ?? 0) / 1000;
    const node = byId.get(prof.samples[i]);
    const name = node.callFrame.functionName;
    if (name === '(idle)') {
      idle += dt;
      continue;
    }
    total += dt;
    add(self, frameName(node.callFrame), dt);
    add(pkgSelf, name.startsWith('(') ? name : packageOf(node.callFrame.url), dt);
    const seen = new Set();
    for (let id = node.id; id !== undefined; id = parent.get(id)) {
      const n = byId.get(id);
      const k = frameName(n.callFrame);
      if (n.callFrame.functionName === '(root)' || seen.has(k)) continue;
      seen.add(k);
      add(incl, k, dt);
    }
  }
  const rows = (m, n) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([k, v]) => `| ${k.replace(/\|/g, '\\|')} | ${v.toFixed(1)} | ${((100 * v) / total).toFixed(1)}% |`)
      .join('\n');
  return [
    `CPU profile ${path.basename(file)}: first ${windowMs.toFixed(0)} ms — ${total.toFixed(0)} ms on CPU, ${idle.toFixed(0)} ms idle`,
    '',
    '| package (self time) | ms | share |',
    '|---|---:|---:|',
    rows(pkgSelf, 15),
    '',
    '| function (self time) | ms | share |',
    '|---|---:|---:|',
    rows(self, top),
    '',
    '| function (inclusive: on the stack) | ms | share |',
    '|---|---:|---:|',
    rows(incl, top),
  ].join('\n');
}

/**
 * When each kind of log line (component + message) was first and last
 * written, in ms from the spawn, and how many: the restore's steps as the
 * agent itself reports them. Lines after `windowMs` (+1 s) are left out.
 */
function restoreSteps(logFile, spawnWall, windowMs) {
  const steps = new Map();
  for (const line of fs.readFileSync(logFile, 'utf8').split('\n')) {
    if (!line.startsWith('{')) continue;
    let rec;
    try {
      rec = JSON.parse(line);
    } catch {
      continue;
    }
    const at = rec.time - spawnWall;
    if (at > windowMs + 1_000) continue;
    const key = `${rec.component ?? '-'}: ${rec.msg}`;
    const s = steps.get(key) ?? { first: at, last: at, count: 0 };
    s.first = Math.min(s.first, at);
    s.last = Math.max(s.last, at);
    s.count++;
    steps.set(key, s);
  }
  const rows = [...steps.entries()]
    .sort((a, b) => a[1].first - b[1].first)
    .map(([k, s]) => `| ${k.replace(/\|/g, '\\|')} | ${s.count} | ${s.first} | ${s.last} |`);
  return ['| log line (component: message) | count | first (ms) | last (ms) |', '|---|---:|---:|---:|', ...rows].join('\n');
}

module.exports = { summariseProfile, restoreSteps };

if (require.main === module) {
  const [file, windowMs, log, spawnWall] = process.argv.slice(2);
  if (!file || !windowMs) {
    console.error('usage: node bench/restart/profile.js PROFILE.cpuprofile WINDOW_MS [AGENT.log SPAWN_EPOCH_MS]');
    process.exit(2);
  }
  if (log) console.log(restoreSteps(log, Number(spawnWall), Number(windowMs)) + '\n');
  console.log(summariseProfile(file, Number(windowMs)));
}
