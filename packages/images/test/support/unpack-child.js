// A child process for the kill -9 test: opens a layer store from the BUILT
// package (dist) and unpacks the image whose layers are given as JSON, so
// the test can SIGKILL it mid-unpack. Plain JS: it runs under node, not jest.
'use strict';
const { LayerStore } = require('../../dist');

async function main() {
  const [storeDir, mode, layersJson] = process.argv.slice(2);
  const store = await LayerStore.open({ storeDir, mode });
  await store.unpackImage(JSON.parse(layersJson));
  process.stdout.write('done\n');
}

main().catch((err) => {
  process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
