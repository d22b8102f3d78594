// What the repository promises about its packages as npm packages: each
// manifest says where the code lives and that it is public; each tarball
// carries the MPL-2.0 LICENSE and the sources its maps name; tsyringe is one
// shared peer; every package whose types use Node's declares @types/node; the
// bins are linked at install time and answer --help; and `npm run
// release:dry-run` versions every package together without changing a file,
// staging, committing or tagging anything. (scripts/pack-check.sh installs the
// real tarballs in an empty project and type-checks them; it needs the npm
// registry, so it runs on purpose, not here.) The version is the packages'
// own: nx release never bumps the private root manifest. Outside a git work
// tree (a source tarball) the assertions that ask git are skipped, and the
// test says why.
import { execFile, execFileSync } from 'child_process';
import { builtinModules } from 'module';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { promisify } from 'util';

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, '..', '..', '..');
const PACKAGES = path.join(ROOT, 'packages');
const DIRS = fs.readdirSync(PACKAGES).filter((p) => fs.existsSync(path.join(PACKAGES, p, 'package.json')));

interface Manifest {
  name: string;
  version: string;
  license?: string;
  keywords?: string[];
  homepage?: string;
  bugs?: { url?: string };
  repository?: { type?: string; url?: string; directory?: string };
  publishConfig?: { access?: string };
  files?: string[];
  bin?: Record<string, string>;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

function manifest(dir: string): Manifest {
  return JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as Manifest;
}

const ROOT_MANIFEST = manifest(ROOT);
const MANIFESTS = new Map(DIRS.map((d) => [d, manifest(path.join(PACKAGES, d))]));
/**
 * The release group's version, read from the packages: nx release versions
 * packages/* only, so the private root manifest keeps its first version
 * forever. Undefined when they disagree (the version test says which).
 */
const VERSIONS = new Set([...MANIFESTS.values()].map((m) => m.version));
const VERSION = VERSIONS.size === 1 ? [...VERSIONS][0]! : undefined;
function groupVersion(): string {
  if (VERSION === undefined)
    throw new Error(
      `the packages have different versions (${[...MANIFESTS].map(([d, m]) => `${d} ${m.version}`).join(', ')}): one release group has one version`,
    );
  return VERSION;
}

/**
 * Whether git can answer here: a source tarball has no work tree, and the
 * assertions that read the index, tags or history cannot run in it. Probed
 * once; the reason is printed when they are skipped.
 */
const GIT = ((): { ok: true } | { ok: false; reason: string } => {
  try {
    const inside = execFileSync('git', ['rev-parse', '--is-inside-work-tree'], {
      cwd: ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    }).trim();
    return inside === 'true'
      ? { ok: true }
      : { ok: false, reason: `${ROOT} is not a git work tree (git rev-parse --is-inside-work-tree says ${inside})` };
  } catch (err) {
    const e = err as { code?: string; stderr?: string; message?: string };
    return {
      ok: false,
      reason: e.code === 'ENOENT' ? 'git is not installed' : `git cannot read ${ROOT}: ${(e.stderr || e.message || '').trim()}`,
    };
  }
})();
if (!GIT.ok)
  console.warn(
    `packaging.test.ts: skipping the git-based assertions (bins tracked by git; nothing staged, committed or tagged by a dry run): ${GIT.reason}`,
  );

/** Every file below `dir`, relative to it. */
function walk(dir: string, base = dir): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name), base) : [path.relative(base, path.join(dir, e.name))]));
}

/** The environment for a child command, without the variables of an nx task this test may run under. */
function childEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('NX_')));
}

