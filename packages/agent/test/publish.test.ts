// A real publish, as a user meets it: a private npm registry (verdaccio) on
// loopback, every package under packages/* published to it with `nx release
// publish`, then, in an empty project that knows only that registry:
// - `@csiplug/registry` installed as its README says (the `npm install` line
//   and the runnable TypeScript example are read from the README, not copied,
//   so the README stays true), and the example run;
// - `@csiplug/agent` installed (in the same project) without its optional dependencies, where
//   `csiplug demo` must say to install @csiplug/hostpath-plugin; then with it,
//   where `npx csiplug demo` runs to completion (real runc tasks, as root).
// The registry serves @csiplug/* only from what was published here (no
// uplink) and proxies the public npm registry for everything else (tsyringe,
// grpc, better-sqlite3…), so this test needs the network, root and runc, as
// `npm test` has them. Every process it starts runs in its own process group
// and is killed at the end; every mount left under its dirs is unmounted.
// Everything it makes is under its own work dir — the demo's data dir too
// (TMPDIR) — so its cleanup touches nothing of another test's, whatever runs
// beside it. It publishes what the build made (npm test builds first) and
// never rebuilds: other test files read the packages' dist/ meanwhile.
// Slow by nature (a publish, three installs, the demo): the limits are
// generous and nothing asserts a duration.
import { mountsUnder } from '@csiplug/csimanager';
import { DEFAULT_RUNC_ROOT, findRunc } from '@csiplug/driver';
import { pluginSocketPath } from '@csiplug/hooks';
import { type ChildProcess, execFileSync, spawn } from 'child_process';
import { randomUUID } from 'crypto';
import * as fs from 'fs';
import * as http from 'http';
import * as os from 'os';
import * as path from 'path';
import * as ts from 'typescript';
import { freePort } from '../src/commands/host';
import {
  extractBlocks,
  generateModule,
  planBlock,
  runProcess,
  startHostpathPlugin,
  type Block,
  type PluginProcess,
} from './support/readme-blocks';

const ROOT = path.resolve(__dirname, '..', '..', '..');
const PACKAGES = path.join(ROOT, 'packages');
/** Every package, found as nx release finds them (`packages/*` with a manifest): the list grows as packages are added. */
const DIRS = fs.readdirSync(PACKAGES).filter((d) => fs.existsSync(path.join(PACKAGES, d, 'package.json')));
const MANIFESTS = new Map(
  DIRS.map((d) => [d, JSON.parse(fs.readFileSync(path.join(PACKAGES, d, 'package.json'), 'utf8')) as { name: string; version: string }]),
);

/** A step's limit, at which its process group is killed: a build and an install through a proxy are slow on a loaded 2-core machine. */
const STEP_LIMIT_MS = 15 * 60_000;
const TEST_TIMEOUT_MS = 40 * 60_000;

/** The test's own dirs (registry storage, npm config, projects), removed at the end. */
const WORK = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-publish-'));
const NPMRC = path.join(WORK, 'npmrc');
let registryUrl = '';
let registry: ChildProcess | undefined;
let registryLog = '';

/** A unix socket's path has room for 107 bytes (sun_path, its NUL aside). */
const SOCKET_PATH_MAX = 107;

/**
 * The demo's TMPDIR: the work dir itself, so its data dir (mkdtemp
 * `csiplug-demo-XXXXXX` there, commands/demo.ts), its mounts and its
 * executors are this test's alone. Checked against the longest socket the
 * demo makes, a plugin's (`<data dir>/data/plugins/<alloc id>/csi.sock`):
 * a temp dir too deep for it fails here, saying so, not as a plugin that
 * never comes up.
 */
function demoTmpDir(): string {
  const longest = pluginSocketPath(path.join(WORK, 'csiplug-demo-XXXXXX', 'data'), randomUUID());
  if (Buffer.byteLength(longest) > SOCKET_PATH_MAX)
    throw new Error(
      `the demo's plugin socket under this test's work dir would be ${Buffer.byteLength(longest)} bytes (${longest}), over the ${SOCKET_PATH_MAX} a unix socket path may have: set TMPDIR to a shorter dir (${WORK} is under it)`,
    );
  return WORK;
}

