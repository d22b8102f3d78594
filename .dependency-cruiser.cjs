// The layering check: which module may import which, enforced by
// dependency-cruiser on every `npm test` (`npm run layering`). It reads
// packages/*/src and packages/*/test; dist/, node_modules and generated code
// are not ours to layer. Each rule says why it exists.
//
// The tree checked is this repository, or the directory in the environment
// variable CSIPLUG_LAYERING_ROOT (the check's own test points it at fixture
// trees). Package manifests are read from that tree, so the rules follow
// package.json files as they change.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { SCOPE, readPackages, escapeRegExp } = require('./tools/layering/workspace.cjs');

const ROOT = path.resolve(process.env.CSIPLUG_LAYERING_ROOT || __dirname);

// ---------------------------------------------------------------------------
// THE FLOORS — edit here.
// Lowest first. A package may import only packages on lower floors (and its
// own files); packages on the same floor must not import each other. A name
// whose package does not exist yet is harmless. Every folder in packages/ must
// be on a floor: the check refuses to run until a new package is placed here.
// ---------------------------------------------------------------------------
const FLOORS = [
  /* 0 */ ['core'],
  /* 1 */ ['state', 'csi', 'jobspec', 'images'],
  /* 2 */ ['registry', 'driver', 'hostpath-plugin'],
  /* 3 */ ['csimanager'],
  /* 4 */ ['volumes'],
  /* 5 */ ['hooks'],
  /* 6 */ ['api'],
  /* 7 */ ['runner', 'cli', 'cluster'],
  /* 8 */ ['agent'],
];

// ---------------------------------------------------------------------------
// Derived from the above and from the package manifests; no need to edit.
// ---------------------------------------------------------------------------

/** Matches a dependency's resolved path when it lands in one of `names`, resolved to source, left in node_modules, or not resolved at all. */
function toPackages(names) {
  return `^(?:packages/|(?:node_modules/)?${escapeRegExp(SCOPE)})(?:${names.map(escapeRegExp).join('|')})(?:/|$)`;
}

/** Matches a dependency's resolved path when it lands in a package other than `names`. */
function toPackagesOtherThan(names) {
  return `^(?:packages/|(?:node_modules/)?${escapeRegExp(SCOPE)})(?!(?:${names.map(escapeRegExp).join('|')})(?:/|$))[^/]+`;
}

/** Test code: unit tests beside the source, a package's test/ folder, and its testing entry. */
const TEST_FILES = ['^packages/[^/]+/test/', '^packages/[^/]+/src/.*\\.spec\\.ts$', '^packages/[^/]+/src/testing/'];

/** Code that ships: everything in a package's src/ that is not test code. */
const SHIPPED_SOURCE = { path: '^packages/[^/]+/src/', pathNot: TEST_FILES };

/** Code only tests run: unit tests and a package's test/ folder (a testing entry ships, so it is not here). */
const TEST_ONLY = ['^packages/[^/]+/test/', '^packages/[^/]+/src/.*\\.spec\\.ts$'];

/** Code in the tarball, testing entries included: what it imports must be declared as a dependency, not a devDependency. */
const PACKED_SOURCE = { path: '^packages/[^/]+/src/', pathNot: TEST_ONLY };

const floorOf = new Map(FLOORS.flatMap((names, floor) => names.map((name) => [name, floor])));

function checkEveryPackageHasAFloor() {
  const packagesDir = path.join(ROOT, 'packages');
  if (!fs.existsSync(packagesDir)) return;
  const unplaced = fs
    .readdirSync(packagesDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && !floorOf.has(entry.name))
    .map((entry) => `packages/${entry.name}`);
  if (unplaced.length > 0) {
    throw new Error(
      `layering: ${unplaced.join(', ')} ${unplaced.length === 1 ? 'is' : 'are'} on no floor; ` +
        `add ${unplaced.length === 1 ? 'it' : 'them'} to FLOORS in ${path.join(__dirname, '.dependency-cruiser.cjs')}`,
    );
  }
}
checkEveryPackageHasAFloor();

