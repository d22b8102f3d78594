#!/usr/bin/env node
// Embedding the agent and swapping an implementation: a deployment binds its
// own class to a token before the agent's registration functions run, and
// the agent uses it everywhere that token is injected. Here: a TimeoutPolicy
// that waits longer for plugins after an agent restart on a busy node, and a
// logger that keeps lines in memory.
//   npm run build && node examples/embed-agent.js
require('reflect-metadata');
const os = require('os');
const path = require('path');
const fs = require('fs');
const { bind, DefaultTimeoutPolicy, ITimeoutPolicy, ILogger, MemoryLogger } = require('@csiplug/core');
const { Agent } = require('@csiplug/agent');
const { devConfig } = require('@csiplug/jobspec');

class BusyNodeTimeouts extends DefaultTimeoutPolicy {
  pluginWait(phase) {
    // 15 minutes instead of 5 when restoring: this node restores hundreds of plugins.
    return phase === 'restore' ? 15 * 60_000 : super.pluginWait(phase);
  }
}

async function main() {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-embed-'));
  const logger = new MemoryLogger();
  const agent = await Agent.start(
    { ...devConfig(), dataDir, port: 0 },
    {
      configure(container) {
        bind(container, ITimeoutPolicy, { useValue: new BusyNodeTimeouts() });
        bind(container, ILogger, { useValue: logger });
      },
    },
  );
  try {
    const policy = agent.container.resolve(ITimeoutPolicy);
    console.log(`restore wait: ${policy.pluginWait('restore') / 60_000} min (custom policy: ${policy instanceof BusyNodeTimeouts})`);
    console.log(`agent logged ${logger.records.length} lines to the custom logger, e.g. "${logger.find('agent started')[0]?.msg}"`);
    console.log(`health: ${JSON.stringify(agent.health().allocs)}`);
  } finally {
    await agent.dispose({ stopTasks: true });
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