describe('package manifests', () => {
  const repoUrl = MANIFESTS.get('core')?.repository?.url ?? '';
  // git+https://github.com/OWNER/REPO.git → https://github.com/OWNER/REPO
  const web = repoUrl.replace(/^git\+/, '').replace(/\.git$/, '');

  it('name one repository, as npm writes its url', () => {
    expect(repoUrl).toMatch(/^git\+https:\/\/github\.com\/[^/]+\/[^/]+\.git$/);
  });

  it.each(DIRS)('packages/%s says where it lives, who to tell, and that it is public', (dir) => {
    const m = MANIFESTS.get(dir)!;
    expect(m.name).toBe(`@csiplug/${dir}`);
    expect(m.license).toBe(ROOT_MANIFEST.license);
    expect(m.repository).toEqual({ type: 'git', url: repoUrl, directory: `packages/${dir}` });
    expect(m.homepage).toBe(`${web}/tree/main/packages/${dir}#readme`);
    expect(m.bugs).toEqual({ url: `${web}/issues` });
    expect(m.keywords).toEqual(expect.arrayContaining(['csi', 'csiplug']));
    expect(m.publishConfig).toEqual({ access: 'public' });
    expect(m.files).toEqual(expect.arrayContaining(['dist', 'src', 'README.md', 'LICENSE']));
  });

  it('share one version, and pin each other to it (a fixed release group)', () => {
    const version = groupVersion();
    expect(version).toMatch(/^\d+\.\d+\.\d+$/);
    for (const m of MANIFESTS.values()) {
      for (const [dep, range] of Object.entries({ ...m.dependencies, ...m.optionalDependencies, ...m.devDependencies })) {
        if (dep.startsWith('@csiplug/')) expect(`${m.name} → ${dep}@${range}`).toBe(`${m.name} → ${dep}@${version}`);
      }
    }
  });

  it('the agent needs the hostpath plugin (a test plugin) only for its demo: an optional dependency, not a dependency', () => {
    const agent = MANIFESTS.get('agent')!;
    expect(agent.dependencies?.['@csiplug/hostpath-plugin']).toBeUndefined();
    expect(agent.optionalDependencies?.['@csiplug/hostpath-plugin']).toBe(groupVersion());
  });

  it('CHANGELOG.md has an entry for that version', () => {
    const changelog = fs.readFileSync(path.join(ROOT, 'CHANGELOG.md'), 'utf8');
    const headings = changelog.split('\n').filter((l) => l.startsWith('## '));
    expect(headings).toContainEqual(expect.stringMatching(new RegExp(`^## ${groupVersion().replace(/\./g, '\\.')}(?![\\w.-])`)));
  });
});

describe('tsyringe is one shared peer', () => {
  const usesTsyringe = DIRS.filter((dir) =>
    walk(path.join(PACKAGES, dir, 'src'))
      .filter((f) => f.endsWith('.ts') && !f.endsWith('.spec.ts'))
      .some((f) => /from 'tsyringe'/.test(fs.readFileSync(path.join(PACKAGES, dir, 'src', f), 'utf8'))),
  );

  it('is imported by the packages (else this test checks nothing)', () => {
    expect(usesTsyringe.length).toBeGreaterThan(0);
  });

  it.each(DIRS)('packages/%s: a peer where it is used, never a dependency', (dir) => {
    const m = MANIFESTS.get(dir)!;
    expect(m.dependencies?.tsyringe).toBeUndefined();
    if (usesTsyringe.includes(dir)) expect(m.peerDependencies?.tsyringe).toBe(ROOT_MANIFEST.devDependencies?.tsyringe);
  });

  it('resolves to one copy from every package in the workspace', () => {
    const copies = new Set(DIRS.map((dir) => fs.realpathSync(require.resolve('tsyringe', { paths: [path.join(PACKAGES, dir)] }))));
    expect(copies.size).toBe(1);
  });

  it('leaves reflect-metadata a dependency of @csiplug/core, which loads it', () => {
    expect(MANIFESTS.get('core')!.dependencies?.['reflect-metadata']).toBeDefined();
  });
});