/**
 * The environment for npm, npx and nx: without the variables npm sets for
 * the script this test runs under (npm_config_userconfig, npm_config_local_prefix…,
 * which would win over the test's npm config or place the project in the
 * repository) and nx's task variables; with the test's npm config. A
 * variable the machine sets itself (NPM_CONFIG_…, upper case) stays,
 * except the two the test decides.
 */
function childEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) => !k.startsWith('npm_') && !/^NPM_CONFIG_(USERCONFIG|REGISTRY)$/i.test(k) && !k.startsWith('NX_'),
    ),
  );
  return {
    ...env,
    npm_config_userconfig: NPMRC,
    npm_config_update_notifier: 'false',
    npm_config_fund: 'false',
    npm_config_audit: 'false',
    ...extra,
  };
}

/**
 * The test's npm config: the machine's own user config (its CA file, proxy,
 * `nodedir` for native builds…) without its registry lines, then the
 * private registry and a token for it (any token: the registry lets anyone
 * publish @csiplug/*).
 */
function npmrcText(port: number): string {
  const own = (() => {
    try {
      const file = execFileSync('npm', ['config', 'get', 'userconfig'], {
        cwd: WORK,
        encoding: 'utf8',
        env: childEnv({ npm_config_userconfig: undefined }),
      }).trim();
      return fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
    } catch {
      return '';
    }
  })();
  const kept = own.split('\n').filter((l) => !/^\s*(@[^:]+:)?registry\s*=/.test(l) && !/_authToken|_auth\b|_password/.test(l));
  return [...kept, `registry=http://127.0.0.1:${port}/`, `//127.0.0.1:${port}/:_authToken=csiplug-publish-test`, ''].join('\n');
}

/** Runs a command to its end (killed at the step limit); throws with its output when it fails. */
async function step(
  what: string,
  argv: readonly string[],
  cwd: string,
  env: NodeJS.ProcessEnv = childEnv(),
): Promise<{ stdout: string; stderr: string }> {
  const r = await runProcess(argv, { cwd, env, timeoutMs: STEP_LIMIT_MS });
  if (r.code !== 0) {
    throw new Error(
      `${what} (${argv.join(' ')}, in ${cwd}) ${r.timedOut ? `was killed at its limit of ${STEP_LIMIT_MS / 60_000} min` : `exited ${r.code ?? r.signal}`}:\n${r.stdout.slice(-12000)}\n${r.stderr.slice(-12000)}`,
    );
  }
  return r;
}

function get(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on('error', reject);
  });
}

/**
 * The user's project: empty at first, shared by the install tests in the
 * order they run (the registry's user, then the agent's), so the native
 * dependencies (better-sqlite3, built from source where no prebuilt binary
 * can be fetched) are built once, not once a test.
 */
let madeProject: string | undefined;
function userProjectDir(): string {
  if (madeProject) return madeProject;
  const dir = path.join(WORK, 'user');
  fs.mkdirSync(dir);
  fs.writeFileSync(
    path.join(dir, 'package.json'),
    JSON.stringify({ name: 'csiplug-publish-user', version: '1.0.0', private: true }, null, 2),
  );
  madeProject = dir;
  return dir;
}

