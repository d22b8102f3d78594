// Mutation testing (issue 26): StrykerJS over one target at a time, run on
// purpose with `npm run mutation` (scripts/mutation.sh), never in CI or
// `npm test`: a full target takes many minutes on two cores.
//
// MUTATION_TARGET names the target. Each mutates the target's production
// files (never specs, never src/testing) by glob, so files split or added
// later are covered without editing this file, and runs only its package's
// unit specs (src/**/*.spec.ts: no root, no real processes or mounts).
import path from 'node:path';

/**
 * Target name → the package whose unit specs judge it, the production files
 * mutated, and specs left out: the registry's randomized model test
 * (concurrency.spec.ts, about 30 s a run) covers nearly every line, so it
 * would run for each of ~570 mutants; its example specs judge it instead.
 */
const TARGETS = {
  registry: { pkg: 'packages/registry', mutate: 'packages/registry/src/**/*.ts', leaveOut: ['src/concurrency.spec.ts'] },
  csimanager: { pkg: 'packages/csimanager', mutate: 'packages/csimanager/src/**/*.ts' },
  reconciler: { pkg: 'packages/volumes', mutate: 'packages/volumes/src/reconciler/**/*.ts' },
};

const name = process.env.MUTATION_TARGET;
const target = TARGETS[name];
if (!target) {
  throw new Error(
    `MUTATION_TARGET "${name ?? ''}" is not a mutation target: use one of ${Object.keys(TARGETS).join(', ')} (npm run mutation -- <target>)`,
  );
}

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  mutate: [target.mutate, '!**/*.spec.ts', '!**/src/testing/**'],
  testRunner: 'jest',
  jest: {
    projectType: 'custom',
    configFile: path.join(target.pkg, 'jest.config.js'),
    // Unit specs only: the package's test/ holds the real-process tests.
    config: {
      testMatch: ['<rootDir>/src/**/*.spec.ts'],
      testPathIgnorePatterns: ['/node_modules/', ...(target.leaveOut ?? []).map((f) => `<rootDir>/${f}`)],
    },
    enableFindRelatedTests: false,
  },
  coverageAnalysis: 'perTest',
  // Two cores shared by everyone: pass --concurrency 1 while others run tests.
  concurrency: 2,
  timeoutMS: 10000,
  // The sandbox holds what jest needs: the root presets and the target package's sources.
  ignorePatterns: [
    '/*',
    '!/jest.preset.js',
    '!/tsconfig.base.json',
    '!/tsconfig.jest.json',
    '!/package.json',
    '!/packages',
    '/packages/*',
    `!/${target.pkg}`,
    `/${target.pkg}/dist`,
  ],
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: `reports/mutation/${name}.html` },
  jsonReporter: { fileName: `reports/mutation/${name}.json` },
  // `--incremental` reruns only mutants whose code or covering tests changed since the last run.
  incrementalFile: `reports/mutation/${name}.incremental.json`,
  tempDirName: '.stryker-tmp',
  cleanTempDir: true,
};
