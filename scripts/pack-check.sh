#!/usr/bin/env bash
# Packs every package and installs the tarballs into an empty project the way
# a user would (the packages plus tsyringe, their peer), then checks what
# that user gets: each tarball carries LICENSE, README.md and no spec file;
# every source map it ships resolves inside it; one copy of tsyringe serves
# every package; each package (and each testing entry, which must load
# without jest) requires on its own; the state store and the proto loader
# work; both bins answer --help; and the published types compile under
# strict TypeScript with skipLibCheck off, by the old (node10) and the
# exports-aware (node16) resolution. Run on purpose after `npm run build`
# (it uses the npm registry for third-party dependencies).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
# Every package: each dir under packages/ with a manifest, found (not listed, so a
# new package is checked the day it is added); the one list both the packing
# and the checks below use.
mapfile -t packages < <(for manifest in packages/*/package.json; do basename "$(dirname "$manifest")"; done)
if [ "${#packages[@]}" -eq 0 ]; then echo 'pack check: no package found under packages/' >&2; exit 1; fi
for p in "${packages[@]}"; do
  name=$(node -p "require('./packages/$p/package.json').name")
  [ "$name" = "@csiplug/$p" ] || { echo "pack check: packages/$p is named $name, not @csiplug/$p: the checks below require each package by its dir's name" >&2; exit 1; }
done
work=$(mktemp -d /tmp/csiplug-pack-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tgz"
for p in "${packages[@]}"; do
  (cd "packages/$p" && npm pack --silent --pack-destination "$work/tgz" >/dev/null)
done

# What a tarball must and must not hold, read from the tarball itself.
for tgz in "$work"/tgz/*.tgz; do
  listing=$(tar -tzf "$tgz")
  for required in package/package.json package/LICENSE package/README.md; do
    grep -qx "$required" <<<"$listing" || { echo "pack check: $(basename "$tgz") has no ${required#package/}" >&2; exit 1; }
  done
  if grep -q '\.spec\.' <<<"$listing"; then
    echo "pack check: $(basename "$tgz") ships spec files: $(grep '\.spec\.' <<<"$listing" | head -3 | tr '\n' ' ')" >&2
    exit 1
  fi
done

# The versions the repository builds with, so the type check below is the
# one this repository promises (a newer TypeScript may change its defaults).
peer_range() { node -p "require('$repo/packages/core/package.json').peerDependencies['$1']"; }
dev_range() { node -p "require('$repo/package.json').devDependencies['$1']"; }
tsyringe_range=$(peer_range tsyringe)
typescript_range=$(dev_range typescript)
types_node_range=$(dev_range @types/node)

cd "$work"
npm init -y >/dev/null
# As the packages' READMEs tell a user: the packages and tsyringe, their peer.
npm install --no-audit --no-fund ./tgz/*.tgz "tsyringe@$tsyringe_range" >/dev/null

# One tsyringe for every package: a second copy would hold a second container
# and a second set of tokens, and injection across packages would fail.
# (Counted with grep -c, not wc -l: a here-string of nothing is one line to wc.)
copies=$(find node_modules -path '*/tsyringe/package.json' | sort)
count=$(grep -c . <<<"$copies" || true)
if [ "$count" -ne 1 ]; then
  echo "pack check: $count copies of tsyringe are installed, not one: ${copies//$'\n'/ }" >&2
  exit 1
fi

# Every `sources` entry of every shipped map names a file the same tarball ships.
node -e "
const fs = require('fs');
const path = require('path');
let maps = 0;
for (const name of fs.readdirSync('node_modules/@csiplug')) {
  const root = fs.realpathSync(path.join('node_modules/@csiplug', name));
  const walk = (dir) => fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : [path.join(dir, e.name)]));
  for (const file of walk(root).filter((f) => f.endsWith('.map'))) {
    maps++;
    const map = JSON.parse(fs.readFileSync(file, 'utf8'));
    for (const source of map.sources) {
      const target = path.resolve(path.dirname(file), map.sourceRoot || '', source);
      const inside = target.startsWith(root + path.sep);
      if (!inside || !fs.existsSync(target)) {
        throw new Error('@csiplug/' + name + ': ' + path.relative(root, file) + ' names ' + source + (inside ? ', which the tarball does not ship' : ', outside the package'));
      }
    }
  }
}
if (maps === 0) throw new Error('no source map shipped at all: the check above checked nothing');
console.log('pack check: ' + maps + ' source maps resolve inside their tarballs');
"