beforeAll(async () => {
  const port = await freePort();
  registryUrl = `http://127.0.0.1:${port}/`;
  // @csiplug/* from this registry's storage only (no proxy: a name on the public registry never stands in for what was
  // published here); anything else proxied from the public registry. Publishing needs a token, any token: $all may publish.
  fs.writeFileSync(
    path.join(WORK, 'verdaccio.yaml'),
    [
      `storage: ${JSON.stringify(path.join(WORK, 'storage'))}`,
      'auth:',
      '  htpasswd:',
      `    file: ${JSON.stringify(path.join(WORK, 'htpasswd'))}`,
      '    max_users: -1',
      'uplinks:',
      '  npmjs:',
      '    url: https://registry.npmjs.org/',
      '    timeout: 120s',
      'packages:',
      "  '@csiplug/*':",
      '    access: $all',
      '    publish: $all',
      "  '**':",
      '    access: $all',
      '    proxy: npmjs',
      'web:',
      '  enable: false',
      // The agent's tarball carries its UI and sources: more than the default 10 MB body limit allows for, some day.
      'max_body_size: 200mb',
      'log: { type: stdout, format: pretty, level: warn }',
      '',
    ].join('\n'),
  );
  fs.writeFileSync(NPMRC, npmrcText(port));
  // Its own process group, killed as a whole at the end.
  registry = spawn(
    process.execPath,
    [require.resolve('verdaccio/bin/verdaccio'), '--config', path.join(WORK, 'verdaccio.yaml'), '--listen', `127.0.0.1:${port}`],
    {
      cwd: WORK,
      env: childEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    },
  );
  registry.stdout!.on('data', (d: Buffer) => (registryLog += d.toString()));
  registry.stderr!.on('data', (d: Buffer) => (registryLog += d.toString()));
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (registry.exitCode !== null || registry.signalCode !== null)
      throw new Error(`verdaccio exited (${registry.exitCode ?? registry.signalCode}) before serving ${registryUrl}:\n${registryLog}`);
    const ping = await get(`${registryUrl}-/ping`).catch(() => undefined);
    if (ping?.status === 200) break;
    if (Date.now() > deadline) throw new Error(`verdaccio did not answer ${registryUrl}-/ping within 120 s:\n${registryLog}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}, 180_000);

afterAll(async () => {
  const problems: string[] = [];
  if (registry?.pid !== undefined && registry.exitCode === null && registry.signalCode === null) {
    const exited = new Promise<void>((resolve) => registry!.once('exit', () => resolve()));
    try {
      process.kill(-registry.pid, 'SIGTERM');
    } catch {
      registry.kill('SIGTERM');
    }
    const late = setTimeout(() => {
      try {
        process.kill(-registry!.pid!, 'SIGKILL');
      } catch {
        // the group is gone already
      }
    }, 10_000);
    await exited;
    clearTimeout(late);
  }
  // A demo killed at its limit leaves its tasks' executors (detached, their own sessions) and what they run: found by this work dir.
  problems.push(...killLeftProcesses());
  // A demo or plugin that failed half way may leave mounts: all under the work dir (the demo's data dir is there).
  const left = mountsUnder(WORK);
  for (const m of [...left].sort((a, b) => b.length - a.length)) {
    try {
      execFileSync('umount', ['-l', m], { stdio: 'pipe' });
    } catch (err) {
      problems.push(`umount -l ${m}: ${(err as { stderr?: Buffer }).stderr?.toString().trim() || String(err)}`);
    }
  }
  if (mountsUnder(WORK).length === 0) fs.rmSync(WORK, { recursive: true, force: true });
  if (problems.length) throw new Error(`cleanup failed: ${problems.join('; ')}`);
  if (left.length) throw new Error(`the test left mounts behind (unmounted now): ${left.join(', ')}`);
}, 120_000);

describe('a real publish to a private registry', () => {
  it(
    'nx release publish puts every package under packages/* on the registry, at its version',
    async () => {
      expect(DIRS.length).toBeGreaterThan(1);
      const stale = staleBuilds();
      if (stale.length)
        throw new Error(
          `built output older than its source, which this test would publish: ${stale.join('; ')}. Build first (npm test does; or NX_DAEMON=false npx nx run-many -t build): the test never rebuilds, other test files read dist/ meanwhile`,
        );
      // What the build made, as it is: without the build target nx release publish depends on (nx.json), which would rewrite dist/.
      await step(
        'nx release publish',
        [process.execPath, require.resolve('nx/bin/nx'), 'release', 'publish', '--registry', registryUrl, '--excludeTaskDependencies'],
        ROOT,
        childEnv({ NX_DAEMON: 'false', NX_NO_CLOUD: 'true' }),
      );
      const missing: string[] = [];
      for (const m of MANIFESTS.values()) {
        const r = await get(`${registryUrl}${m.name.replace('/', '%2f')}`);
        const versions = r.status === 200 ? Object.keys((JSON.parse(r.body) as { versions?: Record<string, unknown> }).versions ?? {}) : [];
        if (!versions.includes(m.version)) missing.push(`${m.name}@${m.version} (${r.status}: ${versions.join(', ') || 'no version'})`);
      }
      expect(missing).toEqual([]);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    "@csiplug/registry installs as its README says, and the README's example runs",
    async () => {
      const readme = path.join('packages', 'registry', 'README.md');
      const { blocks, problems } = extractBlocks(readme, fs.readFileSync(path.join(ROOT, readme), 'utf8'));
      expect(problems).toEqual([]);
      const install = blocks.map((b) => /^npm install (.+)$/m.exec(b.code)?.[1]?.trim()).find((args) => args !== undefined);
      if (!install) throw new Error(`${readme} has no \`npm install\` line: it says how to install the package`);
      const examples = blocks.flatMap((block) => {
        const plan = planBlock(block);
        return typeof plan !== 'string' && plan.kind === 'ts' && plan.run ? [{ block, plan }] : [];
      });
      expect(examples.length).toBeGreaterThan(0);

      const project = userProjectDir();
      // The README's line, and reflect-metadata, which its example imports first.
      await step(
        `npm install ${install} reflect-metadata`,
        ['npm', 'install', '--registry', registryUrl, ...install.split(/\s+/), 'reflect-metadata'],
        project,
      );
      expect(fs.existsSync(path.join(project, 'node_modules', '@csiplug', 'registry', 'package.json'))).toBe(true);
      const modules = examples.map(({ block, plan }) => ({ block, plan, text: generateModule(block, plan.givens).text }));
      // The test harness's givens (a CSI client for makeCsiClient…) import packages a reader has from elsewhere: installed too.
      const imported = new Set(modules.flatMap((m) => [...m.text.matchAll(/from '(@csiplug\/[^/']+)/g)].map((x) => x[1]!)));
      const absent = [...imported].filter((name) => !fs.existsSync(path.join(project, 'node_modules', name, 'package.json')));
      if (absent.length) await step(`npm install ${absent.join(' ')}`, ['npm', 'install', '--registry', registryUrl, ...absent], project);

      for (const [i, { block, plan, text }] of modules.entries()) {
        const file = path.join(project, `readme-example-${i}.js`);
        fs.writeFileSync(
          file,
          ts.transpileModule(text, {
            compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022 },
            fileName: 'block.ts',
          }).outputText,
        );
        await runExample(project, file, block, plan.givens, plan.prints);
      }
    },
    TEST_TIMEOUT_MS,
  );

  it(
    '@csiplug/agent installs; without the optional hostpath plugin the demo says to install it; with it, npx csiplug demo runs to completion',
    async () => {
      const project = userProjectDir();
      await step(
        'npm install --omit=optional @csiplug/agent tsyringe',
        ['npm', 'install', '--registry', registryUrl, '--omit=optional', '@csiplug/agent', 'tsyringe'],
        project,
      );
      expect(fs.existsSync(path.join(project, 'node_modules', '@csiplug', 'hostpath-plugin'))).toBe(false);
      const demoEnv = childEnv({ TMPDIR: demoTmpDir() });
      const without = await runProcess(['npx', '--no-install', 'csiplug', 'demo'], {
        cwd: project,
        env: demoEnv,
        timeoutMs: STEP_LIMIT_MS,
      });
      expect(without.code).toBe(1);
      expect(without.stderr).toContain('install @csiplug/hostpath-plugin');

      await step(
        'npm install @csiplug/hostpath-plugin',
        ['npm', 'install', '--registry', registryUrl, '@csiplug/hostpath-plugin'],
        project,
      );
      const r = await runProcess(['npx', '--no-install', 'csiplug', 'demo'], { cwd: project, env: demoEnv, timeoutMs: STEP_LIMIT_MS });
      if (r.code !== 0)
        throw new Error(
          `npx csiplug demo ${r.timedOut ? 'was killed at its limit' : `exited ${r.code ?? r.signal}`}:\n${r.stdout}\n${r.stderr}`,
        );
      expect(r.stdout).toMatch(/✓ workload process kept running/);
      expect(r.stdout).toMatch(/✓ volume still mounted/);
      expect(r.stdout).toMatch(/✓ file intact/);
      expect(r.stdout).toMatch(/✓ plugin re-registered/);
      expect(r.stdout).toMatch(/✓ mounts left under the data dir: 0/);
      expect(r.stdout).not.toMatch(/✗/);
    },
    TEST_TIMEOUT_MS,
  );
});

