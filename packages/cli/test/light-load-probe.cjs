// Run by light-load.test.ts in a child node process of its own (a fresh
// module cache, nothing jest loaded): requires @csiplug/cli as a user's
// `require` would, through its package entry, and prints as JSON every file
// node loaded for it with the npm package that file belongs to, and which
// file first required each one.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const Module = require('node:module');

/** The file that first required each file: Module._load sees every require, so a test can say through which chain a package came in. */
const firstRequiredBy = {};
const originalLoad = Module._load;
Module._load = function load(request, parent) {
  const exported = originalLoad.apply(this, arguments);
  if (parent && parent.filename) {
    try {
      const file = Module._resolveFilename(request, parent);
      if (!(file in firstRequiredBy)) firstRequiredBy[file] = parent.filename;
    } catch {
      // Resolved once already by the load above; a request that cannot be resolved again names no file.
    }
  }
  return exported;
};

const entry = require.resolve('@csiplug/cli');
const cli = require(entry);
Module._load = originalLoad;

/** The name in the nearest package.json above `file` that has one (a workspace package resolves to packages/<dir>, an npm one to node_modules). */
const nameOfDir = new Map();
function packageOf(file) {
  for (let dir = path.dirname(file); ; dir = path.dirname(dir)) {
    if (nameOfDir.has(dir)) return nameOfDir.get(dir);
    const manifest = path.join(dir, 'package.json');
    let name;
    if (fs.existsSync(manifest)) name = JSON.parse(fs.readFileSync(manifest, 'utf8')).name;
    if (name) {
      nameOfDir.set(dir, { name, dir });
      return { name, dir };
    }
    if (path.dirname(dir) === dir) return { name: '(none)', dir };
  }
}

const loaded = Object.keys(require.cache)
  .filter((file) => file !== __filename)
  .map((file) => {
    const { name, dir } = packageOf(file);
    return { file, package: name, inPackage: path.relative(dir, file) };
  });

process.stdout.write(JSON.stringify({ entry, exports: Object.keys(cli), loaded, firstRequiredBy }));
