#!/usr/bin/env bash
# Packs every package and installs the tarballs into an empty project, then
# requires each one (and each testing entry, which must load without jest)
# and exercises the state store and the proto loader: what a user of the
# published packages would get. Run on purpose after `npm run build` (it
# uses the npm registry for third-party dependencies).
set -euo pipefail
cd "$(dirname "$0")/.."
# Every package, in dependency order; the one list both the packing and the checks below use.
packages=(core state csi hostpath-plugin registry csimanager volumes driver hooks agent)
work=$(mktemp -d /tmp/csiplug-pack-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tgz"
for p in "${packages[@]}"; do
  (cd "packages/$p" && npm pack --silent --pack-destination "$work/tgz" >/dev/null)
done
cd "$work"
npm init -y >/dev/null
npm install --no-audit --no-fund ./tgz/*.tgz >/dev/null
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
echo "pack check: ${#packages[@]} packages install and import in an empty project"