describe('@types/node', () => {
  // Names a .d.ts can use only with Node's types: its modules, and its globals
  // that lib ES2022 lacks.
  const nodeModules = builtinModules.filter((m) => !m.startsWith('_')).map((m) => m.replace(/[/]/g, '\\/'));
  const NODE_TYPES = new RegExp(
    [
      `from '(?:node:)?(?:${nodeModules.join('|')})'`,
      `reference types="node"`,
      `\\b(?:Buffer|NodeJS\\.|AbortSignal|AbortController|setTimeout|setInterval|setImmediate|TextEncoder|TextDecoder|EventTarget)\\b`,
    ].join('|'),
  );
  const ownUse = (dir: string): boolean => {
    const files = walk(path.join(PACKAGES, dir, 'dist')).filter((f) => f.endsWith('.d.ts'));
    if (files.length === 0) throw new Error(`packages/${dir}/dist has no .d.ts: build it first (npm run build)`);
    return files.some((f) => NODE_TYPES.test(fs.readFileSync(path.join(PACKAGES, dir, 'dist', f), 'utf8')));
  };
  const needs = new Map<string, boolean>();
  const needsNodeTypes = (dir: string): boolean => {
    if (!needs.has(dir)) {
      const deps = Object.keys(MANIFESTS.get(dir)!.dependencies ?? {}).filter((d) => d.startsWith('@csiplug/'));
      needs.set(dir, ownUse(dir) || deps.some((d) => needsNodeTypes(d.slice('@csiplug/'.length))));
    }
    return needs.get(dir)!;
  };

  it.each(DIRS)("packages/%s: an optional peer exactly when its types (or a dependency's) use Node's", (dir) => {
    const m = MANIFESTS.get(dir)!;
    if (needsNodeTypes(dir)) {
      expect(m.peerDependencies?.['@types/node']).toBeDefined();
      expect(m.peerDependenciesMeta?.['@types/node']).toEqual({ optional: true });
    } else {
      expect(m.peerDependencies?.['@types/node']).toBeUndefined();
    }
  });
});

describe('tarballs', () => {
  const license = fs.readFileSync(path.join(ROOT, 'LICENSE'));
  const packed = new Map<string, Set<string>>();

  beforeAll(async () => {
    // One at a time: npm pack is cheap, the machine may be small.
    for (const dir of DIRS) {
      const { stdout } = await run('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
        cwd: path.join(PACKAGES, dir),
        env: childEnv(),
      });
      const [result] = JSON.parse(stdout) as [{ files: { path: string }[] }];
      packed.set(dir, new Set(result.files.map((f) => f.path)));
    }
  }, 120_000);

  it('the repository carries the MPL-2.0 text', () => {
    expect(license.toString('utf8')).toMatch(/^Mozilla Public License Version 2\.0\n/);
    expect(ROOT_MANIFEST.license).toBe('MPL-2.0');
  });

  it.each(DIRS)('@csiplug/%s: LICENSE (the root one), README.md, its bins, no spec file', (dir) => {
    const files = packed.get(dir)!;
    expect(files.has('LICENSE')).toBe(true);
    expect(fs.readFileSync(path.join(PACKAGES, dir, 'LICENSE')).equals(license)).toBe(true);
    expect(files.has('README.md')).toBe(true);
    for (const target of Object.values(MANIFESTS.get(dir)!.bin ?? {})) expect(files.has(path.normalize(target))).toBe(true);
    expect([...files].filter((f) => f.includes('.spec.'))).toEqual([]);
  });

  it.each(DIRS)('@csiplug/%s: every source map it ships names files it ships', (dir) => {
    const files = packed.get(dir)!;
    const maps = [...files].filter((f) => f.endsWith('.map'));
    expect(maps.length).toBeGreaterThan(0);
    const missing: string[] = [];
    for (const file of maps) {
      const map = JSON.parse(fs.readFileSync(path.join(PACKAGES, dir, file), 'utf8')) as { sources: string[]; sourceRoot?: string };
      for (const source of map.sources) {
        const target = path.normalize(path.join(path.dirname(file), map.sourceRoot ?? '', source));
        if (!files.has(target)) missing.push(`${file} → ${source}`);
      }
    }
    expect(missing).toEqual([]);
  });
});