// One rule per package, all named `floors`: from the package to any package
// on its own floor or above.
const floorRules = [...floorOf].flatMap(([name, floor]) => {
  const notBelow = [...floorOf].filter(([other, otherFloor]) => other !== name && otherFloor >= floor).map(([other]) => other);
  const below = [...floorOf].filter(([, otherFloor]) => otherFloor < floor).map(([other]) => other);
  if (notBelow.length === 0) return [];
  return [
    {
      name: 'floors',
      severity: 'error',
      comment:
        `${name} sits on floor ${floor} and may import only packages on lower floors ` +
        `(${below.join(', ') || 'none'}). Importing sideways or upwards tangles the build order ` +
        `and lets a low package depend on policy decided above it.`,
      from: { path: `^packages/${escapeRegExp(name)}/` },
      to: { path: toPackages(notBelow) },
    },
  ];
});

// One rule per package, named `no-undeclared-workspace-dependency`: shipped
// code may use only the workspace packages in dependencies (and peer/optional
// dependencies); test code may also use devDependencies. A package with no
// manifest yet declares nothing.
const manifests = new Map(readPackages(ROOT).map((pkg) => [pkg.dir, pkg.manifest]));
function workspaceDeps(manifest, fields) {
  return fields
    .flatMap((field) => Object.keys((manifest && manifest[field]) || {}))
    .filter((dep) => dep.startsWith(SCOPE))
    .map((dep) => dep.slice(SCOPE.length));
}
const declarationRules = [...floorOf.keys()]
  .filter((name) => fs.existsSync(path.join(ROOT, 'packages', name)))
  .flatMap((name) => {
    const manifest = manifests.get(name);
    const shipped = workspaceDeps(manifest, ['dependencies', 'peerDependencies', 'optionalDependencies']);
    const forTests = [...shipped, ...workspaceDeps(manifest, ['devDependencies'])];
    const own = `^packages/${escapeRegExp(name)}/`;
    const why =
      `packages/${name}/package.json must declare every @csiplug package ${name} imports: ` +
      `npm installs a packed tarball's dependencies from it, and nx orders builds by it.`;
    return [
      {
        name: 'no-undeclared-workspace-dependency',
        severity: 'error',
        comment: `${why} Shipped code (testing entries included): dependencies${shipped.length ? ` (${shipped.join(', ')})` : ' (none declared)'}.`,
        from: { path: `${own}src/`, pathNot: TEST_ONLY },
        to: { path: toPackagesOtherThan([name, ...shipped]) },
      },
      {
        name: 'no-undeclared-workspace-dependency',
        severity: 'error',
        comment: `${why} Test code: dependencies and devDependencies${forTests.length ? ` (${forTests.join(', ')})` : ' (none declared)'}.`,
        from: { path: TEST_ONLY.map((pattern) => pattern.replace('^packages/[^/]+/', own)) },
        to: { path: toPackagesOtherThan([name, ...forTests]) },
      },
    ];
  });

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    ...floorRules,
    {
      name: 'no-deep-import',
      severity: 'error',
      comment:
        'Another package is reached only through a declared entry point: `@csiplug/<name>` or one it exports, such as `@csiplug/<name>/testing`. ' +
        'A path into its dist/ or src/ breaks when that package moves a file, and is not in the tarball npm publishes.',
      from: { path: '^packages/' },
      to: {
        path: `^(?:node_modules/)?${escapeRegExp(SCOPE)}[^/]+/`,
        pathNot: `^(?:node_modules/)?${escapeRegExp(SCOPE)}[^/]+/package\\.json$`,
      },
    },
    {
      name: 'no-relative-import-across-packages',
      severity: 'error',
      comment:
        'A relative path (../../other/src/x) into another package bypasses its entry points and its package.json: ' +
        'import `@csiplug/<name>` instead.',
      from: { path: '^packages/([^/]+)/' },
      to: { path: '^packages/', pathNot: '^packages/$1/', dependencyTypesNot: ['aliased'] },
    },
    {
      name: 'testing-only-from-tests',
      severity: 'error',
      comment:
        'Fakes and conformance suites (src/testing, `@csiplug/<name>/testing`) are for tests. Shipped code that ' +
        'imports them would run a fake in production.',
      from: SHIPPED_SOURCE,
      to: { path: `^packages/[^/]+/src/testing/|^(?:node_modules/)?${escapeRegExp(SCOPE)}[^/]+/testing(?:/|$)` },
    },
    {
      name: 'no-circular',
      severity: 'error',
      comment:
        'Modules that import each other, even for types only, cannot be understood, tested or moved one at a time. ' +
        'The usual one: tokens.ts naming an implementation class that imports tokens.ts; type the token by an ' +
        'interface that lives beside it (or in a contract file the implementation imports) instead.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'cli-over-the-client-only',
      severity: 'error',
      comment:
        'The CLI talks to an agent through the API client only: its shipped code may import @csiplug/api/client, ' +
        '@csiplug/jobspec and @csiplug/core, never the HTTP server or another package, so every command but ' +
        '`agent` and `demo` (added by the agent) runs without loading the agent.',
      from: { path: '^packages/cli/src/', pathNot: TEST_FILES },
      to: {
        path: `^(?:packages/|(?:node_modules/)?${escapeRegExp(SCOPE)})(?!cli/)[^/]+`,
        pathNot: [
          `^(?:packages/|(?:node_modules/)?${escapeRegExp(SCOPE)})(?:core|jobspec)(?:/|$)`,
          `^(?:packages/api/(?:src|dist)/(?:client|api-client|api-error|protocol|service|service-errors|log-slice)\\.(?:ts|js|d\\.ts)$|(?:node_modules/)?${escapeRegExp(SCOPE)}api/client$)`,
        ],
      },
    },
    ...declarationRules,
    {
      name: 'no-non-package-json',
      severity: 'error',
      comment:
        "An npm package imported but not in the importing package's package.json (or, for tests, the root's " +
        'devDependencies) works here only because npm hoists it, and is missing when the package is installed from its tarball.',
      from: {},
      to: { dependencyTypes: ['npm-no-pkg', 'npm-unknown'] },
    },
    {
      name: 'not-to-dev-dep',
      severity: 'error',
      comment:
        "Shipped code must not import a devDependency (the package's or the root's): it is not installed with the " +
        'tarball. Declare it in dependencies, or move the import into test code. A peer dependency the workspace ' +
        'also installs as a devDependency (tsyringe) is fine: the user installs it beside the tarball.',
      from: PACKED_SOURCE,
      to: { dependencyTypes: ['npm-dev'], dependencyTypesNot: ['npm', 'npm-peer'], pathNot: 'node_modules/@types/' },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment:
        'An import that resolves to nothing: a typo, a file that moved, a package that is not installed, or an ' +
        'entry point a package does not declare in its exports.',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    baseDir: ROOT,
    // Only packages/*/src and packages/*/test; generated gRPC types are not ours to layer.
    exclude: { path: ['^packages/[^/]+/(?!(?:src|test)(?:/|$))', '^packages/[^/]+/src/generated/'] },
    doNotFollow: { path: 'node_modules' },
    // Type-only imports count: a tokens.ts that imports a class for its type is still a cycle.
    tsPreCompilationDeps: true,
    // Keep `node_modules/@csiplug/x/...` as the resolved path of a deep import, so it is
    // told apart from an entry point, which tools/layering/resolve.cjs aliases to source.
    preserveSymlinks: true,
    // A package's own manifest plus the root's: tests may use the root's devDependencies.
    combinedDependencies: true,
    webpackConfig: { fileName: path.join(__dirname, 'tools', 'layering', 'resolve.cjs'), env: { root: ROOT } },
    skipAnalysisNotInRules: true,
    cache: false,
  },
};
