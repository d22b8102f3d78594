#!/usr/bin/env node
// Lays out a new package in the workspace's one shape (package.json,
// project.json, tsconfig*.json, jest.config.js, src/index.ts, README.md).
// Usage: node scripts/new-package.js NAME "description" [dep@range ...]
const fs = require('fs');
const path = require('path');

const [name, description, ...deps] = process.argv.slice(2);
if (!name || !/^[a-z][a-z0-9-]*$/.test(name) || !description) {
  console.error('usage: node scripts/new-package.js NAME "description" [dep@range ...]');
  process.exit(2);
}
const root = path.join(__dirname, '..', 'packages', name);
if (fs.existsSync(root)) {
  console.error(`packages/${name} exists already`);
  process.exit(1);
}
const dependencies = {};
for (const d of deps) {
  const at = d.lastIndexOf('@');
  dependencies[d.slice(0, at)] = d.slice(at + 1);
}
const write = (file, content) => {
  fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
  fs.writeFileSync(path.join(root, file), typeof content === 'string' ? content : JSON.stringify(content, null, 2) + '\n');
};
write('package.json', {
  name: `@csiplug/${name}`,
  version: require('../packages/core/package.json').version,
  description,
  // The metadata every package carries (packages/agent/test/packaging.test.ts checks it).
  keywords: ['csi', 'container-storage-interface', 'nomad', 'csiplug', name],
  homepage: `https://github.com/csiplug/csiplug/tree/main/packages/${name}#readme`,
  bugs: { url: 'https://github.com/csiplug/csiplug/issues' },
  repository: { type: 'git', url: 'git+https://github.com/csiplug/csiplug.git', directory: `packages/${name}` },
  license: 'MPL-2.0',
  main: './dist/index.js',
  types: './dist/index.d.ts',
  exports: { '.': { types: './dist/index.d.ts', default: './dist/index.js' }, './package.json': './package.json' },
  files: ['dist', '!dist/**/*.spec.*', 'src', '!src/**/*.spec.ts', 'README.md', 'LICENSE'],
  engines: { node: '>=20' },
  publishConfig: { access: 'public' },
  dependencies,
  // One tsyringe for every @csiplug package; Node's types for the published .d.ts.
  peerDependencies: { '@types/node': '>=20', tsyringe: '^4.10.0' },
  peerDependenciesMeta: { '@types/node': { optional: true } },
});
fs.copyFileSync(path.join(__dirname, '..', 'LICENSE'), path.join(root, 'LICENSE'));
const run = (command) => ({ executor: 'nx:run-commands', options: { command, cwd: '{projectRoot}' } });
write('project.json', {
  name,
  $schema: '../../node_modules/nx/schemas/project-schema.json',
  sourceRoot: `packages/${name}/src`,
  projectType: 'library',
  targets: {
    build: run('rm -rf dist && tsc -p tsconfig.lib.json'),
    lint: run('tsc -p tsconfig.spec.json --noEmit'),
    test: run('jest --colors=false'),
  },
});
write('tsconfig.json', { extends: '../../tsconfig.base.json', include: ['src/**/*.ts'] });
write('tsconfig.lib.json', {
  extends: './tsconfig.json',
  compilerOptions: { outDir: 'dist', rootDir: 'src' },
  include: ['src/**/*.ts'],
  exclude: ['src/**/*.spec.ts'],
});
write('tsconfig.spec.json', {
  extends: './tsconfig.json',
  compilerOptions: { noEmit: true, types: ['node', 'jest'], noUnusedLocals: false },
  include: ['src/**/*.ts', 'test/**/*.ts'],
});
write('jest.config.js', "module.exports = { ...require('../../jest.preset.js') };\n");
write('src/index.ts', `// Public face of @csiplug/${name}.\nexport {};\n`);
write(
  'README.md',
  `# @csiplug/${name}\n\n${description}\n\nInstall it with \`tsyringe\`, its peer dependency (one copy serves every\n\`@csiplug/*\` package in a project):\n\n<!-- readme-test: skip (installs from the npm registry) -->\n\`\`\`sh\nnpm install @csiplug/${name} tsyringe\n\`\`\`\n`,
);
console.log(`created packages/${name}; place it on a floor in .dependency-cruiser.cjs (FLOORS) and in ARCHITECTURE.md's table`);
