// Every fenced code block in packages/*/README.md, in the root README.md and
// ARCHITECTURE.md, and in docs/*.md is tested, so the pages cannot drift from
// the code. By the fence's language:
//
// - ```ts: type-checked against the built packages (the repository's strict
//   settings, with the published .d.ts files checked too and no
//   esModuleInterop, as a user's project may be), then run in a fresh node
//   process that must exit 0 on its own (a handle left open is a timeout).
//   Imports are the block's own; top-level await works; jest's globals are
//   declared only for a jest test, marked `typecheck (a jest test: where
//   it runs)`. Names a block uses without making them are givens, named
//   in the marker: dataDir, tmpDir (fresh dirs), signal, log, allocId,
//   publishContext, stateDb (a memory ClientStateDB), makeCsiClient,
//   endpoint / socketPath (a real hostpath plugin process on a unix
//   socket; as root), externalId (a volume created on it). `prints
//   "text"`: stdout must contain it. A run's process group is killed at
//   its limit (30 s).
// - ```js: run with node, the same way.
// - ```sh: run only when marked `run` (fast, safe, no agent): bash -e in a
//   temp dir holding a copy of examples/ (its files, and examples/ itself
//   as in the repository's root), `csiplug` and `csiplug-hostpath`
//   on the PATH and in its node_modules/.bin (so `npx csiplug` finds them,
//   as in a project that installed them; npm is offline: never a registry).
// - ```hcl / ```json: parsed by the agent's own parser, named in the
//   marker: agent-config (read as with -dev, so data_dir may be left out),
//   jobspec, volume-spec, or job-fragment (a block placed in a job with one
//   group and task, such as `update {}`).
// - ```text: output, diagrams, log lines; never run.
//
// A block that cannot be tested says why, in an HTML comment alone on the
// line before its fence: `<!-- readme-test: skip (needs a running agent) -->`,
// or `<!-- readme-test: typecheck (why it cannot run); given taskCtx -->`
// for TypeScript that is only type-checked. Directives are separated by `;`.
// An unmarked block this test cannot run, a skip without a reason, or a
// marker without a block fails the first test. Every relative link on these
// pages must lead to a file that exists.
import { mountsUnder } from '@csiplug/csimanager';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { parseAgentConfig, parseJobspec, parseVolumeSpec } from '@csiplug/jobspec';
import {
  REPO,
  brokenRelativeLinks,
  checkGivens,
  compileBlocks,
  createVolume,
  extractBlocks,
  generateModule,
  GIVENS,
  packageBin,
  testedMarkdown,
  planBlock,
  runProcess,
  startHostpathPlugin,
  where,
  type Block,
  type BlockModule,
  type Plan,
  type PluginProcess,
  type Preparation,
} from './support/readme-blocks';
import { requireRoot } from '@csiplug/core/testing';

/** Each run's limit, at which its process group is killed; a block's own waits (the `signal` given) end sooner. */
const RUN_LIMIT_MS = 30_000;
/**
 * A run's test: its run limit, plus the hostpath plugin's start (15 s at
 * most) and stop (5 s), a volume's creation and the mount cleanup. Well above
 * the limit, so a block that hangs is failed by the limit, with its output,
 * after its group is killed and its plugin stopped: never by jest's timeout
 * while those still run.
 */
const RUN_TEST_TIMEOUT_MS = RUN_LIMIT_MS + 45_000;

const extracted = testedMarkdown().map((file) => extractBlocks(file, fs.readFileSync(path.join(REPO, file), 'utf8')));
const planned = extracted.flatMap((e) => e.blocks).map((block) => ({ block, plan: planBlock(block) }));
const ok = planned.filter((p): p is { block: Block; plan: Plan } => typeof p.plan !== 'string');
const of = <K extends Plan['kind']>(kind: K) =>
  ok.filter((p): p is { block: Block; plan: Extract<Plan, { kind: K }> } => p.plan.kind === kind);
