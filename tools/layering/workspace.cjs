// What the layering check (.dependency-cruiser.cjs) needs to know about the
// workspace: its packages and their manifests, and where each declared entry
// point (`@csiplug/<name>`, `@csiplug/<name>/testing`, ...) lives in source.
//
// The check resolves entry points to `src/`, not to the built `dist/` their
// `exports` name, so it gives the same answer before and after a build: in CI
// it runs straight after `npm ci`, when no `dist/` exists yet.
'use strict';

const fs = require('node:fs');
const path = require('node:path');

const SCOPE = '@csiplug/';

/**
 * The packages under `<root>/packages` that have a manifest, as
 * `{ dir, name, manifest }` (dir is the folder name, e.g. `core`). A folder
 * without a package.json (a package someone is still laying out) is left out.
 */
function readPackages(root) {
  const packagesDir = path.join(root, 'packages');
  if (!fs.existsSync(packagesDir)) return [];
  return fs
    .readdirSync(packagesDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => ({ dir: entry.name, manifestPath: path.join(packagesDir, entry.name, 'package.json') }))
    .filter(({ manifestPath }) => fs.existsSync(manifestPath))
    .map(({ dir, manifestPath }) => {
      let manifest;
      try {
        manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8'));
      } catch (error) {
        throw new Error(`layering: cannot read ${manifestPath}: ${error.message}`);
      }
      return { dir, name: manifest.name, manifest };
    });
}

/** The first file target of an `exports` value: a string, or the first string found through its conditions. */
function firstTarget(exportValue) {
  if (typeof exportValue === 'string') return exportValue;
  if (exportValue && typeof exportValue === 'object') {
    for (const key of ['default', 'require', 'node', 'import', 'types']) {
      const target = firstTarget(exportValue[key]);
      if (target) return target;
    }
    for (const value of Object.values(exportValue)) {
      const target = firstTarget(value);
      if (target) return target;
    }
  }
  return undefined;
}

/**
 * The source file a built entry target comes from: `./dist/x/index.js` (or
 * `.d.ts`) was compiled from `src/x/index.ts` (every package builds `src` into
 * `dist` with tsconfig.lib.json). Targets outside `dist` (`./package.json`)
 * are not code and have no source.
 */
function sourceOfTarget(target) {
  const match = /^\.\/dist\/(.+?)(\.d\.ts|\.js)$/.exec(target);
  return match ? `src/${match[1]}.ts` : undefined;
}

/**
 * The declared entry points of every package, as `{ specifier, source }`:
 * `specifier` is what another package writes (`@csiplug/core`,
 * `@csiplug/driver/testing`), `source` the absolute path of the file it means.
 * Entries come from `exports` (or `main` when there is none); pattern
 * exports (`./*`) are not entry points this workspace uses and are skipped.
 */
function entryPoints(root) {
  const entries = [];
  for (const pkg of readPackages(root)) {
    if (typeof pkg.name !== 'string' || !pkg.name.startsWith(SCOPE)) continue;
    const exportsField = pkg.manifest.exports;
    const declared =
      exportsField === undefined
        ? { '.': pkg.manifest.main }
        : typeof exportsField === 'string' || !Object.keys(exportsField).some((key) => key.startsWith('.'))
          ? { '.': exportsField }
          : exportsField;
    for (const [subpath, value] of Object.entries(declared)) {
      if (subpath.includes('*')) continue;
      const target = firstTarget(value);
      const source = target && sourceOfTarget(target);
      if (!source) continue;
      entries.push({
        specifier: subpath === '.' ? pkg.name : `${pkg.name}/${subpath.replace(/^\.\//, '')}`,
        source: path.join(root, 'packages', pkg.dir, source),
      });
    }
  }
  return entries;
}

/** Escapes a string for use inside a regular expression. */
function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

module.exports = { SCOPE, readPackages, entryPoints, escapeRegExp };
