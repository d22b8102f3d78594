#!/usr/bin/env node
// The `csiplug` command as npm links it. This small file is committed, not
// built, because npm links a package's bins at install time and skips one
// whose file does not exist yet: pointing the bin at dist/ left a fresh
// `npm ci` without `npx csiplug`. The program itself is dist/bin.js.
'use strict';
const fs = require('fs');
const path = require('path');

const program = path.join(__dirname, '..', 'dist', 'bin.js');
if (!fs.existsSync(program)) {
  process.stderr.write(
    `csiplug: ${program} does not exist: @csiplug/agent is not built yet; run \`npm run build\` at the repository root first\n`,
  );
  process.exit(1);
}
require(program);