/** Runs one README example in `project` with the givens it names prepared (a real hostpath plugin for a socket), as readme-blocks.test.ts does. */
async function runExample(
  project: string,
  file: string,
  block: Block,
  givenNames: readonly string[],
  prints: readonly string[],
): Promise<void> {
  const givens: Record<string, string> = {};
  let plugin: PluginProcess | undefined;
  try {
    for (const name of ['dataDir', 'tmpDir'].filter((n) => givenNames.includes(n))) {
      givens[name] = fs.mkdtempSync(path.join(WORK, `${name}-`));
    }
    if (givenNames.includes('externalId'))
      throw new Error(`${block.file}:${block.line}: this test prepares no volume (given externalId); extend it`);
    if (givenNames.includes('socketPath') || givenNames.includes('endpoint')) {
      plugin = await startHostpathPlugin(fs.mkdtempSync(path.join(WORK, 'plugin-')));
      givens.socketPath = plugin.socketPath;
      givens.endpoint = `unix://${plugin.socketPath}`;
    }
    const r = await runProcess([process.execPath, file], {
      cwd: project,
      env: { ...childEnv(), READMETEST_GIVENS: JSON.stringify(givens) },
      timeoutMs: 120_000,
    });
    if (r.code !== 0)
      throw new Error(
        `${block.file}:${block.line}: the example ${r.timedOut ? 'was killed at its limit' : `exited ${r.code ?? r.signal}`} in ${project}:\n${r.stdout}\n${r.stderr}`,
      );
    for (const text of prints) expect(r.stdout).toContain(text);
  } finally {
    await plugin?.stop();
  }
}