describe('bins after npm ci', () => {
  const bins = [...MANIFESTS].flatMap(([dir, m]) => Object.entries(m.bin ?? {}).map(([name, target]) => ({ dir, name, target })));

  it('exist (else this test checks nothing)', () => {
    expect(bins.map((b) => b.name).sort()).toEqual(expect.arrayContaining(['csiplug', 'csiplug-hostpath']));
  });

  it.each(bins)('$name points at a shipped file, not at dist/, so npm links it before any build', ({ dir, name, target }) => {
    expect(target.startsWith('./dist/')).toBe(false);
    expect(fs.realpathSync(path.join(ROOT, 'node_modules', '.bin', name))).toBe(fs.realpathSync(path.join(PACKAGES, dir, target)));
  });

  (GIT.ok ? it.each(bins) : it.skip.each(bins))('$name is committed, so a fresh clone has it (git)', ({ dir, target }) => {
    const tracked = execFileSync('git', ['ls-files', '--', path.join('packages', dir, target)], { cwd: ROOT, encoding: 'utf8' });
    expect(tracked.trim()).toBe(path.join('packages', dir, path.normalize(target)));
  });

  it.each(bins)('npx --no-install $name --help prints its usage and exits 0', async ({ name }) => {
    const { stdout } = await run('npx', ['--no-install', name, '--help'], { cwd: ROOT, env: childEnv() });
    expect(stdout).toMatch(new RegExp(`^usage: ${name}\\b`, 'im'));
  });

  it.each(bins)('$name, before a build, says to run npm run build (exit 1)', async ({ dir, name, target }) => {
    // The shim alone in a package dir with no dist/ beside it: a fresh clone after npm ci.
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-bin-'));
    try {
      const copy = path.join(tmp, target);
      fs.mkdirSync(path.dirname(copy), { recursive: true });
      fs.copyFileSync(path.join(PACKAGES, dir, target), copy);
      const failed = await run(process.execPath, [copy, '--help']).then(
        () => undefined,
        (err: { code?: number; stderr?: string }) => err,
      );
      expect(failed?.code).toBe(1);
      expect(failed?.stderr).toContain(`${name}: `);
      expect(failed?.stderr).toContain('run `npm run build`');
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
});

describe('npm run release:dry-run', () => {
  /** What a release could write: every manifest, the lock file, the changelog, nx.json. */
  const touchable = [
    'package.json',
    'package-lock.json',
    'nx.json',
    'CHANGELOG.md',
    ...DIRS.map((d) => path.join('packages', d, 'package.json')),
  ];
  const hashes = () =>
    Object.fromEntries(
      touchable.map((f) => [
        f,
        crypto
          .createHash('sha256')
          .update(fs.readFileSync(path.join(ROOT, f)))
          .digest('hex'),
      ]),
    );
  // What git holds that a release would add to: the index (only the files a release
  // writes: other work may be staged meanwhile), the tags. Nothing without a work tree.
  const gitState = async () => {
    if (!GIT.ok) return undefined;
    const git = async (...args: string[]) => (await run('git', args, { cwd: ROOT })).stdout;
    return { staged: await git('diff', '--cached', '--name-only', '--', ...touchable), tags: await git('tag', '--list') };
  };

  it('versions every package together, and changes, stages, commits and tags nothing', async () => {
    const [major, minor, patch] = groupVersion().split('.').map(Number);
    const next = `${major}.${minor}.${patch! + 1}`;
    const before = { files: hashes(), git: await gitState() };
    const { stdout, stderr } = await run('npm', ['run', '--silent', 'release:dry-run', '--', 'patch'], {
      cwd: ROOT,
      env: childEnv(),
      maxBuffer: 16 * 1024 * 1024,
    });
    const output = stdout + stderr;
    for (const dir of DIRS) expect(output).toContain(`New version ${next} written to manifest: packages/${dir}/package.json`);
    expect(output).toContain('The "dryRun" flag means no changes were made');
    expect({ files: hashes(), git: await gitState() }).toEqual(before);
    if (GIT.ok) {
      const subjects = (await run('git', ['log', '-n', '20', '--format=%s'], { cwd: ROOT })).stdout;
      expect(subjects).not.toContain(`Release ${next}`);
    }
  }, 120_000);
});
