// A child process for the kill -9 test of image tasks: the parts of an agent
// that run an image task (exec driver, image service, alloc runner over a
// state file), from the BUILT packages, as the agent holds them. Started
// with `start`, it runs the alloc; with `restore`, it restores it from the
// state file, as a restarted agent does. Every task event goes to stdout as
// one JSON line; the test SIGKILLs it. Plain JS: it runs under node, not jest.
'use strict';
require('reflect-metadata');
const path = require('node:path');
const { MemoryLogger, RealClock } = require('@csiplug/core');
const { ExecDriver } = require('@csiplug/driver');
const { TaskImages } = require('@csiplug/images');
const { defaultExecConfig } = require('@csiplug/jobspec');
const { openClientState } = require('@csiplug/state');
// A computed path: the built package is not there until the build has run (the layering check reads this file before it).
const { AllocRunner, StateAllocStore, TaskStateWriter } = require(path.join(__dirname, '..', '..', 'dist'));

async function main() {
  const [mode, configJson] = process.argv.slice(2);
  const config = JSON.parse(configJson);
  const logger = new MemoryLogger();
  const state = openClientState({ path: config.statePath });
  const store = new StateAllocStore(state);
  const writer = new TaskStateWriter(store);
  const driver = new ExecDriver(new RealClock(), logger, { runcRoot: config.runcRoot, pollInterval: 200 });
  const images = new TaskImages({
    dataDir: config.dataDir,
    docker: { pullActivityTimeout: 60_000, gc: { image: false, imageDelay: 0 } },
    certsDir: config.certsDir,
  });
  const alloc = mode === 'start' ? config.alloc : store.getAllocation(config.alloc.id).alloc;
  const runner = new AllocRunner(alloc, {
    dataDir: config.dataDir,
    nodeId: 'n1',
    driver,
    allocStore: store,
    taskStates: writer,
    exec: defaultExecConfig(),
    hostNetwork: () => false,
    rawExec: () => false,
    clock: new RealClock(),
    logger,
    supervisors: {},
    csiHooks: {},
    volumes: { list: () => [] },
    variables: {},
    images,
    onTaskEvent: (_alloc, task, event) => {
      // Saved before it is said: the test may kill this process as soon as it reads the line.
      writer.flush();
      const handle = store.getTaskHandle(alloc.id, task);
      process.stdout.write(`${JSON.stringify({ task, type: event.type, message: event.message, pid: handle && handle.pid })}\n`);
    },
    onStatusChange: () => undefined,
  });
  await runner.run(mode === 'start' ? 'start' : 'restore');
}

main().catch((err) => {
  process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