/** Every file under `dir` (none when it is not there). */
function filesUnder(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .map((f) => path.join(dir, f))
    .filter((f) => fs.statSync(f).isFile());
}

/**
 * The packages whose dist/ is missing or older than a production source of
 * theirs (src/ without specs, tsconfig.lib.json): what publishing without a
 * build would ship stale. dist/ is written whole by each build (rm -rf, then
 * tsc) or by nx's cache, so its oldest file is when it was made.
 */
function staleBuilds(): string[] {
  const stale: string[] = [];
  for (const dir of DIRS) {
    const root = path.join(PACKAGES, dir);
    const built = filesUnder(path.join(root, 'dist')).map((f) => fs.statSync(f).mtimeMs);
    if (built.length === 0) {
      stale.push(`packages/${dir} has no dist/`);
      continue;
    }
    const madeAt = Math.min(...built);
    const sources = [...filesUnder(path.join(root, 'src')).filter((f) => !f.endsWith('.spec.ts')), path.join(root, 'tsconfig.lib.json')];
    const newer = sources.filter((f) => fs.existsSync(f) && fs.statSync(f).mtimeMs > madeAt);
    if (newer.length) stale.push(`packages/${dir}/dist is older than ${newer.map((f) => path.relative(ROOT, f)).join(', ')}`);
  }
  return stale;
}

/**
 * Kills what a demo cut short left running from this run: processes whose
 * command line or working dir is under the work dir (the executors: `node
 * executor.js <task dir>/…/spec.json`, detached; host-process tasks, which
 * run in their task dir), then runc containers whose bundle is there (the
 * isolated tasks). Returns what could not be done.
 */
function killLeftProcesses(): string[] {
  const problems: string[] = [];
  const under = (p: string) => p === WORK || p.startsWith(`${WORK}/`);
  for (const entry of fs.readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      const argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      const cwd = fs.readlinkSync(`/proc/${pid}/cwd`);
      if (!argv.some(under) && !under(cwd)) continue;
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone meanwhile, or a kernel thread with nothing to read
    }
  }
  const runc = findRunc();
  if (!runc) return problems;
  let containers: Array<{ id: string; bundle: string }> = [];
  try {
    const listed = execFileSync(runc, ['--root', DEFAULT_RUNC_ROOT, 'list', '--format', 'json'], { encoding: 'utf8', stdio: 'pipe' });
    containers = (JSON.parse(listed || 'null') as Array<{ id: string; bundle: string }> | null) ?? [];
  } catch (err) {
    // No runc root yet: no container was ever made here.
    if (fs.existsSync(DEFAULT_RUNC_ROOT))
      problems.push(`runc list: ${(err as { stderr?: Buffer }).stderr?.toString().trim() || String(err)}`);
  }
  for (const c of containers.filter((x) => under(x.bundle))) {
    try {
      execFileSync(runc, ['--root', DEFAULT_RUNC_ROOT, 'delete', '--force', c.id], { stdio: 'pipe' });
    } catch (err) {
      problems.push(`runc delete --force ${c.id}: ${(err as { stderr?: Buffer }).stderr?.toString().trim() || String(err)}`);
    }
  }
  return problems;
}
