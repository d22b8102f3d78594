// A child process for the kill -9 tests: opens a layer store from the BUILT
// package (dist) and unpacks the image whose layers are given as JSON, so
// the test can SIGKILL it mid-unpack; given a task dir, it also prepares the
// task's root there and then SIGKILLs itself, as an agent killed while its
// task runs. Plain JS: it runs under node, not jest.
'use strict';
// A computed path: the built package is not there until the build has run (the layering check reads this file before it).
const { LayerStore, prepareRootfs } = require(require('node:path').join(__dirname, '..', '..', 'dist'));

async function main() {
  const [storeDir, mode, layersJson, taskDir] = process.argv.slice(2);
  const store = await LayerStore.open({ storeDir, mode });
  const image = await store.unpackImage(JSON.parse(layersJson));
  if (taskDir) {
    await prepareRootfs({ image, dir: taskDir });
    process.kill(process.pid, 'SIGKILL');
  }
  process.stdout.write('done\n');
}

main().catch((err) => {
  process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
