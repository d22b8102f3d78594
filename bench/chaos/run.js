#!/usr/bin/env node
// bench/chaos: the fault suite at its full counts — every crash point in four
// variants (≥ 100 rounds), random kill -9 moments, every plugin fault in
// every phase, storage faults, ≥ 20 "plugin away" rounds — and the one table
// it prints: scenario, rounds, survived, leaks. The scenarios are the ones
// the CI tests run with small counts (packages/agent/test/chaos/scenarios.ts);
// this loads that TypeScript the way ts-jest does (each file transpiled on
// its own, with tsconfig.jest.json), and the agent it starts is the built
// one. Run on purpose, as root, after `npm run build`:
//   node bench/chaos/run.js [--scenario crash,away] [--only LABEL[,LABEL]] [--rounds N] [--ci] [--concurrency 2] [--isolated] [--quiet]
// (--isolated runs every round's plugin and workloads isolated on runc, driver = "exec")
// (--only keeps the rounds whose label contains one of the words, e.g. a crash point or "restore: hang")
require('reflect-metadata');
const fs = require('fs');
const path = require('path');
const ts = require('typescript');

const repo = path.resolve(__dirname, '..', '..');
const tsconfigFile = path.join(repo, 'tsconfig.jest.json');
const { options: compilerOptions } = ts.parseJsonConfigFileContent(ts.readConfigFile(tsconfigFile, ts.sys.readFile).config, ts.sys, repo);
require.extensions['.ts'] = (module, filename) => {
  const out = ts.transpileModule(fs.readFileSync(filename, 'utf8'), {
    compilerOptions: { ...compilerOptions, sourceMap: false, inlineSourceMap: true },
    fileName: filename,
  });
  module._compile(out.outputText, filename);
};

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const flag = (name) => process.argv.includes(`--${name}`);

async function main() {
  if (process.getuid && process.getuid() !== 0) throw new Error('bench/chaos mounts and unmounts: run it as root');
  const { ALL_SCENARIOS, pluginFaultScenarioCi, runScenario, formatTable, describeFailures } = require(
    path.join(repo, 'packages', 'agent', 'test', 'chaos', 'scenarios.ts'),
  );
  const { ChaosAgent } = require(path.join(repo, 'packages', 'agent', 'test', 'chaos', 'chaos-agent.ts'));
  // Cut short: the rounds under way still leave nothing behind (their processes killed, their mounts taken down).
  for (const signal of ['SIGINT', 'SIGTERM']) {
    process.once(signal, () => {
      process.stderr.write(`bench/chaos: ${signal}; cleaning up ${ChaosAgent.live.size} round(s) under way\n`);
      Promise.allSettled([...ChaosAgent.live].map((a) => a.destroy())).then(() => process.exit(130));
    });
  }
  const ci = flag('ci');
  ChaosAgent.isolatedByDefault = flag('isolated');
  const wanted = (arg('scenario', '') || '').split(',').filter(Boolean);
  const scenarios = ALL_SCENARIOS.map((s) => (ci && s.name === 'plugin faults' ? pluginFaultScenarioCi : s)).filter(
    (s) => !wanted.length || wanted.some((w) => s.name.includes(w)),
  );
  if (!scenarios.length) throw new Error(`no scenario matches ${wanted.join(', ')}; known: ${ALL_SCENARIOS.map((s) => s.name).join(', ')}`);
  const concurrency = Number(arg('concurrency', '2'));
  const quiet = flag('quiet');
  const results = [];
  const t0 = Date.now();
  for (const s of scenarios) {
    const rounds = Number(arg('rounds', '')) || (ci ? s.rounds.ci : s.rounds.full);
    const only = (arg('only', '') || '').split(',').filter(Boolean);
    const indices = Array.from({ length: rounds }, (_, i) => i).filter((i) => !only.length || only.some((w) => s.labelOf(i).includes(w)));
    if (!indices.length) continue;
    process.stderr.write(`${s.name}: ${indices.length} rounds, ${concurrency} at a time\n`);
    const r = await runScenario(s, rounds, {
      concurrency,
      indices,
      log: quiet ? undefined : (line) => process.stderr.write(`  ${line}\n`),
    });
    results.push(r);
    if (r.failures.length) process.stderr.write(`${describeFailures(r)}\n`);
  }
  process.stdout.write(
    `\n${ChaosAgent.isolatedByDefault ? 'plugin and workloads isolated on runc (exec)\n' : ''}${formatTable(results)}\n\n${((Date.now() - t0) / 1000).toFixed(0)} s in all\n`,
  );
  const bad = results.some((r) => r.survived < r.rounds || Object.values(r.leaks).some((n) => n > 0));
  process.exitCode = bad ? 1 : 0;
}

main().catch(async (err) => {
  process.stderr.write(`bench/chaos: ${err.stack || err}\n`);
  const { ChaosAgent } = require(path.join(repo, 'packages', 'agent', 'test', 'chaos', 'chaos-agent.ts'));
  await Promise.allSettled([...ChaosAgent.live].map((a) => a.destroy()));
  process.exit(2);
});
