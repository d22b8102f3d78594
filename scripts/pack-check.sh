#!/usr/bin/env bash
# Packs every package and installs the tarballs into an empty project, then
# requires each one and exercises the state store and the proto loader:
# what a user of the published packages would get. Run on purpose after
# `npm run build` (it uses the npm registry for third-party dependencies).
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/csiplug-pack-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tgz"
for p in core state csi hostpath-plugin registry csimanager hooks agent; do
  (cd "packages/$p" && npm pack --silent --pack-destination "$work/tgz" >/dev/null)
done
cd "$work"
npm init -y >/dev/null
npm install --no-audit --no-fund ./tgz/*.tgz >/dev/null
node -e "
require('reflect-metadata');
for (const p of ['core', 'state', 'csi', 'hostpath-plugin', 'registry', 'csimanager', 'hooks', 'agent']) {
  const m = require('@csiplug/' + p);
  if (Object.keys(m).length === 0) throw new Error('@csiplug/' + p + ' exports nothing');
}
const { openClientState } = require('@csiplug/state');
const s = openClientState({ path: '$work/state/state.db' });
s.putVolume('v', { ok: true });
if (!s.getVolume('v').ok) throw new Error('state round trip failed');
s.close();
const { csiPackageDefinition } = require('@csiplug/csi');
if (!csiPackageDefinition()['csi.v1.Node']) throw new Error('the CSI proto did not load from the package');
"
./node_modules/.bin/csiplug version
echo "pack check: 8 packages install and import in an empty project"