# Nothing is loaded first: each package brings what tsyringe needs (reflect-metadata, through @csiplug/core).
CSIPLUG_PACKAGES="${packages[*]}" node -e "
for (const p of process.env.CSIPLUG_PACKAGES.split(' ')) {
  const m = require('@csiplug/' + p);
  if (Object.keys(m).length === 0) throw new Error('@csiplug/' + p + ' exports nothing');
}
const { openClientState } = require('@csiplug/state');
const s = openClientState({ path: '$work/state/state.db' });
s.putVolume('v', { ok: true });
if (!s.getVolume('v').ok) throw new Error('state round trip failed');
s.dispose();
const { csiPackageDefinition } = require('@csiplug/csi');
if (!csiPackageDefinition()['csi.v1.Node']) throw new Error('the CSI proto did not load from the package');
const fs = require('fs');
const { DEFAULT_EXECUTOR_PATH } = require('@csiplug/driver');
if (!fs.existsSync(DEFAULT_EXECUTOR_PATH)) throw new Error('the exec driver default executor ' + DEFAULT_EXECUTOR_PATH + ' is not in the package');
if (typeof require('@csiplug/driver/testing').FakeDriver !== 'function') throw new Error('@csiplug/driver/testing has no FakeDriver');
if (typeof require('@csiplug/agent/testing').FakeAgentService !== 'function') throw new Error('@csiplug/agent/testing has no FakeAgentService');
// Every declared testing entry loads without jest.
for (const p of fs.readdirSync('node_modules/@csiplug')) {
  const manifest = require('@csiplug/' + p + '/package.json');
  if (manifest.exports && manifest.exports['./testing'] && Object.keys(require('@csiplug/' + p + '/testing')).length === 0) throw new Error('@csiplug/' + p + '/testing exports nothing');
}
"
./node_modules/.bin/csiplug version
./node_modules/.bin/csiplug --help | grep -q '^Usage: csiplug' || { echo 'pack check: csiplug --help printed no usage' >&2; exit 1; }
./node_modules/.bin/csiplug-hostpath --help | grep -q '^usage: csiplug-hostpath' || { echo 'pack check: csiplug-hostpath --help printed no usage' >&2; exit 1; }

# The published types, as a TypeScript user of a Node project compiles them:
# with the project's own @types/node (an optional peer of every package whose
# types use Node's), every entry imported, nothing skipped.
npm install --no-audit --no-fund --save-dev "typescript@$typescript_range" "@types/node@$types_node_range" >/dev/null
CSIPLUG_PACKAGES="${packages[*]}" node -e "
const fs = require('fs');
const lines = [];
for (const dir of fs.readdirSync('node_modules/@csiplug')) {
  const manifest = require('@csiplug/' + dir + '/package.json');
  for (const entry of Object.keys(manifest.exports).filter((e) => e !== './package.json')) {
    const specifier = manifest.name + (entry === '.' ? '' : entry.slice(1));
    const n = lines.length;
    lines.push('import * as m' + n + ' from ' + JSON.stringify(specifier) + '; void m' + n + ';');
  }
}
fs.writeFileSync('check-types.ts', lines.join('\n') + '\n');
for (const [name, options] of Object.entries({ node10: { module: 'commonjs', moduleResolution: 'node10' }, node16: { module: 'node16', moduleResolution: 'node16' } })) {
  fs.writeFileSync('tsconfig.' + name + '.json', JSON.stringify({ compilerOptions: { ...options, target: 'ES2022', strict: true, skipLibCheck: false, noEmit: true, types: ['node'] }, files: ['check-types.ts'] }));
}
"
for resolution in node10 node16; do
  ./node_modules/.bin/tsc -p "tsconfig.$resolution.json" || { echo "pack check: the published types do not compile ($resolution resolution)" >&2; exit 1; }
done
echo "pack check: ${#packages[@]} packages install, import and type-check in an empty project"
