#!/usr/bin/env node
// The `csiplug-hostpath` command as npm links it. This small file is
// committed, not built, because npm links a package's bins at install time
// and skips one whose file does not exist yet: pointing the bin at dist/
// left a fresh `npm ci` without `npx csiplug-hostpath`. The program itself
// is dist/cli.js.
'use strict';
const fs = require('fs');
const path = require('path');

const program = path.join(__dirname, '..', 'dist', 'cli.js');
if (!fs.existsSync(program)) {
  process.stderr.write(
    `csiplug-hostpath: ${program} does not exist: @csiplug/hostpath-plugin is not built yet; run \`npm run build\` at the repository root first\n`,
  );
  process.exit(1);
}
require(program);
