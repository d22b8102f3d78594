// The CLI is light: requiring @csiplug/cli loads the API client, the jobspec
// reader and core, never gRPC, SQLite, etcd, the agent or the packages that
// run tasks and volumes, nor the API's HTTP server. Every command but
// `agent` and `demo` runs in a process that starts in a blink and holds no
// native code. The layering check keeps the CLI's own imports right; this
// test keeps what they pull in at run time right (a jobspec that imported a
// constant from @csiplug/volumes once brought gRPC in through it).
//
// Measured in a child node process (a fresh module cache, nothing of jest's
// loaded) on the built entry, as a user's require sees it: the test target
// builds the cli first.
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

interface LoadedFile {
  file: string;
  /** The npm package the file belongs to (nearest package.json with a name). */
  package: string;
  /** Its path inside that package. */
  inPackage: string;
}

interface Probe {
  entry: string;
  exports: string[];
  loaded: LoadedFile[];
  /** File → the file that first required it. */
  firstRequiredBy: Record<string, string>;
}

/** The heavy packages a CLI command must never pay for. */
const HEAVY_PACKAGES = [
  '@grpc/grpc-js',
  '@grpc/proto-loader',
  'protobufjs',
  'better-sqlite3',
  'etcd3',
  '@csiplug/agent',
  '@csiplug/volumes',
  '@csiplug/hooks',
  '@csiplug/driver',
  '@csiplug/cluster',
];

/** The @csiplug packages the CLI may load: what .dependency-cruiser.cjs lets it import, and itself. */
const CLI_MAY_LOAD = ['@csiplug/cli', '@csiplug/api', '@csiplug/jobspec', '@csiplug/core'];

/** The files of @csiplug/api's client entry (@csiplug/api/client); any other file of the api is its HTTP server's. */
const API_CLIENT_FILES = [
  'client',
  'api-client',
  'api-transport',
  'call-scope',
  'volume-api-calls',
  'csi-secrets',
  'api-error',
  'protocol',
  'service-errors',
  'service',
  'log-slice',
  // The Nomad shapes the client decodes (pure functions, no server part).
  'wire/nomad-time',
  'wire/agent-wire',
  'wire/alloc-wire',
  'wire/event-wire',
  'wire/job-wire',
  'wire/node-wire',
  'wire/plugin-wire',
  'wire/volume-wire',
].map((name) => `dist/${name}.js`);

const CLI_DIR = join(__dirname, '..');

/** Refuses to measure a stale build: a src file newer than dist/index.js would make the answer about old code. */
function assertBuilt(): void {
  const built = statSync(join(CLI_DIR, 'dist', 'index.js'), { throwIfNoEntry: false });
  if (!built)
    throw new Error(`${CLI_DIR}/dist/index.js does not exist: build the cli first (npx tsc -p tsconfig.lib.json in packages/cli)`);
  const newer = readdirSync(join(CLI_DIR, 'src')).filter(
    (name) => name.endsWith('.ts') && !name.endsWith('.spec.ts') && statSync(join(CLI_DIR, 'src', name)).mtimeMs > built.mtimeMs,
  );
  if (newer.length > 0)
    throw new Error(
      `packages/cli/dist is older than src/${newer.join(', src/')}: build the cli first (npx tsc -p tsconfig.lib.json in packages/cli)`,
    );
}

function runProbe(): Probe {
  const out = execFileSync(process.execPath, [join(__dirname, 'light-load-probe.cjs')], {
    cwd: CLI_DIR,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  return JSON.parse(out) as Probe;
}

describe('requiring @csiplug/cli', () => {
  let probe: Probe;
  const byFile = new Map<string, LoadedFile>();

  beforeAll(() => {
    assertBuilt();
    probe = runProbe();
    for (const loaded of probe.loaded) byFile.set(loaded.file, loaded);
  });

  /** `@csiplug/cli/dist/index.js → … → file`: how a file came to be loaded. */
  function chainTo(file: string): string {
    const steps: string[] = [];
    for (let at: string | undefined = file; at !== undefined && steps.length < 50; at = probe.firstRequiredBy[at]) {
      const loaded = byFile.get(at);
      steps.unshift(loaded ? `${loaded.package}/${loaded.inPackage}` : at);
      if (at === probe.entry) break;
    }
    return steps.join(' → ');
  }

  it('loads the built entry of the package, whose main runs the commands', () => {
    expect(probe.entry).toBe(join(CLI_DIR, 'dist', 'index.js'));
    expect(probe.exports).toContain('main');
    expect([...new Set(probe.loaded.map((l) => l.package))]).toEqual(expect.arrayContaining(CLI_MAY_LOAD));
  });

  it.each(HEAVY_PACKAGES)('never loads %s', (heavy) => {
    const first = probe.loaded.find((l) => l.package === heavy);
    expect(first ? chainTo(first.file) : 'not loaded').toBe('not loaded');
  });

  it('loads no @csiplug package but the api client, the jobspec and core', () => {
    const others = [...new Set(probe.loaded.map((l) => l.package))].filter(
      (name) => name.startsWith('@csiplug/') && !CLI_MAY_LOAD.includes(name),
    );
    expect(others.map((name) => chainTo(probe.loaded.find((l) => l.package === name)!.file))).toEqual([]);
  });

  it('loads of @csiplug/api its client only, never the HTTP server', () => {
    const server = probe.loaded.filter((l) => l.package === '@csiplug/api' && !API_CLIENT_FILES.includes(l.inPackage));
    expect(server.map((l) => chainTo(l.file))).toEqual([]);
  });
});