const tsBlocks = of('ts').filter((p) => checkGivens(p.plan) === undefined);

/** `it.each` over `entries`, titled by README location, each with `timeoutMs` (jest's own when undefined); nothing when there are none (it.each refuses an empty table). */
function eachBlock<T extends { block: Block }>(
  test: jest.It,
  entries: T[],
  title: string,
  timeoutMs: number | undefined,
  fn: (entry: T) => Promise<void>,
): void {
  if (entries.length) test.each(entries.map((e) => [where(e.block), e] as [string, T]))(`%s ${title}`, (_, entry) => fn(entry), timeoutMs);
}

describe('README code blocks', () => {
  let work: string;
  let compileErrors: string[] = [];
  const emitted = new Map<Block, string>();

  beforeAll(() => {
    // Outside the repository, so no other tool sees the generated files; node_modules
    // is linked in, so `@csiplug/*` resolves to the built packages as in a user's project.
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-readme-'));
    fs.symlinkSync(path.join(REPO, 'node_modules'), path.join(work, 'node_modules'), 'dir');
    const src = path.join(work, 'src');
    const out = path.join(work, 'out');
    fs.mkdirSync(src);
    const files = new Map<string, BlockModule>();
    tsBlocks.forEach(({ block, plan }, i) => {
      const name = `block-${i}-${path.basename(path.dirname(block.file))}-${block.line}`;
      const module = generateModule(block, plan.givens);
      const file = path.join(src, `${name}.ts`);
      fs.writeFileSync(file, module.text);
      files.set(file, { block, module, jest: plan.jest });
      emitted.set(block, path.join(out, `${name}.js`));
    });
    compileErrors = files.size ? compileBlocks(files, src, out) : [];
  }, 60_000);

  afterAll(() => {
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  it('every block is run, type-checked or parsed, or says why not', () => {
    const problems = [
      ...extracted.flatMap((e) => e.problems),
      ...planned.flatMap(({ block, plan }) => (typeof plan === 'string' ? [`${where(block)} (\`\`\`${block.lang}): ${plan}`] : [])),
      ...of('ts').flatMap(({ block, plan }) => {
        const problem = checkGivens(plan);
        return problem ? [`${where(block)}: ${problem}`] : [];
      }),
    ];
    expect(problems).toEqual([]);
  });

  it('every relative link on these pages leads to a file that exists', () => {
    expect(testedMarkdown().flatMap((file) => brokenRelativeLinks(file, fs.readFileSync(path.join(REPO, file), 'utf8')))).toEqual([]);
  });

  it('the TypeScript blocks type-check against the built packages', () => {
    expect(compileErrors).toEqual([]);
  });

  const runs = tsBlocks.filter((p) => p.plan.run);
  const runTs = async ({ block, plan }: (typeof runs)[number]): Promise<void> => {
    const prepares = preparations(plan.givens);
    const file = emitted.get(block)!;
    expect(fs.existsSync(file)).toBe(true);
    await inBlockDir(async (dir) => {
      const givens: Record<string, string> = {};
      let plugin: PluginProcess | undefined;
      try {
        for (const p of ['dataDir', 'tmpDir'] as const) {
          if (!prepares.has(p)) continue;
          givens[p] = path.join(dir, p);
          fs.mkdirSync(givens[p]);
        }
        if (prepares.has('plugin') || prepares.has('volume')) {
          plugin = await startHostpathPlugin(path.join(dir, 'plugin'));
          givens.endpoint = `unix://${plugin.socketPath}`;
          givens.socketPath = plugin.socketPath;
          if (prepares.has('volume')) givens.externalId = await createVolume(plugin.socketPath, 'readme-vol');
        }
        const result = await runProcess([process.execPath, file], {
          cwd: dir,
          env: { ...process.env, READMETEST_GIVENS: JSON.stringify(givens) },
          timeoutMs: RUN_LIMIT_MS,
        });
        expectClean(block, result);
        for (const text of plan.prints) expect(result.stdout).toContain(text);
      } finally {
        await plugin?.stop();
      }
    });
  };
  eachBlock(
    it,
    runs.filter((p) => !needsRoot(p.plan.givens)),
    'runs',
    RUN_TEST_TIMEOUT_MS,
    runTs,
  );
  // The hostpath plugin bind-mounts: as root only.
  eachBlock(
    it,
    runs.filter((p) => needsRoot(p.plan.givens)),
    'runs (with the hostpath plugin, as root)',
    RUN_TEST_TIMEOUT_MS,
    (entry) => {
      requireRoot();
      return runTs(entry);
    },
  );

  eachBlock(it, of('js'), 'runs', RUN_TEST_TIMEOUT_MS, async (entry) => {
    await inBlockDir(async (dir) => {
      const file = path.join(dir, 'block.js');
      fs.writeFileSync(file, entry.block.code);
      fs.symlinkSync(path.join(REPO, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
      const result = await runProcess([process.execPath, file], { cwd: dir, env: process.env, timeoutMs: RUN_LIMIT_MS });
      expectClean(entry.block, result);
      for (const text of entry.plan.prints) expect(result.stdout).toContain(text);
    });
  });

  eachBlock(it, of('sh'), 'runs', RUN_TEST_TIMEOUT_MS, async (entry) => {
    await inBlockDir(async (dir) => {
      const bin = path.join(dir, 'node_modules', '.bin');
      fs.mkdirSync(bin, { recursive: true });
      // The built CLIs, where `npm install` would put them (npx looks there), and on the PATH.
      const bins = [
        ['csiplug', packageBin(path.resolve(__dirname, '..', 'package.json'), 'csiplug')],
        ['csiplug-hostpath', packageBin(require.resolve('@csiplug/hostpath-plugin/package.json'), 'csiplug-hostpath')],
      ];
      for (const [name, script] of bins) {
        fs.writeFileSync(path.join(bin, name), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(script)} "$@"\n`, {
          mode: 0o755,
        });
      }
      // The examples beside the block (as a package README names them) and under examples/ (as the root README does, run from the repository).
      fs.cpSync(path.join(REPO, 'examples'), dir, { recursive: true });
      fs.cpSync(path.join(REPO, 'examples'), path.join(dir, 'examples'), { recursive: true });
      fs.writeFileSync(path.join(dir, '.block.sh'), entry.block.code);
      const result = await runProcess(['/bin/bash', '-e', '-o', 'pipefail', '.block.sh'], {
        cwd: dir,
        // Offline: an `npx` that does not find its command fails, never asks a registry for one.
        env: { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}`, npm_config_offline: 'true', npm_config_yes: 'false' },
        timeoutMs: RUN_LIMIT_MS,
      });
      expectClean(entry.block, result);
      for (const text of entry.plan.prints) expect(result.stdout).toContain(text);
    });
  });

  eachBlock(it, of('spec'), 'parses', undefined, async ({ block, plan }) => {
    // The name says where a parse error comes from; its extension picks HCL or JSON.
    const name = `${where(block)}.${block.lang}`;
    switch (plan.spec) {
      case 'agent-config':
        // As `csiplug agent -dev -config FILE` reads it: a block may leave data_dir out.
        await parseAgentConfig(block.code, name, { dev: true });
        break;
      case 'jobspec':
        await parseJobspec(block.code, name);
        break;
      case 'volume-spec':
        await parseVolumeSpec(block.code, name);
        break;
      case 'job-fragment': {
        if (block.lang !== 'hcl') throw new Error(`${where(block)}: job-fragment is for HCL blocks`);
        const job = `job "readme" {\n${block.code}\n  group "g" {\n    task "t" {\n      driver = "raw_exec"\n      config { command = "/bin/true" }\n    }\n  }\n}\n`;
        await parseJobspec(job, name);
        break;
      }
    }
  });
});

function preparations(givens: readonly string[]): Set<Preparation> {
  return new Set(givens.map((g) => GIVENS[g]!.prepares).filter((p): p is Preparation => p !== undefined));
}

function needsRoot(givens: readonly string[]): boolean {
  const p = preparations(givens);
  return p.has('plugin') || p.has('volume');
}

/**
 * A fresh dir for one run. Afterwards nothing may be mounted under it: what
 * is gets unmounted (lazily only when a plain unmount fails) and fails the
 * test. The dir is removed only once nothing is mounted below it, so a
 * removal never reaches through a mount into what it shows. When the run and
 * the cleanup both fail, both errors are thrown (an AggregateError): the
 * cleanup's never hides the run's.
 */
async function inBlockDir(body: (dir: string) => Promise<void>): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-readme-run-'));
  let failure: { error: unknown } | undefined;
  try {
    await body(dir);
  } catch (error) {
    failure = { error };
  }
  let cleanupFailure: { error: unknown } | undefined;
  try {
    cleanUpBlockDir(dir);
  } catch (error) {
    cleanupFailure = { error };
  }
  if (failure && cleanupFailure) {
    const errors = [failure.error, cleanupFailure.error];
    throw new AggregateError(
      errors,
      `the run failed, and so did its cleanup:\n${errors.map((e) => `- ${e instanceof Error ? e.message : String(e)}`).join('\n')}`,
    );
  }
  if (failure) throw failure.error;
  if (cleanupFailure) throw cleanupFailure.error;
}

function cleanUpBlockDir(dir: string): void {
  const left = mountsUnder(dir).sort((a, b) => b.length - a.length);
  const unmountErrors: string[] = [];
  for (const m of left) {
    try {
      execFileSync('umount', [m], { stdio: 'pipe' });
    } catch {
      try {
        execFileSync('umount', ['-l', m], { stdio: 'pipe' });
      } catch (err) {
        unmountErrors.push(`umount -l ${m}: ${(err as { stderr?: Buffer }).stderr?.toString().trim() || String(err)}`);
      }
    }
  }
  const still = mountsUnder(dir);
  if (still.length === 0) fs.rmSync(dir, { recursive: true, force: true });
  if (left.length) {
    throw new Error(
      `the block left mounts behind: ${left.join(', ')}; ${still.length ? `still mounted, ${dir} kept: ${still.join(', ')}` : 'unmounted now'}${unmountErrors.length ? ` (${unmountErrors.join('; ')})` : ''}`,
    );
  }
}

/** Whether `pid` is a live process (a zombie no one has reaped yet counts as ended). */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

function expectClean(block: Block, result: Awaited<ReturnType<typeof runProcess>>): void {
  const output = `--- stdout\n${result.stdout}--- stderr\n${result.stderr}`;
  if (result.timedOut)
    throw new Error(
      `${where(block)} did not end within ${RUN_LIMIT_MS / 1000} s (a wait that never ends, or a handle left open: a client or state not disposed)\n${output}`,
    );
  if (result.code !== 0) throw new Error(`${where(block)} exited with ${result.code ?? result.signal}\n${output}`);
}

describe('the README checker itself', () => {
  const problemsOf = (markdown: string): string[] => {
    const { blocks, problems } = extractBlocks('README.md', markdown);
    return [
      ...problems,
      ...blocks.flatMap((b) => {
        const plan = planBlock(b);
        if (typeof plan === 'string') return [`${where(b)}: ${plan}`];
        const given = plan.kind === 'ts' ? checkGivens(plan) : undefined;
        return given ? [`${where(b)}: ${given}`] : [];
      }),
    ];
  };

  it('refuses what it cannot test, and reasonless skips', () => {
    expect(problemsOf('```sh\nls\n```\n')).toEqual([expect.stringContaining('README.md:1: a shell block is run only when marked')]);
    expect(problemsOf('```hcl\njob "x" {}\n```\n')).toEqual([expect.stringContaining('README.md:1: an hcl block says what it is')]);
    expect(problemsOf('```\nout\n```\n')).toEqual([expect.stringContaining('names its language')]);
    expect(problemsOf('```yaml\na: 1\n```\n')).toEqual([expect.stringContaining('mark it <!-- readme-test: skip (why) -->')]);
    expect(problemsOf('<!-- readme-test: skip -->\n```sh\nls\n```\n')).toEqual([expect.stringContaining('"skip" needs a reason')]);
    expect(problemsOf('<!-- readme-test: typecheck () -->\n```ts\nlet a = 1;\n```\n')).toEqual([
      expect.stringContaining('"typecheck" needs a reason'),
    ]);
    expect(problemsOf('<!-- readme-test: frobnicate -->\n```ts\nlet a = 1;\n```\n')).toEqual([
      expect.stringContaining('unknown directive "frobnicate"'),
    ]);
    expect(problemsOf('<!-- readme-test: run -->\n```hcl\nx = 1\n```\n')).toEqual([
      expect.stringContaining('an hcl block says what it is'),
    ]);
    expect(problemsOf('<!-- readme-test: jobspec; run -->\n```hcl\nx = 1\n```\n')).toEqual([
      expect.stringContaining('run does not apply to a ```hcl block'),
    ]);
  });

  it('refuses a marker that belongs to no block, and a block never closed', () => {
    expect(problemsOf('<!-- readme-test: skip (why) -->\nSome prose.\n\n```text\nx\n```\n')).toEqual([
      'README.md:1: readme-test marker not followed by a code block',
    ]);
    expect(problemsOf('text\n<!-- readme-test: skip (why) -->\n')).toEqual([
      'README.md:2: readme-test marker not followed by a code block',
    ]);
    expect(problemsOf('<!-- readme-test skip (why) -->\n```text\nx\n```\n')).toEqual([
      expect.stringContaining('README.md:1: malformed readme-test marker'),
    ]);
    expect(problemsOf('```ts\nlet a = 1;\n')).toEqual(['README.md:1: code block never closed']);
  });

  it('refuses givens it does not know, and type-only givens in a block that runs', () => {
    expect(problemsOf('<!-- readme-test: given nodeName -->\n```ts\nnodeName;\n```\n')).toEqual([
      expect.stringContaining('unknown given nodeName'),
    ]);
    expect(problemsOf('<!-- readme-test: given taskCtx -->\n```ts\ntaskCtx;\n```\n')).toEqual([
      expect.stringContaining('given taskCtx has no value at run time'),
    ]);
    expect(problemsOf('<!-- readme-test: typecheck (needs a task); given taskCtx -->\n```ts\ntaskCtx;\n```\n')).toEqual([]);
  });

  it('reads markers across blank lines and list indentation, with ; and quotes inside reasons and prints', () => {
    const { blocks } = extractBlocks(
      'README.md',
      '- item\n\n  <!-- readme-test: skip (a; b) -->\n\n  ```sh\n  csiplug agent\n    indented\n  ```\n<!-- readme-test: run; prints "say \\"hi\\"; bye" -->\n```sh\necho\n```\n',
    );
    expect(blocks.map((b) => [b.line, b.code])).toEqual([
      [5, 'csiplug agent\n  indented\n'],
      [10, 'echo\n'],
    ]);
    expect(planBlock(blocks[0]!)).toEqual({ kind: 'skip', reason: 'a; b' });
    expect(planBlock(blocks[1]!)).toEqual({ kind: 'sh', prints: ['say "hi"; bye'] });
  });

  it("declares jest's globals only for a block marked as a jest test", () => {
    const markdown = [
      '<!-- readme-test: typecheck (a jest test: src/x.spec.ts runs it) -->',
      '```ts',
      "describe('x', () => it('y', () => expect(1).toBe(1)));",
      '```',
      '<!-- readme-test: typecheck (needs a task) -->',
      '```ts',
      "describe('x', () => undefined);",
      '```',
      '',
    ].join('\n');
    const { blocks } = extractBlocks('README.md', markdown);
    const plans = blocks.map((b) => planBlock(b) as Extract<Plan, { kind: 'ts' }>);
    expect(plans.map((p) => p.jest)).toEqual([true, false]);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-readme-check-'));
    try {
      const src = path.join(dir, 'src');
      fs.mkdirSync(src);
      const files = new Map<string, BlockModule>();
      blocks.forEach((block, i) => {
        const module = generateModule(block, []);
        fs.writeFileSync(path.join(src, `b${i}.ts`), module.text);
        files.set(path.join(src, `b${i}.ts`), { block, module, jest: plans[i]!.jest });
      });
      expect(compileBlocks(files, src, path.join(dir, 'out'))).toEqual([
        expect.stringMatching(/^README\.md:7 TS\d+: Cannot find name 'describe'/),
      ]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it("kills a run's whole process group at its limit", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-readme-check-'));
    try {
      // A child in the background that would outlive its shell, and a shell that never ends.
      const result = await runProcess(['/bin/sh', '-c', 'sleep 300 & echo $!; wait'], { cwd: dir, env: process.env, timeoutMs: 1_000 });
      expect(result.timedOut).toBe(true);
      expect(result.signal).toBe('SIGKILL');
      const background = Number(result.stdout.trim());
      expect(background).toBeGreaterThan(0);
      expect(alive(background)).toBe(false);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("throws both the run's error and the cleanup's when both fail (as root: a mount left behind)", async () => {
    requireRoot();
    let dir = '';
    const failed = await inBlockDir(async (d) => {
      dir = d;
      fs.mkdirSync(path.join(d, 'm'));
      execFileSync('mount', ['-t', 'tmpfs', 'readme-check', path.join(d, 'm')]);
      throw new Error('the block failed');
    }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failed).toBeInstanceOf(AggregateError);
    const messages = (failed as AggregateError).errors.map((e: Error) => e.message);
    expect(messages).toEqual(['the block failed', expect.stringContaining(`the block left mounts behind: ${path.join(dir, 'm')}`)]);
    expect(fs.existsSync(dir)).toBe(false);
  });

  it('finds a relative link whose file is missing, and only that', () => {
    const markdown = [
      '[here](ARCHITECTURE.md) [`there`](docs/nowhere.md#part) [web](https://example.com/x) [same](#top)',
      '`[not a link](missing.md)`',
      '```text',
      '[in a block](missing.md)',
      '```',
      '[gone](packages/gone/README.md)',
      '',
    ].join('\n');
    expect(brokenRelativeLinks('README.md', markdown)).toEqual([
      'README.md:1: docs/nowhere.md#part',
      'README.md:6: packages/gone/README.md',
    ]);
  });

  it('maps a generated TypeScript line back to its README line', () => {
    const block: Block = {
      file: 'README.md',
      line: 10,
      lang: 'ts',
      code: "import { bind } from '@csiplug/core';\n\nconst x: number = 'not a number';\nbind;\n",
      marker: 'given dataDir',
    };
    const { text, lines } = generateModule(block, ['dataDir']);
    const generated = text.split('\n');
    expect(lines[generated.indexOf("import { bind } from '@csiplug/core';")]).toBe(11);
    expect(lines[generated.indexOf("const x: number = 'not a number';")]).toBe(13);
    expect(lines[generated.indexOf("const dataDir: string = $given('dataDir');")]).toBeUndefined();
    // The import left the body: a blank line holds its place.
    expect(generated.filter((l) => l.includes('import { bind }'))).toHaveLength(1);
  });
});
