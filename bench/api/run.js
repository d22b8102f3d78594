#!/usr/bin/env node
// Benchmark of the agent's HTTP API front door, run on purpose (never by the tests):
//   node bench/api/run.js [--quick]
// Builds are needed first: npm run build
//
// Measures, against a real HttpApi on 127.0.0.1 over the in-memory service:
//  - GET /v1/jobs over one kept-alive connection: p50/p99 latency and
//    requests per second, with the request guard and connection gate in the
//    path (what every request pays);
//  - a flood of idle connections (default 5,000) against the default caps:
//    how many the API holds, how many file descriptors the process has open
//    at the peak, and whether (and how fast) a fresh health check answers
//    during the flood.
// Prints a markdown table.
'use strict';
require('reflect-metadata');
const fs = require('node:fs');
const http = require('node:http');
const net = require('node:net');
const { MemoryLogger } = require('../../packages/core/dist');
const { HttpApi } = require('@csiplug/api');
const { FakeAgentService } = require('@csiplug/api/testing');

const quick = process.argv.includes('--quick');
const REQUESTS = quick ? 2_000 : 20_000;
const FLOOD = quick ? 1_000 : 5_000;

const ns = () => process.hrtime.bigint();
const ms = (a, b) => Number(b - a) / 1e6;
const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const openFds = () => fs.readdirSync('/proc/self/fd').length;

function get(agent, url, path) {
  return new Promise((resolve, reject) => {
    http
      .get(`${url}${path}`, { agent }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode));
      })
      .on('error', reject);
  });
}

function healthOnFreshConnection(port) {
  return new Promise((resolve) => {
    const t0 = ns();
    const s = net.connect(port, '127.0.0.1');
    let text = '';
    const done = (status) => {
      s.destroy();
      resolve({ status, ms: ms(t0, ns()) });
    };
    s.on('error', () => done(0));
    s.on('close', () => done(Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0)));
    s.on('data', (d) => {
      text += d;
      if (text.includes('\r\n\r\n')) done(Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0));
    });
    s.write(`GET /v1/agent/health HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`);
  });
}

async function main() {
  const api = new HttpApi(new FakeAgentService(), { bindAddr: '127.0.0.1', port: 0, logger: new MemoryLogger() });
  const { port } = await api.listen();
  const url = api.url;
  const rows = [];

  // Kept-alive requests through the guard and the gate.
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  for (let i = 0; i < 200; i++) await get(agent, url, '/v1/jobs');
  const lat = [];
  const t0 = ns();
  for (let i = 0; i < REQUESTS; i++) {
    const a = ns();
    await get(agent, url, '/v1/jobs');
    lat.push(ms(a, ns()));
  }
  const total = ms(t0, ns());
  agent.destroy();
  lat.sort((a, b) => a - b);
  rows.push([
    `GET /v1/jobs, one kept-alive connection (${REQUESTS} requests)`,
    `p50 ${pct(lat, 50).toFixed(3)} ms, p99 ${pct(lat, 99).toFixed(3)} ms, ${Math.round(REQUESTS / (total / 1000))} req/s`,
  ]);

  // An idle flood against the default caps.
  const fdsBefore = openFds();
  const sockets = [];
  let refused = 0;
  await Promise.all(
    Array.from(
      { length: FLOOD },
      () =>
        new Promise((resolve) => {
          const s = net.connect(port, '127.0.0.1');
          s.on('error', () => undefined);
          s.once('connect', () => {
            sockets.push(s);
            resolve();
          });
          s.once('close', () => {
            refused++;
            resolve();
          });
        }),
    ),
  );
  await new Promise((r) => setTimeout(r, 500));
  const held = api.connections;
  // This process holds both ends: its own sockets (FLOOD at most) and what the API kept.
  const apiFds = openFds() - fdsBefore - sockets.filter((s) => !s.destroyed).length;
  const checks = [];
  for (let i = 0; i < 10; i++) checks.push(await healthOnFreshConnection(port));
  const ok = checks.filter((c) => c.status === 200);
  const okMs = ok.map((c) => c.ms).sort((a, b) => a - b);
  rows.push([
    `idle flood of ${FLOOD} connections (default caps 256 + reserve 16)`,
    `API holds ${held}; ${refused} closed at the door; API-side descriptors +${apiFds}`,
  ]);
  rows.push([
    'health check on a fresh connection during the flood',
    `${ok.length}/10 answered 200${ok.length ? `, p50 ${pct(okMs, 50).toFixed(2)} ms, max ${okMs.at(-1).toFixed(2)} ms` : ''}`,
  ]);
  for (const s of sockets) s.destroy();
  await api.dispose();

  console.log(`| what (node ${process.version}, ${require('node:os').cpus().length} cores) | figure |`);
  console.log('| --- | --- |');
  for (const [what, fig] of rows) console.log(`| ${what} | ${fig} |`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
