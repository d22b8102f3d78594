// What the benches share to clean up after themselves: the processes a run
// left under its temp dirs (agents, executors, tasks — raw_exec tasks run in
// their task dir, so their cwd is under it even when their command line is not).
'use strict';
const fs = require('node:fs');

/** Pids of processes whose command line or working directory lies under `dir`. */
function processesUnder(dir) {
  const pids = [];
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
    try {
      const cwd = fs.readlinkSync(`/proc/${e}/cwd`);
      const cmd = fs.readFileSync(`/proc/${e}/cmdline`, 'utf8');
      if (cwd === dir || cwd.startsWith(dir + '/') || cmd.includes(dir)) pids.push(Number(e));
    } catch {
      // gone, or a kernel thread
    }
  }
  return pids;
}

module.exports = { processesUnder };
