#!/usr/bin/env node
// Benchmark of @csiplug/state against raw better-sqlite3 doing the same
// work, side by side in one run. Run on purpose (not part of the tests):
//   npm run build && node bench/state/run.js
// Prints a markdown table. Each figure is the median of several rounds.
'use strict';
require('reflect-metadata'); // @csiplug/core loads tsyringe, which needs it
const fs = require('fs');
const os = require('os');
const path = require('path');
const Database = require('better-sqlite3');
const { DB } = require('../../packages/state/dist');

const ROUNDS = Number(process.env.ROUNDS || 5);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-bench-'));
let seq = 0;
const fresh = () => path.join(dir, `b${seq++}.db`);
const key = (i) => Buffer.from(`key-${String(i).padStart(8, '0')}`);
const VALUE = Buffer.alloc(100, 'v');

function rawOpen(file, noSync) {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${noSync ? 'OFF' : 'FULL'}`);
  db.exec('CREATE TABLE IF NOT EXISTS kv (key BLOB PRIMARY KEY, value BLOB) WITHOUT ROWID');
  return db;
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function time(fn) {
  const t0 = process.hrtime.bigint();
  fn();
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

async function timeAsync(fn) {
  const t0 = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

// 1. Single-put commits: one key per transaction, committed before the next.
function rawSinglePuts(n, noSync) {
  const db = rawOpen(fresh(), noSync);
  const begin = db.prepare('BEGIN IMMEDIATE');
  const put = db.prepare('INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)');
  const commit = db.prepare('COMMIT');
  const ms = time(() => {
    for (let i = 0; i < n; i++) {
      begin.run();
      put.run(key(i), VALUE);
      commit.run();
    }
  });
  db.close();
  return (n / ms) * 1000;
}

function stateSinglePuts(n, noSync, memory) {
  const db = memory ? DB.openMemory() : DB.open(fresh(), { noSync });
  db.update((tx) => tx.createBucket('bench'));
  const ms = time(() => {
    for (let i = 0; i < n; i++) db.update((tx) => tx.bucket('bench').put(key(i), VALUE));
  });
  db.close();
  return (n / ms) * 1000;
}

// 2. Batch: waves of 1000 concurrent callers, one put each.
function rawBatch(total, wave) {
  const db = rawOpen(fresh(), false);
  const put = db.prepare('INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)');
  const many = db.transaction((from) => {
    for (let i = from; i < from + wave; i++) put.run(key(i), VALUE);
  });
  const ms = time(() => {
    for (let from = 0; from < total; from += wave) many(from);
  });
  db.close();
  return (total / ms) * 1000;
}

async function stateBatch(total, wave, memory) {
  const db = memory ? DB.openMemory() : DB.open(fresh());
  db.update((tx) => tx.createBucket('bench'));
  const ms = await timeAsync(async () => {
    for (let from = 0; from < total; from += wave) {
      const calls = [];
      for (let i = from; i < from + wave; i++) calls.push(db.batch((tx) => tx.bucket('bench').put(key(i), VALUE)));
      await Promise.all(calls);
    }
  });
  db.close();
  return (total / ms) * 1000;
}

// 3. Open a file holding 10,000 keys and read them all.
function prepareRead(n) {
  const rawFile = fresh();
  const raw = rawOpen(rawFile, false);
  const put = raw.prepare('INSERT INTO kv (key, value) VALUES (?, ?)');
  raw.transaction(() => {
    for (let i = 0; i < n; i++) put.run(key(i), VALUE);
  })();
  raw.close();
  const stateFile = fresh();
  const db = DB.open(stateFile);
  db.update((tx) => {
    const b = tx.createBucket('bench');
    for (let i = 0; i < n; i++) b.put(key(i), VALUE);
  });
  db.close();
  return { rawFile, stateFile };
}

function rawOpenRead(file, n) {
  let count = 0;
  let db;
  const ms = time(() => {
    db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    for (const row of db.prepare('SELECT key, value FROM kv ORDER BY key').raw(true).iterate()) if (row[1].length) count++;
  });
  db.close();
  if (count !== n) throw new Error(`raw read ${count} keys`);
  return ms;
}

function stateOpenRead(file, n) {
  let count = 0;
  let db;
  const ms = time(() => {
    db = DB.open(file);
    db.view((tx) => {
      const c = tx.bucket('bench').cursor();
      for (let e = c.first(); e; e = c.next()) if (e[1].length) count++;
    });
  });
  db.close();
  if (count !== n) throw new Error(`state read ${count} keys`);
  return ms;
}

async function main() {
  const rows = [];
  const fmt = (x) => Math.round(x).toLocaleString('en-US');
  const fmtMs = (x) => `${x.toFixed(1)} ms`;

  const single = (noSync, n) => {
    const raw = [];
    const ours = [];
    const mem = [];
    rawSinglePuts(200, noSync);
    stateSinglePuts(200, noSync);
    for (let r = 0; r < ROUNDS; r++) {
      raw.push(rawSinglePuts(n, noSync));
      ours.push(stateSinglePuts(n, noSync));
    }
    for (let r = 0; r < ROUNDS; r++) mem.push(stateSinglePuts(n, noSync, true));
    return { raw: median(raw), ours: median(ours), mem: median(mem) };
  };

  const s1 = single(false, 2000);
  rows.push([
    'single-put commits/s (default: WAL, synchronous=FULL)',
    fmt(s1.raw),
    fmt(s1.ours),
    fmt(s1.mem),
    `${(s1.raw / s1.ours).toFixed(2)}× raw's time`,
    '≤ 1.3× raw',
  ]);
  const s2 = single(true, 20000);
  rows.push([
    'single-put commits/s (noSync)',
    fmt(s2.raw),
    fmt(s2.ours),
    fmt(s2.mem),
    `${(s2.raw / s2.ours).toFixed(2)}× raw's time`,
    '≤ 1.3× raw',
  ]);

  const total = 100_000;
  const wave = 1000;
  const braw = [];
  const bours = [];
  const bmem = [];
  for (let r = 0; r < ROUNDS; r++) {
    braw.push(rawBatch(total, wave));
    bours.push(await stateBatch(total, wave));
  }
  for (let r = 0; r < ROUNDS; r++) bmem.push(await stateBatch(total, wave, true));
  rows.push([
    'batch puts/s (1000 concurrent callers)',
    fmt(median(braw)),
    fmt(median(bours)),
    fmt(median(bmem)),
    `${(median(bours) / median(braw)).toFixed(2)}× raw's rate`,
    '≥ 100,000',
  ]);

  const n = 10_000;
  const { rawFile, stateFile } = prepareRead(n);
  rawOpenRead(rawFile, n);
  stateOpenRead(stateFile, n);
  const oraw = [];
  const oours = [];
  for (let r = 0; r < ROUNDS * 2; r++) {
    oraw.push(rawOpenRead(rawFile, n));
    oours.push(stateOpenRead(stateFile, n));
  }
  rows.push([
    'open + read 10,000 keys',
    fmtMs(median(oraw)),
    fmtMs(median(oours)),
    '—',
    `${(median(oours) / median(oraw)).toFixed(2)}× raw's time`,
    '≤ 30 ms',
  ]);

  const header = ['measurement', 'raw better-sqlite3', '@csiplug/state (SQLite)', '@csiplug/state (memory)', 'state vs raw', 'target'];
  const lines = [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)];
  console.log(lines.join('\n'));
  console.log(
    `\nnode ${process.version}, better-sqlite3 ${require('better-sqlite3/package.json').version}, ${os.cpus().length} × ${os.cpus()[0].model.trim()}, median of ${ROUNDS} rounds`,
  );
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(() => fs.rmSync(dir, { recursive: true, force: true }));
